"""AlterPartitionReassignments and ElectLeaders (docs/kafka-rules.md 5.2 and 5.4; Kafka's
``ReplicationControlManager.alterPartitionReassignments`` and ``electLeaders``).

Both are operator writes: their records are capped per request
(``record_cap``), and past the cap the whole request is answered in Kafka's
``getErrorResponse`` shape, every entry carrying the error."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from metadata_records.delta import ImageDelta
from metadata_records.errors import ApiError, Errors
from metadata_records.features import bumps_leader_epoch_on_isr_shrink
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
from .record_cap import TOO_MANY_RECORDS, over_cap
from .rejected import Rejected
from .replication_control import ReplicationControlManager
from .topic_control import TopicControlManager

if TYPE_CHECKING:
    from metadata_records.image import PartitionRegistration


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
    def __init__(
        self,
        view: Callable[[], ImageDelta],
        replication: ReplicationControlManager,
        topics: TopicControlManager,
    ) -> None:
        self._view = view  # the controller's view (committed image + pending records)
        self._replication = replication  # a topic's election and ELR settings
        self._topics = topics  # the check of a manual replica assignment

    # ------------------------------------------------------------ reassignments

    def alter_partition_reassignments(
        self, req: AlterPartitionReassignmentsRequest, now_ms: int
    ) -> ControllerResult:
        view = self._view()
        records: list[Record] = []
        topics = []
        for topic in req.topics:
            topic_id = view.topic_id(topic.name)
            results = []
            for p in topic.partitions:
                if topic_id is None:
                    error = ApiError(
                        Errors.UNKNOWN_TOPIC_OR_PARTITION,
                        f"Topic '{topic.name}' does not exist.",
                        "topic.unknown",
                    )
                else:
                    error = self._reassign(topic.name, topic_id, p, records)
                    if over_cap(records):
                        return _reassignments_refused(req, TOO_MANY_RECORDS)
                results.append(
                    PartitionResult(p.partition_index, error.error, error.message, error.rule)
                )
            topics.append(TopicPartitionsResult(topic.name, tuple(results)))
        return ControllerResult(tuple(records), AlterPartitionReassignmentsResponse(tuple(topics)))

    def _reassign(
        self, name: str, topic_id: str, p: ReassignablePartition, records: list[Record]
    ) -> ApiError:
        """Kafka's ``alterPartitionReassignment``: a cancel or a new target."""
        part = self._view().partition(topic_id, p.partition_index)
        tp = f"{name}-{p.partition_index}"
        if part is None:
            return ApiError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION,
                f"Partition {tp} does not exist.",
                "partition.unknown",
            )
        try:
            if p.replicas is None:
                builder = self._cancel_reassignment(tp, topic_id, p.partition_index, part)
            else:
                builder = self._change_reassignment(topic_id, p.partition_index, part, p.replicas)
        except Rejected as r:
            return ApiError(r.code, r.message, r.rule)
        record = builder.build()
        if record is not None:
            records.append(record)
        return ApiError(Errors.NONE)

    def _cancel_reassignment(
        self, tp: str, topic_id: str, pid: int, part: PartitionRegistration
    ) -> PartitionChangeBuilder:
        """Kafka's ``cancelPartitionReassignment``: back to the replicas before
        the move, elected as the topic allows (uncleanly if it says so)."""
        if not part.is_reassigning:
            raise Rejected(
                Errors.NO_REASSIGNMENT_IN_PROGRESS,
                f"No ongoing reassignment for {tp}.",
                "reassignment.none-in-progress",
            )
        election = self._replication.election_for(topic_id)
        # Revert (Kafka's PartitionReassignmentRevert): drop what the
        # reassignment was adding, keep what it was removing.
        adding = set(part.adding_replicas)
        replicas = tuple(r for r in part.replicas if r not in adding)
        isr = tuple(r for r in part.isr if r not in adding)
        # An ISR already empty (ELR on, KIP-966) is kept so: Kafka's revert
        # would make the first replica the ISR, fenced or not (decisions.md 112).
        if not isr and part.isr:
            # Only added replicas are in sync: reverting means trusting an
            # out-of-sync original replica, which only an unclean topic allows.
            if election is not Election.UNCLEAN:
                raise Rejected(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to revert partition assignment for {tp} because it would "
                    "require an unclean leader election (unclean.leader.election.enable "
                    "is false for the topic).",
                    "reassignment.revert-unclean",
                )
            isr = replicas[:1]
        builder = self._builder(part, topic_id, pid, election)
        builder.target_isr = isr
        builder.target_replicas = replicas
        builder.target_removing = ()
        builder.target_adding = ()
        return builder

    def _change_reassignment(
        self, topic_id: str, pid: int, part: PartitionRegistration, target_replicas: tuple[int, ...]
    ) -> PartitionChangeBuilder:
        """Kafka's ``changePartitionReassignment``: a new target, with an
        ONLINE election whatever the topic's unclean setting. A partition the
        move leaves without a leader is elected uncleanly, where the topic
        allows it, by the periodic sweep (``maybe_elect_unclean_leaders``)."""
        target = tuple(target_replicas)
        self._topics.check_manual_assignment(target)
        move = reassignment_replicas(part.replicas, target)
        builder = self._builder(part, topic_id, pid, Election.ONLINE)
        builder.target_replicas = move.replicas
        # Both lists are written even when empty, so a new reassignment
        # replaces the one in progress whole (decisions.md 55); Kafka keeps
        # an earlier list where the new one is empty.
        builder.target_removing = move.removing
        builder.target_adding = move.adding
        return builder

    # ------------------------------------------------------------ elections

    def elect_leaders(self, req: ElectLeadersRequest, now_ms: int) -> ControllerResult:
        if req.election_type not in (PREFERRED, UNCLEAN):
            return _elections_refused(
                req,
                ApiError(
                    Errors.INVALID_REQUEST,
                    f"Unknown election type {req.election_type} (0 = preferred, 1 = unclean)",
                    "election.type-unknown",
                ),
            )
        records: list[Record] = []
        if req.topic_partitions is None:
            topics = self._elect_everywhere(req.election_type, records)
        else:
            topics = self._elect_listed(req, records)
        if topics is None:
            return _elections_refused(req, TOO_MANY_RECORDS)
        return ControllerResult(tuple(records), ElectLeadersResponse(tuple(topics)))

    def _builder(
        self, part: PartitionRegistration, topic_id: str, pid: int, election: Election
    ) -> PartitionChangeBuilder:
        """A change of one partition, as this metadata.version builds it."""
        view = self._view()
        return PartitionChangeBuilder(
            part,
            topic_id,
            pid,
            view.is_active,
            election,
            bumps_leader_epoch_on_isr_shrink(view.metadata_version),
            *self._replication.elr_settings(topic_id),
        )

    def _elect_everywhere(
        self, election_type: int, records: list[Record]
    ) -> list[TopicPartitionsResult] | None:
        """Kafka's answer to a request without partitions: every topic, each
        with the partitions where an election was needed (an empty list where
        none was); None past the record cap."""
        view = self._view()
        names = sorted((view.topic_name(topic_id), topic_id) for topic_id in view.topic_ids())
        topics = []
        for name, topic_id in names:
            results = []
            for pid in view.partition_ids(topic_id):
                error = self._elect(election_type, name, topic_id, pid, records)
                if over_cap(records):
                    return None
                if error.error is not Errors.ELECTION_NOT_NEEDED:
                    results.append(PartitionResult(pid, error.error, error.message, error.rule))
            topics.append(TopicPartitionsResult(name, tuple(results)))
        return topics

    def _elect_listed(
        self, req: ElectLeadersRequest, records: list[Record]
    ) -> list[TopicPartitionsResult] | None:
        view = self._view()
        topics = []
        for name, pids in req.topic_partitions:
            topic_id = view.topic_id(name)
            results = []
            for pid in pids:
                if topic_id is None:
                    error = ApiError(
                        Errors.UNKNOWN_TOPIC_OR_PARTITION,
                        f"No such topic as {name}",
                        "topic.unknown",
                    )
                else:
                    error = self._elect(req.election_type, name, topic_id, pid, records)
                    if over_cap(records):
                        return None
                results.append(PartitionResult(pid, error.error, error.message, error.rule))
            topics.append(TopicPartitionsResult(name, tuple(results)))
        return topics

    def _elect(
        self, election_type: int, name: str, topic_id: str, pid: int, records: list[Record]
    ) -> ApiError:
        view = self._view()
        part = view.partition(topic_id, pid)
        tp = f"{name}-{pid}"
        if part is None:
            return ApiError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {tp}", "partition.unknown"
            )
        if election_type == PREFERRED:
            if part.replicas and part.leader == part.replicas[0]:
                return ApiError(
                    Errors.ELECTION_NOT_NEEDED,
                    f"{tp} is led by its preferred replica",
                    "election.not-needed",
                )
            election = Election.PREFERRED
        else:
            if part.leader != NO_LEADER:
                return ApiError(
                    Errors.ELECTION_NOT_NEEDED,
                    f"{tp} already has leader {part.leader}",
                    "election.not-needed",
                )
            election = Election.UNCLEAN
        record = self._builder(part, topic_id, pid, election).build()
        if record is None:
            if election_type == PREFERRED:
                return ApiError(
                    Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"Failed to elect the preferred replica {part.replicas[0]} for {tp}: it is "
                    "not in the ISR or not active",
                    "election.preferred-unavailable",
                )
            return ApiError(
                Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"Failed to elect a leader for {tp}: no replica is active",
                "election.no-eligible-leader",
            )
        records.append(record)
        return ApiError(Errors.NONE)


# ------------------------------------------------------------ whole-request answers


def _reassignments_refused(
    req: AlterPartitionReassignmentsRequest, error: ApiError
) -> ControllerResult:
    """Kafka's AlterPartitionReassignmentsRequest.getErrorResponse: the error at
    the top and on every requested partition; nothing written."""
    topics = tuple(
        TopicPartitionsResult(
            t.name,
            tuple(
                PartitionResult(p.partition_index, error.error, error.message, error.rule)
                for p in t.partitions
            ),
        )
        for t in req.topics
    )
    return ControllerResult(
        (), AlterPartitionReassignmentsResponse(topics, error.error, error.message, error.rule)
    )


def _elections_refused(req: ElectLeadersRequest, error: ApiError) -> ControllerResult:
    """Kafka's ElectLeadersRequest.getErrorResponse: the error at the top and on
    every requested partition (none when the request named none)."""
    topics = tuple(
        TopicPartitionsResult(
            name,
            tuple(PartitionResult(pid, error.error, error.message, error.rule) for pid in pids),
        )
        for name, pids in req.topic_partitions or ()
    )
    return ControllerResult(
        (), ElectLeadersResponse(topics, error.error, error.message, error.rule)
    )
