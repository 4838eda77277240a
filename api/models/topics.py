"""Topics and their partitions: CreateTopics, DeleteTopics, CreatePartitions,
AlterPartitionReassignments, ElectLeaders, and GET /v1/topics.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from controller import messages as m
from metadata_records import limits
from metadata_records.errors import Errors

from .common import (
    ACCEPTED,
    ORDERS_ID,
    Int8,
    Int16,
    Int32,
    Name,
    RefusalFields,
    RequestModel,
    ResponseModel,
    StrictBool,
    StrictStr,
    ThrottleTimeMs,
    bounded_list,
    bounded_str,
    example,
    refusal_fields,
)

# ---------------------------------------------------------------- CreateTopics


Replicas = bounded_list(Int32, limits.MAX_REPLICAS)


class CreatableReplicaAssignment(RequestModel):
    """A partition's replicas, chosen by the caller (the first is the preferred leader)."""

    partition_index: Int32 = Field(description="the partition")
    broker_ids: Replicas = Field(description="its replicas, preferred leader first")


class CreatableTopicConfig(RequestModel):
    """A topic config to set at creation."""

    name: Name = Field(description='the config, e.g. "min.insync.replicas"')
    value: bounded_str(limits.MAX_CONFIG_VALUE_LENGTH) | None = Field(
        description="its value, or null for the default"
    )


class CreatableTopic(RequestModel):
    """One topic to create: a partition count and replication factor, or explicit assignments."""

    name: StrictStr = Field(description="the topic's name (Kafka's legal names)")
    num_partitions: Int32 = Field(-1, description="-1 = the default (1)")
    replication_factor: Int16 = Field(-1, description="-1 = the default: min(3, brokers)")
    assignments: bounded_list(CreatableReplicaAssignment, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY) = (
        Field([], description="explicit replicas per partition (then both counts are -1)")
    )
    configs: bounded_list(CreatableTopicConfig, limits.MAX_TOPIC_CONFIGS) = Field(
        [],
        description="Kafka's topic configs (every one of Kafka 4.0's 33, checked as Kafka does)",
    )


class CreateTopicsRequest(RequestModel):
    """POST /v1/topics (Kafka's CreateTopicsRequest)."""

    model_config = example(
        {
            "topics": [
                {
                    "name": "orders",
                    "numPartitions": 3,
                    "replicationFactor": 3,
                    "assignments": [],
                    "configs": [{"name": "min.insync.replicas", "value": "2"}],
                }
            ]
        },
        {
            "topics": [
                {
                    "name": "payments",
                    "numPartitions": -1,
                    "replicationFactor": -1,
                    "assignments": [{"partitionIndex": 0, "brokerIds": [2, 3, 1]}],
                }
            ]
        },
    )

    topics: bounded_list(CreatableTopic, limits.MAX_TOPICS_PER_REQUEST) = Field(
        description="the topics to create, each decided on its own"
    )
    validate_only: StrictBool = Field(
        False,
        description="true: every check of a real request, the same answers, nothing created",
    )

    def to_message(self) -> m.CreateTopicsRequest:
        return m.CreateTopicsRequest(
            validate_only=self.validate_only,
            topics=tuple(
                m.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=tuple(
                        (a.partition_index, tuple(a.broker_ids)) for a in t.assignments
                    ),
                    configs=tuple((c.name, c.value) for c in t.configs),
                )
                for t in self.topics
            ),
        )


class CreatableTopicResult(RefusalFields):
    """One topic's outcome (e.g. TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR)."""

    name: str = Field(description="the topic")
    topic_id: str | None = Field(None, description="its new id; null on an error")
    num_partitions: int = Field(-1, description="its partition count; -1 on an error")
    replication_factor: int = Field(-1, description="its replication factor; -1 on an error")


class CreateTopicsResponse(RefusalFields):
    """Each topic's outcome."""

    model_config = example(
        {
            **ACCEPTED,
            "throttleTimeMs": 0,
            "topics": [
                {
                    "name": "orders",
                    "topicId": ORDERS_ID,
                    **ACCEPTED,
                    "numPartitions": 3,
                    "replicationFactor": 3,
                }
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    topics: list[CreatableTopicResult] = Field(description="by topic, in the request's order")

    @classmethod
    def from_message(cls, r: m.CreateTopicsResponse) -> CreateTopicsResponse:
        return cls(
            **refusal_fields(r),
            topics=[
                CreatableTopicResult(
                    **refusal_fields(t),
                    name=t.name,
                    topic_id=t.topic_id,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                )
                for t in r.topics
            ],
        )


# ---------------------------------------------------------------- DeleteTopics


class DeletableTopicResult(RefusalFields):
    """The topic's outcome (UNKNOWN_TOPIC_OR_PARTITION if it does not exist)."""

    name: str = Field(description="the topic")
    topic_id: str | None = Field(None, description="its id; null if it did not exist")


class DeleteTopicsResponse(RefusalFields):
    """DELETE /v1/topics/{name} and POST /v1/topics/delete: a result per topic,
    in the order asked. For one topic the top-level error repeats the topic's;
    for several it is NONE and each result says its own (as Kafka's)."""

    model_config = example(
        {
            **ACCEPTED,
            "throttleTimeMs": 0,
            "responses": [{"name": "orders", "topicId": ORDERS_ID, **ACCEPTED}],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    responses: list[DeletableTopicResult] = Field(description="each topic's outcome")

    @classmethod
    def from_message(cls, r: m.DeleteTopicsResponse) -> DeleteTopicsResponse:
        results = [
            DeletableTopicResult(**refusal_fields(t), name=t.name, topic_id=t.topic_id)
            for t in r.topics
        ]
        top = refusal_fields(r)
        if r.error is Errors.NONE and len(r.topics) == 1 and r.topics[0].error is not Errors.NONE:
            top = refusal_fields(r.topics[0])
        return cls(**top, responses=results)


def delete_topics_message(name: str) -> m.DeleteTopicsRequest:
    return m.DeleteTopicsRequest(names=(name,))


# ---------------------------------------------------------------- CreatePartitions


class CreatePartitionsAssignment(RequestModel):
    """A new partition's replicas, preferred leader first."""

    broker_ids: Replicas = Field(description="the replicas")


class CreatePartitionsRequest(RequestModel):
    """POST /v1/topics/{name}/partitions (Kafka's CreatePartitionsRequest for one topic).

    ``assignments``: one entry per new partition, Kafka's ``{"brokerIds": [...]}``
    (a bare list of broker ids is accepted too)."""

    model_config = example(
        {"count": 6},
        {"count": 4, "assignments": [{"brokerIds": [3, 1, 2]}]},
    )

    count: Int32 = Field(description="the topic's new total partition count")
    assignments: (
        bounded_list(CreatePartitionsAssignment, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY) | None
    ) = Field(
        None, description="replicas for each new partition, or null to let the controller choose"
    )
    validate_only: StrictBool = Field(False, description="must be false: not supported")

    @field_validator("assignments", mode="before")
    @classmethod
    def _bare_lists(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"brokerIds": a} if isinstance(a, list) else a for a in value]
        return value

    def to_message(self, name: str) -> m.CreatePartitionsRequest:
        return m.CreatePartitionsRequest(
            name=name,
            count=self.count,
            assignments=None
            if self.assignments is None
            else tuple(tuple(a.broker_ids) for a in self.assignments),
        )


class CreatePartitionsTopicResult(RefusalFields):
    """The topic's outcome (the same as the top level's)."""

    name: str = Field(description="the topic")


class CreatePartitionsResponse(RefusalFields):
    """The outcome, at the top level and for the one topic."""

    model_config = example(
        {**ACCEPTED, "throttleTimeMs": 0, "results": [{**ACCEPTED, "name": "orders"}]},
        {
            "errorCode": 37,
            "errorName": "INVALID_PARTITIONS",
            "errorMessage": "topic orders has 6 partitions; the count must be larger",
            "rule": "partitions.not-an-increase",
            "throttleTimeMs": 0,
            "results": [
                {
                    "errorCode": 37,
                    "errorName": "INVALID_PARTITIONS",
                    "errorMessage": "topic orders has 6 partitions; the count must be larger",
                    "rule": "partitions.not-an-increase",
                    "name": "orders",
                }
            ],
        },
    )

    throttle_time_ms: ThrottleTimeMs = 0
    results: list[CreatePartitionsTopicResult] = Field(description="the one topic's outcome")

    @classmethod
    def from_message(cls, r: m.CreatePartitionsResponse) -> CreatePartitionsResponse:
        fields = refusal_fields(r)
        return cls(**fields, results=[CreatePartitionsTopicResult(**fields, name=r.name)])


# ---------------------------------------------------------------- AlterPartitionReassignments


class ReassignablePartition(RequestModel):
    """A partition's target replicas, or null to cancel its reassignment."""

    partition_index: Int32 = Field(description="the partition")
    replicas: Replicas | None = Field(
        description="the target replicas, or null to cancel an ongoing reassignment"
    )


class ReassignableTopic(RequestModel):
    """One topic's partitions to reassign."""

    name: StrictStr = Field(description="the topic")
    partitions: bounded_list(ReassignablePartition, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY) = Field(
        description="its partitions to reassign"
    )


class AlterPartitionReassignmentsRequest(RequestModel):
    """POST /v1/reassignments (Kafka's AlterPartitionReassignmentsRequest)."""

    model_config = example(
        {
            "topics": [
                {
                    "name": "orders",
                    "partitions": [
                        {"partitionIndex": 0, "replicas": [2, 3, 4]},
                        {"partitionIndex": 1, "replicas": None},
                    ],
                }
            ]
        }
    )

    topics: bounded_list(ReassignableTopic, limits.MAX_TOPICS_PER_REQUEST) = Field(
        description="the reassignments, by topic"
    )

    def to_message(self) -> m.AlterPartitionReassignmentsRequest:
        return m.AlterPartitionReassignmentsRequest(
            topics=tuple(
                m.ReassignableTopic(
                    name=t.name,
                    partitions=tuple(
                        m.ReassignablePartition(
                            p.partition_index, None if p.replicas is None else tuple(p.replicas)
                        )
                        for p in t.partitions
                    ),
                )
                for t in self.topics
            )
        )


class ReassignablePartitionResponse(RefusalFields):
    """One partition's outcome (e.g. NO_REASSIGNMENT_IN_PROGRESS for a cancel)."""

    partition_index: int = Field(description="the partition")


class ReassignableTopicResponse(ResponseModel):
    """One topic's outcomes."""

    name: str = Field(description="the topic")
    partitions: list[ReassignablePartitionResponse] = Field(description="by partition")


class AlterPartitionReassignmentsResponse(RefusalFields):
    """Each partition's outcome; the reassignment itself completes later, as
    the new replicas join the ISR."""

    model_config = example(
        {
            **ACCEPTED,
            "throttleTimeMs": 0,
            "responses": [
                {
                    "name": "orders",
                    "partitions": [
                        {"partitionIndex": 0, **ACCEPTED},
                        {
                            "partitionIndex": 1,
                            "errorCode": 85,
                            "errorName": "NO_REASSIGNMENT_IN_PROGRESS",
                            "errorMessage": "no reassignment of orders-1 is in progress",
                            "rule": "reassignment.none-in-progress",
                        },
                    ],
                }
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    responses: list[ReassignableTopicResponse] = Field(description="by topic")

    @classmethod
    def from_message(
        cls, r: m.AlterPartitionReassignmentsResponse
    ) -> AlterPartitionReassignmentsResponse:
        return cls(
            **refusal_fields(r),
            responses=[
                ReassignableTopicResponse(
                    name=t.name,
                    partitions=[
                        ReassignablePartitionResponse(
                            **refusal_fields(p),
                            partition_index=p.partition_index,
                        )
                        for p in t.partitions
                    ],
                )
                for t in r.topics
            ],
        )


# ---------------------------------------------------------------- ElectLeaders


class TopicPartitions(RequestModel):
    """A topic's partitions to elect leaders for."""

    topic: StrictStr = Field(description="the topic")
    partitions: bounded_list(Int32, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY) = Field(
        description="its partitions"
    )


class ElectLeadersRequest(RequestModel):
    """POST /v1/elect-leaders (Kafka's ElectLeadersRequest).

    ``topicPartitions`` null or absent: every partition (as Kafka's null)."""

    model_config = example(
        {"electionType": 0, "topicPartitions": [{"topic": "orders", "partitions": [0, 1, 2]}]}
    )

    election_type: Int8 = Field(0, description="0 = preferred, 1 = unclean")
    topic_partitions: bounded_list(TopicPartitions, limits.MAX_TOPICS_PER_REQUEST) | None = Field(
        None, description="the partitions, or null for every partition"
    )

    def to_message(self) -> m.ElectLeadersRequest:
        return m.ElectLeadersRequest(
            election_type=self.election_type,
            topic_partitions=None
            if self.topic_partitions is None
            else tuple((t.topic, tuple(t.partitions)) for t in self.topic_partitions),
        )


class PartitionResult(RefusalFields):
    """One partition's outcome (ELECTION_NOT_NEEDED when its preferred leader already leads)."""

    partition_id: int = Field(description="the partition")


class ReplicaElectionResult(ResponseModel):
    """One topic's outcomes."""

    topic: str = Field(description="the topic")
    partition_result: list[PartitionResult] = Field(description="by partition")


class ElectLeadersResponse(RefusalFields):
    """Each partition's outcome."""

    model_config = example(
        {
            **ACCEPTED,
            "throttleTimeMs": 0,
            "replicaElectionResults": [
                {
                    "topic": "orders",
                    "partitionResult": [
                        {"partitionId": 0, **ACCEPTED},
                        {
                            "partitionId": 1,
                            "errorCode": 84,
                            "errorName": "ELECTION_NOT_NEEDED",
                            "errorMessage": "orders-1 is led by its preferred replica",
                            "rule": "election.not-needed",
                        },
                    ],
                }
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    replica_election_results: list[ReplicaElectionResult] = Field(description="by topic")

    @classmethod
    def from_message(cls, r: m.ElectLeadersResponse) -> ElectLeadersResponse:
        return cls(
            **refusal_fields(r),
            replica_election_results=[
                ReplicaElectionResult(
                    topic=t.name,
                    partition_result=[
                        PartitionResult(
                            **refusal_fields(p),
                            partition_id=p.partition_index,
                        )
                        for p in t.partitions
                    ],
                )
                for t in r.topics
            ],
        )


# ---------------------------------------------------------------- reads: GET /v1/topics


class TopicConfigOut(ResponseModel):
    """A topic config set on the topic."""

    name: str = Field(description="the config")
    value: str | None = Field(
        description="its value; null for a sensitive config (a PASSWORD, or of unknown type)"
    )


class PartitionOut(ResponseModel):
    """A partition's state (Kafka's PartitionRecord, with its changes applied)."""

    partition_index: int = Field(description="the partition")
    replicas: list[int] = Field(description="its replicas, preferred leader first")
    isr: list[int] = Field(description="its in-sync replicas")
    leader: int = Field(description="its leader, -1 if none")
    leader_epoch: int = Field(description="its leader epoch")
    partition_epoch: int = Field(description="its partition epoch (bumped by every change)")
    leader_recovery_state: int = Field(description="0 = RECOVERED, 1 = RECOVERING")
    adding_replicas: list[int] = Field(description="replicas a reassignment adds")
    removing_replicas: list[int] = Field(description="replicas a reassignment removes")
    eligible_leader_replicas: list[int] = Field(
        [], description="KIP-966: clean former ISR members that may lead when the ISR is empty"
    )
    last_known_elr: list[int] = Field(
        [], description="KIP-966: the last known leader, once leaderless"
    )


class TopicOut(ResponseModel):
    """A topic with its configs and partitions."""

    name: str = Field(description="the topic")
    topic_id: str = Field(description="its id (base64url UUID)")
    configs: list[TopicConfigOut] = Field(description="the configs set on it")
    partitions: list[PartitionOut] = Field(description="by partition index")


class TopicsOut(ResponseModel):
    """Every topic, by name; or a page of them (``?limit=``, ``?after=``)."""

    model_config = example(
        {
            "topics": [
                {
                    "name": "orders",
                    "topicId": ORDERS_ID,
                    "configs": [{"name": "min.insync.replicas", "value": "2"}],
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            "replicas": [1, 2, 3],
                            "isr": [1, 2],
                            "leader": 1,
                            "leaderEpoch": 4,
                            "partitionEpoch": 8,
                            "leaderRecoveryState": 0,
                            "addingReplicas": [],
                            "removingReplicas": [],
                            "eligibleLeaderReplicas": [],
                            "lastKnownElr": [],
                        }
                    ],
                }
            ],
            "nextAfter": None,
        }
    )

    topics: list[TopicOut] = Field(description="by name")
    next_after: str | None = Field(
        None,
        description="the next page's `after` (the last name on this page); null on the last "
        "page and on the whole list",
    )


# ---------------------------------------------------------------- ListPartitionReassignments


class OngoingPartitionReassignmentOut(ResponseModel):
    """A partition whose replicas are being changed."""

    partition_index: int = Field(description="the partition")
    replicas: list[int] = Field(
        description="every replica now, the adding ones included (Kafka's merged list)"
    )
    adding_replicas: list[int] = Field(description="replicas being added")
    removing_replicas: list[int] = Field(description="replicas being removed")


class OngoingTopicReassignmentOut(ResponseModel):
    """A topic with partitions being reassigned."""

    name: str = Field(description="the topic")
    topic_id: str = Field(description="its id")
    partitions: list[OngoingPartitionReassignmentOut] = Field(description="by partition")


class ReassignmentsOut(ResponseModel):
    """GET /v1/reassignments (Kafka's ListPartitionReassignments): the
    reassignments in progress, by topic name and partition."""

    model_config = example(
        {
            "offset": 41,
            "topics": [
                {
                    "name": "orders",
                    "topicId": ORDERS_ID,
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            "replicas": [1, 2, 3, 4],
                            "addingReplicas": [4],
                            "removingReplicas": [1],
                        }
                    ],
                }
            ],
            "notFound": ["payments", "orders:7"],
        }
    )

    offset: int = Field(description="the offset of the image read")
    topics: list[OngoingTopicReassignmentOut] = Field(
        description="topics with a reassignment in progress (Kafka leaves out the others)"
    )
    not_found: list[str] = Field(
        description="the topics (`name`) and partitions (`name:partition`) asked for that "
        "do not exist; Kafka's answer leaves them out silently"
    )


# ---------------------------------------------------------------- DeleteTopics (several)


class DeleteTopicsRequest(RequestModel):
    """POST /v1/topics/delete: Kafka's DeleteTopics by names. Each topic gets
    its own result; the ones that can go are deleted in one batch."""

    model_config = example({"topicNames": ["orders", "payments"]})

    topic_names: bounded_list(StrictStr, limits.MAX_TOPICS_PER_REQUEST) = Field(
        min_length=1, description="the topics to delete"
    )

    def to_message(self) -> m.DeleteTopicsRequest:
        return m.DeleteTopicsRequest(names=tuple(self.topic_names))
