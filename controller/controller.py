"""The controller: plain code over an image, with time as an argument.

``Controller.handle(request, now_ms)`` decides one request against the view
(the last committed image plus every record decided since) and returns Kafka's
``ControllerResult``: the records to commit and the response to give once they
have. It replays those records into the view at once, so the next request of
the same batch is decided on top of them (group commit). ``committed(image)``
moves the view onto the image a batch produced.

Leader-side state lives here and nowhere in the log: heartbeat sessions, the
brokers-to-ISR index. A new leader builds a new Controller.

``now_ms`` is always a monotonic clock (the shell's ``session_clock_ms``), never
wall time: it only measures broker sessions and the periodic work, and a wall
clock that NTP steps an hour would fence every live broker or spare a dead one
for that hour. The controller stamps no record with it; wall time stamps
batches in the shell.

Periodic work, which the shell runs when it is due (as Kafka's deferred
controller events): ``maybe_fence_stale_broker`` at ``next_fence_check_ms``,
``maybe_elect_unclean_leaders`` at ``next_unclean_election_ms``,
``maybe_balance_partition_leaders`` at ``next_balance_ms`` and
``maybe_sweep_delegation_tokens`` at ``next_token_sweep_ms``. Delegation
tokens are the one place wall time enters: their records hold absolute
times, so their requests and their sweep carry the wall clock the shell read
(controller/delegation_token_control.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from metadata_records.delta import ImageDelta
from metadata_records.image import MetadataImage, PartitionRegistration
from metadata_records.records import (
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RemoveTopicRecord,
)
from metadata_records.uuids import random_uuid

from .acl_control import AclControlManager
from .client_quota_control import ClientQuotaControlManager
from .cluster_control import ClusterControlManager
from .config import RUN_AGAIN_MS, ControllerConfig
from .config_control import ConfigurationControlManager
from .delegation_token_control import DelegationTokenControlManager
from .features_control import FeatureControlManager, bootstrap_records
from .heartbeats import BrokerHeartbeatManager
from .isr_index import BrokersToIsrs
from .messages import (
    AllocateProducerIdsRequest,
    AlterClientQuotasRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    AlterUserScramCredentialsRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ControllerResult,
    CreateAclsRequest,
    CreateDelegationTokenRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    ExpireDelegationTokenRequest,
    IncrementalAlterConfigsRequest,
    RenewDelegationTokenRequest,
    UnregisterBrokerRequest,
    UpdateFeaturesRequest,
)
from .partition_admin import PartitionAdminManager
from .placement import RandomSource
from .producer_ids_control import ProducerIdControlManager
from .replication_control import ReplicationControlManager
from .scram_control import ScramControlManager
from .topic_control import TopicControlManager


class Controller:
    def __init__(
        self,
        image: MetadataImage,
        config: ControllerConfig,
        now_ms: int,
        new_topic_id: Callable[[], str] = random_uuid,
        placement_random: Callable[[int], RandomSource] = random.Random,
    ) -> None:
        self.config = config
        self.new_topic_id = new_topic_id
        # The placer's random source, given the image's partition count: the
        # same image and request give the same assignment (decisions.md 11).
        self.placement_random = placement_random
        self.view = ImageDelta(image)
        self.heartbeats = BrokerHeartbeatManager(config.session_timeout_ms)
        self.heartbeats.reset(self.view, now_ms)
        self._index: BrokersToIsrs | None = None
        # Each manager names what it reads (Kafka's ReplicationControlManager
        # takes clusterControl, configurationControl, ...). The view and the
        # index are replaced as batches commit, so a manager gets a callable
        # that answers the current one; the rest live as long as this controller.
        view = self._current_view
        self.replication = ReplicationControlManager(view, self._isr_index, self.heartbeats, config)
        self.cluster = ClusterControlManager(view, config, self.heartbeats, self.replication)
        self.topics = TopicControlManager(
            view, config, self.heartbeats, new_topic_id, placement_random
        )
        self.partitions = PartitionAdminManager(view, self.replication, self.topics)
        self.features = FeatureControlManager(view)
        self.configs = ConfigurationControlManager(view)
        self.producer_ids = ProducerIdControlManager(view)
        self.client_quotas = ClientQuotaControlManager(view)
        self.acls = AclControlManager(view, new_topic_id)
        self.scram = ScramControlManager(view)
        self.delegation_tokens = DelegationTokenControlManager(view, config, new_topic_id)
        self._handlers = {
            BrokerRegistrationRequest: self.cluster.register_broker,
            BrokerHeartbeatRequest: self.replication.process_broker_heartbeat,
            UnregisterBrokerRequest: self.replication.unregister_broker,
            AlterPartitionRequest: self.replication.alter_partition,
            CreateTopicsRequest: self.topics.create_topics,
            DeleteTopicsRequest: self.topics.delete_topics,
            CreatePartitionsRequest: self.topics.create_partitions,
            AlterPartitionReassignmentsRequest: self.partitions.alter_partition_reassignments,
            ElectLeadersRequest: self.partitions.elect_leaders,
            UpdateFeaturesRequest: self.features.update_features,
            IncrementalAlterConfigsRequest: self.configs.incremental_alter_configs,
            AllocateProducerIdsRequest: self.producer_ids.allocate_producer_ids,
            AlterClientQuotasRequest: self.client_quotas.alter_client_quotas,
            CreateAclsRequest: self.acls.create_acls,
            DeleteAclsRequest: self.acls.delete_acls,
            AlterUserScramCredentialsRequest: self.scram.alter_user_scram_credentials,
            CreateDelegationTokenRequest: self.delegation_tokens.create_delegation_token,
            RenewDelegationTokenRequest: self.delegation_tokens.renew_delegation_token,
            ExpireDelegationTokenRequest: self.delegation_tokens.expire_delegation_token,
        }
        # When the unclean-election sweep is due; None while nothing is leaderless.
        self._unclean_due_ms: int | None = None
        # When the leader-balancing run is due; None while every partition is
        # led by its preferred replica, or balancing is off.
        self._balance_due_ms: int | None = None
        # When the expired-token sweep is due; None while no token exists or
        # tokens are disabled.
        self._token_sweep_due_ms: int | None = None
        self._arm_periodic(now_ms)

    def _current_view(self) -> ImageDelta:
        """What the managers call for the view: the one of this moment."""
        return self.view

    def _isr_index(self) -> BrokersToIsrs:
        # Built on first use, so a new leader with a large image answers its
        # first writes without scanning every partition.
        if self._index is None:
            self._index = BrokersToIsrs.build(self.view)
        return self._index

    index = property(_isr_index)

    def index_only_for(self, brokers: Iterable[int]) -> None:
        """An index of only the partitions ``brokers`` are in the ISR or ELR
        of (BrokersToIsrs.build_for), for a throwaway controller that will do
        nothing but fence them (controller/what_if.py): one cheap scan instead
        of indexing every partition. Before any decision."""
        self._index = BrokersToIsrs.build_for(self.view.image, brokers)

    def build_index(self) -> BrokersToIsrs:
        """The ISR index, built now if it is not yet: before a decision in
        another thread (quorum/orderer.py), whose replay then keeps it up to
        date instead of leaving it to be built later from a view it changed."""
        return self._isr_index()

    # ------------------------------------------------------------ deciding

    def handle(self, request: object, now_ms: int) -> ControllerResult:
        handler = self._handlers.get(type(request))
        if handler is None:
            raise TypeError(f"the controller has no handler for {type(request).__name__}")
        result = handler(request, now_ms)
        self.replay(result.records, result.merged)
        self._arm_periodic(now_ms)
        return result

    def quiet_heartbeat(
        self, request: BrokerHeartbeatRequest, now_ms: int, committed: MetadataImage
    ) -> ControllerResult | None:
        """A heartbeat that changes nothing, for a broker with no uncommitted
        change, answered at once from ``committed`` (the last applied image);
        None: it must be decided in turn (ReplicationControlManager.quiet_heartbeat)."""
        return self.replication.quiet_heartbeat(
            request, now_ms, committed.brokers.get(request.broker_id)
        )

    def expire_heartbeat(self, request: BrokerHeartbeatRequest, now_ms: int) -> ControllerResult:
        """Answers a heartbeat that queued past its deadline: REQUEST_TIMED_OUT."""
        return self.replication.process_expired_heartbeat(request, now_ms)

    def maybe_fence_stale_broker(self, now_ms: int) -> ControllerResult | None:
        """Fences one broker whose session expired, if any (its id is the response)."""
        result = self.replication.maybe_fence_stale_broker(now_ms)
        if result is not None:
            self.replay(result.records)
            self._arm_periodic(now_ms)
        return result

    def next_fence_check_ms(self) -> int | None:
        return self.heartbeats.next_check_ms(self.view)

    def maybe_elect_unclean_leaders(self, now_ms: int) -> ControllerResult | None:
        """The unclean-election sweep, if it is due (None if not); the
        response is True when it stopped at its bound and runs again shortly."""
        if self._unclean_due_ms is None or now_ms < self._unclean_due_ms:
            return None
        self._unclean_due_ms = None
        result = self.replication.maybe_elect_unclean_leaders()
        self.replay(result.records)
        if result.response:
            self._unclean_due_ms = now_ms + RUN_AGAIN_MS
        self._arm_periodic(now_ms)
        return result

    def next_unclean_election_ms(self) -> int | None:
        return self._unclean_due_ms

    def _arm_periodic(self, now_ms: int) -> None:
        """After every write (Kafka's ``ControllerWriteEvent``): the periodic
        runs the new state may call for."""
        self._arm_unclean_sweep(now_ms)
        self._arm_balance(now_ms)
        self._arm_token_sweep(now_ms)

    def _arm_unclean_sweep(self, now_ms: int) -> None:
        """Kafka's ``maybeScheduleNextElectUncleanLeaders``, run after every
        write: unless a sweep is due already, one is due an interval from now
        if some partition has no leader. Without its index this leader cannot
        tell without a scan of every partition, so it assumes one has (a new
        leader, as Kafka's, checks once): the sweep builds the index."""
        if self._unclean_due_ms is None and (
            self._index is None or self._index.any_without_leader()
        ):
            self._unclean_due_ms = now_ms + self.config.unclean_election_interval_ms

    def maybe_balance_partition_leaders(self, now_ms: int) -> ControllerResult | None:
        """The leader-balancing run, if it is due (None if not); the response
        is True when it stopped at its bound and runs again shortly (Kafka's
        ImbalanceSchedule.IMMEDIATELY, 10 ms later)."""
        if self._balance_due_ms is None or now_ms < self._balance_due_ms:
            return None
        self._balance_due_ms = None
        result = self.replication.maybe_balance_partition_leaders()
        self.replay(result.records)
        if result.response:
            self._balance_due_ms = now_ms + RUN_AGAIN_MS
        self._arm_periodic(now_ms)
        return result

    def next_balance_ms(self) -> int | None:
        return self._balance_due_ms

    def _arm_balance(self, now_ms: int) -> None:
        """Kafka's ``maybeScheduleNextBalancePartitionLeaders``, run after every
        write: unless a run is due already, one is due an interval from now
        if some partition is not led by its preferred replica (a new leader
        without its index assumes one is; the run builds the index)."""
        interval = self.config.leader_imbalance_check_interval_ms
        if (
            interval is not None
            and self._balance_due_ms is None
            and (self._index is None or self._index.imbalanced_count)
        ):
            self._balance_due_ms = now_ms + interval

    def maybe_sweep_delegation_tokens(
        self, now_ms: int, now_wall_ms: int
    ) -> ControllerResult | None:
        """The expired-token sweep, if it is due (None if not): Kafka's
        ``sweepExpiredDelegationTokens``, run every
        delegation.token.expiry.check.interval.ms (``now_ms``, monotonic) and
        removing what is expired by the wall clock (``now_wall_ms``). The
        response is True when it stopped at its bound and runs again shortly."""
        if self._token_sweep_due_ms is None or now_ms < self._token_sweep_due_ms:
            return None
        self._token_sweep_due_ms = None
        result = self.delegation_tokens.sweep_expired(now_wall_ms)
        self.replay(result.records)
        if result.response:
            self._token_sweep_due_ms = now_ms + RUN_AGAIN_MS
        self._arm_periodic(now_ms)
        return result

    def next_token_sweep_ms(self) -> int | None:
        return self._token_sweep_due_ms

    def _arm_token_sweep(self, now_ms: int) -> None:
        """Kafka's ``maybeScheduleNextExpiredDelegationTokenSweep``: while
        tokens are enabled and some token exists, a sweep is due an interval
        after the last (a new leader's first is an interval after it starts)."""
        if (
            self._token_sweep_due_ms is None
            and self.delegation_tokens.enabled
            and self.view.delegation_tokens()
        ):
            self._token_sweep_due_ms = (
                now_ms + self.config.delegation_token_expiry_check_interval_ms
            )

    def bootstrap_records(self) -> list[Record]:
        return bootstrap_records(self.view)

    def replay(
        self,
        records: tuple[Record, ...] | list[Record],
        merged: dict[int, tuple[PartitionRegistration, PartitionRegistration]] | None = None,
    ) -> None:
        """Adds records this leader wrote (or must account for) to the view;
        ``merged`` as in ControllerResult (ImageDelta.replay_merged)."""
        index = self._index
        if index is None:
            self.view.replay_merged(records, merged)
        else:
            self.view.replay_merged(records, merged, index.update, self._replay_indexed)

    def _replay_indexed(self, record: Record) -> None:
        """``view.replay(record)``, the ISR index told of each partition it changes."""
        view = self.view
        index = self._index
        kind = type(record)
        if kind is PartitionRecord or kind is PartitionChangeRecord:
            old = view.partition(record.topic_id, record.partition_id)
            view.replay(record)
            index.update(
                record.topic_id,
                record.partition_id,
                old,
                view.partition(record.topic_id, record.partition_id),
            )
        elif kind is RemoveTopicRecord:
            gone = [
                (pid, view.partition(record.topic_id, pid))
                for pid in view.partition_ids(record.topic_id)
            ]
            view.replay(record)
            for pid, old in gone:
                index.update(record.topic_id, pid, old, None)
        else:
            view.replay(record)

    def committed(self, image: MetadataImage) -> None:
        """The log applied through ``image``: decide the next batch on top of it.

        If the image is not where this controller's own records lead (someone
        else's batch, or ours was discarded), leader-side indexes are rebuilt."""
        if image.next_offset != self.view.next_offset:
            self._index = None
        self.view = ImageDelta(image)
