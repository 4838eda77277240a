"""The planted-violation corpus: logs the real controller wrote (``ControllerHarness``),
each with one violation of one rule of ``metadata_records.log_invariants`` planted
after it, as a broken controller would have committed it. Every checker (the
module through each of its users, and the Spark audit) must find exactly
``expected`` in each: the same rules at the same offsets.

A log is a list of ``GET /v1/log`` records (``batchOffset`` included);
``legacy`` drops ``batchOffset``, as an export from before it has none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import orjson

from controller.messages import (
    AllocateProducerIdsRequest,
    AlterClientQuotasRequest,
    ClientQuotaAlteration,
    ClientQuotaOp,
    CreateAclsRequest,
    DeleteAclsRequest,
)
from metadata_records.acls import AclBindingFilter, StandardAcl
from metadata_records.codec import log_record_to_obj, record_from_obj
from metadata_records.log_invariants import RULES
from metadata_records.records import (
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    NO_CHANGE,
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    EntityData,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    UnregisterBrokerRecord,
)
from pipeline.export_files import OffsetRangeWriter

from .harness import ControllerHarness


@dataclass
class PlantedLog:
    name: str
    records: list[dict]  # as GET /v1/log serves them, through JSON
    expected: list[tuple[int, str]]  # (offset, rule), sorted


class Planter:
    """A clean, busy log, then planted batches (each ``plant`` call is one batch)."""

    def __init__(self) -> None:
        h = ControllerHarness(session_timeout_ms=5000)
        h.start_brokers(1, 2, 3, 4)
        h.create_topic("t", 4, 3)
        h.register(3, generation=1)  # a bounce: fenced, then back
        h.heartbeat(3)
        h.heartbeat(4, want_shut_down=True)  # controlled shutdown moves its leaderships
        h.heartbeat(4, want_shut_down=True)
        self.h = h
        self.objs = [
            log_record_to_obj(i, ts, epoch, r, first)
            for i, (r, (ts, epoch, first)) in enumerate(zip(h.log, h.envelopes, strict=True))
        ]
        self.ts = h.now_ms + 1

    @property
    def next_offset(self) -> int:
        return self.objs[-1]["offset"] + 1

    def plant(self, *records: Record, skip: int = 0, epoch: int | None = None) -> int:
        """One batch of ``records`` at the next offset (``skip`` offsets later);
        returns its first offset."""
        first = self.next_offset + skip
        epoch = self.objs[-1]["controllerEpoch"] if epoch is None else epoch
        for i, r in enumerate(records):
            self.objs.append(log_record_to_obj(first + i, self.ts, epoch, r, first))
        self.ts += 1
        return first

    def controller_writes(self) -> None:
        """Appends what the harness's controller committed since the log was
        built (only before anything is planted: offsets must still agree)."""
        h = self.h
        assert self.next_offset == len(self.objs), "planted already"
        for i in range(len(self.objs), len(h.log)):
            ts, epoch, first = h.envelopes[i]
            self.objs.append(log_record_to_obj(i, ts, epoch, h.log[i], first))
        self.ts = h.wall_ms + 1

    def active_follower(self, pid: int = 0) -> tuple[int, int]:
        """(an active ISR member that does not lead t-pid, its epoch)."""
        p = self.h.partition("t", pid)
        b = next(b for b in p.isr if b != p.leader)
        return b, self.h.epochs[b]


def _offsets_dense(p: Planter) -> list[tuple[int, str]]:
    at = p.plant(NoOpRecord(), skip=1)
    again = p.plant(NoOpRecord())
    p.objs.append(dict(p.objs[-1]))  # the same offset twice
    return [(at, "log.offsets-dense"), (again, "log.offsets-dense")]


def _controller_epoch(p: Planter) -> list[tuple[int, str]]:
    return [
        (
            p.plant(NoOpRecord(), epoch=p.objs[-1]["controllerEpoch"] - 1),
            "log.controller-epoch-never-decreases",
        )
    ]


def _refused(p: Planter) -> list[tuple[int, str]]:
    ghost = PartitionChangeRecord(partition_id=99, topic_id=p.h.topic_id("t"), isr=(1, 2))
    return [(p.plant(ghost), "log.record-applies")]


def _change_epoch(p: Planter) -> list[tuple[int, str]]:
    b, epoch = p.active_follower()
    stale = BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=epoch - 1, fenced=FENCE)
    unknown = BrokerRegistrationChangeRecord(broker_id=77, broker_epoch=5, fenced=FENCE)
    return [
        (p.plant(stale), "kip-380.change-at-current-epoch"),
        (p.plant(unknown), "kip-380.change-at-current-epoch"),
    ]


def _broker_epoch(p: Planter) -> list[tuple[int, str]]:
    at = p.next_offset
    wrong = RegisterBrokerRecord(
        broker_id=9, incarnation_id="AAAAAAAAAAAAAAAAAAAACQ", broker_epoch=at - 1, fenced=True
    )
    return [(p.plant(wrong), "kip-380.epoch-is-registration-offset")]


def _kip_841(p: Planter) -> list[tuple[int, str]]:
    # Broker 4 is in controlled shutdown and in no ISR; put it back into one.
    tp = p.h.partition("t", 0)
    add = PartitionChangeRecord(partition_id=0, topic_id=p.h.topic_id("t"), isr=tp.isr + (4,))
    return [(p.plant(add), "kip-841.isr-adds-only-active")]


def _isr_empty(p: Planter) -> list[tuple[int, str]]:
    empty = PartitionChangeRecord(
        partition_id=1, topic_id=p.h.topic_id("t"), isr=(), leader=NO_LEADER
    )
    return [(p.plant(empty), "kip-966.isr-empty-only-with-elr")]


def _partition_and_leader_epoch(p: Planter) -> list[tuple[int, str]]:
    tid = p.h.topic_id("t")
    part = p.h.partition("t", 2)
    jump = part._replace(partition_epoch=part.partition_epoch + 3).to_record(tid, 2)
    at = p.plant(jump)
    lower = part._replace(
        leader_epoch=part.leader_epoch - 1, partition_epoch=part.partition_epoch + 4
    ).to_record(tid, 2)
    return [
        (at, "partition.epoch-increases-by-one"),
        (p.plant(lower), "partition.leader-epoch-never-decreases"),
    ]


def _leader_outside_its_isr(p: Planter) -> list[tuple[int, str]]:
    tid = p.h.topic_id("t")
    part = p.h.partition("t", 0)
    others = tuple(b for b in part.isr if b != part.leader)
    return [
        (
            p.plant(PartitionChangeRecord(partition_id=0, topic_id=tid, isr=others)),
            "partition.leader-active-in-isr",
        )
    ]


def _leader_fenced_in_its_batch(p: Planter) -> list[tuple[int, str]]:
    """A fence record and no partition change: the fenced broker keeps leading
    (and stays in shared ISRs). Mended later in the same batch, it would hold."""
    leader = p.h.partition("t", 1).leader
    fence = BrokerRegistrationChangeRecord(
        broker_id=leader, broker_epoch=p.h.epochs[leader], fenced=FENCE
    )
    led = [pid for pid in range(4) if p.h.partition("t", pid).leader == leader]
    shared = [pid for pid in range(4) if leader in p.h.partition("t", pid).isr]
    at = p.plant(NoOpRecord(), fence)  # the batch starts before the fence
    return [(at, "partition.leader-active-in-isr")] * len(led) + [
        (at, "partition.inactive-leaves-isr")
    ] * len(shared)


def _shutdown_mended_in_the_same_batch_holds(p: Planter) -> list[tuple[int, str]]:
    """The controller's own order: flag, then move the leaderships: no violation."""
    b, epoch = p.active_follower(3)
    tid = p.h.topic_id("t")
    flag = BrokerRegistrationChangeRecord(
        broker_id=b, broker_epoch=epoch, fenced=NO_CHANGE,
        in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN, version=1,
    )  # fmt: skip
    moves = []
    for pid in range(4):
        part = p.h.partition("t", pid)
        if b in part.isr:
            isr = tuple(m for m in part.isr if m != b)
            leader = isr[0] if part.leader == b else -2
            moves.append(
                PartitionChangeRecord(partition_id=pid, topic_id=tid, isr=isr, leader=leader)
            )
    p.plant(flag, *moves)
    return []


def _unregistered_and_back_holds(p: Planter) -> list[tuple[int, str]]:
    """The controller's own UnregisterBroker (ISR removals and new leaders,
    then the record, in one batch), and the broker registering again later
    as a new incarnation: no violation."""
    leader = p.h.partition("t", 0).leader
    assert p.h.unregister(leader).error == 0
    assert all(leader not in p.h.partition("t", pid).isr for pid in range(4))
    p.h.register(leader, generation=2)
    p.h.heartbeat(leader)
    p.controller_writes()
    return []


def _unregistered_yet_leading(p: Planter) -> list[tuple[int, str]]:
    """An UnregisterBrokerRecord without the partition changes: the broker,
    gone, still leads and sits in ISRs. Then an ISR adds it, and it is
    unregistered again, and with an epoch it never had."""
    leader = p.h.partition("t", 1).leader
    epoch = p.h.epochs[leader]
    led = [pid for pid in range(4) if p.h.partition("t", pid).leader == leader]
    shared = [pid for pid in range(4) if leader in p.h.partition("t", pid).isr]
    at = p.plant(UnregisterBrokerRecord(broker_id=leader, broker_epoch=epoch))
    found = [(at, "partition.leader-active-in-isr")] * len(led) + [
        (at, "partition.inactive-leaves-isr")
    ] * len(shared)
    pid = next(i for i in range(4) if i not in shared)
    isr = p.h.partition("t", pid).isr + (leader,)
    add = PartitionChangeRecord(partition_id=pid, topic_id=p.h.topic_id("t"), isr=isr)
    found.append((p.plant(add), "kip-841.isr-adds-only-active"))
    again = UnregisterBrokerRecord(broker_id=leader, broker_epoch=epoch)
    found.append((p.plant(again), "kip-380.change-at-current-epoch"))
    b = next(b for b in (2, 3) if b != leader)  # registered
    stale = UnregisterBrokerRecord(broker_id=b, broker_epoch=p.h.epochs[b] - 1)
    found.append((p.plant(stale), "kip-380.change-at-current-epoch"))
    return found


def _producer_id_blocks_overlap(p: Planter) -> list[tuple[int, str]]:
    """Two blocks the controller granted, then a grant that hands out part of
    the second again, and one that restates the current end."""
    for broker in (1, 2):
        assert p.h.run(AllocateProducerIdsRequest(broker, p.h.epochs[broker])).error == 0
    p.controller_writes()
    end = p.h.image.next_producer_id
    again = ProducerIdsRecord(broker_id=3, broker_epoch=p.h.epochs[3], next_producer_id=end - 500)
    same = ProducerIdsRecord(broker_id=1, broker_epoch=p.h.epochs[1], next_producer_id=end)
    fine = ProducerIdsRecord(broker_id=2, broker_epoch=p.h.epochs[2], next_producer_id=end + 1000)
    return [
        (p.plant(again), "producer-ids.blocks-never-overlap"),
        (p.plant(same, fine), "producer-ids.blocks-never-overlap"),
    ]


def _client_quotas(p: Planter) -> list[tuple[int, str]]:
    """Quotas the controller set (user with the default client id, the
    default ip) and removed, then records naming an unknown entity type, ip
    with a user, a key the entity cannot hold, and a fractional byte rate;
    and one good record in the batch of a bad one."""

    def alter(*components, key, value=0.0, remove=False):
        op = ClientQuotaOp(key, value, remove)
        request = AlterClientQuotasRequest((ClientQuotaAlteration(components, (op,)),))
        assert p.h.run(request).entries[0].error == 0

    alter(("user", "u1"), ("client-id", None), key="producer_byte_rate", value=1024.0)
    alter(("ip", None), key="connection_creation_rate", value=5.0)
    alter(("ip", None), key="connection_creation_rate", remove=True)
    p.controller_writes()

    def record(*components, key="producer_byte_rate", value=1024.0):
        entity = tuple(EntityData(t, n) for t, n in components)
        return ClientQuotaRecord(entity=entity, key=key, value=value)

    group = record(("group", "g"))
    mixed = record(("user", "u1"), ("ip", "10.0.0.1"))
    ip_key = record(("user", "u1"), key="connection_creation_rate", value=5.0)
    fine = record(("client-id", "c1"))
    fractional = record(("client-id", "c1"), value=1.5)
    at = p.plant(fine, fractional)
    return [
        (p.plant(group), "quota.record-valid"),
        (p.plant(mixed), "quota.record-valid"),
        (p.plant(ip_key), "quota.record-valid"),
        (at + 1, "quota.record-valid"),
    ]


def _acls_that_cannot_exist(p: Planter) -> list[tuple[int, str]]:
    """ACLs the controller created and deleted, then ACL records no controller
    writes: a resource type that does not exist, a filter-only pattern type
    and operation, an UNKNOWN permission, and removals of an ACL that was
    never created and of one already removed."""
    read = StandardAcl(2, "orders", 3, "User:alice", "*", 3, 3)
    deny = StandardAcl(3, "g", 4, "User:*", "*", 2, 2)
    assert p.h.run(CreateAclsRequest((read, deny))).results[1].error == 0
    assert p.h.run(DeleteAclsRequest((AclBindingFilter(resource_type=3),))).filter_results
    removed = p.h.log[-1].id
    p.controller_writes()
    found = []
    for i, bad in enumerate(
        (read._replace(resource_type=9), read._replace(pattern_type=2),
         read._replace(operation=1), read._replace(permission_type=0))
    ):  # fmt: skip
        found.append(
            (p.plant(bad.to_record(f"AAAAAAAAAAAAAAAAAAAAB{'AQgw'[i]}")), "acl.record-valid")
        )
    gone = RemoveAccessControlEntryRecord(id=removed)
    never = RemoveAccessControlEntryRecord(id="AAAAAAAAAAAAAAAAAAAACA")
    fine = StandardAcl(2, "other", 3, "User:bob", "*", 4, 3).to_record("AAAAAAAAAAAAAAAAAAAACQ")
    found.append((p.plant(fine, gone) + 1, "acl.record-valid"))  # the removal, after a valid ACL
    found.append((p.plant(never), "acl.record-valid"))
    return found


def _elr(p: Planter) -> list[tuple[int, str]]:
    """KIP-966: ELR on, an ISR shrunk below min ISR with its leavers in the
    ELR and an empty ISR (both fine); then an ELR that takes a broker from
    outside the ISR and the ELR, and one that shares a broker with the ISR."""
    topic_id = p.h.topic_id("t")
    p.plant(FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1))
    t0 = p.h.partition("t", 0)
    rest = tuple(b for b in t0.isr if b != t0.leader)
    shrink = PartitionChangeRecord(
        partition_id=0,
        topic_id=topic_id,
        isr=(t0.leader,),
        eligible_leader_replicas=rest,
        version=2,
    )
    empty = PartitionChangeRecord(
        partition_id=0,
        topic_id=topic_id,
        isr=(),
        leader=NO_LEADER,
        eligible_leader_replicas=(*rest, t0.leader),
        last_known_elr=(t0.leader,),
        version=2,
    )
    p.plant(shrink, empty)
    t1 = p.h.partition("t", 1)
    outsider = next(b for b in sorted(p.h.image.brokers) if b not in t1.isr)
    stranger = PartitionChangeRecord(
        partition_id=1, topic_id=topic_id, eligible_leader_replicas=(outsider,), version=2
    )
    t2 = p.h.partition("t", 2)
    shared = PartitionChangeRecord(  # an ISR member, kept in the ISR
        partition_id=2, topic_id=topic_id, eligible_leader_replicas=(t2.isr[-1],), version=2
    )
    return [
        (p.plant(stranger), "kip-966.elr-from-isr-or-elr"),
        (p.plant(shared), "kip-966.elr-disjoint-from-isr"),
    ]


PLANTS: dict[str, Callable[[Planter], list[tuple[int, str]]]] = {
    "log.offsets-dense": _offsets_dense,
    "log.controller-epoch-never-decreases": _controller_epoch,
    "log.record-applies": _refused,
    "kip-380.change-at-current-epoch": _change_epoch,
    "kip-380.epoch-is-registration-offset": _broker_epoch,
    "kip-841.isr-adds-only-active": _kip_841,
    "kip-966.isr-empty-only-with-elr": _isr_empty,
    "partition-and-leader-epoch": _partition_and_leader_epoch,
    "leader-outside-its-isr": _leader_outside_its_isr,
    "leader-fenced-in-its-batch": _leader_fenced_in_its_batch,
    "shutdown-mended-in-the-same-batch": _shutdown_mended_in_the_same_batch_holds,
    "unregistered-and-back": _unregistered_and_back_holds,
    "unregistered-yet-leading": _unregistered_yet_leading,
    "producer-id-blocks-overlap": _producer_id_blocks_overlap,
    "client-quotas": _client_quotas,
    "acls-that-cannot-exist": _acls_that_cannot_exist,
    "elr": _elr,
}


def corpus() -> list[PlantedLog]:
    out = []
    for name, plant in PLANTS.items():
        p = Planter()
        expected = sorted(plant(p))
        records = orjson.loads(orjson.dumps(p.objs))
        out.append(PlantedLog(name, records, expected))
    return out


def legacy(log: PlantedLog) -> PlantedLog:
    """The same log without batchOffset (an export from before it)."""
    records = [{k: v for k, v in r.items() if k != "batchOffset"} for r in log.records]
    return PlantedLog(log.name + " (legacy)", records, log.expected)


def rules_covered() -> set[str]:
    """The rules the corpus plants (every rule a log can break once decoded)."""
    rules = {rule for log in corpus() for _, rule in log.expected}
    assert rules <= set(RULES)
    return rules


def write_export(log: PlantedLog, directory: str, fmt: str = "parquet") -> str:
    """The log as ``metaquorum export`` writes it (a null batch_offset where the
    record has no batchOffset)."""
    writer = OffsetRangeWriter(directory, fmt)
    for obj in log.records:
        record = record_from_obj(obj)
        writer.add(
            obj["offset"], obj["timestampMs"], obj["controllerEpoch"], record,
            batch_offset=obj.get("batchOffset"),
        )  # fmt: skip
    writer.flush()
    return directory
