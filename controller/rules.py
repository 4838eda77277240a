"""Every check that can refuse, once: the stable ``rule`` ids refusals carry.

Each refusal the controller gives (a whole request, or one entry of it: a
partition of AlterPartition, a topic of CreateTopics, a resource of configs,
an ACL, a quota entity) names the check that refused it with an id of this
table, ``<source>.<what>`` in lowercase: the KIP that made the rule where one
did (``kip-841.replica-fenced``), otherwise the request or the Kafka concept it
belongs to (``topic.name-invalid``). The ids are a contract: clients, the
refusal ring (``controller/refusals.py``) and the operator's ``explain`` read
them, so an id is never reused for another check; a new check gets a new id.

Per id: the error code Kafka answers (the first of ``codes`` for the current
request version), what it checks, where Kafka checks it (class and method, as
docs/kafka-rules.md cites them), and the log invariant it guards, where the
log's audit (``metadata_records/log_invariants.py``) checks the same rule
after the fact. The invariants' ids are of the same space and scheme, and
never one of these: a refusal's id names what a request got wrong, an
invariant's what holds in the log (docs/rules.md lists both tables).
``tests/controller/test_rules.py`` walks every id here with a request that
hits it, and fails on a refusal whose id is not here.
"""

from __future__ import annotations

from typing import NamedTuple

from metadata_records.errors import Errors as E


class Rule(NamedTuple):
    codes: tuple[E, ...]  # the first for the current request version
    checks: str  # what it refuses, for people
    source: str  # Kafka's class.method (or our reason where Kafka has none)
    guards: str | None = None  # the log invariant (log_invariants.RULES key) it keeps true


_R = Rule
_CC = "ClusterControlManager"
_RC = "ReplicationControlManager"
_CV = "ControllerConfigurationValidator.validate"
_KRC = "KafkaRaftClient"
_UVH = "UpdateVoterHandler.handleUpdateVoterRequest"

RULES: dict[str, Rule] = {
    # ---------------------------------------------------------------- registration
    "registration.cluster-id-mismatch": _R(
        (E.INCONSISTENT_CLUSTER_ID,),
        "the broker's cluster id is this cluster's",
        f"{_CC}.registerBroker",
    ),
    "registration.session-still-valid": _R(
        (E.DUPLICATE_BROKER_REGISTRATION,),
        "a new incarnation of a broker id whose session is still valid waits for it to expire",
        f"{_CC}.registerBroker",
    ),
    "registration.zk-broker": _R(
        (E.BROKER_ID_NOT_REGISTERED,),
        "ZooKeeper-migrating brokers are not registered",
        f"{_CC}.registerBroker",
    ),
    "registration.listener-protocol-unknown": _R(
        (E.INVALID_REQUEST,),
        "every listener names a known security protocol",
        "ListenerInfo.fromBrokerRegistrationRequest",
    ),
    "registration.listener-name-duplicate": _R(
        (E.INVALID_REQUEST,),
        "listener names are unique (the record keys them by name)",
        "ListenerInfo.fromBrokerRegistrationRequest",
    ),
    "registration.feature-unsupported": _R(
        (E.UNSUPPORTED_VERSION,),
        "the broker supports every finalized feature's level",
        f"{_CC}.processRegistrationFeature",
    ),
    # ---------------------------------------------------------------- broker epochs, sessions
    "kip-380.broker-not-registered": _R(
        (E.STALE_BROKER_EPOCH,),
        "the broker sending a request is registered",
        f"{_CC}.checkBrokerEpoch",
        "kip-380.change-at-current-epoch",
    ),
    "kip-380.broker-epoch-mismatch": _R(
        (E.STALE_BROKER_EPOCH,),
        "the request's broker epoch is the broker's registered epoch",
        f"{_CC}.checkBrokerEpoch",
        "kip-380.change-at-current-epoch",
    ),
    "heartbeat.broker-not-registered": _R(
        (E.STALE_BROKER_EPOCH,),
        "a heartbeat comes from a registered broker",
        f"{_RC}.processBrokerHeartbeat",
        "kip-380.change-at-current-epoch",
    ),
    "heartbeat.expired-in-queue": _R(
        (E.REQUEST_TIMED_OUT,),
        "a heartbeat that waited past its deadline only proves the broker alive",
        "QuorumController.processExpiredBrokerHeartbeat",
    ),
    "unregister.broker-not-registered": _R(
        (E.BROKER_ID_NOT_REGISTERED,),
        "the broker to unregister is registered",
        f"{_RC}.unregisterBroker",
    ),
    "producer-ids.exhausted": _R(
        (E.UNKNOWN_SERVER_ERROR,),
        "the next producer id block fits in an int64",
        "ProducerIdControlManager.generateNextProducerId",
        "producer-ids.blocks-never-overlap",
    ),
    # ---------------------------------------------------------------- AlterPartition (kafka-rules 2.2)
    "alter-partition.topic-unknown": _R(
        (E.UNKNOWN_TOPIC_ID, E.UNKNOWN_TOPIC_OR_PARTITION),
        "the topic (by id from v2, by name before) exists",
        f"{_RC}.alterPartition",
    ),
    "alter-partition.partition-unknown": _R(
        (E.UNKNOWN_TOPIC_OR_PARTITION,), "the partition exists", f"{_RC}.alterPartition"
    ),
    "kip-497.leader-epoch-newer": _R(
        (E.NOT_CONTROLLER,),
        "the leader epoch is not newer than this controller's",
        f"{_RC}.validateAlterPartitionData",
    ),
    "kip-497.partition-epoch-newer": _R(
        (E.NOT_CONTROLLER,),
        "the partition epoch is not newer than this controller's",
        f"{_RC}.validateAlterPartitionData",
    ),
    "kip-497.leader-epoch-stale": _R(
        (E.FENCED_LEADER_EPOCH,),
        "the leader epoch is the partition's current one",
        f"{_RC}.validateAlterPartitionData",
    ),
    "kip-497.not-leader": _R(
        (E.INVALID_REQUEST,),
        "the requesting broker leads the partition",
        f"{_RC}.validateAlterPartitionData",
    ),
    "kip-497.partition-epoch-stale": _R(
        (E.INVALID_UPDATE_VERSION,),
        "the partition epoch is the partition's current one",
        f"{_RC}.validateAlterPartitionData",
    ),
    "alter-partition.isr-invalid": _R(
        (E.INVALID_REQUEST,),
        "the new ISR holds distinct, non-negative replicas of the partition",
        "Replicas.validateIsr",
        "kip-841.isr-adds-only-active",
    ),
    "alter-partition.isr-without-leader": _R(
        (E.INVALID_REQUEST,), "the new ISR contains the leader", f"{_RC}.validateAlterPartitionData"
    ),
    "kip-704.recovery-state-invalid": _R(
        (E.INVALID_REQUEST,),
        "leaderRecoveryState is 0 or 1 (refuses the whole request)",
        "LeaderRecoveryState.of",
    ),
    "kip-704.recovering-isr-not-single": _R(
        (E.INVALID_REQUEST,),
        "a RECOVERING partition has an ISR of one broker",
        f"{_RC}.validateAlterPartitionData",
    ),
    "kip-704.recovered-to-recovering": _R(
        (E.INVALID_REQUEST,),
        "a RECOVERED partition does not go back to RECOVERING",
        f"{_RC}.validateAlterPartitionData",
    ),
    "kip-841.replica-not-registered": _R(
        (E.INELIGIBLE_REPLICA, E.OPERATION_NOT_ATTEMPTED),
        "every new ISR member is registered",
        f"{_RC}.validateAlterPartitionData",
        "kip-841.isr-adds-only-active",
    ),
    "kip-841.replica-in-controlled-shutdown": _R(
        (E.INELIGIBLE_REPLICA, E.OPERATION_NOT_ATTEMPTED),
        "no new ISR member is in controlled shutdown",
        f"{_RC}.validateAlterPartitionData",
        "kip-841.isr-adds-only-active",
    ),
    "kip-841.replica-fenced": _R(
        (E.INELIGIBLE_REPLICA, E.OPERATION_NOT_ATTEMPTED),
        "no new ISR member is fenced",
        f"{_RC}.validateAlterPartitionData",
        "kip-841.isr-adds-only-active",
    ),
    "kip-903.stale-broker-epoch": _R(
        (E.INELIGIBLE_REPLICA, E.OPERATION_NOT_ATTEMPTED),
        "each new ISR member's broker epoch (newIsrWithEpochs) is its registered one",
        f"{_RC}.validateAlterPartitionData",
        "kip-841.isr-adds-only-active",
    ),
    "alter-partition.new-leader-elected": _R(
        (E.NEW_LEADER_ELECTED, E.FENCED_LEADER_EPOCH),
        "the ISR change was written but completed a reassignment that moved the leader",
        f"{_RC}.alterPartition",
    ),
    # ---------------------------------------------------------------- topics
    "user-op.too-many-records": _R(
        (E.POLICY_VIOLATION,),
        "one operator request writes at most 10,000 records",
        "QuorumController.MAX_RECORDS_PER_USER_OP",
    ),
    "topic.too-many-partitions": _R(
        (E.POLICY_VIOLATION,),
        "one request creates at most 10,000 partitions",
        f"{_RC}.createTopics",
    ),
    "topic.name-duplicate": _R(
        (E.INVALID_REQUEST,),
        "a topic is named once in a request",
        "ControllerApis.createTopics / deleteTopics",
    ),
    "topic.name-invalid": _R(
        (E.INVALID_TOPIC_EXCEPTION,), "the topic name is legal", "Topic.validate"
    ),
    "topic.already-exists": _R(
        (E.TOPIC_ALREADY_EXISTS,), "no topic has that name", f"{_RC}.createTopic"
    ),
    "topic.name-collides": _R(
        (E.INVALID_TOPIC_EXCEPTION,),
        "no topic name differs from it only by '.' and '_'",
        f"{_RC}.createTopic",
    ),
    "topic.config-invalid": _R(
        (E.INVALID_CONFIG,), "the topic's configs are known keys with valid values", f"{_CV}"
    ),
    "topic.unknown": _R(
        (E.UNKNOWN_TOPIC_OR_PARTITION,),
        "the topic exists",
        f"{_RC}.deleteTopics / createPartitions / alterPartitionReassignments / electLeaders; "
        f"{_CV}",
    ),
    "partition.unknown": _R(
        (E.UNKNOWN_TOPIC_OR_PARTITION,),
        "the partition exists",
        f"{_RC}.alterPartitionReassignment / electLeader",
    ),
    "assignment.replication-factor-set": _R(
        (E.INVALID_REQUEST,),
        "a manual assignment leaves replicationFactor at -1",
        f"{_RC}.createTopic",
    ),
    "assignment.num-partitions-set": _R(
        (E.INVALID_REQUEST,), "a manual assignment leaves numPartitions at -1", f"{_RC}.createTopic"
    ),
    "assignment.partition-repeated": _R(
        (E.INVALID_REPLICA_ASSIGNMENT,), "each partition is assigned once", f"{_RC}.createTopic"
    ),
    "assignment.not-consecutive": _R(
        (E.INVALID_REPLICA_ASSIGNMENT,),
        "assigned partitions are 0, 1, 2, ...",
        f"{_RC}.createTopic",
    ),
    "assignment.empty": _R(
        (E.INVALID_REPLICA_ASSIGNMENT,),
        "a replica list is not empty",
        f"{_RC}.validateManualPartitionAssignment",
    ),
    "assignment.broker-not-registered": _R(
        (E.INVALID_REPLICA_ASSIGNMENT,),
        "every assigned broker is registered",
        f"{_RC}.validateManualPartitionAssignment",
    ),
    "assignment.broker-repeated": _R(
        (E.INVALID_REPLICA_ASSIGNMENT,),
        "a broker appears once in a replica list",
        f"{_RC}.validateManualPartitionAssignment",
    ),
    "assignment.replication-factor-inconsistent": _R(
        (E.INVALID_REPLICA_ASSIGNMENT,),
        "every partition of a topic has as many replicas",
        f"{_RC}.validateManualPartitionAssignment",
    ),
    "assignment.all-replicas-inactive": _R(
        (E.INVALID_REPLICA_ASSIGNMENT,),
        "an assigned partition has an active replica to lead it",
        f"{_RC}.createTopic",
        "kip-841.isr-adds-only-active",
    ),
    "assignment.count-mismatch": _R(
        (E.INVALID_REPLICA_ASSIGNMENT,),
        "one assignment per partition added",
        f"{_RC}.createPartitions",
    ),
    "placement.replication-factor-invalid": _R(
        (E.INVALID_REPLICATION_FACTOR,), "replicationFactor is positive or -1", f"{_RC}.createTopic"
    ),
    "placement.partitions-invalid": _R(
        (E.INVALID_PARTITIONS,), "numPartitions is positive or -1", f"{_RC}.createTopic"
    ),
    "placement.no-brokers": _R(
        (E.INVALID_REPLICATION_FACTOR,),
        "some broker is registered to place replicas on",
        f"{_RC}.createTopic",
    ),
    "placement.all-brokers-inactive": _R(
        (E.INVALID_REPLICATION_FACTOR,),
        "a placed partition has an active replica to lead it",
        f"{_RC}.createTopic",
        "kip-841.isr-adds-only-active",
    ),
    "placement.not-enough-brokers": _R(
        (E.INVALID_REPLICATION_FACTOR,),
        "enough usable brokers for the replication factor",
        "StripedReplicaPlacer.place",
    ),
    "partitions.not-an-increase": _R(
        (E.INVALID_PARTITIONS,),
        "the new partition count is larger than the current one",
        f"{_RC}.createPartitions",
    ),
    # ---------------------------------------------------------------- reassignments, elections
    "reassignment.none-in-progress": _R(
        (E.NO_REASSIGNMENT_IN_PROGRESS,),
        "a cancelled reassignment is in progress",
        f"{_RC}.cancelPartitionReassignment",
    ),
    "reassignment.revert-unclean": _R(
        (E.INVALID_REPLICA_ASSIGNMENT,),
        "cancelling does not need an unclean election unless the topic allows one",
        f"{_RC}.cancelPartitionReassignment",
    ),
    "election.type-unknown": _R(
        (E.INVALID_REQUEST,),
        "the election type is 0 (preferred) or 1 (unclean)",
        f"{_RC}.electLeaders",
    ),
    "election.not-needed": _R(
        (E.ELECTION_NOT_NEEDED,),
        "the partition is not already led by its preferred replica (unclean: has no leader)",
        f"{_RC}.electLeader",
    ),
    "election.preferred-unavailable": _R(
        (E.PREFERRED_LEADER_NOT_AVAILABLE,),
        "the preferred replica is in the ISR and active",
        "PartitionChangeBuilder.electPreferredLeader",
    ),
    "election.no-eligible-leader": _R(
        (E.ELIGIBLE_LEADERS_NOT_AVAILABLE,),
        "some replica is active to lead",
        "PartitionChangeBuilder.electAnyLeader",
    ),
    # ---------------------------------------------------------------- configs
    "config.resource-duplicate": _R(
        (E.INVALID_REQUEST,),
        "a resource is named once in a request",
        "ControllerApis.incrementalAlterConfigs",
    ),
    "config.key-duplicate": _R(
        (E.INVALID_REQUEST,),
        "a config key is named once per resource",
        "ConfigurationControlManager.incrementalAlterConfig",
    ),
    "config.value-null": _R(
        (E.INVALID_REQUEST,),
        "only DELETE has a null value",
        "ConfigurationControlManager.incrementalAlterConfig",
    ),
    "config.value-invalid": _R(
        (E.INVALID_CONFIG,), "the resource's configs after the change are valid", f"{_CV}"
    ),
    "config.default-topic": _R((E.INVALID_REQUEST,), "a topic resource names a topic", f"{_CV}"),
    "config.broker-name-invalid": _R(
        (E.INVALID_REQUEST,), "a broker resource is a broker id in plain form, or empty", f"{_CV}"
    ),
    "config.broker-id-negative": _R(
        (E.INVALID_REQUEST,), "a broker resource's id is not negative", f"{_CV}"
    ),
    "config.broker-logger": _R(
        (E.INVALID_REQUEST,), "BROKER_LOGGER configs go to the broker, not the log", f"{_CV}"
    ),
    "config.resource-type-unknown": _R(
        (E.INVALID_REQUEST,), "the resource type is TOPIC (2) or BROKER (4)", f"{_CV}"
    ),
    "config.not-list": _R(
        (E.INVALID_CONFIG,),
        "APPEND and SUBTRACT apply to LIST configs only",
        "ConfigurationControlManager.incrementalAlterConfigResource",
    ),
    "config.op-unknown": _R(
        (E.INVALID_REQUEST,),
        "the operation is SET, DELETE, APPEND or SUBTRACT",
        "AlterConfigOp.OpType.forId",
    ),
    # ---------------------------------------------------------------- features
    "feature.upgrade-type-unknown": _R(
        (E.INVALID_UPDATE_VERSION,),
        "the upgrade type is known",
        "FeatureControlManager.updateFeature",
    ),
    "feature.level-negative": _R(
        (E.INVALID_UPDATE_VERSION,),
        "a level is not negative",
        "FeatureControlManager.updateFeature",
    ),
    "feature.level-unsupported": _R(
        (E.INVALID_UPDATE_VERSION,),
        "the controller and every registered broker support the level",
        "FeatureControlManager.reasonNotSupported",
    ),
    "feature.downgrade-without-type": _R(
        (E.INVALID_UPDATE_VERSION,),
        "a downgrade says it is one (safe or unsafe)",
        "FeatureControlManager.updateFeature",
    ),
    "feature.downgrade-to-newer": _R(
        (E.INVALID_UPDATE_VERSION,),
        "a downgrade goes to an older level",
        "FeatureControlManager.updateFeature",
    ),
    "kip-966.feature-dependency": _R(
        (E.INVALID_UPDATE_VERSION,),
        "eligible.leader.replicas.version and metadata.version stay compatible",
        "FeatureControlManager.updateFeature (Feature.validateVersion)",
    ),
    "feature.unknown": _R(
        (E.INVALID_UPDATE_VERSION,), "the feature is known", "Features.featureFromName"
    ),
    "metadata-version.downgrade-lossy": _R(
        (E.INVALID_UPDATE_VERSION,),
        "a downgrade does not cross a level that changed the metadata format",
        "FeatureControlManager.updateMetadataVersion",
    ),
    # ---------------------------------------------------------------- client quotas
    "quota.entity-duplicate": _R(
        (E.INVALID_REQUEST,),
        "an entity is named once in a request",
        "ClientQuotaControlManager.alterClientQuotas",
    ),
    "quota.entity-invalid": _R(
        (E.INVALID_REQUEST,),
        "the entity's types combine and its ip is an address",
        "ClientQuotaControlManager.validateEntity",
        "quota.record-valid",
    ),
    "quota.key-duplicate": _R(
        (E.INVALID_REQUEST,),
        "a quota key is set once per entity",
        "ClientQuotaControlManager.alterClientQuotaEntity",
    ),
    "quota.value-invalid": _R(
        (E.INVALID_REQUEST,),
        "the key suits the entity and its value suits the key",
        "ClientQuotaControlManager.alterClientQuotaEntity",
        "quota.record-valid",
    ),
    # ---------------------------------------------------------------- SCRAM credentials (KIP-554)
    "scram.user-twice": _R(
        (E.DUPLICATE_RESOURCE,),
        "a user is altered once in a request (deletions and upsertions together)",
        "ScramControlManager.alterCredentials",
    ),
    "scram.metadata-version-too-low": _R(
        (E.UNSUPPORTED_VERSION,),
        "metadata.version is at least 3.5-IV2",
        "ScramControlManager.alterCredentials (MetadataVersion.isScramSupported)",
    ),
    "scram.user-empty": _R(
        (E.UNACCEPTABLE_CREDENTIAL,),
        "the user name is not empty",
        "ScramControlManager.validateScramUsernameAndMechanism",
    ),
    "scram.mechanism-unknown": _R(
        (E.UNSUPPORTED_SASL_MECHANISM,),
        "the mechanism is SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2)",
        "ScramControlManager.validateScramUsernameAndMechanism",
    ),
    "scram.credential-not-found": _R(
        (E.RESOURCE_NOT_FOUND,),
        "a credential to delete exists",
        "ScramControlManager.validateDeletion",
    ),
    "scram.iterations-too-few": _R(
        (E.UNACCEPTABLE_CREDENTIAL,),
        "iterations are at least 4096",
        "ScramControlManager.validateUpsertion (ScramMechanism.minIterations)",
    ),
    "scram.iterations-too-many": _R(
        (E.UNACCEPTABLE_CREDENTIAL,),
        "iterations are at most 16384",
        "ScramControlManager.validateUpsertion (MAX_ITERATIONS)",
    ),
    "scram.salted-password-empty": _R(
        (E.UNACCEPTABLE_CREDENTIAL,),
        "the salted password is not empty",
        "ScramControlManager.finishUpsertion (Kafka: the HMAC's empty key, UNKNOWN_SERVER_ERROR)",
    ),
    # ---------------------------------------------------------------- delegation tokens (KIP-48)
    "delegation-token.request-not-allowed": _R(
        (E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,),
        "the caller authenticated (auth on: a bearer token or a client certificate)",
        "ControllerApis.allowTokenRequests (a PLAINTEXT listener's caller)",
    ),
    "delegation-token.auth-disabled": _R(
        (E.DELEGATION_TOKEN_AUTH_DISABLED,),
        "the voters have a delegation token secret (--delegation-token-secret-file)",
        "DelegationTokenControlManager.isEnabled",
    ),
    "delegation-token.metadata-version-too-low": _R(
        (E.UNSUPPORTED_VERSION,),
        "metadata.version supports delegation tokens (3.6-IV0 here, decisions.md 159)",
        "DelegationTokenControlManager (MetadataVersion.isDelegationTokenSupported)",
    ),
    "delegation-token.renewer-not-user": _R(
        (E.INVALID_PRINCIPAL_TYPE,),
        "every renewer of a new token is a User principal",
        "DelegationTokenControlManager.createDelegationToken",
    ),
    "delegation-token.not-found": _R(
        (E.DELEGATION_TOKEN_NOT_FOUND,),
        "a token has the HMAC to renew or expire",
        "DelegationTokenControlManager.getToken",
    ),
    "delegation-token.expired": _R(
        (E.DELEGATION_TOKEN_EXPIRED,),
        "the token to renew or expire is before its expiry and its max time",
        "DelegationTokenControlManager.renewDelegationToken",
    ),
    "delegation-token.owner-mismatch": _R(
        (E.DELEGATION_TOKEN_OWNER_MISMATCH,),
        "the caller renewing or expiring a token is its owner or one of its renewers",
        "DelegationTokenControlManager.allowedToRenew",
    ),
    # ---------------------------------------------------------------- ACLs
    "acl.invalid": _R(
        (E.INVALID_REQUEST,),
        "a binding to create is concrete and valid",
        "AclControlManager.validateNewAcl",
        "acl.record-valid",
    ),
    "acl.filter-invalid": _R(
        (E.INVALID_REQUEST,), "a delete filter has no UNKNOWN field", "AclControlManager.deleteAcls"
    ),
    # ---------------------------------------------------------------- voter updates (KIP-853)
    # Decided by the quorum, not the controller (quorum/membership.py
    # check_update, rule 6); kept here so that every refusal's id is in one table.
    "kip-853.cluster-id-mismatch": _R(
        (E.INCONSISTENT_CLUSTER_ID,),
        "a voter asking to be updated is of this cluster",
        f"{_KRC}.handleUpdateVoterRequest (hasValidClusterId)",
    ),
    "kip-853.voter-directory-id-missing": _R(
        (E.INVALID_REQUEST,),
        "an updated voter is named with its directory id",
        f"{_KRC}.handleUpdateVoterRequest",
    ),
    "kip-853.voter-endpoint-invalid": _R(
        (E.INVALID_REQUEST,),
        "an updated voter's Raft address is HOST:PORT",
        f"{_KRC}.handleUpdateVoterRequest (Endpoints: the default listener)",
    ),
    "kip-853.kraft-version-range-invalid": _R(
        (E.INVALID_REQUEST,),
        "the voter's supported kraft.version range is 0 or more, min at most max",
        f"{_KRC}.handleUpdateVoterRequest",
    ),
    "kip-853.voter-change-pending": _R(
        (E.REQUEST_TIMED_OUT,),
        "no other voter change is in flight",
        f"{_UVH} (isOperationPending)",
    ),
    "kip-853.leader-not-committed": _R(
        (E.REQUEST_TIMED_OUT,),
        "the leader has committed an entry of its term (its high watermark is known)",
        f"{_UVH} (highWatermark)",
    ),
    "kip-853.kraft-version-0": _R(
        (E.UNSUPPORTED_VERSION,),
        "kraft.version is 1: a voter set is in the log",
        f"{_UVH} (isReconfigSupported)",
    ),
    "kip-853.voter-set-uncommitted": _R(
        (E.REQUEST_TIMED_OUT,),
        "the last voter set is committed",
        f"{_UVH} (lastVoterSetEntry)",
    ),
    "kip-853.kraft-version-unsupported": _R(
        (E.INVALID_REQUEST,),
        "the voter's supported kraft.version range includes the cluster's",
        f"{_UVH} (validVersionRange)",
    ),
    "kip-853.voter-not-found": _R(
        (E.VOTER_NOT_FOUND,),
        "the node id is a voter's",
        "VoterSet.updateVoter",
    ),
    "kip-853.voter-directory-mismatch": _R(
        (E.VOTER_NOT_FOUND,),
        "the voter of that node id votes with the directory named",
        "VoterSet.updateVoter (VoterNode.isVoter)",
    ),
    "kip-853.voter-endpoint-taken": _R(
        (E.INVALID_REQUEST,),
        "no other voter has the Raft address (pysyncobj names a node by it)",
        "ours: Kafka names a voter by id, pysyncobj by address (docs/decisions.md 160)",
    ),
    "kip-853.voter-running-elsewhere": _R(
        (E.INVALID_REQUEST,),
        "an operator does not move a voter that runs, connected, at another address",
        "ours: Kafka's voter sends UpdateRaftVoter itself, its own endpoint wins "
        "(docs/decisions.md 160)",
    ),
}


def is_rule(rule_id: str) -> bool:
    """True if ``rule_id`` is one of the table's ids."""
    return rule_id in RULES
