"""Kafka's ``PartitionChangeBuilder``: from a partition and its targets, the one
``PartitionChangeRecord`` that gets there, or None when nothing changes.

ELR (KIP-966) is off, so the ISR is never written empty (the last member
stays, with leader -1). From metadata.version 3.6-IV0 (KAFKA-15021) an ISR
shrink alone does not bump the leader epoch; before it, it does.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from metadata_records.image import PartitionRegistration
from metadata_records.records import (
    LRS_NO_CHANGE,
    LRS_RECOVERING,
    NO_LEADER,
    NO_LEADER_CHANGE,
    PartitionChangeRecord,
)


class Election(Enum):
    ONLINE = "online"  # AlterPartition, fencing, unfencing, controlled shutdown, reassignment
    PREFERRED = "preferred"  # ElectLeaders preferred
    UNCLEAN = "unclean"  # ElectLeaders unclean, or unclean.leader.election.enable=true


class PartitionChangeBuilder:
    __slots__ = (
        "partition",
        "topic_id",
        "partition_id",
        "is_acceptable_leader",
        "election",
        "target_isr",
        "target_replicas",
        "target_removing",
        "target_adding",
        "target_lrs",
        "bump_on_isr_shrink",
    )

    def __init__(
        self,
        partition: PartitionRegistration,
        topic_id: str,
        partition_id: int,
        is_acceptable_leader: Callable[[int], bool],
        election: Election = Election.ONLINE,
        bump_on_isr_shrink: bool = False,
    ) -> None:
        self.partition = partition
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.is_acceptable_leader = is_acceptable_leader
        self.election = election
        self.target_isr = partition.isr
        self.target_replicas = partition.replicas
        self.target_removing = partition.removing_replicas
        self.target_adding = partition.adding_replicas
        self.target_lrs = partition.leader_recovery_state
        # Kafka passes the metadata.version; callers pass its one answer that
        # matters here, worked out once per request
        # (features.bumps_leader_epoch_on_isr_shrink): this is the hot path.
        self.bump_on_isr_shrink = bump_on_isr_shrink

    # ------------------------------------------------------------ election

    def _is_valid_new_leader(self, replica: int) -> bool:
        return replica in self.target_isr and self.is_acceptable_leader(replica)

    def _elect(self) -> tuple[int, bool]:
        """(leader, unclean) per SEMANTICS 5.2."""
        current = self.partition.leader
        if self.election is Election.PREFERRED:
            preferred = self.target_replicas[0] if self.target_replicas else NO_LEADER
            if self.target_replicas and self._is_valid_new_leader(preferred):
                return preferred, False
            if self._is_valid_new_leader(current):
                return current, False
            for replica in self.target_replicas[1:]:
                if self._is_valid_new_leader(replica):
                    return replica, False
            return NO_LEADER, False
        if self._is_valid_new_leader(current):
            return current, False
        for replica in self.target_replicas:
            if self._is_valid_new_leader(replica):
                return replica, False
        if self.election is Election.UNCLEAN:
            for replica in self.target_replicas:
                if self.is_acceptable_leader(replica):
                    return replica, True
        return NO_LEADER, False

    # ------------------------------------------------------------ reassignment

    def _complete_reassignment_if_needed(self) -> None:
        """SEMANTICS 5.4: done once the ISR, less the removed replicas, is
        non-empty and holds every replica that stays."""
        if not (self.target_removing or self.target_adding):
            return
        removing = set(self.target_removing)
        isr = tuple(r for r in self.target_isr if r not in removing)
        replicas = tuple(r for r in self.target_replicas if r not in removing)
        if not isr or not set(replicas).issubset(isr):
            return
        self.target_isr = isr
        self.target_replicas = replicas
        self.target_removing = ()
        self.target_adding = ()

    # ------------------------------------------------------------ build

    def build(self) -> PartitionChangeRecord | None:
        part = self.partition
        self._complete_reassignment_if_needed()

        leader = NO_LEADER_CHANGE
        isr: tuple[int, ...] | None = None
        lrs = LRS_NO_CHANGE
        new_leader, unclean = self._elect()
        if new_leader != part.leader:
            leader = new_leader
            if unclean:
                # An unclean leader may lack data: it becomes the whole ISR and
                # recovers before serving (KIP-704).
                isr = (new_leader,)
                if part.leader_recovery_state != LRS_RECOVERING:
                    lrs = LRS_RECOVERING

        # A replica leaving the assignment must not keep a fetch session on the
        # old leader epoch: bump it by naming the same leader.
        if (
            leader == NO_LEADER_CHANGE
            and self.target_replicas is not part.replicas  # the common case: unchanged
            and not set(part.replicas).issubset(self.target_replicas)
        ):
            leader = part.leader

        if isr is None and self.target_isr and self.target_isr != part.isr:
            isr = self.target_isr

        # Before 3.6-IV0 brokers needed a new leader epoch when the ISR shrank
        # (KAFKA-15021): name the same leader to bump it.
        if (
            self.bump_on_isr_shrink
            and leader == NO_LEADER_CHANGE
            and isr is not None
            and not set(part.isr).issubset(isr)
        ):
            leader = part.leader

        replicas = (
            self.target_replicas
            if self.target_replicas and self.target_replicas != part.replicas
            else None
        )
        removing = self.target_removing if self.target_removing != part.removing_replicas else None
        adding = self.target_adding if self.target_adding != part.adding_replicas else None
        if self.target_lrs != part.leader_recovery_state:
            lrs = self.target_lrs

        if (
            leader == NO_LEADER_CHANGE
            and isr is None
            and replicas is None
            and removing is None
            and adding is None
            and lrs == LRS_NO_CHANGE
        ):
            return None
        return PartitionChangeRecord(
            partition_id=self.partition_id,
            topic_id=self.topic_id,
            isr=isr,
            leader=leader,
            replicas=replicas,
            removing_replicas=removing,
            adding_replicas=adding,
            leader_recovery_state=lrs,
        )
