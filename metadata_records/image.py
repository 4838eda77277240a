"""The metadata image: the state every voter derives by applying the log.

An image is never mutated once built: ``delta.apply`` makes a new one and shares
every untouched broker, topic and partition with the old. Readers on any thread
may therefore hold an image without locks.

Layout, chosen so that 2,000,000 partitions stay small: a partition is a
NamedTuple of ten small fields (ints and int tuples, ``()`` shared when empty),
kept encoded, one ``PartitionStates`` per topic (metadata_records/partition_states.py:
about 105 bytes a partition; a read decodes a new, equal registration), so a
batch copies only the chunks of 256 partitions it touches and the topics
map's chunks, never a whole topic's partitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from .acls import StandardAcl
from .acls_image import EMPTY_ACLS
from .delegation_tokens import DelegationToken
from .features import DEFAULT_METADATA_VERSION, ELR_RECORD_VERSION, METADATA_VERSION
from .records import (
    LRS_NO_CHANGE,
    NO_LEADER,
    NO_LEADER_CHANGE,
    Endpoint,
    FeatureRange,
    PartitionChangeRecord,
    PartitionRecord,
    Voter,
)
from .scram import ScramCredential


class BrokerRegistration(NamedTuple):
    broker_id: int
    incarnation_id: str
    epoch: int
    listeners: tuple[Endpoint, ...]
    features: tuple[FeatureRange, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    registration_offset: int  # offset of its latest RegisterBrokerRecord (the unfence threshold)

    @property
    def active(self) -> bool:
        """Kafka's ``ClusterControlManager.isActive``: may lead and may join an ISR."""
        return not self.fenced and not self.in_controlled_shutdown


class PartitionRegistration(NamedTuple):
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int
    # KIP-966: the eligible leader replicas (clean former ISR members, never in
    # the ISR) and the last known ELR (Kafka 4.0 keeps the last leader there
    # once the ISR is empty); both () while ELR is off.
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @classmethod
    def from_record(cls, r: PartitionRecord) -> PartitionRegistration:
        return cls(
            r.replicas,
            _share(r.isr, r.replicas),
            r.removing_replicas,
            r.adding_replicas,
            r.leader,
            r.leader_recovery_state,
            r.leader_epoch,
            r.partition_epoch,
            r.eligible_leader_replicas or (),
            r.last_known_elr or (),
        )

    @property
    def has_preferred_leader(self) -> bool:
        """Kafka's ``hasPreferredLeader``: led by its first replica (a
        leaderless partition is not)."""
        return self.leader == (self.replicas[0] if self.replicas else NO_LEADER)

    def to_record(
        self, topic_id: str, partition_id: int, elr_enabled: bool = False
    ) -> PartitionRecord:
        """The PartitionRecord that recreates this registration (snapshots,
        tools): v2 with the ELR fields when ELR is on or they are not empty
        (Kafka writes them only when there is something), else v0."""
        fields = self._asdict()
        elr, last_known = fields.pop("elr"), fields.pop("last_known_elr")
        if not (elr_enabled or elr or last_known):
            return PartitionRecord(partition_id=partition_id, topic_id=topic_id, **fields)
        return PartitionRecord(
            partition_id=partition_id,
            topic_id=topic_id,
            **fields,
            eligible_leader_replicas=elr or None,
            last_known_elr=last_known or None,
            version=ELR_RECORD_VERSION,
        )

    def merge(self, r: PartitionChangeRecord) -> PartitionRegistration:
        """Kafka's ``PartitionRegistration.merge``: every change adds 1 to the
        partition epoch; the leader epoch grows iff the record names a leader."""
        replicas = self.replicas if r.replicas is None else r.replicas
        if r.leader == NO_LEADER_CHANGE:
            leader, leader_epoch = self.leader, self.leader_epoch
        else:
            leader, leader_epoch = r.leader, self.leader_epoch + 1
        # tuple.__new__ rather than the NamedTuple's own __new__, a Python
        # function around it: 0.25 -> 0.12 us, paid per change by every
        # process that follows the log.
        return _new_tuple(
            PartitionRegistration,
            (
                replicas,
                self.isr if r.isr is None else _share(r.isr, replicas),
                self.removing_replicas if r.removing_replicas is None else r.removing_replicas,
                self.adding_replicas if r.adding_replicas is None else r.adding_replicas,
                leader,
                self.leader_recovery_state
                if r.leader_recovery_state == LRS_NO_CHANGE
                else r.leader_recovery_state,
                leader_epoch,
                self.partition_epoch + 1,
                self.elr if r.eligible_leader_replicas is None else r.eligible_leader_replicas,
                self.last_known_elr if r.last_known_elr is None else r.last_known_elr,
            ),
        )

    @property
    def is_reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


_new_tuple = tuple.__new__


def _share(isr: tuple[int, ...], replicas: tuple[int, ...]) -> tuple[int, ...]:
    # Most ISRs equal their replica list; keeping one tuple for both halves memory.
    return replicas if isr == replicas else isr


class TopicImage(NamedTuple):
    name: str
    topic_id: str
    # PartitionRegistrations by partition id: a PartitionStates (a
    # PartitionMap with COMPACT_PARTITIONS off, a dict in an image built by hand).
    partitions: Mapping[int, PartitionRegistration]
    configs: dict[str, str]


# How many of replay's reasons for ignoring a record an image keeps.
IGNORED_REASONS_KEPT = 16


class MetadataImage(NamedTuple):
    """Everything the log says, at ``next_offset`` (the offset the next record gets).

    A NamedTuple: immutable and cheap to build once per batch. Its dicts are
    never mutated after the image is built (``delta.apply`` makes new ones)."""

    # A PartitionMap (a dict in an image built by hand): a batch copies the
    # chunks of ids it changes, not every broker.
    brokers: Mapping[int, BrokerRegistration]
    # These maps, and the broker configs, client quotas and SCRAM users below,
    # are ChunkedMaps once a batch has changed them (plain dicts in an image
    # built by hand): a batch copies the chunks it changes (decision 163).
    # They iterate in hash order, which differs between processes: whatever
    # answers or writes in an order sorts.
    topics: Mapping[str, TopicImage]  # by topic id
    topic_ids: Mapping[str, str]  # topic name -> id
    features: dict[str, int]
    next_offset: int = 0
    controller_epoch: int = 0
    leader_id: int = -1
    leader_url: str | None = None
    partition_count: int = 0
    ignored_records: int = 0  # records that could not apply (see delta.py); 0 in a healthy log
    # The Raft voter set of the last KRAFT_VOTERS record; () before the first.
    voters: tuple[Voter, ...] = ()
    # Dynamic broker configs (ConfigRecords of resource type BROKER) by
    # resource name: a broker id, or "" for the cluster-wide default. Only
    # resources with at least one config set appear.
    broker_configs: Mapping[str, dict[str, str]] = {}
    # The first producer id of the next block AllocateProducerIds grants
    # (Kafka's ProducerIdsImage.nextProducerId); 0 before the first.
    next_producer_id: int = 0
    # Client quotas (ClientQuotaRecords) by entity, in client_quotas.py's
    # canonical form: ((type, name | None), ...) -> {key: value}. Only
    # entities with at least one key set appear.
    client_quotas: Mapping[tuple[tuple[str, str | None], ...], dict[str, float]] = {}
    # ACL bindings by id (Kafka's AclsImage), each binding at most once,
    # with the indexes that find them by binding, resource and principal.
    acls: Mapping[str, StandardAcl] = EMPTY_ACLS
    # SCRAM credentials (Kafka's ScramImage) by user, then mechanism type
    # (metadata_records/scram.py): salt, storedKey, serverKey, iterations.
    # Only users with at least one credential appear. Secrets: what a reader
    # is shown of them is a user's mechanisms and iterations.
    scram: Mapping[str, dict[int, ScramCredential]] = {}
    # Delegation tokens (Kafka's DelegationTokenImage) by token id
    # (metadata_records/delegation_tokens.py), a ChunkedMap like the maps
    # above (decision 163). No HMAC: nodes derive it.
    delegation_tokens: Mapping[str, DelegationToken] = {}
    # Why replay ignored the last records it ignored (at most
    # IGNORED_REASONS_KEPT, the newest last; see delta.py), for an operator.
    # Not replicated state: the snapshot and its digest leave it out, so a
    # voter restored from a snapshot has none for the records before it.
    ignored_reasons: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        # Equal images hold the same replicated state (equal digests): the
        # reasons, the last field, are each voter's own.
        if isinstance(other, MetadataImage):
            return self[:-1] == other[:-1]
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = tuple.__hash__

    @property
    def last_offset(self) -> int:
        return self.next_offset - 1

    @property
    def metadata_version(self) -> int:
        return self.features.get(METADATA_VERSION, DEFAULT_METADATA_VERSION)

    def topic_by_name(self, name: str) -> TopicImage | None:
        topic_id = self.topic_ids.get(name)
        return None if topic_id is None else self.topics[topic_id]

    def partition(self, topic_id: str, partition_id: int) -> PartitionRegistration | None:
        topic = self.topics.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)


EMPTY_IMAGE = MetadataImage({}, {}, {}, {})
