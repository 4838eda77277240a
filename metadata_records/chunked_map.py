"""An immutable mapping that a change copies in proportion to what it
changes: the keys are cut by hash into at most ``CHUNKS`` dicts, and a
change copies the small dict of chunks and each chunk it touches.

``partition_map.py`` does the same for partition ids, which are dense from 0
and cut by range; the keys here (ACL ids, bindings, names) are not, so they
are cut by hash. Python's string hashes differ between processes, so the
order of iteration does too: a caller that answers or writes in an order
sorts (``AclsImage.matching``).

Why not a persistent hash trie (``immutables.Map``, Kafka's choice for its
images): measured on 100,000 keys, one of its sets costs 2.4 us, a chunk's
dict set 0.05 us and a chunk's copy about 1 us; a 10,000-change batch costs
about 3 ms here against 100 ms in four such tries (docs/decisions.md 139).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

CHUNK_BITS = 10
CHUNK_MASK = (1 << CHUNK_BITS) - 1


class ChunkedMap(Mapping):
    __slots__ = ("_chunks", "_len")

    def __init__(self, items: Mapping | None = None) -> None:
        self._chunks: dict[int, dict] = {}
        self._len = 0
        if items:
            built = self.mutate()
            for key, value in items.items():
                built[key] = value
            done = built.finish()
            self._chunks, self._len = done._chunks, done._len

    def __getitem__(self, key: Any) -> Any:
        chunk = self._chunks.get(hash(key) & CHUNK_MASK)
        if chunk is None:
            raise KeyError(key)
        return chunk[key]

    def get(self, key: Any, default: Any = None) -> Any:
        chunk = self._chunks.get(hash(key) & CHUNK_MASK)
        return default if chunk is None else chunk.get(key, default)

    def __contains__(self, key: object) -> bool:
        chunk = self._chunks.get(hash(key) & CHUNK_MASK)
        return chunk is not None and key in chunk

    def __iter__(self) -> Iterator:
        for chunk in self._chunks.values():
            yield from chunk

    def __len__(self) -> int:
        return self._len

    def items(self):  # the chunks' own views: no per-key lookup
        return _Items(self)

    def values(self):
        return _Values(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ChunkedMap):
            # Chunk by chunk: the chunks two maps share compare by identity,
            # so two images a batch apart compare in what the batch changed.
            return self._len == other._len and self._chunks == other._chunks
        return Mapping.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment] - mutable-looking, as a dict

    def mutate(self) -> ChunkedMapBuilder:
        """A builder of the next map; this one stays as it is."""
        return ChunkedMapBuilder(self)


class _Items:
    __slots__ = ("_map",)

    def __init__(self, m: ChunkedMap) -> None:
        self._map = m

    def __iter__(self):
        for chunk in self._map._chunks.values():
            yield from chunk.items()

    def __len__(self) -> int:
        return self._map._len


class _Values(_Items):
    __slots__ = ()

    def __iter__(self):
        for chunk in self._map._chunks.values():
            yield from chunk.values()


class ChunkedMapBuilder:
    """Changes to a ChunkedMap: a chunk is copied the first time it changes."""

    __slots__ = ("_chunks", "_len", "_copied")

    def __init__(self, base: ChunkedMap) -> None:
        self._chunks = dict(base._chunks)
        self._len = base._len
        self._copied: set[int] = set()

    def _own(self, slot: int) -> dict:
        if slot in self._copied:
            return self._chunks[slot]
        self._copied.add(slot)
        chunk = self._chunks[slot] = dict(self._chunks.get(slot, ()))
        return chunk

    def get(self, key: Any, default: Any = None) -> Any:
        chunk = self._chunks.get(hash(key) & CHUNK_MASK)
        return default if chunk is None else chunk.get(key, default)

    def __setitem__(self, key: Any, value: Any) -> None:
        chunk = self._own(hash(key) & CHUNK_MASK)
        size = len(chunk)
        chunk[key] = value
        self._len += len(chunk) - size

    def __delitem__(self, key: Any) -> None:
        slot = hash(key) & CHUNK_MASK
        chunk = self._own(slot)
        del chunk[key]
        self._len -= 1
        if not chunk:
            del self._chunks[slot]
            self._copied.discard(slot)

    def finish(self) -> ChunkedMap:
        done = ChunkedMap.__new__(ChunkedMap)
        done._chunks, done._len = self._chunks, self._len
        self._chunks, self._copied = {}, set()  # a builder makes one map
        return done


EMPTY = ChunkedMap()
_ABSENT = object()


def chunked_with(base: Mapping, changes: Mapping) -> ChunkedMap:
    """``base`` with ``changes`` put in, a None value removing its key: what
    a batch does to one of the image's maps, at the cost of the chunks it
    touches. A plain dict (an image built by hand or by an older loader) is
    chunked first, once."""
    if type(base) is not ChunkedMap:
        base = ChunkedMap(base)
    built = base.mutate()
    for key, value in changes.items():
        if value is not None:
            built[key] = value
        elif built.get(key, _ABSENT) is not _ABSENT:
            del built[key]
    return built.finish()
