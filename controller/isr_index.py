"""Kafka's ``BrokersToIsrs``: which partitions hold a broker in their ISR, which
it leads, and which have no leader, so fencing, controlled shutdown and
unfencing touch only the partitions that matter instead of scanning them all;
and Kafka's ``imbalancedPartitions``: those not led by their preferred
replica (the first of their replicas), for leader rebalancing; and Kafka's
``BrokersToElrs``: which partitions hold a broker in their ELR (KIP-966).

Leader-side state: built from the view when first needed, kept up to date as the
controller replays the records it decides, dropped with the leadership.

A broker's partitions of one topic are an ``array`` of int32 ids (4 bytes
each) while there are at most ``SMALL`` of them, then a set: as sets, the
index of 2,000,000 partitions at RF 3 was about 400 MB (a hash table and an
int object for each of 8,000,000 entries), as arrays about 40 MB. Adding or
removing one id scans the array, in C (a broker in 300 partitions of a topic
of 10,000 on 100 brokers); past ``SMALL`` the set keeps each change O(1).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from metadata_records.delta import ImageDelta
from metadata_records.image import MetadataImage, PartitionRegistration
from metadata_records.records import NO_LEADER

TopicPartition = tuple[str, int]

SMALL = 512  # a broker's partitions of one topic kept as an array up to this many


class BrokersToIsrs:
    __slots__ = ("_isr", "_elr", "_leaders", "_imbalanced", "imbalanced_count")

    def __init__(self) -> None:
        # broker id (NO_LEADER for the leaderless) -> topic id -> partition ids
        self._isr: dict[int, dict[str, set[int]]] = {}
        self._elr: dict[int, dict[str, set[int]]] = {}
        self._leaders: dict[int, dict[str, set[int]]] = {}
        # topic id -> partition ids whose leader is not replicas[0] (the
        # leaderless included, as Kafka's hasPreferredLeader says)
        self._imbalanced: dict[str, set[int]] = {}
        self.imbalanced_count = 0

    @classmethod
    def build(cls, view: ImageDelta) -> BrokersToIsrs:
        index = cls()
        for topic_id in view.topic_ids():
            for pid in view.partition_ids(topic_id):
                index.update(topic_id, pid, None, view.partition(topic_id, pid))
        return index

    @classmethod
    def build_for(cls, image: MetadataImage, brokers: Iterable[int]) -> BrokersToIsrs:
        """The index of only the partitions with one of ``brokers`` in their
        ISR or ELR: what fencing those brokers reads of it (their ISR and ELR
        lists), in one scan that skips every other partition
        (controller/what_if.py). Its other answers cover those partitions only."""
        index = cls()
        wanted = frozenset(brokers)
        for topic_id, topic in image.topics.items():
            for pid, part in topic.partitions.items():
                if not wanted.isdisjoint(part.isr) or (
                    part.elr and not wanted.isdisjoint(part.elr)
                ):
                    index.update(topic_id, pid, None, part)
        return index

    @staticmethod
    def _add(table: dict, broker: int, topic_id: str, pid: int) -> None:
        topics = table.get(broker)
        if topics is None:
            topics = table[broker] = {}
        pids = topics.get(topic_id)
        if pids is None:
            topics[topic_id] = array("i", (pid,))
        elif type(pids) is set:
            pids.add(pid)
        elif pid not in pids:
            if len(pids) >= SMALL:
                topics[topic_id] = {*pids, pid}
            else:
                pids.append(pid)

    @staticmethod
    def _remove(table: dict, broker: int, topic_id: str, pid: int) -> None:
        topics = table.get(broker)
        if topics is None:
            return
        pids = topics.get(topic_id)
        if pids is None:
            return
        if type(pids) is set:
            pids.discard(pid)
        elif pid in pids:
            pids.remove(pid)
        if not pids:
            del topics[topic_id]
            if not topics:
                del table[broker]

    def update(
        self,
        topic_id: str,
        pid: int,
        old: PartitionRegistration | None,
        new: PartitionRegistration | None,
    ) -> None:
        if (
            old is not None
            and new is not None
            and old.leader == new.leader
            and old.replicas == new.replicas
            and old.elr == new.elr
        ):
            # An ISR change alone (what AlterPartition writes): the leader, the
            # ELR and the preferred replica are as they were.
            self._update_members(self._isr, topic_id, pid, old.isr, new.isr)
            return
        self._update_members(
            self._isr, topic_id, pid, old.isr if old else (), new.isr if new else ()
        )
        self._update_members(
            self._elr, topic_id, pid, old.elr if old else (), new.elr if new else ()
        )
        old_leader = old.leader if old is not None else None
        new_leader = new.leader if new is not None else None
        if old_leader != new_leader:
            if old_leader is not None:
                self._remove(self._leaders, old_leader, topic_id, pid)
            if new_leader is not None:
                self._add(self._leaders, new_leader, topic_id, pid)
        was = old is not None and not old.has_preferred_leader
        now = new is not None and not new.has_preferred_leader
        if was != now:
            if now:
                self._imbalanced.setdefault(topic_id, set()).add(pid)
                self.imbalanced_count += 1
            else:
                pids = self._imbalanced[topic_id]
                pids.discard(pid)
                if not pids:
                    del self._imbalanced[topic_id]
                self.imbalanced_count -= 1

    def _update_members(
        self, table: dict, topic_id: str, pid: int, old: tuple[int, ...], new: tuple[int, ...]
    ) -> None:
        """``table`` (ISR or ELR members) from ``old`` members to ``new``."""
        if old != new:
            for broker in old:
                if broker not in new:
                    self._remove(table, broker, topic_id, pid)
            for broker in new:
                if broker not in old:
                    self._add(table, broker, topic_id, pid)

    @staticmethod
    def _sorted(table: dict, broker: int) -> list[TopicPartition]:
        topics = table.get(broker, {})
        return [(t, p) for t in sorted(topics) for p in sorted(topics[t])]

    def partitions_with_broker_in_isr(self, broker: int) -> list[TopicPartition]:
        return self._sorted(self._isr, broker)

    def partitions_with_broker_in_elr(self, broker: int) -> list[TopicPartition]:
        return self._sorted(self._elr, broker)

    def partitions_led_by(self, broker: int) -> list[TopicPartition]:
        return self._sorted(self._leaders, broker)

    def leads_any(self, broker: int) -> bool:
        return broker in self._leaders

    def partitions_without_leader(self) -> list[TopicPartition]:
        return self._sorted(self._leaders, NO_LEADER)

    def any_without_leader(self) -> bool:
        return NO_LEADER in self._leaders

    def imbalanced_partitions(self) -> list[TopicPartition]:
        """Partitions not led by their preferred replica, in order."""
        table = self._imbalanced
        return [(t, p) for t in sorted(table) for p in sorted(table[t])]
