"""The generated record coders: the fast twin of ``codec.py``'s field-by-field code.

Shadows ``codec.record_to_obj_plain`` (encoding) and ``codec.record_from_data``
(decoding the ``data`` of one record) for every (type, version): one function
each, generated once with ``exec`` from the record's field specs.

Why (docs/decisions.md 25 and 31): the leader encodes every record it writes
and every follower decodes every one of them. A dict display per record
encodes 100 PartitionChangeRecords in 61 us instead of 134; the generated
decoder takes 100 in 308 us instead of 400, and decoding a batch's records
inline (``decode_records``) takes 100 NoOpRecords in 71 us instead of 115.

The rule that makes it safe: a generated decoder only *vouches*. It takes the
usual ``data`` (every field of the version present, nothing else, every value
passing its quick check, endpoints, features and voters decoded by the plain
code's own function) and returns the very record the field-by-field code
would; for anything else it returns None and the caller runs the plain
decoder, which decodes it or raises the ``DecodeError`` naming the problem.
So errors come from one place only. Nothing here raises on bad input.

``BatchDecoder`` goes one step further for whole batches (decisions.md 114):
msgspec decodes the envelope and every record's ``data`` into Structs in C
(the record type as a tag, each field's kind checked), and a generated
builder per (type, version) makes the record: 100 PartitionChangeRecords in
100 us instead of 206. It vouches the same way: a batch it cannot vouch for
in full is decoded the usual way.

``BatchEncoder`` is the same for writing: each record becomes a msgspec
Struct per (type, version) instead of a dict, and msgspec writes the batch
(0.66 -> 0.47 us a PartitionChangeRecord), the very bytes orjson writes of
the dicts; it declines a batch with a float64 field, whose exponent msgspec
spells differently.

The switch is ``codec.GENERATED`` (False: every record is coded field by
field). Agreement tests: ``tests/test_codec_fast.py`` (Hypothesis, the same
valid and invalid inputs to both, equal records, objects, bytes or errors).
Every speed switch is listed in ``metaquorum/speed_switches.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Any, Union

import msgspec

from . import limits
from .records import INT_RANGES, RECORD_TYPES, Batch, Endpoint, FeatureRange, Kind, Record, Who
from .uuids import InvalidUuid, parse_uuid

_INF = float("inf")
SLOW = object()  # a quick check could not vouch for the value

NESTED = (
    Kind.ENDPOINTS,
    Kind.FEATURES,
    Kind.VOTERS,
    Kind.QUOTA_ENTITY,
    Kind.BYTES,
    Kind.STRING_LIST,
)  # JSON is not the value itself

_INT32_MIN, _INT32_MAX = INT_RANGES[Kind.INT32]
_UUIDS: dict[str, str] = {}  # UUID texts seen -> canonical form (topic ids repeat)


def _specs(cls: type, version: int) -> tuple:
    return tuple(spec for spec in cls.FIELDS if spec.since <= version)


# ---------------------------------------------------------------- quick checks


def _quick_uuid(value: Any) -> Any:
    canonical = _UUIDS.get(value) if type(value) is str else None
    if canonical is None:
        try:
            canonical = parse_uuid(value)
        except InvalidUuid:
            return SLOW
        if len(_UUIDS) >= 100_000:
            _UUIDS.clear()
        _UUIDS[value] = canonical
    return canonical


def _quick_int32_list(value: Any) -> Any:
    if type(value) is not list:
        return SLOW
    for v in value:
        if type(v) is not int or not _INT32_MIN <= v <= _INT32_MAX:
            return SLOW
    return tuple(value)


def _quick_nullable_int32_list(value: Any) -> Any:
    return None if value is None else _quick_int32_list(value)


_QUICK: dict[Kind, Callable[[Any], Any]] = {
    Kind.UUID: _quick_uuid,
    Kind.INT32_LIST: _quick_int32_list,
    Kind.NULLABLE_INT32_LIST: _quick_nullable_int32_list,
    Kind.STRING: lambda v: v if type(v) is str else SLOW,
    Kind.NULLABLE_STRING: lambda v: v if v is None or type(v) is str else SLOW,
    Kind.BOOL: lambda v: v if type(v) is bool else SLOW,
    Kind.FLOAT64: lambda v: v if type(v) is float and -_INF < v < _INF else SLOW,
}


def quick_check(kind: Kind) -> Callable[[Any], Any]:
    """A function returning a plainly valid value of ``kind`` decoded, or SLOW
    (integers are checked inline by the generated decoder, endpoints, features
    and voters by the plain decoder's own function)."""
    return _QUICK[kind]


# ---------------------------------------------------------------- generators


def compile_to_obj(
    cls: type, version: int, encode_nested: Callable[[Kind, Any], Any]
) -> Callable[[Record], dict[str, Any]]:
    """``record_to_obj`` for one (type, version), as one generated function:
    a dict display per record instead of zips and getters. Same keys, same
    order, same values as the plain encoder (``encode_nested`` is its own
    function for endpoints, features and voters)."""
    specs = _specs(cls, version)
    items = ", ".join(
        f"{spec.key!r}: "
        + (f"_encode(_K{i}, r.{spec.attr})" if spec.kind in NESTED else f"r.{spec.attr}")
        for i, spec in enumerate(specs)
    )
    source = (
        f"def to_obj(r):\n"
        f"    return {{'type': {cls.TYPE!r}, 'version': {version!r}, 'data': {{{items}}}}}\n"
    )
    namespace: dict[str, Any] = {"_encode": encode_nested}
    namespace.update({f"_K{i}": spec.kind for i, spec in enumerate(specs)})
    exec(compile(source, f"<record_to_obj {cls.__name__} v{version}>", "exec"), namespace)  # noqa: S102
    return namespace["to_obj"]


def compile_from_data(
    cls: type, version: int, decode_nested: Callable[[Kind, Any, str], Any]
) -> Callable[[dict], Record | None]:
    """A generated decoder for the usual ``data`` of one (type, version): the
    record, or None for anything else (the plain decoder then decodes it or
    names the problem). Endpoints, features and voters are decoded by
    ``decode_nested``, the plain decoder's function for a value; its
    DecodeError (a ValueError) becomes None here."""
    specs = _specs(cls, version)
    lines = ["def from_data(data):", f"    if len(data) != {len(specs)}:", "        return None"]
    lines.append("    try:")
    lines.append("        pass")
    for i, spec in enumerate(specs):
        bounds = INT_RANGES.get(spec.kind)
        lines.append(f"        v{i} = data[{spec.key!r}]")
        if bounds is not None:
            lines.append(
                f"        if type(v{i}) is not int or not {bounds[0]} <= v{i} <= {bounds[1]}:"
            )
            lines.append("            return None")
        elif spec.kind in NESTED:
            lines.append(f"        v{i} = _decode_nested(_K{i}, v{i}, '')")
        else:
            lines.append(f"        v{i} = _q{i}(v{i})")
            lines.append(f"        if v{i} is _SLOW:")
            lines.append("            return None")
    lines.append("    except (KeyError, ValueError):")
    lines.append("        return None")
    args = "".join(f"{spec.attr}=v{i}, " for i, spec in enumerate(specs))
    lines.append(f"    return _cls({args}version={version!r})")
    namespace: dict[str, Any] = {"_cls": cls, "_SLOW": SLOW, "_decode_nested": decode_nested}
    for i, spec in enumerate(specs):
        if spec.kind in NESTED:
            namespace[f"_K{i}"] = spec.kind
        elif spec.kind not in INT_RANGES:
            namespace[f"_q{i}"] = quick_check(spec.kind)
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<from_data {cls.__name__} v{version}>", "exec"), namespace)  # noqa: S102
    return namespace["from_data"]


def _every_version() -> Iterable[tuple[str, type, int]]:
    for name, cls in RECORD_TYPES.items():
        for version in range(cls.MAX_VERSION + 1):
            yield name, cls, version


# ---------------------------------------------------------------- whole batches (msgspec)


def bounded_int(low: int, high: int) -> Any:
    """The msgspec type of an integer in [low, high] (checked in C)."""
    return Annotated[int, msgspec.Meta(ge=low, le=high)]


def _int_type(kind: Kind) -> Any:
    return bounded_int(*INT_RANGES[kind])


_I32_TUPLE = tuple[_int_type(Kind.INT32), ...]


# Endpoints and features, checked in C as the plain decoder checks them (an
# object of exactly these keys, each of its kind; a port within uint16): a
# registration's own, so a 1,000-broker burst does not take each through the
# plain decoder (11.7 -> 4.3 us a RegisterBrokerRecord).
_PORT = bounded_int(0, 65535)
_I16 = _int_type(Kind.INT16)


class _EndpointData(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    host: str
    port: _PORT
    securityProtocol: _I16  # noqa: N815 - the wire's name


class _FeatureData(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    minSupportedVersion: _I16  # noqa: N815
    maxSupportedVersion: _I16  # noqa: N815


def _endpoints(value: list) -> tuple[Endpoint, ...]:
    return tuple([Endpoint(e.name, e.host, e.port, e.securityProtocol) for e in value])


def _features(value: list) -> tuple[FeatureRange, ...]:
    return tuple(
        [FeatureRange(f.name, f.minSupportedVersion, f.maxSupportedVersion) for f in value]
    )


# Nested kinds msgspec checks in full, and how the builder makes their value.
_TYPED_NESTED = {Kind.ENDPOINTS: _endpoints, Kind.FEATURES: _features}
# What msgspec checks in C for each kind; the builder checks the rest (a UUID's
# text, a float64 being finite, and voters and quota entities, which the plain
# decoder's own function decodes from the plain values msgspec gives for ``Any``).
_STRUCT_TYPES: dict[Kind, Any] = {
    **{kind: _int_type(kind) for kind in INT_RANGES},
    Kind.BOOL: bool,
    Kind.STRING: str,
    Kind.NULLABLE_STRING: str | None,
    Kind.UUID: str,
    Kind.INT32_LIST: _I32_TUPLE,
    Kind.NULLABLE_INT32_LIST: _I32_TUPLE | None,
    Kind.FLOAT64: float,
    **{kind: Any for kind in NESTED},
    Kind.ENDPOINTS: list[_EndpointData],
    Kind.FEATURES: list[_FeatureData],
}


def _data_struct(cls: type) -> type:
    """The ``data`` of every version of ``cls`` as one Struct: the fields of
    version 0 are required (a leader writes every field of its version; a
    record that leaves a defaulted one out goes the plain way), later ones
    default to UNSET, so the builder of each version knows which it held."""
    fields = []
    for spec in cls.FIELDS:
        kind_type = _STRUCT_TYPES[spec.kind]
        if spec.since == 0:
            fields.append((spec.key, kind_type))
        else:
            fields.append((spec.key, kind_type | msgspec.UnsetType, msgspec.UNSET))
    return msgspec.defstruct(
        f"{cls.__name__}Data", fields, kw_only=True, forbid_unknown_fields=True
    )


def compile_builder(
    cls: type, version: int, decode_nested: Callable[[Kind, Any, str], Any]
) -> Callable[[Any], Record | None]:
    """The record of ``cls`` at ``version`` from its decoded data Struct, or
    None where the plain decoder might disagree: a field of the version
    missing or one of a later version present, a UUID, float64 or nested value
    its quick check does not vouch for."""
    lines = ["def build(d):"]
    namespace: dict[str, Any] = {
        "_cls": cls,
        "_SLOW": SLOW,
        "_UNSET": msgspec.UNSET,
        "_INF": _INF,
        "_decode_nested": decode_nested,
        "_uuid": _quick_uuid,
    }
    args = []
    for i, spec in enumerate(cls.FIELDS):
        value = f"d.{spec.key}"
        if spec.since > version:
            lines += [f"    if {value} is not _UNSET:", "        return None"]
            namespace[f"_D{i}"] = spec.default  # every later field has one
            args.append(f"_D{i}")
            continue
        args.append(f"v{i}")
        lines.append(f"    v{i} = {value}")
        if spec.since > 0:
            lines += [f"    if v{i} is _UNSET:", "        return None"]
        if spec.kind is Kind.UUID:
            lines += [f"    v{i} = _uuid(v{i})", f"    if v{i} is _SLOW:", "        return None"]
        elif spec.kind is Kind.FLOAT64:
            lines += [f"    if not -_INF < v{i} < _INF:", "        return None"]
        elif spec.kind in _TYPED_NESTED:
            namespace[f"_N{i}"] = _TYPED_NESTED[spec.kind]
            lines.append(f"    v{i} = _N{i}(v{i})")
        elif spec.kind in NESTED:
            namespace[f"_K{i}"] = spec.kind
            lines += [
                "    try:",
                f"        v{i} = _decode_nested(_K{i}, v{i}, '')",
                "    except ValueError:",
                "        return None",
            ]
    # Positional, in field order (FIELDS is every field but the last, version).
    lines.append(f"    return _cls({''.join(a + ', ' for a in args)}{version!r})")
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<build {cls.__name__} v{version}>", "exec"), namespace)  # noqa: S102
    return namespace["build"]


class BatchDecoder:
    """A whole batch decoded by msgspec in one pass (the envelope, each
    record's type as a tag, every field checked in C), then each record built
    by its generated builder: about 2.4 times as fast as orjson and the
    generated ``from_data`` (100 PartitionChangeRecords: 84 against 206 us).
    It only vouches, as they do: anything msgspec refuses or a builder does
    not vouch for gives None, and the caller decodes the batch the plain way,
    which decodes it or names the problem."""

    __slots__ = ("_decoder", "_builders", "_format")

    def __init__(self, batch_format: int, decode_nested: Callable[[Kind, Any, str], Any]) -> None:
        self._format = batch_format
        self._builders: dict[tuple[type, int], Callable[[Any], Record | None]] = {}
        envelopes = []
        for name, cls in RECORD_TYPES.items():
            envelope = msgspec.defstruct(
                f"{cls.__name__}Envelope",
                [("version", int), ("data", _data_struct(cls))],
                kw_only=True,
                tag_field="type",
                tag=name,
            )
            envelopes.append(envelope)
            for version in range(cls.MAX_VERSION + 1):
                self._builders[(envelope, version)] = compile_builder(cls, version, decode_nested)
        batch = msgspec.defstruct(
            "BatchEnvelope",
            [
                ("format", int),
                ("controllerEpoch", _int_type(Kind.INT32)),
                ("timestampMs", _int_type(Kind.INT64)),
                ("records", list[Union[tuple(envelopes)]]),  # noqa: UP007 - a runtime tuple
                ("baseOffset", _int_type(Kind.INT64), -1),
                ("who", tuple[Who, ...], ()),
            ],
            kw_only=True,
        )
        self._decoder = msgspec.json.Decoder(batch)

    def decode(self, payload: bytes) -> Batch | None:
        try:
            obj = self._decoder.decode(payload)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            return None  # (RecursionError: a value nested thousands deep)
        if obj.format != self._format:
            return None
        records = []
        append = records.append
        builders = self._builders
        for envelope in obj.records:
            build = builders.get((type(envelope), envelope.version))
            if build is None:
                return None
            record = build(envelope.data)
            if record is None:
                return None
            append(record)
        who = obj.who
        if who and not who_vouched(who, len(records)):
            return None
        return Batch(obj.controllerEpoch, obj.timestampMs, tuple(records), obj.baseOffset, who)


_INT32_RANGE = INT_RANGES[Kind.INT32]


def who_vouched(who: tuple[Who, ...], records: int) -> bool:
    """Whether a batch's who, as msgspec decoded it, is what the plain
    decoder takes: runs of 1..int32 records covering the batch, strings
    within their bounds, principal and api not empty."""
    covered = 0
    for w in who:
        if not 1 <= w.records <= _INT32_RANGE[1]:
            return False
        if (
            not 0 < len(w.principal) <= limits.MAX_WHO_PRINCIPAL_LENGTH
            or not 0 < len(w.api) <= limits.MAX_WHO_API_LENGTH
            or len(w.address) > limits.MAX_WHO_ADDRESS_LENGTH
            or len(w.request_id) > limits.MAX_REQUEST_ID_LENGTH
            or len(w.rule) > limits.MAX_WHO_RULE_LENGTH
        ):
            return False
        covered += w.records
    return covered == records


# ---------------------------------------------------------------- whole batches out (msgspec)


def compile_to_wire(
    cls: type, version: int, encode_nested: Callable[[Kind, Any], Any]
) -> Callable[[Record], Any]:
    """``to_obj`` for one (type, version) as msgspec Structs instead of
    dicts: an envelope tagged with the type (msgspec writes the tag first),
    then ``version`` and ``data``, whose fields are the version's, in the
    same order, under the same keys. Encoded, the same bytes as orjson
    writes of ``to_obj``'s dict, for every kind but float64 (msgspec spells
    1e16 without orjson's ``+``), which ``BatchEncoder`` leaves to orjson."""
    specs = _specs(cls, version)
    data = msgspec.defstruct(f"{cls.__name__}V{version}Data", [(s.key, Any) for s in specs])
    envelope = msgspec.defstruct(
        f"{cls.__name__}V{version}Wire",
        [("version", int), ("data", data)],
        tag_field="type",
        tag=cls.TYPE,
    )
    values = ", ".join(
        f"_encode(_K{i}, r.{spec.attr})" if spec.kind in NESTED else f"r.{spec.attr}"
        for i, spec in enumerate(specs)
    )
    source = f"def to_wire(r):\n    return _Envelope({version!r}, _Data({values}))\n"
    namespace: dict[str, Any] = {"_encode": encode_nested, "_Envelope": envelope, "_Data": data}
    namespace.update({f"_K{i}": spec.kind for i, spec in enumerate(specs)})
    exec(compile(source, f"<record_to_wire {cls.__name__} v{version}>", "exec"), namespace)  # noqa: S102
    return namespace["to_wire"]


class BatchEncoder:
    """``encode_batch`` by msgspec, from a Struct per record instead of a
    dict (0.66 -> 0.47 us a PartitionChangeRecord): the leader encodes every
    record it writes. It only takes what it writes byte for byte as the
    orjson encoder does; a batch holding a record with a float64 field, or
    a type or version it has no coder for, gives None and is encoded the
    usual way (agreement tests: ``tests/test_codec_fast.py``)."""

    __slots__ = ("_to_wire", "_encoder", "_batch", "_format")

    def __init__(self, batch_format: int, encode_nested: Callable[[Kind, Any], Any]) -> None:
        self._format = batch_format
        self._to_wire = {
            (cls, version): compile_to_wire(cls, version, encode_nested)
            for _name, cls, version in _every_version()
            if all(spec.kind is not Kind.FLOAT64 for spec in _specs(cls, version))
        }
        self._batch = msgspec.defstruct(
            "BatchWire",
            [
                ("format", int),
                ("controllerEpoch", int),
                ("timestampMs", int),
                ("baseOffset", int),
                ("records", list),
                ("who", tuple, ()),
            ],
            omit_defaults=True,  # no "who" when empty, as the plain encoder
        )
        self._encoder = msgspec.json.Encoder()

    def encode(self, batch: Batch) -> bytes | None:
        to_wire = self._to_wire
        records = []
        append = records.append
        for record in batch.records:
            coder = to_wire.get((type(record), record.version))
            if coder is None:
                return None
            append(coder(record))
        return self._encoder.encode(
            self._batch(
                self._format,
                batch.controller_epoch,
                batch.timestamp_ms,
                batch.base_offset,
                records,
                batch.who,
            )
        )


class GeneratedCodec:
    """Every generated coder, built once (a handful of (type, version)s code
    every batch): ``to_obj`` by (class, version), ``from_data`` by (type name,
    version), as the envelope names them."""

    __slots__ = ("to_obj_by_class", "from_data")

    def __init__(
        self,
        encode_nested: Callable[[Kind, Any], Any],
        decode_nested: Callable[[Kind, Any, str], Any],
    ) -> None:
        self.to_obj_by_class = {
            (cls, version): compile_to_obj(cls, version, encode_nested)
            for _name, cls, version in _every_version()
        }
        self.from_data = {
            (name, version): compile_from_data(cls, version, decode_nested)
            for name, cls, version in _every_version()
        }

    def to_obj(self, record: Record) -> dict[str, Any]:
        return self.to_obj_by_class[(type(record), record.version)](record)

    def decode_records(self, records: list, fallback: Callable[[Any, str], Record]) -> list:
        """A batch's records, the usual ones decoded inline (a follower decodes
        every one the leader writes); anything else, and every error, through
        ``fallback`` (the plain ``record_from_obj``) with its place."""
        decoded: list[Record] = []
        append = decoded.append
        table = self.from_data
        for r in records:
            if type(r) is dict:
                name, version, data = r.get("type"), r.get("version"), r.get("data")
                # A bool is no version (True == 1); a list or object is no name.
                if type(name) is str and type(version) is int and type(data) is dict:
                    from_data = table.get((name, version))
                    if from_data is not None:
                        record = from_data(data)
                        if record is not None:
                            append(record)
                            continue
            append(fallback(r, f"batch.records[{len(decoded)}]"))
        return decoded
