"""How far the simulator's own event loop falls behind, and whose fault a
fencing was.

A simulator process that runs out of CPU sends its heartbeats late, and the
controller rightly fences the brokers it stopped hearing from: those fencings
are the simulator's, not the cluster's. Two measures say so:

* **loop lag**: a task asks to wake every ``period_s`` and notes how late it
  woke (``LagMonitor``); every task in the process waits as long;
* **heartbeat lateness**: each agent notes how long after it was due each
  heartbeat was handed to the HTTP client (``HeartbeatClock``).

And one rule decides a fencing (``HeartbeatClock.blame``): the simulator is to
blame only if the gap since the last heartbeat answered unfenced reached the
session timeout and would not have, had every heartbeat since been sent on
time ("late heartbeats"); otherwise the broker was heartbeating on time and
the cluster fenced it ("fenced while heartbeating on time"). A heartbeat
queued for a connection counts as sent: a slow cluster holds the connections.

Time is passed in (``clock``), so the rules are tested without sleeping.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from .stats import Histogram

SIMULATOR = "late_heartbeat_fencings"  # the simulator sent late: its fault
CLUSTER = "fenced_while_on_time"  # sent on time and fenced anyway


def warn_at_s(session_timeout_s: float, heartbeat_interval_s: float) -> float:
    """The lag worth a warning: half of what one late heartbeat needs to be
    fenced on its own (session timeout - interval), 3.5 s by Kafka's defaults.
    Below it the lag alone cannot fence; response times add to it."""
    return max(0.0, session_timeout_s - heartbeat_interval_s) / 2


class LagMonitor:
    """Loop lag and heartbeat lateness of one process, and the warning."""

    def __init__(
        self,
        session_timeout_s: float = 9.0,
        heartbeat_interval_s: float = 2.0,
        *,
        period_s: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.period_s = period_s
        self.clock = clock
        self.warn_at_s = warn_at_s(session_timeout_s, heartbeat_interval_s)
        self.loop = Histogram()  # how late the monitor woke
        self.heartbeats = Histogram()  # how late each heartbeat went out
        self.worst_s = 0.0  # the largest of either, over the run
        self._recent: deque[tuple[float, float]] = deque(maxlen=64)  # (at, lag)

    def observe_loop(self, lag_s: float) -> None:
        self._note(self.loop, lag_s)

    def observe_heartbeat(self, late_s: float) -> None:
        self._note(self.heartbeats, late_s)

    def _note(self, h: Histogram, lag_s: float) -> None:
        lag_s = max(0.0, lag_s)
        h.observe(lag_s)
        if lag_s > self.worst_s:
            self.worst_s = lag_s
        if lag_s >= 0.05:  # the dashboard's "now": only lags worth showing
            self._recent.append((self.clock(), lag_s))

    def recent_max_s(self, window_s: float = 5.0) -> float:
        now = self.clock()
        return max((lag for at, lag in self._recent if now - at <= window_s), default=0.0)

    def warning(self) -> str | None:
        """One line when the loop fell far enough behind to fence on its own."""
        if self.worst_s < self.warn_at_s:
            return None
        return lag_warning(self.worst_s)

    async def run(self) -> None:
        """Wakes every ``period_s`` and notes how late; until cancelled."""
        while True:
            due = self.clock() + self.period_s
            await asyncio.sleep(self.period_s)
            self.observe_loop(self.clock() - due)


def lag_warning(worst_s: float) -> str:
    return (
        f"the simulator's event loop fell {worst_s:.1f} s behind: heartbeats were sent "
        "late; fencings may be the simulator's, not the cluster's: use --processes or "
        "fewer brokers"
    )


class HeartbeatClock:
    """One agent's heartbeats: when each was due and sent, and whose fault a
    fencing is (the module docstring's rule)."""

    __slots__ = ("session_timeout_s", "last_ok_sent", "late_since_ok")

    def __init__(self, session_timeout_s: float = 9.0) -> None:
        self.session_timeout_s = session_timeout_s
        self.last_ok_sent: float | None = None  # sent time of the last unfenced answer
        self.late_since_ok = 0.0  # lateness of the beats sent since then

    def sent(self, late_s: float) -> None:
        self.late_since_ok += max(0.0, late_s)

    def answered_unfenced(self, sent_at: float) -> None:
        self.last_ok_sent = sent_at
        self.late_since_ok = 0.0

    def blame(self, sent_at: float) -> str:
        """Whose fault the fencing answered to the beat sent at ``sent_at`` is."""
        if self.last_ok_sent is None:
            return CLUSTER
        gap = sent_at - self.last_ok_sent
        if gap < self.session_timeout_s:
            return CLUSTER  # it heard from us within the session
        return SIMULATOR if gap - self.late_since_ok < self.session_timeout_s else CLUSTER

    def reset(self) -> None:
        """A new incarnation: nothing answered yet."""
        self.last_ok_sent = None
        self.late_since_ok = 0.0
