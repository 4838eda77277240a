"""The metadata log's invariants, each stated once (``RULES``) and checked by one
replay (``LogInvariants``): the simulator's checker, the audit's Python replay
and the nemesis checker all feed it, and the Spark audit is held to its answers.

The replay is ``metadata_records``' own ``ImageDelta``, so a broker's or a
partition's state at any offset is the one the service computed. Two kinds of
rule:

* record rules hold at every record and are reported at its offset;
* batch rules hold at the end of every batch and are reported at the batch's
  ``batchOffset``. The controller writes a state change and the partition
  changes it causes as one atomic batch, in an order (fencing: partition
  changes, then the fence record; controlled shutdown: the flag, then the
  partition changes), so between two records of a batch a leader may be
  fenced for a moment; at the batch's end it may not.

A batch rule looks at what its batch touched: each partition a record of the
batch changed (its leader), and each broker a record of the batch changed,
left inactive (the partitions it leads, and the ISRs of more than one broker
it is in). What no record touched cannot have changed.

A record without ``batchOffset`` (a log exported before it existed) belongs to
the run of records around it with the same (timestampMs, controllerEpoch): one
batch is built at one time by one controller, so a run is one batch or several
merged. Batch rules are then checked at fewer boundaries (weaker: they can miss
a violation that a later batch of the run mends, never report a false one).

Snapshot records (``restore``) restate a trusted image: replayed, not checked.
A refused record (``log.record-applies``, ``kip-380.change-at-current-epoch``) is
reported as such and checked no further. Records are expected in offset order; a
repeated offset is counted.

Rule ids share one space with the controller's refusal rules
(``controller/rules.py``), and docs/rules.md lists both: a refusal that keeps an
invariant true names it in its ``guards``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .acls import StandardAcl, enum_problem
from .client_quotas import entity_text, record_problem
from .codec import DecodeError, record_from_obj
from .delta import ImageDelta
from .features import ELR_VERSION
from .image import EMPTY_IMAGE
from .records import (
    FENCE,
    NO_LEADER,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)

RECORD, BATCH = "record", "batch"


@dataclass(frozen=True)
class Rule:
    at: str  # RECORD or BATCH: where it must hold, and which offset reports it
    holds: str  # what must hold, as the audit report states it
    source: str  # where Kafka keeps it true: class.method, as docs/kafka-rules.md cites them


_RC = "ReplicationControlManager"
_PCB = "PartitionChangeBuilder"

RULES: dict[str, Rule] = {
    "log.offsets-dense": Rule(
        RECORD,
        "offsets are dense: every offset appears exactly once",
        "KafkaRaftClient",
    ),
    "log.controller-epoch-never-decreases": Rule(
        RECORD,
        "controller epochs never decrease from one offset to the next",
        "KafkaRaftClient",
    ),
    "log.record-decodes": Rule(
        RECORD,
        "every record is a valid record of a known type and version",
        "MetadataRecordSerde",
    ),
    "log.record-applies": Rule(
        RECORD,
        "the image applies every record (a refused one is a controller bug)",
        "MetadataDelta.replay",
    ),
    "kip-380.change-at-current-epoch": Rule(
        RECORD,
        "a BrokerRegistrationChangeRecord or UnregisterBrokerRecord names a registered broker "
        "at its current epoch",
        "ClusterControlManager.replay",
    ),
    "kip-380.epoch-is-registration-offset": Rule(
        RECORD,
        "a new incarnation's broker epoch is the offset of its RegisterBrokerRecord, and "
        "increases from one registration to the next (KIP-380)",
        "QuorumController.registerBroker",
    ),
    "kip-841.isr-adds-only-active": Rule(
        RECORD,
        "no partition record puts into an ISR a broker that is fenced, in controlled "
        "shutdown or unregistered at that offset (KIP-841)",
        f"{_RC}.validateAlterPartitionData / ineligibleReplicasForIsr",
    ),
    "kip-966.isr-empty-only-with-elr": Rule(
        RECORD,
        "an ISR is empty only while ELR is on (eligible.leader.replicas.version 1)",
        f"{_PCB}.build",
    ),
    "kip-966.elr-from-isr-or-elr": Rule(
        RECORD,
        "a record puts into an ELR only brokers that were in the partition's ISR or ELR "
        "just before (KIP-966)",
        f"{_PCB}.maybePopulateTargetElr",
    ),
    "kip-966.elr-disjoint-from-isr": Rule(
        RECORD,
        "an ELR and its partition's ISR never share a broker (KIP-966)",
        f"{_PCB}.maybePopulateTargetElr",
    ),
    "producer-ids.blocks-never-overlap": Rule(
        RECORD,
        "producer id blocks never overlap: each ProducerIdsRecord's nextProducerId exceeds "
        "the one before",
        "ProducerIdControlManager.generateNextProducerId / replay",
    ),
    "quota.record-valid": Rule(
        RECORD,
        "a ClientQuotaRecord names a valid entity (user, client-id or both; or ip alone; "
        "each type once, no empty name) and a key of its kind, set to a value Kafka accepts",
        "ClientQuotaControlManager.validateEntity / alterClientQuotaEntity",
    ),
    "acl.record-valid": Rule(
        RECORD,
        "an AccessControlEntryRecord's resource type, pattern type, operation and permission "
        "exist and may be stored (none is ANY, UNKNOWN or MATCH), and a "
        "RemoveAccessControlEntryRecord removes an ACL that exists",
        "AclControlManager.validateNewAcl / replay",
    ),
    "partition.epoch-increases-by-one": Rule(
        RECORD,
        "a PartitionRecord that restates a partition adds exactly 1 to its epoch",
        "PartitionRegistration.merge",
    ),
    "partition.leader-epoch-never-decreases": Rule(
        RECORD,
        "a PartitionRecord that restates a partition never lowers its leader epoch",
        "PartitionRegistration.merge",
    ),
    "partition.leader-active-in-isr": Rule(
        BATCH,
        "at every batch end, a partition's leader is in its ISR and active (registered, "
        "unfenced, not in controlled shutdown), or -1",
        f"{_PCB}.isValidNewLeader",
    ),
    "partition.inactive-leaves-isr": Rule(
        BATCH,
        "at every batch end, a broker the batch left inactive is in no ISR of more than "
        "one broker (fencing and controlled shutdown take it out in the same batch)",
        f"{_RC}.handleBrokerFenced / handleBrokerInControlledShutdown",
    ),
}


@dataclass(frozen=True, order=True)
class Violation:
    offset: int
    rule: str
    entity: str
    message: str
    timestamp_ms: int = 0

    def __post_init__(self) -> None:
        if self.rule not in RULES:  # a typo here would hide a rule from every checker
            raise ValueError(f"no rule {self.rule!r}; rules: {', '.join(RULES)}")

    def __str__(self) -> str:
        return f"offset {self.offset}: {self.rule}: {self.entity}: {self.message}"


def broker_label(registered: bool, fenced: bool | None, shutdown: bool | None) -> str | None:
    """Why a broker may not join an ISR or lead, or None when it is active."""
    if not registered:
        return "not registered"
    parts = []
    if fenced:
        parts.append("fenced")
    if shutdown:
        parts.append("in controlled shutdown")
    return ", ".join(parts) or None


def partition_entity(topic: str, partition_id: int) -> str:
    return f"{topic}-{partition_id}"


def isr_text(isr: Any) -> str:
    return "[" + ", ".join(str(b) for b in isr) + "]"


TopicPartition = tuple[str, int]


class LogInvariants:
    """Feed a log in offset order (``restore`` for snapshot records, then
    ``check`` or ``check_obj``), then ``finish`` for the violations, sorted.
    ``max_violations`` bounds what is kept (``found`` counts them all)."""

    def __init__(self, max_violations: int | None = None) -> None:
        self.delta = ImageDelta(EMPTY_IMAGE)
        self.violations: list[Violation] = []
        self.max_violations = max_violations
        self.found = 0
        self.records = 0  # log records checked
        self.restored = 0  # snapshot records replayed
        self.isr_additions = 0
        self.isr_removals = 0
        self.fencings = 0
        self.legacy_records = 0  # records without batchOffset
        self._topic_names: dict[str, str] = {}  # id -> the name it was first created with
        self._isr_of: dict[int, set[TopicPartition]] = {}
        self._leads: dict[int, set[TopicPartition]] = {}
        self._last_offset: int | None = None
        self._last_epoch = 0  # the highest controller epoch at _last_offset
        self._repeats: dict[int, list[int]] = {}  # offset -> [log records at it, first ts]
        self._batch_key: object = None
        self._batch_offset = 0
        self._batch_ts = 0
        self._touched: set[TopicPartition] = set()
        self._dirty: set[int] = set()

    # ------------------------------------------------------------ input

    def restore(self, offset: int, controller_epoch: int, record: Record) -> None:
        """A snapshot record at the snapshot's ``offset``: trusted, not checked."""
        self._settle()
        self._batch_key = None
        if self._last_offset != offset:
            self._last_offset, self._last_epoch = offset, controller_epoch
        else:
            self._last_epoch = max(self._last_epoch, controller_epoch)
        self.restored += 1
        self.delta.next_offset = offset
        old = self._partition_of(record)
        self.delta.replay(record)
        self._after(record, old)
        self.delta.next_offset = offset + 1

    def restore_obj(self, obj: dict[str, Any]) -> None:
        """A record of ``GET /v1/snapshot``; a DecodeError names the bad one."""
        where = f"snapshot record at offset {obj.get('offset')}"
        record = record_from_obj(obj, where)
        offset, epoch = obj.get("offset"), obj.get("controllerEpoch")
        if type(offset) is not int or type(epoch) is not int:
            raise DecodeError(f"{where}: no offset or controllerEpoch")
        self.restore(offset, epoch, record)

    def check_obj(self, obj: Any) -> None:
        """A record as ``GET /v1/log`` and the snapshot stream show it."""
        offset = obj.get("offset") if type(obj) is dict else None
        if type(offset) is not int:
            offset = self.delta.next_offset
            self._report(offset, "log.record-decodes", "log", f"no offset in {str(obj)[:80]}", 0)
        ts, epoch = obj.get("timestampMs"), obj.get("controllerEpoch")
        try:
            record = record_from_obj(obj, f"record at offset {offset}")
            if type(ts) is not int or type(epoch) is not int:
                raise DecodeError(f"record at offset {offset}: no timestampMs or controllerEpoch")
        except DecodeError as e:
            self._report(offset, "log.record-decodes", "log", str(e), ts if type(ts) is int else 0)
            self._last_offset = offset
            self.delta.next_offset = offset + 1
            return
        self.check(offset, ts, epoch, obj.get("batchOffset"), record)

    def check(
        self,
        offset: int,
        timestamp_ms: int,
        controller_epoch: int,
        batch_offset: int | None,
        record: Record,
    ) -> None:
        self._offsets(offset, timestamp_ms, controller_epoch)
        if batch_offset is None:
            self.legacy_records += 1
            key: object = (timestamp_ms, controller_epoch)
        else:
            key = batch_offset
        if key != self._batch_key:
            self._settle()
            self._batch_key = key
            self._batch_offset = offset if batch_offset is None else batch_offset
            self._batch_ts = timestamp_ms
        self.records += 1
        self.delta.next_offset = offset
        problems = self._before(offset, record)
        old = self._partition_of(record)
        reason = self.delta.replay(record)
        if reason is not None:
            self._report(offset, *self._refusal(record, old, reason), timestamp_ms)
            return
        for rule, entity, message in problems:
            self._report(offset, rule, entity, message, timestamp_ms)
        self._after(record, old)
        if type(record) is BrokerRegistrationChangeRecord and record.fenced == FENCE:
            self.fencings += 1

    def finish(self) -> list[Violation]:
        self._settle()
        for offset, (count, ts) in self._repeats.items():
            self._report(
                offset, "log.offsets-dense", "log", f"offset {offset} appears {count} times", ts
            )
        self._repeats.clear()
        self.violations.sort(key=lambda v: (v.offset, v.rule, v.entity, v.message))
        return self.violations

    # ------------------------------------------------------------ record rules

    def _offsets(self, offset: int, ts: int, epoch: int) -> None:
        last = self._last_offset
        if last is not None and offset <= last:
            seen = self._repeats.setdefault(offset, [1, ts])
            seen[0] += 1
            seen[1] = min(seen[1], ts)
            if offset == last:
                self._last_epoch = max(self._last_epoch, epoch)
            return
        if last is not None and offset != last + 1:
            self._report(
                offset, "log.offsets-dense", "log",
                f"offset {offset - 1} is missing: no record precedes offset {offset}", ts,
            )  # fmt: skip
        elif last is not None and epoch < self._last_epoch:
            self._report(
                offset, "log.controller-epoch-never-decreases", "controller",
                f"controller epoch {epoch} at offset {offset} is below {self._last_epoch}, "
                f"the epoch at offset {last}", ts,
            )  # fmt: skip
        self._last_offset, self._last_epoch = offset, epoch

    def _before(self, offset: int, r: Record) -> list[tuple[str, str, str]]:
        """Problems of record rules, judged against the state before ``r``."""
        kind = type(r)
        if kind is RegisterBrokerRecord:
            existing = self.delta.broker(r.broker_id)
            if (
                existing is not None
                and existing.incarnation_id == r.incarnation_id
                and existing.epoch == r.broker_epoch
            ):
                return []  # the same incarnation amends its registration, keeping its epoch
            problems = []
            if r.broker_epoch != offset:
                problems.append(f"which is not the offset of its RegisterBrokerRecord ({offset})")
            if existing is not None and r.broker_epoch <= existing.epoch:
                problems.append(f"which does not increase on its previous epoch {existing.epoch}")
            if problems:
                why = f"registered with epoch {r.broker_epoch} " + " and ".join(problems)
                return [("kip-380.epoch-is-registration-offset", f"broker {r.broker_id}", why)]
            return []
        if kind is not PartitionRecord and kind is not PartitionChangeRecord:
            return []
        old = self.delta.partition(r.topic_id, r.partition_id)
        if old is None and kind is PartitionChangeRecord:
            return []  # refused
        entity = self._entity(r.topic_id, r.partition_id)
        problems = []
        if r.isr is not None:
            before = () if old is None else old.isr
            added = []
            for b in r.isr:
                if b in before:
                    continue
                label = self._label(b)
                if label:
                    added.append(f"broker {b} ({label})")
            if added:
                problems.append(
                    (
                        "kip-841.isr-adds-only-active",
                        entity,
                        f"ISR {isr_text(r.isr)} adds " + ", ".join(added),
                    )
                )
            if not r.isr and self.delta.feature(ELR_VERSION) < 1:
                problems.append(("kip-966.isr-empty-only-with-elr", entity, "the ISR is empty"))
        if r.eligible_leader_replicas is not None or r.isr is not None:
            problems += self._elr_problems(r, old, entity)
        if kind is PartitionRecord and old is not None:
            if r.partition_epoch != old.partition_epoch + 1:
                problems.append((
                    "partition.epoch-increases-by-one", entity,
                    f"partition epoch {r.partition_epoch} follows {old.partition_epoch}: "
                    f"expected {old.partition_epoch + 1}",
                ))  # fmt: skip
            if r.leader_epoch < old.leader_epoch:
                problems.append((
                    "partition.leader-epoch-never-decreases", entity,
                    f"leader epoch {r.leader_epoch} is below the previous {old.leader_epoch}",
                ))  # fmt: skip
        return problems

    @staticmethod
    def _elr_problems(r: Any, old: Any, entity: str) -> list[tuple[str, str, str]]:
        """kip-966.elr-from-isr-or-elr and kip-966.elr-disjoint-from-isr: the
        ELR's new members come from the ISR or the ELR before; after the
        record, ELR and ISR are disjoint."""
        problems = []
        old_isr = () if old is None else old.isr
        old_elr = () if old is None else old.elr
        if type(r) is PartitionRecord:  # it states the whole partition: null is empty
            elr = r.eligible_leader_replicas or ()
        else:
            elr = old_elr if r.eligible_leader_replicas is None else r.eligible_leader_replicas
        if elr is not old_elr:
            joined = [b for b in elr if b not in old_isr and b not in old_elr]
            if joined:
                problems.append((
                    "kip-966.elr-from-isr-or-elr", entity,
                    f"ELR {isr_text(elr)} adds " + ", ".join(f"broker {b}" for b in joined)
                    + f", not in the ISR {isr_text(old_isr)} or the ELR {isr_text(old_elr)}",
                ))  # fmt: skip
        isr = old_isr if r.isr is None else r.isr
        shared = [b for b in elr if b in isr]
        if shared:
            problems.append((
                "kip-966.elr-disjoint-from-isr", entity,
                f"ELR {isr_text(elr)} and ISR {isr_text(isr)} share "
                + ", ".join(f"broker {b}" for b in shared),
            ))  # fmt: skip
        return problems

    def _refusal(self, r: Record, old: Any, reason: str) -> tuple[str, str, str]:
        """(rule, entity, message) for a record the image refused, ``reason``
        being replay's (the message of a record no rule names)."""
        kind = type(r)
        if kind is BrokerRegistrationChangeRecord or kind is UnregisterBrokerRecord:
            reg = self.delta.broker(r.broker_id)
            entity = f"broker {r.broker_id}"
            what = "change" if kind is BrokerRegistrationChangeRecord else "unregister"
            if reg is None:
                return (
                    "kip-380.change-at-current-epoch",
                    entity,
                    f"{what} record for broker {r.broker_id}, which is not registered",
                )
            if reg.epoch != r.broker_epoch:
                return (
                    "kip-380.change-at-current-epoch",
                    entity,
                    (
                        f"{what} record carries epoch {r.broker_epoch}, but the broker's current "
                        f"epoch is {reg.epoch}"
                    ),
                )
        if kind is PartitionChangeRecord and old is None:
            entity = self._entity(r.topic_id, r.partition_id)
            return "log.record-applies", entity, "a change to a partition that does not exist"
        if kind is ProducerIdsRecord:
            return (
                "producer-ids.blocks-never-overlap",
                f"broker {r.broker_id}",
                f"nextProducerId {r.next_producer_id} does not exceed "
                f"{self.delta.next_producer_id}: its block overlaps one granted before",
            )
        if kind is ClientQuotaRecord:
            return "quota.record-valid", f"quota {entity_text(r.entity)}", record_problem(r) or ""
        if kind is AccessControlEntryRecord:
            problem = enum_problem(StandardAcl.from_record(r))
            if problem is not None:
                return "acl.record-valid", f"acl {r.id}", f"{problem}: no such ACL can exist"
        if kind is RemoveAccessControlEntryRecord:
            return "acl.record-valid", f"acl {r.id}", f"removes ACL {r.id}, which does not exist"
        return "log.record-applies", "log", f"the image refuses {r!r}: {reason}"

    # ------------------------------------------------------------ batch rules

    def _settle(self) -> None:
        """The end of a batch: what it touched must hold."""
        if not self._touched and not self._dirty:
            return
        at, ts = self._batch_offset, self._batch_ts
        checked: set[TopicPartition] = set()
        for tp in self._touched:
            self._check_leader(tp, at, ts)
            checked.add(tp)
        for b in self._dirty:
            if self.delta.is_active(b):
                continue
            for tp in self._leads.get(b, ()):
                if tp not in checked:
                    self._check_leader(tp, at, ts)
            label = self._label(b)
            for tp in self._isr_of.get(b, ()):
                p = self.delta.partition(*tp)
                if p is not None and len(p.isr) > 1:
                    self._report(
                        at, "partition.inactive-leaves-isr", self._entity(*tp),
                        f"broker {b} ({label}) is in the ISR {isr_text(p.isr)}", ts,
                    )  # fmt: skip
        self._touched.clear()
        self._dirty.clear()

    def _check_leader(self, tp: TopicPartition, at: int, ts: int) -> None:
        p = self.delta.partition(*tp)
        if p is None or p.leader == NO_LEADER:
            return
        problems = []
        if p.leader not in p.isr:
            problems.append(f"not in the ISR {isr_text(p.isr)}")
        label = self._label(p.leader)
        if label:
            problems.append(label)
        if problems:
            why = f"leader {p.leader} is " + " and ".join(problems)
            self._report(at, "partition.leader-active-in-isr", self._entity(*tp), why, ts)

    # ------------------------------------------------------------ bookkeeping

    def _partition_of(self, r: Record) -> Any:
        if type(r) is PartitionRecord or type(r) is PartitionChangeRecord:
            return self.delta.partition(r.topic_id, r.partition_id)
        return None

    def _after(self, r: Record, old: Any) -> None:
        """Index who leads and who is in which ISR, and mark what the batch touched."""
        kind = type(r)
        if kind is PartitionRecord or kind is PartitionChangeRecord:
            tp = (r.topic_id, r.partition_id)
            new = self.delta.partition(*tp)
            old_isr = () if old is None else old.isr
            for b in old_isr:
                if b not in new.isr:
                    self._isr_of[b].discard(tp)
                    self.isr_removals += 1
            for b in new.isr:
                if b not in old_isr:
                    self._isr_of.setdefault(b, set()).add(tp)
                    self.isr_additions += old is not None
            if old is not None and old.leader != new.leader and old.leader >= 0:
                self._leads[old.leader].discard(tp)
            if new.leader >= 0:
                self._leads.setdefault(new.leader, set()).add(tp)
            self._touched.add(tp)
        elif (
            kind is RegisterBrokerRecord
            or kind is BrokerRegistrationChangeRecord
            or kind is UnregisterBrokerRecord
        ):
            self._dirty.add(r.broker_id)
        elif kind is TopicRecord:
            self._topic_names.setdefault(r.topic_id, r.name)

    def _label(self, b: int) -> str | None:
        reg = self.delta.broker(b)
        if reg is None:
            return "not registered"
        return broker_label(True, reg.fenced, reg.in_controlled_shutdown)

    def _entity(self, topic_id: str, partition_id: int) -> str:
        return partition_entity(self._topic_names.get(topic_id, topic_id), partition_id)

    def _report(self, offset: int, rule: str, entity: str, message: str, ts: int) -> None:
        self.found += 1
        if self.max_violations is None or len(self.violations) < self.max_violations:
            self.violations.append(Violation(offset, rule, entity, message, ts))


def check_log(objs: Any) -> list[Violation]:
    """The violations of a log given as ``GET /v1/log`` records, in offset order."""
    checker = LogInvariants()
    for obj in objs:
        checker.check_obj(obj)
    return checker.finish()
