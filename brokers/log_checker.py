"""Invariants of a metadata log, checked record by record after a run.

Replays the log with ``metadata_records``' own ``ImageDelta`` (the rules the
controller applies) and, at every offset, checks what the brokers depend on:

* KIP-841: no PartitionRecord / PartitionChangeRecord adds to an ISR a broker
  that is unregistered, fenced or in controlled shutdown at that offset;
* every leader is active and in its ISR, or -1. Kafka writes a state change and
  the partition changes it causes as one atomic batch, in an order (fencing:
  partition changes, then the fence record; controlled shutdown: the flag, then
  the partition changes). So leaders are checked at the end of each run of
  partition records, not between a broker's state record and its consequences;
* offsets are dense; a new incarnation's broker epoch is its record's offset
  and grows per broker; leader and partition epochs never go back; every record
  applies (a record the image refuses is a controller bug).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from metadata_records.codec import DecodeError, record_from_obj
from metadata_records.delta import ImageDelta
from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import (
    FENCE,
    NO_LEADER_CHANGE,
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Violation:
    offset: int
    kind: str
    message: str

    def __str__(self) -> str:
        return f"offset {self.offset}: {self.kind}: {self.message}"


class LogChecker:
    """Feed records in offset order with ``check``; read ``violations`` at the end
    (after ``finish``)."""

    def __init__(self, max_violations: int = 1000) -> None:
        self.delta = ImageDelta(EMPTY_IMAGE)
        self.violations: list[Violation] = []
        self.max_violations = max_violations
        self.records = 0
        self.isr_additions = 0
        self.isr_removals = 0
        self.fencings = 0
        # What changed since the last run of partition records ended, with the
        # offset of the change (a violation is reported where it was made).
        self._dirty_partitions: dict[TopicPartition, int] = {}
        self._dirty_brokers: dict[int, int] = {}
        self._leads: dict[int, set[TopicPartition]] = {}
        self._last_epoch: dict[int, int] = {}

    # ------------------------------------------------------------ input

    def load_snapshot(self, records: Iterable[dict[str, Any]], next_offset: int) -> None:
        """Starts from a snapshot (the log before it was compacted away): trusted."""
        for i, obj in enumerate(records):
            record = record_from_obj(obj, f"snapshot record {i}")
            self.delta.replay(record)
            if type(record) is PartitionRecord:
                self._lead((record.topic_id, record.partition_id), None, record.leader)
            elif type(record) is RegisterBrokerRecord:
                self._last_epoch[record.broker_id] = record.broker_epoch
        self.delta.next_offset = next_offset

    def check(self, obj: dict[str, Any]) -> None:
        offset = obj.get("offset")
        if offset != self.delta.next_offset:
            self._report(
                offset if isinstance(offset, int) else -1,
                "offsets",
                f"expected offset {self.delta.next_offset}, found {offset!r}",
            )
            if isinstance(offset, int) and offset > self.delta.next_offset:
                self.delta.next_offset = offset  # go on from here
        offset = self.delta.next_offset
        try:
            record = record_from_obj(obj, f"record at offset {offset}")
        except DecodeError as e:
            self._report(offset, "decode", str(e))
            self.delta.next_offset += 1
            return
        kind = type(record)
        if kind is not PartitionRecord and kind is not PartitionChangeRecord:
            self._settle()
        before = self.delta.ignored_records
        old = None
        if kind is PartitionRecord or kind is PartitionChangeRecord:
            old = self.delta.partition(record.topic_id, record.partition_id)
            self._check_partition(offset, record)
        elif kind is RegisterBrokerRecord:
            self._check_registration(offset, record)
        self.delta.replay(record)
        self.records += 1
        if self.delta.ignored_records != before:
            self._report(offset, "apply", f"the image refused {record!r}")
        elif old is not None and kind is PartitionChangeRecord:
            new = self.delta.partition(record.topic_id, record.partition_id)
            if new.leader_epoch < old.leader_epoch or new.partition_epoch <= old.partition_epoch:
                self._report(
                    offset,
                    "epochs",
                    f"partition {self._name(record.topic_id)}-{record.partition_id}: "
                    f"leader epoch {old.leader_epoch} -> {new.leader_epoch}, "
                    f"partition epoch {old.partition_epoch} -> {new.partition_epoch}",
                )
        if kind is BrokerRegistrationChangeRecord and record.fenced == FENCE:
            self.fencings += 1
        if kind is not PartitionRecord and kind is not PartitionChangeRecord:
            if hasattr(record, "broker_id"):
                self._dirty_brokers[record.broker_id] = offset

    def finish(self) -> list[Violation]:
        self._settle()
        return self.violations

    # ------------------------------------------------------------ checks

    def _check_partition(self, offset: int, r: PartitionRecord | PartitionChangeRecord) -> None:
        tp = (r.topic_id, r.partition_id)
        old = self.delta.partition(*tp)
        where = f"partition {self._name(r.topic_id)}-{r.partition_id}"
        if type(r) is PartitionRecord:
            old_isr: tuple[int, ...] = () if old is None else old.isr
            new_isr, leader = r.isr, r.leader
        else:
            if old is None:
                return  # the image refuses it; reported as "apply"
            old_isr = old.isr
            new_isr = old.isr if r.isr is None else r.isr
            leader = old.leader if r.leader == NO_LEADER_CHANGE else r.leader
            if r.isr is not None and not r.isr:
                self._report(offset, "empty-isr", f"{where}: the ISR would be empty")
        added = [b for b in new_isr if b not in old_isr]
        removed = [b for b in old_isr if b not in new_isr]
        self.isr_additions += len(added) if old is not None else 0
        self.isr_removals += len(removed)
        for b in added:
            reg = self.delta.broker(b)
            if reg is None:
                state = "not registered"
            elif reg.fenced:
                state = "fenced"
            elif reg.in_controlled_shutdown:
                state = "in controlled shutdown"
            else:
                continue
            self._report(offset, "kip-841", f"{where}: broker {b} joined the ISR while {state}")
        self._lead(tp, None if old is None else old.leader, leader)
        self._dirty_partitions[tp] = offset

    def _check_registration(self, offset: int, r: RegisterBrokerRecord) -> None:
        existing = self.delta.broker(r.broker_id)
        if existing is not None and existing.incarnation_id == r.incarnation_id:
            return  # the same incarnation amends its registration and keeps its epoch
        if r.broker_epoch != offset:
            self._report(
                offset,
                "broker-epoch",
                f"broker {r.broker_id}'s new epoch {r.broker_epoch} is not its record's offset",
            )
        last = self._last_epoch.get(r.broker_id)
        if last is not None and r.broker_epoch <= last:
            self._report(
                offset,
                "broker-epoch",
                f"broker {r.broker_id}'s epoch went from {last} to {r.broker_epoch}",
            )
        self._last_epoch[r.broker_id] = r.broker_epoch

    def _settle(self) -> None:
        """End of a run of partition records: every leader touched, and every
        partition of a broker whose state changed, has an active leader in its ISR."""
        tps = dict(self._dirty_partitions)
        for b, offset in self._dirty_brokers.items():
            if not self.delta.is_active(b):
                for tp in self._leads.get(b, ()):
                    tps[tp] = max(offset, tps.get(tp, offset))
        self._dirty_partitions.clear()
        self._dirty_brokers.clear()
        for tp, offset in sorted(tps.items()):
            p = self.delta.partition(*tp)
            if p is None or p.leader == -1:
                continue
            where = f"partition {self._name(tp[0])}-{tp[1]}"
            if p.leader not in p.isr:
                self._report(offset, "leader", f"{where}: leader {p.leader} is not in ISR {p.isr}")
            elif not self.delta.is_active(p.leader):
                reg = self.delta.broker(p.leader)
                state = (
                    "not registered"
                    if reg is None
                    else "fenced"
                    if reg.fenced
                    else "in controlled shutdown"
                )
                self._report(offset, "leader", f"{where}: leader {p.leader} is {state}")

    # ------------------------------------------------------------ helpers

    def _lead(self, tp: TopicPartition, old: int | None, new: int) -> None:
        if old is not None and old != new and old >= 0:
            self._leads.get(old, set()).discard(tp)
        if new >= 0:
            self._leads.setdefault(new, set()).add(tp)

    def _name(self, topic_id: str) -> str:
        return self.delta.topic_name(topic_id) or topic_id

    def _report(self, offset: int, kind: str, message: str) -> None:
        if len(self.violations) < self.max_violations:
            self.violations.append(Violation(offset, kind, message))


def check_records(records: Iterable[dict[str, Any]]) -> list[Violation]:
    checker = LogChecker()
    for obj in records:
        checker.check(obj)
    return checker.finish()
