"""CreateTopics, DeleteTopics and CreatePartitions (the topic half of Kafka's
``ReplicationControlManager``, with ``ConfigurationControlManager``'s topic configs)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from metadata_records.config_schema import topic_configs_problem
from metadata_records.delta import ImageDelta
from metadata_records.errors import ApiError, Errors
from metadata_records.records import (
    TOPIC_RESOURCE,
    ConfigRecord,
    PartitionRecord,
    Record,
    RemoveTopicRecord,
    TopicRecord,
    topic_name_problem,
)

from .config import ControllerConfig
from .heartbeats import BrokerHeartbeatManager
from .messages import (
    ControllerResult,
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from .placement import PlacementError, RandomSource, place
from .record_cap import MAX_RECORDS_PER_USER_OP, TOO_MANY_RECORDS, over_cap
from .rejected import Rejected

# Kafka's MAX_PARTITIONS_PER_BATCH (KAFKA-17870): new partitions one CreateTopics
# (over all its topics) or CreatePartitions request may ask for, checked before
# anything is built. The records built are capped too (record_cap): a topic's
# TopicRecord and ConfigRecords count, so one topic holds at most 9,999.
MAX_PARTITIONS_PER_REQUEST = MAX_RECORDS_PER_USER_OP


def _too_many_partitions(requested: int) -> str:
    return (
        "Excessively large number of partitions per request: "
        f"{requested} requested, at most {MAX_PARTITIONS_PER_REQUEST}."
    )


def _create_topics_refused(req: CreateTopicsRequest, error: ApiError) -> ControllerResult:
    """Kafka's CreateTopicsRequest.getErrorResponse: every topic carries the
    error; nothing written."""
    return ControllerResult(
        (),
        CreateTopicsResponse(
            tuple(
                CreatableTopicResult(t.name, error.error, error.message, rule=error.rule)
                for t in req.topics
            )
        ),
    )


def _normalized(name: str) -> str:
    # '.' and '_' collide in metric names, so Kafka refuses names differing only there.
    return name.replace(".", "_")


# A name with at most this many '.' and '_' has the names it could collide with
# looked up (2^k of them, 1,024 at most); past it, the stored names are scanned.
# Kafka keeps an index (topicsWithCollisionChars); the lookup costs what the
# name holds, not the topics stored, without a second map in every image.
_LOOKUP_SPOTS = 10


def _colliding_topic(view: ImageDelta, name: str) -> str | None:
    """The stored topic whose name differs from ``name`` only in '.' and '_'
    (a name with neither collides with none but itself)."""
    spots = [i for i, c in enumerate(name) if c in "._"]
    if not spots:
        return None
    if len(spots) > _LOOKUP_SPOTS:
        want = _normalized(name)
        return next((n for n in view.topic_names() if n != name and _normalized(n) == want), None)
    chars = list(name)
    for choice in itertools.product("._", repeat=len(spots)):
        for i, c in zip(spots, choice, strict=True):
            chars[i] = c
        candidate = "".join(chars)
        if candidate != name and view.topic_id(candidate) is not None:
            return candidate
    return None


class TopicControlManager:
    def __init__(
        self,
        view: Callable[[], ImageDelta],
        config: ControllerConfig,
        heartbeats: BrokerHeartbeatManager,
        new_topic_id: Callable[[], str],
        placement_random: Callable[[int], RandomSource],
    ) -> None:
        self._view = view  # the controller's view (committed image + pending records)
        self._config = config
        self._heartbeats = heartbeats  # which brokers the placer may use
        self._new_topic_id = new_topic_id
        # The placer's random source, given the image's partition count.
        self._placement_random = placement_random

    # ------------------------------------------------------------ assignments

    def check_manual_assignment(self, replicas: tuple[int, ...]) -> None:
        """Rejected unless a replica list given by an operator is acceptable."""
        self._validate_manual(replicas, None)

    def _validate_manual(self, replicas: tuple[int, ...], expected_rf: int | None) -> None:
        """Kafka's ``validateManualPartitionAssignment``: the brokers are checked
        in id order, so the first problem named is the one Kafka names."""
        view = self._view()
        if not replicas:
            raise Rejected(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty replica list.",
                "assignment.empty",
            )
        previous = None
        for broker in sorted(replicas):
            if view.broker(broker) is None:
                raise Rejected(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker}, but no such "
                    "broker is registered.",
                    "assignment.broker-not-registered",
                )
            if broker == previous:
                raise Rejected(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {broker} more than once.",
                    "assignment.broker-repeated",
                )
            previous = broker
        if expected_rf is not None and len(replicas) != expected_rf:
            raise Rejected(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes a partition with {len(replicas)} "
                f"replica(s), but this is not consistent with previous partitions, which have "
                f"{expected_rf} replica(s).",
                "assignment.replication-factor-inconsistent",
            )

    def _active(self, replicas: tuple[int, ...]) -> tuple[int, ...]:
        """The ISR of a new partition: its active replicas, in assignment order."""
        is_active = self._view().is_active
        return tuple(b for b in replicas if is_active(b))

    def _manual_isr(self, replicas: tuple[int, ...], pid: int) -> tuple[int, ...]:
        isr = self._active(replicas)
        if not isr:
            raise Rejected(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment for partition "
                f"{pid} are fenced or in controlled shutdown.",
                "assignment.all-replicas-inactive",
            )
        return isr

    def _placed_isr(self, replicas: tuple[int, ...], rf: int) -> tuple[int, ...]:
        isr = self._active(replicas)
        if not isr:
            # Consistent with the placer: INVALID_REPLICATION_FACTOR (Kafka's createTopic).
            raise Rejected(
                Errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): All brokers are currently "
                "fenced or in controlled shutdown.",
                "placement.all-brokers-inactive",
            )
        return isr

    @staticmethod
    def _partition_record(
        topic_id: str, pid: int, replicas: tuple[int, ...], isr: tuple[int, ...]
    ) -> PartitionRecord:
        """Leader = the first ISR member; epochs 0 (Kafka's buildPartitionRegistration)."""
        return PartitionRecord(
            partition_id=pid,
            topic_id=topic_id,
            replicas=replicas,
            isr=isr,
            leader=isr[0],
            leader_epoch=0,
            partition_epoch=0,
        )

    def _placed(self, count: int, rf: int) -> list[tuple[int, ...]]:
        """Kafka's ``StripedReplicaPlacer`` over the usable brokers: fenced
        ones may follow, brokers in controlled shutdown are left out."""
        view = self._view()
        usable = self._heartbeats.usable_brokers(view)
        try:
            return place(usable, count, rf, self._placement_random(view.partition_count))
        except PlacementError as e:
            raise Rejected(
                Errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): {e}",
                "placement.not-enough-brokers",
            ) from None

    # ------------------------------------------------------------ CreateTopics

    def create_topics(self, req: CreateTopicsRequest, now_ms: int) -> ControllerResult:
        # Kafka's cap, checked before anything is built: a request for two
        # billion partitions made the controller allocate until it was killed.
        requested = sum(
            len(t.assignments)
            if t.assignments
            else (
                self._config.default_num_partitions
                if t.num_partitions == -1
                else max(0, t.num_partitions)
            )
            for t in req.topics
        )
        if requested > MAX_PARTITIONS_PER_REQUEST:
            return _create_topics_refused(
                req,
                ApiError(
                    Errors.POLICY_VIOLATION,
                    _too_many_partitions(requested),
                    "topic.too-many-partitions",
                ),
            )
        counts: dict[str, int] = {}
        for t in req.topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        taken: dict[str, str] = {}  # normalized -> name, of the topics this request creates
        records: list[Record] = []
        results = []
        for t in req.topics:
            if counts[t.name] > 1:
                results.append(
                    CreatableTopicResult(
                        t.name,
                        Errors.INVALID_REQUEST,
                        "Duplicate topic name.",
                        rule="topic.name-duplicate",
                    )
                )
                continue
            try:
                topic_records, result = self._create_topic(t, taken)
            except Rejected as r:
                results.append(CreatableTopicResult(t.name, r.code, r.message, rule=r.rule))
                continue
            records += topic_records
            if over_cap(records):
                return _create_topics_refused(req, TOO_MANY_RECORDS)
            taken[_normalized(t.name)] = t.name
            results.append(result)
        if req.validate_only:
            # Kafka's validateOnly: decided exactly as a real request, every
            # answer the same (topic ids included), and nothing written.
            return ControllerResult((), CreateTopicsResponse(tuple(results)))
        return ControllerResult(tuple(records), CreateTopicsResponse(tuple(results)))

    def _create_topic(
        self, t: CreatableTopic, taken: dict[str, str]
    ) -> tuple[list[Record], CreatableTopicResult]:
        view = self._view()
        problem = topic_name_problem(t.name)
        if problem is not None:
            raise Rejected(Errors.INVALID_TOPIC_EXCEPTION, problem, "topic.name-invalid")
        if view.topic_id(t.name) is not None or taken.get(_normalized(t.name)) == t.name:
            raise Rejected(
                Errors.TOPIC_ALREADY_EXISTS,
                f"Topic '{t.name}' already exists.",
                "topic.already-exists",
            )
        other = taken.get(_normalized(t.name)) or _colliding_topic(view, t.name)
        if other is not None:
            raise Rejected(
                Errors.INVALID_TOPIC_EXCEPTION,
                f"Topic '{t.name}' collides with existing topic: {other}",
                "topic.name-collides",
            )
        configs = dict(t.configs)  # a key given twice: the last value, as Kafka
        problem = topic_configs_problem(configs)
        if problem is not None:
            raise Rejected(Errors.INVALID_CONFIG, problem, "topic.config-invalid")

        partitions = self._manual_partitions(t) if t.assignments else self._placed_partitions(t)

        topic_id = self._new_topic_id()
        records: list[Record] = [TopicRecord(name=t.name, topic_id=topic_id)]
        records += [
            ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=t.name, name=k, value=v)
            for k, v in sorted(configs.items())
        ]
        records += [
            self._partition_record(topic_id, pid, replicas, isr)
            for pid, (replicas, isr) in enumerate(partitions)
        ]
        rf = len(partitions[0][0])
        return records, CreatableTopicResult(
            t.name, Errors.NONE, None, topic_id, len(partitions), rf
        )

    def _manual_partitions(
        self, t: CreatableTopic
    ) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """(replicas, ISR) per partition of a manual assignment, checked in
        Kafka's order (``createTopic``): the replication factor, then the
        partition count, then each assignment in request order (a repeated
        index, its brokers, an ISR), and only then the indexes' sequence."""
        if t.replication_factor != -1:
            raise Rejected(
                Errors.INVALID_REQUEST,
                "A manual partition assignment was specified, but replication factor was not "
                "set to -1.",
                "assignment.replication-factor-set",
            )
        if t.num_partitions != -1:
            raise Rejected(
                Errors.INVALID_REQUEST,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
                "assignment.num-partitions-set",
            )
        by_index: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        rf = None
        for pid, brokers in t.assignments:
            if pid in by_index:
                raise Rejected(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"Found multiple manual partition assignments for partition {pid}",
                    "assignment.partition-repeated",
                )
            replicas = tuple(brokers)
            self._validate_manual(replicas, rf)
            rf = len(replicas)
            by_index[pid] = (replicas, self._manual_isr(replicas, pid))
        for pid in range(len(by_index)):
            if pid not in by_index:
                raise Rejected(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    "partitions should be a consecutive 0-based integer sequence; got "
                    f"{sorted(by_index)}",
                    "assignment.not-consecutive",
                )
        return [by_index[pid] for pid in range(len(by_index))]

    def _placed_partitions(
        self, t: CreatableTopic
    ) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """(replicas, ISR) per partition placed by the controller; the
        replication factor is checked before the partition count (Kafka's
        ``createTopic``)."""
        if t.replication_factor < -1 or t.replication_factor == 0:
            raise Rejected(
                Errors.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
                "placement.replication-factor-invalid",
            )
        if t.num_partitions < -1 or t.num_partitions == 0:
            raise Rejected(
                Errors.INVALID_PARTITIONS,
                f"Number of partitions was set to an invalid non-positive value {t.num_partitions}.",
                "placement.partitions-invalid",
            )
        count = self._config.default_num_partitions if t.num_partitions == -1 else t.num_partitions
        rf = (
            min(self._config.max_default_replication_factor, len(self._view().broker_ids()))
            if t.replication_factor == -1
            else t.replication_factor
        )
        if rf == 0:
            raise Rejected(
                Errors.INVALID_REPLICATION_FACTOR,
                "Unable to replicate the partition: no brokers are registered.",
                "placement.no-brokers",
            )
        return [(replicas, self._placed_isr(replicas, rf)) for replicas in self._placed(count, rf)]

    # ------------------------------------------------------------ DeleteTopics

    def delete_topics(self, req: DeleteTopicsRequest, now_ms: int) -> ControllerResult:
        view = self._view()
        counts: dict[str, int] = {}
        for name in req.names:
            counts[name] = counts.get(name, 0) + 1
        records: list[Record] = []
        results = []
        for name in req.names:
            topic_id = view.topic_id(name)
            if counts[name] > 1:
                results.append(
                    DeletableTopicResult(
                        name,
                        Errors.INVALID_REQUEST,
                        "Duplicate topic name.",
                        rule="topic.name-duplicate",
                    )
                )
            elif topic_id is None:
                results.append(
                    DeletableTopicResult(
                        name,
                        Errors.UNKNOWN_TOPIC_OR_PARTITION,
                        f"Topic '{name}' does not exist.",
                        rule="topic.unknown",
                    )
                )
            else:
                records.append(RemoveTopicRecord(topic_id=topic_id))
                results.append(DeletableTopicResult(name, Errors.NONE, None, topic_id))
        return ControllerResult(tuple(records), DeleteTopicsResponse(tuple(results)))

    # ------------------------------------------------------------ CreatePartitions

    def create_partitions(self, req: CreatePartitionsRequest, now_ms: int) -> ControllerResult:
        try:
            records = self._create_partitions(req)
        except Rejected as r:
            return ControllerResult(
                (), CreatePartitionsResponse(req.name, r.code, r.message, r.rule)
            )
        return ControllerResult(tuple(records), CreatePartitionsResponse(req.name))

    def _create_partitions(self, req: CreatePartitionsRequest) -> list[Record]:
        view = self._view()
        topic_id = view.topic_id(req.name)
        if topic_id is None:
            raise Rejected(
                Errors.UNKNOWN_TOPIC_OR_PARTITION,
                f"Topic '{req.name}' does not exist.",
                "topic.unknown",
            )
        existing = view.partition_ids(topic_id)
        current = len(existing)
        if req.count < current:
            raise Rejected(
                Errors.INVALID_PARTITIONS,
                f"The topic {req.name} currently has {current} partition(s); {req.count} would "
                "not be an increase.",
                "partitions.not-an-increase",
            )
        if req.count == current:
            raise Rejected(
                Errors.INVALID_PARTITIONS,
                f"Topic already has {current} partition(s).",
                "partitions.not-an-increase",
            )
        added = req.count - current
        # One PartitionRecord per new partition: this is the record cap too,
        # checked before anything is built.
        if added > MAX_PARTITIONS_PER_REQUEST:
            raise Rejected(
                Errors.POLICY_VIOLATION, _too_many_partitions(added), "topic.too-many-partitions"
            )
        rf = len(view.partition(topic_id, existing[0]).replicas) if existing else 1
        if req.assignments is not None:
            if len(req.assignments) != added:
                raise Rejected(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(req.assignments)} assignment(s) were specified.",
                    "assignment.count-mismatch",
                )
            partitions = []
            for pid, brokers in enumerate(req.assignments, start=current):
                replicas = tuple(brokers)
                self._validate_manual(replicas, rf)
                partitions.append((replicas, self._manual_isr(replicas, pid)))
        else:
            partitions = [
                (replicas, self._placed_isr(replicas, rf)) for replicas in self._placed(added, rf)
            ]
        return [
            self._partition_record(topic_id, pid, replicas, isr)
            for pid, (replicas, isr) in enumerate(partitions, start=current)
        ]
