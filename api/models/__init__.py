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
for the three broker endpoints is ``api/models_fast.py``: a quick AlterPartition
parser and dicts built directly for the heartbeat, registration and
AlterPartition answers, switched by ``models_fast.QUICK`` and checked against
these models by ``tests/test_api_models_fast.py``.

One module per area, each importing its types from ``common``:

* ``common``: duplicate keys, Kafka's scalar types, the bases, error bodies, examples
* ``brokers``: registration, heartbeat, AlterPartition, unregistration, producer
  ids, GET /v1/brokers
* ``topics``: topics, partitions, reassignments, leader elections, GET /v1/topics
* ``configs``: IncrementalAlterConfigs and described configs
* ``acls``: CreateAcls, DeleteAcls, DescribeAcls
* ``features``: UpdateFeatures
* ``quotas``: AlterClientQuotas, DescribeClientQuotas
* ``quorum``: leadership transfer, voter changes, quorum status, probes
* ``log``: the log and snapshot reads
* ``history``: the image at an offset or a time, and the diff of two
* ``what_if``: what losing brokers or racks would do (GET /v1/what-if)

Every public name is re-exported here, so ``from api import models as M`` and
``M.AlterPartitionRequest`` stay the way to name them.
"""

from .acls import (
    AclBindingOut,
    AclCreation,
    AclCreationResult,
    AclEnum,
    AclString,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilter,
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsEntryOut,
    DescribeAclsOut,
    DescribeAclsResourceOut,
)
from .brokers import (
    ALTER_PARTITION_VERSIONS,
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionPartitionData,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicData,
    AlterPartitionTopicResult,
    BrokerFeature,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerOut,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokersOut,
    BrokerState,
    EndpointOut,
    FeatureRangeOut,
    Listener,
    UnregisterBrokerResponse,
    VersionMismatch,
    unregister_broker_message,
)
from .common import (
    CLUSTER_ID,
    FEATURES_EXAMPLE,
    INT_KINDS,
    LISTENER_EXAMPLE,
    NONE,
    ORDERS_ID,
    BrokerId,
    ErrorFields,
    ErrorResponse,
    Int8,
    Int16,
    Int32,
    Int64,
    Name,
    NotControllerResponse,
    OffsetTooOldResponse,
    RequestModel,
    ResponseModel,
    RetryResponse,
    StrictBool,
    StrictStr,
    ThrottleTimeMs,
    UInt16,
    Uuid,
    duplicate_key_problem,
    error_fields,
    example,
)
from .configs import (
    AlterableConfig,
    AlterConfigsResource,
    AlterConfigsResourceResult,
    ConfigSynonymOut,
    DescribeConfigsOut,
    DescribedConfigOut,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from .features import UpdateFeaturesRequest, UpdateFeaturesResponse
from .history import (
    ImageAclOut,
    ImageChangeOut,
    ImageConfigsOut,
    ImageDiffOut,
    ImageNotYetResponse,
    ImageOut,
    ImageQuotaOut,
    ImageVoterOut,
)
from .log import BackupHeader, BackupVoterOut, LogOut, RecordOut, SnapshotOut, WhoOut
from .quorum import (
    AddVoterRequest,
    BeaconsOut,
    ElectionsOut,
    HealthOut,
    HeartbeatGapsOut,
    HttpWorkerOut,
    LeadershipWonOut,
    OrdererProcessOut,
    QuorumStatusOut,
    RemoveVoterRequest,
    TransferLeadershipRequest,
    TransferLeadershipResponse,
    VoterChangeResponse,
    VoterKeyOut,
    VoterOut,
)
from .quotas import (
    AlterClientQuotasEntryResult,
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    ClientQuotaEntryIn,
    ClientQuotaOpIn,
    DescribeClientQuotasOut,
    DescribedClientQuotaOut,
    EntityName,
    FiniteFloat,
    QuotaEntityComponent,
    QuotaEntityComponentOut,
    QuotaValueOut,
)
from .topics import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatableTopicResult,
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionOut,
    PartitionResult,
    ReassignablePartition,
    ReassignablePartitionResponse,
    ReassignableTopic,
    ReassignableTopicResponse,
    ReplicaElectionResult,
    Replicas,
    TopicConfigOut,
    TopicOut,
    TopicPartitions,
    TopicsOut,
    delete_topics_message,
)
from .what_if import WhatIfCountsOut, WhatIfOut, WhatIfPartitionOut

__all__ = [
    "ImageAclOut",
    "ImageChangeOut",
    "ImageConfigsOut",
    "ImageDiffOut",
    "ImageNotYetResponse",
    "ImageOut",
    "ImageQuotaOut",
    "ImageVoterOut",
    "WhatIfCountsOut",
    "WhatIfOut",
    "WhatIfPartitionOut",
    "BrokerId",
    "CLUSTER_ID",
    "ErrorFields",
    "ErrorResponse",
    "FEATURES_EXAMPLE",
    "INT_KINDS",
    "Int16",
    "Int32",
    "Int64",
    "Int8",
    "LISTENER_EXAMPLE",
    "NONE",
    "Name",
    "NotControllerResponse",
    "ORDERS_ID",
    "OffsetTooOldResponse",
    "RequestModel",
    "ResponseModel",
    "RetryResponse",
    "StrictBool",
    "StrictStr",
    "ThrottleTimeMs",
    "UInt16",
    "Uuid",
    "duplicate_key_problem",
    "error_fields",
    "example",
    "ALTER_PARTITION_VERSIONS",
    "AllocateProducerIdsRequest",
    "AllocateProducerIdsResponse",
    "AlterPartitionPartitionData",
    "AlterPartitionPartitionResult",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "AlterPartitionTopicData",
    "AlterPartitionTopicResult",
    "BrokerFeature",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "BrokerOut",
    "BrokerRegistrationRequest",
    "BrokerRegistrationResponse",
    "BrokerState",
    "BrokersOut",
    "EndpointOut",
    "FeatureRangeOut",
    "Listener",
    "UnregisterBrokerResponse",
    "VersionMismatch",
    "unregister_broker_message",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicConfig",
    "CreatableTopicResult",
    "CreatePartitionsAssignment",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreatePartitionsTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableTopicResult",
    "DeleteTopicsResponse",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "PartitionOut",
    "PartitionResult",
    "ReassignablePartition",
    "ReassignablePartitionResponse",
    "ReassignableTopic",
    "ReassignableTopicResponse",
    "ReplicaElectionResult",
    "Replicas",
    "TopicConfigOut",
    "TopicOut",
    "TopicPartitions",
    "TopicsOut",
    "delete_topics_message",
    "AlterConfigsResource",
    "AlterConfigsResourceResult",
    "AlterableConfig",
    "ConfigSynonymOut",
    "DescribeConfigsOut",
    "DescribedConfigOut",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "AclBindingOut",
    "AclCreation",
    "AclCreationResult",
    "AclEnum",
    "AclString",
    "CreateAclsRequest",
    "CreateAclsResponse",
    "DeleteAclsFilter",
    "DeleteAclsFilterResult",
    "DeleteAclsMatchingAcl",
    "DeleteAclsRequest",
    "DeleteAclsResponse",
    "DescribeAclsEntryOut",
    "DescribeAclsOut",
    "DescribeAclsResourceOut",
    "UpdateFeaturesRequest",
    "UpdateFeaturesResponse",
    "AlterClientQuotasEntryResult",
    "AlterClientQuotasRequest",
    "AlterClientQuotasResponse",
    "ClientQuotaEntryIn",
    "ClientQuotaOpIn",
    "DescribeClientQuotasOut",
    "DescribedClientQuotaOut",
    "EntityName",
    "FiniteFloat",
    "QuotaEntityComponent",
    "QuotaEntityComponentOut",
    "QuotaValueOut",
    "AddVoterRequest",
    "BeaconsOut",
    "ElectionsOut",
    "HealthOut",
    "HeartbeatGapsOut",
    "HttpWorkerOut",
    "LeadershipWonOut",
    "OrdererProcessOut",
    "QuorumStatusOut",
    "RemoveVoterRequest",
    "TransferLeadershipRequest",
    "TransferLeadershipResponse",
    "VoterChangeResponse",
    "VoterKeyOut",
    "VoterOut",
    "LogOut",
    "RecordOut",
    "WhoOut",
    "SnapshotOut",
    "BackupHeader",
    "BackupVoterOut",
]
