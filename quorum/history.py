"""The cluster's history on a voter's disk: every committed batch, and checkpoints.

What ``GET /v1/image?atOffset=`` builds from (quorum/history_images.py), kept
under ``<data dir>/history/`` by the one process that applies the log (the
core), read by any process of the voter (HTTP workers open the files):

* ``seg-<first offset>.log``: segments of batches, each framed as a header
  (``FRAME``: payload length, CRC-32 of the rest of the header and the
  payload, first offset, record count, timestamp) and the payload bytes
  exactly as replicated (decoded with ``codec.decode_batch``, whatever fields
  a batch has). A segment holds contiguous batches only: a gap starts a new
  one. A torn or corrupt frame ends what a segment holds (the writer cuts
  it on start; a reader stops before it).
* ``ckpt-<next offset>.snap``: pysyncobj's snapshot files (our format,
  quorum/state_machine.py), hard-linked when written or loaded, so a
  checkpoint costs no write of its own; one is kept per 1/8 of the window
  at most (``Retention.checkpoint_spacing``), so an image replays at most
  that many records. The empty image at offset 0 is an implicit checkpoint.

Writes never hold the apply: ``append`` queues the bytes the apply already
has (a C-level ``SimpleQueue.put``) and a thread writes them. While batches
flow, the thread looks for more at most every ``LINGER_S`` (speed switch
``LINGER``), so a put finds no thread to wake and a stream of lone commits
does not wake it once a batch.
Segments are fsynced when closed, not per batch: a crash loses at most the
open segment's tail, which the journal usually replays again; what it does
not (a newer snapshot was loaded) is a gap, and images are served only from
after the last gap (``Coverage``). A full disk fails history soft: the
batches are dropped (a gap), a warning says what to free, and
``write_failures`` counts it; the voter goes on.

Retention (``Retention``): the last ``records`` records or the last ``ms``
milliseconds, whichever is less; trimmed by whole segments and checkpoints,
keeping the newest checkpoint at or below the window's start as its base.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import logging
import os
import queue
import re
import shutil
import struct
import threading
import time
import zlib
from array import array
from dataclasses import dataclass

from .disk_health import SPACE_ERRNOS, WHAT_TO_FREE
from .log_limiter import RateLimitedLog
from .raft.durability import fsync_dir

log = logging.getLogger(__name__)

HISTORY_DIR = "history"
# payload length, CRC-32 (of the 20 bytes after it and the payload), first
# offset, record count, timestamp ms
FRAME = struct.Struct(">IIqIq")
_CRC_FROM = 8
MAX_PAYLOAD = 1 << 30
SEGMENT_BYTES = 16 << 20
SEGMENT_NAME = re.compile(r"^seg-(\d{20})\.log$")
CHECKPOINT_NAME = re.compile(r"^ckpt-(\d{20})\.snap$")
PENDING = ".pending"  # a checkpoint linked, not yet named (HistoryWriter.checkpoint)
QUEUE_MAX = 100_000  # batches waiting for the writer; beyond it they are dropped (a gap)
# Speed switch: after writing what it found, the writer lets LINGER_S pass
# before it looks again. Waking it once a batch cost the apply thread a
# futex wake-up in each put, and its waking took the interpreter lock just
# as the event loop should answer the write (issue 46, decision 171); a
# reader of a batch not yet written waits for it (api/routes/history.py).
# Plain twin: it looks again at once, woken by the next put.
LINGER = True
LINGER_S = 0.01
DEFAULT_RETENTION_MS = 24 * 3600 * 1000
DEFAULT_RETENTION_RECORDS = 1_000_000
SEGMENTS_PER_WINDOW = 8  # a segment rolls at 1/8 of the window's records: trims are fine enough


@dataclass(frozen=True)
class Retention:
    """The window served: the last ``records`` records or ``ms`` of batches,
    whichever is less."""

    ms: int = DEFAULT_RETENTION_MS
    records: int = DEFAULT_RETENTION_RECORDS

    def __post_init__(self) -> None:
        if self.ms < 1 or self.records < 1:
            raise ValueError(
                f"history retention must be at least 1 ms and 1 record, got "
                f"{self.ms} ms and {self.records} records"
            )

    @property
    def segment_records(self) -> int:
        return max(1, self.records // SEGMENTS_PER_WINDOW)

    @property
    def checkpoint_spacing(self) -> int:
        """Records between two checkpoints kept (HistoryWriter._redundant)."""
        return self.segment_records


def segment_name(first_offset: int) -> str:
    return f"seg-{first_offset:020d}.log"


def checkpoint_name(next_offset: int) -> str:
    return f"ckpt-{next_offset:020d}.snap"


def frame(first_offset: int, count: int, timestamp_ms: int, payload: bytes) -> bytes:
    head = FRAME.pack(len(payload), 0, first_offset, count, timestamp_ms)
    crc = zlib.crc32(payload, zlib.crc32(head[_CRC_FROM:]))
    return FRAME.pack(len(payload), crc, first_offset, count, timestamp_ms)


class SegmentIndex:
    """What one segment holds, frame by frame (arrays: a million batches stay
    small), read up to its first torn or corrupt frame."""

    __slots__ = ("path", "firsts", "counts", "stamps", "positions", "scanned", "end_pos")

    def __init__(self, path: str) -> None:
        self.path = path
        self.firsts = array("q")
        self.counts = array("q")
        self.stamps = array("q")
        self.positions = array("q")  # of each frame's header
        self.scanned = 0  # bytes of the file looked at
        self.end_pos = 0  # the end of the last whole frame

    def scan(self) -> bool:
        """Reads the frames written since the last scan; False if it found a
        frame that is torn or corrupt (where the segment's content ends)."""
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return True
        if size <= self.end_pos:
            return size == self.end_pos
        with open(self.path, "rb") as f:
            f.seek(self.end_pos)
            data = f.read(size - self.end_pos)
        pos = 0
        whole = True
        while pos < len(data):
            if len(data) - pos < FRAME.size:
                whole = False
                break
            length, crc, first, count, stamp = FRAME.unpack_from(data, pos)
            body = pos + FRAME.size
            if length > MAX_PAYLOAD or body + length > len(data):
                whole = False
                break
            payload = memoryview(data)[body : body + length]
            head_tail = memoryview(data)[pos + _CRC_FROM : body]
            if zlib.crc32(payload, zlib.crc32(head_tail)) != crc or count < 1:
                whole = False
                break
            if self.firsts and first != self.firsts[-1] + self.counts[-1]:
                whole = False  # a segment is contiguous: anything else is damage
                break
            self.firsts.append(first)
            self.counts.append(count)
            self.stamps.append(stamp)
            self.positions.append(self.end_pos + pos)
            pos = body + length
        self.end_pos += pos
        self.scanned = size
        return whole

    @property
    def first(self) -> int:
        return self.firsts[0]

    @property
    def end(self) -> int:
        return self.firsts[-1] + self.counts[-1]

    def read_payload(self, i: int, f) -> bytes:
        f.seek(self.positions[i])
        head = f.read(FRAME.size)
        length = FRAME.unpack(head)[0]
        return f.read(length)


def list_files(path: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """The segments (by first offset) and checkpoints (by next offset) in ``path``."""
    segments, checkpoints = [], []
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return [], []
    for name in names:
        if m := SEGMENT_NAME.match(name):
            segments.append((int(m.group(1)), os.path.join(path, name)))
        elif m := CHECKPOINT_NAME.match(name):
            checkpoints.append((int(m.group(1)), os.path.join(path, name)))
    return sorted(segments), sorted(checkpoints)


@dataclass(frozen=True)
class Coverage:
    """What images a store can build: from ``bases`` (next offsets of a
    checkpoint at or after ``start``, 0 for the empty image) through the
    batches of [``start``, ``end``), the run after the last gap."""

    start: int
    end: int
    bases: tuple[int, ...]

    @property
    def oldest_base(self) -> int | None:
        return self.bases[0] if self.bases else None


def coverage(segments: list[SegmentIndex], checkpoints: list[int]) -> Coverage:
    """The run of batches after the last gap, and the checkpoints it can
    start from; a checkpoint beyond the run's end (a snapshot loaded past
    what the segments hold) starts a run of its own."""
    run_start = run_end = None
    for seg in segments:
        if not seg.firsts:
            continue
        if run_end is None or seg.first != run_end:
            run_start = seg.first  # a gap (or the first): only what follows counts
        run_end = seg.end
    newest_checkpoint = max(checkpoints, default=None)
    if run_end is None or (newest_checkpoint is not None and newest_checkpoint > run_end):
        if newest_checkpoint is None:
            return Coverage(0, 0, ())
        return Coverage(newest_checkpoint, newest_checkpoint, (newest_checkpoint,))
    bases = [c for c in checkpoints if run_start <= c <= run_end]
    if run_start == 0 and 0 not in bases:
        bases.insert(0, 0)  # the empty image
    return Coverage(run_start, run_end, tuple(bases))


def window_start(segments: list[SegmentIndex], end: int, retention: Retention, now_ms: int) -> int:
    """The first offset inside the window: the last ``retention.records``
    records, and of those only batches stamped within ``retention.ms``."""
    start = max(0, end - retention.records)
    oldest_stamp = now_ms - retention.ms
    for seg in reversed(segments):
        if not seg.firsts:
            continue
        if seg.stamps[0] >= oldest_stamp:
            continue  # all of it inside: the boundary is further back
        for i in range(len(seg.firsts) - 1, -1, -1):
            if seg.stamps[i] < oldest_stamp:
                if i + 1 < len(seg.firsts):
                    start = max(start, seg.firsts[i + 1])
                else:
                    start = max(start, seg.end)
                break
        break
    return min(start, max(end - 1, 0))


class HistoryWriter:
    """The core's half: batches and checkpoints into ``path``, on a thread."""

    def __init__(
        self, path: str, retention: Retention, clock_ms=lambda: int(time.time() * 1000)
    ) -> None:
        self.path = path
        self.retention = retention
        self.clock_ms = clock_ms
        os.makedirs(path, exist_ok=True)
        # Leftovers of a run that stopped midway; before any checkpoint links one.
        for name in os.listdir(path):
            if name.endswith((".part", PENDING)):
                os.unlink(os.path.join(path, name))
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.write_failures = 0  # batches or checkpoints lost to a failed write
        self.dropped = 0  # batches dropped because the writer fell behind
        self._warnings = RateLimitedLog(log, period_s=60.0, burst=1)
        self._segments: list[SegmentIndex] = []
        self._file = None  # the open segment
        self._end: int | None = None  # the end of what the segments hold
        self._thread = threading.Thread(target=self._run, name="history-writer", daemon=True)
        self._started = False

    # ------------------------------------------------------------ any thread

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    def append(self, first_offset: int, count: int, timestamp_ms: int, payload: bytes) -> None:
        """A committed batch (the apply thread): queued, never waited on."""
        if self._queue.qsize() >= QUEUE_MAX:
            self.dropped += 1  # the segments will show a gap; images resume after it
            return
        self._queue.put((first_offset, count, timestamp_ms, payload))

    def checkpoint(self, snapshot_file: str, next_offset: int) -> None:
        """A snapshot file holding the image at ``next_offset``, just written
        or loaded: linked now (the file may be replaced by the next snapshot
        soon) under a name readers ignore, and named a checkpoint by the
        thread once the batches queued before it are written: a checkpoint
        past the segments' end is a gap (``coverage``), which it is then
        only if those batches were lost."""
        target = os.path.join(self.path, checkpoint_name(next_offset))
        pending = target + PENDING
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(pending)
            try:
                os.link(snapshot_file, pending)
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                    raise
                # No hard links here: the thread copies it from an open file,
                # which the next snapshot's rename cannot change.
                self._queue.put(("copy", open(snapshot_file, "rb"), target))  # noqa: SIM115
                return
            self._queue.put(("publish", pending, target))
        except OSError as e:
            self._failed(f"keeping the snapshot {snapshot_file} as a checkpoint", e)

    def close(self, timeout_s: float = 5.0) -> None:
        if self._started:
            self._queue.put(None)
            self._thread.join(timeout_s)

    # ------------------------------------------------------------ the thread

    def _run(self) -> None:
        try:
            self._open()
        except Exception:
            log.exception("the history store could not be opened; history is off")
            return
        while True:
            item = self._queue.get()
            try:
                while item is not None:
                    self._handle(item)
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        item = False
                        break
                if self._file is not None:
                    self._flush()
            except Exception:
                log.exception("the history writer failed on an item; history goes on after it")
            if item is None:
                self._close_segment()
                return
            if LINGER:
                time.sleep(LINGER_S)  # puts meanwhile wake nobody

    def _handle(self, item) -> None:
        if len(item) == 4:
            self._write_batch(*item)
        elif item[0] == "copy":
            self._copy_checkpoint(item[1], item[2])
        else:
            self._publish(item[1], item[2])

    def _open(self) -> None:
        """Indexes the segments, cuts a torn tail and whatever follows a
        corrupt frame (those batches are a gap now), drops leftovers."""
        segments, _ = list_files(self.path)
        for _, path in segments:
            seg = SegmentIndex(path)
            if not seg.scan():
                log.warning(
                    "history segment %s: a torn or corrupt frame at byte %d; cut there",
                    path,
                    seg.end_pos,
                )
                with open(path, "r+b") as f:
                    f.truncate(seg.end_pos)
                    os.fsync(f.fileno())
            if not seg.firsts:
                os.unlink(path)
                continue
            self._segments.append(seg)
        if self._segments:
            self._end = self._segments[-1].end
        self._trim()

    def _write_batch(self, first: int, count: int, stamp: int, payload: bytes) -> None:
        if self._end is not None and first < self._end:
            if self._holds(first, count, payload):
                return  # held already: the journal replayed after a restart
            # Another batch at this offset: what the store held past here was
            # never the cluster's (a recover dropped entries its voter had
            # applied but not stored as committed): cut it.
            self._cut_from(first)
        seg = self._segments[-1] if self._segments and self._file is not None else None
        if (
            seg is None
            or first != self._end
            or seg.end_pos >= SEGMENT_BYTES
            or seg.end - seg.first >= self.retention.segment_records
        ):
            self._close_segment()
            seg = self._new_segment(first)
            if seg is None:
                return
        data = frame(first, count, stamp, payload) + payload
        try:
            self._file.write(data)
        except OSError as e:
            self._failed(f"writing batch {first} to {seg.path}", e)
            self._cut(seg)
            return
        seg.firsts.append(first)
        seg.counts.append(count)
        seg.stamps.append(stamp)
        seg.positions.append(seg.end_pos)
        seg.end_pos += len(data)
        seg.scanned = seg.end_pos
        self._end = first + count

    def _holds(self, first: int, count: int, payload: bytes) -> bool:
        for seg in self._segments:
            if seg.firsts and seg.first <= first < seg.end:
                i = bisect.bisect_left(seg.firsts, first)
                if i == len(seg.firsts) or seg.firsts[i] != first or seg.counts[i] != count:
                    return False
                if self._file is not None:
                    self._file.flush()
                with open(seg.path, "rb") as f:
                    return seg.read_payload(i, f) == payload
        return False

    def _cut_from(self, offset: int) -> None:
        """Forgets every batch from the one holding ``offset`` on, and every
        checkpoint past ``offset``."""
        log.warning(
            "history store: the batches it holds from offset %d differ from the log's; "
            "dropped from there",
            offset,
        )
        self._close_segment_file()
        for seg in list(self._segments):
            if not seg.firsts or seg.end <= offset:
                continue
            i = max(0, bisect.bisect_right(seg.firsts, offset) - 1)
            if i == 0:
                self._remove(seg.path)
                self._segments.remove(seg)
                continue
            with open(seg.path, "r+b") as f:
                f.truncate(seg.positions[i])
                os.fsync(f.fileno())
            for column in (seg.firsts, seg.counts, seg.stamps, seg.positions):
                del column[i:]
            seg.end_pos = seg.scanned = os.path.getsize(seg.path)
        _, checkpoints = list_files(self.path)
        for c, path in checkpoints:
            if c > offset:
                self._remove(path)
        self._end = self._segments[-1].end if self._segments else None

    def _flush(self) -> None:
        """Readers in other processes see whole frames. A flush that fails (a
        full disk) may have written part of the buffer: the segment then ends
        at its last whole frame on disk, and what follows is a gap."""
        seg = self._segments[-1]
        try:
            self._file.flush()
        except OSError as e:
            self._failed(f"writing to {seg.path}", e)
            self._close_segment_file()
            on_disk = SegmentIndex(seg.path)
            on_disk.scan()
            with contextlib.suppress(OSError), open(seg.path, "r+b") as f:
                f.truncate(on_disk.end_pos)
            self._segments[-1] = on_disk
            if not on_disk.firsts:
                self._remove(seg.path)
                self._segments.pop()
            self._end = self._segments[-1].end if self._segments else None

    def _close_segment_file(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()

    def _new_segment(self, first: int) -> SegmentIndex | None:
        path = os.path.join(self.path, segment_name(first))
        try:
            self._file = open(path, "wb")  # noqa: SIM115 - held across batches
        except OSError as e:
            self._failed(f"opening the history segment {path}", e)
            return None
        seg = SegmentIndex(path)
        self._segments.append(seg)
        return seg

    def _cut(self, seg: SegmentIndex) -> None:
        """After a failed write: the segment ends at its last whole frame."""
        with contextlib.suppress(OSError):
            self._file.flush()
        with contextlib.suppress(OSError):
            self._file.truncate(seg.end_pos)
        with contextlib.suppress(OSError):
            self._file.close()
        self._file = None
        if not seg.firsts:
            with contextlib.suppress(OSError):
                os.unlink(seg.path)
            self._segments.remove(seg)

    def _close_segment(self) -> None:
        f, self._file = self._file, None
        if f is None:
            return
        try:
            f.flush()
            os.fsync(f.fileno())
            f.close()
            fsync_dir(os.path.join(self.path, "x"))
        except OSError as e:
            self._failed("closing a history segment", e)
            with contextlib.suppress(OSError):
                f.close()
        self._trim()

    def _publish(self, pending: str, target: str) -> None:
        if self._redundant(int(CHECKPOINT_NAME.match(os.path.basename(target)).group(1))):
            with contextlib.suppress(OSError):
                os.unlink(pending)
            return
        try:
            if self._file is not None:
                self._file.flush()  # readers see the batches before it first
            os.replace(pending, target)
        except OSError as e:
            self._failed(f"naming the checkpoint {target}", e)
            with contextlib.suppress(OSError):
                os.unlink(pending)
            return
        self._trim()

    def _redundant(self, offset: int) -> bool:
        """Whether a checkpoint at ``offset`` adds nothing worth its disk: one
        kept in the same run is fewer than ``checkpoint_spacing`` records
        older. Snapshots come every --compaction-entries Raft entries, which
        with small batches is many per window (each a whole image on disk);
        with this, at most about SEGMENTS_PER_WINDOW + 1 are kept, and an
        image replays at most ``checkpoint_spacing`` records. A checkpoint
        past the segments' end starts a run: always kept."""
        if self._end is None or offset > self._end:
            return False
        _, checkpoints = list_files(self.path)
        run_start = coverage(self._segments, []).start
        return any(
            run_start <= c < offset and offset - c < self.retention.checkpoint_spacing
            for c, _ in checkpoints
        )

    def _copy_checkpoint(self, source, target: str) -> None:
        if self._redundant(int(CHECKPOINT_NAME.match(os.path.basename(target)).group(1))):
            source.close()
            return
        part = target + ".part"
        try:
            with source, open(part, "wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
                out.flush()
                os.fsync(out.fileno())
            os.replace(part, target)
        except OSError as e:
            self._failed(f"copying a snapshot to the checkpoint {target}", e)
            with contextlib.suppress(OSError):
                os.unlink(part)
            return
        self._trim()

    def _trim(self) -> None:
        """Drops what the window no longer needs: segments before the last
        gap, and, inside the run, whatever is older than the newest
        checkpoint at or below the window's start (the window's base)."""
        _, checkpoints = list_files(self.path)
        offsets = [c for c, _ in checkpoints]
        cover = coverage(self._segments, offsets)
        start = window_start(self._segments, cover.end, self.retention, self.clock_ms())
        base = max((b for b in cover.bases if b <= start + 1), default=None)
        if base is None:
            base = cover.oldest_base if cover.oldest_base is not None else cover.start
        for offset, path in checkpoints:
            if offset < base or offset < cover.start:
                self._remove(path)
        keep_from = max(base, cover.start) if cover.bases else cover.start
        open_seg = self._segments[-1] if self._file is not None else None
        for seg in list(self._segments):
            if seg is not open_seg and seg.end <= keep_from:
                self._remove(seg.path)
                self._segments.remove(seg)

    def _remove(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            try:
                os.unlink(path)
            except OSError as e:
                self._failed(f"removing {path}", e)

    def _failed(self, what: str, e: OSError) -> None:
        self.write_failures += 1
        if e.errno in SPACE_ERRNOS:
            message = (
                f"disk full: {what} failed; the history store (GET /v1/image?atOffset=) "
                f"skips these batches and serves images only from after them. To fix: "
                f"{WHAT_TO_FREE}, or shorten --history-retention-ms / "
                f"--history-retention-records"
            )
        else:
            message = f"history store: {what} failed ({e}); images are served only from after it"
        self._warnings.log(logging.WARNING, "%s", message)
