"""The orjson codec: records <-> the JSON shape of docs/api.md ("A record"), batches <-> bytes.

Decoding never trusts its input: anything malformed raises ``DecodeError`` (a
``ValueError``) naming what is wrong, and nothing else.

This module is the plain codec: every record is encoded and decoded field by
field from its specs (``record_to_obj_plain``, ``record_from_data``). Its fast
twin is ``codec_fast.py``, one generated function per (type, version); the
public functions below take it when ``GENERATED`` is on, and the generated
decoder only vouches for the usual shape, so every error comes from here.
``tests/test_codec_fast.py`` checks that the two agree.
"""

from __future__ import annotations

import base64
import binascii
import operator
from dataclasses import MISSING
from typing import Any

import orjson

from . import codec_fast, limits
from .records import (
    INT_RANGES,
    RECORD_TYPES,
    Batch,
    Endpoint,
    EntityData,
    FeatureRange,
    Kind,
    Record,
    Voter,
    Who,
)
from .uuids import InvalidUuid, parse_uuid

BATCH_FORMAT = 1  # bumped if the batch envelope ever changes

# The one switch between the two coders: True codes records with the generated
# functions of codec_fast.py (decisions.md 25, 31), False field by field only.
# Listed with every other speed switch in metaquorum/speed_switches.py.
GENERATED = True


class DecodeError(ValueError):
    """Bytes or JSON that are not a valid metaquorum record, batch or image."""


# ---------------------------------------------------------------- encoding


def _encode_value(kind: Kind, value: Any) -> Any:
    if kind is Kind.ENDPOINTS:
        return [
            {
                "name": e.name,
                "host": e.host,
                "port": e.port,
                "securityProtocol": e.security_protocol,
            }
            for e in value
        ]
    if kind is Kind.FEATURES:
        return [
            {
                "name": f.name,
                "minSupportedVersion": f.min_supported_version,
                "maxSupportedVersion": f.max_supported_version,
            }
            for f in value
        ]
    if kind is Kind.VOTERS:
        return [
            {
                "voterId": v.voter_id,
                "voterDirectoryId": v.voter_directory_id,
                "host": v.host,
                "port": v.port,
            }
            for v in value
        ]
    if kind is Kind.QUOTA_ENTITY:
        return [{"entityType": e.entity_type, "entityName": e.entity_name} for e in value]
    if kind is Kind.BYTES:
        return base64.b64encode(value).decode("ascii")
    return value  # ints, floats, bools, strings, None and tuples are JSON as they are


class _Plan:
    """What coding one record type at one version field by field needs,
    worked out once."""

    __slots__ = ("specs", "keys", "known", "get", "nested", "fields")

    def __init__(self, cls: type, version: int) -> None:
        self.specs = tuple(spec for spec in cls.FIELDS if spec.since <= version)
        # Decoding: (key, attr, kind, required).
        self.fields = tuple(
            (spec.key, spec.attr, spec.kind, spec.default is MISSING) for spec in self.specs
        )
        self.keys = tuple(spec.key for spec in self.specs)
        self.known = frozenset(self.keys)
        attrs = [spec.attr for spec in self.specs]
        getter = operator.attrgetter(*attrs) if attrs else (lambda record: ())
        self.get = (lambda record: (getter(record),)) if len(attrs) == 1 else getter
        self.nested = any(spec.kind in codec_fast.NESTED for spec in self.specs)


_PLANS: dict[tuple[type, int], _Plan] = {}


def _plan(cls: type, version: int) -> _Plan:
    plan = _PLANS.get((cls, version))
    if plan is None:
        plan = _PLANS[(cls, version)] = _Plan(cls, version)
    return plan


def record_data(record: Record) -> dict[str, Any]:
    """The record's fields for its version, camelCase, as docs/api.md shows them."""
    plan = _plan(type(record), record.version)
    values = plan.get(record)
    if plan.nested:
        values = [_encode_value(spec.kind, v) for spec, v in zip(plan.specs, values, strict=True)]
    return dict(zip(plan.keys, values, strict=True))


def record_to_obj_plain(record: Record) -> dict[str, Any]:
    """``{"type", "version", "data"}`` built field by field."""
    return {"type": record.TYPE, "version": record.version, "data": record_data(record)}


def record_to_obj(record: Record) -> dict[str, Any]:
    if GENERATED:
        return _GENERATED.to_obj(record)
    return record_to_obj_plain(record)


def log_record_to_obj(
    offset: int,
    timestamp_ms: int,
    controller_epoch: int,
    record: Record,
    batch_offset: int,
    who: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A record as the log, export and snapshot endpoints show it. ``batch_offset``
    is the offset of the first record of the batch it was committed in;
    ``who`` the Who of its batch that covers it, as ``who_obj(who, False)``
    renders it (once per Who: its records share it), None for batches
    written before who was recorded, and for snapshots."""
    obj = {
        "offset": offset,
        "type": record.TYPE,
        "version": record.version,
        "timestampMs": timestamp_ms,
        "controllerEpoch": controller_epoch,
        "batchOffset": batch_offset,
        "data": record_data(record),
    }
    if who is not None:
        obj["who"] = who
    return obj


def who_obj(who: Who, with_records: bool = True) -> dict[str, Any]:
    """A Who as a batch's JSON holds it (``records`` first), or as GET /v1/log
    shows it beside each record (without ``records``); empty strings left out."""
    obj: dict[str, Any] = {"records": who.records} if with_records else {}
    obj["principal"] = who.principal
    obj["api"] = who.api
    if who.address:
        obj["address"] = who.address
    if who.request_id:
        obj["requestId"] = who.request_id
    if who.rule:
        obj["rule"] = who.rule
    return obj


def encode_batch(batch: Batch) -> bytes:
    if GENERATED:
        encoded = _ENCODER.encode(batch)
        if encoded is not None:
            return encoded
    obj = {
        "format": BATCH_FORMAT,
        "controllerEpoch": batch.controller_epoch,
        "timestampMs": batch.timestamp_ms,
        "baseOffset": batch.base_offset,
        "records": [record_to_obj(r) for r in batch.records],
    }
    if batch.who:  # left out when empty: a batch from before who reads the same
        obj["who"] = [who_obj(w) for w in batch.who]
    return orjson.dumps(obj)


# ---------------------------------------------------------------- decoding


def brief(value: Any) -> str:
    """A short, safe rendering of an untrusted value for an error message
    (str() of a value nested a thousand deep would raise RecursionError)."""
    if isinstance(value, dict | list):
        return f"<{type(value).__name__} of {len(value)}>"
    return repr(value)[:60]


def _int(value: Any, kind: Kind, where: str) -> int:
    # bool is an int in Python but never in Kafka's schemas.
    if type(value) is not int:
        raise DecodeError(f"{where}: expected {kind.value}, got {type(value).__name__}")
    low, high = INT_RANGES[kind]
    if not low <= value <= high:
        raise DecodeError(f"{where}: {value} is out of the {kind.value} range [{low}, {high}]")
    return value


def _str(value: Any, where: str) -> str:
    if type(value) is not str:
        raise DecodeError(f"{where}: expected string, got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list:
    if type(value) is not list:
        raise DecodeError(f"{where}: expected array, got {type(value).__name__}")
    return value


def _obj(value: Any, where: str, keys: tuple[str, ...]) -> dict:
    if type(value) is not dict:
        raise DecodeError(f"{where}: expected object, got {type(value).__name__}")
    missing = [k for k in keys if k not in value]
    if missing:
        raise DecodeError(f"{where}: missing field {missing[0]!r}")
    extra = [k for k in value if k not in keys]
    if extra:
        raise DecodeError(f"{where}: unknown field {brief(extra[0])}")
    return value


_INT32_MIN, _INT32_MAX = INT_RANGES[Kind.INT32]


def _int32_list(value: Any, where: str) -> tuple[int, ...]:
    # Replicas and ISRs: a snapshot has millions. One pass of cheap checks;
    # anything odd takes the loop that names the element (the same result).
    if type(value) is list:
        for v in value:
            if type(v) is not int or not _INT32_MIN <= v <= _INT32_MAX:
                break
        else:
            return tuple(value)
    return tuple(_int(v, Kind.INT32, f"{where}[{i}]") for i, v in enumerate(_list(value, where)))


_ENDPOINT_KEYS = ("name", "host", "port", "securityProtocol")
_FEATURE_KEYS = ("name", "minSupportedVersion", "maxSupportedVersion")
_VOTER_KEYS = ("voterId", "voterDirectoryId", "host", "port")
_ENTITY_KEYS = ("entityType", "entityName")
_INF = float("inf")


def _float64(value: Any, where: str) -> float:
    # JSON has one number type: 1024 and 1024.0 are the same float64.
    if type(value) is float:
        if value != value or value in (_INF, -_INF):
            raise DecodeError(f"{where}: {value} is not a finite float64")
        return value
    if type(value) is not int:
        raise DecodeError(f"{where}: expected float64, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise DecodeError(f"{where}: {brief(value)} is out of the float64 range") from None


def _decode_value(kind: Kind, value: Any, where: str) -> Any:
    if kind in INT_RANGES:
        return _int(value, kind, where)
    if kind is Kind.BOOL:
        if type(value) is not bool:
            raise DecodeError(f"{where}: expected bool, got {type(value).__name__}")
        return value
    if kind is Kind.STRING:
        return _str(value, where)
    if kind is Kind.NULLABLE_STRING:
        return None if value is None else _str(value, where)
    if kind is Kind.FLOAT64:
        return _float64(value, where)
    if kind is Kind.QUOTA_ENTITY:
        out = []
        for i, item in enumerate(_list(value, where)):
            w = f"{where}[{i}]"
            e = _obj(item, w, _ENTITY_KEYS)
            name = e["entityName"]
            out.append(
                EntityData(
                    _str(e["entityType"], f"{w}.entityType"),
                    None if name is None else _str(name, f"{w}.entityName"),
                )
            )
        return tuple(out)
    if kind is Kind.STRING_LIST:
        return tuple(_str(v, f"{where}[{i}]") for i, v in enumerate(_list(value, where)))
    if kind is Kind.BYTES:
        text = _str(value, where)
        try:
            decoded = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise DecodeError(f"{where}: {brief(text)} is not base64") from None
        # One spelling per value (no stray padding bits), as for every other kind.
        if base64.b64encode(decoded).decode("ascii") != text:
            raise DecodeError(f"{where}: {brief(text)} is not canonical base64")
        return decoded
    if kind is Kind.UUID:
        try:
            return parse_uuid(value)
        except InvalidUuid as e:
            raise DecodeError(f"{where}: {e}") from None
    if kind is Kind.INT32_LIST:
        return _int32_list(value, where)
    if kind is Kind.NULLABLE_INT32_LIST:
        return None if value is None else _int32_list(value, where)
    if kind is Kind.ENDPOINTS:
        out = []
        for i, item in enumerate(_list(value, where)):
            w = f"{where}[{i}]"
            e = _obj(item, w, _ENDPOINT_KEYS)
            port = _int(e["port"], Kind.INT32, f"{w}.port")
            if not 0 <= port <= 65535:
                raise DecodeError(f"{w}.port: {port} is out of the uint16 range [0, 65535]")
            out.append(
                Endpoint(
                    _str(e["name"], f"{w}.name"),
                    _str(e["host"], f"{w}.host"),
                    port,
                    _int(e["securityProtocol"], Kind.INT16, f"{w}.securityProtocol"),
                )
            )
        return tuple(out)
    if kind is Kind.FEATURES:
        out = []
        for i, item in enumerate(_list(value, where)):
            w = f"{where}[{i}]"
            f = _obj(item, w, _FEATURE_KEYS)
            out.append(
                FeatureRange(
                    _str(f["name"], f"{w}.name"),
                    _int(f["minSupportedVersion"], Kind.INT16, f"{w}.minSupportedVersion"),
                    _int(f["maxSupportedVersion"], Kind.INT16, f"{w}.maxSupportedVersion"),
                )
            )
        return tuple(out)
    if kind is Kind.VOTERS:
        out = []
        for i, item in enumerate(_list(value, where)):
            w = f"{where}[{i}]"
            v = _obj(item, w, _VOTER_KEYS)
            voter_id = _int(v["voterId"], Kind.INT32, f"{w}.voterId")
            if voter_id < 0:
                raise DecodeError(f"{w}.voterId: {voter_id} is negative")
            port = _int(v["port"], Kind.INT32, f"{w}.port")
            if not 0 < port <= 65535:
                raise DecodeError(f"{w}.port: {port} is not a port")
            try:
                directory_id = parse_uuid(v["voterDirectoryId"])
            except InvalidUuid as e:
                raise DecodeError(f"{w}.voterDirectoryId: {e}") from None
            out.append(Voter(voter_id, directory_id, _str(v["host"], f"{w}.host"), port))
        if len({v.voter_id for v in out}) != len(out):
            raise DecodeError(f"{where}: a voter id appears twice")
        return tuple(out)
    raise AssertionError(kind)  # pragma: no cover - every Kind is handled above


def record_from_obj(obj: Any, where: str = "record") -> Record:
    """A record from ``{"type", "version", "data"}`` (extra envelope keys such as
    ``offset`` are ignored here; the log layer reads them)."""
    if type(obj) is not dict:
        raise DecodeError(f"{where}: expected object, got {type(obj).__name__}")
    type_name = obj.get("type")
    cls = RECORD_TYPES.get(type_name) if type(type_name) is str else None
    if cls is None:
        raise DecodeError(f"{where}: unknown record type {brief(type_name)}")
    version = obj.get("version")
    if type(version) is not int or not 0 <= version <= cls.MAX_VERSION:
        raise DecodeError(
            f"{where}: {type_name} version {brief(version)} is not supported (0..{cls.MAX_VERSION})"
        )
    data = obj.get("data")
    if type(data) is not dict:
        raise DecodeError(f"{where}: 'data' must be an object")
    if GENERATED:
        record = _GENERATED.from_data[(type_name, version)](data)
        if record is not None:
            return record
    return record_from_data(cls, version, data, where)


def record_from_data(cls: type, version: int, data: dict, where: str = "record") -> Record:
    """The plain decoder: the record of ``cls`` at ``version`` from its
    ``data`` object, field by field, or the DecodeError naming the first
    problem (a bad value, then a missing field, then an unknown one)."""
    plan = _plan(cls, version)
    values: dict[str, Any] = {}
    for key, attr, kind, required in plan.fields:
        if key in data:
            values[attr] = _decode_value(kind, data[key], f"{where}.data.{key}")
        elif required:
            raise DecodeError(f"{where}: {cls.TYPE} v{version} requires field {key!r}")
    if not plan.known.issuperset(data):
        unknown = next(key for key in data if key not in plan.known)
        raise DecodeError(f"{where}: {cls.TYPE} v{version} has no field {brief(unknown)}")
    return cls(**values, version=version)


def _loads(data: Any, what: str) -> Any:
    if not isinstance(data, bytes | bytearray | memoryview | str):
        raise DecodeError(f"{what}: expected bytes, got {type(data).__name__}")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise DecodeError(f"{what}: not JSON ({e})") from None


def decode_batch(data: Any) -> Batch:
    if GENERATED and type(data) is bytes:
        batch = _BATCHES.decode(data)
        if batch is not None:
            return batch
    obj = _loads(data, "batch")
    if type(obj) is not dict:
        raise DecodeError(f"batch: expected object, got {type(obj).__name__}")
    if type(obj.get("format")) is not int or obj["format"] != BATCH_FORMAT:
        raise DecodeError(f"batch: unsupported format {brief(obj.get('format'))}")
    epoch = _int(obj.get("controllerEpoch"), Kind.INT32, "batch.controllerEpoch")
    ts = _int(obj.get("timestampMs"), Kind.INT64, "batch.timestampMs")
    base = _int(obj.get("baseOffset", -1), Kind.INT64, "batch.baseOffset")
    records = _list(obj.get("records"), "batch.records")
    if GENERATED:
        decoded = _GENERATED.decode_records(records, record_from_obj)
    else:
        decoded = [record_from_obj(r, f"batch.records[{i}]") for i, r in enumerate(records)]
    who = _decode_who(obj["who"], len(decoded)) if "who" in obj else ()
    return Batch(epoch, ts, tuple(decoded), base, who)


_WHO_KEYS = ("records", "principal", "api", "address", "requestId", "rule")
_WHO_STRINGS = (
    ("principal", limits.MAX_WHO_PRINCIPAL_LENGTH, True),
    ("api", limits.MAX_WHO_API_LENGTH, True),
    ("address", limits.MAX_WHO_ADDRESS_LENGTH, False),
    ("requestId", limits.MAX_REQUEST_ID_LENGTH, False),
    ("rule", limits.MAX_WHO_RULE_LENGTH, False),
)


def _decode_who(value: Any, records: int) -> tuple[Who, ...]:
    """A batch's ``who``: runs of at least one record each, covering the
    batch's ``records`` exactly, every string within its bound."""
    out = []
    covered = 0
    for i, item in enumerate(_list(value, "batch.who")):
        where = f"batch.who[{i}]"
        if type(item) is not dict:
            raise DecodeError(f"{where}: expected object, got {type(item).__name__}")
        extra = [k for k in item if k not in _WHO_KEYS]
        if extra:
            raise DecodeError(f"{where}: unknown field {brief(extra[0])}")
        if "records" not in item:
            raise DecodeError(f"{where}: missing field 'records'")
        count = _int(item["records"], Kind.INT32, f"{where}.records")
        if count < 1:
            raise DecodeError(f"{where}.records: {count}; a who covers at least one record")
        fields = []
        for key, bound, required in _WHO_STRINGS:
            if key not in item:
                if required:
                    raise DecodeError(f"{where}: missing field {key!r}")
                fields.append("")
                continue
            text = _str(item[key], f"{where}.{key}")
            if len(text) > bound:
                raise DecodeError(
                    f"{where}.{key}: {len(text)} characters, more than {bound} (docs/limits.md)"
                )
            if required and not text:
                raise DecodeError(f"{where}.{key}: empty")
            fields.append(text)
        covered += count
        out.append(Who(count, *fields))
    if out and covered != records:
        raise DecodeError(f"batch.who: its runs cover {covered} records, the batch holds {records}")
    return tuple(out)


def decode_record(data: Any) -> Record:
    """One record from JSON bytes (``{"type", "version", "data", ...}``)."""
    return record_from_obj(_loads(data, "record"))


def encode_record(record: Record) -> bytes:
    return orjson.dumps(record_to_obj(record))


_GENERATED = codec_fast.GeneratedCodec(_encode_value, _decode_value)
_BATCHES = codec_fast.BatchDecoder(BATCH_FORMAT, _decode_value)
_ENCODER = codec_fast.BatchEncoder(BATCH_FORMAT, _encode_value)
