"""The replicated state machine pysyncobj drives: one entry point, ``apply_batch``.

Rules learned the hard way (docs/pysyncobj.md section 0):
* one replicated method forever (method ids are positional in the journal);
* ``apply_batch`` never raises (a raising apply wedges every voter);
* the image is published as one immutable object per batch, so the HTTP
  thread reads it without locks;
* snapshots are our own format (the image codec), never pickled classes.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import hashlib
import logging
import os
import signal
import time
from collections.abc import Callable

import orjson
from pysyncobj import SyncObjConsumer, replicated
from pysyncobj.config import SERIALIZER_STATE

from metadata_records.codec import DecodeError, decode_batch
from metadata_records.delta import ImageDelta, batch_applies
from metadata_records.image import EMPTY_IMAGE, MetadataImage
from metadata_records.image_file import ImageFile, rebased
from metadata_records.records import Batch
from metadata_records.snapshot import decode_image, encode_image

from . import stage_trace
from .disk_health import (
    SPACE_ERRNOS,
    WHAT_TO_FREE,
    DiskHealth,
    free_bytes,
    human_bytes,
    snapshot_backoff_s,
    snapshot_no_room_message,
    snapshot_room_needed,
)
from .history import HistoryWriter
from .log_limiter import RateLimitedLog
from .raft import internals
from .raft.durability import fsync_dir
from .record_log import RecordLog

log = logging.getLogger(__name__)

SLOW_FORK_MS = 100  # a snapshot fork this long is logged as a warning

# The one switch of the leader's apply: True takes the controller's view of a
# batch it proposed (``expect(..., view=)``) as the image when the view holds
# exactly that batch on top of the current image; False replays every batch.
# Listed with every other speed switch in metaquorum/speed_switches.py.
ADOPT_VIEW = True

# apply_batch results, as its callback sees them
STALE = -1  # decided under another controller epoch, or for another offset: a no-op
INVALID = -2  # not a batch at all (never written by a metaquorum leader)

# 2: the header carries its own SHA-256 (format 1, still read, had the image's only).
SNAPSHOT_FORMAT = 2
SNAPSHOT_FORMATS = (1, 2)
SNAPSHOT_TIMEOUT_S = 300
SNAPSHOT_EXIT_NO_SPACE = 28  # the writer's exit code when the disk filled up (ENOSPC)
ENTRY_OFFSETS_KEPT = 100_000


class SnapshotError(Exception):
    """A snapshot file that cannot be trusted; the node must not serve from it."""


class MetadataStateMachine(SyncObjConsumer):
    def __init__(self, log_retention: int = 200_000) -> None:
        super().__init__()
        self.image: MetadataImage = EMPTY_IMAGE
        self.log = RecordLog(log_retention)
        self.stale_batches = 0
        self.views_adopted = 0  # own batches applied as the controller's view (ADOPT_VIEW)
        # Batches of records applied (the orderer's: it decides what comes next
        # once it hears of each; raft_port.defer_commit_push).
        self.record_batches = 0
        # timestampMs of the last batch applied that held records (0: none since
        # start): Kafka's LastAppliedRecordTimestamp, kept fresh on an idle
        # cluster by the periodic NoOpRecord.
        self.last_applied_timestamp_ms = 0
        self.invalid_batches = 0
        self.apply_errors = 0
        self.fatal: str | None = None  # set when the node must stop serving
        self._expected: dict[bytes, Batch] = {}
        self._snapshot_pid = 0
        self._snapshot_started = 0.0
        self.snapshots_written = 0
        self.snapshot_failures = 0
        # Set by the node: room is checked before a snapshot, failures back off.
        self.disk: DiskHealth | None = None
        self.journal_file: str | None = None
        self._snapshot_path = ""
        self._snapshot_failures_in_row = 0
        self._snapshot_retry_at = 0.0
        # pysyncobj's Serializer calls the serializer again only after the
        # checker said SUCCESS or FAILED: a snapshot declined (backing off, no
        # room) is reported FAILED once, or compaction would stop for good.
        self._snapshot_declined = False
        self._snapshot_reminders = RateLimitedLog(log, period_s=60.0, burst=1)
        # The core's history store (quorum/history.py): every applied batch
        # and every snapshot written or loaded; None elsewhere.
        self.history: HistoryWriter | None = None
        self._snapshot_offset = 0  # the next offset of the image being written
        # With HTTP workers, the core's newest image file (voter/shared_image.py),
        # taken once the image reaches its offset (take_newer_file: before the
        # next batch applies, or when a worker's follower asks), so every
        # process of the voter reads what it has not changed since from it.
        self.newer_file: ImageFile | None = None
        self.file_rebases = 0
        # Called on the apply thread after each applied entry; must not raise.
        self.on_applied: Callable[[], None] | None = None
        # Raft index -> next record offset after it, for recent entries: voter
        # lag in records (KIP-836) from pysyncobj's lag in entries (batches).
        self._entry_index: list[int] = []
        self._entry_offset: list[int] = []

    def expect(
        self,
        payload: bytes,
        batch: Batch,
        known: dict | None = None,
        view: ImageDelta | None = None,
    ) -> None:
        """The leader proposes ``payload``, encoded from ``batch``: its apply can
        reuse the batch instead of decoding the bytes back (codec round trips
        are exact, which the codec's property tests check), and the partition
        registrations its controller already computed (``known``, as
        ControllerResult.merged) where they still apply.

        ``view``: the controller's view that holds this batch as its last
        records, when nothing else will be replayed into it while the batch is
        in flight (one batch in flight). If, when the batch applies, the view
        is still that batch exactly on top of the image, the view becomes the
        image (``ImageDelta.apply``) and the batch is not replayed a second
        time (decisions.md 115)."""
        end = None if view is None else view.next_offset
        self._expected[payload] = (batch, known, view, end)
        while len(self._expected) > 8:  # the batches in flight, plus barriers
            self._expected.pop(next(iter(self._expected)))

    @replicated
    def apply_batch(self, payload: bytes) -> int:
        """Applies one batch; returns its first offset, or STALE / INVALID."""
        if self.fatal is not None:
            return INVALID  # refusing to serve: the image must not move any more
        try:
            try:
                expected = self._expected.pop(payload, None)
                if expected is None:
                    batch, known, view, end = decode_batch(payload), None, None, None
                else:
                    batch, known, view, end = expected
            except DecodeError as e:
                self.invalid_batches += 1
                log.error("ignoring a Raft entry that is not a metadata batch: %s", e)
                return INVALID
            image = self.image
            if self.newer_file is not None:
                self.take_newer_file()
                image = self.image
            if not batch_applies(image.controller_epoch, batch, image.next_offset):
                self.stale_batches += 1
                return STALE
            if (
                ADOPT_VIEW
                and view is not None
                and view.image is image
                and view.next_offset == end == image.next_offset + len(batch.records)
            ):
                # The controller's view is this image and exactly this batch.
                self.views_adopted += 1
                delta = view
            else:
                delta = ImageDelta(image)
                if known:
                    # Identity-checked: a registration that is no longer current
                    # (anything but this leader's own batches in order) is merged.
                    delta.replay_merged(batch.records, known)
                else:
                    delta.replay_records(batch.records)
            self.log.append(batch, image.next_offset, payload)
            if self.history is not None and batch.records:
                self.history.append(
                    image.next_offset, len(batch.records), batch.timestamp_ms, payload
                )
            self.image = delta.apply()
            if batch.records:
                self.last_applied_timestamp_ms = batch.timestamp_ms
                self.record_batches += 1
            return image.next_offset
        except Exception:  # never let pysyncobj see an exception: it would wedge
            self.apply_errors += 1
            log.exception("applying a batch failed; the batch is ignored")
            return INVALID
        finally:
            self._remember_entry()
            self._notify()
            if stage_trace.TRACE is not None:
                stage_trace.TRACE.mark("applied")

    def take_newer_file(self) -> bool:
        """The image read from ``newer_file`` if it has reached the file's
        offset (on the thread that moves the image: the core's apply thread,
        a worker's or the orderer's loop); True if it was taken."""
        newer = self.newer_file
        if newer is None or self.image.next_offset < newer.next_offset:
            return False
        self.newer_file = None
        try:
            self.image = rebased(self.image, newer)
        except ValueError as e:  # files come in order: never, but never back
            log.warning("an image file was skipped: %s", e)
            return False
        self.file_rebases += 1
        return True

    def _remember_entry(self) -> None:
        syncobj = self._syncObj
        if syncobj is None:
            return
        self._entry_index.append(syncobj.raftLastApplied + 1)  # the entry being applied
        self._entry_offset.append(self.image.next_offset)
        if len(self._entry_index) > 2 * ENTRY_OFFSETS_KEPT:
            del self._entry_index[:ENTRY_OFFSETS_KEPT]
            del self._entry_offset[:ENTRY_OFFSETS_KEPT]

    def next_offset_at(self, raft_index: int) -> int | None:
        """The record offset after Raft entry ``raft_index`` (None if not known:
        not applied yet, older than the entries kept, or before a snapshot)."""
        if not self._entry_index or raft_index > self._entry_index[-1]:
            return None
        i = bisect.bisect_right(self._entry_index, raft_index) - 1
        return self._entry_offset[i] if i >= 0 else None

    def _notify(self) -> None:
        callback = self.on_applied
        if callback is not None:
            try:
                callback()
            except Exception:
                log.exception("on_applied callback failed")

    # ------------------------------------------------------------ snapshots

    def write_snapshot(self, tmp_name: str, raft_data: tuple) -> None:
        """pysyncobj ``serializer``: the image at the last applied entry, plus
        pysyncobj's own bookkeeping (two journal entries and the voters).

        Encoding a large image takes seconds, and this runs on the tick thread,
        so a forked child writes it (copy-on-write of an immutable image) to
        ``<dump>.part`` and renames it over the dump when complete and synced;
        ``snapshot_state`` reports progress to pysyncobj. A crash mid-write
        leaves the previous snapshot in place."""
        if self._snapshot_pid:
            return
        if time.monotonic() < self._snapshot_retry_at:
            self._snapshot_declined = True  # pysyncobj asks on every tick; we back off
            return
        final = tmp_name[: -len(".tmp")] if tmp_name.endswith(".tmp") else tmp_name
        self._snapshot_path = final
        if not self._room_for_snapshot(final):
            self._snapshot_declined = True
            return
        image, (last, prev, cluster) = self.image, raft_data
        self._snapshot_offset = image.next_offset
        started = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # the child: write, sync, rename, exit; never return into pysyncobj
            code = 1
            try:
                write_snapshot_file(final, image, last, prev, cluster)
                code = 0
            except OSError as e:
                code = SNAPSHOT_EXIT_NO_SPACE if e.errno in SPACE_ERRNOS else 1
            finally:
                if code:  # a half-written snapshot would only take the room it lacked
                    with contextlib.suppress(OSError):
                        os.unlink(final + ".part")
                os._exit(code)
        self._snapshot_pid = pid
        self._snapshot_started = time.monotonic()
        # fork copies the page tables with the Raft thread (and the GIL) held:
        # proportional to the heap, and a pause for every request in flight.
        forked_ms = (time.perf_counter() - started) * 1000
        log.log(
            logging.WARNING if forked_ms >= SLOW_FORK_MS else logging.INFO,
            "snapshot at offset %d (%d partitions): forking its writer took %.0f ms",
            image.next_offset,
            image.partition_count,
            forked_ms,
        )

    def _room_for_snapshot(self, final: str) -> bool:
        """Whether the data dir has room for a new snapshot beside the old one
        and the journal (disk_health.snapshot_room_needed); if not, says so
        and backs off. A snapshot that ran out of room halfway cost a fork and
        left its part file taking the room."""
        if self.disk is None:
            return True
        free = free_bytes(os.path.dirname(os.path.abspath(final)))
        if free is None:
            return True
        needed = snapshot_room_needed(_size(final), _size(self.journal_file))
        if free >= needed:
            return True
        self.snapshot_failures += 1
        self._snapshot_failed(
            lambda retry_s: snapshot_no_room_message(self.disk.path, free, needed, retry_s)
        )
        return False

    def _snapshot_failed(self, message: Callable[[float], str]) -> None:
        """The first failure in a row is an error line; the next attempts back
        off (1, 2, 4 ... 60 s) and remind at most once a minute."""
        self._snapshot_failures_in_row += 1
        retry_s = snapshot_backoff_s(self._snapshot_failures_in_row)
        self._snapshot_retry_at = time.monotonic() + retry_s
        if self._snapshot_failures_in_row == 1:
            log.error("%s", message(retry_s))
        else:
            self._snapshot_reminders.log(
                logging.WARNING,
                "%s (%d attempts in a row)",
                message(retry_s),
                self._snapshot_failures_in_row,
            )

    def _snapshot_succeeded(self) -> None:
        if self._snapshot_failures_in_row:
            log.warning(
                "snapshot written (before it: %d attempt(s) that failed or found no room)",
                self._snapshot_failures_in_row,
            )
        self._snapshot_failures_in_row = 0
        self._snapshot_retry_at = 0.0

    def finish_snapshot(self, timeout_s: float = 30.0) -> None:
        """On shutdown: let a snapshot being written finish (or kill it), so
        nothing renames a file into the data dir after the node has stopped."""
        pid = self._snapshot_pid
        if not pid:
            return
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    return
                time.sleep(0.01)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass  # already reaped
        finally:
            self._snapshot_pid = 0

    def snapshot_state(self) -> int:
        """pysyncobj ``serializeChecker``."""
        pid = self._snapshot_pid
        if not pid:
            if self._snapshot_declined:
                self._snapshot_declined = False
                return SERIALIZER_STATE.FAILED
            return SERIALIZER_STATE.NOT_SERIALIZING
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 1
        if done == 0:
            if time.monotonic() - self._snapshot_started < SNAPSHOT_TIMEOUT_S:
                return SERIALIZER_STATE.SERIALIZING
            # A child that hangs (e.g. on a lock another thread held at fork)
            # must not stop compaction for good: kill it and try again later.
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            self._snapshot_pid = 0
            self.snapshot_failures += 1
            with contextlib.suppress(OSError):
                os.unlink(self._snapshot_path + ".part")
            self._snapshot_failed(
                lambda retry_s: (
                    f"writing a snapshot took over {SNAPSHOT_TIMEOUT_S} s; the "
                    f"writer was killed; tried again in {retry_s:.0f} s"
                )
            )
            return SERIALIZER_STATE.FAILED
        self._snapshot_pid = 0
        code = os.waitstatus_to_exitcode(status)
        if code == 0:
            self.snapshots_written += 1
            log.info("snapshot written in %.1f s", time.monotonic() - self._snapshot_started)
            if self.history is not None:
                self.history.checkpoint(self._snapshot_path, self._snapshot_offset)
            self._snapshot_succeeded()
            return SERIALIZER_STATE.SUCCESS
        self.snapshot_failures += 1
        if code == SNAPSHOT_EXIT_NO_SPACE:
            free = free_bytes(os.path.dirname(os.path.abspath(self._snapshot_path)))
            self._snapshot_failed(
                lambda retry_s: (
                    f"disk full: writing the snapshot {self._snapshot_path} ran out "
                    f"of space ({human_bytes(free)} free now; its part file was deleted); the "
                    f"journal is not compacted meanwhile. Tried again in {retry_s:.0f} s. "
                    f"To fix: {WHAT_TO_FREE}"
                )
            )
        else:
            self._snapshot_failed(
                lambda retry_s: (
                    f"writing the snapshot {self._snapshot_path} failed (its writer "
                    f"exited with {code}); tried again in {retry_s:.0f} s"
                )
            )
        return SERIALIZER_STATE.FAILED

    def read_snapshot(self, file_name: str) -> tuple:
        """pysyncobj ``deserializer``: loads the image and returns the bookkeeping.

        Any doubt about the file sets ``fatal`` and raises: pysyncobj would
        otherwise carry on with an empty image as a normal member."""
        started = time.monotonic()
        try:
            header, image = read_snapshot_file(file_name)
            raft = header["raft"]
            result = (
                _entry_from_json(raft["last"]),
                _entry_from_json(raft["prev"]),
                _cluster_from_json(raft["cluster"]),
            )
        except Exception as e:  # noqa: BLE001 - any doubt: refuse, never serve an empty image
            self.fatal = f"snapshot {file_name} is corrupt or unreadable: {e}"
            log.error("%s", self.fatal)
            if isinstance(e, SnapshotError | OSError):
                raise
            raise SnapshotError(self.fatal) from e
        self.image = image
        log.info(
            "loaded the snapshot at offset %d (%d partitions) in %.2f s",
            image.next_offset,
            image.partition_count,
            time.monotonic() - started,
        )
        self.log.reset(image.next_offset)
        if self.history is not None:  # the image it holds is history's checkpoint
            self.history.checkpoint(file_name, image.next_offset)
        self._notify()
        return self._keep_journal(result)

    def _keep_journal(self, result: tuple) -> tuple:
        """Protects the journal from pysyncobj's load of a newer snapshot.

        pysyncobj clears the whole journal unless its first two entries are the
        snapshot's last two. That is the case after a compaction, but not when
        a snapshot was renamed into place and the process stopped before
        compacting: the journal still starts earlier, and entries after the
        snapshot would be dropped (lost, on a lone voter or a full restart).
        When the journal covers the snapshot, we hand pysyncobj the journal's
        first two entries instead: it then re-applies the journal from there,
        and every batch the snapshot already holds is a no-op here (its base
        offset or controller epoch no longer matches), so nothing applies twice.
        """
        last, prev, cluster = result
        journal = internals.journal(self._syncObj)
        try:
            if journal is None or len(journal) < 2:
                return result
            first, second, end = journal[0], journal[1], journal[len(journal) - 1]
            if (first[1], first[2]) == (prev[1], prev[2]) and (second[1], second[2]) == (
                last[1],
                last[2],
            ):
                return result  # compacted at this snapshot: nothing to protect
            if first[1] <= prev[1] and last[1] <= end[1]:
                log.warning(
                    "the snapshot (Raft index %d) is newer than the journal's start (%d): "
                    "replaying the journal over it instead of dropping it",
                    last[1],
                    first[1],
                )
                return (second, first, cluster)
        except (IndexError, TypeError):
            pass
        return result


def _size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def read_snapshot_file(file_name: str) -> tuple[dict, MetadataImage]:
    """The header and the image of our snapshot file, checked against their
    checksums; SnapshotError (or OSError) for any doubt."""
    with open(file_name, "rb") as f:
        header_line = f.readline(1 << 20)
        image_bytes = f.read()
    try:
        header = orjson.loads(header_line)
        header["raft"]
        expected = header["imageSha256"]
        if type(header["format"]) is not int or header["format"] not in SNAPSHOT_FORMATS:
            raise SnapshotError(f"unsupported snapshot format {header['format']!r}")
    except (orjson.JSONDecodeError, KeyError, TypeError) as e:
        raise SnapshotError(f"unreadable snapshot header ({e})") from None
    if header["format"] >= 2 and header.get("headerSha256") != _header_sha256(header):
        raise SnapshotError("the snapshot header does not match its checksum")
    if hashlib.sha256(image_bytes).hexdigest() != expected:
        raise SnapshotError(
            f"the image in the snapshot does not match its checksum "
            f"({len(image_bytes)} bytes, {header.get('imageBytes')} expected)"
        )
    try:
        image = decode_image(image_bytes)
    except DecodeError as e:
        raise SnapshotError(f"the image in the snapshot is invalid: {e}") from None
    return header, image


def write_snapshot_file(final: str, image: MetadataImage, last, prev, cluster) -> None:
    """Our snapshot file at ``final``, whole or not at all (a part file, fsync,
    rename, directory fsync): the snapshot writer's child, and a seeded data
    dir (quorum/seeded_data_dir.py). ``last``, ``prev``: pysyncobj's entries
    (command, index, term); ``cluster``: its nodes, or their Raft addresses."""
    image_bytes = encode_image(image)
    header = {
        "format": SNAPSHOT_FORMAT,
        "raft": {
            "last": _entry_to_json(last),
            "prev": _entry_to_json(prev),
            "cluster": sorted(getattr(node, "id", str(node)) for node in cluster),
        },
        "nextOffset": image.next_offset,
        "imageBytes": len(image_bytes),
        "imageSha256": hashlib.sha256(image_bytes).hexdigest(),
    }
    header["headerSha256"] = _header_sha256(header)
    part = final + ".part"
    with open(part, "wb") as f:
        f.write(orjson.dumps(header) + b"\n")
        f.write(image_bytes)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, final)
    fsync_dir(final)


def _header_sha256(header: dict) -> str:
    """Of the header without this field, as written (orjson keeps key order)."""
    rest = {key: value for key, value in header.items() if key != "headerSha256"}
    return hashlib.sha256(orjson.dumps(rest)).hexdigest()


def _cluster_from_json(obj) -> list:
    if not isinstance(obj, list) or not all(isinstance(node, str) for node in obj):
        raise SnapshotError(f"bad voter list in snapshot header: {obj!r:.80}")
    return obj


def _entry_to_json(entry: tuple) -> list:
    command, idx, term = entry
    return [base64.b64encode(bytes(command)).decode(), idx, term]


def _entry_from_json(obj: list) -> tuple:
    if not isinstance(obj, list) or len(obj) != 3 or not isinstance(obj[0], str):
        raise SnapshotError(f"bad Raft entry in snapshot header: {obj!r:.80}")
    command, idx, term = obj
    if type(idx) is not int or type(term) is not int or idx < 0 or term < 0:
        raise SnapshotError(f"bad Raft entry in snapshot header: {obj!r:.80}")
    return (base64.b64decode(command, validate=True), idx, term)
