"""An export directory: the log as files named by the offset range they hold.

``records-<first>-<last>.parquet`` (or ``.jsonl``), offsets zero-padded so the
names sort in log order. A file is written under a hidden temporary name and
renamed when complete, so a reader (or a crash) never sees half a file; a
re-run continues after the last complete file.

The directory is a path on this machine, or a URL of storage every Spark
worker reads (``file:///mnt/shared/log``, ``s3a://bucket/log``,
``hdfs://namenode:8020/log``), written through pyarrow's file systems: one
code path for every scheme, the same names, the same hidden temporary file
and rename (on S3 a rename is a server-side copy and a delete; a file of a
million records is a few MB).
"""

from __future__ import annotations

import base64
import os
import re
import urllib.parse
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


def is_url(path: str) -> bool:
    """``hdfs://...``, ``s3a://...``, ``file:///...``: not a path on this machine."""
    return "://" in path


# Hadoop's names for S3 (s3a:// is the one Spark reads) and pyarrow's name the same objects.
S3_SCHEMES = ("s3", "s3a", "s3n")
# Where the S3 API is, when it is not AWS's (MinIO, Ceph, a local server): the
# AWS CLI's and SDKs' variables, read here as pyarrow does not read them.
S3_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def url_filesystem(url: str):
    """The pyarrow FileSystem of a directory URL and the path in it.
    ExportDirError naming the URL when pyarrow cannot open it (an unknown
    scheme, HDFS without Hadoop's libhdfs and a JVM, ...)."""
    import pyarrow
    import pyarrow.fs as pafs

    scheme, _, rest = url.partition("://")
    try:
        if scheme.lower() in S3_SCHEMES:
            endpoint = next((os.environ[v] for v in S3_ENDPOINT_VARIABLES if os.environ.get(v)), "")
            options = {}
            if endpoint:
                parts = urllib.parse.urlsplit(endpoint)
                options = {"endpoint_override": parts.netloc or parts.path,
                           "scheme": parts.scheme or "https"}  # fmt: skip
            bucket = rest.split("/", 1)[0]
            if not bucket:
                raise ValueError("no bucket named")
            return pafs.S3FileSystem(**options), rest.strip("/")
        fs, path = pafs.FileSystem.from_uri(url)
        return fs, path.rstrip("/") or "/"
    except (OSError, ValueError, pyarrow.ArrowException) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        hint = ""
        if scheme.lower() == "hdfs":
            hint = (" (pyarrow writes to HDFS through Hadoop's libhdfs and a JVM: set "
                    "HADOOP_HOME, JAVA_HOME and CLASSPATH=$(hadoop classpath --glob); or export "
                    "to a local directory and `hdfs dfs -put` it)")  # fmt: skip
        raise ExportDirError(f"cannot open {url}: {first}{hint}") from None


class _LocalDir:
    """An export directory on this machine: written, fsynced, renamed."""

    def __init__(self, directory: str):
        self.directory = directory

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def create(self) -> None:
        os.makedirs(self.directory, exist_ok=True)

    def names(self) -> list[str]:
        return os.listdir(self.directory) if os.path.isdir(self.directory) else []

    def remove(self, name: str) -> None:
        if os.path.exists(self.path(name)):
            os.unlink(self.path(name))

    def open(self, name: str):
        return open(self.path(name), "wb")

    def commit(self, tmp: str, final: str) -> None:
        with open(self.path(tmp), "rb") as f:
            os.fsync(f.fileno())
        os.replace(self.path(tmp), self.path(final))


class _UrlDir:
    """An export directory named by a URL, through pyarrow's file systems."""

    def __init__(self, url: str):
        self.directory = url.rstrip("/")
        self.fs, self.root = url_filesystem(url)

    def path(self, name: str) -> str:
        return f"{self.directory}/{name}"

    def _at(self, name: str) -> str:
        return f"{self.root.rstrip('/')}/{name}"

    def create(self) -> None:
        self.fs.create_dir(self.root, recursive=True)

    def names(self) -> list[str]:
        import pyarrow.fs as pafs

        infos = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
        return [i.base_name for i in infos if i.type == pafs.FileType.File]

    def remove(self, name: str) -> None:
        try:
            self.fs.delete_file(self._at(name))
        except FileNotFoundError:
            pass

    def open(self, name: str):
        return self.fs.open_output_stream(self._at(name))

    def commit(self, tmp: str, final: str) -> None:
        if self.fs.type_name == "local":  # file://: as durable as a path
            with open(self._at(tmp), "rb") as f:
                os.fsync(f.fileno())
        self.fs.move(self._at(tmp), self._at(final))


def export_dir(directory: str) -> _LocalDir | _UrlDir:
    return _UrlDir(directory) if is_url(directory) else _LocalDir(directory)


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
        self._dir = export_dir(directory)
        try:
            self._dir.create()
            names = self._dir.names()
            for name in names:  # what a crashed run left: never complete
                if name.startswith(TMP_PREFIX):
                    self._dir.remove(name)
        except OSError as e:
            # pyarrow's advice names its own option; the export never creates a bucket.
            why = str(e).replace(
                "To create buckets, enable the allow_bucket_creation option.",
                "The export creates no bucket: create it first.",
            )
            raise ExportDirError(f"cannot write to {directory}: {why}") from None
        existing = export_files(directory, [n for n in names if not n.startswith(TMP_PREFIX)])
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
        self._tmp = TMP_PREFIX + name
        table = buf.table()
        try:
            with self._dir.open(self._tmp) as f:
                if self.fmt == "parquet":
                    pq.write_table(table, f, compression="zstd", row_group_size=ROW_GROUP_ROWS)
                else:
                    for row in table.to_pylist():
                        f.write(orjson.dumps(row, default=_bytes_as_base64) + b"\n")
            self._dir.commit(self._tmp, name)
        except OSError as e:
            raise ExportDirError(f"cannot write {name} to {self.directory}: {e}") from e
        self._tmp = None
        self.files_written.append(self._dir.path(name))
        self.records_written += buf.rows
        self.next_offset = buf.last_offset + 1
        self._buffer = ColumnBuffer()

    def write_text(self, name: str, data: bytes) -> None:
        """A small file beside the records (synth-log's PLANTED.json)."""
        with self._dir.open(name) as f:
            f.write(data)

    def abort(self) -> int:
        """Drops what is buffered (and a file being written); returns how many records."""
        dropped = self._buffer.rows
        if self._tmp is not None:
            try:
                self._dir.remove(self._tmp)
            except OSError:  # storage gone: a re-run removes it
                pass
        self._tmp = None
        self._buffer = ColumnBuffer()
        return dropped
