"""Readers waiting for an image to reach an offset (a long-poll of the log, a
linearizable read after its barrier), woken when batches apply.

One event per round of waking, replaced each time it is set: a waiter counts
itself before it reads the offset, so either it sees the new image or the
waker sees it waiting (no lost wakeup). ``count`` is read from the thread
that applies (QuorumNode's tick thread) to skip waking a loop nobody waits on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class OffsetWaiters:
    def __init__(self) -> None:
        self.count = 0
        self._event: asyncio.Event | None = None

    def wake(self) -> None:
        """On the event loop, after the image moved (or to end every wait)."""
        event, self._event = self._event, None
        if event is not None:
            event.set()

    async def wait(
        self,
        offset: int,
        timeout_s: float,
        next_offset: Callable[[], int],
        given_up: Callable[[], bool] = lambda: False,
    ) -> bool:
        """Until ``next_offset()`` passes ``offset`` (True), or the timeout or
        ``given_up()`` (False)."""
        deadline = time.monotonic() + timeout_s
        self.count += 1
        try:
            while next_offset() <= offset:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or given_up():
                    return False
                if self._event is None:
                    self._event = asyncio.Event()
                try:
                    await asyncio.wait_for(self._event.wait(), remaining)
                except TimeoutError:
                    return False
            return True
        finally:
            self.count -= 1
