"""Rate-limited logging for what a peer or a client can trigger at will (a junk
connection on the Raft port, a malformed request): one line each would let
anyone flood the log and the disk under it.

Each ``RateLimitedLog`` lets ``burst`` lines through per ``period_s``; the
lines it holds back are counted, and the next line that passes says how many
there were, so nothing is hidden, only summarised. Time comes from a
monotonic clock (a stepped wall clock neither opens nor closes the gate).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable


class RateLimitedLog:
    def __init__(
        self,
        logger: logging.Logger,
        period_s: float = 60.0,
        burst: int = 5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if period_s <= 0 or burst < 1:
            raise ValueError(
                f"a rate limit needs period_s > 0 and burst >= 1, got {period_s}, {burst}"
            )
        self.logger = logger
        self.period_s = period_s
        self.burst = burst
        self.clock = clock
        self._lock = threading.Lock()
        self._window_start = float("-inf")
        self._in_window = 0
        self.suppressed = 0  # held back since the last line that passed
        self.suppressed_total = 0

    def log(self, level: int, msg: str, *args: object) -> bool:
        """Logs unless over the limit; returns whether it did."""
        with self._lock:
            now = self.clock()
            if now - self._window_start >= self.period_s:
                self._window_start, self._in_window = now, 0
            if self._in_window >= self.burst:
                self.suppressed += 1
                self.suppressed_total += 1
                return False
            self._in_window += 1
            held, self.suppressed = self.suppressed, 0
        if held:
            msg += " (and %d more like it held back by the log's rate limit)"
            args = (*args, held)
        self.logger.log(level, msg, *args)
        return True

    def warning(self, msg: str, *args: object) -> bool:
        return self.log(logging.WARNING, msg, *args)

    def info(self, msg: str, *args: object) -> bool:
        return self.log(logging.INFO, msg, *args)
