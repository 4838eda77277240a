"""Requests the controller decides and the responses it gives (Kafka's RPC data).

Plain dataclasses: the HTTP layer parses and range-checks input into the
(frozen) requests; the controller never sees JSON. Responses are built on every
request, so they are not frozen (that costs a microsecond each); nothing
changes them after the controller returns. Field names follow Kafka's schemas.
"""

from __future__ import annotations

from dataclasses import dataclass

from metadata_records.acls import AclBindingFilter, StandardAcl
from metadata_records.errors import Errors
from metadata_records.fast_init import fast_frozen_init
from metadata_records.image import PartitionRegistration
from metadata_records.records import Endpoint, FeatureRange, Record

# ------------------------------------------------------------------ brokers


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    broker_id: int
    cluster_id: str
    incarnation_id: str
    listeners: tuple[Endpoint, ...] = ()
    features: tuple[FeatureRange, ...] = ()
    rack: str | None = None
    is_migrating_zk_broker: bool = False
    previous_broker_epoch: int = -1


@dataclass(slots=True)
class BrokerRegistrationResponse:
    error: Errors
    error_message: str | None = None
    broker_epoch: int = -1


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shut_down: bool = False


@dataclass(slots=True)
class BrokerHeartbeatResponse:
    error: Errors
    error_message: str | None = None
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class UnregisterBrokerRequest:
    broker_id: int


@dataclass(slots=True)
class UnregisterBrokerResponse:
    error: Errors
    error_message: str | None = None


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AllocateProducerIdsRequest:
    broker_id: int
    broker_epoch: int


@dataclass(slots=True)
class AllocateProducerIdsResponse:
    error: Errors
    error_message: str | None = None
    producer_id_start: int = 0  # Kafka's defaults on an error: 0 and 0
    producer_id_len: int = 0


# ------------------------------------------------------------------ AlterPartition


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class BrokerState:
    """One member of ``newIsrWithEpochs`` (KIP-903); epoch -1 skips the check."""

    broker_id: int
    broker_epoch: int = -1


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AlterPartitionPartition:
    partition_index: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...] = ()  # versions 0-2
    new_isr_with_epochs: tuple[BrokerState, ...] = ()  # version 3
    leader_recovery_state: int = 0  # version 1+


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AlterPartitionTopic:
    partitions: tuple[AlterPartitionPartition, ...]
    topic_name: str | None = None  # versions 0-1
    topic_id: str | None = None  # version 2+


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    topics: tuple[AlterPartitionTopic, ...]
    version: int = 3


@dataclass(slots=True)
class AlterPartitionPartitionResult:
    partition_index: int
    error: Errors = Errors.NONE
    error_message: str | None = None
    # Kafka's schema has no defaults for these, so error entries carry 0.
    leader_id: int = 0
    leader_epoch: int = 0
    isr: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    partition_epoch: int = 0


@dataclass(slots=True)
class AlterPartitionTopicResult:
    partitions: tuple[AlterPartitionPartitionResult, ...]
    topic_name: str | None = None
    topic_id: str | None = None


@dataclass(slots=True)
class AlterPartitionResponse:
    error: Errors
    error_message: str | None = None
    topics: tuple[AlterPartitionTopicResult, ...] = ()


# ------------------------------------------------------------------ topics


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()  # (partitionIndex, brokerIds)
    configs: tuple[tuple[str, str | None], ...] = ()


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...]
    validate_only: bool = False


@dataclass(slots=True)
class CreatableTopicResult:
    name: str
    error: Errors = Errors.NONE
    error_message: str | None = None
    topic_id: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(slots=True)
class CreateTopicsResponse:
    topics: tuple[CreatableTopicResult, ...]
    error: Errors = Errors.NONE
    error_message: str | None = None


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    names: tuple[str, ...]


@dataclass(slots=True)
class DeletableTopicResult:
    name: str
    error: Errors = Errors.NONE
    error_message: str | None = None
    topic_id: str | None = None


@dataclass(slots=True)
class DeleteTopicsResponse:
    topics: tuple[DeletableTopicResult, ...]
    error: Errors = Errors.NONE
    error_message: str | None = None


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class CreatePartitionsRequest:
    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None  # one broker list per new partition


@dataclass(slots=True)
class CreatePartitionsResponse:
    name: str
    error: Errors = Errors.NONE
    error_message: str | None = None


# ------------------------------------------------------------------ reassignments, elections


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ReassignablePartition:
    partition_index: int
    replicas: tuple[int, ...] | None  # None cancels


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ReassignableTopic:
    name: str
    partitions: tuple[ReassignablePartition, ...]


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsRequest:
    topics: tuple[ReassignableTopic, ...]


@dataclass(slots=True)
class PartitionResult:
    partition_index: int
    error: Errors = Errors.NONE
    error_message: str | None = None


@dataclass(slots=True)
class TopicPartitionsResult:
    name: str
    partitions: tuple[PartitionResult, ...]


@dataclass(slots=True)
class AlterPartitionReassignmentsResponse:
    topics: tuple[TopicPartitionsResult, ...]
    error: Errors = Errors.NONE
    error_message: str | None = None


PREFERRED = 0
UNCLEAN = 1


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ElectLeadersRequest:
    election_type: int  # 0 preferred, 1 unclean
    # (topic, partitions); None means every partition of every topic.
    topic_partitions: tuple[tuple[str, tuple[int, ...]], ...] | None = None


@dataclass(slots=True)
class ElectLeadersResponse:
    topics: tuple[TopicPartitionsResult, ...]
    error: Errors = Errors.NONE
    error_message: str | None = None


# ------------------------------------------------------------------ features


# Kafka's FeatureUpdate.UpgradeType codes (UpdateFeaturesRequest v1+ ``UpgradeType``);
# any other code is UNKNOWN (0) and refused.
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class UpdateFeaturesRequest:
    name: str
    level: int  # Kafka's MaxVersionLevel; 0 asks to remove the feature
    upgrade_type: int = UPGRADE
    validate_only: bool = False


@dataclass(slots=True)
class UpdateFeaturesResponse:
    error: Errors = Errors.NONE
    error_message: str | None = None


# ------------------------------------------------------------------ configs


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AlterableConfig:
    name: str
    config_operation: int  # Kafka's AlterConfigOp.OpType: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
    value: str | None = None


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AlterConfigsResource:
    resource_type: int  # Kafka's ConfigResource.Type: 2 TOPIC, 4 BROKER
    resource_name: str  # a topic; a broker id, or "" for the cluster default
    configs: tuple[AlterableConfig, ...] = ()


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsRequest:
    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False


@dataclass(slots=True)
class AlterConfigsResourceResponse:
    resource_type: int
    resource_name: str
    error: Errors = Errors.NONE
    error_message: str | None = None


@dataclass(slots=True)
class IncrementalAlterConfigsResponse:
    responses: tuple[AlterConfigsResourceResponse, ...]
    error: Errors = Errors.NONE
    error_message: str | None = None


# ------------------------------------------------------------------ AlterClientQuotas


@dataclass(frozen=True, slots=True)
class ClientQuotaOp:
    """Set ``key`` to ``value``, or remove it (Kafka's OpData)."""

    key: str
    value: float = 0.0
    remove: bool = False


@dataclass(frozen=True, slots=True)
class ClientQuotaAlteration:
    """One entity's changes (Kafka's EntryData): ``entity`` as sent, each
    component (entity type, name or None for the default)."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[ClientQuotaOp, ...]


@dataclass(frozen=True, slots=True)
class AlterClientQuotasRequest:
    entries: tuple[ClientQuotaAlteration, ...]
    validate_only: bool = False


@dataclass(slots=True)
class ClientQuotaEntryResponse:
    entity: tuple[tuple[str, str | None], ...]
    error: Errors = Errors.NONE
    error_message: str | None = None


@dataclass(slots=True)
class AlterClientQuotasResponse:
    entries: tuple[ClientQuotaEntryResponse, ...]
    error: Errors = Errors.NONE
    error_message: str | None = None


# ------------------------------------------------------------------ ACLs


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class CreateAclsRequest:
    creations: tuple[StandardAcl, ...]


@dataclass(slots=True)
class AclCreationResult:
    error: Errors = Errors.NONE
    error_message: str | None = None


@dataclass(slots=True)
class CreateAclsResponse:
    """One result per creation, in the request's order."""

    results: tuple[AclCreationResult, ...]


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class DeleteAclsRequest:
    filters: tuple[AclBindingFilter, ...]


@dataclass(slots=True)
class DeleteAclsFilterResult:
    """The bindings one filter matched (each deleted once per request)."""

    error: Errors = Errors.NONE
    error_message: str | None = None
    matching_acls: tuple[StandardAcl, ...] = ()


@dataclass(slots=True)
class DeleteAclsResponse:
    filter_results: tuple[DeleteAclsFilterResult, ...]


# ------------------------------------------------------------------ result


@dataclass(slots=True)
class ControllerResult:
    """Kafka's ``ControllerResult``: the records to commit, and the answer to
    give once they have committed. Records of one result commit together."""

    records: tuple[Record, ...]
    response: object = None
    # For PartitionChangeRecords whose effect the handler already computed:
    # id(record) -> (registration before, registration after). The controller's
    # view and the leader's own apply reuse them instead of merging again
    # (ImageDelta.replay_known_change); valid while ``records`` lives.
    merged: dict[int, tuple[PartitionRegistration, PartitionRegistration]] | None = None
