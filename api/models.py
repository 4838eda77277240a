"""Request and response bodies of the HTTP contract (shared/API.md), as pydantic models.

Input rules, the same for every body:

* Field names are Kafka's camelCase names (``brokerId``, ``newIsrWithEpochs``);
  the snake_case spellings are not accepted.
* Integers are strict and range-checked with their Kafka type: a JSON number
  with a fraction, a boolean or a string (``"5"``) is not an ``int32``, and an
  ``int32`` outside ``[-2^31, 2^31-1]`` is refused. Booleans and strings are
  strict too.
* UUIDs are accepted in Kafka's 22-character base64url form or the standard
  36-character form and normalised to base64url (``metadata_records.uuids``);
  every UUID we send back is base64url.
* **Unknown fields are ignored**, as Kafka's own JSON converters do, so a newer
  client's extra fields do not break an older server. Two exceptions make
  silent ignoring dangerous, so they are refused: a field that belongs to
  another *version* of AlterPartition (``newIsr`` in version 3, ``topicName`` in
  version 2, ...), and ``validateOnly: true`` in CreateTopics (metaquorum cannot
  validate without creating).

Every request model has ``to_message()`` building the controller's request
(``controller.messages``), and every response model has ``from_message()``; the
HTTP layer holds no rule of its own.

These models are the plain version and the contract (OpenAPI). Their fast twin
for the three broker endpoints is ``models_fast.py``: a quick AlterPartition
parser and dicts built directly for the heartbeat, registration and
AlterPartition answers, switched by ``models_fast.QUICK`` and checked against
these models by ``tests/test_api_models_fast.py``.
"""

from __future__ import annotations

from typing import Annotated, Any

import jiter
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from controller import messages as m
from metadata_records import limits
from metadata_records.errors import Errors
from metadata_records.records import Endpoint, FeatureRange
from metadata_records.uuids import InvalidUuid, parse_uuid

# ---------------------------------------------------------------- JSON


def duplicate_key_problem(body: bytes) -> str | None:
    """What is wrong if ``body`` repeats a key in one object (or is not JSON),
    else None. Duplicates are refused, not resolved "last wins": a client that
    sends two values for one field meant one of them, and which one is not ours
    to guess. jiter finds them at about orjson's parsing speed (decisions.md)."""
    try:
        jiter.from_json(body, catch_duplicate_keys=True, cache_mode="keys")
    except ValueError as e:
        text = str(e)
        if text.startswith("Detected duplicate key"):
            return f"body: {text}; send each field once"
    return None  # not JSON: pydantic names the problem


# ---------------------------------------------------------------- Kafka's scalar types

INT_KINDS: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
}


def _kafka_int(kind: str) -> Any:
    low, high = INT_KINDS[kind]
    return Annotated[int, Field(strict=True, ge=low, le=high, json_schema_extra={"format": kind})]


Int8 = _kafka_int("int8")
Int16 = _kafka_int("int16")
Int32 = _kafka_int("int32")
Int64 = _kafka_int("int64")
UInt16 = _kafka_int("uint16")
StrictStr = Annotated[str, Field(strict=True)]
StrictBool = Annotated[bool, Field(strict=True)]


def _bounded_str(max_length: int) -> Any:
    return Annotated[str, Field(strict=True, max_length=max_length)]


def _bounded_list(item: Any, max_length: int) -> Any:
    return Annotated[list[item], Field(max_length=max_length)]


Name = _bounded_str(limits.MAX_NAME_LENGTH)


def _broker_id(value: int) -> int:
    # Kafka refuses a negative node id (broker.id >= 0); int32 is checked first.
    if value < limits.BROKER_ID_MIN:
        raise PydanticCustomError(
            "broker_id",
            "{value} is not a broker id: broker ids are in [{low}, {high}]",
            {"value": value, "low": limits.BROKER_ID_MIN, "high": limits.BROKER_ID_MAX},
        )
    return value


BrokerId = Annotated[
    int,
    Field(strict=True, ge=-(2**31), le=2**31 - 1, json_schema_extra={"format": "int32"}),
    AfterValidator(_broker_id),
]


def _uuid(value: str) -> str:
    try:
        return parse_uuid(value)
    except InvalidUuid as e:
        raise PydanticCustomError("uuid", "{reason}", {"reason": str(e)}) from None


Uuid = Annotated[
    str,
    Field(
        strict=True,
        json_schema_extra={
            "format": "kafka-uuid",
            # The shape only (the value is checked by parse_uuid): lets schema-driven
            # clients and fuzzers produce acceptable ids.
            "pattern": "^([A-Za-z0-9_-]{21}[AQgw]|[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})$",
            "description": "Kafka UUID: 22 characters of base64url (the standard "
            "36-character form is accepted on input)",
            "examples": ["fPZv1VBsRFmnlRvmGcOW9w"],
        },
    ),
    AfterValidator(_uuid),
]


class RequestModel(BaseModel):
    """Input: camelCase names only, unknown fields ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        extra="ignore",
        frozen=True,
    )


class ResponseModel(BaseModel):
    """Output: built from controller responses, serialised with camelCase names."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
    )

    def to_json_obj(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class ErrorFields(ResponseModel):
    error_code: int = Field(description="Kafka's error code (0 = NONE)")
    error_name: str = Field(description='Kafka\'s error name, e.g. "NONE", "STALE_BROKER_EPOCH"')
    error_message: str | None = Field(None, description="what went wrong, for people")


def error_fields(error: Errors, message: str | None = None) -> dict[str, Any]:
    return {"error_code": int(error), "error_name": error.name, "error_message": message}


class ErrorResponse(ErrorFields):
    """The body of every non-200 answer (400, 401, 403, 404, 413, ...)."""


class RetryResponse(ErrorFields):
    """429 and 503: nothing was decided, or the outcome is unknown; retry later."""

    retry_after_ms: int = Field(
        description="when to retry, in milliseconds (the Retry-After header says the same "
        "in whole seconds, rounded up, as HTTP has it)",
    )


class NotControllerResponse(ErrorFields):
    """307: this node is not the active controller; repeat the request at ``leaderUrl``."""

    leader_id: int | None = Field(None, description="the active controller's node id")
    leader_url: str | None = Field(None, description="the active controller's HTTP URL")


class OffsetTooOldResponse(ErrorFields):
    """410: ``fromOffset`` is below the oldest retained record; load /v1/snapshot first."""

    oldest_offset: int = Field(description="the oldest offset this node still serves")


# ---------------------------------------------------------------- BrokerRegistration


class Listener(RequestModel):
    name: Name
    host: _bounded_str(limits.MAX_HOST_LENGTH)
    port: UInt16
    security_protocol: Int16 = Field(
        description="Kafka's SecurityProtocol id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, "
        "3 SASL_SSL; the controller answers INVALID_REQUEST for any other value, and for "
        "two listeners with one name"
    )


class BrokerFeature(RequestModel):
    name: Name
    min_supported_version: Int16
    max_supported_version: Int16


class BrokerRegistrationRequest(RequestModel):
    """POST /v1/brokers/register (Kafka's BrokerRegistrationRequest, api key 62)."""

    broker_id: BrokerId
    cluster_id: _bounded_str(limits.MAX_CLUSTER_ID_LENGTH)
    incarnation_id: Uuid
    listeners: _bounded_list(Listener, limits.MAX_LISTENERS) = []
    features: _bounded_list(BrokerFeature, limits.MAX_FEATURES) = []
    rack: _bounded_str(limits.MAX_RACK_LENGTH) | None = None
    is_migrating_zk_broker: StrictBool = Field(
        False, description="Kafka's field; ZooKeeper brokers are refused"
    )
    previous_broker_epoch: Int64 = -1

    def to_message(self) -> m.BrokerRegistrationRequest:
        return m.BrokerRegistrationRequest(
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=tuple(
                Endpoint(x.name, x.host, x.port, x.security_protocol) for x in self.listeners
            ),
            features=tuple(
                FeatureRange(f.name, f.min_supported_version, f.max_supported_version)
                for f in self.features
            ),
            rack=self.rack,
            is_migrating_zk_broker=self.is_migrating_zk_broker,
            previous_broker_epoch=self.previous_broker_epoch,
        )


class BrokerRegistrationResponse(ErrorFields):
    throttle_time_ms: int = 0
    broker_epoch: int = Field(-1, description="the broker's epoch; -1 on error")

    @classmethod
    def from_message(cls, r: m.BrokerRegistrationResponse) -> BrokerRegistrationResponse:
        return cls(**error_fields(r.error, r.error_message), broker_epoch=r.broker_epoch)


# ---------------------------------------------------------------- BrokerHeartbeat


class BrokerHeartbeatRequest(RequestModel):
    """POST /v1/brokers/heartbeat (Kafka's BrokerHeartbeatRequest, api key 63)."""

    broker_id: BrokerId
    broker_epoch: Int64 = -1
    current_metadata_offset: Int64
    want_fence: StrictBool = False
    want_shut_down: StrictBool = False

    def to_message(self) -> m.BrokerHeartbeatRequest:
        return m.BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self.current_metadata_offset,
            want_fence=self.want_fence,
            want_shut_down=self.want_shut_down,
        )


class BrokerHeartbeatResponse(ErrorFields):
    throttle_time_ms: int = 0
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False

    @classmethod
    def from_message(cls, r: m.BrokerHeartbeatResponse) -> BrokerHeartbeatResponse:
        return cls(
            **error_fields(r.error, r.error_message),
            is_caught_up=r.is_caught_up,
            is_fenced=r.is_fenced,
            should_shut_down=r.should_shut_down,
        )


# ---------------------------------------------------------------- AlterPartition

ALTER_PARTITION_VERSIONS = range(0, 4)


class VersionMismatch(ValueError):
    """A body that does not fit its AlterPartition version; names the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class BrokerState(RequestModel):
    """One member of ``newIsrWithEpochs`` (KIP-903); ``brokerEpoch`` -1 skips the check."""

    broker_id: Int32
    broker_epoch: Int64 = -1


class AlterPartitionPartitionData(RequestModel):
    partition_index: Int32
    leader_epoch: Int32
    new_isr: _bounded_list(Int32, limits.MAX_REPLICAS) | None = Field(
        None, description="versions 0-2 only"
    )
    new_isr_with_epochs: _bounded_list(BrokerState, limits.MAX_REPLICAS) | None = Field(
        None, description="version 3 only"
    )
    leader_recovery_state: Int8 | None = Field(
        None, description="versions 1+ (default 0 = RECOVERED, 1 = RECOVERING)"
    )
    partition_epoch: Int32


class AlterPartitionTopicData(RequestModel):
    topic_name: StrictStr | None = Field(None, description="versions 0-1 only")
    topic_id: Uuid | None = Field(None, description="versions 2+ only")
    partitions: _bounded_list(AlterPartitionPartitionData, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY)


class AlterPartitionRequest(RequestModel):
    """POST /v1/alter-partition?version=N (Kafka's AlterPartitionRequest, api key 56, v0-3).

    ``topicName`` (v0-1) or ``topicId`` (v2+); ``newIsr`` (v0-2) or
    ``newIsrWithEpochs`` (v3); ``leaderRecoveryState`` from v1. A field of
    another version, or a missing field of this one, is a 400 naming it."""

    broker_id: BrokerId
    broker_epoch: Int64 = -1
    topics: _bounded_list(AlterPartitionTopicData, limits.MAX_TOPICS_PER_REQUEST)

    def to_message(self, version: int) -> m.AlterPartitionRequest:
        """The controller's request for ``version``; VersionMismatch if it does not fit."""
        topics = []
        for ti, t in enumerate(self.topics):
            if (t.topic_name is None) == (version <= 1) or (t.topic_id is None) == (version >= 2):
                _check_topic_version(version, f"topics[{ti}]", t)
            partitions = []
            for pi, p in enumerate(t.partitions):
                if version >= 3:
                    fits = p.new_isr is None and p.new_isr_with_epochs is not None
                else:
                    fits = p.new_isr_with_epochs is None and p.new_isr is not None
                if not fits or (version == 0 and p.leader_recovery_state is not None):
                    _check_partition_version(version, f"topics[{ti}].partitions[{pi}]", p)
                states = p.new_isr_with_epochs
                partitions.append(
                    m.AlterPartitionPartition(
                        p.partition_index,
                        p.leader_epoch,
                        p.partition_epoch,
                        () if p.new_isr is None else tuple(p.new_isr),
                        ()
                        if states is None
                        else tuple([m.BrokerState(x.broker_id, x.broker_epoch) for x in states]),
                        p.leader_recovery_state or 0,
                    )
                )
            topics.append(
                m.AlterPartitionTopic(
                    partitions=tuple(partitions),
                    topic_name=t.topic_name if version <= 1 else None,
                    topic_id=t.topic_id if version >= 2 else None,
                )
            )
        return m.AlterPartitionRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            topics=tuple(topics),
            version=version,
        )


# The field checks of AlterPartition versions; the places are only spelled out
# for an entry that does not fit (to_message runs them for those alone).


def _refuse(version: int, field: str, value: Any, versions: str) -> None:
    if value is not None:
        raise VersionMismatch(
            field, f"not in AlterPartition version {version} (only in versions {versions})"
        )


def _require(version: int, field: str, value: Any) -> None:
    if value is None:
        raise VersionMismatch(field, f"required in AlterPartition version {version}")


def _check_topic_version(version: int, where: str, t: AlterPartitionTopicData) -> None:
    if version >= 2:
        _refuse(version, f"{where}.topicName", t.topic_name, "0-1")
        _require(version, f"{where}.topicId", t.topic_id)
    else:
        _refuse(version, f"{where}.topicId", t.topic_id, "2-3")
        _require(version, f"{where}.topicName", t.topic_name)


def _check_partition_version(version: int, where: str, p: AlterPartitionPartitionData) -> None:
    if version >= 3:
        _refuse(version, f"{where}.newIsr", p.new_isr, "0-2")
        _require(version, f"{where}.newIsrWithEpochs", p.new_isr_with_epochs)
    else:
        _refuse(version, f"{where}.newIsrWithEpochs", p.new_isr_with_epochs, "3")
        _require(version, f"{where}.newIsr", p.new_isr)
    if version == 0:
        _refuse(version, f"{where}.leaderRecoveryState", p.leader_recovery_state, "1-3")


class AlterPartitionPartitionResult(ErrorFields):
    partition_index: int
    leader_id: int = 0
    leader_epoch: int = 0
    isr: list[int] = []
    leader_recovery_state: int = 0
    partition_epoch: int = 0


class AlterPartitionTopicResult(ResponseModel):
    topic_name: str | None = Field(None, description="echoed in versions 0-1")
    topic_id: str | None = Field(None, description="echoed in versions 2+")
    partitions: list[AlterPartitionPartitionResult]


class AlterPartitionResponse(ErrorFields):
    throttle_time_ms: int = 0
    topics: list[AlterPartitionTopicResult] = []

    @classmethod
    def from_message(cls, r: m.AlterPartitionResponse) -> AlterPartitionResponse:
        return cls(
            **error_fields(r.error, r.error_message),
            topics=[
                AlterPartitionTopicResult(
                    topic_name=t.topic_name,
                    topic_id=t.topic_id,
                    partitions=[
                        AlterPartitionPartitionResult(
                            **error_fields(p.error, p.error_message),
                            partition_index=p.partition_index,
                            leader_id=p.leader_id,
                            leader_epoch=p.leader_epoch,
                            isr=list(p.isr),
                            leader_recovery_state=p.leader_recovery_state,
                            partition_epoch=p.partition_epoch,
                        )
                        for p in t.partitions
                    ],
                )
                for t in r.topics
            ],
        )

    def to_json_obj(self) -> dict[str, Any]:
        obj = self.model_dump(mode="json", by_alias=True)
        for topic in obj["topics"]:
            # A topic is echoed by name (v0-1) or by id (v2+), never both.
            if topic["topicId"] is None:
                del topic["topicId"]
            else:
                del topic["topicName"]
        return obj


# ---------------------------------------------------------------- CreateTopics


Replicas = _bounded_list(Int32, limits.MAX_REPLICAS)


class CreatableReplicaAssignment(RequestModel):
    partition_index: Int32
    broker_ids: Replicas


class CreatableTopicConfig(RequestModel):
    name: Name
    value: _bounded_str(limits.MAX_CONFIG_VALUE_LENGTH) | None


class CreatableTopic(RequestModel):
    name: StrictStr
    num_partitions: Int32 = Field(-1, description="-1 = the default (1)")
    replication_factor: Int16 = Field(-1, description="-1 = the default: min(3, brokers)")
    assignments: _bounded_list(
        CreatableReplicaAssignment, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY
    ) = []
    configs: _bounded_list(CreatableTopicConfig, limits.MAX_TOPIC_CONFIGS) = Field(
        [],
        description="only unclean.leader.election.enable and min.insync.replicas are understood",
    )


class CreateTopicsRequest(RequestModel):
    """POST /v1/topics (Kafka's CreateTopicsRequest)."""

    topics: _bounded_list(CreatableTopic, limits.MAX_TOPICS_PER_REQUEST)
    validate_only: StrictBool = Field(False, description="must be false: not supported")

    def to_message(self) -> m.CreateTopicsRequest:
        return m.CreateTopicsRequest(
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
            )
        )


class CreatableTopicResult(ErrorFields):
    name: str
    topic_id: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


class CreateTopicsResponse(ErrorFields):
    throttle_time_ms: int = 0
    topics: list[CreatableTopicResult]

    @classmethod
    def from_message(cls, r: m.CreateTopicsResponse) -> CreateTopicsResponse:
        return cls(
            **error_fields(r.error, r.error_message),
            topics=[
                CreatableTopicResult(
                    **error_fields(t.error, t.error_message),
                    name=t.name,
                    topic_id=t.topic_id,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                )
                for t in r.topics
            ],
        )


# ---------------------------------------------------------------- DeleteTopics


class DeletableTopicResult(ErrorFields):
    name: str
    topic_id: str | None = None


class DeleteTopicsResponse(ErrorFields):
    """DELETE /v1/topics/{name}. The top-level error repeats the topic's, since
    the request names exactly one topic."""

    throttle_time_ms: int = 0
    responses: list[DeletableTopicResult]

    @classmethod
    def from_message(cls, r: m.DeleteTopicsResponse) -> DeleteTopicsResponse:
        results = [
            DeletableTopicResult(
                **error_fields(t.error, t.error_message), name=t.name, topic_id=t.topic_id
            )
            for t in r.topics
        ]
        top = error_fields(r.error, r.error_message)
        if r.error is Errors.NONE and len(r.topics) == 1 and r.topics[0].error is not Errors.NONE:
            top = error_fields(r.topics[0].error, r.topics[0].error_message)
        return cls(**top, responses=results)


def delete_topics_message(name: str) -> m.DeleteTopicsRequest:
    return m.DeleteTopicsRequest(names=(name,))


# ---------------------------------------------------------------- CreatePartitions


class CreatePartitionsAssignment(RequestModel):
    broker_ids: Replicas


class CreatePartitionsRequest(RequestModel):
    """POST /v1/topics/{name}/partitions (Kafka's CreatePartitionsRequest for one topic).

    ``assignments``: one entry per new partition, Kafka's ``{"brokerIds": [...]}``
    (a bare list of broker ids is accepted too)."""

    count: Int32
    assignments: (
        _bounded_list(CreatePartitionsAssignment, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY) | None
    ) = None
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


class CreatePartitionsTopicResult(ErrorFields):
    name: str


class CreatePartitionsResponse(ErrorFields):
    throttle_time_ms: int = 0
    results: list[CreatePartitionsTopicResult]

    @classmethod
    def from_message(cls, r: m.CreatePartitionsResponse) -> CreatePartitionsResponse:
        fields = error_fields(r.error, r.error_message)
        return cls(**fields, results=[CreatePartitionsTopicResult(**fields, name=r.name)])


# ---------------------------------------------------------------- AlterPartitionReassignments


class ReassignablePartition(RequestModel):
    partition_index: Int32
    replicas: Replicas | None = Field(
        description="the target replicas, or null to cancel an ongoing reassignment"
    )


class ReassignableTopic(RequestModel):
    name: StrictStr
    partitions: _bounded_list(ReassignablePartition, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY)


class AlterPartitionReassignmentsRequest(RequestModel):
    """POST /v1/reassignments (Kafka's AlterPartitionReassignmentsRequest)."""

    topics: _bounded_list(ReassignableTopic, limits.MAX_TOPICS_PER_REQUEST)

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


class ReassignablePartitionResponse(ErrorFields):
    partition_index: int


class ReassignableTopicResponse(ResponseModel):
    name: str
    partitions: list[ReassignablePartitionResponse]


class AlterPartitionReassignmentsResponse(ErrorFields):
    throttle_time_ms: int = 0
    responses: list[ReassignableTopicResponse]

    @classmethod
    def from_message(
        cls, r: m.AlterPartitionReassignmentsResponse
    ) -> AlterPartitionReassignmentsResponse:
        return cls(
            **error_fields(r.error, r.error_message),
            responses=[
                ReassignableTopicResponse(
                    name=t.name,
                    partitions=[
                        ReassignablePartitionResponse(
                            **error_fields(p.error, p.error_message),
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
    topic: StrictStr
    partitions: _bounded_list(Int32, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY)


class ElectLeadersRequest(RequestModel):
    """POST /v1/elect-leaders (Kafka's ElectLeadersRequest).

    ``topicPartitions`` null or absent: every partition (as Kafka's null)."""

    election_type: Int8 = Field(0, description="0 = preferred, 1 = unclean")
    topic_partitions: _bounded_list(TopicPartitions, limits.MAX_TOPICS_PER_REQUEST) | None = None

    def to_message(self) -> m.ElectLeadersRequest:
        return m.ElectLeadersRequest(
            election_type=self.election_type,
            topic_partitions=None
            if self.topic_partitions is None
            else tuple((t.topic, tuple(t.partitions)) for t in self.topic_partitions),
        )


class PartitionResult(ErrorFields):
    partition_id: int


class ReplicaElectionResult(ResponseModel):
    topic: str
    partition_result: list[PartitionResult]


class ElectLeadersResponse(ErrorFields):
    throttle_time_ms: int = 0
    replica_election_results: list[ReplicaElectionResult]

    @classmethod
    def from_message(cls, r: m.ElectLeadersResponse) -> ElectLeadersResponse:
        return cls(
            **error_fields(r.error, r.error_message),
            replica_election_results=[
                ReplicaElectionResult(
                    topic=t.name,
                    partition_result=[
                        PartitionResult(
                            **error_fields(p.error, p.error_message),
                            partition_id=p.partition_index,
                        )
                        for p in t.partitions
                    ],
                )
                for t in r.topics
            ],
        )


# ---------------------------------------------------------------- UpdateFeatures


class UpdateFeaturesRequest(RequestModel):
    """POST /v1/features: finalize ``name`` at ``level`` (Kafka's UpdateFeatures
    for one feature: ``upgradeType`` and ``validateOnly`` as in its v1+)."""

    name: StrictStr = Field(examples=["metadata.version"])
    level: Int16 = Field(
        description="Kafka's feature level (metadata.version: 6 = 3.3-IV2 ... 12 = 3.6-IV0); "
        "0 asks to remove the feature"
    )
    upgrade_type: Int8 = Field(
        m.UPGRADE,
        description="1 upgrade (a lower level is refused), 2 safe downgrade, 3 unsafe "
        "downgrade; any other value is refused (INVALID_UPDATE_VERSION)",
    )
    validate_only: StrictBool = Field(
        False, description="true: run every check, answer, write nothing"
    )

    def to_message(self) -> m.UpdateFeaturesRequest:
        return m.UpdateFeaturesRequest(
            name=self.name,
            level=self.level,
            upgrade_type=self.upgrade_type,
            validate_only=self.validate_only,
        )


class UpdateFeaturesResponse(ErrorFields):
    throttle_time_ms: int = 0

    @classmethod
    def from_message(cls, r: m.UpdateFeaturesResponse) -> UpdateFeaturesResponse:
        return cls(**error_fields(r.error, r.error_message))


# ---------------------------------------------------------------- leadership transfer


class TransferLeadershipRequest(RequestModel):
    """POST /v1/quorum/transfer-leadership; an empty body means "any caught-up voter"."""

    target_node_id: BrokerId | None = None


class TransferLeadershipResponse(ErrorFields):
    leader_id: int | None = Field(None, description="the new leader")


# ---------------------------------------------------------------- voter changes (KIP-853)


class AddVoterRequest(RequestModel):
    """POST /v1/quorum/add-voter (Kafka's AddRaftVoter): the node must be running,
    started with ``--raft-address`` = ``address``; its directory id comes from it."""

    node_id: Int32 = Field(description="0 or more")
    address: StrictStr = Field(description='its Raft "host:port", as every voter will spell it')
    timeout_ms: int = Field(
        30_000, ge=1, le=600_000, description="how long it may take to connect and catch up"
    )


class RemoveVoterRequest(RequestModel):
    """POST /v1/quorum/remove-voter (Kafka's RemoveRaftVoter)."""

    node_id: Int32 = Field(description="0 or more")


class VoterKeyOut(ResponseModel):
    node_id: int
    directory_id: str
    raft_address: str


class VoterChangeResponse(ErrorFields):
    changed: bool = Field(
        description="false: nothing was left to do (a retried add that had finished)"
    )
    voters: list[VoterKeyOut] = Field(description="the voter set after the change")


# ---------------------------------------------------------------- reads


class EndpointOut(ResponseModel):
    name: str
    host: str
    port: int
    security_protocol: int


class FeatureRangeOut(ResponseModel):
    name: str
    min_supported_version: int
    max_supported_version: int


class BrokerOut(ResponseModel):
    broker_id: int
    broker_epoch: int
    incarnation_id: str
    fenced: bool
    in_controlled_shutdown: bool
    rack: str | None
    listeners: list[EndpointOut]
    features: list[FeatureRangeOut]
    registration_offset: int = Field(description="offset of its latest RegisterBrokerRecord")


class BrokersOut(ResponseModel):
    brokers: list[BrokerOut]


class TopicConfigOut(ResponseModel):
    name: str
    value: str


class PartitionOut(ResponseModel):
    partition_index: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: int
    adding_replicas: list[int]
    removing_replicas: list[int]


class TopicOut(ResponseModel):
    name: str
    topic_id: str
    configs: list[TopicConfigOut]
    partitions: list[PartitionOut]


class TopicsOut(ResponseModel):
    topics: list[TopicOut]


class RecordOut(ResponseModel):
    """A record as the log, export and snapshot show it (API.md "A record")."""

    offset: int
    type: str = Field(examples=["REGISTER_BROKER_RECORD"])
    version: int
    timestamp_ms: int
    controller_epoch: int
    batch_offset: int = Field(
        description="the offset of the first record of the batch it was committed in"
    )
    data: dict[str, Any]


class LogOut(ResponseModel):
    records: list[RecordOut]
    next_offset: int = Field(description="the offset to ask for next")
    high_watermark: int = Field(description="this node's log end (the next offset it will apply)")
    oldest_offset: int = Field(description="the oldest offset this node still serves")


class SnapshotOut(ResponseModel):
    """The image as records that recreate it. Every record carries ``offset`` =
    the image's last offset; follow the log from ``nextOffset``."""

    offset: int
    next_offset: int
    records: list[RecordOut]


class VoterOut(ResponseModel):
    node_id: int
    url: str | None = Field(description="its HTTP URL, when this node knows it")
    raft_address: str
    connected: bool
    lag_records: int | None = Field(
        description="Raft entries (batches) it is behind the leader's commit index; "
        "known on the leader (and for this node itself)"
    )
    last_caught_up_ms: int | None = Field(
        description="wall clock (ms) when this node last saw it fully caught up"
    )
    log_end_offset: int | None = Field(
        None,
        description="the record offset after the last entry the leader knows it holds "
        "(Kafka's LogEndOffset); known on the leader (and for this node itself)",
    )
    last_fetch_ms: int | None = Field(
        None,
        description="wall clock (ms) when the leader last heard it answer (Kafka's "
        "LastFetchTimestamp); known on the leader, null for a voter not heard since the election",
    )
    directory_id: str | None = Field(
        None,
        description="the directory id the voter set names for it (KIP-853); null before it is known",
    )
    connected_directory_id: str | None = Field(
        None, description="the directory id of the data dir now connected as this node"
    )
    role: str = Field(
        "unknown",
        examples=["voter", "observer", "replaced", "removed", "unknown"],
        description="voter: counts toward elections and commits; observer: a new data dir "
        "catching up (a joiner, or a voter whose disk was replaced), not yet named by the "
        "voter set; replaced: a data dir the voter set no longer names; removed: a node the "
        "voter set no longer names; unknown: not heard from",
    )
    voter: bool = Field(True, description="named by the voter set (false: an observer/joiner)")


class HeartbeatGapsOut(ResponseModel):
    count: int = Field(description="gaps measured since this node started")
    p50_ms: float | None = Field(None, description="upper bound of the median's bucket")
    p99_ms: float | None = Field(None, description="upper bound of the 99th percentile's bucket")
    max_ms: float | None = Field(None, description="the longest gap")


class ElectionsOut(ResponseModel):
    pre_vote: bool = Field(description="pre-vote and the leader lease on votes are on")
    pre_vote_rounds: int | None = Field(None, description="pre-vote rounds this voter started")
    pre_vote_rounds_won: int | None = Field(
        None, description="rounds a majority granted: this voter then stood for election"
    )
    pre_votes_granted: int | None = Field(None, description="pre-votes it granted to others")
    pre_votes_refused: int | None = Field(None, description="pre-votes it refused")
    votes_refused_in_lease: int | None = Field(
        None, description="vote requests it dropped while it heard a leader"
    )
    leader_connections_lost: int | None = Field(
        None,
        description="times the leader's connection closed under it (it then asked for a "
        "pre-vote within 0.3 s instead of at its election deadline)",
    )
    elections_started: dict[str, int] | None = Field(
        None,
        description="elections this voter started, by cause: no_leader_yet, leader_silent, "
        "leader_connection_closed, transfer",
    )
    leadership_lost: dict[str, int] | None = Field(
        None,
        description="leaderships this voter lost, by cause: check_quorum, term_ahead, "
        "transfer, disk_unwritable, higher_term",
    )
    leader_changes: int | None = Field(
        None, description="times the leader this node follows became another node"
    )
    heartbeat_gaps: HeartbeatGapsOut | None = Field(
        None, description="gaps between two AppendEntries from the same leader, as read here"
    )


class QuorumStatusOut(ResponseModel):
    cluster_id: str
    node_id: int
    directory_id: str | None = Field(None, description="this node's data dir (KIP-853)")
    role: str = Field("voter", description="this node's role, as in voters[].role")
    leader_id: int | None
    leader_url: str | None
    controller_epoch: int
    raft_term: int
    high_watermark: int
    last_applied_offset: int
    metadata_version: int
    auth: str = Field(examples=["on", "off"])
    active: bool = Field(description="this node is the active controller")
    ready: bool
    replaying: bool
    queue_depth: int
    raft_commit_index: int
    raft_last_applied: int
    observer: bool = Field(False, description="this node runs with serve --observer")
    observers_connected: int = Field(
        0, description="read-only followers (serve --observer) connected to this node"
    )
    image_digest: str | None = Field(
        None,
        description="SHA-256 of the image at lastAppliedOffset, with ?digest=true: "
        "voters at the same offset hold the same image exactly when these match",
    )
    elections: ElectionsOut | None = Field(
        None, description="this voter's pre-vote counters since it started (quorum/pre_vote.py)"
    )
    voters: list[VoterOut]


class HealthOut(ResponseModel):
    status: str
    reason: str | None = None
