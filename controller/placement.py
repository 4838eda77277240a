"""Replica placement for new partitions: Kafka's ``StripedReplicaPlacer``.

Two constraints, checked before anything is placed: no broker holds two
replicas of a partition, and the first replica (the leader to be) is an
unfenced broker. Three goals, in order: spread each partition's replicas over
racks, spread partitions over brokers (successive partitions start on the next
rack and the next broker, which gives the "striped" pattern), and use fenced
brokers only as followers, once a rack's unfenced brokers are used up.

Which brokers are usable is the caller's business (Kafka's
``ClusterDescriber.usableBrokers``): every registered broker that is not in
controlled shutdown, fenced or not.

Kafka draws its start offsets and shuffles from a ``Random``; here the caller
passes the source. The controller seeds one from the image (decisions.md 11),
so the same image and request give the same assignment; a test that passes
Kafka's ``MockRandom`` gets Kafka's own lists.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


class PlacementError(Exception):
    """Kafka's ``InvalidReplicationFactorException``, with its message."""


class RandomSource(Protocol):
    def randrange(self, stop: int, /) -> int:
        """A number in [0, stop): ``java.util.Random.nextInt(stop)``."""
        ...


@dataclass(frozen=True, slots=True)
class UsableBroker:
    broker_id: int
    rack: str | None
    fenced: bool


NO_BROKER = -1


def java_shuffle(items: list, rng: RandomSource) -> None:
    """``java.util.Collections.shuffle``, swap for swap, so that a source
    that draws as Kafka's does shuffles as Kafka's does."""
    for i in range(len(items), 1, -1):
        j = rng.randrange(i)
        items[i - 1], items[j] = items[j], items[i - 1]


class _BrokerList:
    """Kafka's ``BrokerList``: brokers handed out round-robin, each at most
    once per iteration epoch; a new epoch starts one further along."""

    __slots__ = ("brokers", "index", "offset", "epoch")

    def __init__(self) -> None:
        self.brokers: list[int] = []
        self.index = 0  # how many were handed out in this epoch
        self.offset = 0  # where this epoch's round starts
        self.epoch = 0

    def initialize(self, rng: RandomSource) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rng.randrange(len(self.brokers))

    def next(self, epoch: int) -> int:
        """The next broker of this epoch, or NO_BROKER once each was handed out."""
        brokers = self.brokers
        if not brokers:
            return NO_BROKER
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % len(brokers)
        if self.index >= len(brokers):
            return NO_BROKER
        broker = brokers[(self.index + self.offset) % len(brokers)]
        self.index += 1
        return broker


class _Rack:
    """Kafka's ``Rack``: unfenced brokers first, then fenced ones."""

    __slots__ = ("fenced", "unfenced")

    def __init__(self) -> None:
        self.fenced = _BrokerList()
        self.unfenced = _BrokerList()

    def next(self, epoch: int) -> int:
        broker = self.unfenced.next(epoch)
        return broker if broker != NO_BROKER else self.fenced.next(epoch)


def _rack_order(rack: str | None) -> tuple[bool, str]:
    # Kafka's OptionalStringComparator: no rack first, then by name.
    return (rack is not None, rack or "")


def _check_positive(replication_factor: int) -> None:
    if replication_factor <= 0:
        raise PlacementError(
            f"Invalid replication factor {replication_factor}: the replication factor must "
            "be positive."
        )


def _check_some_unfenced(unfenced: int) -> None:
    if unfenced == 0:
        raise PlacementError("All brokers are currently fenced.")


def _check_enough(replication_factor: int, total: int) -> None:
    if replication_factor > total:
        raise PlacementError(
            f"The target replication factor of {replication_factor} cannot be reached because "
            f"only {total} broker(s) are registered."
        )


class RackList:
    """Kafka's ``RackList``: the racks, iterated round-robin from an offset
    that moves on by one for every partition placed."""

    def __init__(self, rng: RandomSource, usable: Iterable[UsableBroker]) -> None:
        self.rng = rng
        racks: dict[str | None, _Rack] = {}
        self.total = self.unfenced = 0
        for broker in usable:
            rack = racks.setdefault(broker.rack, _Rack())
            if broker.fenced:
                rack.fenced.brokers.append(broker.broker_id)
            else:
                rack.unfenced.brokers.append(broker.broker_id)
                self.unfenced += 1
            self.total += 1
        self.rack_names = sorted(racks, key=_rack_order)
        # Kafka initializes its racks in HashMap order; here in name order
        # (the same for the racks of Kafka's tests).
        self.racks = {name: racks[name] for name in self.rack_names}
        for rack in self.racks.values():
            rack.fenced.initialize(rng)
            rack.unfenced.initialize(rng)
        self.epoch = 0
        self.offset = rng.randrange(len(self.rack_names)) if self.rack_names else 0

    def _shuffle(self) -> None:
        java_shuffle(self.rack_names, self.rng)
        for rack in self.racks.values():
            java_shuffle(rack.fenced.brokers, self.rng)
            java_shuffle(rack.unfenced.brokers, self.rng)

    def place(self, replication_factor: int) -> list[int]:
        """One partition's replicas: an unfenced first replica from the
        offset's rack (or the next rack that has one), then one broker per
        rack in turn, unfenced before fenced."""
        _check_positive(replication_factor)
        _check_enough(replication_factor, self.total)
        _check_some_unfenced(self.unfenced)
        # Once every unfenced broker has led a partition, shuffle, so that the
        # next round does not repeat the same assignments (one unfenced broker
        # would loop for ever).
        if self.epoch == self.unfenced and self.unfenced > 1:
            self._shuffle()
            self.epoch = 0
        names, racks, epoch = self.rack_names, self.racks, self.epoch
        if self.offset == len(names):
            self.offset = 0
        first_rack = self.offset
        while True:
            first = racks[names[first_rack]].unfenced.next(epoch)
            if first != NO_BROKER:
                break
            first_rack = (first_rack + 1) % len(names)
        replicas = [first]
        rack_index = self.offset
        for _ in range(1, replication_factor):
            broker = NO_BROKER
            while broker == NO_BROKER:
                if rack_index == first_rack:
                    first_rack = -1  # the leader's rack gave its turn already
                else:
                    broker = racks[names[rack_index]].next(epoch)
                rack_index = (rack_index + 1) % len(names)
            replicas.append(broker)
        self.epoch += 1
        self.offset += 1
        return replicas


def place(
    usable: Iterable[UsableBroker],
    num_partitions: int,
    replication_factor: int,
    rng: RandomSource,
) -> list[tuple[int, ...]]:
    """Replica lists for ``num_partitions`` new partitions (Kafka's
    ``StripedReplicaPlacer.place``); PlacementError with Kafka's message when
    the replication factor cannot be met."""
    racks = RackList(rng, usable)
    _check_positive(replication_factor)
    _check_some_unfenced(racks.unfenced)
    _check_enough(replication_factor, racks.total)
    return [tuple(racks.place(replication_factor)) for _ in range(num_partitions)]
