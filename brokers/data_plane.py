"""The data plane between simulated brokers: what a follower has fetched from
its leaders. A follower fetches only while its broker runs and is registered,
with the broker epoch of its current incarnation (KIP-903), and stalls behind
the leader while chaos makes it "slow".
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .agent import BrokerAgent


class World:
    """The data plane between the simulated brokers (a ``FollowerModel``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.agents: dict[int, BrokerAgent] = {}
        self.slow_until: dict[int, float] = {}
        self._stalled_at: dict[tuple[int, str, int], int] = {}
        self.clock = clock

    def fetch(self, follower_id, topic_id, partition, leader_leo, now_ms):
        a = self.agents.get(follower_id)
        if a is None or not a.alive or a.epoch < 0:
            return None  # not running, or not registered yet: it does not fetch
        key = (follower_id, topic_id, partition)
        if self.clock() < self.slow_until.get(follower_id, 0.0):
            # Stalled: stuck where it was when it slowed down, behind the leader.
            return self._stalled_at.setdefault(key, max(0, leader_leo - 1)), a.epoch
        self._stalled_at.pop(key, None)
        return leader_leo, a.epoch
