"""``metaquorum export``: the metadata log as files for the pipeline.

Two sources, one output: a live node over HTTP (``GET /v1/log`` page by page,
``GET /v1/snapshot`` first when the log no longer reaches back far enough) or
a voter's data dir read offline (its snapshot, then its journal replayed by
the service's own apply code). Either way a record keeps the offset the
service gave it, and every record is decoded and checked before it is written:
a corrupt or truncated source stops the export with the offset it broke at,
and only complete files are ever left in the output. A record keeps who asked
for it (``"who"`` of GET /v1/log, the retained log entry's ``who`` in a data
dir) in the who columns; a source from before who leaves them null, as it
leaves ``batch_offset``.

The values of sensitive configs (PASSWORDs, configs of unknown type) are
written as Kafka's marker, ``(redacted)``, unless ``include_sensitive`` (the
CLI's ``--include-sensitive``): files outlive the log and travel further than
the voters. From a node, the values then come with ``includeSensitive=true``,
which the node answers only for an admin (403 for any other role, so the
export stops rather than write markers in their place); from a data dir there
is no caller to check: whoever reads the dir holds the values already.
SCRAM credentials' salts and keys are never written, include_sensitive or
not (metadata_records/redaction.py): the records keep user, mechanism and
iterations.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

import httpx
import orjson
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from api.reads import snapshot_records
from metadata_records.codec import DecodeError, brief, record_from_obj
from metadata_records.redaction import redacted
from pipeline.export_files import ExportDirError, OffsetRangeWriter
from pipeline.schema import NO_WHO, WHO_KEYS, who_row
from quorum.data_dir_reader import DataDirError, read_data_dir

PAGE = 10_000  # GET /v1/log's maxRecords limit
NDJSON = "application/x-ndjson"


class ExportError(Exception):
    """The export stopped; the message names the offset and what to do."""


@dataclass
class ExportResult:
    first_offset: int | None
    next_offset: int | None
    records: int
    files: list[str]
    note: str | None = None


def _progress(quiet: bool) -> Progress:
    return Progress(
        TextColumn("[bold]export[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("records"),
        TimeRemainingColumn(),
        disable=quiet,
        transient=False,
    )


def run_export(
    out: str,
    *,
    url: str | None = None,
    data_dir: str | None = None,
    fmt: str = "parquet",
    from_offset: int | None = None,
    token: str | None = None,
    records_per_file: int = 1_000_000,
    include_uncommitted: bool = False,
    quiet: bool = False,
    verify: ssl.SSLContext | bool = True,
    include_sensitive: bool = False,
) -> ExportResult:
    if (url is None) == (data_dir is None):
        raise ExportError("give exactly one source: --url URL or --data-dir DIR")
    if from_offset is not None and from_offset < 0:
        raise ExportError(f"--from must be an offset >= 0, not {from_offset}")
    try:
        writer = OffsetRangeWriter(out, fmt, records_per_file)
    except ExportDirError as e:
        raise ExportError(str(e)) from None
    writer = _Redacting(writer, include_sensitive)
    start = from_offset if from_offset is not None else 0
    note = None
    if writer.next_offset is not None:
        if from_offset is not None and from_offset > writer.next_offset:
            raise ExportError(
                f"{out} holds offsets up to {writer.next_offset - 1}; --from {from_offset} "
                f"would leave a gap: use --from {writer.next_offset} (or no --from)"
            )
        if start < writer.next_offset:
            note = (
                f"{out} already holds offsets up to {writer.next_offset - 1}: "
                f"continuing from {writer.next_offset}"
            )
        start = writer.next_offset
    try:
        with _progress(quiet) as progress:
            if url is not None:
                _from_url(
                    writer, url.rstrip("/"), start, token, progress, out, verify, include_sensitive
                )
            else:
                note = (
                    _from_data_dir(writer, data_dir, start, include_uncommitted, progress) or note
                )
        writer.flush()
    except ExportDirError as e:  # the output could not take a file (storage gone, full, denied)
        writer.abort()
        raise ExportError(str(e)) from None
    except BaseException:
        writer.abort()
        raise
    first = None
    if writer.files_written:
        first = int(os.path.basename(writer.files_written[0]).split("-")[1])
    return ExportResult(
        first, writer.next_offset, writer.records_written, writer.files_written, note
    )


class _Redacting:
    """The writer, with every record redacted before it is written (a node
    has redacted them already; a data dir has not): SCRAM secrets always,
    sensitive config values unless ``include_sensitive``."""

    def __init__(self, writer: OffsetRangeWriter, include_sensitive: bool) -> None:
        self._writer = writer
        self._sensitive = include_sensitive

    def add(self, offset, timestamp_ms, epoch, record, *args, **kwargs) -> None:
        record = redacted(record, self._sensitive)
        self._writer.add(offset, timestamp_ms, epoch, record, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._writer, name)


# ---------------------------------------------------------------- HTTP


def _get(client: httpx.Client, url: str, params: dict | None = None) -> httpx.Response:
    try:
        return client.get(url, params=params, headers={"Accept": NDJSON})
    except httpx.HTTPError as e:
        from brokers.tls import explain  # noqa: PLC0415

        tls_problem = explain(e, url)
        if tls_problem is not None:
            raise ExportError(tls_problem) from None
        raise ExportError(f"GET {url} failed: {e}; is the node up? (--url)") from None


def _records(body: bytes, expected: int | None, what: str):
    """Decoded (obj, record) per NDJSON line; ExportError names the bad offset."""
    for n, line in enumerate(body.split(b"\n")):
        if not line.strip():
            continue
        at = f"offset {expected}" if expected is not None else f"line {n + 1}"
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise ExportError(f"{what}: the record at {at} is not JSON (truncated?): {e}") from None
        if type(obj) is not dict or type(obj.get("offset")) is not int:
            raise ExportError(f"{what}: the record at {at} has no offset")
        if expected is not None and obj["offset"] != expected:
            raise ExportError(
                f"{what}: expected offset {expected}, got {obj['offset']} (the log is not dense)"
            )
        try:
            record = record_from_obj(obj, f"offset {obj['offset']}")
        except DecodeError as e:
            raise ExportError(f"{what}: corrupt record: {e}") from None
        ts, epoch = obj.get("timestampMs"), obj.get("controllerEpoch")
        if type(ts) is not int or type(epoch) is not int:
            raise ExportError(f"{what}: the record at offset {obj['offset']} lacks its envelope")
        # A server from before batchOffset leaves it out: exported as null,
        # which readers take as a batch of its own.
        batch_offset = obj.get("batchOffset")
        if batch_offset is not None and (
            type(batch_offset) is not int or not 0 <= batch_offset <= obj["offset"]
        ):
            raise ExportError(
                f"{what}: the record at offset {obj['offset']} has batchOffset "
                f"{brief(batch_offset)}, which is not an offset at or before its own"
            )
        yield obj["offset"], ts, epoch, record, batch_offset, _who(obj, what)
        if expected is not None:
            expected += 1


def _who(obj: dict, what: str) -> tuple:
    """The record's who columns; a server from before who (or a batch without
    one) leaves it out: null columns, as for batch_offset."""
    who = obj.get("who")
    if who is None:
        return NO_WHO
    if (
        type(who) is not dict
        or not all(type(who.get(key, "")) is str for key in WHO_KEYS)
        or not who.get("principal")
        or not who.get("api")
    ):
        raise ExportError(
            f"{what}: the record at offset {obj['offset']} has who {brief(who)}, which is not "
            "an object of strings with a principal and an api"
        )
    return who_row(who)


def _from_url(writer, url, start, token, progress, out, verify=True, sensitive=False) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(
        timeout=60.0,
        headers=headers,
        follow_redirects=True,
        verify=verify,
        params={"includeSensitive": "true" if sensitive else "false"},
    ) as client:
        r = _get(client, f"{url}/v1/log", {"fromOffset": start, "maxRecords": 1})
        if r.status_code == 403 and sensitive:
            raise ExportError(
                "--include-sensitive needs an admin token or certificate; the node answered "
                f"403: {_message(r)}. Export without it to write sensitive config values as "
                "(redacted)"
            )
        if r.status_code == 410:
            oldest = r.json().get("oldestOffset")
            if writer.next_offset is not None or start > 0:
                raise ExportError(
                    f"the node no longer holds offset {start} (its oldest is {oldest}); export "
                    "into a new directory without --from to start from its snapshot"
                )
            start = _snapshot_from_url(writer, client, url)
        elif r.status_code != 200:
            raise ExportError(f"GET {url}/v1/log answered {r.status_code}: {r.text[:200]}")
        task = progress.add_task("export", total=None)
        offset = start
        while True:
            r = _get(client, f"{url}/v1/log", {"fromOffset": offset, "maxRecords": PAGE})
            if r.status_code != 200:
                raise ExportError(
                    f"GET {url}/v1/log?fromOffset={offset} answered {r.status_code}: {r.text[:200]}"
                )
            hw = int(r.headers.get("X-High-Watermark", "0"))
            progress.update(task, total=max(hw - start, 0))
            for off, ts, epoch, record, batch, who in _records(r.content, offset, f"{url}/v1/log"):
                writer.add(off, ts, epoch, record, batch_offset=batch, who=who)
                offset = off + 1
            progress.update(task, completed=offset - start)
            if offset >= hw:
                return


def _message(r: httpx.Response) -> str:
    try:
        return str(r.json().get("errorMessage"))
    except ValueError:
        return r.text[:200]


def _snapshot_from_url(writer, client, url) -> int:
    r = _get(client, f"{url}/v1/snapshot")
    if r.status_code != 200:
        raise ExportError(f"GET {url}/v1/snapshot answered {r.status_code}: {r.text[:200]}")
    records = _records(r.content, None, f"{url}/v1/snapshot")
    for seq, (off, ts, epoch, record, batch, _who) in enumerate(records):
        # A snapshot restates the image: its rows have no who (the batches
        # that made it are gone).
        writer.add(off, ts, epoch, record, from_snapshot=True, seq=seq, batch_offset=batch)
    return int(r.headers["X-Next-Offset"])


# ---------------------------------------------------------------- data dir


def _from_data_dir(writer, data_dir, start, include_uncommitted, progress) -> str | None:
    try:
        source = read_data_dir(data_dir, include_uncommitted)
    except DataDirError as e:
        raise ExportError(str(e)) from None
    image = source.snapshot
    if image is not None and image.next_offset > start:
        if start > 0:
            raise ExportError(
                f"{data_dir}'s snapshot already covers offsets up to {image.last_offset}, so "
                f"offset {start} is no longer in its journal; export into a new directory"
            )
        ts = int(os.path.getmtime(os.path.join(data_dir, "raft.snapshot")) * 1000)
        for seq, record in enumerate(snapshot_records(image)):
            offset = image.last_offset
            writer.add(offset, ts, image.controller_epoch, record, True, seq, batch_offset=offset)
    task = progress.add_task("export", total=source.journal_entries)
    try:
        for batch in source.entries:
            for e in batch:
                if e.offset >= start:
                    writer.add(
                        e.offset, e.timestamp_ms, e.controller_epoch, e.record,
                        batch_offset=e.batch_offset, who=_entry_who(e),
                    )  # fmt: skip
            progress.advance(task)
    except DataDirError as e:
        raise ExportError(str(e)) from None
    if source.held_back:
        return (
            f"{source.held_back} journal entries after the commit index stored in the data dir "
            f"({source.commit_index}) were not exported (they may not be committed); "
            "--uncommitted exports them too"
        )
    return None


def _entry_who(entry) -> tuple:
    """The who columns of a retained log entry: its ``who`` (a
    ``metadata_records.records.Who``) where the entry carries one."""
    who = getattr(entry, "who", None)
    if not who:
        return NO_WHO
    return tuple(
        getattr(who, attr) or None for attr in ("principal", "api", "address", "request_id", "rule")
    )
