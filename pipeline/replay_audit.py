"""The audit as one sequential Python replay over an export directory:
``metadata_records.log_invariants``, the one implementation of the rules, fed
the export's rows in offset order.

The Spark audit (``audit.py``) computes the same rules with window functions;
the tests hold the two to the same violations, word for word. This replay is
also its baseline in ``bench/pipeline.py``: simple, and bound to one core.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pyarrow.parquet as pq

from metadata_records.log_invariants import LogInvariants

from .export_files import export_files, input_format
from .schema import COLUMN_NAMES, NO_WHO, WHO_COLUMNS, record_from_row

COLUMNS = [
    "offset",
    "timestamp_ms",
    "controller_epoch",
    "type",
    "from_snapshot",
    "broker_id",
    "broker_epoch",
    "fenced",
    "in_controlled_shutdown",
    "fenced_change",
    "in_controlled_shutdown_change",
    "name",
    "topic_id",
    "partition_id",
    "replicas",
    "isr",
    "leader",
    "leader_epoch",
    "partition_epoch",
]


def read_rows(directory: str) -> Iterator[tuple]:
    """Rows as tuples in COLUMNS order, file by file in offset order."""
    fmt = input_format(directory)
    for f in export_files(directory):
        if fmt == "parquet":
            for batch in pq.ParquetFile(f.path).iter_batches(batch_size=65536, columns=COLUMNS):
                yield from zip(*(batch.column(c).to_pylist() for c in COLUMNS), strict=True)
        else:
            with open(f.path, "rb") as fh:
                for line in fh:
                    obj = orjson.loads(line)
                    yield tuple(obj.get(c) for c in COLUMNS)


def read_records(directory: str) -> Iterator[dict[str, Any]]:
    """Every row as a dict of every column, file by file in offset order. A
    column the file lacks (``batch_offset`` in an export from before it) is None."""
    fmt = input_format(directory)
    for f in export_files(directory):
        if fmt == "parquet":
            source = pq.ParquetFile(f.path)
            present = [c for c in COLUMN_NAMES if c in source.schema_arrow.names]
            missing = [c for c in COLUMN_NAMES if c not in present]
            for batch in source.iter_batches(batch_size=65536, columns=present):
                for row in batch.to_pylist():
                    for c in missing:
                        row[c] = None
                    yield row
        else:
            with open(f.path, "rb") as fh:
                for line in fh:
                    row = orjson.loads(line)
                    for c in COLUMN_NAMES:
                        row.setdefault(c, None)
                    yield row


def replay_checker(directory: str) -> LogInvariants:
    """The export replayed through the invariants; ``finish()`` gives the violations."""
    checker = LogInvariants()
    for row in read_records(directory):
        record = record_from_row(row)
        if row["from_snapshot"]:
            checker.restore(row["offset"], row["controller_epoch"], record)
        else:
            checker.check(
                row["offset"], row["timestamp_ms"], row["controller_epoch"],
                row["batch_offset"], record,
            )  # fmt: skip
    return checker


def replay_audit(directory: str, with_who: bool = False) -> tuple[list[tuple], int]:
    """(violations as (offset, timestamp_ms, check, entity, explanation), rows
    read); ``with_who``: each followed by the who of the record at its offset
    and its batch (``who.VIOLATION_WHO``), as the Spark audit writes them."""
    checker = replay_checker(directory)
    violations = checker.finish()
    rows = checker.records + checker.restored
    found = [(v.offset, v.timestamp_ms, v.rule, v.entity, v.message) for v in violations]
    if with_who:
        whos = who_at(directory, {v[0] for v in found})
        found = [v + whos.get(v[0], _NO_VIOLATION_WHO) for v in found]
    return found, rows


_WHO_READ = ("offset", "from_snapshot", "batch_offset", *WHO_COLUMNS)
_NO_VIOLATION_WHO = (*NO_WHO, None)


def _nulls_first(values: tuple) -> tuple:
    """Spark's order of structs: field by field, a null before any value."""
    return tuple((v is not None, v) for v in values)


def who_at(directory: str, offsets: set[int]) -> dict[int, tuple]:
    """The who of the log record at each of ``offsets``, then its batch (the
    offset itself without batch_offset); of several records at one offset (a
    corrupt log), the least, as Spark's ``min`` takes it. A second pass over
    the export, reading only these columns."""
    out: dict[int, tuple] = {}
    if not offsets:
        return out
    for row in _columns(directory, _WHO_READ):
        offset = row["offset"]
        if offset not in offsets or row["from_snapshot"]:
            continue
        batch = row.get("batch_offset")
        who = (*(row.get(c) for c in WHO_COLUMNS), offset if batch is None else batch)
        if offset not in out or _nulls_first(who) < _nulls_first(out[offset]):
            out[offset] = who
    return out


def _columns(directory: str, columns: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """Rows as dicts of those of ``columns`` each file has, in offset order."""
    fmt = input_format(directory)
    for f in export_files(directory):
        if fmt == "parquet":
            source = pq.ParquetFile(f.path)
            present = [c for c in columns if c in source.schema_arrow.names]
            for batch in source.iter_batches(batch_size=65536, columns=present):
                values = (batch.column(c).to_pylist() for c in present)
                for row in zip(*values, strict=True):
                    yield dict(zip(present, row, strict=True))
        else:
            with open(f.path, "rb") as fh:
                for line in fh:
                    yield orjson.loads(line)


def main() -> None:  # python -m pipeline.replay_audit DIR
    import sys
    import time

    start = time.perf_counter()
    violations, n = replay_audit(sys.argv[1])
    for v in violations:
        print(*v, sep="\t")
    print(f"{n} records, {len(violations)} violations, {time.perf_counter() - start:.1f} s",
          file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
