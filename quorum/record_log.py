"""The applied metadata log, as brokers follow it (``GET /v1/log``).

Batches are appended by the Raft apply thread and read by the HTTP thread;
a lock held for the bookkeeping keeps readers safe. Only the tail is kept
(``retention`` records, in whole batches, and nothing before the last snapshot
a node loaded): older offsets answer 410 and the reader loads the snapshot first.

Each batch is kept as the bytes it was replicated as, not as record objects:
bytes are invisible to the garbage collector, while a log of objects (three
per record, up to 200,000 records) made every full collection of a busy voter
walk them all (70-100 ms pauses). A read decodes the batches it needs; the
last ``DECODED_KEPT`` batches stay decoded, so followers of the tail, the
usual readers, decode nothing, as long as they hold at most
``DECODED_RECORDS_KEPT`` records: 64 batches of 10,000 partitions each (a
large CreatePartitions) were 640,000 records of objects, and every full
collection of a voter walked them (1-2.5 s pauses at 2,000,000 partitions).
"""

from __future__ import annotations

import bisect
import collections
import logging
import threading
from typing import NamedTuple

from metadata_records.codec import decode_batch
from metadata_records.records import Batch, Record, Who

log = logging.getLogger(__name__)


class LogEntry(NamedTuple):
    offset: int
    timestamp_ms: int
    controller_epoch: int
    record: Record
    batch_offset: int  # the offset of the first record of its batch
    who: Who | None = None  # who asked for it (its batch's Who that covers it)


class OffsetTooOld(LookupError):
    def __init__(self, offset: int, oldest: int) -> None:
        super().__init__(f"offset {offset} is no longer retained; the oldest is {oldest}")
        self.offset = offset
        self.oldest = oldest


class _Stored(NamedTuple):
    first_offset: int
    count: int
    payload: bytes  # the batch as encoded by metadata_records.codec


class RecordLog:
    DECODED_KEPT = 64
    DECODED_RECORDS_KEPT = 16_384

    def __init__(self, retention: int = 200_000) -> None:
        if retention < 1:
            raise ValueError(f"log retention must be at least 1 record, got {retention}")
        self.retention = retention
        self._lock = threading.Lock()
        self._batches: list[_Stored] = []
        self._firsts: list[int] = []  # first offsets of _batches, for bisect
        self._records = 0  # in _batches
        self._base = 0  # offset of the first retained record
        self._decoded: collections.OrderedDict[int, Batch] = collections.OrderedDict()
        self._decoded_records = 0  # in _decoded
        # The core's copy of every appended batch for its HTTP workers and
        # orderer process (voter/batch_ring.BatchRing), with workers.
        self.ring = None

    def reset(self, next_offset: int) -> None:
        """Forget everything: the state now comes from a snapshot at ``next_offset``."""
        with self._lock:
            self._batches, self._firsts, self._records = [], [], 0
            self._base = next_offset
            self._forget_decoded()

    def append(self, batch: Batch, first_offset: int, payload: bytes) -> None:
        """``batch`` applied at ``first_offset``; ``payload`` is its encoding."""
        if not batch.records:
            return
        with self._lock:
            if first_offset != self._base + self._records:
                # Cannot happen while apply is the only writer; never leave a gap.
                self._batches, self._firsts, self._records = [], [], 0
                self._base = first_offset
                self._forget_decoded()
            self._batches.append(_Stored(first_offset, len(batch.records), payload))
            self._firsts.append(first_offset)
            self._records += len(batch.records)
            self._remember(first_offset, batch)
            excess = self._records - self.retention
            if excess > self.retention // 4:  # trim in steps, not on every append
                drop = 0
                while drop < len(self._batches) - 1 and excess >= self._batches[drop].count:
                    excess -= self._batches[drop].count
                    self._records -= self._batches[drop].count
                    self._forget_decoded(self._batches[drop].first_offset)
                    drop += 1
                del self._batches[:drop]
                del self._firsts[:drop]
                self._base = self._batches[0].first_offset
        ring = self.ring
        if ring is not None:
            try:
                ring.publish(first_offset, len(batch.records), payload)
            except Exception:  # never fail the apply: its readers catch up over their links
                log.exception("the batch ring failed; HTTP workers get batches over their links")
                self.ring = None

    def _remember(self, first_offset: int, batch: Batch) -> None:
        if len(batch.records) > self.DECODED_RECORDS_KEPT:
            return  # decoded again when read: its objects would cost every collection
        self._forget_decoded(first_offset)
        self._decoded[first_offset] = batch
        self._decoded_records += len(batch.records)
        while (
            len(self._decoded) > self.DECODED_KEPT
            or self._decoded_records > self.DECODED_RECORDS_KEPT
        ):
            self._decoded_records -= len(self._decoded.popitem(last=False)[1].records)

    def _forget_decoded(self, first_offset: int | None = None) -> None:
        """The decoded batch at ``first_offset`` dropped; with None, every one."""
        if first_offset is None:
            self._decoded.clear()
            self._decoded_records = 0
            return
        batch = self._decoded.pop(first_offset, None)
        if batch is not None:
            self._decoded_records -= len(batch.records)

    def export(self, below: int) -> tuple[int, list[tuple[int, int, bytes]]]:
        """The retained batches that end at or below ``below``, as (base offset,
        [(first offset, record count, payload)]): an HTTP worker's copy starts
        from them (``load``)."""
        with self._lock:
            kept = [tuple(s) for s in self._batches if s.first_offset + s.count <= below]
            return self._base, kept

    def stored_from(self, offset: int, below: int) -> list[tuple[int, int, bytes]]:
        """The retained batches from the one that starts at ``offset`` up to
        ``below`` (exclusive), as ``export`` spells them; OffsetTooOld if
        ``offset`` is no longer retained."""
        with self._lock:
            if offset < self._base:
                raise OffsetTooOld(offset, self._base)
            i = bisect.bisect_left(self._firsts, offset)
            out = []
            for stored in self._batches[i:]:
                if stored.first_offset + stored.count > below:
                    break
                out.append(tuple(stored))
            return out

    def load(self, base: int, stored: list[tuple[int, int, bytes]], next_offset: int) -> None:
        """Replaces everything with ``export``'s batches; the log then goes on
        at ``next_offset`` (if the export ended short of it, from there)."""
        with self._lock:
            self._batches = [_Stored(*s) for s in stored]
            self._records = sum(s.count for s in self._batches)
            if not self._batches or base + self._records != next_offset:
                self._batches, self._records, base = [], 0, next_offset
            self._firsts = [s.first_offset for s in self._batches]
            self._base = base
            self._forget_decoded()

    @property
    def oldest_offset(self) -> int:
        return self._base

    @property
    def next_offset(self) -> int:
        with self._lock:
            return self._base + self._records

    def read(self, from_offset: int, max_records: int, remember: bool = True) -> list[LogEntry]:
        """Up to ``max_records`` entries from ``from_offset`` (empty at the end);
        OffsetTooOld when it is below the oldest retained offset. ``remember``
        False: the batches decoded are not kept (a filtered scan of old
        batches would push out the tail that followers read)."""
        with self._lock:
            if from_offset < self._base:
                raise OffsetTooOld(from_offset, self._base)
            i = max(0, bisect.bisect_right(self._firsts, from_offset) - 1)
            wanted = self._batches[i : i + max_records]  # a batch has at least one record
        entries: list[LogEntry] = []
        for stored in wanted:
            if len(entries) >= max_records:
                break
            with self._lock:
                batch = self._decoded.get(stored.first_offset)
            if batch is None:  # older than the batches kept decoded: decode it (off the lock)
                batch = decode_batch(stored.payload)
                if remember:
                    with self._lock:
                        self._remember(stored.first_offset, batch)
            start = max(0, from_offset - stored.first_offset)
            stop = min(stored.count, start + max_records - len(entries))
            entries += batch_entries(batch, stored.first_offset, start, stop)
        return entries


def batch_entries(batch: Batch, first_offset: int, start: int, stop: int) -> list[LogEntry]:
    """The entries of records [``start``, ``stop``) of ``batch``, applied at
    ``first_offset``."""
    whos = who_by_record(batch)
    return [
        LogEntry(
            first_offset + k,
            batch.timestamp_ms,
            batch.controller_epoch,
            batch.records[k],
            first_offset,
            None if whos is None else whos[k],
        )
        for k in range(start, stop)
    ]


def who_by_record(batch: Batch) -> list[Who] | None:
    """The Who covering each record of ``batch``, by index; None without a who."""
    if not batch.who:
        return None
    out: list[Who] = []
    for who in batch.who:
        out += [who] * who.records
    return out
