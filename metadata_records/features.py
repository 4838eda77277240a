"""Finalized feature levels, and what ``metadata.version`` decides.

metaquorum's ``metadata.version`` levels are Kafka's own feature levels
(``org.apache.kafka.server.common.MetadataVersion``), so any Kafka tool that
reads the log or the finalized features reads them right. metaquorum supports
the range whose records and rules it follows exactly, Kafka's predicates
deciding each:

* 6 (3.3-IV2) is the lowest: BrokerRegistrationChangeRecord, not
  Fence/UnfenceBrokerRecord (which metaquorum never writes); controlled
  shutdown is soft state (before KIP-841); RegisterBrokerRecord v0.
* 7 (3.3-IV3): KIP-841, RegisterBrokerRecord v1 and
  BrokerRegistrationChangeRecord v1 persist ``inControlledShutdown``.
* 8 (3.4-IV0) and up: RegisterBrokerRecord v2 (``isMigratingZkBroker``,
  always false: ZooKeeper brokers are refused).
* below 12, an ISR shrink bumps the leader epoch (KAFKA-15021); from 12 it
  does not.
* 12 (3.6-IV0) is the highest, and where new clusters start: 3.6-IV1 adds
  metadata transactions, 3.7 controller registrations and log directories
  (PartitionRecord v1), none of which metaquorum writes.

Every level also has Kafka's leader recovery (3.2-IV0) and NoOpRecord
(3.3-IV1).

ELR (KIP-966) is the feature ``eligible.leader.replicas.version``: 0 (off, the
default, as Kafka 4.0) or 1 (on). Kafka's level 1 needs metadata.version
4.0-IV1; metaquorum's highest level is 3.6-IV0, so level 1 needs that one
(decisions.md 110). With it on, PartitionRecord and PartitionChangeRecord are
written at v2 (their tagged EligibleLeaderReplicas and LastKnownElr fields).
"""

from __future__ import annotations

METADATA_VERSION = "metadata.version"

# Kafka's MetadataVersion levels up to the highest metaquorum follows:
# level -> (release name, didMetadataChange: the level changed the metadata
# format from the one before it, so a downgrade across it may lose data).
KAFKA_RELEASES: dict[int, tuple[str, bool]] = {
    1: ("3.0-IV1", True),
    2: ("3.1-IV0", False),
    3: ("3.2-IV0", True),
    4: ("3.3-IV0", False),
    5: ("3.3-IV1", True),
    6: ("3.3-IV2", True),
    7: ("3.3-IV3", True),
    8: ("3.4-IV0", True),
    9: ("3.5-IV0", False),
    10: ("3.5-IV1", False),
    11: ("3.5-IV2", True),
    12: ("3.6-IV0", False),
}
MIN_METADATA_VERSION = 6  # IBP_3_3_IV2
# SCRAM credentials (KIP-554) from 3.5-IV2 (Kafka's MetadataVersion.isScramSupported).
SCRAM_MIN_METADATA_VERSION = 11
MAX_METADATA_VERSION = 12  # IBP_3_6_IV0
# Delegation tokens in the metadata log: Kafka's MetadataVersion
# .isDelegationTokenSupported is 3.6-IV2 (14), above metaquorum's highest
# level; as for ELR (decisions.md 110), metaquorum's highest level stands for
# it (decisions.md 159).
DELEGATION_TOKEN_MIN_METADATA_VERSION = MAX_METADATA_VERSION
BOOTSTRAP_METADATA_VERSION = MAX_METADATA_VERSION
# Kafka reads a log without a metadata.version record as MINIMUM_KRAFT_VERSION
# (3.0-IV1); a metaquorum controller writes one before anything else.
DEFAULT_METADATA_VERSION = 1

# KIP-966: Kafka's EligibleLeaderReplicasVersion.
ELR_VERSION = "eligible.leader.replicas.version"
MAX_ELR_VERSION = 1
# The metadata.version ELR level 1 needs (Kafka: 4.0-IV1, 23; decisions.md 110).
ELR_MIN_METADATA_VERSION = MAX_METADATA_VERSION
# The record version that carries EligibleLeaderReplicas and LastKnownElr.
ELR_RECORD_VERSION = 2

# KIP-853: Kafka's KRaftVersion. 0 is a static voter set (controller.quorum.voters);
# 1 a dynamic one, kept as VotersRecords in the log. metaquorum's voter set is
# dynamic (add-voter, remove-voter) and its first leader writes a VotersRecord,
# so a log holding one is at level 1. Kafka keeps this feature in the Raft
# log's control records, not in a FeatureLevelRecord: it is described, never
# updated through UpdateFeatures (decisions.md).
KRAFT_VERSION = "kraft.version"
SUPPORTED_KRAFT_VERSIONS = (0, 1)


def kraft_version(has_voters_record: bool) -> int:
    return 1 if has_voters_record else 0


def level_name(feature: str, level: int) -> str:
    """A level as kafka-features describe prints it: metadata.version by its
    release ("3.6-IV0"), every other feature by its number."""
    return release_name(level) if feature == METADATA_VERSION else str(level)


SUPPORTED_FEATURES = {
    METADATA_VERSION: (MIN_METADATA_VERSION, MAX_METADATA_VERSION),
    ELR_VERSION: (0, MAX_ELR_VERSION),
}

# metaquorum's own levels from before it took Kafka's numbering (decision 62),
# and the Kafka level that follows the same rules: 1 kept controlled shutdown
# soft (as 3.3-IV2), 2 persisted it and never bumped the leader epoch on an
# ISR shrink (as 3.6-IV0). Any 1 or 2 in a metaquorum log is one of these
# (it never wrote Kafka's 3.0-IV1 or 3.1-IV0); the first active controller
# writes the Kafka level over it (controller/features_control.bootstrap_records).
LEGACY_LEVELS = {1: 6, 2: 12}


def release_name(level: int) -> str:
    """Kafka's name for a metadata.version level ("3.6-IV0"), or the number."""
    known = KAFKA_RELEASES.get(level)
    return known[0] if known is not None else str(level)


def supports_noop_record(metadata_version: int) -> bool:
    """Kafka's ``isNoOpRecordSupported`` (3.3-IV1): below it the active
    controller writes no periodic NoOpRecord."""
    return metadata_version >= 5


def persists_controlled_shutdown(metadata_version: int) -> bool:
    """Kafka's ``isInControlledShutdownStateSupported`` (3.3-IV3)."""
    return metadata_version >= 7


def register_broker_record_version(metadata_version: int) -> int:
    """Kafka's ``registerBrokerRecordVersion`` (without log directories)."""
    if metadata_version >= 8:  # isMigrationSupported (3.4-IV0)
        return 2
    return 1 if persists_controlled_shutdown(metadata_version) else 0


def bumps_leader_epoch_on_isr_shrink(metadata_version: int) -> bool:
    """Kafka's ``isLeaderEpochBumpRequiredOnIsrShrink`` (before 3.6-IV0)."""
    return metadata_version < 12


def metadata_changed(source: int, target: int) -> bool:
    """Kafka's ``MetadataVersion.checkIfMetadataChanged``: does a level between
    the two (the lower excluded) change the metadata format? A downgrade across
    such a level may lose metadata. Both levels are known ones."""
    high, low = max(source, target), min(source, target)
    return any(KAFKA_RELEASES[level][1] for level in range(low + 1, high + 1))


def elr_enabled(features: dict[str, int]) -> bool:
    """Kafka's ``FeatureControlManager.isElrFeatureEnabled``: the finalized
    ``eligible.leader.replicas.version`` is 1 or more."""
    return features.get(ELR_VERSION, 0) >= 1


def feature_dependency_problem(name: str, level: int, metadata_version: int) -> str | None:
    """Kafka's FeatureVersion dependencies: why ``name`` at ``level`` cannot
    be finalized with this metadata.version, or None."""
    if name == ELR_VERSION and level >= 1 and metadata_version < ELR_MIN_METADATA_VERSION:
        return (
            f"{ELR_VERSION} level {level} requires {METADATA_VERSION} "
            f"{ELR_MIN_METADATA_VERSION} ({release_name(ELR_MIN_METADATA_VERSION)}) or higher, "
            f"but it is {metadata_version} ({release_name(metadata_version)})"
        )
    return None
