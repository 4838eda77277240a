"""Records replayed on top of an image, and ``apply`` (Kafka's MetadataDelta).

``ImageDelta`` is also the controller's view: "image + pending records". Its
read methods see the image with the delta's changes on top; ``apply`` builds
the next immutable image. The base image is never touched.

Replay is total. A record that cannot take effect (a change record for an
unknown broker or with a stale broker epoch, a partition of an unknown topic,
an out-of-range flag) still takes its offset, changes nothing and is counted in
``ignored_records``; Kafka treats these as fatal replay errors, but a Raft apply
that raises wedges every voter, and the pipeline's audit reports them instead.
``replay`` returns why it ignored a record (None when it applied it, as
Kafka's ``ClusterDelta`` names the broker and what it refuses), and the image
keeps the last ``IGNORED_REASONS_KEPT`` reasons in ``ignored_reasons`` for an
operator. The count is replicated state (the snapshot and its digest hold
it); the reasons are not: a voter restored from a snapshot has none for the
records before it, so they are kept out of both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from .acls import StandardAcl, acl_problem
from .acls_image import AclsImage, image_acls
from .chunked_map import chunked_with
from .client_quotas import Entity, entity_key, record_problem
from .delegation_tokens import DelegationToken, token_of
from .delegation_tokens import record_problem as token_problem
from .features import DEFAULT_METADATA_VERSION, METADATA_VERSION
from .image import (
    IGNORED_REASONS_KEPT,
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from .partition_map import with_changes
from .partition_states import empty_partitions, partitions_with
from .records import (
    BROKER_RESOURCE,
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    LRS_NO_CHANGE,
    LRS_RECOVERED,
    LRS_RECOVERING,
    NO_CHANGE,
    NO_LEADER_CHANGE,
    TOPIC_RESOURCE,
    UNFENCE,
    AccessControlEntryRecord,
    Batch,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    FeatureLevelRecord,
    LeaderChangeRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    VotersRecord,
)
from .scram import ScramCredential
from .scram import record_problem as scram_problem

_LRS = (LRS_RECOVERED, LRS_RECOVERING)  # Kafka's LeaderRecoveryState.of rejects the rest
# The common PartitionChangeRecord (only the ISR and the leader) replayed in one
# loop (ImageDelta._replay_quick); False: every record through ``replay``, the
# plain twin it must agree with (tests/test_delta_quick.py). Listed with every
# other speed switch in metaquorum/speed_switches.py.
QUICK_REPLAY = True
_new_tuple = tuple.__new__
_NOT_MERGED = (None, None)  # replay_merged: a record its caller did not merge
_UNCHANGED = object()  # ImageDelta._brokers: this id's registration is the image's


def _no_partition(_pid: int) -> None:
    return None


def batch_applies(controller_epoch: int, batch: Batch, next_offset: int | None = None) -> bool:
    """Whether a batch takes effect on an image at ``controller_epoch`` (and,
    when given, ``next_offset``).

    A batch opened by a LEADER_CHANGE starts a newer epoch; any other batch must
    carry the current epoch. A deposed leader's batch (older epoch) is a no-op,
    so decisions made on a stale image never commit; it takes no offsets. A
    batch whose ``base_offset`` is not where it lands is a no-op too: it was
    decided on another image than the one it would change.
    """
    if next_offset is not None and batch.base_offset >= 0 and batch.base_offset != next_offset:
        return False
    records = batch.records
    if records and type(records[0]) is LeaderChangeRecord:
        return (
            records[0].controller_epoch == batch.controller_epoch
            and batch.controller_epoch > controller_epoch
        )
    return batch.controller_epoch == controller_epoch


class ImageDelta:
    __slots__ = (
        "image",
        "next_offset",
        "controller_epoch",
        "leader_id",
        "leader_url",
        "partition_count",
        "ignored_records",
        "ignored_reasons",
        "voters",
        "next_producer_id",
        "_brokers",
        "_topics",
        "_topic_ids",
        "_partitions",
        "_features",
        "_broker_configs",
        "_client_quotas",
        "_acls",
        "_acl_bindings",
        "_acls_image",
        "_acls_unindexed",
        "_scram",
        "_tokens",
    )

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.next_offset = image.next_offset
        self.controller_epoch = image.controller_epoch
        self.leader_id = image.leader_id
        self.leader_url = image.leader_url
        self.partition_count = image.partition_count
        self.ignored_records = image.ignored_records
        self.ignored_reasons = image.ignored_reasons
        self.voters = image.voters
        self.next_producer_id = image.next_producer_id
        # Changed registrations by id (None = unregistered).
        self._brokers: dict[int, BrokerRegistration | None] = {}
        # Changed topic headers by id (None = removed). A header's ``partitions``
        # is the base dict (the image's, or {} for a new topic); changed
        # partitions are in ``_partitions`` until ``apply``.
        self._topics: dict[str, TopicImage | None] = {}
        self._topic_ids: dict[str, str | None] = {}
        self._partitions: dict[str, dict[int, PartitionRegistration]] = {}
        self._features: dict[str, int | None] = {}
        # Changed broker config resources by name (None = none left).
        self._broker_configs: dict[str, dict[str, str] | None] = {}
        # Changed client quota entities (None = no key left).
        self._client_quotas: dict[Entity, dict[str, float] | None] = {}
        # Changed ACLs by id (None = removed) and changed bindings (None =
        # removed), over the image's indexed ACLs (acls_image.py); the
        # indexed whole is built from them once a read needs it (``acls``).
        self._acls: dict[str, StandardAcl | None] = {}
        self._acl_bindings: dict[StandardAcl, str | None] = {}
        self._acls_image: AclsImage | None = None
        self._acls_unindexed: dict[str, StandardAcl | None] = {}  # since it was built
        # Changed SCRAM users: every credential of the user (None = none left).
        self._scram: dict[str, dict[int, ScramCredential] | None] = {}
        # Changed delegation tokens by id (None = removed).
        self._tokens: dict[str, DelegationToken | None] = {}

    # ------------------------------------------------------------ reads

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        reg = self._brokers.get(broker_id, _UNCHANGED)
        return self.image.brokers.get(broker_id) if reg is _UNCHANGED else reg

    def brokers(self) -> Iterator[BrokerRegistration]:
        for broker_id in self.broker_ids():
            yield self.broker(broker_id)

    def broker_ids(self) -> list[int]:
        if not self._brokers:
            return sorted(self.image.brokers)
        ids = self.image.brokers.keys() | self._brokers.keys()
        return sorted(b for b in ids if self.broker(b) is not None)

    def is_active(self, broker_id: int) -> bool:
        reg = self.broker(broker_id)
        return reg is not None and not reg.fenced and not reg.in_controlled_shutdown

    def _topic(self, topic_id: str) -> TopicImage | None:
        if topic_id in self._topics:
            return self._topics[topic_id]
        return self.image.topics.get(topic_id)

    def has_topic(self, topic_id: str) -> bool:
        return self._topic(topic_id) is not None

    def topic_id(self, name: str) -> str | None:
        if name in self._topic_ids:
            return self._topic_ids[name]
        return self.image.topic_ids.get(name)

    def topic_name(self, topic_id: str) -> str | None:
        topic = self._topic(topic_id)
        return None if topic is None else topic.name

    def topic_configs(self, topic_id: str) -> dict[str, str]:
        topic = self._topic(topic_id)
        return {} if topic is None else topic.configs

    def broker_configs(self, resource_name: str) -> dict[str, str]:
        """The dynamic configs of broker ``resource_name`` ("" = the cluster default)."""
        configs = self._broker_configs.get(resource_name, _UNCHANGED)
        if configs is _UNCHANGED:
            return self.image.broker_configs.get(resource_name, {})
        return configs or {}

    def client_quotas(self, entity: Entity) -> dict[str, float]:
        """The quotas set on ``entity`` (canonical, client_quotas.entity_key)."""
        quotas = self._client_quotas.get(entity, _UNCHANGED)
        if quotas is _UNCHANGED:
            return self.image.client_quotas.get(entity, {})
        return quotas or {}

    def scram_credentials(self, user: str) -> dict[int, ScramCredential]:
        """The user's SCRAM credentials by mechanism type ({} if none)."""
        credentials = self._scram.get(user, _UNCHANGED)
        if credentials is _UNCHANGED:
            return self.image.scram.get(user, {})
        return credentials or {}

    def delegation_token(self, token_id: str) -> DelegationToken | None:
        token = self._tokens.get(token_id, _UNCHANGED)
        return self.image.delegation_tokens.get(token_id) if token is _UNCHANGED else token

    def delegation_tokens(self) -> Mapping[str, DelegationToken]:
        """Every token by id, as of the last record replayed (the image's
        own map while none changed; else a dict: the controller's scans)."""
        if not self._tokens:
            return self.image.delegation_tokens
        tokens = {**self.image.delegation_tokens, **self._tokens}
        for token_id, token in self._tokens.items():
            if token is None:
                del tokens[token_id]
        return tokens

    def acl(self, acl_id: str) -> StandardAcl | None:
        acl = self._acls.get(acl_id, _UNCHANGED)
        return self.image.acls.get(acl_id) if acl is _UNCHANGED else acl

    def acls(self) -> AclsImage:
        """Every ACL by id, the delta's changes included, indexed: built from
        the changes at the first read, then brought up to date at each read
        with the changes since (one pass per run of replays, not per record:
        a pass copies a ChunkedMap's dict of chunks)."""
        if self._acls_image is None:
            self._acls_image = image_acls(self.image).with_changes(self._acls)
            self._acls_unindexed = {}
        elif self._acls_unindexed:
            self._acls_image = self._acls_image.with_changes(self._acls_unindexed)
            self._acls_unindexed = {}
        return self._acls_image

    def acl_changes(self) -> Mapping[str, StandardAcl | None]:
        """The ACLs this delta changed, by id (None: removed); read only."""
        return self._acls

    def acl_id_of(self, binding: StandardAcl) -> str | None:
        """The id of the ACL with exactly this binding (Kafka's existingAcls)."""
        acl_id = self._acl_bindings.get(binding, _UNCHANGED)
        return image_acls(self.image).id_of(binding) if acl_id is _UNCHANGED else acl_id

    def topic_ids(self) -> list[str]:
        ids = set(self.image.topics)
        for topic_id, header in self._topics.items():
            if header is None:
                ids.discard(topic_id)
            else:
                ids.add(topic_id)
        return sorted(ids)

    def topic_names(self) -> Iterable[str]:
        if not self._topic_ids:
            return self.image.topic_ids.keys()
        names = set(self.image.topic_ids)
        for name, topic_id in self._topic_ids.items():
            if topic_id is None:
                names.discard(name)
            else:
                names.add(name)
        return names

    def partition(self, topic_id: str, partition_id: int) -> PartitionRegistration | None:
        changed = self._partitions.get(topic_id)
        if changed is not None:
            part = changed.get(partition_id)
            if part is not None:
                return part
        topic = self._topic(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def partition_getter(self, topic_id: str) -> Callable[[int], PartitionRegistration | None]:
        """``lambda pid: self.partition(topic_id, pid)`` with the topic looked
        up once: for a caller reading many partitions of one topic while this
        view does not change (a controller deciding one request)."""
        topic = self._topic(topic_id)
        base = {} if topic is None else topic.partitions
        changed = self._partitions.get(topic_id)
        if not changed:
            return base.get

        def get(partition_id: int) -> PartitionRegistration | None:
            part = changed.get(partition_id)
            return base.get(partition_id) if part is None else part

        return get

    def partition_ids(self, topic_id: str) -> list[int]:
        topic = self._topic(topic_id)
        if topic is None:
            return []
        changed = self._partitions.get(topic_id)
        if not changed:
            return sorted(topic.partitions)
        return sorted(topic.partitions.keys() | changed.keys())

    def feature(self, name: str, default: int = 0) -> int:
        if name in self._features:
            level = self._features[name]
            return default if level is None else level
        return self.image.features.get(name, default)

    @property
    def metadata_version(self) -> int:
        return self.feature(METADATA_VERSION, DEFAULT_METADATA_VERSION)

    # ------------------------------------------------------------ replay

    def replay_batch(self, batch: Batch) -> bool:
        """Replays ``batch`` if it applies at the current controller epoch."""
        if not batch_applies(self.controller_epoch, batch, self.next_offset):
            return False
        self.replay_records(batch.records)
        return True

    def replay_records(self, records: Iterable[Record]) -> None:
        """``replay`` of each record, in order."""
        if QUICK_REPLAY:
            self._replay_quick(records)
        else:
            for record in records:
                self.replay(record)

    def _replay_quick(self, records: Iterable[Record]) -> None:
        """``replay`` of each record, with the PartitionChangeRecords that
        change only the ISR and the leader (what AlterPartition, fencing and
        elections write: nearly every record of a busy log) merged in this
        loop, their topic looked up once per run of them: 0.89 -> 0.52 us a
        record, in every process that follows the log. Any other record goes
        through ``replay`` and ends the run (it may change the topics)."""
        partitions = self._partitions
        run_topic = None
        changed: dict | None = None
        base_get: Callable = _no_partition
        for r in records:
            if not (
                type(r) is PartitionChangeRecord
                and r.replicas is None
                and r.removing_replicas is None
                and r.adding_replicas is None
                and r.leader_recovery_state == LRS_NO_CHANGE
                and r.eligible_leader_replicas is None
                and r.last_known_elr is None
            ):
                self.replay(r)
                run_topic = None
                continue
            topic_id = r.topic_id
            if topic_id != run_topic:  # what ``partition`` looks up, once per run
                run_topic = topic_id
                changed = partitions.get(topic_id)
                topic = self._topic(topic_id)
                base_get = _no_partition if topic is None else topic.partitions.get
            pid = r.partition_id
            part = None if changed is None else changed.get(pid)
            if part is None:
                part = base_get(pid)
            self.next_offset += 1
            if part is None:
                self._ignored(_unknown_partition(r))
                continue
            # PartitionRegistration.merge, for a record with only these fields.
            replicas, isr, removing, adding, leader, lrs, leader_epoch, epoch, elr, last = part
            if r.isr is not None:
                isr = replicas if r.isr == replicas else r.isr
            if r.leader != NO_LEADER_CHANGE:
                leader, leader_epoch = r.leader, leader_epoch + 1
            if changed is None:
                changed = partitions[topic_id] = {}
            changed[pid] = _new_tuple(
                PartitionRegistration,
                (replicas, isr, removing, adding, leader, lrs, leader_epoch, epoch + 1, elr, last),
            )

    def replay(self, record: Record) -> str | None:
        """Applies one record at offset ``next_offset``; never raises. None,
        or why the record was ignored (it still takes its offset)."""
        offset = self.next_offset
        self.next_offset = offset + 1
        handler = _REPLAY.get(type(record))
        if handler is None:
            reason = f"{type(record).__name__}: no replay for this record type"
        else:
            reason = handler(self, record, offset)
            if reason is None:
                return None
        self._ignored(reason)
        return reason

    def _ignored(self, reason: str) -> None:
        self.ignored_records += 1
        self.ignored_reasons = (*self.ignored_reasons, reason)[-IGNORED_REASONS_KEPT:]

    def replay_known_change(
        self, r: PartitionChangeRecord, before: PartitionRegistration, after: PartitionRegistration
    ) -> bool:
        """``replay(r)`` for a caller that already merged ``r`` into the
        partition's registration: ``before`` must equal what ``partition()``
        returns now (an image that keeps partitions encoded returns a new,
        equal registration on each read) and ``after`` be ``before.merge(r)``. Saves the lookup and the
        merge on the controller's hot path; returns False (nothing done, call
        ``replay``) when ``before`` is not current."""
        if (
            before is None
            or self.partition(r.topic_id, r.partition_id) != before
            or (r.leader_recovery_state != LRS_NO_CHANGE and r.leader_recovery_state not in _LRS)
        ):
            return False
        self.next_offset += 1
        self._partitions.setdefault(r.topic_id, {})[r.partition_id] = after
        return True

    def replay_merged(
        self,
        records: Iterable[Record],
        merged: Mapping[int, tuple[PartitionRegistration, PartitionRegistration]] | None,
        on_merged: Callable[[str, int, PartitionRegistration, PartitionRegistration], object]
        | None = None,
        replay: Callable[[Record], object] | None = None,
    ) -> None:
        """``replay`` of each record, for a caller that already merged some of
        the PartitionChangeRecords: ``merged`` maps ``id(record)`` to its
        ``(before, after)`` (ControllerResult.merged; an id means the record
        only while the caller holds it). A record whose ``before`` is still
        current is put in as ``after`` (``replay_known_change``) and passed to
        ``on_merged(topic_id, partition_id, before, after)``; every other record
        goes to ``replay`` (default: this delta's ``replay``). The one loop
        that reads ``merged``: the controller's view (which keeps its ISR index
        in step through the two callables) and the leader's apply of a batch it
        proposed both call it."""
        if replay is None:
            replay = self.replay
        if not merged:
            for record in records:
                replay(record)
            return
        get = merged.get
        for record in records:
            if type(record) is PartitionChangeRecord:
                before, after = get(id(record), _NOT_MERGED)
                if self.replay_known_change(record, before, after):
                    if on_merged is not None:
                        on_merged(record.topic_id, record.partition_id, before, after)
                    continue
            replay(record)

    def _replay_register_broker(self, r: RegisterBrokerRecord, offset: int) -> str | None:
        self._brokers[r.broker_id] = BrokerRegistration(
            r.broker_id,
            r.incarnation_id,
            r.broker_epoch,
            r.end_points,
            r.features,
            r.rack,
            r.fenced,
            r.in_controlled_shutdown if r.version >= 1 else False,
            offset,
        )
        return None

    def _registered(self, r) -> BrokerRegistration | str:
        """The registration a broker record ``r`` names, at its epoch; else why not."""
        kind = type(r).__name__
        reg = self.broker(r.broker_id)
        if reg is None:
            return f"{kind} for unregistered broker {r.broker_id}"
        if reg.epoch != r.broker_epoch:
            return (
                f"{kind} for broker {r.broker_id} at epoch {r.broker_epoch}, "
                f"but its epoch is {reg.epoch}"
            )
        return reg

    def _replay_broker_change(self, r: BrokerRegistrationChangeRecord, offset: int) -> str | None:
        reg = self._registered(r)
        if type(reg) is str:
            return reg
        if r.fenced not in (FENCE, UNFENCE, NO_CHANGE):
            return f"BrokerRegistrationChangeRecord with fenced {r.fenced}"
        # A field the record's version does not have is not on the wire either.
        change = r.in_controlled_shutdown if r.version >= 1 else NO_CHANGE
        if change not in (IN_CONTROLLED_SHUTDOWN, NO_CHANGE):
            return f"BrokerRegistrationChangeRecord with inControlledShutdown {change}"
        fenced = reg.fenced if r.fenced == NO_CHANGE else r.fenced == FENCE
        # Sticky: only a new incarnation leaves controlled shutdown (KIP-841).
        shutdown = reg.in_controlled_shutdown or change == IN_CONTROLLED_SHUTDOWN
        self._brokers[r.broker_id] = reg._replace(fenced=fenced, in_controlled_shutdown=shutdown)
        return None

    def _replay_unregister_broker(self, r: UnregisterBrokerRecord, offset: int) -> str | None:
        # Kafka's replay throws on an unknown broker or another epoch.
        reg = self._registered(r)
        if type(reg) is str:
            return reg
        self._brokers[r.broker_id] = None
        return None

    def _replay_topic(self, r: TopicRecord, offset: int) -> str | None:
        if self.topic_id(r.name) is not None:
            return f"TopicRecord for topic name {r.name!r}, which exists"
        if self._topic(r.topic_id) is not None:
            return f"TopicRecord for topic id {r.topic_id}, which exists"
        self._topics[r.topic_id] = TopicImage(r.name, r.topic_id, empty_partitions(), {})
        self._topic_ids[r.name] = r.topic_id
        return None

    def _replay_partition(self, r: PartitionRecord, offset: int) -> str | None:
        if self._topic(r.topic_id) is None:
            return f"PartitionRecord {r.partition_id} for unknown topic id {r.topic_id}"
        if r.leader_recovery_state not in _LRS:
            return f"PartitionRecord with leaderRecoveryState {r.leader_recovery_state}"
        if self.partition(r.topic_id, r.partition_id) is None:
            self.partition_count += 1
        self._partitions.setdefault(r.topic_id, {})[r.partition_id] = (
            PartitionRegistration.from_record(r)
        )
        return None

    def _replay_partition_change(self, r: PartitionChangeRecord, offset: int) -> str | None:
        part = self.partition(r.topic_id, r.partition_id)
        if part is None:
            return _unknown_partition(r)
        if r.leader_recovery_state != LRS_NO_CHANGE and r.leader_recovery_state not in _LRS:
            return f"PartitionChangeRecord with leaderRecoveryState {r.leader_recovery_state}"
        self._partitions.setdefault(r.topic_id, {})[r.partition_id] = part.merge(r)
        return None

    def _replay_config(self, r: ConfigRecord, offset: int) -> str | None:
        if r.resource_type == BROKER_RESOURCE:
            return self._replay_broker_config(r)
        if r.resource_type != TOPIC_RESOURCE:
            return f"ConfigRecord for resource type {r.resource_type}"
        topic_id = self.topic_id(r.resource_name)
        if topic_id is None:
            return f"ConfigRecord for unknown topic {r.resource_name!r}"
        topic = self._topic(topic_id)
        configs = dict(topic.configs)
        if r.value is None:
            configs.pop(r.name, None)
        else:
            configs[r.name] = r.value
        self._topics[topic_id] = topic._replace(configs=configs)
        return None

    def _replay_broker_config(self, r: ConfigRecord) -> str | None:
        # Kafka's resource names for brokers: "" (the cluster default) or an id >= 0.
        name = r.resource_name
        if name and not (name.isascii() and name.isdigit() and int(name) < 2**31):
            return f"ConfigRecord for broker {name[:64]!r}, not a broker id"
        configs = dict(self.broker_configs(name))
        if r.value is None:
            configs.pop(r.name, None)
        else:
            configs[r.name] = r.value
        self._broker_configs[name] = configs or None
        return None

    def _replay_remove_topic(self, r: RemoveTopicRecord, offset: int) -> str | None:
        topic = self._topic(r.topic_id)
        if topic is None:
            return f"RemoveTopicRecord for unknown topic id {r.topic_id}"
        self.partition_count -= len(self.partition_ids(r.topic_id))
        self._topics[r.topic_id] = None
        self._partitions.pop(r.topic_id, None)
        self._topic_ids[topic.name] = None
        return None

    def _replay_feature(self, r: FeatureLevelRecord, offset: int) -> str | None:
        if r.feature_level < 0:
            return f"FeatureLevelRecord for {r.name} at level {r.feature_level}"
        self._features[r.name] = r.feature_level if r.feature_level != 0 else None
        return None

    def _replay_producer_ids(self, r: ProducerIdsRecord, offset: int) -> str | None:
        # Kafka's ProducerIdControlManager.replay throws unless the block moves
        # forward: a record that would hand out ids again is refused.
        if r.next_producer_id <= self.next_producer_id:
            return (
                f"ProducerIdsRecord with nextProducerId {r.next_producer_id}, not above "
                f"{self.next_producer_id}"
            )
        self.next_producer_id = r.next_producer_id
        return None

    def _replay_client_quota(self, r: ClientQuotaRecord, offset: int) -> str | None:
        # Kafka's replay takes any record; one naming no valid entity or a key
        # its entity cannot hold is ignored here (client_quotas.record_problem).
        problem = record_problem(r)
        if problem is not None:
            return f"ClientQuotaRecord: {problem}"
        entity = entity_key(r.entity)
        quotas = dict(self.client_quotas(entity))
        if r.remove:
            quotas.pop(r.key, None)
        else:
            quotas[r.key] = r.value
        self._client_quotas[entity] = quotas or None
        return None

    def _replay_acl(self, r: AccessControlEntryRecord, offset: int) -> str | None:
        # Kafka's AclControlManager.replay stores any record; an ACL that could
        # never have been created (an enum that does not exist or is filter-only,
        # an unparsable principal), an id in use, or a binding stored under
        # another id is refused here, so the image holds valid ACLs, each once
        # (decisions.md 103).
        acl = StandardAcl.from_record(r)
        problem = acl_problem(acl)
        if problem is not None:
            return f"AccessControlEntryRecord {r.id}: {problem}"
        if self.acl(r.id) is not None:
            return f"AccessControlEntryRecord for ACL id {r.id}, which is in use"
        other = self.acl_id_of(acl)
        if other is not None:
            return f"AccessControlEntryRecord {r.id} for the binding of ACL {other}"
        self._acls[r.id] = acl
        self._acl_bindings[acl] = r.id
        if self._acls_image is not None:  # read already: indexed at the next read
            self._acls_unindexed[r.id] = acl
        return None

    def _replay_remove_acl(self, r: RemoveAccessControlEntryRecord, offset: int) -> str | None:
        # Kafka's replay throws for an unknown id; here it is ignored and counted.
        acl = self.acl(r.id)
        if acl is None:
            return f"RemoveAccessControlEntryRecord for unknown ACL id {r.id}"
        self._acls[r.id] = None
        self._acl_bindings[acl] = None
        if self._acls_image is not None:
            self._acls_unindexed[r.id] = None
        return None

    def _replay_scram(self, r: UserScramCredentialRecord, offset: int) -> str | None:
        # Kafka's ScramControlManager.replay puts any record; one naming no
        # user or an unknown mechanism could never have been written.
        problem = scram_problem(r)
        if problem is not None:
            return f"UserScramCredentialRecord with {problem}"
        credentials = dict(self.scram_credentials(r.name))
        credentials[r.mechanism] = ScramCredential(r.salt, r.stored_key, r.server_key, r.iterations)
        self._scram[r.name] = credentials
        return None

    def _replay_remove_scram(self, r: RemoveUserScramCredentialRecord, offset: int) -> str | None:
        # Kafka's replay throws "Unable to find credential to delete"; ignored here.
        credentials = dict(self.scram_credentials(r.name))
        if credentials.pop(r.mechanism, None) is None:
            return (
                f"RemoveUserScramCredentialRecord for a credential that does not exist "
                f"(user {r.name!r}, mechanism {r.mechanism})"
            )
        self._scram[r.name] = credentials or None
        return None

    def _replay_delegation_token(self, r: DelegationTokenRecord, offset: int) -> str | None:
        # Kafka's DelegationTokenControlManager.replay puts any record; one
        # the controller could never have written is ignored here.
        problem = token_problem(r)
        if problem is not None:
            return f"DelegationTokenRecord with {problem}"
        self._tokens[r.token_id] = token_of(r)
        return None

    def _replay_remove_delegation_token(
        self, r: RemoveDelegationTokenRecord, offset: int
    ) -> str | None:
        if self.delegation_token(r.token_id) is None:
            return f"RemoveDelegationTokenRecord for token {r.token_id!r}, which does not exist"
        self._tokens[r.token_id] = None
        return None

    def _replay_noop(self, r: NoOpRecord, offset: int) -> str | None:
        return None

    def _replay_leader_change(self, r: LeaderChangeRecord, offset: int) -> str | None:
        if r.controller_epoch <= self.controller_epoch:
            return (
                f"LeaderChangeRecord at controller epoch {r.controller_epoch}, not above "
                f"{self.controller_epoch}"
            )
        self.controller_epoch = r.controller_epoch
        self.leader_id = r.leader_id
        self.leader_url = r.leader_url
        return None

    def _replay_voters(self, r: VotersRecord, offset: int) -> str | None:
        # The codec refuses duplicate ids; an empty set would leave no quorum.
        if not r.voters:
            return "VotersRecord with no voters"
        self.voters = tuple(sorted(r.voters))
        return None

    # ------------------------------------------------------------ build

    def apply(self) -> MetadataImage:
        """The image with every replayed record in it."""
        base = self.image
        brokers = base.brokers
        if self._brokers:  # None: unregistered
            brokers = with_changes(base.brokers, self._brokers, none_removes=True)
        topics = base.topics
        if self._topics or self._partitions:
            changed_topics: dict[str, TopicImage | None] = dict(self._topics)
            for topic_id, changed in self._partitions.items():
                header = (
                    changed_topics[topic_id] if topic_id in changed_topics else topics[topic_id]
                )
                name, _, parts, configs = header
                changed_topics[topic_id] = TopicImage(
                    name, topic_id, partitions_with(parts, changed), configs
                )
            topics = chunked_with(base.topics, changed_topics)
        topic_ids = base.topic_ids
        if self._topic_ids:
            topic_ids = chunked_with(base.topic_ids, self._topic_ids)
        features = base.features
        if self._features:
            features = dict(base.features)
            for name, level in self._features.items():
                if level is None:
                    features.pop(name, None)
                else:
                    features[name] = level
        # Each a ChunkedMap (decision 163): a batch copies what it changes.
        broker_configs = base.broker_configs
        if self._broker_configs:
            broker_configs = chunked_with(base.broker_configs, self._broker_configs)
        client_quotas = base.client_quotas
        if self._client_quotas:
            client_quotas = chunked_with(base.client_quotas, self._client_quotas)
        acls = self.acls() if self._acls else base.acls
        scram = base.scram
        if self._scram:
            scram = chunked_with(base.scram, self._scram)
        tokens = base.delegation_tokens
        if self._tokens:
            tokens = chunked_with(base.delegation_tokens, self._tokens)
        return MetadataImage(
            brokers=brokers,
            topics=topics,
            topic_ids=topic_ids,
            features=features,
            next_offset=self.next_offset,
            controller_epoch=self.controller_epoch,
            leader_id=self.leader_id,
            leader_url=self.leader_url,
            partition_count=self.partition_count,
            ignored_records=self.ignored_records,
            ignored_reasons=self.ignored_reasons,
            voters=self.voters,
            broker_configs=broker_configs,
            next_producer_id=self.next_producer_id,
            client_quotas=client_quotas,
            acls=acls,
            scram=scram,
            delegation_tokens=tokens,
        )


def _unknown_partition(r: PartitionChangeRecord) -> str:
    return f"PartitionChangeRecord for unknown partition {r.topic_id}-{r.partition_id}"


_REPLAY = {
    RegisterBrokerRecord: ImageDelta._replay_register_broker,
    UnregisterBrokerRecord: ImageDelta._replay_unregister_broker,
    BrokerRegistrationChangeRecord: ImageDelta._replay_broker_change,
    TopicRecord: ImageDelta._replay_topic,
    PartitionRecord: ImageDelta._replay_partition,
    PartitionChangeRecord: ImageDelta._replay_partition_change,
    ConfigRecord: ImageDelta._replay_config,
    RemoveTopicRecord: ImageDelta._replay_remove_topic,
    FeatureLevelRecord: ImageDelta._replay_feature,
    NoOpRecord: ImageDelta._replay_noop,
    ProducerIdsRecord: ImageDelta._replay_producer_ids,
    ClientQuotaRecord: ImageDelta._replay_client_quota,
    AccessControlEntryRecord: ImageDelta._replay_acl,
    RemoveAccessControlEntryRecord: ImageDelta._replay_remove_acl,
    UserScramCredentialRecord: ImageDelta._replay_scram,
    RemoveUserScramCredentialRecord: ImageDelta._replay_remove_scram,
    DelegationTokenRecord: ImageDelta._replay_delegation_token,
    RemoveDelegationTokenRecord: ImageDelta._replay_remove_delegation_token,
    LeaderChangeRecord: ImageDelta._replay_leader_change,
    VotersRecord: ImageDelta._replay_voters,
}


def apply(image: MetadataImage, batch: Batch) -> MetadataImage:
    """The image after ``batch``; the same image if the batch's epoch is stale.

    Deterministic and total: it reads no clock and never raises on a decoded batch.
    """
    delta = ImageDelta(image)
    if not delta.replay_batch(batch):
        return image
    return delta.apply()


def apply_records(image: MetadataImage, records: Iterable[Record]) -> MetadataImage:
    """Replays records with no epoch check (tests, tools and snapshot loading)."""
    delta = ImageDelta(image)
    for record in records:
        delta.replay(record)
    return delta.apply()
