"""The export's one flat schema: a row per record, a column per record field.

Columns are derived from the field declarations in ``metadata_records.records``,
so a new record field becomes a new column here without a second list to keep
in step. Two fields of different types share a Kafka name (``fenced`` and
``inControlledShutdown`` are booleans in RegisterBrokerRecord but change
codes in BrokerRegistrationChangeRecord): the change codes get their own
``*_change`` columns. LEADER_CHANGE's ``controllerEpoch`` is the envelope's
``controller_epoch`` (a batch only applies when the two agree).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from metadata_records.records import (
    RECORD_TYPES,
    Endpoint,
    EntityData,
    FeatureRange,
    Kind,
    Record,
)

ENDPOINT_TYPE = pa.struct(
    [
        ("name", pa.string()),
        ("host", pa.string()),
        ("port", pa.int32()),
        ("security_protocol", pa.int16()),
    ]
)
FEATURE_TYPE = pa.struct(
    [
        ("name", pa.string()),
        ("min_supported_version", pa.int16()),
        ("max_supported_version", pa.int16()),
    ]
)
VOTER_TYPE = pa.struct(
    [
        ("voter_id", pa.int32()),
        ("voter_directory_id", pa.string()),
        ("host", pa.string()),
        ("port", pa.int32()),
    ]
)
QUOTA_ENTITY_TYPE = pa.struct([("entity_type", pa.string()), ("entity_name", pa.string())])
_ARROW = {
    Kind.INT8: pa.int8(),
    Kind.INT16: pa.int16(),
    Kind.INT32: pa.int32(),
    Kind.INT64: pa.int64(),
    Kind.BOOL: pa.bool_(),
    Kind.STRING: pa.string(),
    Kind.NULLABLE_STRING: pa.string(),
    Kind.UUID: pa.string(),
    Kind.INT32_LIST: pa.list_(pa.int32()),
    Kind.NULLABLE_INT32_LIST: pa.list_(pa.int32()),
    Kind.ENDPOINTS: pa.list_(ENDPOINT_TYPE),
    Kind.FEATURES: pa.list_(FEATURE_TYPE),
    Kind.VOTERS: pa.list_(VOTER_TYPE),
    Kind.FLOAT64: pa.float64(),
    Kind.QUOTA_ENTITY: pa.list_(QUOTA_ENTITY_TYPE),
    # UserScramCredentialRecord's salt and keys: always empty in an export
    # (metadata_records/redaction.py), so the column says only that they are hidden.
    Kind.BYTES: pa.binary(),
    Kind.STRING_LIST: pa.list_(pa.string()),  # DelegationTokenRecord's renewers
}

# The who of a record, as a tuple in this order (``who_row``).
WHO_COLUMNS = ("who_principal", "who_api", "who_address", "who_request_id", "who_rule")
# GET /v1/log's "who" keys, in WHO_COLUMNS order.
WHO_KEYS = ("principal", "api", "address", "requestId", "rule")
NO_WHO = (None,) * len(WHO_COLUMNS)

ENVELOPE = [
    ("offset", pa.int64()),
    ("timestamp_ms", pa.int64()),
    ("controller_epoch", pa.int32()),
    ("type", pa.string()),
    ("version", pa.int16()),
    # True for the records that restate a snapshot (all at the snapshot's offset).
    ("from_snapshot", pa.bool_()),
    # Position among the rows of one offset: 0 for log records, 0..n-1 for a snapshot.
    ("seq", pa.int32()),
    # The offset of the first record of the record's batch (a snapshot's rows:
    # the snapshot's offset). Null where the source did not say (an export
    # written before batchOffset existed): readers take each such record as
    # its own batch.
    ("batch_offset", pa.int64()),
    # Who asked for the record (the batch's Who covering it, GET /v1/log's
    # "who"): null for records of batches without one (written before it
    # existed, or exported from such a server) and for snapshot rows.
    *((column, pa.string()) for column in WHO_COLUMNS),
]

# (record type, attribute) -> column, where the Kafka name alone would clash.
RENAMED = {
    ("BROKER_REGISTRATION_CHANGE_RECORD", "fenced"): "fenced_change",
    (
        "BROKER_REGISTRATION_CHANGE_RECORD",
        "in_controlled_shutdown",
    ): "in_controlled_shutdown_change",
    ("LEADER_CHANGE", "controller_epoch"): "controller_epoch",
    # ClientQuotaRecord: ConfigRecord's value is a string; these keep their own.
    ("CLIENT_QUOTA_RECORD", "entity"): "quota_entity",
    ("CLIENT_QUOTA_RECORD", "key"): "quota_key",
    ("CLIENT_QUOTA_RECORD", "value"): "quota_value",
    ("CLIENT_QUOTA_RECORD", "remove"): "quota_remove",
}


def _field_columns() -> list[tuple[str, pa.DataType]]:
    columns: dict[str, pa.DataType] = {}
    envelope = dict(ENVELOPE)
    for cls in RECORD_TYPES.values():
        for spec in cls.FIELDS:
            name = RENAMED.get((cls.TYPE, spec.attr), spec.attr)
            arrow = _ARROW[spec.kind]
            known = columns.get(name, envelope.get(name))
            if known is not None and known != arrow:
                raise AssertionError(f"column {name} would hold both {known} and {arrow}")
            if name not in envelope:
                columns[name] = arrow
    return list(columns.items())


FIELD_COLUMNS = _field_columns()
ARROW_SCHEMA = pa.schema(ENVELOPE + FIELD_COLUMNS)
COLUMN_NAMES = [name for name, _ in ENVELOPE + FIELD_COLUMNS]


def _endpoints(value: Any) -> list[dict]:
    return [
        {"name": e.name, "host": e.host, "port": e.port, "security_protocol": e.security_protocol}
        for e in value
    ]


def _features(value: Any) -> list[dict]:
    return [
        {
            "name": f.name,
            "min_supported_version": f.min_supported_version,
            "max_supported_version": f.max_supported_version,
        }
        for f in value
    ]


def _voters(value: Any) -> list[dict]:
    return [v._asdict() for v in value]


def _plain(value: Any) -> Any:
    return list(value) if type(value) is tuple else value


_CONVERT: dict[Kind, Callable[[Any], Any]] = {
    Kind.ENDPOINTS: _endpoints,
    Kind.FEATURES: _features,
    Kind.VOTERS: _voters,
    Kind.QUOTA_ENTITY: lambda v: [e._asdict() for e in v],
}


def _getters(cls: type, version: int) -> list[tuple[str, str, Callable[[Any], Any]]]:
    return [
        (RENAMED.get((cls.TYPE, s.attr), s.attr), s.attr, _CONVERT.get(s.kind, _plain))
        for s in cls.FIELDS
        if s.since <= version
    ]


_GETTERS: dict[tuple[type, int], list] = {
    (cls, v): _getters(cls, v) for cls in RECORD_TYPES.values() for v in range(cls.MAX_VERSION + 1)
}
_FIELD_NAMES = [name for name, _ in FIELD_COLUMNS]
# The columns a record of that type and version leaves null.
_ABSENT: dict[tuple[type, int], list[str]] = {
    key: [c for c in _FIELD_NAMES if c not in {g[0] for g in getters}]
    for key, getters in _GETTERS.items()
}


def who_row(who: dict | None) -> tuple:
    """The who columns of a record from its ``"who"`` as GET /v1/log shows it
    (None: the record has none); a field left out or empty is null."""
    if who is None:
        return NO_WHO
    return tuple(who.get(key) or None for key in WHO_KEYS)


class ColumnBuffer:
    """Rows collected column by column (what pyarrow builds a table from fastest)."""

    def __init__(self) -> None:
        self.columns: dict[str, list] = {name: [] for name in COLUMN_NAMES}
        self._envelope = [self.columns[name] for name, _ in ENVELOPE]
        # Per (record type, version): the lists its fields append to, and the
        # lists it leaves null (looked up once, not per record).
        self._plans: dict[tuple[type, int], tuple[list, list, str | None]] = {}
        self.rows = 0
        self.first_offset: int | None = None
        self.last_offset: int | None = None

    def _plan(self, key: tuple[type, int]) -> tuple[list, list, str | None]:
        cols = self.columns
        fields = [
            (cols[c], attr, conv) for c, attr, conv in _GETTERS[key] if c != "controller_epoch"
        ]
        epoch_attr = next((attr for c, attr, _ in _GETTERS[key] if c == "controller_epoch"), None)
        plan = (fields, [cols[c] for c in _ABSENT[key]], epoch_attr)
        self._plans[key] = plan
        return plan

    def add(
        self,
        offset: int,
        timestamp_ms: int,
        controller_epoch: int,
        record: Record,
        from_snapshot: bool = False,
        seq: int = 0,
        *,
        batch_offset: int | None,
        who: tuple = NO_WHO,
    ) -> None:
        """``who``: the record's who columns, a tuple in WHO_COLUMNS order (``who_row``)."""
        key = (type(record), record.version)
        fields, absent, epoch_attr = self._plans.get(key) or self._plan(key)
        if epoch_attr is not None:  # LEADER_CHANGE: the record's own epoch
            controller_epoch = getattr(record, epoch_attr)
        o, t, e, ty, v, fs, sq, b, wp, wa, wad, wr, wru = self._envelope
        o.append(offset)
        t.append(timestamp_ms)
        e.append(controller_epoch)
        ty.append(record.TYPE)
        v.append(record.version)
        fs.append(from_snapshot)
        sq.append(seq)
        b.append(batch_offset)
        wp.append(who[0])
        wa.append(who[1])
        wad.append(who[2])
        wr.append(who[3])
        wru.append(who[4])
        for values, attr, convert in fields:
            values.append(convert(getattr(record, attr)))
        for values in absent:
            values.append(None)
        self.rows += 1
        if self.first_offset is None:
            self.first_offset = offset
        self.last_offset = offset

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(self.columns, schema=ARROW_SCHEMA)


# ---------------------------------------------------------------- and back

_FROM_COLUMN: dict[Kind, Callable[[Any], Any]] = {
    Kind.INT32_LIST: tuple,
    Kind.STRING_LIST: tuple,
    Kind.NULLABLE_INT32_LIST: lambda v: None if v is None else tuple(v),
    Kind.ENDPOINTS: lambda v: tuple(Endpoint(**e) for e in v),
    Kind.FEATURES: lambda v: tuple(FeatureRange(**f) for f in v),
    Kind.QUOTA_ENTITY: lambda v: tuple(EntityData(**e) for e in v),
    # A JSON line holds bytes as base64 (export_files.py); parquet as bytes.
    Kind.BYTES: lambda v: base64.b64decode(v) if isinstance(v, str) else v,
}


def record_from_row(row: dict[str, Any]) -> Record:
    """The record a row of the flat schema holds (``ColumnBuffer.add`` undone)."""
    cls = RECORD_TYPES[row["type"]]
    version = row["version"]
    values = {}
    for spec in cls.FIELDS:
        if spec.since <= version:
            value = row[RENAMED.get((cls.TYPE, spec.attr), spec.attr)]
            convert = _FROM_COLUMN.get(spec.kind)
            values[spec.attr] = value if convert is None else convert(value)
    return cls(**values, version=version)
