"""What a simulator run shows and ends with: the dashboard's ``Snapshot`` of the
image and the agents, and the ``SimResult`` summary (ok only when the run
settled with nothing stuck, no log violation and no problem), with the lag
figures of every simulator process merged into one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from metadata_records.image import MetadataImage

from .loop_lag import CLUSTER, SIMULATOR, LagMonitor
from .stats import Histogram


@dataclass
class Snapshot:
    """What the dashboard shows, computed from the image and the agents."""

    at_s: float
    offset: int
    brokers_active: int = 0
    brokers_fenced: int = 0
    brokers_shutting_down: int = 0
    partitions: int = 0
    under_replicated: int = 0
    offline: int = 0
    # not led by their preferred replica (Kafka's PreferredReplicaImbalanceCount):
    # what the controller's leader balancing brings back to 0
    not_preferred: int = 0
    agent_states: dict[str, int] = field(default_factory=dict)


def image_counts(image: MetadataImage, topic_ids: set[str] | None = None) -> dict[str, int]:
    active = fenced = shutting = 0
    for b in image.brokers.values():
        if b.fenced:
            fenced += 1
        elif b.in_controlled_shutdown:
            shutting += 1
        else:
            active += 1
    partitions = urp = offline = not_preferred = 0
    for topic_id, topic in image.topics.items():
        if topic_ids is not None and topic_id not in topic_ids:
            continue
        for p in topic.partitions.values():
            partitions += 1
            urp += len(p.isr) < len(p.replicas)
            offline += p.leader == -1
            not_preferred += not p.has_preferred_leader
    return {
        "brokers_active": active,
        "brokers_fenced": fenced,
        "brokers_shutting_down": shutting,
        "partitions": partitions,
        "under_replicated": urp,
        "offline": offline,
        "not_preferred": not_preferred,
    }


@dataclass
class SimResult:
    seed: int
    brokers: int
    partitions: int
    duration_s: float
    chaos: dict[str, int]
    chaos_skipped: int
    schedule: list[dict]
    settled: bool
    settle_s: float | None
    stuck: list[str]
    violations: list[str]
    records_checked: int
    fencings: int  # committed to the log, by session timeout or controlled shutdown
    isr_shrinks: int  # committed over the whole run, the final shutdowns included
    isr_expands: int
    isr_while_running: dict[str, int]  # committed before the run began to wind down
    events: dict[str, int]
    requests: dict[str, dict[str, Any]]
    unclean_shutdowns: int
    final: dict[str, int]
    problems: list[str]
    # The simulator's own lag (loop_lag.py): loop and heartbeat lateness
    # percentiles in ms, the worst in s, and fencings by whose fault.
    lag: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # not failures: doubts about the run
    processes: int = 1  # simulator processes that ran the brokers

    @property
    def ok(self) -> bool:
        return self.settled and not self.stuck and not self.violations and not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def lag_summary(monitors: list[LagMonitor], events: Counter) -> dict[str, Any]:
    """The run's lag figures, over one monitor per simulator process."""
    loop, beats = Histogram(), Histogram()
    for m in monitors:
        loop.merge(m.loop)
        beats.merge(m.heartbeats)
    return {
        "processes": len(monitors),
        "loop_p50_ms": in_ms(loop.quantile(0.5)),
        "loop_p99_ms": in_ms(loop.quantile(0.99)),
        "loop_max_ms": in_ms(loop.max_s if loop.total else None),
        "heartbeat_late_p50_ms": in_ms(beats.quantile(0.5)),
        "heartbeat_late_p99_ms": in_ms(beats.quantile(0.99)),
        "heartbeat_late_max_ms": in_ms(beats.max_s if beats.total else None),
        "worst_s": round(max((m.worst_s for m in monitors), default=0.0), 2),
        "fencings_late_heartbeats": events.get(SIMULATOR, 0),
        "fencings_on_time": events.get(CLUSTER, 0),
    }


def in_ms(seconds: float | None) -> float | None:
    """Seconds as milliseconds, to a tenth (None stays None)."""
    return None if seconds is None else round(seconds * 1000, 1)
