"""Kafka's ``PartitionChangeBuilder``: from a partition and its targets, the one
``PartitionChangeRecord`` that gets there, or None when nothing changes.

With ELR (KIP-966) off, the ISR is never written empty (the last member
stays, with leader -1). With it on (``elr_enabled``), as Kafka 4.0:

* when the target ISR is below ``min_isr``, the members of the old ISR (and
  the old ELR) that leave it go into the ELR, less the replicas that shut down
  uncleanly (``unclean_shutdown_replicas``); at or above ``min_isr`` the ELR
  is cleared. So the ELR and the ISR never share a member, and an ELR member
  was in the ISR or the ELR before;
* the ISR may be written empty; a replica may then be elected from the ELR
  (an unfenced one), and it becomes the ISR;
* LastKnownElr holds the last leader once the ISR is empty, and is cleared
  when the partition has a leader again (Kafka's
  useLastKnownLeaderInBalancedRecovery). Kafka 4.0 also elects that last known
  leader, marked unclean, in an ONLINE election when the ISR and the ELR are
  empty, even a fenced one; here it is elected only where unclean election is
  allowed, and only when it may lead (decisions.md 111);
* an unclean election clears the ELR and LastKnownElr.

From metadata.version 3.6-IV0 (KAFKA-15021) an ISR shrink alone does not bump
the leader epoch; before it, it does.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from metadata_records.features import ELR_RECORD_VERSION
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
        "elr_enabled",
        "min_isr",
        "target_elr",
        "unclean_shutdown_replicas",
    )

    def __init__(
        self,
        partition: PartitionRegistration,
        topic_id: str,
        partition_id: int,
        is_acceptable_leader: Callable[[int], bool],
        election: Election = Election.ONLINE,
        bump_on_isr_shrink: bool = False,
        elr_enabled: bool = False,
        min_isr: int = 1,
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
        # KIP-966: eligible.leader.replicas.version >= 1, and the topic's
        # effective min.insync.replicas (at most its replication factor).
        self.elr_enabled = elr_enabled
        self.min_isr = min_isr
        self.target_elr = partition.elr
        self.unclean_shutdown_replicas: tuple[int, ...] = ()

    # ------------------------------------------------------------ election

    def _is_valid_new_leader(self, replica: int) -> bool:
        # In the ISR, or in the ELR when the ISR is empty (KIP-966).
        return (
            replica in self.target_isr or (not self.target_isr and replica in self.target_elr)
        ) and self.is_acceptable_leader(replica)

    def _last_known_leader(self) -> int | None:
        """Kafka's canElectLastKnownLeader, with 4.1's check that it may lead
        (KAFKA-19522): the one LastKnownElr member when the ISR and the ELR are
        empty. Only for an UNCLEAN election here (decisions.md 111)."""
        last_known = self.partition.last_known_elr
        if (
            not self.elr_enabled
            or self.target_elr
            or self.target_isr
            or len(last_known) != 1
            or not self.is_acceptable_leader(last_known[0])
        ):
            return None
        return last_known[0]

    def _elect(self) -> tuple[int, bool]:
        """(leader, unclean) per docs/kafka-rules.md 5.2."""
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
            last_known = self._last_known_leader()
            if last_known is not None:
                return last_known, True
            for replica in self.target_replicas:
                if self.is_acceptable_leader(replica):
                    return replica, True
        return NO_LEADER, False

    # ------------------------------------------------------------ reassignment

    def _complete_reassignment_if_needed(self) -> None:
        """docs/kafka-rules.md 5.4: done once the ISR, less the removed replicas, is
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

    # ------------------------------------------------------------ ELR

    def _maybe_populate_target_elr(self) -> None:
        """Kafka's maybePopulateTargetElr: below min ISR, the ELR becomes the
        old ISR and ELR less the target ISR and the uncleanly shut down."""
        if not self.elr_enabled:
            return
        if len(self.target_isr) >= self.min_isr:
            self.target_elr = ()
            return
        keep = set(self.target_elr).union(self.partition.isr)
        keep.difference_update(self.target_isr, self.unclean_shutdown_replicas)
        self.target_elr = tuple(sorted(keep))

    # ------------------------------------------------------------ build

    def build(self) -> PartitionChangeRecord | None:
        part = self.partition
        self._complete_reassignment_if_needed()
        self._maybe_populate_target_elr()

        leader = NO_LEADER_CHANGE
        isr: tuple[int, ...] | None = None
        lrs = LRS_NO_CHANGE
        new_leader, unclean = self._elect()
        if new_leader != part.leader:
            leader = new_leader
            if new_leader in self.target_elr:
                # Elected from the ELR (the ISR is empty): it is the ISR now.
                self.target_isr = (new_leader,)
                self.target_elr = tuple(r for r in self.target_elr if r != new_leader)
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

        # Kafka's maybeUpdateRecordElr: an unclean election (it set the ISR)
        # or ELR off clears the ELR.
        if isr is not None or not self.elr_enabled:
            self.target_elr = ()
        elr = self.target_elr if self.target_elr != part.elr else None

        # With ELR on, the ISR may be written empty.
        if isr is None and (self.target_isr or self.elr_enabled) and self.target_isr != part.isr:
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

        last_known = self._last_known_elr(leader, isr)

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
            and elr is None
            and last_known is None
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
            eligible_leader_replicas=elr,
            last_known_elr=last_known,
            # v2 only when it carries an ELR field: logs without ELR stay as they were
            version=0 if elr is None and last_known is None else ELR_RECORD_VERSION,
        )

    def _last_known_elr(self, leader: int, isr: tuple[int, ...] | None) -> tuple[int, ...] | None:
        """Kafka's maybeUpdateLastKnownLeader: the leader before the ISR first
        became empty, cleared once the partition has (or keeps) a leader.
        None when it does not change."""
        if not self.elr_enabled:
            return None
        part = self.partition
        if isr == ():
            if part.leader != NO_LEADER and part.last_known_elr != (part.leader,):
                return (part.leader,)
            return None
        if (
            leader >= 0 or (part.leader != NO_LEADER and leader != NO_LEADER)
        ) and part.last_known_elr:
            return ()
        return None


# ---------------------------------------------------------------- AlterPartition's common case

# The one switch: False builds every AlterPartition change with the builder.
# Listed with every other speed switch in metaquorum/speed_switches.py.
QUICK_ISR_CHANGE = True
NOT_QUICK = object()  # quick_isr_change cannot vouch: build it


def quick_isr_change(
    part: PartitionRegistration,
    topic_id: str,
    partition_id: int,
    target_isr: tuple[int, ...],
    target_lrs: int,
    leader_active: bool,
) -> PartitionChangeRecord | None | object:
    """What ``PartitionChangeBuilder`` (an ONLINE or UNCLEAN election, no
    leader-epoch bump on a shrink, ELR off) builds for AlterPartition's common
    case, without the builder: the leader is active and in the target ISR (so
    either election keeps it), nothing is being reassigned, the partition
    holds no ELR, and the leader recovery state stays. Then only the ISR can
    change: the record naming it, or None. Anything else is ``NOT_QUICK``
    (decisions.md 116). ``tests/controller/test_partition_change.py`` checks
    it agrees with the builder wherever it vouches."""
    if (
        not leader_active
        or part.removing_replicas
        or part.adding_replicas
        or part.elr
        or target_lrs != part.leader_recovery_state
        or part.leader not in target_isr
    ):
        return NOT_QUICK
    if target_isr == part.isr:
        return None
    return PartitionChangeRecord(partition_id, topic_id, target_isr)
