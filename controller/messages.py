"""Requests the controller decides and the responses it gives (Kafka's RPC data).

Plain ``msgspec.Struct``s, built in C (decision 128): the HTTP layer parses
and range-checks input into the (frozen) requests; the controller never sees
JSON. Responses are not frozen, but nothing changes them after the
controller returns. None holds anything but values, tuples of them and other
messages, so none can be in a cycle (``gc=False``). Field names follow
Kafka's schemas.
"""

from __future__ import annotations

import msgspec

from metadata_records.acls import AclBindingFilter, StandardAcl
from metadata_records.errors import Errors
from metadata_records.image import PartitionRegistration
from metadata_records.records import Endpoint, FeatureRange, Record

# ------------------------------------------------------------------ brokers


class BrokerRegistrationRequest(msgspec.Struct, frozen=True, gc=False):
    broker_id: int
    cluster_id: str
    incarnation_id: str
    listeners: tuple[Endpoint, ...] = ()
    features: tuple[FeatureRange, ...] = ()
    rack: str | None = None
    is_migrating_zk_broker: bool = False
    previous_broker_epoch: int = -1


class BrokerRegistrationResponse(msgspec.Struct, gc=False):
    error: Errors
    error_message: str | None = None
    broker_epoch: int = -1
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class BrokerHeartbeatRequest(msgspec.Struct, frozen=True, gc=False):
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shut_down: bool = False


class BrokerHeartbeatResponse(msgspec.Struct, gc=False):
    error: Errors
    error_message: str | None = None
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class UnregisterBrokerRequest(msgspec.Struct, frozen=True, gc=False):
    broker_id: int


class UnregisterBrokerResponse(msgspec.Struct, gc=False):
    error: Errors
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class AllocateProducerIdsRequest(msgspec.Struct, frozen=True, gc=False):
    broker_id: int
    broker_epoch: int


class AllocateProducerIdsResponse(msgspec.Struct, gc=False):
    error: Errors
    error_message: str | None = None
    producer_id_start: int = 0  # Kafka's defaults on an error: 0 and 0
    producer_id_len: int = 0
    rule: str | None = None  # the refusing check's id (controller/rules.py)


# ------------------------------------------------------------------ AlterPartition


class BrokerState(msgspec.Struct, frozen=True, gc=False):
    """One member of ``newIsrWithEpochs`` (KIP-903); epoch -1 skips the check."""

    broker_id: int
    broker_epoch: int = -1


class AlterPartitionPartition(msgspec.Struct, frozen=True, gc=False):
    partition_index: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...] = ()  # versions 0-2
    new_isr_with_epochs: tuple[BrokerState, ...] = ()  # version 3
    leader_recovery_state: int = 0  # version 1+


class AlterPartitionTopic(msgspec.Struct, frozen=True, gc=False):
    partitions: tuple[AlterPartitionPartition, ...]
    topic_name: str | None = None  # versions 0-1
    topic_id: str | None = None  # version 2+


class AlterPartitionRequest(msgspec.Struct, frozen=True, gc=False):
    broker_id: int
    broker_epoch: int
    topics: tuple[AlterPartitionTopic, ...]
    version: int = 3


class AlterPartitionPartitionResult(msgspec.Struct, gc=False):
    partition_index: int
    error: Errors = Errors.NONE
    error_message: str | None = None
    # Kafka's schema has no defaults for these, so error entries carry 0.
    leader_id: int = 0
    leader_epoch: int = 0
    isr: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    partition_epoch: int = 0
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class AlterPartitionTopicResult(msgspec.Struct, gc=False):
    partitions: tuple[AlterPartitionPartitionResult, ...]
    topic_name: str | None = None
    topic_id: str | None = None


class AlterPartitionResponse(msgspec.Struct, gc=False):
    error: Errors
    error_message: str | None = None
    topics: tuple[AlterPartitionTopicResult, ...] = ()
    rule: str | None = None  # the refusing check's id (controller/rules.py)


# ------------------------------------------------------------------ topics


class CreatableTopic(msgspec.Struct, frozen=True, gc=False):
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()  # (partitionIndex, brokerIds)
    configs: tuple[tuple[str, str | None], ...] = ()


class CreateTopicsRequest(msgspec.Struct, frozen=True, gc=False):
    topics: tuple[CreatableTopic, ...]
    validate_only: bool = False


class CreatableTopicResult(msgspec.Struct, gc=False):
    name: str
    error: Errors = Errors.NONE
    error_message: str | None = None
    topic_id: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class CreateTopicsResponse(msgspec.Struct, gc=False):
    topics: tuple[CreatableTopicResult, ...]
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class DeleteTopicsRequest(msgspec.Struct, frozen=True, gc=False):
    names: tuple[str, ...]


class DeletableTopicResult(msgspec.Struct, gc=False):
    name: str
    error: Errors = Errors.NONE
    error_message: str | None = None
    topic_id: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class DeleteTopicsResponse(msgspec.Struct, gc=False):
    topics: tuple[DeletableTopicResult, ...]
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class CreatePartitionsRequest(msgspec.Struct, frozen=True, gc=False):
    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None  # one broker list per new partition


class CreatePartitionsResponse(msgspec.Struct, gc=False):
    name: str
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


# ------------------------------------------------------------------ reassignments, elections


class ReassignablePartition(msgspec.Struct, frozen=True, gc=False):
    partition_index: int
    replicas: tuple[int, ...] | None  # None cancels


class ReassignableTopic(msgspec.Struct, frozen=True, gc=False):
    name: str
    partitions: tuple[ReassignablePartition, ...]


class AlterPartitionReassignmentsRequest(msgspec.Struct, frozen=True, gc=False):
    topics: tuple[ReassignableTopic, ...]


class PartitionResult(msgspec.Struct, gc=False):
    partition_index: int
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class TopicPartitionsResult(msgspec.Struct, gc=False):
    name: str
    partitions: tuple[PartitionResult, ...]


class AlterPartitionReassignmentsResponse(msgspec.Struct, gc=False):
    topics: tuple[TopicPartitionsResult, ...]
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


PREFERRED = 0
UNCLEAN = 1


class ElectLeadersRequest(msgspec.Struct, frozen=True, gc=False):
    election_type: int  # 0 preferred, 1 unclean
    # (topic, partitions); None means every partition of every topic.
    topic_partitions: tuple[tuple[str, tuple[int, ...]], ...] | None = None


class ElectLeadersResponse(msgspec.Struct, gc=False):
    topics: tuple[TopicPartitionsResult, ...]
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


# ------------------------------------------------------------------ features


# Kafka's FeatureUpdate.UpgradeType codes (UpdateFeaturesRequest v1+ ``UpgradeType``);
# any other code is UNKNOWN (0) and refused.
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3


class UpdateFeaturesRequest(msgspec.Struct, frozen=True, gc=False):
    name: str
    level: int  # Kafka's MaxVersionLevel; 0 asks to remove the feature
    upgrade_type: int = UPGRADE
    validate_only: bool = False


class UpdateFeaturesResponse(msgspec.Struct, gc=False):
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


# ------------------------------------------------------------------ configs


class AlterableConfig(msgspec.Struct, frozen=True, gc=False):
    name: str
    config_operation: int  # Kafka's AlterConfigOp.OpType: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
    value: str | None = None


class AlterConfigsResource(msgspec.Struct, frozen=True, gc=False):
    resource_type: int  # Kafka's ConfigResource.Type: 2 TOPIC, 4 BROKER
    resource_name: str  # a topic; a broker id, or "" for the cluster default
    configs: tuple[AlterableConfig, ...] = ()


class IncrementalAlterConfigsRequest(msgspec.Struct, frozen=True, gc=False):
    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False


class AlterConfigsResourceResponse(msgspec.Struct, gc=False):
    resource_type: int
    resource_name: str
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class IncrementalAlterConfigsResponse(msgspec.Struct, gc=False):
    responses: tuple[AlterConfigsResourceResponse, ...]
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


# ------------------------------------------------------------------ AlterClientQuotas


class ClientQuotaOp(msgspec.Struct, frozen=True, gc=False):
    """Set ``key`` to ``value``, or remove it (Kafka's OpData)."""

    key: str
    value: float = 0.0
    remove: bool = False


class ClientQuotaAlteration(msgspec.Struct, frozen=True, gc=False):
    """One entity's changes (Kafka's EntryData): ``entity`` as sent, each
    component (entity type, name or None for the default)."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[ClientQuotaOp, ...]


class AlterClientQuotasRequest(msgspec.Struct, frozen=True, gc=False):
    entries: tuple[ClientQuotaAlteration, ...]
    validate_only: bool = False


class ClientQuotaEntryResponse(msgspec.Struct, gc=False):
    entity: tuple[tuple[str, str | None], ...]
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class AlterClientQuotasResponse(msgspec.Struct, gc=False):
    entries: tuple[ClientQuotaEntryResponse, ...]
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


# ------------------------------------------------------------------ SCRAM credentials (KIP-554)


class ScramCredentialDeletion(msgspec.Struct, frozen=True, gc=False):
    name: str
    mechanism: int  # Kafka's ScramMechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512


class ScramCredentialUpsertion(msgspec.Struct, frozen=True, gc=False):
    """The client's salt and salted password (never the password); the
    controller derives the keys it stores (metadata_records/scram.py)."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:  # no secret in a log line or a failed assert
        return f"ScramCredentialUpsertion(name={self.name!r}, mechanism={self.mechanism})"


class AlterUserScramCredentialsRequest(msgspec.Struct, frozen=True, gc=False):
    deletions: tuple[ScramCredentialDeletion, ...] = ()
    upsertions: tuple[ScramCredentialUpsertion, ...] = ()


class AlterUserScramCredentialsResult(msgspec.Struct, gc=False):
    user: str
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class AlterUserScramCredentialsResponse(msgspec.Struct, gc=False):
    results: tuple[AlterUserScramCredentialsResult, ...]  # one per user
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None


# ------------------------------------------------------------------ delegation tokens (KIP-48)
#
# ``requester`` is the caller as a Kafka principal, ``User:<identity>``
# (api/routes/delegation_tokens.py), or None for a caller that did not
# authenticate (auth off: Kafka's PLAINTEXT listener), which may not use
# tokens. ``now_wall_ms`` is the wall clock the shell read for the request:
# token times are absolute (delegation_token_control.py).


class CreateDelegationTokenRequest(msgspec.Struct, frozen=True, gc=False):
    requester: str | None
    now_wall_ms: int
    renewers: tuple[tuple[str, str], ...] = ()  # (principalType, principalName)
    max_lifetime_ms: int = -1  # <= 0: the controller's delegation.token.max.lifetime.ms
    owner_principal_type: str | None = None  # with a name: the owner; else the requester
    owner_principal_name: str | None = None


class CreateDelegationTokenResponse(msgspec.Struct, gc=False):
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None
    principal_type: str = ""  # the owner
    principal_name: str = ""
    token_requester_principal_type: str = ""
    token_requester_principal_name: str = ""
    issue_timestamp_ms: int = -1
    expiry_timestamp_ms: int = -1
    max_timestamp_ms: int = -1
    token_id: str = ""
    hmac: bytes = b""

    def __repr__(self) -> str:  # no HMAC in a log line or a failed assert
        return (
            f"CreateDelegationTokenResponse(error={self.error.name}, rule={self.rule}, "
            f"token_id={self.token_id!r}, hmac=(redacted))"
        )


class RenewDelegationTokenRequest(msgspec.Struct, frozen=True, gc=False):
    requester: str | None
    now_wall_ms: int
    hmac: bytes
    renew_period_ms: int = -1  # <= 0: delegation.token.expiry.time.ms

    def __repr__(self) -> str:
        return f"RenewDelegationTokenRequest(requester={self.requester!r}, hmac=(redacted))"


class ExpireDelegationTokenRequest(msgspec.Struct, frozen=True, gc=False):
    requester: str | None
    now_wall_ms: int
    hmac: bytes
    expiry_time_period_ms: int = -1  # < 0: expire now (the token is removed)

    def __repr__(self) -> str:
        return f"ExpireDelegationTokenRequest(requester={self.requester!r}, hmac=(redacted))"


class DelegationTokenExpiryResponse(msgspec.Struct, gc=False):
    """Kafka's RenewDelegationTokenResponse and ExpireDelegationTokenResponse
    (the same fields)."""

    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None
    expiry_timestamp_ms: int = -1


# ------------------------------------------------------------------ ACLs


class CreateAclsRequest(msgspec.Struct, frozen=True, gc=False):
    creations: tuple[StandardAcl, ...]


class AclCreationResult(msgspec.Struct, gc=False):
    error: Errors = Errors.NONE
    error_message: str | None = None
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class CreateAclsResponse(msgspec.Struct, gc=False):
    """One result per creation, in the request's order."""

    results: tuple[AclCreationResult, ...]


class DeleteAclsRequest(msgspec.Struct, frozen=True, gc=False):
    filters: tuple[AclBindingFilter, ...]


class DeleteAclsFilterResult(msgspec.Struct, gc=False):
    """The bindings one filter matched (each deleted once per request)."""

    error: Errors = Errors.NONE
    error_message: str | None = None
    matching_acls: tuple[StandardAcl, ...] = ()
    rule: str | None = None  # the refusing check's id (controller/rules.py)


class DeleteAclsResponse(msgspec.Struct, gc=False):
    filter_results: tuple[DeleteAclsFilterResult, ...]


# ------------------------------------------------------------------ result


class ControllerResult(msgspec.Struct, gc=False):
    """Kafka's ``ControllerResult``: the records to commit, and the answer to
    give once they have committed. Records of one result commit together."""

    records: tuple[Record, ...]
    response: object = None
    # For PartitionChangeRecords whose effect the handler already computed:
    # id(record) -> (registration before, registration after). The controller's
    # view and the leader's own apply reuse them instead of merging again
    # (ImageDelta.replay_merged); valid while ``records`` lives.
    merged: dict[int, tuple[PartitionRegistration, PartitionRegistration]] | None = None
