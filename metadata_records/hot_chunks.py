"""The slots of the chunks read whole most recently, kept read out of their
image file: what makes a hot topic's read cost what it costs from a copy.

A chunk read from an image file (``FileChunk``) slices each slot out of the
mapping on every read: 0.28 µs a partition more than a chunk a process holds
itself, and 5-11% fewer HTTP reads a second before this module
(docs/performance.md). The slots a whole-chunk read sliced are kept, and the
chunk holds a weak reference to them (``FileChunk._read``), so the next read
of that chunk is a tuple's iteration, as from a copy.

Bounded by slots, the first read out let go first: the set is a deque of at
most ``HOT_SLOTS`` references, one for each slot kept, and what falls off
its front is let go once none of its references is left (a chunk's weak
reference then finds nothing, and the chunk is read out again). A process's
memory stays what it was, not growing with partitions (``HOT_SLOTS`` of
about 100 bytes each: 6.5 MB). First in, first out, not least recently
used: a read of a kept chunk is a weak reference's call and no bookkeeping,
and a chunk still hot when its turn comes is read out once more, once per
``HOT_SLOTS`` slots read out after it.

No lock: the core's apply thread and its event loop both read chunks, and
keeping is one ``deque.extend`` of references, done in C while the
interpreter lock is held; the set holds only bytes, never a chunk, so a
chunk that a batch or a newer file replaced dies as before, and its file is
unmapped with its last chunk. Only whole-chunk reads fill it: a lone
partition read (the controller deciding one AlterPartition) slices its one
slot and leaves the set alone, so random single reads cost no more than
without it.
"""

from __future__ import annotations

import weakref
from collections import deque
from itertools import repeat
from typing import Any

# Whole-chunk reads keep their slots (this module); False: sliced on every read.
HOT_CHUNKS = True

HOT_SLOTS = 65_536


class Kept:
    """A chunk's slots as read out, alive while the set holds a reference."""

    __slots__ = ("slots", "__weakref__")

    def __init__(self, slots: tuple) -> None:
        self.slots = slots


class HotChunks:
    """The slots kept read out: a reference for each, the oldest let go
    past ``limit`` of them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._refs: deque[Kept] = deque(maxlen=limit)

    def keep(self, chunk: Any, slots: tuple) -> None:
        """Keep ``slots`` for ``chunk`` (a weak reference in its ``_read``),
        letting the first kept go while more than ``limit`` slots are kept."""
        size = len(slots)
        if not size or size > self.limit:
            return
        kept = Kept(slots)
        chunk._read = weakref.ref(kept)
        self._refs.extend(repeat(kept, size))

    def held(self) -> list[Kept]:
        """What is kept, each once, oldest first (a chunk's front partly let
        go counts whole: at most ``limit`` slots plus one chunk's)."""
        return list(dict.fromkeys(self._refs))

    def slots(self) -> int:
        return sum(len(kept.slots) for kept in self.held())

    def __len__(self) -> int:
        return len(self.held())


HOT = HotChunks(HOT_SLOTS)
