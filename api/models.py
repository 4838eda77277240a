"""Request and response bodies of the HTTP contract (docs/api.md), as pydantic models.

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
  version 2, ...), and ``validateOnly: true`` in CreatePartitions (metaquorum
  cannot validate there without creating).

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
from metadata_records.acls import (
    ACL_ENUMS,
    AclBindingFilter,
    StandardAcl,
    acl_obj,
    parse_enum,
)
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


def example(*values: dict[str, Any]) -> ConfigDict:
    """A model's examples for the OpenAPI document, as they travel (camelCase).
    Nested models without examples of their own get theirs from these
    (``api/openapi_doc.py``), so one realistic cluster runs through them all:
    cluster ``MkU3OEVBNTcwNTJENDM2Qk``, brokers 1 and 2 registered at offsets 17
    and 21 (their epochs), topic ``orders`` replicated on brokers 1-3."""
    return ConfigDict(json_schema_extra={"examples": list(values)})


CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"
ORDERS_ID = "Y2deagDaQ4yIul6RjJr5IA"
NONE = {"errorCode": 0, "errorName": "NONE", "errorMessage": None}
# Broker 1's listener and features, as its registration example sends them.
LISTENER_EXAMPLE = {
    "name": "PLAINTEXT",
    "host": "broker-1.kafka",
    "port": 9092,
    "securityProtocol": 0,
}
FEATURES_EXAMPLE = {"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}

ThrottleTimeMs = Annotated[
    int,
    Field(description="Kafka's throttle time: always 0 here (an overloaded node answers 429)"),
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
        # Every field is in every answer: required in the document, so that
        # generated clients type them as present (decisions.md 84).
        json_schema_serialization_defaults_required=True,
    )

    def to_json_obj(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class ErrorFields(ResponseModel):
    error_code: int = Field(description="Kafka's error code (0 = NONE)")
    error_name: str = Field(description='Kafka\'s error name, e.g. "NONE", "STALE_BROKER_EPOCH"')
    error_message: str | None = Field(None, description="what went wrong, for people")


def error_fields(error: Errors, message: str | None = None) -> dict[str, Any]:
    return {"error_code": int(error), "error_name": error.name, "error_message": message}


def _error_obj(error: Errors, message: str | None = None) -> dict[str, Any]:
    """``error_fields`` as an answer's JSON shows them."""
    return {"errorCode": int(error), "errorName": error.name, "errorMessage": message}


class ErrorResponse(ErrorFields):
    """The body of every non-200 answer (400, 401, 403, 404, 413, ...)."""

    model_config = example(
        {
            "errorCode": 42,
            "errorName": "INVALID_REQUEST",
            "errorMessage": 'brokerEpoch: expected an integer, got string "17"',
        }
    )


class RetryResponse(ErrorFields):
    """429 and 503: nothing was decided, or the outcome is unknown; retry later."""

    model_config = example(
        {
            "errorCode": 41,
            "errorName": "NOT_CONTROLLER",
            "errorMessage": "no active controller is known yet (an election is under way)",
            "retryAfterMs": 250,
        }
    )

    retry_after_ms: int = Field(
        description="when to retry, in milliseconds (the Retry-After header says the same "
        "in whole seconds, rounded up, as HTTP has it)",
    )


class NotControllerResponse(ErrorFields):
    """307: this node is not the active controller; repeat the request at ``leaderUrl``."""

    model_config = example(
        {
            "errorCode": 41,
            "errorName": "NOT_CONTROLLER",
            "errorMessage": "node 0 is not the active controller; node 1 is",
            "leaderId": 1,
            "leaderUrl": "http://metaquorum-1.metaquorum:8080",
        }
    )

    leader_id: int | None = Field(None, description="the active controller's node id")
    leader_url: str | None = Field(None, description="the active controller's HTTP URL")


class OffsetTooOldResponse(ErrorFields):
    """410: ``fromOffset`` is below the oldest retained record; load /v1/snapshot first."""

    model_config = example(
        {
            "errorCode": 1,
            "errorName": "OFFSET_OUT_OF_RANGE",
            "errorMessage": "offset 12 is older than the oldest retained offset 50000; load "
            "/v1/snapshot, then follow the log from its nextOffset",
            "oldestOffset": 50000,
        }
    )

    oldest_offset: int = Field(description="the oldest offset this node still serves")


# ---------------------------------------------------------------- BrokerRegistration


class Listener(RequestModel):
    """One of the broker's endpoints, as clients reach it."""

    name: Name = Field(description="the listener's name, unique per broker")
    host: _bounded_str(limits.MAX_HOST_LENGTH) = Field(description="the advertised host")
    port: UInt16 = Field(description="the advertised port")
    security_protocol: Int16 = Field(
        description="Kafka's SecurityProtocol id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, "
        "3 SASL_SSL; the controller answers INVALID_REQUEST for any other value, and for "
        "two listeners with one name"
    )


class BrokerFeature(RequestModel):
    """A feature level range the broker supports; each finalized feature's level
    must fall in it (else the registration answers UNSUPPORTED_VERSION)."""

    name: Name = Field(description='the feature, e.g. "metadata.version"')
    min_supported_version: Int16 = Field(description="the lowest level it supports")
    max_supported_version: Int16 = Field(description="the highest level it supports")


class BrokerRegistrationRequest(RequestModel):
    """POST /v1/brokers/register (Kafka's BrokerRegistrationRequest, api key 62)."""

    model_config = example(
        {
            "brokerId": 1,
            "clusterId": CLUSTER_ID,
            "incarnationId": "zBTExEswSU63HSkHIAXA_A",
            "listeners": [LISTENER_EXAMPLE],
            "features": [FEATURES_EXAMPLE],
            "rack": "eu-west-1a",
            "previousBrokerEpoch": -1,
        }
    )

    broker_id: BrokerId = Field(description="the broker's id (node.id), 0 or more")
    cluster_id: _bounded_str(limits.MAX_CLUSTER_ID_LENGTH) = Field(
        description="the cluster id the broker was formatted with; another is refused "
        "(INCONSISTENT_CLUSTER_ID)"
    )
    incarnation_id: Uuid = Field(
        description="a new UUID each time the broker process starts: a new incarnation gets "
        "a new epoch, a retry of the same one keeps its epoch"
    )
    listeners: _bounded_list(Listener, limits.MAX_LISTENERS) = Field(
        [], description="the broker's endpoints"
    )
    features: _bounded_list(BrokerFeature, limits.MAX_FEATURES) = Field(
        [], description="the feature level ranges the broker supports"
    )
    rack: _bounded_str(limits.MAX_RACK_LENGTH) | None = Field(
        None, description="the broker's rack, or null"
    )
    is_migrating_zk_broker: StrictBool = Field(
        False, description="Kafka's field; ZooKeeper brokers are refused"
    )
    previous_broker_epoch: Int64 = Field(
        -1, description="the epoch of the broker's last incarnation after a clean shutdown, or -1"
    )

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
    """The registration's outcome and the broker's epoch (the offset of its
    RegisterBrokerRecord): the broker sends it with every later request."""

    model_config = example({**NONE, "throttleTimeMs": 0, "brokerEpoch": 17})

    throttle_time_ms: ThrottleTimeMs = 0
    broker_epoch: int = Field(-1, description="the broker's epoch; -1 on error")

    @classmethod
    def from_message(cls, r: m.BrokerRegistrationResponse) -> BrokerRegistrationResponse:
        return cls(**error_fields(r.error, r.error_message), broker_epoch=r.broker_epoch)


# ---------------------------------------------------------------- BrokerHeartbeat


class BrokerHeartbeatRequest(RequestModel):
    """POST /v1/brokers/heartbeat (Kafka's BrokerHeartbeatRequest, api key 63)."""

    model_config = example(
        {
            "brokerId": 1,
            "brokerEpoch": 17,
            "currentMetadataOffset": 42,
            "wantFence": False,
            "wantShutDown": False,
        }
    )

    broker_id: BrokerId = Field(description="the broker's id")
    broker_epoch: Int64 = Field(-1, description="the epoch its registration answered")
    current_metadata_offset: Int64 = Field(
        description="the highest metadata offset the broker has applied: it is unfenced once "
        "this reaches its own registration's offset"
    )
    want_fence: StrictBool = Field(False, description="true: the broker asks to be fenced")
    want_shut_down: StrictBool = Field(
        False, description="true: the broker asks for a controlled shutdown"
    )

    def to_message(self) -> m.BrokerHeartbeatRequest:
        return m.BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self.current_metadata_offset,
            want_fence=self.want_fence,
            want_shut_down=self.want_shut_down,
        )


class BrokerHeartbeatResponse(ErrorFields):
    """The broker's state after the heartbeat (on an error: caught up false,
    fenced true, shut down false)."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "isCaughtUp": True,
            "isFenced": False,
            "shouldShutDown": False,
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    is_caught_up: bool = Field(False, description="the broker has caught up with the metadata log")
    is_fenced: bool = Field(
        True, description="the broker is fenced: it may not lead or join an ISR"
    )
    should_shut_down: bool = Field(
        False, description="the controlled shutdown is done: the broker may stop now"
    )

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

    broker_id: Int32 = Field(description="a replica of the new ISR")
    broker_epoch: Int64 = Field(
        -1, description="the epoch the leader saw it fetch with; -1 skips the check"
    )


class AlterPartitionPartitionData(RequestModel):
    """One partition's requested ISR (``newIsr`` or ``newIsrWithEpochs`` as the version has it)."""

    partition_index: Int32 = Field(description="the partition")
    leader_epoch: Int32 = Field(description="the leader epoch the leader holds")
    new_isr: _bounded_list(Int32, limits.MAX_REPLICAS) | None = Field(
        None, description="versions 0-2 only"
    )
    new_isr_with_epochs: _bounded_list(BrokerState, limits.MAX_REPLICAS) | None = Field(
        None, description="version 3 only"
    )
    leader_recovery_state: Int8 | None = Field(
        None, description="versions 1+ (default 0 = RECOVERED, 1 = RECOVERING)"
    )
    partition_epoch: Int32 = Field(
        description="the partition epoch the leader last saw; a stale one answers "
        "INVALID_UPDATE_VERSION"
    )


class AlterPartitionTopicData(RequestModel):
    """One topic's partitions, named by ``topicName`` (v0-1) or ``topicId`` (v2+)."""

    topic_name: StrictStr | None = Field(None, description="versions 0-1 only")
    topic_id: Uuid | None = Field(None, description="versions 2+ only")
    partitions: _bounded_list(
        AlterPartitionPartitionData, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY
    ) = Field(description="the partitions whose ISR the leader changes")


class AlterPartitionRequest(RequestModel):
    """POST /v1/alter-partition?version=N (Kafka's AlterPartitionRequest, api key 56, v0-3).

    ``topicName`` (v0-1) or ``topicId`` (v2+); ``newIsr`` (v0-2) or
    ``newIsrWithEpochs`` (v3); ``leaderRecoveryState`` from v1. A field of
    another version, or a missing field of this one, is a 400 naming it."""

    model_config = example(
        {
            "brokerId": 1,
            "brokerEpoch": 17,
            "topics": [
                {
                    "topicId": ORDERS_ID,
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            "leaderEpoch": 4,
                            "newIsrWithEpochs": [
                                {"brokerId": 1, "brokerEpoch": 17},
                                {"brokerId": 2, "brokerEpoch": 21},
                            ],
                            "leaderRecoveryState": 0,
                            "partitionEpoch": 7,
                        }
                    ],
                }
            ],
        }
    )

    broker_id: BrokerId = Field(description="the partitions' leader")
    broker_epoch: Int64 = Field(-1, description="the leader's broker epoch")
    topics: _bounded_list(AlterPartitionTopicData, limits.MAX_TOPICS_PER_REQUEST) = Field(
        description="the ISR changes, by topic"
    )

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
    """One partition's outcome and its state after the request (on an error,
    Kafka's zeros and an empty ISR)."""

    partition_index: int = Field(description="the partition")
    leader_id: int = Field(0, description="its leader")
    leader_epoch: int = Field(0, description="its leader epoch")
    isr: list[int] = Field([], description="its ISR")
    leader_recovery_state: int = Field(0, description="0 = RECOVERED, 1 = RECOVERING")
    partition_epoch: int = Field(0, description="its partition epoch")


class AlterPartitionTopicResult(ResponseModel):
    """One topic's outcomes: the topic is echoed as it was named, by
    ``topicName`` (v0-1) or by ``topicId`` (v2+), never both."""

    # The echo that is not used is left out of the answer.
    model_config = ConfigDict(json_schema_serialization_defaults_required=False)

    topic_name: str | None = Field(None, description="echoed in versions 0-1")
    topic_id: str | None = Field(None, description="echoed in versions 2+")
    partitions: list[AlterPartitionPartitionResult] = Field(description="by partition")


class AlterPartitionResponse(ErrorFields):
    """The request's outcome (a top-level error, such as STALE_BROKER_EPOCH,
    applies to every partition) and each partition's."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "topics": [
                {
                    "topicId": ORDERS_ID,
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            **NONE,
                            "leaderId": 1,
                            "leaderEpoch": 4,
                            "isr": [1, 2],
                            "leaderRecoveryState": 0,
                            "partitionEpoch": 8,
                        }
                    ],
                }
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    topics: list[AlterPartitionTopicResult] = Field([], description="by topic")

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
    """A partition's replicas, chosen by the caller (the first is the preferred leader)."""

    partition_index: Int32 = Field(description="the partition")
    broker_ids: Replicas = Field(description="its replicas, preferred leader first")


class CreatableTopicConfig(RequestModel):
    """A topic config to set at creation."""

    name: Name = Field(description='the config, e.g. "min.insync.replicas"')
    value: _bounded_str(limits.MAX_CONFIG_VALUE_LENGTH) | None = Field(
        description="its value, or null for the default"
    )


class CreatableTopic(RequestModel):
    """One topic to create: a partition count and replication factor, or explicit assignments."""

    name: StrictStr = Field(description="the topic's name (Kafka's legal names)")
    num_partitions: Int32 = Field(-1, description="-1 = the default (1)")
    replication_factor: Int16 = Field(-1, description="-1 = the default: min(3, brokers)")
    assignments: _bounded_list(
        CreatableReplicaAssignment, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY
    ) = Field([], description="explicit replicas per partition (then both counts are -1)")
    configs: _bounded_list(CreatableTopicConfig, limits.MAX_TOPIC_CONFIGS) = Field(
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

    topics: _bounded_list(CreatableTopic, limits.MAX_TOPICS_PER_REQUEST) = Field(
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


class CreatableTopicResult(ErrorFields):
    """One topic's outcome (e.g. TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR)."""

    name: str = Field(description="the topic")
    topic_id: str | None = Field(None, description="its new id; null on an error")
    num_partitions: int = Field(-1, description="its partition count; -1 on an error")
    replication_factor: int = Field(-1, description="its replication factor; -1 on an error")


class CreateTopicsResponse(ErrorFields):
    """Each topic's outcome."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "topics": [
                {
                    "name": "orders",
                    "topicId": ORDERS_ID,
                    **NONE,
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
    """The topic's outcome (UNKNOWN_TOPIC_OR_PARTITION if it does not exist)."""

    name: str = Field(description="the topic")
    topic_id: str | None = Field(None, description="its id; null if it did not exist")


class DeleteTopicsResponse(ErrorFields):
    """DELETE /v1/topics/{name}. The top-level error repeats the topic's, since
    the request names exactly one topic."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "responses": [{"name": "orders", "topicId": ORDERS_ID, **NONE}],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    responses: list[DeletableTopicResult] = Field(description="the one topic's outcome")

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


# ---------------------------------------------------------------- UnregisterBroker


class UnregisterBrokerResponse(ErrorFields):
    """DELETE /v1/brokers/{id} (Kafka's UnregisterBroker): the registration is
    gone, and the broker left every ISR in the same batch; or
    BROKER_ID_NOT_REGISTERED."""

    model_config = example(
        {**NONE, "throttleTimeMs": 0},
        {
            "errorCode": 102,
            "errorName": "BROKER_ID_NOT_REGISTERED",
            "errorMessage": "Broker ID 4 is not currently registered",
            "throttleTimeMs": 0,
        },
    )

    throttle_time_ms: ThrottleTimeMs = 0

    @classmethod
    def from_message(cls, r: m.UnregisterBrokerResponse) -> UnregisterBrokerResponse:
        return cls(**error_fields(r.error, r.error_message))


def unregister_broker_message(broker_id: int) -> m.UnregisterBrokerRequest:
    return m.UnregisterBrokerRequest(broker_id=broker_id)


# ---------------------------------------------------------------- AllocateProducerIds


class AllocateProducerIdsRequest(RequestModel):
    """POST /v1/brokers/allocate-producer-ids (Kafka's AllocateProducerIdsRequest, api key 67)."""

    model_config = example({"brokerId": 1, "brokerEpoch": 17})

    broker_id: BrokerId = Field(description="the broker's id")
    broker_epoch: Int64 = Field(description="the epoch its registration answered")

    def to_message(self) -> m.AllocateProducerIdsRequest:
        return m.AllocateProducerIdsRequest(self.broker_id, self.broker_epoch)


class AllocateProducerIdsResponse(ErrorFields):
    """A block of producer ids for this broker alone: ``producerIdStart`` to
    ``producerIdStart + producerIdLen - 1``; or STALE_BROKER_EPOCH."""

    model_config = example(
        {**NONE, "throttleTimeMs": 0, "producerIdStart": 4000, "producerIdLen": 1000},
        {
            "errorCode": 77,
            "errorName": "STALE_BROKER_EPOCH",
            "errorMessage": "Expected broker epoch 17, but got broker epoch 16",
            "throttleTimeMs": 0,
            "producerIdStart": 0,
            "producerIdLen": 0,
        },
    )

    throttle_time_ms: ThrottleTimeMs = 0
    producer_id_start: int = Field(description="the first id of the block (0 on an error)")
    producer_id_len: int = Field(description="how many ids (1000; 0 on an error)")

    @classmethod
    def from_message(cls, r: m.AllocateProducerIdsResponse) -> AllocateProducerIdsResponse:
        return cls(
            **error_fields(r.error, r.error_message),
            producer_id_start=r.producer_id_start,
            producer_id_len=r.producer_id_len,
        )


# ---------------------------------------------------------------- IncrementalAlterConfigs


class AlterableConfig(RequestModel):
    """One change to one config."""

    name: Name = Field(description='the config, e.g. "retention.ms"')
    config_operation: Int8 = Field(
        0, description="0 = SET, 1 = DELETE, 2 = APPEND, 3 = SUBTRACT (LIST configs only)"
    )
    value: _bounded_str(limits.MAX_CONFIG_VALUE_LENGTH) | None = Field(
        None, description="the value (SET), or the comma-separated elements (APPEND, SUBTRACT)"
    )


class AlterConfigsResource(RequestModel):
    """The changes to one resource's configs: all of them are written, or none."""

    resource_type: Int8 = Field(description="2 = TOPIC, 4 = BROKER")
    resource_name: _bounded_str(limits.MAX_NAME_LENGTH) = Field(
        description='a topic; a broker id, or "" for the cluster-wide default'
    )
    configs: _bounded_list(AlterableConfig, limits.MAX_TOPIC_CONFIGS) = Field(
        description="the changes"
    )


class IncrementalAlterConfigsRequest(RequestModel):
    """POST /v1/configs (Kafka's IncrementalAlterConfigsRequest)."""

    model_config = example(
        {
            "resources": [
                {
                    "resourceType": 2,
                    "resourceName": "orders",
                    "configs": [
                        {"name": "retention.ms", "configOperation": 0, "value": "86400000"},
                        {"name": "cleanup.policy", "configOperation": 2, "value": "compact"},
                    ],
                },
                {
                    "resourceType": 4,
                    "resourceName": "",
                    "configs": [
                        {
                            "name": "unclean.leader.election.enable",
                            "configOperation": 0,
                            "value": "false",
                        }
                    ],
                },
            ],
            "validateOnly": False,
        }
    )

    resources: _bounded_list(AlterConfigsResource, limits.MAX_CONFIG_RESOURCES) = Field(
        description="the resources, each decided on its own"
    )
    validate_only: StrictBool = Field(
        False, description="true: every check of a real request, the same answers, nothing written"
    )

    def to_message(self) -> m.IncrementalAlterConfigsRequest:
        return m.IncrementalAlterConfigsRequest(
            resources=tuple(
                m.AlterConfigsResource(
                    r.resource_type,
                    r.resource_name,
                    tuple(
                        m.AlterableConfig(c.name, c.config_operation, c.value) for c in r.configs
                    ),
                )
                for r in self.resources
            ),
            validate_only=self.validate_only,
        )


class AlterConfigsResourceResult(ErrorFields):
    """One resource's outcome (INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST)."""

    resource_type: int = Field(description="2 = TOPIC, 4 = BROKER")
    resource_name: str = Field(description="the resource")


class IncrementalAlterConfigsResponse(ErrorFields):
    """Each resource's outcome, in the order each first appears in the request."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "responses": [
                {**NONE, "resourceType": 2, "resourceName": "orders"},
                {
                    "errorCode": 40,
                    "errorName": "INVALID_CONFIG",
                    "errorMessage": "Invalid value yes for configuration "
                    "unclean.leader.election.enable: Expected value to be either true or false",
                    "resourceType": 4,
                    "resourceName": "",
                },
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    responses: list[AlterConfigsResourceResult] = Field(description="by resource")

    @classmethod
    def from_message(cls, r: m.IncrementalAlterConfigsResponse) -> IncrementalAlterConfigsResponse:
        return cls(
            **error_fields(r.error, r.error_message),
            responses=[
                AlterConfigsResourceResult(
                    **error_fields(x.error, x.error_message),
                    resource_type=x.resource_type,
                    resource_name=x.resource_name,
                )
                for x in r.responses
            ],
        )


# ---------------------------------------------------------------- ACLs


AclEnum = Annotated[
    _bounded_str(32) | Int8,
    Field(union_mode="left_to_right"),
]
AclString = _bounded_str(limits.MAX_ACL_STRING_LENGTH)


def _acl_codes(entry: BaseModel, fields: dict[str, str], defaults: dict[str, int]) -> dict:
    """The entry's enum fields as Kafka's codes (``fields``: attribute -> the
    enum's name in metadata_records.acls.ACL_ENUMS); ValueError names the field
    and the value a name cannot be read from."""
    codes = {}
    for attr, enum_field in fields.items():
        value = getattr(entry, attr)
        if value is None:
            codes[attr] = defaults[attr]
            continue
        code = _NAME_CODES[enum_field].get(value) if type(value) is str else None
        if code is None:  # another case, spaces, a code, or no such name
            code = int(parse_enum(ACL_ENUMS[enum_field], _CAMEL[attr], value))
        codes[attr] = code
    return codes


_CREATION_ENUMS = {
    "resource_type": "resourceType",
    "resource_pattern_type": "patternType",
    "operation": "operation",
    "permission_type": "permissionType",
}
_FILTER_ENUMS = {
    "resource_type_filter": "resourceType",
    "pattern_type_filter": "patternType",
    "operation": "operation",
    "permission_type": "permissionType",
}
_FILTER_DEFAULTS = dict.fromkeys(_FILTER_ENUMS, 1)  # ANY
# Computed once, not per entry: a field's name in messages, and Kafka's
# names as written (READ, TOPIC) to codes in one dict lookup.
_CAMEL = {attr: to_camel(attr) for attr in (*_CREATION_ENUMS, *_FILTER_ENUMS)}
_NAME_CODES = {field: {m.name: int(m) for m in enum} for field, enum in ACL_ENUMS.items()}


class AclCreation(RequestModel):
    """One binding to create (Kafka's AclCreation). Enums by Kafka's name, in
    any case, or by code."""

    resource_type: AclEnum = Field(description="TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ...")
    resource_name: AclString = Field(description='the resource, "*" for all of its type')
    resource_pattern_type: AclEnum = Field(
        "LITERAL", description="LITERAL (the default) or PREFIXED"
    )
    principal: AclString = Field(description='"Type:name", e.g. "User:alice" or "User:*"')
    host: AclString = Field("*", description='the client host, "*" (the default) for any')
    operation: AclEnum = Field(description="READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, ALL, ...")
    permission_type: AclEnum = Field(description="ALLOW or DENY")

    def to_acl(self) -> StandardAcl:
        c = _acl_codes(self, _CREATION_ENUMS, {})
        return StandardAcl(
            c["resource_type"],
            self.resource_name,
            c["resource_pattern_type"],
            self.principal,
            self.host,
            c["operation"],
            c["permission_type"],
        )


class CreateAclsRequest(RequestModel):
    """POST /v1/acls (Kafka's CreateAclsRequest)."""

    model_config = example(
        {
            "creations": [
                {
                    "resourceType": "TOPIC",
                    "resourceName": "orders",
                    "resourcePatternType": "LITERAL",
                    "principal": "User:alice",
                    "host": "*",
                    "operation": "READ",
                    "permissionType": "ALLOW",
                }
            ]
        }
    )

    creations: _bounded_list(AclCreation, limits.MAX_ACLS_PER_REQUEST) = Field(
        description="the bindings, each answered on its own"
    )

    def to_message(self) -> tuple[m.CreateAclsRequest, dict[int, str]]:
        """The controller's request for the creations whose names read, and
        (index -> problem) for those that do not."""
        acls, problems = [], {}
        for i, c in enumerate(self.creations):
            try:
                acls.append(c.to_acl())
            except ValueError as e:
                problems[i] = str(e)
        return m.CreateAclsRequest(tuple(acls)), problems


class AclCreationResult(ErrorFields):
    """One creation's outcome (INVALID_REQUEST names the problem)."""


class CreateAclsResponse(ErrorFields):
    """One result per creation, in the request's order."""

    model_config = example(
        {**NONE, "throttleTimeMs": 0, "results": [NONE]},
    )

    throttle_time_ms: ThrottleTimeMs = 0
    results: list[AclCreationResult] = Field(description="by creation, in order")

    @staticmethod
    def obj_from_message(r: m.CreateAclsResponse, problems: dict[int, str]) -> dict[str, Any]:
        """The answer as JSON-ready data, built without a model per result (a
        CreateAcls has up to 10,000: decisions.md 139); the model validates
        it in tests/test_api_acls.py."""
        decided = iter(r.results)
        results = []
        for i in range(len(r.results) + len(problems)):
            if i in problems:
                results.append(_error_obj(Errors.INVALID_REQUEST, problems[i]))
            else:
                x = next(decided)
                results.append(_error_obj(x.error, x.error_message))
        return {**_error_obj(Errors.NONE), "throttleTimeMs": 0, "results": results}


class DeleteAclsFilter(RequestModel):
    """Which bindings to delete (Kafka's DeleteAclsFilter): an absent field
    matches any; ANY matches any; MATCH (pattern type) every pattern that
    applies to the named resource (its literal name, "*" and its prefixes)."""

    resource_type_filter: AclEnum | None = Field(None, description="ANY (default), TOPIC, ...")
    resource_name_filter: AclString | None = Field(None, description="null (default): any")
    pattern_type_filter: AclEnum | None = Field(
        None, description="ANY (default), MATCH, LITERAL or PREFIXED"
    )
    principal_filter: AclString | None = Field(None, description="null (default): any")
    host_filter: AclString | None = Field(None, description="null (default): any")
    operation: AclEnum | None = Field(None, description="ANY (default), READ, ...")
    permission_type: AclEnum | None = Field(None, description="ANY (default), ALLOW or DENY")

    def to_filter(self) -> AclBindingFilter:
        c = _acl_codes(self, _FILTER_ENUMS, _FILTER_DEFAULTS)
        return AclBindingFilter(
            c["resource_type_filter"],
            self.resource_name_filter,
            c["pattern_type_filter"],
            self.principal_filter,
            self.host_filter,
            c["operation"],
            c["permission_type"],
        )


class DeleteAclsRequest(RequestModel):
    """POST /v1/acls/delete (Kafka's DeleteAclsRequest)."""

    model_config = example(
        {"filters": [{"resourceTypeFilter": "TOPIC", "resourceNameFilter": "orders",
                      "patternTypeFilter": "MATCH", "principalFilter": "User:alice"}]}
    )  # fmt: skip

    filters: _bounded_list(DeleteAclsFilter, limits.MAX_ACL_FILTERS_PER_REQUEST) = Field(
        description="each answered with the bindings it matched"
    )

    def to_message(self) -> tuple[m.DeleteAclsRequest, dict[int, str]]:
        filters, problems = [], {}
        for i, f in enumerate(self.filters):
            try:
                filters.append(f.to_filter())
            except ValueError as e:
                problems[i] = str(e)
        return m.DeleteAclsRequest(tuple(filters)), problems


class AclBindingOut(ResponseModel):
    """A binding, enums by Kafka's name."""

    resource_type: str = Field(description='e.g. "TOPIC"')
    resource_name: str = Field(description="the resource")
    pattern_type: str = Field(description='"LITERAL" or "PREFIXED"')
    principal: str = Field(description='e.g. "User:alice"')
    host: str = Field(description='e.g. "*"')
    operation: str = Field(description='e.g. "READ"')
    permission_type: str = Field(description='"ALLOW" or "DENY"')


class DeleteAclsMatchingAcl(ErrorFields, AclBindingOut):
    """A binding the filter matched, deleted."""


class DeleteAclsFilterResult(ErrorFields):
    """One filter's outcome: the bindings it matched (INVALID_REQUEST names a bad filter)."""

    matching_acls: list[DeleteAclsMatchingAcl] = Field(description="what the filter deleted")


class DeleteAclsResponse(ErrorFields):
    """One result per filter, in order; a binding two filters match is in both
    and deleted once."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "filterResults": [
                {
                    **NONE,
                    "matchingAcls": [
                        {
                            **NONE,
                            "resourceType": "TOPIC",
                            "resourceName": "orders",
                            "patternType": "LITERAL",
                            "principal": "User:alice",
                            "host": "*",
                            "operation": "READ",
                            "permissionType": "ALLOW",
                        }
                    ],
                }
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    filter_results: list[DeleteAclsFilterResult] = Field(description="by filter, in order")

    @staticmethod
    def obj_from_message(r: m.DeleteAclsResponse, problems: dict[int, str]) -> dict[str, Any]:
        """The answer as JSON-ready data, built without a model per binding
        (a filter may match 10,000: decisions.md 139); the model validates it
        in tests/test_api_acls.py."""
        decided = iter(r.filter_results)
        results = []
        none = _error_obj(Errors.NONE)
        for i in range(len(r.filter_results) + len(problems)):
            if i in problems:
                results.append(
                    {**_error_obj(Errors.INVALID_REQUEST, problems[i]), "matchingAcls": []}
                )
                continue
            x = next(decided)
            results.append(
                {
                    **_error_obj(x.error, x.error_message),
                    "matchingAcls": [{**none, **acl_obj(a)} for a in x.matching_acls],
                }
            )
        return {**none, "throttleTimeMs": 0, "filterResults": results}


class DescribeAclsEntryOut(ResponseModel):
    """One entry of a resource pattern's ACLs."""

    principal: str = Field(description='e.g. "User:alice"')
    host: str = Field(description='e.g. "*"')
    operation: str = Field(description='e.g. "READ"')
    permission_type: str = Field(description='"ALLOW" or "DENY"')


class DescribeAclsResourceOut(ResponseModel):
    """A resource pattern and its ACLs that match the filter."""

    resource_type: str = Field(description='e.g. "TOPIC"')
    resource_name: str = Field(description="the resource")
    pattern_type: str = Field(description='"LITERAL" or "PREFIXED"')
    acls: list[DescribeAclsEntryOut] = Field(description="its matching entries")


class DescribeAclsOut(ErrorFields):
    """GET /v1/acls: the bindings the filter matches, by resource (Kafka's
    DescribeAclsResponse), from the serving node's image."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "resources": [
                {
                    "resourceType": "TOPIC",
                    "resourceName": "orders",
                    "patternType": "LITERAL",
                    "acls": [
                        {
                            "principal": "User:alice",
                            "host": "*",
                            "operation": "READ",
                            "permissionType": "ALLOW",
                        }
                    ],
                }
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    resources: list[DescribeAclsResourceOut] = Field(
        description="by resource type, pattern type and name"
    )


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
        _bounded_list(CreatePartitionsAssignment, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY) | None
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


class CreatePartitionsTopicResult(ErrorFields):
    """The topic's outcome (the same as the top level's)."""

    name: str = Field(description="the topic")


class CreatePartitionsResponse(ErrorFields):
    """The outcome, at the top level and for the one topic."""

    model_config = example(
        {**NONE, "throttleTimeMs": 0, "results": [{**NONE, "name": "orders"}]},
        {
            "errorCode": 37,
            "errorName": "INVALID_PARTITIONS",
            "errorMessage": "topic orders has 6 partitions; the count must be larger",
            "throttleTimeMs": 0,
            "results": [
                {
                    "errorCode": 37,
                    "errorName": "INVALID_PARTITIONS",
                    "errorMessage": "topic orders has 6 partitions; the count must be larger",
                    "name": "orders",
                }
            ],
        },
    )

    throttle_time_ms: ThrottleTimeMs = 0
    results: list[CreatePartitionsTopicResult] = Field(description="the one topic's outcome")

    @classmethod
    def from_message(cls, r: m.CreatePartitionsResponse) -> CreatePartitionsResponse:
        fields = error_fields(r.error, r.error_message)
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
    partitions: _bounded_list(ReassignablePartition, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY) = Field(
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

    topics: _bounded_list(ReassignableTopic, limits.MAX_TOPICS_PER_REQUEST) = Field(
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


class ReassignablePartitionResponse(ErrorFields):
    """One partition's outcome (e.g. NO_REASSIGNMENT_IN_PROGRESS for a cancel)."""

    partition_index: int = Field(description="the partition")


class ReassignableTopicResponse(ResponseModel):
    """One topic's outcomes."""

    name: str = Field(description="the topic")
    partitions: list[ReassignablePartitionResponse] = Field(description="by partition")


class AlterPartitionReassignmentsResponse(ErrorFields):
    """Each partition's outcome; the reassignment itself completes later, as
    the new replicas join the ISR."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "responses": [
                {
                    "name": "orders",
                    "partitions": [
                        {"partitionIndex": 0, **NONE},
                        {
                            "partitionIndex": 1,
                            "errorCode": 85,
                            "errorName": "NO_REASSIGNMENT_IN_PROGRESS",
                            "errorMessage": "no reassignment of orders-1 is in progress",
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
    """A topic's partitions to elect leaders for."""

    topic: StrictStr = Field(description="the topic")
    partitions: _bounded_list(Int32, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY) = Field(
        description="its partitions"
    )


class ElectLeadersRequest(RequestModel):
    """POST /v1/elect-leaders (Kafka's ElectLeadersRequest).

    ``topicPartitions`` null or absent: every partition (as Kafka's null)."""

    model_config = example(
        {"electionType": 0, "topicPartitions": [{"topic": "orders", "partitions": [0, 1, 2]}]}
    )

    election_type: Int8 = Field(0, description="0 = preferred, 1 = unclean")
    topic_partitions: _bounded_list(TopicPartitions, limits.MAX_TOPICS_PER_REQUEST) | None = Field(
        None, description="the partitions, or null for every partition"
    )

    def to_message(self) -> m.ElectLeadersRequest:
        return m.ElectLeadersRequest(
            election_type=self.election_type,
            topic_partitions=None
            if self.topic_partitions is None
            else tuple((t.topic, tuple(t.partitions)) for t in self.topic_partitions),
        )


class PartitionResult(ErrorFields):
    """One partition's outcome (ELECTION_NOT_NEEDED when its preferred leader already leads)."""

    partition_id: int = Field(description="the partition")


class ReplicaElectionResult(ResponseModel):
    """One topic's outcomes."""

    topic: str = Field(description="the topic")
    partition_result: list[PartitionResult] = Field(description="by partition")


class ElectLeadersResponse(ErrorFields):
    """Each partition's outcome."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "replicaElectionResults": [
                {
                    "topic": "orders",
                    "partitionResult": [
                        {"partitionId": 0, **NONE},
                        {
                            "partitionId": 1,
                            "errorCode": 84,
                            "errorName": "ELECTION_NOT_NEEDED",
                            "errorMessage": None,
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

    model_config = example({"name": "metadata.version", "level": 12, "upgradeType": 1})

    name: StrictStr = Field(examples=["metadata.version"], description="the feature")
    level: Int16 = Field(
        description="Kafka's feature level (metadata.version: 6 = 3.3-IV2 ... 12 = 3.6-IV0; "
        "eligible.leader.replicas.version: 0 off, 1 on, KIP-966); 0 asks to remove the feature"
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
    """The update's outcome (INVALID_UPDATE_VERSION for a refused level)."""

    model_config = example({**NONE, "throttleTimeMs": 0})

    throttle_time_ms: ThrottleTimeMs = 0

    @classmethod
    def from_message(cls, r: m.UpdateFeaturesResponse) -> UpdateFeaturesResponse:
        return cls(**error_fields(r.error, r.error_message))


# ---------------------------------------------------------------- client quotas

FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]
EntityName = _bounded_str(limits.MAX_CONFIG_VALUE_LENGTH)


class QuotaEntityComponent(RequestModel):
    """One component of a quota entity (Kafka's EntityData)."""

    entity_type: Name = Field(description='"user", "client-id" or "ip"')
    entity_name: EntityName | None = Field(
        None, description="the name; null for the type's default entity"
    )


class ClientQuotaOpIn(RequestModel):
    """Set a key, or remove it (Kafka's OpData)."""

    key: Name = Field(description='e.g. "producer_byte_rate"')
    value: FiniteFloat = Field(0.0, description="the value to set (ignored on removal)")
    remove: StrictBool = Field(False, description="true: remove the key")


class ClientQuotaEntryIn(RequestModel):
    """One entity's changes: all of them are written, or none."""

    entity: _bounded_list(QuotaEntityComponent, limits.MAX_QUOTA_COMPONENTS) = Field(
        description="user, client-id or both; or ip alone"
    )
    ops: _bounded_list(ClientQuotaOpIn, limits.MAX_QUOTA_OPS) = Field(description="the changes")


class AlterClientQuotasRequest(RequestModel):
    """POST /v1/client-quotas (Kafka's AlterClientQuotasRequest)."""

    model_config = example(
        {
            "entries": [
                {
                    "entity": [
                        {"entityType": "user", "entityName": "alice"},
                        {"entityType": "client-id", "entityName": None},
                    ],
                    "ops": [
                        {"key": "producer_byte_rate", "value": 1048576, "remove": False},
                        {"key": "request_percentage", "remove": True},
                    ],
                },
                {
                    "entity": [{"entityType": "ip", "entityName": None}],
                    "ops": [{"key": "connection_creation_rate", "value": 50}],
                },
            ],
            "validateOnly": False,
        }
    )

    entries: _bounded_list(ClientQuotaEntryIn, limits.MAX_QUOTA_ENTRIES) = Field(
        description="the entities, each decided on its own"
    )
    validate_only: StrictBool = Field(
        False, description="true: every check of a real request, the same answers, nothing written"
    )

    def to_message(self) -> m.AlterClientQuotasRequest:
        return m.AlterClientQuotasRequest(
            entries=tuple(
                m.ClientQuotaAlteration(
                    tuple((c.entity_type, c.entity_name) for c in e.entity),
                    tuple(m.ClientQuotaOp(o.key, o.value, o.remove) for o in e.ops),
                )
                for e in self.entries
            ),
            validate_only=self.validate_only,
        )


class QuotaEntityComponentOut(ResponseModel):
    """One component of a quota entity."""

    entity_type: str = Field(description='"user", "client-id" or "ip"')
    entity_name: str | None = Field(description="the name; null for the default entity")


def _entity_out(entity: tuple[tuple[str, str | None], ...]) -> list[QuotaEntityComponentOut]:
    return [QuotaEntityComponentOut(entity_type=t, entity_name=n) for t, n in entity]


class AlterClientQuotasEntryResult(ErrorFields):
    """One entity's outcome (INVALID_REQUEST, POLICY_VIOLATION)."""

    entity: list[QuotaEntityComponentOut] = Field(description="the entity, as sent")


class AlterClientQuotasResponse(ErrorFields):
    """Each entity's outcome, in the order each first appears in the request."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "entries": [
                {**NONE, "entity": [{"entityType": "user", "entityName": "alice"}]},
                {
                    "errorCode": 42,
                    "errorName": "INVALID_REQUEST",
                    "errorMessage": "producer_byte_rate cannot be a fractional value.",
                    "entity": [{"entityType": "client-id", "entityName": "app"}],
                },
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    entries: list[AlterClientQuotasEntryResult] = Field(description="by entity")

    @classmethod
    def from_message(cls, r: m.AlterClientQuotasResponse) -> AlterClientQuotasResponse:
        return cls(
            **error_fields(r.error, r.error_message),
            entries=[
                AlterClientQuotasEntryResult(
                    **error_fields(e.error, e.error_message), entity=_entity_out(e.entity)
                )
                for e in r.entries
            ],
        )


class QuotaValueOut(ResponseModel):
    """One quota of an entity."""

    key: str = Field(description="the quota key")
    value: float = Field(description="its value")


class DescribedClientQuotaOut(ResponseModel):
    """One entity the filter matched, with its quotas."""

    entity: list[QuotaEntityComponentOut] = Field(description="user, client-id, ip order")
    values: list[QuotaValueOut] = Field(description="by key")


class DescribeClientQuotasOut(ErrorFields):
    """GET /v1/client-quotas: the matching entities (Kafka's
    DescribeClientQuotasResponse), from the serving node's image."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "entries": [
                {
                    "entity": [
                        {"entityType": "user", "entityName": "alice"},
                        {"entityType": "client-id", "entityName": None},
                    ],
                    "values": [{"key": "producer_byte_rate", "value": 1048576.0}],
                }
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    entries: list[DescribedClientQuotaOut] = Field(description="sorted by entity, defaults first")


# ---------------------------------------------------------------- leadership transfer


class TransferLeadershipRequest(RequestModel):
    """POST /v1/quorum/transfer-leadership; an empty body means "any caught-up voter"."""

    model_config = example({"targetNodeId": 2}, {})

    target_node_id: BrokerId | None = Field(
        None, description="the voter to lead, or null for the most caught-up one"
    )


class TransferLeadershipResponse(ErrorFields):
    """Another voter leads now."""

    model_config = example({**NONE, "leaderId": 2})

    leader_id: int | None = Field(None, description="the new leader")


# ---------------------------------------------------------------- voter changes (KIP-853)


class AddVoterRequest(RequestModel):
    """POST /v1/quorum/add-voter (Kafka's AddRaftVoter): the node must be running,
    started with ``--raft-address`` = ``address``; its directory id comes from it."""

    model_config = example({"nodeId": 3, "address": "metaquorum-3.metaquorum:9093"})

    node_id: Int32 = Field(description="0 or more")
    address: StrictStr = Field(description='its Raft "host:port", as every voter will spell it')
    timeout_ms: int = Field(
        30_000, ge=1, le=600_000, description="how long it may take to connect and catch up"
    )


class RemoveVoterRequest(RequestModel):
    """POST /v1/quorum/remove-voter (Kafka's RemoveRaftVoter)."""

    model_config = example({"nodeId": 3})

    node_id: Int32 = Field(description="0 or more")


class VoterKeyOut(ResponseModel):
    """A voter as the voter set names it (KIP-853)."""

    node_id: int = Field(description="its node id")
    directory_id: str = Field(description="its data dir's id")
    raft_address: str = Field(description='its Raft "host:port"')


class VoterChangeResponse(ErrorFields):
    """The voter set after the change."""

    model_config = example(
        {
            **NONE,
            "changed": True,
            "voters": [
                {
                    "nodeId": n,
                    "directoryId": d,
                    "raftAddress": f"metaquorum-{n}.metaquorum:9093",
                }
                for n, d in (
                    (0, "pAld8JCtT4iS7drjR0nqtg"),
                    (1, "qJEhv4M4R0WfbNdgU117UQ"),
                    (2, "aF1lfbGsR_iypxeyBG0pWQ"),
                    (3, "DfVODN9gQgi1h2TznBKpAg"),
                )
            ],
        }
    )

    changed: bool = Field(
        description="false: nothing was left to do (a retried add that had finished)"
    )
    voters: list[VoterKeyOut] = Field(description="the voter set after the change")


# ---------------------------------------------------------------- reads


class EndpointOut(ResponseModel):
    """A listener the broker registered."""

    name: str = Field(description="the listener's name")
    host: str = Field(description="the advertised host")
    port: int = Field(description="the advertised port")
    security_protocol: int = Field(description="Kafka's SecurityProtocol id (0 PLAINTEXT, ...)")


class FeatureRangeOut(ResponseModel):
    """A feature level range the broker supports."""

    name: str = Field(description="the feature")
    min_supported_version: int = Field(description="the lowest level it supports")
    max_supported_version: int = Field(description="the highest level it supports")


class BrokerOut(ResponseModel):
    """A registered broker, as the image holds it."""

    broker_id: int = Field(description="the broker's id")
    broker_epoch: int = Field(description="its epoch (the offset of its registration)")
    incarnation_id: str = Field(description="its incarnation's UUID")
    fenced: bool = Field(description="fenced: it may not lead or join an ISR")
    in_controlled_shutdown: bool = Field(description="it is in controlled shutdown")
    rack: str | None = Field(description="its rack, or null")
    listeners: list[EndpointOut] = Field(description="its endpoints")
    features: list[FeatureRangeOut] = Field(description="its supported feature ranges")
    registration_offset: int = Field(description="offset of its latest RegisterBrokerRecord")


class BrokersOut(ResponseModel):
    """Every registered broker."""

    model_config = example(
        {
            "brokers": [
                {
                    "brokerId": 1,
                    "brokerEpoch": 17,
                    "incarnationId": "zBTExEswSU63HSkHIAXA_A",
                    "fenced": False,
                    "inControlledShutdown": False,
                    "rack": "eu-west-1a",
                    "listeners": [LISTENER_EXAMPLE],
                    "features": [FEATURES_EXAMPLE],
                    "registrationOffset": 17,
                }
            ]
        }
    )

    brokers: list[BrokerOut] = Field(description="by broker id")


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
    """Every topic, by name."""

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
            ]
        }
    )

    topics: list[TopicOut] = Field(description="by name")


class ConfigSynonymOut(ResponseModel):
    """A level that sets the config, the effective one first."""

    name: str = Field(
        description="the name at that level (a broker synonym, e.g. log.retention.hours)"
    )
    value: str | None = Field(
        description="its value there (hours and minutes in milliseconds); null for a "
        "sensitive config, whoever asks"
    )
    source: int = Field(description="Kafka's ConfigSource id")
    source_name: str = Field(description='e.g. "DYNAMIC_DEFAULT_BROKER_CONFIG"')


class DescribedConfigOut(ResponseModel):
    """One config's effective value (Kafka's DescribeConfigsResourceResult)."""

    name: str = Field(description="the config")
    value: str | None = Field(
        description="its effective value; null for a sensitive config (isSensitive), whoever asks"
    )
    read_only: bool = Field(description="true: not dynamically updatable")
    config_source: int = Field(
        description="where the value comes from: 1 TOPIC_CONFIG, 2 DYNAMIC_BROKER_CONFIG, "
        "3 DYNAMIC_DEFAULT_BROKER_CONFIG, 5 DEFAULT_CONFIG (Kafka's ConfigSource)"
    )
    config_source_name: str = Field(description='e.g. "TOPIC_CONFIG"')
    is_sensitive: bool = Field(
        description="true for a PASSWORD (e.g. ssl.keystore.password, sasl.jaas.config, also "
        "per listener: listener.name.<l>.ssl.keystore.password) and for a config of unknown "
        "type (a custom broker config), as Kafka: its value and its synonyms' are null to "
        "every role, admin too"
    )
    config_type: int = Field(description="Kafka's ConfigType id: 1 BOOLEAN, 2 STRING, 3 INT, ...")
    config_type_name: str = Field(description='e.g. "LONG"; "UNKNOWN" for a custom broker config')
    documentation: str = Field(description="what it does")
    synonyms: list[ConfigSynonymOut] = Field(
        description="with includeSynonyms=true: every level that sets it, the effective first"
    )


class DescribeConfigsOut(ResponseModel):
    """GET /v1/configs/...: a resource's configs, resolved as Kafka does."""

    model_config = example(
        {
            "resourceType": 2,
            "resourceName": "orders",
            "configs": [
                {
                    "name": "retention.ms",
                    "value": "86400000",
                    "readOnly": False,
                    "configSource": 3,
                    "configSourceName": "DYNAMIC_DEFAULT_BROKER_CONFIG",
                    "isSensitive": False,
                    "configType": 5,
                    "configTypeName": "LONG",
                    "documentation": "time a segment is kept (-1: no limit)",
                    "synonyms": [
                        {
                            "name": "log.retention.hours",
                            "value": "86400000",
                            "source": 3,
                            "sourceName": "DYNAMIC_DEFAULT_BROKER_CONFIG",
                        },
                        {
                            "name": "retention.ms",
                            "value": "604800000",
                            "source": 5,
                            "sourceName": "DEFAULT_CONFIG",
                        },
                    ],
                }
            ],
        }
    )

    resource_type: int = Field(description="2 = TOPIC, 4 = BROKER")
    resource_name: str = Field(
        description='the topic; the broker id, or "" for the cluster default'
    )
    configs: list[DescribedConfigOut] = Field(description="by name")


class RecordOut(ResponseModel):
    """A record as the log, export and snapshot show it (docs/api.md "A record")."""

    offset: int = Field(description="its offset (dense from 0)")
    type: str = Field(examples=["REGISTER_BROKER_RECORD"], description="Kafka's record type")
    version: int = Field(description="the record's version")
    timestamp_ms: int = Field(description="the leader's clock when it built the batch")
    controller_epoch: int = Field(description="the controller epoch it was decided under")
    batch_offset: int = Field(
        description="the offset of the first record of the batch it was committed in"
    )
    data: dict[str, Any] = Field(
        description="the record's fields, with Kafka's names; a CONFIG_RECORD's value of a "
        "sensitive config (a PASSWORD, or of unknown type) is `(redacted)` unless the caller's "
        "role sees it (admin, broker; includeSensitive)"
    )


class LogOut(ResponseModel):
    """A page of the metadata log."""

    model_config = example(
        {
            "records": [
                {
                    "offset": 17,
                    "type": "REGISTER_BROKER_RECORD",
                    "version": 2,
                    "timestampMs": 1795000000000,
                    "controllerEpoch": 3,
                    "batchOffset": 17,
                    "data": {
                        "brokerId": 1,
                        "isMigratingZkBroker": False,
                        "incarnationId": "zBTExEswSU63HSkHIAXA_A",
                        "brokerEpoch": 17,
                        "endPoints": [LISTENER_EXAMPLE],
                        "features": [FEATURES_EXAMPLE],
                        "rack": "eu-west-1a",
                        "fenced": True,
                        "inControlledShutdown": False,
                    },
                }
            ],
            "nextOffset": 18,
            "highWatermark": 42,
            "oldestOffset": 0,
        }
    )

    records: list[RecordOut] = Field(description="the records, by offset")
    next_offset: int = Field(description="the offset to ask for next")
    high_watermark: int = Field(description="this node's log end (the next offset it will apply)")
    oldest_offset: int = Field(description="the oldest offset this node still serves")


class SnapshotOut(ResponseModel):
    """The image as records that recreate it. Every record carries ``offset`` =
    the image's last offset; follow the log from ``nextOffset``."""

    model_config = example(
        {
            "offset": 41,
            "nextOffset": 42,
            "records": [
                {
                    "offset": 41,
                    "type": "FEATURE_LEVEL_RECORD",
                    "version": 0,
                    "timestampMs": 1795000004000,
                    "controllerEpoch": 3,
                    "batchOffset": 41,
                    "data": {"name": "metadata.version", "featureLevel": 12},
                }
            ],
        }
    )

    offset: int = Field(description="the image's last offset")
    next_offset: int = Field(description="the offset to follow the log from")
    records: list[RecordOut] = Field(description="records that recreate the image")


class VoterOut(ResponseModel):
    """A voter (or observer) as this node sees it."""

    node_id: int = Field(description="its node id")
    url: str | None = Field(description="its HTTP URL, when this node knows it")
    raft_address: str = Field(description='its Raft "host:port"')
    connected: bool = Field(description="this node has a Raft connection to it (true for itself)")
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
    """Gaps between AppendEntries from one leader, as measured here."""

    # Absent counters are left out while nothing was measured.
    model_config = ConfigDict(json_schema_serialization_defaults_required=False)

    count: int = Field(description="gaps measured since this node started")
    p50_ms: float | None = Field(None, description="upper bound of the median's bucket")
    p99_ms: float | None = Field(None, description="upper bound of the 99th percentile's bucket")
    max_ms: float | None = Field(None, description="the longest gap")


class ElectionsOut(ResponseModel):
    """This voter's election counters; only ``preVote`` when pre-vote is off."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=False)

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


class HttpWorkerOut(ResponseModel):
    """One HTTP worker process of this voter (``serve --http-workers``)."""

    index: int = Field(description="the worker's number, 0 to --http-workers - 1")
    pid: int = Field(description="its process id")
    alive: bool = Field(description="running, with its link to the core open")
    uptime_s: float = Field(description="seconds since this process of it started")
    restarts: int = Field(description="times this worker was started again after it died")
    requests: int = Field(
        description="writes, barriers and forwarded requests it sent to the core and the "
        "orderer (this process; its writes as far as the orderer last reported)"
    )


class OrdererProcessOut(ResponseModel):
    """The process that orders this voter's writes, with HTTP workers
    (voter/orderer_process.py)."""

    pid: int = Field(description="its process id")
    alive: bool = Field(description="running, with its link to the serve process open")
    uptime_s: float = Field(description="seconds since this process of it started")
    restarts: int = Field(description="times it was started again after it died")


class QuorumStatusOut(ResponseModel):
    """This node's view of the quorum."""

    model_config = example(
        {
            "clusterId": CLUSTER_ID,
            "nodeId": 0,
            "directoryId": "pAld8JCtT4iS7drjR0nqtg",
            "role": "voter",
            "leaderId": 0,
            "leaderUrl": "http://metaquorum-0.metaquorum:8080",
            "controllerEpoch": 3,
            "raftTerm": 3,
            "highWatermark": 42,
            "lastAppliedOffset": 41,
            "metadataVersion": 12,
            "finalizedFeatures": {"eligible.leader.replicas.version": 1, "metadata.version": 12},
            "auth": "on",
            "active": True,
            "ready": True,
            "replaying": False,
            "queueDepth": 0,
            "raftCommitIndex": 37,
            "raftLastApplied": 37,
            "ignoredRecords": 0,
            "ignoredReasons": [],
            "observer": False,
            "observersConnected": 0,
            "imageDigest": None,
            "httpWorkers": [
                {
                    "index": 0,
                    "pid": 41,
                    "alive": True,
                    "uptimeS": 5230.4,
                    "restarts": 0,
                    "requests": 918274,
                }
            ],
            "ordererProcess": {"pid": 40, "alive": True, "uptimeS": 5230.5, "restarts": 0},
            "elections": {
                "preVote": True,
                "preVoteRounds": 1,
                "preVoteRoundsWon": 1,
                "preVotesGranted": 0,
                "preVotesRefused": 0,
                "votesRefusedInLease": 0,
                "leaderConnectionsLost": 0,
                "electionsStarted": {
                    "no_leader_yet": 1,
                    "leader_silent": 0,
                    "leader_connection_closed": 0,
                    "transfer": 0,
                },
                "leadershipLost": {
                    "check_quorum": 0,
                    "term_ahead": 0,
                    "transfer": 0,
                    "disk_unwritable": 0,
                    "higher_term": 0,
                },
                "leaderChanges": 1,
                "heartbeatGaps": {"count": 0, "p50Ms": None, "p99Ms": None, "maxMs": None},
            },
            "voters": [
                {
                    "nodeId": n,
                    "url": f"http://metaquorum-{n}.metaquorum:8080",
                    "raftAddress": f"metaquorum-{n}.metaquorum:9093",
                    "connected": True,
                    "lagRecords": 0,
                    "lastCaughtUpMs": 1795000004100,
                    "logEndOffset": 42,
                    "lastFetchMs": 1795000004100,
                    "directoryId": d,
                    "connectedDirectoryId": d,
                    "role": "voter",
                    "voter": True,
                }
                for n, d in (
                    (0, "pAld8JCtT4iS7drjR0nqtg"),
                    (1, "qJEhv4M4R0WfbNdgU117UQ"),
                    (2, "aF1lfbGsR_iypxeyBG0pWQ"),
                )
            ],
        }
    )

    cluster_id: str = Field(description="the cluster id")
    node_id: int = Field(description="this node's id")
    directory_id: str | None = Field(None, description="this node's data dir (KIP-853)")
    role: str = Field("voter", description="this node's role, as in voters[].role")
    leader_id: int | None = Field(description="the Raft leader's node id, null if none known")
    leader_url: str | None = Field(description="the active controller's HTTP URL, if known")
    controller_epoch: int = Field(description="the controller epoch of the applied image")
    raft_term: int = Field(description="this node's Raft term")
    high_watermark: int = Field(description="the next offset this node will apply")
    last_applied_offset: int = Field(description="the last offset this node applied")
    metadata_version: int = Field(description="the finalized metadata.version level")
    finalized_features: dict[str, int] = Field(
        {},
        description="every finalized feature and its level (metadata.version, "
        "eligible.leader.replicas.version once set; a feature at 0 is absent)",
    )
    auth: str = Field(examples=["on", "off"], description="whether callers must authenticate")
    active: bool = Field(description="this node is the active controller")
    ready: bool = Field(description="as /readyz: replay done, a leader known, caught up")
    replaying: bool = Field(description="this node is still replaying its log")
    queue_depth: int = Field(description="requests waiting for the controller here")
    raft_commit_index: int = Field(description="Raft's commit index (entries, not records)")
    raft_last_applied: int = Field(description="Raft's last applied entry")
    ignored_records: int = Field(
        0, description="records of the log this node's image could not apply (0 in a healthy log)"
    )
    ignored_reasons: list[str] = Field(
        [],
        description="why replay ignored the last of them (at most 16, newest last; this "
        "node's own since it loaded its last snapshot: not replicated)",
    )
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
        None,
        description="this voter's pre-vote counters since it started (quorum/raft/pre_vote.py)",
    )
    voters: list[VoterOut] = Field(description="the voters and observers this node knows")
    http_workers: list[HttpWorkerOut] = Field(
        [],
        description="this voter's HTTP worker processes (serve --http-workers); empty when "
        "one process serves HTTP",
    )
    orderer_process: OrdererProcessOut | None = Field(
        None,
        description="the process that orders this voter's writes when it has HTTP workers; "
        "null when the serve process orders them itself",
    )


class HealthOut(ResponseModel):
    """A probe's answer."""

    model_config = example({"status": "ready", "reason": None}, {"status": "alive", "reason": None})

    status: str = Field(description='"alive", "dead", "ready" or "not ready"')
    reason: str | None = Field(None, description="why not, when it is not")
