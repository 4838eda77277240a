"""AlterPartitionReassignments and ElectLeaders (SEMANTICS 5.2 and 5.4)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from metadata_records.errors import ApiError, Errors
from metadata_records.records import NO_LEADER, Record

from .messages import (
    PREFERRED,
    UNCLEAN,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ControllerResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReassignablePartition,
    TopicPartitionsResult,
)
from .partition_change import Election, PartitionChangeBuilder

if TYPE_CHECKING:
    from metadata_records.image import PartitionRegistration

    from .controller import Controller


class ReassignmentReplicas(NamedTuple):
    """Kafka's ``PartitionReassignmentReplicas`` for a new target."""

    replicas: tuple[int, ...]
    removing: tuple[int, ...]
    adding: tuple[int, ...]


def reassignment_replicas(
    current: tuple[int, ...], target: tuple[int, ...]
) -> ReassignmentReplicas:
    """The replica lists while moving from ``current`` to ``target``.

    As Kafka, ``removing`` and ``adding`` are sorted (its ``TreeSet``), and the
    replicas are the target followed by the sorted removing ones: the order
    decides who leads during the move (elections walk the replica list), so it
    must not depend on how the operator happened to list the brokers."""
    removing = tuple(sorted(set(current).difference(target)))
    adding = tuple(sorted(set(target).difference(current)))
    return ReassignmentReplicas(target + removing, removing, adding)


class PartitionAdminManager:
    def __init__(self, controller: Controller) -> None:
        self.c = controller

    # ------------------------------------------------------------ reassignments

    def alter_partition_reassignments(
        self, req: AlterPartitionReassignmentsRequest, now_ms: int
    ) -> ControllerResult:
        view = self.c.view
        records: list[Record] = []
        topics = []
        for topic in req.topics:
            topic_id = view.topic_id(topic.name)
            results = []
            for p in topic.partitions:
                if topic_id is None:
                    error = ApiError(
                        Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic.name}' does not exist."
                    )
                else:
                    error = self._reassign(topic.name, topic_id, p, records)
                results.append(PartitionResult(p.partition_index, error.error, error.message))
            topics.append(TopicPartitionsResult(topic.name, tuple(results)))
        return ControllerResult(tuple(records), AlterPartitionReassignmentsResponse(tuple(topics)))

    def _reassign(
        self, name: str, topic_id: str, p: ReassignablePartition, records: list[Record]
    ) -> ApiError:
        """Kafka's ``alterPartitionReassignment``: a cancel or a new target."""
        part = self.c.view.partition(topic_id, p.partition_index)
        tp = f"{name}-{p.partition_index}"
        if part is None:
            return ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Partition {tp} does not exist.")
        if p.replicas is None:
            builder = self._cancel_reassignment(tp, topic_id, p.partition_index, part)
        else:
            builder = self._change_reassignment(topic_id, p.partition_index, part, p.replicas)
        if isinstance(builder, ApiError):
            return builder
        record = builder.build()
        if record is not None:
            records.append(record)
        return ApiError(Errors.NONE)

    def _cancel_reassignment(
        self, tp: str, topic_id: str, pid: int, part: PartitionRegistration
    ) -> PartitionChangeBuilder | ApiError:
        """Kafka's ``cancelPartitionReassignment``: back to the replicas before
        the move, elected as the topic allows (uncleanly if it says so)."""
        if not part.is_reassigning:
            return ApiError(
                Errors.NO_REASSIGNMENT_IN_PROGRESS, f"No ongoing reassignment for {tp}."
            )
        election = self.c.replication.election_for(topic_id)
        # Revert (Kafka's PartitionReassignmentRevert): drop what the
        # reassignment was adding, keep what it was removing.
        adding = set(part.adding_replicas)
        replicas = tuple(r for r in part.replicas if r not in adding)
        isr = tuple(r for r in part.isr if r not in adding)
        if not isr:
            # Only added replicas are in sync: reverting means trusting an
            # out-of-sync original replica, which only an unclean topic allows.
            if election is not Election.UNCLEAN:
                return ApiError(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to revert partition assignment for {tp} because it would "
                    "require an unclean leader election (unclean.leader.election.enable "
                    "is false for the topic).",
                )
            isr = replicas[:1]
        builder = PartitionChangeBuilder(part, topic_id, pid, self.c.view.is_active, election)
        builder.target_isr = isr
        builder.target_replicas = replicas
        builder.target_removing = ()
        builder.target_adding = ()
        return builder

    def _change_reassignment(
        self, topic_id: str, pid: int, part: PartitionRegistration, target_replicas: tuple[int, ...]
    ) -> PartitionChangeBuilder | ApiError:
        """Kafka's ``changePartitionReassignment``: a new target, with an
        ONLINE election whatever the topic's unclean setting. A partition the
        move leaves without a leader is elected uncleanly, where the topic
        allows it, by the periodic sweep (``maybe_elect_unclean_leaders``)."""
        target = tuple(target_replicas)
        error = self.c.topics.manual_assignment_problem(target)
        if error is not None:
            return error
        move = reassignment_replicas(part.replicas, target)
        builder = PartitionChangeBuilder(
            part, topic_id, pid, self.c.view.is_active, Election.ONLINE
        )
        builder.target_replicas = move.replicas
        # Both lists are written even when empty, so a new reassignment
        # replaces the one in progress whole (decisions.md 55); Kafka keeps
        # an earlier list where the new one is empty.
        builder.target_removing = move.removing
        builder.target_adding = move.adding
        return builder

    # ------------------------------------------------------------ elections

    def elect_leaders(self, req: ElectLeadersRequest, now_ms: int) -> ControllerResult:
        view = self.c.view
        if req.election_type not in (PREFERRED, UNCLEAN):
            return ControllerResult(
                (),
                ElectLeadersResponse(
                    (),
                    Errors.INVALID_REQUEST,
                    f"electionType {req.election_type} is not valid (0 = preferred, 1 = unclean)",
                ),
            )
        records: list[Record] = []
        topics = []
        if req.topic_partitions is None:
            # Every partition; those that already have the wanted leader are left out.
            for topic_id in view.topic_ids():
                name = view.topic_name(topic_id)
                results = []
                for pid in view.partition_ids(topic_id):
                    error = self._elect(req.election_type, name, topic_id, pid, records)
                    if error.error is not Errors.ELECTION_NOT_NEEDED:
                        results.append(PartitionResult(pid, error.error, error.message))
                if results:
                    topics.append(TopicPartitionsResult(name, tuple(results)))
        else:
            for name, pids in req.topic_partitions:
                topic_id = view.topic_id(name)
                results = []
                for pid in pids:
                    if topic_id is None:
                        error = ApiError(
                            Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}"
                        )
                    else:
                        error = self._elect(req.election_type, name, topic_id, pid, records)
                    results.append(PartitionResult(pid, error.error, error.message))
                topics.append(TopicPartitionsResult(name, tuple(results)))
        return ControllerResult(tuple(records), ElectLeadersResponse(tuple(topics)))

    def _elect(
        self, election_type: int, name: str, topic_id: str, pid: int, records: list[Record]
    ) -> ApiError:
        view = self.c.view
        part = view.partition(topic_id, pid)
        tp = f"{name}-{pid}"
        if part is None:
            return ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {tp}")
        if election_type == PREFERRED:
            if part.replicas and part.leader == part.replicas[0]:
                return ApiError(Errors.ELECTION_NOT_NEEDED, f"{tp} is led by its preferred replica")
            election = Election.PREFERRED
        else:
            if part.leader != NO_LEADER:
                return ApiError(
                    Errors.ELECTION_NOT_NEEDED, f"{tp} already has leader {part.leader}"
                )
            election = Election.UNCLEAN
        record = PartitionChangeBuilder(part, topic_id, pid, view.is_active, election).build()
        if record is None:
            if election_type == PREFERRED:
                return ApiError(
                    Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"Failed to elect the preferred replica {part.replicas[0]} for {tp}: it is "
                    "not in the ISR or not active",
                )
            return ApiError(
                Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"Failed to elect a leader for {tp}: no replica is active",
            )
        records.append(record)
        return ApiError(Errors.NONE)
