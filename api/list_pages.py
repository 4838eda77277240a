"""``GET /v1/topics`` and ``GET /v1/brokers`` a page at a time, or whole and
streamed: neither answer is built whole in memory.

A page is ``limit`` entries after the cursor ``after`` (a topic name, a
broker id; exclusive), in the list's order (names, ids), with ``nextAfter``:
the cursor of the next page, or null on the last. A cursor is a key, not a
position, so a topic created or deleted between two pages moves no other
entry to another page: each page is exact for the image it was read from
(its ``X-Metadata-Offset``), and a topic created meanwhile after the cursor
shows up on a later page.

The sorted topic names (broker ids) are kept for the last image's
``topic_ids`` (``brokers``) map, which a batch replaces only when it creates
or deletes a topic (changes a broker): a page costs a binary search and its
own entries, not a sort of every key.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import orjson

from metadata_records.image import MetadataImage

from .reads import broker_obj, topic_obj

MAX_PAGE = 10_000
STREAM_PIECE = 256  # entries per piece of a streamed whole list


class SortedKeys:
    """A map's keys in order, kept for the last map asked about: an image's
    map is replaced only by a batch that changes it, so the pages of one
    walk, and every page between two such batches, share one sort. The map
    is held strongly, so the check by identity can never match a new map at
    a reused address; the pair is one tuple, so a reader in another thread
    sees the old pair or the new one."""

    def __init__(self) -> None:
        self._last: tuple[Mapping | None, list] = (None, [])

    def __call__(self, keyed: Mapping) -> list:
        last, keys = self._last
        if last is not keyed:
            keys = sorted(keyed)
            self._last = (keyed, keys)
        return keys


topic_names = SortedKeys()  # of image.topic_ids: replaced when a topic is created or deleted
broker_ids = SortedKeys()  # of image.brokers: replaced when a broker's registration changes


def _page(keys: list, after: Any, limit: int, entry: Callable[[Any], dict]) -> tuple[list, Any]:
    """The entries of the ``limit`` keys after ``after`` (in ``keys``' order),
    and the next page's cursor (None on the last)."""
    start = 0 if after is None else bisect.bisect_right(keys, after)
    chosen = keys[start : start + limit]
    more = start + limit < len(keys)
    return [entry(k) for k in chosen], (chosen[-1] if more and chosen else None)


def topics_page(image: MetadataImage, after: str | None, limit: int) -> dict[str, Any]:
    topics, next_after = _page(
        topic_names(image.topic_ids),
        after,
        limit,
        lambda name: topic_obj(image.topics[image.topic_ids[name]]),
    )
    return {"topics": topics, "nextAfter": next_after}


def brokers_page(image: MetadataImage, after: int | None, limit: int) -> dict[str, Any]:
    brokers, next_after = _page(
        broker_ids(image.brokers), after, limit, lambda b: broker_obj(image.brokers[b])
    )
    return {"brokers": brokers, "nextAfter": next_after}


def topics_stream(image: MetadataImage) -> Iterator[bytes]:
    """``{"topics": [...], "nextAfter": null}`` in pieces of STREAM_PIECE topics."""
    names = topic_names(image.topic_ids)
    yield b'{"topics":['
    for start in range(0, len(names), STREAM_PIECE):
        piece = b",".join(
            orjson.dumps(topic_obj(image.topics[image.topic_ids[n]]))
            for n in names[start : start + STREAM_PIECE]
        )
        yield piece if start == 0 else b"," + piece
    yield b'],"nextAfter":null}'
