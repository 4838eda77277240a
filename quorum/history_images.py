"""The image after any offset of the window, from a voter's history store.

``HistoryReader`` reads the files quorum/history.py writes (in whichever
process serves the read: an HTTP worker opens them itself), and builds the
image after offset N the one way every image is built: the nearest base at
or below it (a checkpoint, the empty image at 0, or an image built for an
earlier read) plus the records up to N through ``ImageDelta``, the one
replay. An image is exact to the record: N in the middle of a batch
replays that batch's records up to N only (what a replay of ``GET /v1/log``
up to N gives).

Never across a gap: a base and the offsets replayed on it lie in the run of
batches after the last gap (``history.coverage``). Built images are kept in
a small cache (they share all but what changed with each other, as images
do), so reads near one another replay only the records between them; the
decoded checkpoints in one of their own; both are let go after ``IDLE_S``
without a read of the past.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
from bisect import bisect_right

from metadata_records.codec import decode_batch
from metadata_records.delta import ImageDelta
from metadata_records.image import EMPTY_IMAGE, MetadataImage

from .history import (
    Coverage,
    Retention,
    SegmentIndex,
    coverage,
    list_files,
    window_start,
)
from .record_log import LogEntry, OffsetTooOld, RecordLog, batch_entries
from .state_machine import read_snapshot_file

IMAGES_CACHED = 4
CHECKPOINTS_CACHED = 2
IDLE_S = 300.0  # the caches are let go after this long without an image built


class HistoryUnavailable(LookupError):
    """This voter keeps no history (no store, or nothing in it yet)."""


class OffsetBeyondWindow(LookupError):
    def __init__(self, offset: int, oldest: int) -> None:
        super().__init__(
            f"the image after offset {offset} is beyond this voter's history window; "
            f"the oldest it can build is after offset {oldest}"
        )
        self.offset = offset
        self.oldest = oldest


class OffsetNotCommitted(LookupError):
    def __init__(self, offset: int, end: int) -> None:
        super().__init__(
            f"offset {offset} is not committed here yet: the log ends at offset {end - 1} "
            f"(highWatermark {end})"
        )
        self.offset = offset
        self.end = end


class HistoryReader:
    def __init__(
        self,
        path: str,
        retention: Retention,
        clock_ms=lambda: int(time.time() * 1000),
        images_cached: int = IMAGES_CACHED,
    ) -> None:
        self.path = path
        self.retention = retention
        self.clock_ms = clock_ms
        self.images_cached = images_cached
        self._segments: dict[str, SegmentIndex] = {}
        self._lock = threading.Lock()  # the index and the cache: one build at a time
        # next offset -> image, the newest used last
        self._images: collections.OrderedDict[int, MetadataImage] = collections.OrderedDict()
        # Decoded checkpoints, kept apart: a build never has to decode one
        # again because newer builds pushed it out (seconds at 1M partitions).
        self._checkpoints: collections.OrderedDict[int, MetadataImage] = collections.OrderedDict()
        self.builds = 0
        self.cache_hits = 0
        self.idle_s = IDLE_S
        self._used_at = 0.0
        self._idle_timer: threading.Timer | None = None

    # ------------------------------------------------------------ the index

    def _refresh(self) -> tuple[list[SegmentIndex], dict[int, str], Coverage]:
        files, checkpoints = list_files(self.path)
        present = {path for _, path in files}
        for path in list(self._segments):
            if path not in present:
                del self._segments[path]
        segments = []
        for _, path in files:
            seg = self._segments.get(path)
            if seg is None:
                seg = self._segments[path] = SegmentIndex(path)
            seg.scan()
            segments.append(seg)
        checkpoint_files = dict(checkpoints)
        return segments, checkpoint_files, coverage(segments, list(checkpoint_files))

    def _oldest(self, segments: list[SegmentIndex], cover: Coverage) -> int:
        """The oldest offset servable: inside the window, and built on a base."""
        base = cover.oldest_base
        if base is None:
            raise HistoryUnavailable("this voter's history store holds no image to start from")
        start = window_start(segments, cover.end, self.retention, self.clock_ms())
        return max(start, base - 1, 0)

    def window(self) -> tuple[int, int]:
        """(the oldest offset servable, the next offset): the window now."""
        with self._lock:
            segments, _, cover = self._refresh()
            return self._oldest(segments, cover), cover.end

    def offset_at(self, time_ms: int) -> int:
        """The last offset of the last batch stamped at or before ``time_ms``;
        OffsetBeyondWindow when there is none inside the window."""
        with self._lock:
            segments, _, cover = self._refresh()
            oldest = self._oldest(segments, cover)
            found = None
            for seg in segments:
                if not seg.firsts or seg.end <= cover.start:
                    continue
                if seg.stamps[0] > time_ms:
                    break
                for i in range(len(seg.firsts)):
                    if seg.stamps[i] > time_ms:
                        break
                    found = seg.firsts[i] + seg.counts[i] - 1
            if found is None or found < oldest:
                raise OffsetBeyondWindow(-1 if found is None else found, oldest)
            return found

    def oldest_record(self) -> int | None:
        """The oldest offset whose record the window holds (None: none):
        what ``read_entries`` serves from. A record needs no base image, so
        this is older than what ``window`` says an image can be built after."""
        with self._lock:
            segments, _, cover = self._refresh()
            if cover.end <= cover.start:
                return None
            return max(
                cover.start, window_start(segments, cover.end, self.retention, self.clock_ms())
            )

    def read_entries(self, from_offset: int, max_records: int, below: int) -> list[LogEntry]:
        """Up to ``max_records`` log entries from ``from_offset``, none at or
        past ``below``, read from the segments (``GET /v1/log`` past the
        retained log: ``log_reader``); OffsetTooOld before the window."""
        for _ in range(3):
            try:
                return self._read_entries(from_offset, max_records, below)
            except FileNotFoundError:
                continue  # trimmed while we read it: the next look sees the window without it
        return self._read_entries(from_offset, max_records, below)

    def _read_entries(self, from_offset: int, max_records: int, below: int) -> list[LogEntry]:
        with self._lock:
            segments, _, cover = self._refresh()
        oldest = None
        if cover.end > cover.start:
            oldest = max(
                cover.start, window_start(segments, cover.end, self.retention, self.clock_ms())
            )
        if oldest is None or from_offset < oldest:
            raise OffsetTooOld(from_offset, cover.end if oldest is None else oldest)
        entries: list[LogEntry] = []
        at = from_offset
        for seg in segments:
            if not seg.firsts or seg.end <= at or seg.first > at:
                continue  # only contiguous from ``at``: a gap ends the read
            with open(seg.path, "rb") as f:
                i = max(0, bisect_right(seg.firsts, at) - 1)
                while i < len(seg.firsts) and len(entries) < max_records:
                    first, count = seg.firsts[i], seg.counts[i]
                    if first >= below or first > at:
                        return entries
                    start = at - first
                    stop = min(count, start + max_records - len(entries), below - first)
                    entries += batch_entries(
                        decode_batch(seg.read_payload(i, f)), first, start, stop
                    )
                    at = first + stop
                    i += 1
            if len(entries) >= max_records:
                break
        return entries

    def timestamp_of(self, offset: int) -> int | None:
        """The timestamp of the batch holding ``offset`` (None: not held)."""
        with self._lock:
            segments, _, _ = self._refresh()
            return _stamp_of(segments, offset)

    # ------------------------------------------------------------ images

    def image_after(self, offset: int) -> tuple[MetadataImage, int]:
        """The image after ``offset`` (holding every record up to it) and the
        timestamp of the batch holding ``offset``."""
        for _ in range(3):
            try:
                return self._image_after(offset)
            except FileNotFoundError:
                continue  # trimmed while we read it: the next look sees the window without it
        return self._image_after(offset)

    def _image_after(self, offset: int) -> tuple[MetadataImage, int]:
        with self._lock:
            segments, checkpoint_files, cover = self._refresh()
            if offset >= cover.end:
                raise OffsetNotCommitted(offset, cover.end)
            oldest = self._oldest(segments, cover)
            if offset < oldest:
                raise OffsetBeyondWindow(offset, oldest)
            target = offset + 1
            self._touch()
            image = self._images.get(target)
            if image is not None:
                self._images.move_to_end(target)
                self.cache_hits += 1
            else:
                image = self._build(target, segments, checkpoint_files, cover)
            return image, _stamp_of(segments, offset)

    def _touch(self) -> None:
        """Arms the release of the caches after ``idle_s`` without a build:
        a million-partition checkpoint decoded is about 800 MiB."""
        self._used_at = time.monotonic()
        if self._idle_timer is None:
            self._idle_timer = threading.Timer(self.idle_s, self._release_if_idle)
            self._idle_timer.daemon = True
            self._idle_timer.start()

    def _release_if_idle(self) -> None:
        with self._lock:
            self._idle_timer = None
            idle = time.monotonic() - self._used_at
            if idle >= self.idle_s:
                self._images.clear()
                self._checkpoints.clear()
                return
            self._idle_timer = threading.Timer(self.idle_s - idle, self._release_if_idle)
            self._idle_timer.daemon = True
            self._idle_timer.start()

    def _build(
        self,
        target: int,
        segments: list[SegmentIndex],
        checkpoint_files: dict[int, str],
        cover: Coverage,
    ) -> MetadataImage:
        cached = [n for n in self._images if cover.start <= n <= target]
        checkpoints = [b for b in cover.bases if b <= target]
        from_cache = max(cached, default=-1)
        from_checkpoint = max(checkpoints, default=-1)
        if from_cache >= from_checkpoint and from_cache >= 0:
            base = self._images[from_cache]
        elif from_checkpoint == 0:
            base = EMPTY_IMAGE
        elif from_checkpoint > 0:
            base = self._load_checkpoint(checkpoint_files[from_checkpoint], from_checkpoint)
        else:
            raise HistoryUnavailable(f"no image to build offset {target - 1} from")
        image = replay(base, segments, target)
        self.builds += 1
        self._remember(image)
        return image

    def _load_checkpoint(self, path: str, next_offset: int) -> MetadataImage:
        image = self._checkpoints.get(next_offset)
        if image is not None:
            self._checkpoints.move_to_end(next_offset)
            return image
        _, image = read_snapshot_file(path)
        if image.next_offset != next_offset:
            raise HistoryUnavailable(
                f"the checkpoint {os.path.basename(path)} holds the image at offset "
                f"{image.next_offset}, not {next_offset}: remove it"
            )
        self._checkpoints[next_offset] = image
        while len(self._checkpoints) > CHECKPOINTS_CACHED:
            self._checkpoints.popitem(last=False)
        return image

    def _remember(self, image: MetadataImage) -> None:
        self._images[image.next_offset] = image
        self._images.move_to_end(image.next_offset)
        while len(self._images) > self.images_cached:
            self._images.popitem(last=False)


def replay(base: MetadataImage, segments: list[SegmentIndex], target: int) -> MetadataImage:
    """``base`` with the records of [base.next_offset, ``target``) replayed,
    read from ``segments`` (which must hold them all, contiguously)."""
    at = base.next_offset
    if at == target:
        return base
    delta = ImageDelta(base)
    for seg in segments:
        if not seg.firsts or seg.end <= at or seg.first >= target:
            continue
        with open(seg.path, "rb") as f:
            i = max(0, bisect_right(seg.firsts, at) - 1)
            while i < len(seg.firsts) and seg.firsts[i] < target:
                first, count = seg.firsts[i], seg.counts[i]
                if first > at:
                    raise HistoryUnavailable(f"the history lacks offsets {at} to {first - 1}")
                records = decode_batch(seg.read_payload(i, f)).records
                lo, hi = at - first, min(count, target - first)
                delta.replay_records(records[lo:hi] if (lo, hi) != (0, count) else records)
                at = first + hi
                i += 1
    if at != target:
        raise HistoryUnavailable(f"the history lacks offsets {at} to {target - 1}")
    return delta.apply()


def _stamp_of(segments: list[SegmentIndex], offset: int) -> int | None:
    for seg in segments:
        if seg.firsts and seg.first <= offset < seg.end:
            i = bisect_right(seg.firsts, offset) - 1
            return seg.stamps[i]
    return None


def log_reader(record_log: RecordLog, history: HistoryReader | None):
    """``RecordLog.read``, reaching back into ``history`` for offsets the
    retained log no longer holds (it keeps ``--log-retention`` records in
    memory; the history window is larger): who changed what can be asked of
    the whole window. OffsetTooOld only before both."""
    if history is None:
        return record_log.read

    def read(from_offset: int, max_records: int, remember: bool = True) -> list[LogEntry]:
        try:
            return record_log.read(from_offset, max_records, remember)
        except OffsetTooOld as too_old:
            try:
                entries = history.read_entries(from_offset, max_records, too_old.oldest)
            except OffsetTooOld as e:
                raise OffsetTooOld(from_offset, min(e.oldest, too_old.oldest)) from None
            if not entries:  # a gap in the history just before the retained log
                raise
            after = entries[-1].offset + 1
            if len(entries) < max_records and after == too_old.oldest:
                with contextlib.suppress(OffsetTooOld):  # trimmed meanwhile: a short page
                    entries += record_log.read(after, max_records - len(entries), remember)
            return entries

    return read
