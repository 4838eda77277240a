"""What the simulated brokers saw: request latencies per endpoint and event counters.

Latencies go into fixed log-spaced buckets (like a Prometheus histogram), so a
run of hours costs the same memory as a run of seconds; a recent window gives
the dashboard its live percentiles.
"""

from __future__ import annotations

import bisect
import time
from collections import Counter, deque
from dataclasses import dataclass, field

# 0.1 ms .. ~60 s, 8 buckets per doubling: quantiles within ~9%.
_BOUNDS = [0.0001 * 2 ** (i / 8) for i in range(8 * 20)]


class Histogram:
    __slots__ = ("counts", "total", "sum_s", "max_s")

    def __init__(self) -> None:
        self.counts = [0] * (len(_BOUNDS) + 1)
        self.total = 0
        self.sum_s = 0.0
        self.max_s = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(_BOUNDS, seconds)] += 1
        self.total += 1
        self.sum_s += seconds
        self.max_s = max(self.max_s, seconds)

    def merge(self, other: Histogram) -> None:
        for i, c in enumerate(other.counts):
            self.counts[i] += c
        self.total += other.total
        self.sum_s += other.sum_s
        self.max_s = max(self.max_s, other.max_s)

    def copy(self) -> Histogram:
        h = Histogram()
        h.merge(self)
        return h

    def to_wire(self) -> tuple:
        """Plain data, for another process (brokers/sim_workers.py)."""
        return self.counts, self.total, self.sum_s, self.max_s

    @classmethod
    def from_wire(cls, wire: tuple) -> Histogram:
        h = cls()
        h.counts, h.total, h.sum_s, h.max_s = list(wire[0]), wire[1], wire[2], wire[3]
        return h

    def since(self, earlier: Histogram) -> Histogram:
        """What was observed after ``earlier`` (a copy of this histogram) was taken;
        the maximum is the whole run's."""
        h = Histogram()
        h.counts = [a - b for a, b in zip(self.counts, earlier.counts, strict=True)]
        h.total = self.total - earlier.total
        h.sum_s = self.sum_s - earlier.sum_s
        h.max_s = self.max_s
        return h

    def quantile(self, q: float) -> float | None:
        """The upper bound of the bucket holding the q-quantile (None if empty)."""
        if self.total == 0:
            return None
        rank = q * self.total
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank and c:
                return _BOUNDS[i] if i < len(_BOUNDS) else self.max_s
        return self.max_s


@dataclass
class EndpointStats:
    total: Histogram = field(default_factory=Histogram)
    errors: Counter = field(default_factory=Counter)  # errorName or failure kind -> count
    # (second, histogram) for the last few seconds: live percentiles.
    recent: deque = field(default_factory=lambda: deque(maxlen=10))


class SimStats:
    """Shared by every agent of a process; single-threaded (asyncio), so no locks."""

    def __init__(self, clock=time.monotonic) -> None:
        self.clock = clock
        self.endpoints: dict[str, EndpointStats] = {}
        self.events: Counter = Counter()

    def observe(self, endpoint: str, seconds: float, outcome: str = "NONE") -> None:
        ep = self.endpoints.get(endpoint)
        if ep is None:
            ep = self.endpoints[endpoint] = EndpointStats()
        ep.total.observe(seconds)
        second = int(self.clock())
        if not ep.recent or ep.recent[-1][0] != second:
            ep.recent.append((second, Histogram()))
        ep.recent[-1][1].observe(seconds)
        if outcome != "NONE":
            ep.errors[outcome] += 1

    def to_wire(self) -> dict:
        """Plain data, for another process: what ``merged`` adds up."""
        return {
            "events": dict(self.events),
            "endpoints": {
                name: {
                    "total": ep.total.to_wire(),
                    "errors": dict(ep.errors),
                    "recent": [(sec, h.to_wire()) for sec, h in ep.recent],
                }
                for name, ep in self.endpoints.items()
            },
        }

    @classmethod
    def merged(cls, wires: list[dict], clock=time.monotonic) -> SimStats:
        """One process's view of several processes' stats (``to_wire``)."""
        out = cls(clock)
        for wire in wires:
            out.events.update(wire["events"])
            for name, w in wire["endpoints"].items():
                ep = out.endpoints.get(name)
                if ep is None:
                    ep = out.endpoints[name] = EndpointStats()
                ep.total.merge(Histogram.from_wire(w["total"]))
                ep.errors.update(w["errors"])
                by_second = dict(ep.recent)
                for sec, h in w["recent"]:
                    if sec in by_second:
                        by_second[sec].merge(Histogram.from_wire(h))
                    else:
                        by_second[sec] = Histogram.from_wire(h)
                ep.recent = deque(sorted(by_second.items())[-10:], maxlen=10)
        return out

    def count(self, event: str, n: int = 1) -> None:
        self.events[event] += n

    def recent(self, endpoint: str, window_s: int = 5) -> tuple[float, Histogram]:
        """(requests per second, merged histogram) over the last ``window_s`` seconds."""
        h = Histogram()
        ep = self.endpoints.get(endpoint)
        if ep is None:
            return 0.0, h
        now = int(self.clock())
        for second, hist in ep.recent:
            if now - window_s <= second < now:
                h.merge(hist)
        return h.total / window_s, h
