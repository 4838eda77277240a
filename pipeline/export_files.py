"""An export directory: the log as files named by the offset range they hold.

``records-<first>-<last>.parquet`` (or ``.jsonl``), offsets zero-padded so the
names sort in log order. A file is written under a hidden temporary name and
renamed when complete, so a reader (or a crash) never sees half a file; a
re-run continues after the last complete file.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass

import orjson
import pyarrow.parquet as pq

from metadata_records.records import Record

from .schema import NO_WHO, ColumnBuffer

FORMATS = ("parquet", "jsonl")
_NAME = re.compile(r"^records-(\d{20})-(\d{20})\.(parquet|jsonl)$")
TMP_PREFIX = ".tmp-"
# Rows per Parquet row group: Spark splits a file only between row groups, so
# a file of 1,000,000 records in one group (pyarrow's default) is read by one
# task on one core; in groups of 131,072 it is 8 splits every core can share.
ROW_GROUP_ROWS = 131_072


class ExportDirError(Exception):
    """The output directory cannot take this export (the message says why)."""


@dataclass(frozen=True)
class ExportFile:
    path: str
    first: int
    last: int
    fmt: str


def export_files(directory: str, names: list[str] | None = None) -> list[ExportFile]:
    """The complete files of an export directory, in offset order. ``names``:
    the directory's listing, when it is not on this machine's file system (a
    URL Spark lists)."""
    if names is None:
        names = os.listdir(directory) if os.path.isdir(directory) else []
    files = []
    for name in names:
        m = _NAME.match(name)
        if m:
            path = f"{directory.rstrip('/')}/{name}"
            files.append(ExportFile(path, int(m[1]), int(m[2]), m[3]))
    return sorted(files, key=lambda f: (f.first, f.last))


def input_format(directory: str, names: list[str] | None = None) -> str:
    """The one format an export directory holds; ExportDirError if none or mixed."""
    if names is None and not os.path.isdir(directory):
        raise ExportDirError(f"{directory} is not a directory (run `metaquorum export` first)")
    formats = {f.fmt for f in export_files(directory, names)}
    if not formats:
        raise ExportDirError(
            f"{directory} holds no exported records (records-*.parquet or records-*.jsonl); "
            "run `metaquorum export --out` into it first"
        )
    if len(formats) > 1:
        raise ExportDirError(f"{directory} mixes formats {sorted(formats)}: export into one format")
    return formats.pop()


def _bytes_as_base64(value: object) -> str:
    """A binary column's value in a JSON line: base64, as the record codec
    writes bytes (UserScramCredentialRecord's, empty in an export)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON")


class OffsetRangeWriter:
    """Buffers records and writes each ``records_per_file`` of them as one file."""

    def __init__(self, directory: str, fmt: str = "parquet", records_per_file: int = 1_000_000):
        if fmt not in FORMATS:
            raise ExportDirError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
        if records_per_file < 1:
            raise ExportDirError("records per file must be at least 1")
        self.directory = directory
        self.fmt = fmt
        self.records_per_file = records_per_file
        os.makedirs(directory, exist_ok=True)
        for name in os.listdir(directory):  # what a crashed run left: never complete
            if name.startswith(TMP_PREFIX):
                os.unlink(os.path.join(directory, name))
        existing = export_files(directory)
        other = {f.fmt for f in existing} - {fmt}
        if other:
            raise ExportDirError(
                f"{directory} already holds {other.pop()} files; export with that --format "
                "or into another directory"
            )
        self.next_offset: int | None = existing[-1].last + 1 if existing else None
        self.files_written: list[str] = []
        self.records_written = 0
        self._buffer = ColumnBuffer()
        self._tmp: str | None = None

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
        self._buffer.add(
            offset, timestamp_ms, controller_epoch, record, from_snapshot, seq,
            batch_offset=batch_offset, who=who,
        )  # fmt: skip
        if self._buffer.rows >= self.records_per_file and not from_snapshot:
            self.flush()

    def flush(self) -> None:
        buf = self._buffer
        if buf.rows == 0:
            return
        name = f"records-{buf.first_offset:020d}-{buf.last_offset:020d}.{self.fmt}"
        final = os.path.join(self.directory, name)
        self._tmp = os.path.join(self.directory, TMP_PREFIX + name)
        table = buf.table()
        if self.fmt == "parquet":
            pq.write_table(table, self._tmp, compression="zstd", row_group_size=ROW_GROUP_ROWS)
        else:
            with open(self._tmp, "wb") as f:
                for row in table.to_pylist():
                    f.write(orjson.dumps(row, default=_bytes_as_base64) + b"\n")
        with open(self._tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(self._tmp, final)
        self._tmp = None
        self.files_written.append(final)
        self.records_written += buf.rows
        self.next_offset = buf.last_offset + 1
        self._buffer = ColumnBuffer()

    def abort(self) -> int:
        """Drops what is buffered (and a file being written); returns how many records."""
        dropped = self._buffer.rows
        if self._tmp is not None and os.path.exists(self._tmp):
            os.unlink(self._tmp)
        self._tmp = None
        self._buffer = ColumnBuffer()
        return dropped
