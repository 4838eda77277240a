"""The applied metadata log, as brokers follow it (``GET /v1/log``).

Records are appended by the Raft apply thread and read by the HTTP thread;
a lock held for a list slice keeps readers safe. Only the tail is kept
(``retention`` records, and nothing before the last snapshot a node loaded):
older offsets answer 410 and the reader loads the snapshot first.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from metadata_records.records import Batch, Record


class LogEntry(NamedTuple):
    offset: int
    timestamp_ms: int
    controller_epoch: int
    record: Record


class OffsetTooOld(LookupError):
    def __init__(self, offset: int, oldest: int) -> None:
        super().__init__(f"offset {offset} is no longer retained; the oldest is {oldest}")
        self.offset = offset
        self.oldest = oldest


class RecordLog:
    def __init__(self, retention: int = 200_000) -> None:
        if retention < 1:
            raise ValueError(f"log retention must be at least 1 record, got {retention}")
        self.retention = retention
        self._lock = threading.Lock()
        self._entries: list[LogEntry] = []
        self._base = 0  # offset of _entries[0]

    def reset(self, next_offset: int) -> None:
        """Forget everything: the state now comes from a snapshot at ``next_offset``."""
        with self._lock:
            self._entries = []
            self._base = next_offset

    def append(self, batch: Batch, first_offset: int) -> None:
        entries = [
            LogEntry(first_offset + i, batch.timestamp_ms, batch.controller_epoch, record)
            for i, record in enumerate(batch.records)
        ]
        with self._lock:
            if first_offset != self._base + len(self._entries):
                # Cannot happen while apply is the only writer; never leave a gap.
                self._entries = []
                self._base = first_offset
            self._entries.extend(entries)
            excess = len(self._entries) - self.retention
            if excess > self.retention // 4:  # trim in steps, not on every append
                del self._entries[:excess]
                self._base += excess

    @property
    def oldest_offset(self) -> int:
        return self._base

    @property
    def next_offset(self) -> int:
        with self._lock:
            return self._base + len(self._entries)

    def read(self, from_offset: int, max_records: int) -> list[LogEntry]:
        """Up to ``max_records`` entries from ``from_offset`` (empty at the end);
        OffsetTooOld when it is below the oldest retained offset."""
        with self._lock:
            if from_offset < self._base:
                raise OffsetTooOld(from_offset, self._base)
            start = from_offset - self._base
            return self._entries[start : start + max_records]
