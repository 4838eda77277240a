"""A topic's partitions, each kept encoded: what an image costs at scale.

As Python objects a partition costs about 790 bytes (a ten-field tuple, its
replica tuples, epochs past the small-int cache, a dict entry in its chunk):
1.5 GB at 2,000,000 partitions, and every process of a voter holds an image.
Here each partition is its registration's ``marshal`` encoding (61 bytes for
RF 3 with the ISR equal to the replicas) in a slot of its chunk's tuple,
about 105 bytes in all; a read decodes it, 0.3 µs (bench/op_costs.py
measures reads and changes against the plain map).

The layout is ``PartitionMap``'s (metadata_records/partition_map.py): ids
cut into chunks of ``CHUNK``, a batch copying only the chunks it changes.
A chunk is a tuple indexed by ``id % CHUNK``, None where there is no
partition, as long as its highest id needs (a topic of 10 partitions has a
10-slot chunk). Iteration is by chunk, in the order chunks were first used,
and by id within one: ascending for every topic Kafka makes.

Reads return a new PartitionRegistration each time: equal, never the same
object. Code that must know whether a partition changed compares values
(``ImageDelta.replay_known_change``, ``differing``).

The plain twin is ``PartitionMap`` of the registrations themselves; with
``COMPACT_PARTITIONS`` False every image keeps that. ``tests/test_partition_states.py``
checks the two against a dict with Hypothesis.
"""

from __future__ import annotations

import functools
import marshal
import struct
import sys
from array import array
from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from itertools import accumulate, pairwise
from typing import Any

from . import hot_chunks
from .image import PartitionRegistration
from .partition_map import PartitionMap

# Images keep partitions encoded (this module); False: as objects (PartitionMap).
COMPACT_PARTITIONS = True

CHUNK_BITS = 8
CHUNK = 1 << CHUNK_BITS
_LOW = CHUNK - 1

_encode = marshal.dumps
_decode = marshal.loads
_new_tuple = tuple.__new__


def encode(part: PartitionRegistration) -> bytes:
    """One registration as its slot holds it (the ISR stays shared with the
    replicas when it was: marshal writes the second as a reference)."""
    return _encode(tuple(part))


def decode(slot: bytes) -> PartitionRegistration:
    return _new_tuple(PartitionRegistration, _decode(slot))


class PartitionStates(Mapping):
    __slots__ = ("_chunks", "_len")

    def __init__(self, partitions: Mapping[int, PartitionRegistration] | None = None) -> None:
        self._chunks: dict[int, tuple[bytes | None, ...]] = {}
        self._len = 0
        if partitions:
            built = self.updated(partitions)
            self._chunks, self._len = built._chunks, built._len

    def updated(
        self, changed: Mapping[int, PartitionRegistration | None], *, none_removes: bool = False
    ) -> PartitionStates:
        """This map with ``changed`` put in: only the chunks it falls in are
        copied (a chunk read from an image file keeps its file and copies
        only its own changes). With ``none_removes``, an id changed to None
        is removed."""
        if not changed:
            return self
        chunks = dict(self._chunks)
        size = self._len
        opened: dict[int, list[bytes | None] | FileChunk] = {}
        for pid, part in changed.items():
            key, low = pid >> CHUNK_BITS, pid & _LOW
            slots = opened.get(key)
            if slots is None:
                chunk = chunks.get(key, ())
                if type(chunk) is FileChunk:
                    slots = opened[key] = chunk.opened()
                else:
                    slots = opened[key] = list(chunk)
            if type(slots) is FileChunk:
                was = slots.get(low)
                slot = None if part is None and none_removes else encode(part)
                slots.put(low, slot)
                size += (slot is not None) - (was is not None)
                continue
            if low >= len(slots):
                if part is None and none_removes:
                    continue
                slots.extend([None] * (low + 1 - len(slots)))
            if part is None and none_removes:
                if slots[low] is not None:
                    size -= 1
                slots[low] = None
                continue
            if slots[low] is None:
                size += 1
            slots[low] = encode(part)
        for key, slots in opened.items():
            if type(slots) is FileChunk:
                chunks[key] = (
                    slots  # kept, if emptied, where it is (never in Kafka: no partition goes)
                )
                continue
            while slots and slots[-1] is None:
                slots.pop()
            if slots:
                chunks[key] = tuple(slots)
            else:
                chunks.pop(key, None)  # dropped: the map is what building it afresh gives
        return _from_chunks(chunks, size)

    def rebased(self, file_chunks: Mapping[int, FileChunk]) -> PartitionStates:
        """This map, equal, with each chunk the image file ``file_chunks``
        (this topic's chunks, read at an offset this map is at or past) also
        holds read from it, keeping only the slots that differ from the file.

        Only a slot changed since this map's own file (or in a chunk it holds
        itself) can differ from a newer file, so the cost follows the changes
        since the last rebase, not the topic. A chunk the file lacks was made
        since: kept as it is; one the file has and this map lacks was emptied
        since: stays out."""
        chunks: dict[int, tuple[bytes | None, ...] | FileChunk] = {}
        for key, chunk in self._chunks.items():
            base = file_chunks.get(key)
            if base is None:
                chunks[key] = chunk
                continue
            if type(chunk) is FileChunk:
                if chunk._at > base._at:
                    raise ValueError(
                        f"a file at offset {base._at} is older than the one at "
                        f"{chunk._at} this map reads from"
                    )
                mine, candidates = chunk.get, chunk.changed_slots()
            elif base.holds_bytes_of(chunk):  # the core's own: the file was written from it
                chunks[key] = base
                continue
            else:
                mine = dict(enumerate(chunk)).get
                candidates = range(max(len(chunk), len(base)))
            rebased = base.opened()
            for low in candidates:
                slot = mine(low)
                if not _same_slot(slot, base.get(low)):
                    rebased.put(low, slot)
            chunks[key] = rebased
        return _from_chunks(chunks, self._len)

    # ---------------------------------------------------------------- Mapping

    def _slot(self, pid: Any) -> bytes | None:
        try:
            return self._chunks[pid >> CHUNK_BITS][pid & _LOW]
        except (KeyError, IndexError, TypeError):
            return None

    def __getitem__(self, pid: int) -> PartitionRegistration:
        slot = self._slot(pid)
        if slot is None:
            raise KeyError(pid)
        return decode(slot)

    def get(self, pid: int, default: Any = None) -> Any:
        slot = self._slot(pid)
        return default if slot is None else decode(slot)

    def __contains__(self, pid: object) -> bool:
        return self._slot(pid) is not None

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[int]:
        for key, chunk in self._chunks.items():
            base = key << CHUNK_BITS
            for low, slot in enumerate(chunk):
                if slot is not None:
                    yield base + low

    def items(self) -> ItemsView:
        return _Items(self)

    def values(self) -> ValuesView:
        return _Values(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return len(self) == len(other) and all(
                other.get(pid, _MISSING) == part for pid, part in self.items()
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment] - mutable-looking, as a dict

    def differing(self, other: Mapping[int, PartitionRegistration]) -> Iterator[int]:
        """The ids whose registration differs (an image's diff): chunks the
        two share are skipped whole; equal encodings are equal registrations."""
        if not isinstance(other, PartitionStates):
            other = PartitionStates(other)
        mine, theirs = self._chunks, other._chunks
        for key in mine.keys() | theirs.keys():
            a, b = mine.get(key, ()), theirs.get(key, ())
            if a is b:
                continue
            base = key << CHUNK_BITS
            lows: Any = range(max(len(a), len(b)))
            if type(a) is FileChunk and type(b) is FileChunk:
                if a.same_file_part(b):
                    lows = sorted(a._changed.keys() | b._changed.keys())
            elif type(a) is FileChunk or type(b) is FileChunk:
                file, held = (a, b) if type(a) is FileChunk else (b, a)
                if file.holds_bytes_of(held):
                    continue
            for low in lows:
                x = a[low] if low < len(a) else None
                y = b[low] if low < len(b) else None
                if x is y or x == y:
                    continue
                if x is None or y is None or decode(x) != decode(y):
                    yield base + low

    def __repr__(self) -> str:
        return f"PartitionStates({dict(self.items())!r})"

    def __reduce__(self) -> tuple:
        return (_from_chunks, (self._chunks, self._len))


def _same_slot(a: bytes | None, b: bytes | None) -> bool:
    """Whether two slots hold equal registrations (equal registrations may
    encode differently: marshal writes a shared tuple as a reference)."""
    if a is b or a == b:
        return True
    return a is not None and b is not None and _decode(a) == _decode(b)


class FileChunk:
    """A chunk whose slots are read from an image file (a mapped buffer: every
    process of a voter shares its pages), with the slots changed since.

    In the file, the chunk's slots sit one after another from ``_data``, and
    its ``_n + 1`` bounds (little-endian uint64, from the first slot's start)
    at ``_bounds``: slot ``low`` is ``[bounds[low], bounds[low + 1])`` from
    ``_data``, empty where there is no partition. Two chunks of equal
    partitions are equal bytes, wherever they sit (``same_file_part``).
    ``_changed`` maps a slot to its bytes, or None where it no longer holds
    one; a chunk is changed only while ``updated`` builds it (``opened``),
    then never again. It reads as the tuple of ``PartitionStates``:
    indexable up to its length (a slot past it raises IndexError), None
    where empty, iterable. ``_read`` is a weak reference to its slots as
    read out whole, alive while the hot set keeps them
    (metadata_records/hot_chunks.py); a copy being built has none, and is
    only read whole once built."""

    __slots__ = ("_buf", "_at", "_data", "_bounds", "_n", "_changed", "_len", "_read")

    def __init__(self, buf: Any, data: int, bounds: int, n: int, at: int = 0) -> None:
        self._buf = buf
        self._at = at  # the offset of the file's image: a rebase never goes back
        self._data = data
        self._bounds = bounds
        self._n = n
        self._changed: dict[int, bytes | None] = {}
        self._len = n
        self._read: Any = None  # a weak reference to hot_chunks.Kept

    def _from_file(self, low: int) -> bytes | None:
        if low >= self._n:
            return None
        start, end = _BOUNDS.unpack_from(self._buf, self._bounds + 8 * low)
        return self._buf[self._data + start : self._data + end] if end > start else None

    def get(self, low: int) -> bytes | None:
        changed = self._changed
        if changed and low in changed:
            return changed[low]
        return self._from_file(low)

    def __getitem__(self, low: int) -> bytes | None:
        # get() inlined: a partition read is this and a decode.
        read = self._read
        if read is not None:
            kept = read()
            if kept is not None:
                return kept.slots[low]
        if low >= self._len:
            raise IndexError(low)
        changed = self._changed
        if changed and low in changed:
            return changed[low]
        if low >= self._n:
            return None
        start, end = _BOUNDS.unpack_from(self._buf, self._bounds + 8 * low)
        if end > start:
            data = self._data
            return self._buf[data + start : data + end]
        return None

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[bytes | None]:
        read = self._read
        if read is not None:
            kept = read()
            if kept is not None:
                return iter(kept.slots)
        slots = self._slots_read_out()
        if hot_chunks.HOT_CHUNKS:
            read = tuple(slots)
            hot_chunks.HOT.keep(self, read)
            return iter(read)
        return iter(slots)

    def _slots_read_out(self) -> list[bytes | None]:
        # Every bound read at once: a whole topic's read costs what its slots do.
        buf, data, n = self._buf, self._data, self._n
        bounds = _bounds_of(n).unpack_from(buf, self._bounds)
        slots: list[bytes | None] = [
            buf[data + start : data + end] if end > start else None
            for start, end in pairwise(bounds)
        ]
        if self._changed:
            if self._len > n:
                slots.extend([None] * (self._len - n))
            for low, slot in self._changed.items():
                slots[low] = slot
            del slots[self._len :]
        return slots

    def changed_slots(self) -> list[int]:
        return list(self._changed)

    def same_file_part(self, other: FileChunk) -> bool:
        """Whether the two read equal slots from their files (changes aside):
        the same place in one file, or equal bytes in two (two compares in C,
        not a slot at a time: what lets a newer file's image be compared
        with the one before it at the cost of the changes)."""
        if self._buf is other._buf and self._bounds == other._bounds:
            return True
        if self._n != other._n:
            return False
        n, a, b = self._n, self._buf, other._buf
        size = _BOUND.unpack_from(a, self._bounds + 8 * n)[0]
        if size != _BOUND.unpack_from(b, other._bounds + 8 * n)[0]:
            return False
        return (
            a[self._bounds : self._bounds + 8 * n] == b[other._bounds : other._bounds + 8 * n]
            and a[self._data : self._data + size] == b[other._data : other._data + size]
        )

    def holds_bytes_of(self, slots: Any) -> bool:
        """Whether this chunk, unchanged, holds exactly these encoded slots (a
        chunk a process keeps itself): its bytes and its bounds compared
        whole, in C; False says nothing (equal registrations may be encoded
        apart), so the caller then compares slot by slot."""
        if self._changed or self._n != len(slots):
            return False
        data, bounds = file_chunk_bytes(slots)
        buf = self._buf
        return (
            buf[self._bounds : self._bounds + len(bounds)] == bounds
            and buf[self._data : self._data + len(data)] == data
        )

    def opened(self) -> FileChunk:
        """A copy to change (``put``): the file shared, the changes copied."""
        copy = FileChunk.__new__(FileChunk)
        copy._buf, copy._data, copy._bounds, copy._n = self._buf, self._data, self._bounds, self._n
        copy._at = self._at
        copy._changed = dict(self._changed)
        copy._len = self._len
        copy._read = None
        return copy

    def __reduce__(self) -> tuple:
        # Pickled (to another process): its slots, not the file; a scan, not a
        # hot read, so the hot set is left alone.
        return (tuple, (self._slots_read_out(),))

    def put(self, low: int, slot: bytes | None) -> None:
        self._changed[low] = slot
        if slot is not None:
            self._len = max(self._len, low + 1)
        elif low == self._len - 1:  # its length is what its highest slot needs
            while self._len and self.get(self._len - 1) is None:
                self._len -= 1


_BOUND = struct.Struct("<Q")


def file_chunk_bytes(slots: Any) -> tuple[bytes, bytes]:
    """A chunk's slots as an image file holds them: their bytes one after
    another, and their ``len + 1`` bounds from the first slot's start as
    little-endian uint64 (metadata_records/image_file.py writes these)."""
    encoded = [slot or b"" for slot in slots]
    bounds = array("Q", accumulate(map(len, encoded), initial=0))
    if sys.byteorder != "little":
        bounds.byteswap()
    return b"".join(encoded), bounds.tobytes()


@functools.cache
def _bounds_of(n: int) -> struct.Struct:
    """A chunk's ``n + 1`` bounds as one struct (at most CHUNK + 1 of them)."""
    return struct.Struct(f"<{n + 1}Q")


_BOUNDS = struct.Struct("<QQ")


_MISSING = object()


def _from_chunks(chunks: dict[int, tuple[bytes | None, ...]], size: int) -> PartitionStates:
    new = PartitionStates.__new__(PartitionStates)
    new._chunks = chunks
    new._len = size
    return new


class _Items(ItemsView):
    __slots__ = ()

    def __iter__(self) -> Iterator[tuple[int, PartitionRegistration]]:
        for key, chunk in self._mapping._chunks.items():
            base = key << CHUNK_BITS
            for low, slot in enumerate(chunk):
                if slot is not None:
                    yield base + low, _new_tuple(PartitionRegistration, _decode(slot))


class _Values(ValuesView):
    __slots__ = ()

    def __iter__(self) -> Iterator[PartitionRegistration]:
        for chunk in self._mapping._chunks.values():
            for slot in chunk:
                if slot is not None:
                    yield _new_tuple(PartitionRegistration, _decode(slot))


EMPTY_STATES = PartitionStates()
EMPTY_PLAIN = PartitionMap()


def empty_partitions() -> Mapping[int, PartitionRegistration]:
    """A new topic's partitions: encoded, or the plain twin with the switch off."""
    return EMPTY_STATES if COMPACT_PARTITIONS else EMPTY_PLAIN


def partitions_of(partitions: Mapping[int, PartitionRegistration]) -> Mapping:
    """``partitions`` as an image keeps them (a snapshot's decoded topic)."""
    return PartitionStates(partitions) if COMPACT_PARTITIONS else PartitionMap(partitions)


def partitions_from_rows(rows: list[tuple]) -> tuple[Mapping, int | None]:
    """A topic's partitions from a snapshot's checked rows, ``(pid,
    replicas, isr, removing, adding, leader, recovery state, leader epoch,
    partition epoch)`` each, kept as the switch says: with it on, each row
    is encoded as a read decodes it, no registration built (a restart reads
    millions). The index of a row whose id came before is returned with
    them, for the caller to refuse."""
    if not COMPACT_PARTITIONS:
        plain: dict[int, PartitionRegistration] = {}
        for index, (pid, replicas, isr, *rest) in enumerate(rows):
            if pid in plain:
                return EMPTY_PLAIN, index
            plain[pid] = PartitionRegistration(
                replicas, replicas if isr == replicas else isr, *rest
            )
        return PartitionMap(plain), None
    opened: dict[int, list[bytes | None]] = {}
    for index, (pid, replicas, isr, removing, adding, leader, lrs, le, pe) in enumerate(rows):
        if isr == replicas:
            isr = replicas  # shared, as apply keeps it
        key, low = pid >> CHUNK_BITS, pid & _LOW
        slots = opened.get(key)
        if slots is None:
            slots = opened[key] = []
        if low >= len(slots):
            slots.extend([None] * (low + 1 - len(slots)))
        elif slots[low] is not None:
            return EMPTY_STATES, index
        slots[low] = _encode((replicas, isr, removing, adding, leader, lrs, le, pe, (), ()))
    return _from_chunks({key: tuple(slots) for key, slots in opened.items()}, len(rows)), None


def partitions_with(
    partitions: Mapping[int, PartitionRegistration],
    changed: Mapping[int, PartitionRegistration],
) -> Mapping:
    """A topic's partitions with ``changed`` put in, kept as the switch says
    (a map of the other kind, or a dict an image was built with by hand, is
    converted once)."""
    kind = PartitionStates if COMPACT_PARTITIONS else PartitionMap
    if type(partitions) is not kind:
        partitions = kind(partitions)
    return partitions.updated(changed)
