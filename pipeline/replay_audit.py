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
from .schema import COLUMN_NAMES, record_from_row

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


def replay_audit(directory: str) -> tuple[list[tuple], int]:
    """(violations as (offset, timestamp_ms, check, entity, explanation), rows read)."""
    checker = replay_checker(directory)
    violations = checker.finish()
    rows = checker.records + checker.restored
    return [(v.offset, v.timestamp_ms, v.rule, v.entity, v.message) for v in violations], rows


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
