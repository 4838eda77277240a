"""The broker side of AllocateProducerIds (Kafka's ``RPCProducerIdManager``):
hands out producer ids one at a time from a block the controller granted,
fetching the next block before this one runs out.

A broker asks for a block when 90% of its current one is used (Kafka's
``PRODUCER_ID_PREFETCH_THRESHOLD``), so InitProducerId rarely waits for the
controller. A block that does not start after the one before is refused:
ids must never be handed out twice, whatever the controller answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

PREFETCH_THRESHOLD = 0.9


class ProducerIdsUnavailable(Exception):
    """No block could be had now (the controller refused or was not reached):
    Kafka answers InitProducerId with a retriable error; so does the caller."""


class ProducerIdManager:
    def __init__(self, allocate: Callable[[], Awaitable[Any]]) -> None:
        """``allocate``: one AllocateProducerIds call (the client's answer)."""
        self._allocate = allocate
        # The current block: [_start, _end), _next the id handed out next
        # (_next == _end: none left).
        self._start = self._next = self._end = 0
        self._prefetched: tuple[int, int] | None = None
        self._fetch: asyncio.Task | None = None
        self._highest_end = 0  # the end of every block taken so far
        self.blocks = 0  # blocks received
        self.problem: str | None = None  # the last failure, for people

    async def generate(self) -> int:
        """The next producer id; ProducerIdsUnavailable if no block can be had."""
        while True:
            if self._next < self._end:
                pid = self._next
                self._next += 1
                if self._should_prefetch():
                    self._start_fetch()
                return pid
            if self._prefetched is not None:
                self._start, self._end = self._prefetched
                self._next = self._start
                self._prefetched = None
                continue
            self._start_fetch()
            if not await asyncio.shield(self._fetch):
                raise ProducerIdsUnavailable(self.problem or "no producer id block")

    def _should_prefetch(self) -> bool:
        used = self._next - self._start
        return (
            self._prefetched is None
            and self._fetch is None
            and used >= PREFETCH_THRESHOLD * (self._end - self._start)
        )

    def _start_fetch(self) -> None:
        if self._fetch is None or self._fetch.done():
            self._fetch = asyncio.ensure_future(self._fetch_block())

    async def _fetch_block(self) -> bool:
        """Whether a block came (then in ``_prefetched``, or already taken)."""
        try:
            answer = await self._allocate()
        except Exception as e:  # an unreachable controller: the caller retries
            self.problem = f"AllocateProducerIds: {e}"
            return False
        finally:
            self._fetch = None
        body = answer.body
        if not answer.ok:
            self.problem = f"AllocateProducerIds: {answer.error_name}: {answer.error_message}"
            return False
        start, length = body.get("producerIdStart"), body.get("producerIdLen")
        if not isinstance(start, int) or not isinstance(length, int) or length <= 0:
            self.problem = f"AllocateProducerIds: a malformed block {start!r}+{length!r}"
            return False
        if start < self._highest_end:
            # Kafka's "Producer ID block is not monotonic with current block".
            self.problem = (
                f"AllocateProducerIds: block {start}-{start + length - 1} is not above "
                f"the ids already handed out (up to {self._highest_end - 1}): refused"
            )
            return False
        self._highest_end = start + length
        self._prefetched = (start, start + length)
        self.blocks += 1
        self.problem = None
        return True
