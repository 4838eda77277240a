"""The chaos of a simulator run, drawn from its seed before the run starts, so
that a run can be repeated event for event (brokers/sim.py plays it).

It keeps at most a fifth of the brokers (at least one) disturbed at any time,
never disturbs a broker twice at once, and stops a settle margin before the end
so the run can end calm.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .sim_config import SimConfig


@dataclass(frozen=True)
class ChaosEvent:
    at_s: float
    kind: str
    broker_id: int
    duration_s: float


def chaos_schedule(config: SimConfig) -> list[ChaosEvent]:
    """The chaos of a run, drawn from its seed before it starts.

    At most a fifth of the brokers (at least one) is disturbed at any time, and
    a broker is never disturbed twice at once. Chaos stops a settle margin before
    the end so the run can end calm."""
    if not config.chaos:
        return []
    rng = random.Random(config.seed)
    ids = list(range(config.first_broker_id, config.first_broker_id + config.brokers))
    # Enough for a long interactive run too; the runner stops at the duration.
    horizon = config.duration_s if config.duration_s > 0 else 24 * 3600
    last_start = horizon - max(config.crash_downtime_s, config.slow_s) - 5
    nominal = {
        "crash": config.crash_downtime_s + 10,  # + session timeout and re-registration
        "bounce": 5.0,
        "slow": config.slow_s,
        "blip": config.blip_s,
        # + moving its replicas away and shutting down
        "decommission": config.crash_downtime_s + 15,
    }
    limit = max(1, config.brokers // 5)
    busy: dict[int, float] = {}  # broker -> until
    events = []
    kinds: list[str] = []  # each kind once per round, in a shuffled order
    t = min(config.chaos_interval_s, 5.0)
    while t <= last_start:
        for b in [b for b, until in busy.items() if until <= t]:
            del busy[b]
        if len(busy) < limit:
            if not kinds:
                kinds = list(config.chaos)
                rng.shuffle(kinds)
            kind = kinds.pop()
            broker = rng.choice([b for b in ids if b not in busy])
            duration = {
                "crash": config.crash_downtime_s,
                "bounce": 0.0,
                "slow": config.slow_s,
                "blip": config.blip_s,
                "decommission": config.crash_downtime_s,
            }[kind]
            events.append(ChaosEvent(round(t, 3), kind, broker, duration))
            busy[broker] = t + nominal[kind]
        t += config.chaos_interval_s * rng.uniform(0.5, 1.5)
    return events
