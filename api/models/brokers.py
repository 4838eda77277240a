"""What a broker sends and reads back: registration, heartbeat, AlterPartition
(v0-3, with its per-version field rules), UnregisterBroker, AllocateProducerIds,
and GET /v1/brokers.

The three hot endpoints have a fast twin in ``api/models_fast.py``, checked
against these models by ``tests/test_api_models_fast.py``: a change here is a
change there.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from controller import messages as m
from metadata_records import limits
from metadata_records.records import Endpoint, FeatureRange

from .common import (
    ACCEPTED,
    CLUSTER_ID,
    FEATURES_EXAMPLE,
    LISTENER_EXAMPLE,
    ORDERS_ID,
    BrokerId,
    Int8,
    Int16,
    Int32,
    Int64,
    Name,
    RefusalFields,
    RequestModel,
    ResponseModel,
    StrictBool,
    StrictStr,
    ThrottleTimeMs,
    UInt16,
    Uuid,
    bounded_list,
    bounded_str,
    example,
    refusal_fields,
)

# ---------------------------------------------------------------- BrokerRegistration


# One registered broker, as GET /v1/brokers and GET /v1/image show it.
BROKER_EXAMPLE = {
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


class Listener(RequestModel):
    """One of the broker's endpoints, as clients reach it."""

    name: Name = Field(description="the listener's name, unique per broker")
    host: bounded_str(limits.MAX_HOST_LENGTH) = Field(description="the advertised host")
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
    cluster_id: bounded_str(limits.MAX_CLUSTER_ID_LENGTH) = Field(
        description="the cluster id the broker was formatted with; another is refused "
        "(INCONSISTENT_CLUSTER_ID)"
    )
    incarnation_id: Uuid = Field(
        description="a new UUID each time the broker process starts: a new incarnation gets "
        "a new epoch, a retry of the same one keeps its epoch"
    )
    listeners: bounded_list(Listener, limits.MAX_LISTENERS) = Field(
        [], description="the broker's endpoints"
    )
    features: bounded_list(BrokerFeature, limits.MAX_FEATURES) = Field(
        [], description="the feature level ranges the broker supports"
    )
    rack: bounded_str(limits.MAX_RACK_LENGTH) | None = Field(
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


class BrokerRegistrationResponse(RefusalFields):
    """The registration's outcome and the broker's epoch (the offset of its
    RegisterBrokerRecord): the broker sends it with every later request."""

    model_config = example({**ACCEPTED, "throttleTimeMs": 0, "brokerEpoch": 17})

    throttle_time_ms: ThrottleTimeMs = 0
    broker_epoch: int = Field(-1, description="the broker's epoch; -1 on error")

    @classmethod
    def from_message(cls, r: m.BrokerRegistrationResponse) -> BrokerRegistrationResponse:
        return cls(**refusal_fields(r), broker_epoch=r.broker_epoch)


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


class BrokerHeartbeatResponse(RefusalFields):
    """The broker's state after the heartbeat (on an error: caught up false,
    fenced true, shut down false)."""

    model_config = example(
        {
            **ACCEPTED,
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
            **refusal_fields(r),
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
    new_isr: bounded_list(Int32, limits.MAX_REPLICAS) | None = Field(
        None, description="versions 0-2 only"
    )
    new_isr_with_epochs: bounded_list(BrokerState, limits.MAX_REPLICAS) | None = Field(
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
    partitions: bounded_list(AlterPartitionPartitionData, limits.MAX_PARTITIONS_PER_TOPIC_ENTRY) = (
        Field(description="the partitions whose ISR the leader changes")
    )


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
    topics: bounded_list(AlterPartitionTopicData, limits.MAX_TOPICS_PER_REQUEST) = Field(
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


class AlterPartitionPartitionResult(RefusalFields):
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


class AlterPartitionResponse(RefusalFields):
    """The request's outcome (a top-level error, such as STALE_BROKER_EPOCH,
    applies to every partition) and each partition's."""

    model_config = example(
        {
            **ACCEPTED,
            "throttleTimeMs": 0,
            "topics": [
                {
                    "topicId": ORDERS_ID,
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            **ACCEPTED,
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
            **refusal_fields(r),
            topics=[
                AlterPartitionTopicResult(
                    topic_name=t.topic_name,
                    topic_id=t.topic_id,
                    partitions=[
                        AlterPartitionPartitionResult(
                            **refusal_fields(p),
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


# ---------------------------------------------------------------- UnregisterBroker


class UnregisterBrokerResponse(RefusalFields):
    """DELETE /v1/brokers/{id} (Kafka's UnregisterBroker): the registration is
    gone, and the broker left every ISR in the same batch; or
    BROKER_ID_NOT_REGISTERED."""

    model_config = example(
        {**ACCEPTED, "throttleTimeMs": 0},
        {
            "errorCode": 102,
            "errorName": "BROKER_ID_NOT_REGISTERED",
            "errorMessage": "Broker ID 4 is not currently registered",
            "rule": "unregister.broker-not-registered",
            "throttleTimeMs": 0,
        },
    )

    throttle_time_ms: ThrottleTimeMs = 0

    @classmethod
    def from_message(cls, r: m.UnregisterBrokerResponse) -> UnregisterBrokerResponse:
        return cls(**refusal_fields(r))


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


class AllocateProducerIdsResponse(RefusalFields):
    """A block of producer ids for this broker alone: ``producerIdStart`` to
    ``producerIdStart + producerIdLen - 1``; or STALE_BROKER_EPOCH."""

    model_config = example(
        {**ACCEPTED, "throttleTimeMs": 0, "producerIdStart": 4000, "producerIdLen": 1000},
        {
            "errorCode": 77,
            "errorName": "STALE_BROKER_EPOCH",
            "errorMessage": "Expected broker epoch 17, but got broker epoch 16",
            "rule": "kip-380.broker-epoch-mismatch",
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
            **refusal_fields(r),
            producer_id_start=r.producer_id_start,
            producer_id_len=r.producer_id_len,
        )


# ---------------------------------------------------------------- reads: GET /v1/brokers


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
    """Every registered broker; or a page of them (``?limit=``, ``?after=``)."""

    model_config = example({"brokers": [BROKER_EXAMPLE], "nextAfter": None})

    brokers: list[BrokerOut] = Field(description="by broker id")
    next_after: int | None = Field(
        None,
        description="the next page's `after` (the last id on this page); null on the last "
        "page and on the whole list",
    )
