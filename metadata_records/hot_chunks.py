"""The slots of the chunks read whole most recently, kept read out of their
image file: what makes a hot topic's read cost what it costs from a copy.

A chunk read from an image file (``FileChunk``) slices each slot out of the
mapping on every read: 0.28 µs a partition more than a chunk a process holds
itself, and 5-11% fewer HTTP reads a second before this module
(docs/performance.md). The slots a
whole-chunk read sliced are kept on the chunk (``FileChunk._read``), so the
next read of that chunk is a tuple's iteration, as from a copy.

Bounded by slots, the first read out let go first: a process's memory then
stays what it was, not growing with partitions (``HOT_SLOTS`` of about 100
bytes each: 6.5 MB). First in, first out, not least recently used: a read
of a kept chunk then costs one attribute's load and no bookkeeping (keeping
the order of use cost 2% of a page of 100 topics), and a chunk still hot
when its turn comes is read out once more, once per ``HOT_SLOTS`` slots
read out after it. A chunk's entry is a weak reference, so a chunk that a
batch or a newer file replaced is not kept alive (nor its file mapped) by
being hot; its entry goes with it. Only whole-chunk reads fill it: a lone
partition read (the controller deciding one AlterPartition) slices its one
slot and leaves the cache alone, so random single reads cost no more than
without it.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

# Whole-chunk reads keep their slots (this module); False: sliced on every read.
HOT_CHUNKS = True

HOT_SLOTS = 65_536


class HotChunks:
    """Which chunks hold their slots read out, in the order they were read
    out, and how many slots that is. A chunk's slots live on the chunk
    itself; this holds only the order and lets the oldest go past ``limit``
    slots."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.slots = 0
        self._order: OrderedDict[weakref.ref, int] = OrderedDict()
        # The core's apply thread and its event loop both read chunks; a
        # collection inside ``keep`` may run ``_gone`` on the same thread.
        self._lock = threading.RLock()

    def keep(self, chunk: Any, slots: tuple) -> None:
        """Keep ``slots`` on ``chunk`` (its ``_read``), letting the first kept
        go while more than ``limit`` slots are kept."""
        size = len(slots)
        if not size or size > self.limit:
            return
        with self._lock:
            ref = weakref.ref(chunk, self._gone)
            if ref in self._order:  # two threads read it out at once
                return
            chunk._read = slots
            self._order[ref] = size
            self.slots += size
            while self.slots > self.limit:
                old, old_size = self._order.popitem(last=False)
                self.slots -= old_size
                held = old()
                if held is not None:
                    held._read = None

    def _gone(self, ref: weakref.ref) -> None:
        # The chunk died (a batch or a newer file replaced it): its slots went with it.
        with self._lock:
            size = self._order.pop(ref, None)
            if size is not None:
                self.slots -= size

    def clear(self) -> None:
        with self._lock:
            for ref in list(self._order):
                held = ref()
                if held is not None:
                    held._read = None
            self._order.clear()
            self.slots = 0

    def __len__(self) -> int:
        return len(self._order)


HOT = HotChunks(HOT_SLOTS)
