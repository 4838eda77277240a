"""Write admission at the HTTP edge: who may have how many writes in hand.

Invariants:

* A slot is only ever held by an **authenticated** caller whose whole body has
  arrived: the edge identifies the caller from its headers and reads the body
  under the connection's deadlines (api/connections.py) first, so neither an
  anonymous client nor a slow upload can hold one.
* Broker heartbeats and registrations (the **control** pool) have capacity of
  their own that no other write can take, as Kafka keeps controller traffic on
  its own listener: a flood of CreateTopics or AlterPartition, or a slow admin
  client, can never fence a broker.
* Request bodies are charged to their caller as they arrive (``BodyBytes``,
  ``limits.MAX_BODY_BYTES_PER_CALLER``) until answered.
* Within a pool each principal holds at most its share: a broker token bound to
  one broker at most ``PER_BROKER_CONTROL_SLOTS`` control slots (a broker has
  one heartbeat in flight, and a registration or a retry beside it), any other
  token at most half the pool, so one token cannot starve the others. With auth
  off every caller is the same anonymous admin and only the pool totals apply.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass

# One heartbeat in flight, a registration, and retries of either.
PER_BROKER_CONTROL_SLOTS = 4
CONTROL_PATHS = frozenset({"/v1/brokers/heartbeat", "/v1/brokers/register"})


@dataclass
class Pool:
    """``total`` slots; each key holds at most its ``share``."""

    name: str
    total: int
    held: int = 0

    def __post_init__(self) -> None:
        self.by_key: Counter[Hashable] = Counter()

    def take(self, key: Hashable, share: int) -> str | None:
        """Takes a slot for ``key``; else the reason it cannot (nothing is taken)."""
        if self.held >= self.total:
            return (
                f"{self.held} {self.name} writes are being handled by this node "
                f"(the limit is {self.total})"
            )
        mine = self.by_key[key]
        if mine >= share:
            return (
                f"this caller already has {mine} {self.name} writes being handled "
                f"(its share is {share} of {self.total})"
            )
        self.held += 1
        self.by_key[key] = mine + 1
        return None

    def give_back(self, key: Hashable) -> None:
        self.held -= 1
        left = self.by_key[key] - 1
        if left:
            self.by_key[key] = left
        else:
            del self.by_key[key]


class Admission:
    """The control pool (heartbeats, registrations) and the bulk pool (every
    other write), ``limit`` slots each."""

    def __init__(self, limit: int, *, fair: bool) -> None:
        if limit < 1:
            raise ValueError(f"max_pending_writes must be positive, got {limit}")
        self.control = Pool("broker control", limit)
        self.bulk = Pool("other", limit)
        self.fair = fair  # False with auth off: one anonymous caller, no shares

    def pool(self, path: str) -> Pool:
        return self.control if path in CONTROL_PATHS else self.bulk

    def share(self, pool: Pool, bound_broker: bool) -> int:
        if not self.fair:
            return pool.total
        if bound_broker and pool is self.control:
            return min(PER_BROKER_CONTROL_SLOTS, pool.total)
        return max(1, pool.total // 2)

    @property
    def pending(self) -> int:
        return self.control.held + self.bulk.held


class BodyBytes:
    """Request-body bytes each caller has in this process at once (arriving,
    or waiting for their answer): bodies are read before a write slot is
    taken, so without this one token with many connections could hold
    connections x 16 MiB."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.by_key: Counter[Hashable] = Counter()

    def take(self, key: Hashable, size: int) -> str | None:
        held = self.by_key[key]
        if held + size > self.budget:
            return (
                f"this caller has {held} bytes of request bodies in hand at once "
                f"(the limit is {self.budget})"
            )
        self.by_key[key] = held + size
        return None

    def give_back(self, key: Hashable, size: int) -> None:
        left = self.by_key[key] - size
        if left > 0:
            self.by_key[key] = left
        else:
            self.by_key.pop(key, None)
