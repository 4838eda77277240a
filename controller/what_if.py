"""What losing some brokers (or whole racks) would do to the partitions,
decided by the controller's own code over a throwaway copy of its view.

"Losing" is the unplanned kind: the brokers stop heartbeating and their
sessions expire, so the controller fences them one at a time
(``maybe_fence_stale_broker`` -> ``handle_broker_fenced``), each leaving every
ISR with a new leader elected where it led (PartitionChangeBuilder: ONLINE,
or UNCLEAN where the topic's unclean.leader.election.enable resolves to
true; with ELR on (KIP-966) the leaving members go into the ELR below min
ISR). ``what_if`` runs exactly that fence, in ascending broker id (the order
their sessions would expire if they stopped together), on a Controller built
over the image, and compares each partition before and after. The order
can change which lost replica stays in an ISR written down to its last
member or which ones enter the ELR, never who leads; the property test
(tests/controller/test_what_if.py) checks the answer equals fencing through
expired sessions in that order.

What it leaves out: the unclean-election sweep an interval later (fencing
already elects uncleanly where it is allowed) and leader balancing. Pure:
no I/O, time is an argument (the throwaway controller's sessions).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from metadata_records.config_schema import MIN_INSYNC_REPLICAS, topic_config_value
from metadata_records.image import MetadataImage, PartitionRegistration
from metadata_records.records import NO_LEADER, PartitionChangeRecord

from .config import ControllerConfig
from .controller import Controller

# Per partition, from worst to mildest; a partition the loss does not change
# is untouched and not listed.
OFFLINE = "offline"  # it had a leader and would have none
UNDER_MIN_ISR = "underMinIsr"  # still led, its ISR falls below min.insync.replicas
LEADER_MOVED = "leaderMoved"  # another broker would lead it
ISR_SHRUNK = "isrShrunk"  # same leader, a smaller ISR (or only its ELR changes)
OUTCOMES = (OFFLINE, UNDER_MIN_ISR, LEADER_MOVED, ISR_SHRUNK)
_RANK = {outcome: rank for rank, outcome in enumerate(OUTCOMES)}


@dataclass(frozen=True, slots=True)
class PartitionOutcome:
    topic: str
    topic_id: str
    partition: int
    outcome: str  # one of OUTCOMES
    min_isr: int  # the topic's min.insync.replicas (its own, else the cluster default's)
    before: PartitionRegistration
    after: PartitionRegistration


@dataclass(frozen=True, slots=True)
class WhatIf:
    lost: tuple[int, ...]  # the brokers fenced (registered and unfenced), ascending
    already_fenced: tuple[int, ...]  # asked for, but fenced already: losing them changes nothing
    partitions: tuple[PartitionOutcome, ...]  # the changed ones, worst first, then by topic
    total_partitions: int

    def count(self, outcome: str) -> int:
        return sum(1 for p in self.partitions if p.outcome == outcome)

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(OUTCOMES, 0)
        for p in self.partitions:
            counts[p.outcome] += 1
        counts["untouched"] = self.total_partitions - len(self.partitions)
        return counts


class UnknownLoss(ValueError):
    """A loss naming brokers or racks the image does not have."""


def parse_loss(specs: Sequence[str]) -> tuple[set[int], set[str]]:
    """``brokers:3,4`` and ``racks:r1,r2`` (each spec one kind; give several
    for both) to (broker ids, rack names). ValueError names what is wrong."""
    brokers: set[int] = set()
    racks: set[str] = set()
    if not specs:
        raise ValueError("nothing to lose: give lose=brokers:ID,... or lose=racks:RACK,...")
    for spec in specs:
        kind, sep, names = spec.partition(":")
        items = [n.strip() for n in names.split(",") if n.strip()]
        if not sep or kind.strip() not in ("brokers", "racks") or not items:
            raise ValueError(
                f"bad loss {spec!r}: write brokers:ID,ID or racks:RACK,RACK "
                "(give it twice for both kinds)"
            )
        if kind.strip() == "racks":
            racks.update(items)
            continue
        for item in items:
            try:
                brokers.add(int(item))
            except ValueError:
                raise ValueError(f"bad broker id {item!r} in {spec!r}: ids are integers") from None
    return brokers, racks


def resolve_loss(image: MetadataImage, brokers: Iterable[int], racks: Iterable[str]) -> list[int]:
    """The registered brokers named, plus every broker of the racks named,
    ascending; UnknownLoss names every id not registered and rack no broker has."""
    brokers, racks = set(brokers), set(racks)
    unknown_ids = sorted(b for b in brokers if b not in image.brokers)
    known_racks = {reg.rack for reg in image.brokers.values() if reg.rack is not None}
    unknown_racks = sorted(racks - known_racks)
    problems = []
    if unknown_ids:
        problems.append(f"broker ids not registered: {', '.join(map(str, unknown_ids))}")
    if unknown_racks:
        problems.append(
            f"racks no registered broker is in: {', '.join(unknown_racks)} "
            f"(known racks: {', '.join(sorted(known_racks)) or 'none'})"
        )
    if problems:
        raise UnknownLoss("; ".join(problems))
    brokers.update(b for b, reg in image.brokers.items() if reg.rack in racks)
    return sorted(brokers)


def what_if(image: MetadataImage, brokers: Iterable[int], now_ms: int) -> WhatIf:
    """What fencing ``brokers`` (registered ids) would do, by the controller's rules."""
    controller = Controller(image, ControllerConfig(cluster_id="what-if"), now_ms)
    asked = sorted(set(brokers))
    controller.index_only_for(asked)
    replication = controller.replication
    lost, already_fenced = [], []
    touched: set[tuple[str, int]] = set()
    for broker_id in asked:
        reg = controller.view.broker(broker_id)
        if reg is None or reg.fenced:
            already_fenced.append(broker_id)
            continue
        lost.append(broker_id)
        # maybe_fence_stale_broker's body, for a broker chosen here rather
        # than found stale.
        records = replication.handle_broker_fenced(broker_id)
        controller.heartbeats.fence(broker_id)
        controller.replay(records)
        touched.update(
            (r.topic_id, r.partition_id) for r in records if type(r) is PartitionChangeRecord
        )

    view = controller.view
    min_isrs: dict[str, int] = {}
    outcomes = []
    for topic_id, pid in touched:
        before = image.partition(topic_id, pid)
        after = view.partition(topic_id, pid)
        if before is None or after is None or after == before:
            continue
        if topic_id not in min_isrs:
            min_isrs[topic_id] = min_insync_replicas(image, topic_id)
        min_isr = min_isrs[topic_id]
        outcomes.append(
            PartitionOutcome(
                image.topics[topic_id].name,
                topic_id,
                pid,
                _outcome(before, after, min_isr),
                min_isr,
                before,
                after,
            )
        )
    outcomes.sort(key=lambda p: (_RANK[p.outcome], p.topic, p.partition))
    return WhatIf(tuple(lost), tuple(already_fenced), tuple(outcomes), image.partition_count)


def _outcome(before: PartitionRegistration, after: PartitionRegistration, min_isr: int) -> str:
    if before.leader != NO_LEADER and after.leader == NO_LEADER:
        return OFFLINE
    if after.leader != NO_LEADER and len(before.isr) >= min_isr > len(after.isr):
        return UNDER_MIN_ISR
    if after.leader != before.leader:
        return LEADER_MOVED
    return ISR_SHRUNK


def min_insync_replicas(image: MetadataImage, topic_id: str) -> int:
    """min.insync.replicas as a broker checks it (not capped at the
    replication factor, as the ELR's effective min ISR is)."""
    value = topic_config_value(
        MIN_INSYNC_REPLICAS, image.topics[topic_id].configs, image.broker_configs.get("", {})
    )
    try:
        return max(int(value.strip()), 1)
    except ValueError:  # config_control refuses such values; a log may not
        return 1
