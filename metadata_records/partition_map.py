"""A topic's partitions by id: an immutable mapping that a batch updates in
time proportional to what it changes, not to the topic's size.

An image is never mutated (readers keep the one they hold while the next is
built), so until now each batch copied the whole partition dict of every
topic it touched: a 100-record batch cost 1.8 ms on a topic of 100,000
partitions against 0.1 ms on one of 100 (bench/controller.py, "apply").
Kafka's TopicsImage faces the same problem and keeps its maps in a
persistent hash trie; here the partitions are cut by id into chunks of
``CHUNK`` (partition ids are dense from 0), and a batch copies only the
chunks it changes and the small dict of chunks. A lookup is two dict
lookups. Read it as a ``Mapping``: ``[pid]``, ``get``, ``in``, ``len``,
iteration and the views. Its order is a dict's (the order the partitions
were added; one replaced keeps its place) whenever ids come in ascending, as
Kafka adds them (CreateTopics from 0, CreatePartitions on from the count);
otherwise it is by chunk, in the order chunks were first used.

The plain version it must agree with is ``{**partitions, **changed}`` on a
dict: ``tests/test_partition_map.py`` checks both with Hypothesis.

An image keeps a topic's partitions encoded in the same layout
(metadata_records/partition_states.py); this map of the registrations
themselves is its plain twin. An image's brokers by id are one of these
(``updated(..., none_removes=True)``):
with 20,000 brokers, copying their dict cost every process about 0.4 ms a
batch that registered, fenced or unfenced one (docs/decisions.md 132).
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from typing import Any

CHUNK_BITS = 8
CHUNK = 1 << CHUNK_BITS  # partitions a chunk


class PartitionMap(Mapping):
    __slots__ = ("_chunks", "_len")

    def __init__(self, partitions: Mapping[int, Any] | None = None) -> None:
        if isinstance(partitions, PartitionMap):
            self._chunks: dict[int, dict[int, Any]] = partitions._chunks
            self._len: int = partitions._len
            return
        chunks: dict[int, dict[int, Any]] = {}
        if partitions:
            for pid, part in partitions.items():
                chunk = chunks.get(pid >> CHUNK_BITS)
                if chunk is None:
                    chunk = chunks[pid >> CHUNK_BITS] = {}
                chunk[pid] = part
        self._chunks = chunks
        self._len = sum(map(len, chunks.values()))

    def updated(self, changed: Mapping[int, Any], *, none_removes: bool = False) -> PartitionMap:
        """This map with ``changed`` put in (an id it has is replaced in its
        place, a new one added): only the chunks ``changed`` falls in are
        copied. With ``none_removes``, an id changed to None is removed."""
        if not changed:
            return self
        chunks = dict(self._chunks)
        size = self._len
        copied: set[int] = set()
        for pid, value in changed.items():
            key = pid >> CHUNK_BITS
            chunk = chunks.get(key)
            if key not in copied:
                chunk = chunks[key] = {} if chunk is None else chunk.copy()
                copied.add(key)
            elif chunk is None:  # emptied and dropped earlier in this update
                chunk = chunks[key] = {}
            if value is None and none_removes:  # a voter's brokers: UnregisterBrokerRecord
                if chunk.pop(pid, _MISSING) is not _MISSING:
                    size -= 1
                if not chunk:  # dropped: the map is what building it afresh gives
                    del chunks[key]
            else:
                if pid not in chunk:
                    size += 1
                chunk[pid] = value
        return _from_chunks(chunks, size)

    # ---------------------------------------------------------------- Mapping

    def __getitem__(self, pid: int) -> Any:
        try:
            return self._chunks[pid >> CHUNK_BITS][pid]
        except (KeyError, TypeError):
            raise KeyError(pid) from None

    def get(self, pid: int, default: Any = None) -> Any:
        try:
            chunk = self._chunks.get(pid >> CHUNK_BITS)
        except TypeError:  # not an int: no partition has it, as with a dict
            return default
        return default if chunk is None else chunk.get(pid, default)

    def __contains__(self, pid: object) -> bool:
        try:
            chunk = self._chunks.get(pid >> CHUNK_BITS)  # type: ignore[operator]
        except TypeError:
            return False
        return chunk is not None and pid in chunk

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[int]:
        for chunk in self._chunks.values():
            yield from chunk

    def items(self) -> ItemsView:
        return _Items(self)

    def values(self) -> ValuesView:
        return _Values(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartitionMap):
            return self._len == other._len and self._chunks == other._chunks
        if isinstance(other, Mapping):
            return self._len == len(other) and all(
                other.get(pid, _MISSING) == part for pid, part in self.items()
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment] - mutable-looking, as a dict

    def differing(self, other: Mapping[int, Any]) -> Iterator[int]:
        """The ids whose value is not the same object in both (an image's
        diff): chunks the two share are skipped whole."""
        if not isinstance(other, PartitionMap):
            other = PartitionMap(other)
        mine, theirs = self._chunks, other._chunks
        for key in mine.keys() | theirs.keys():
            a, b = mine.get(key, _EMPTY_CHUNK), theirs.get(key, _EMPTY_CHUNK)
            if a is not b:
                for pid in a.keys() | b.keys():
                    if a.get(pid) is not b.get(pid):
                        yield pid

    def __repr__(self) -> str:
        return f"PartitionMap({dict(self.items())!r})"

    def __reduce__(self) -> tuple:
        return (_from_chunks, (self._chunks, self._len))


_MISSING = object()
_EMPTY_CHUNK: dict[int, Any] = {}


def _from_chunks(chunks: dict[int, dict[int, Any]], size: int) -> PartitionMap:
    new = PartitionMap.__new__(PartitionMap)
    new._chunks = chunks
    new._len = size
    return new


class _Items(ItemsView):
    __slots__ = ()

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        for chunk in self._mapping._chunks.values():
            yield from chunk.items()


class _Values(ValuesView):
    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        for chunk in self._mapping._chunks.values():
            yield from chunk.values()


EMPTY = PartitionMap()


def with_changes(
    partitions: Mapping[int, Any], changed: Mapping[int, Any], *, none_removes: bool = False
) -> PartitionMap:
    """``partitions`` (a PartitionMap, or a dict an image was built with by
    hand) with ``changed`` put in (``updated``)."""
    if type(partitions) is not PartitionMap:
        partitions = PartitionMap(partitions)
    return partitions.updated(changed, none_removes=none_removes)
