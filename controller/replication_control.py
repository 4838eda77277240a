"""Partitions and brokers' effect on them (Kafka's ``ReplicationControlManager``):
AlterPartition (docs/kafka-rules.md 2), heartbeats, fencing, unfencing and controlled
shutdown (4), and the leader elections they cause (5); with ELR on (KIP-966,
``eligible.leader.replicas.version`` 1), the ELR those changes keep and a
broker's unclean shutdown (``handle_broker_unclean_shutdown``).

Every handler reads the controller's view (image + records decided earlier in
the batch) and returns new records plus a response; it never mutates the view.
One request's records are decided against one view and commit together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from metadata_records.config_schema import (
    MIN_INSYNC_REPLICAS,
    UNCLEAN_LEADER_ELECTION_ENABLE,
    topic_config_value,
)
from metadata_records.delta import ImageDelta
from metadata_records.errors import ApiError, Errors
from metadata_records.features import (
    ELR_VERSION,
    bumps_leader_epoch_on_isr_shrink,
    persists_controlled_shutdown,
)
from metadata_records.image import BrokerRegistration, PartitionRegistration
from metadata_records.records import (
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    LRS_RECOVERED,
    LRS_RECOVERING,
    NO_LEADER,
    NO_LEADER_CHANGE,
    UNFENCE,
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    Record,
    UnregisterBrokerRecord,
)
from metadata_records.uuids import ZERO_UUID

from . import partition_change
from .broker_epochs import check_broker_epoch
from .broker_states import BrokerControlState, current_state, next_state
from .config import ControllerConfig
from .heartbeats import BrokerHeartbeatManager
from .isr_index import BrokersToIsrs
from .messages import (
    AlterPartitionPartition,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerState,
    ControllerResult,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from .partition_change import NOT_QUICK, Election, PartitionChangeBuilder, quick_isr_change
from .rejected import Rejected

# AlterPartition's common case decided in one loop per topic (_alter_quick);
# False: every partition through _alter_one, the plain twin it must agree with.
# Listed with every other speed switch in metaquorum/speed_switches.py.
FUSED_ALTER_PARTITION = True

_new_tuple = tuple.__new__


class _Members:
    """One ISR list of an AlterPartition request, worked out once per request."""

    __slots__ = ("states", "new_isr", "reasons", "plain")

    def __init__(self, states: tuple[BrokerState, ...], new_isr: tuple[int, ...]) -> None:
        self.states = states
        self.new_isr = new_isr
        # (rule, why) for each ineligible member, once checked
        self.reasons: list[tuple[str, str]] | None = None
        # No negative id and no duplicate: what _validate's ISR loop checks
        # besides membership in the replicas (_alter_quick's precondition).
        self.plain = len(set(new_isr)) == len(new_isr) and all(b >= 0 for b in new_isr)


class ReplicationControlManager:
    def __init__(
        self,
        view: Callable[[], ImageDelta],
        index: Callable[[], BrokersToIsrs],
        heartbeats: BrokerHeartbeatManager,
        config: ControllerConfig,
    ) -> None:
        self._view = view  # the controller's view (committed image + pending records)
        self._index = index  # the brokers-to-ISR index, built on first use
        self._heartbeats = heartbeats
        self._config = config

    # ------------------------------------------------------------ helpers

    def election_for(self, topic_id: str) -> Election:
        """UNCLEAN where the topic's unclean.leader.election.enable resolves to
        true: its own value, else the cluster default's (decisions.md 102)."""
        view = self._view()
        value = topic_config_value(
            UNCLEAN_LEADER_ELECTION_ENABLE, view.topic_configs(topic_id), view.broker_configs("")
        )
        return Election.UNCLEAN if value.strip().lower() == "true" else Election.ONLINE

    def elr_settings(self, topic_id: str) -> tuple[bool, int]:
        """(ELR on, the topic's effective min ISR) for PartitionChangeBuilder:
        Kafka's isElrEnabled and getTopicEffectiveMinIsr (min.insync.replicas,
        the topic's else the cluster default's, at most the replication factor
        of partition 0). Off: (False, 1), no config read."""
        view = self._view()
        if not view.feature(ELR_VERSION) >= 1:
            return False, 1
        value = topic_config_value(
            MIN_INSYNC_REPLICAS, view.topic_configs(topic_id), view.broker_configs("")
        )
        try:
            min_isr = int(value.strip())
        except ValueError:  # config_control refuses such values; a log may not
            min_isr = 1
        first = view.partition(topic_id, 0)
        if first is not None and first.replicas:
            min_isr = min(min_isr, len(first.replicas))
        return True, max(min_isr, 1)

    def generate_leader_and_isr_updates(
        self,
        broker_to_remove: int,
        broker_to_add: int,
        partitions: Iterable[tuple[str, int]],
        broker_with_unclean_shutdown: int = NO_LEADER,
    ) -> list[Record]:
        """Kafka's ``generateLeaderAndIsrUpdates``: drop ``broker_to_remove`` from
        each ISR and elect where needed; ``broker_to_add`` may lead although the
        view still has it fenced (it is being unfenced in the same request);
        ``broker_with_unclean_shutdown`` leaves the ISR and the ELR and may not
        lead (KIP-966)."""
        view = self._view()
        gone = (broker_to_remove, broker_with_unclean_shutdown)

        def acceptable(replica: int) -> bool:
            return replica not in gone and (replica == broker_to_add or view.is_active(replica))

        bump = bumps_leader_epoch_on_isr_shrink(view.metadata_version)
        records: list[Record] = []
        for topic_id, pid in partitions:
            part = view.partition(topic_id, pid)
            if part is None:
                continue
            builder = PartitionChangeBuilder(
                part,
                topic_id,
                pid,
                acceptable,
                self.election_for(topic_id),
                bump,
                *self.elr_settings(topic_id),
            )
            if broker_with_unclean_shutdown != NO_LEADER:
                builder.unclean_shutdown_replicas = (broker_with_unclean_shutdown,)
            if broker_to_remove != NO_LEADER or broker_with_unclean_shutdown != NO_LEADER:
                builder.target_isr = tuple(r for r in part.isr if r not in gone)
            record = builder.build()
            if record is not None:
                records.append(record)
        return records

    def handle_broker_fenced(
        self, broker_id: int, *, redundant_record: bool = True, unclean_shutdown: bool = False
    ) -> list[Record]:
        """ISR removals (with new leaders), then the fence record. A fenced
        broker is clean: with ELR on it goes into the ELR where the ISR falls
        below min ISR; with ``unclean_shutdown`` (a new incarnation after an
        unclean shutdown) it leaves every ISR and ELR instead."""
        reg = self._view().broker(broker_id)
        if unclean_shutdown:
            records = self.handle_broker_unclean_shutdown(broker_id, remove=True)
        else:
            records = self.generate_leader_and_isr_updates(
                broker_id, NO_LEADER, self._index().partitions_with_broker_in_isr(broker_id)
            )
        if redundant_record or not reg.fenced:
            records.append(
                BrokerRegistrationChangeRecord(
                    broker_id=broker_id, broker_epoch=reg.epoch, fenced=FENCE, version=0
                )
            )
        return records

    def handle_broker_unregistered(self, broker_id: int, broker_epoch: int) -> list[Record]:
        """Kafka's ``handleBrokerUnregistered``: ISR removals (with new
        leaders), then the unregister record, in one batch."""
        records = self.generate_leader_and_isr_updates(
            broker_id, NO_LEADER, self._partitions_holding(broker_id)
        )
        records.append(UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker_epoch))
        return records

    def handle_broker_unclean_shutdown(
        self, broker_id: int, *, remove: bool = False
    ) -> list[Record]:
        """Kafka's ``handleBrokerUncleanShutdown`` (KIP-966): a broker that
        re-registers after an unclean shutdown may have lost what it had
        acknowledged, so it leaves every ISR and ELR (and any leadership).
        Nothing while ELR is off. ``remove``: it is also being fenced."""
        if not self._view().feature(ELR_VERSION) >= 1:
            if not remove:
                return []
            return self.generate_leader_and_isr_updates(
                broker_id, NO_LEADER, self._index().partitions_with_broker_in_isr(broker_id)
            )
        return self.generate_leader_and_isr_updates(
            broker_id if remove else NO_LEADER,
            NO_LEADER,
            self._partitions_holding(broker_id),
            broker_id,
        )

    def _partitions_holding(self, broker_id: int) -> list:
        """The partitions with ``broker_id`` in their ISR or ELR, each once
        (disjoint in a sound log; one visit per partition whatever it says)."""
        index = self._index()
        return sorted(
            {
                *index.partitions_with_broker_in_isr(broker_id),
                *index.partitions_with_broker_in_elr(broker_id),
            }
        )

    def handle_broker_unfenced(self, broker_id: int, broker_epoch: int) -> list[Record]:
        """The unfence record, then elections for leaderless partitions it can lead."""
        records: list[Record] = [
            BrokerRegistrationChangeRecord(
                broker_id=broker_id, broker_epoch=broker_epoch, fenced=UNFENCE, version=0
            )
        ]
        records += self.generate_leader_and_isr_updates(
            NO_LEADER, broker_id, self._index().partitions_without_leader()
        )
        return records

    def handle_broker_in_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> list[Record]:
        """The in-controlled-shutdown record (KIP-841, metadata.version 3.3-IV3 and up), then
        the broker leaves every ISR and hands over its leaderships."""
        view = self._view()
        records: list[Record] = []
        reg = view.broker(broker_id)
        if persists_controlled_shutdown(view.metadata_version) and not reg.in_controlled_shutdown:
            records.append(
                BrokerRegistrationChangeRecord(
                    broker_id=broker_id,
                    broker_epoch=broker_epoch,
                    in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN,
                    version=1,
                )
            )
        records += self.generate_leader_and_isr_updates(
            broker_id, NO_LEADER, self._index().partitions_with_broker_in_isr(broker_id)
        )
        return records

    def unregister_broker(self, req: UnregisterBrokerRequest, now_ms: int) -> ControllerResult:
        """Kafka's ``unregisterBroker``: any registered broker, fenced or not
        (decisions.md 86); its session ends with its registration."""
        reg = self._view().broker(req.broker_id)
        if reg is None:
            return ControllerResult(
                (),
                UnregisterBrokerResponse(
                    Errors.BROKER_ID_NOT_REGISTERED,
                    f"Broker ID {req.broker_id} is not currently registered",
                    rule="unregister.broker-not-registered",
                ),
            )
        records = self.handle_broker_unregistered(req.broker_id, reg.epoch)
        self._heartbeats.remove(req.broker_id)
        return ControllerResult(tuple(records), UnregisterBrokerResponse(Errors.NONE))

    # ------------------------------------------------------------ heartbeats

    def process_broker_heartbeat(
        self, req: BrokerHeartbeatRequest, now_ms: int
    ) -> ControllerResult:
        view = self._view()
        heartbeats = self._heartbeats
        reg = view.broker(req.broker_id)
        if reg is None:
            return ControllerResult(
                (),
                BrokerHeartbeatResponse(
                    Errors.STALE_BROKER_EPOCH,
                    f"Receive a heartbeat from broker {req.broker_id} before registration",
                    rule="heartbeat.broker-not-registered",
                ),
            )
        error = check_broker_epoch(view, req.broker_id, req.broker_epoch)
        if error is not None:
            return ControllerResult(
                (), BrokerHeartbeatResponse(error.error, error.message, rule=error.rule)
            )

        caught_up, current, nxt = self._heartbeat_transition(req, reg, now_ms)
        records: list[Record] = []
        if nxt is not current:
            if nxt is BrokerControlState.UNFENCED:
                records = self.handle_broker_unfenced(req.broker_id, req.broker_epoch)
            elif nxt is BrokerControlState.CONTROLLED_SHUTDOWN:
                records = self.handle_broker_in_controlled_shutdown(req.broker_id, req.broker_epoch)
                # Active brokers must replicate past these records before this
                # broker may stop (Kafka's processBatchEndOffset).
                heartbeats.start_controlled_shutdown(
                    req.broker_id, view.next_offset + len(records) - 1, now_ms
                )
            else:  # FENCED or SHUTDOWN_NOW
                # A fenced broker asking to stop gets no second fence record
                # (Kafka writes a redundant one).
                records = self.handle_broker_fenced(
                    req.broker_id, redundant_record=current is not BrokerControlState.FENCED
                )
                heartbeats.fence(req.broker_id)
        heartbeats.touch(req.broker_id, now_ms, req.current_metadata_offset)
        return ControllerResult(tuple(records), _heartbeat_answer(caught_up, nxt))

    def _heartbeat_transition(
        self, req: BrokerHeartbeatRequest, reg: BrokerRegistration, now_ms: int
    ) -> tuple[bool, BrokerControlState, BrokerControlState]:
        """(caught up, the broker's state, the state this heartbeat moves it to)."""
        heartbeats = self._heartbeats
        session = heartbeats.session(req.broker_id, now_ms)
        caught_up = req.current_metadata_offset >= reg.registration_offset
        current = current_state(reg.fenced, session.shutting_down)
        leads_any = self._index().leads_any(req.broker_id)
        nxt = next_state(
            current,
            want_fence=req.want_fence,
            want_shut_down=req.want_shut_down,
            caught_up=caught_up,
            in_controlled_shutdown=reg.in_controlled_shutdown,
            leads_any=leads_any,
            # Only the controlled-shutdown row reads it, and it scans every
            # session: not paid on the common heartbeat.
            shutdown_offset_replicated=current is BrokerControlState.CONTROLLED_SHUTDOWN
            and not leads_any
            and session.controlled_shutdown_offset <= heartbeats.lowest_active_offset(self._view()),
        )
        return caught_up, current, nxt

    def quiet_heartbeat(
        self, req: BrokerHeartbeatRequest, now_ms: int, committed: BrokerRegistration | None
    ) -> ControllerResult | None:
        """The answer to a heartbeat that changes nothing, for a broker with no
        uncommitted change (its registration in the view equals ``committed``,
        the last applied image's), decided at once; None for any other, which
        waits its turn in the queue (the orderer's ``submit_to``).

        Such an answer reads only committed state, so it need not wait for
        the batches in flight to commit, as ``process_broker_heartbeat``'s
        answers do (Kafka's too: an event that writes nothing completes once
        the log's end offset commits). A 10,000-record admin write then holds
        no heartbeat (docs/decisions.md 139)."""
        reg = self._view().broker(req.broker_id)
        if reg is None or reg != committed or reg.epoch != req.broker_epoch:
            return None
        caught_up, current, nxt = self._heartbeat_transition(req, reg, now_ms)
        if nxt is not current:
            return None
        self._heartbeats.touch(req.broker_id, now_ms, req.current_metadata_offset)
        return ControllerResult((), _heartbeat_answer(caught_up, nxt))

    def process_expired_heartbeat(
        self, req: BrokerHeartbeatRequest, now_ms: int
    ) -> ControllerResult:
        """A heartbeat that waited in the queue past its deadline (the controller
        is overloaded): it only proves the broker is alive; no state changes
        (Kafka's processExpiredBrokerHeartbeat)."""
        error = check_broker_epoch(self._view(), req.broker_id, req.broker_epoch)
        if error is None:
            self._heartbeats.touch(req.broker_id, now_ms, req.current_metadata_offset)
            error = ApiError(
                Errors.REQUEST_TIMED_OUT,
                "the heartbeat waited too long in the controller's queue; send the next one",
                "heartbeat.expired-in-queue",
            )
        return ControllerResult(
            (), BrokerHeartbeatResponse(error.error, error.message, rule=error.rule)
        )

    def maybe_fence_stale_broker(self, now_ms: int) -> ControllerResult | None:
        """Fences at most one broker whose session expired (the one heard from
        longest ago); the caller runs it again at once while it finds one."""
        broker_id = self._heartbeats.find_stale_broker(self._view(), now_ms)
        if broker_id is None:
            return None
        records = self.handle_broker_fenced(broker_id)
        self._heartbeats.fence(broker_id)
        return ControllerResult(tuple(records), broker_id)

    # ------------------------------------------------------------ unclean elections

    def maybe_elect_unclean_leaders(self) -> ControllerResult:
        """Kafka's ``maybeElectUncleanLeaders``: an UNCLEAN election for each
        leaderless partition whose topic allows it, at most
        ``max_elections_per_imbalance`` records; the response says whether it
        stopped at that bound (then the caller runs it again soon).

        Fencing, unfencing and AlterPartition already elect uncleanly on such
        topics; what is left for the sweep is chiefly a partition a new
        reassignment target left leaderless (that election is always ONLINE),
        or one whose topic was made unclean after it lost its leader."""
        unclean: dict[str, bool] = {}

        def clean(topic_id: str) -> bool:
            if topic_id not in unclean:
                unclean[topic_id] = self.election_for(topic_id) is Election.UNCLEAN
            return not unclean[topic_id]

        records, _ = self._elections(
            self._index().partitions_without_leader(), Election.UNCLEAN, skip=clean
        )
        return ControllerResult(
            tuple(records), len(records) >= self._config.max_elections_per_imbalance
        )

    # ------------------------------------------------------------ leader balancing

    def maybe_balance_partition_leaders(self) -> ControllerResult:
        """Kafka's ``maybeBalancePartitionLeaders``: a PREFERRED election for
        each partition not led by its preferred replica, at most
        ``max_elections_per_imbalance`` records; the response says whether it
        stopped at that bound (then the caller runs it again soon).

        A preferred replica that is not in the ISR, or fenced, or shutting
        down, is not elected: the partition keeps its leader and stays
        imbalanced until a later run finds it eligible (a leaderless one gets
        another ISR member that may lead, as Kafka's electPreferredLeader)."""
        records, stopped = self._elections(
            self._index().imbalanced_partitions(), Election.PREFERRED
        )
        return ControllerResult(tuple(records), stopped)

    def _elections(
        self,
        partitions: list[tuple[str, int]],
        election: Election,
        skip: Callable[[str], bool] | None = None,
    ) -> tuple[list[Record], bool]:
        """An ``election`` for each of ``partitions`` (less the topics ``skip``
        says), at most ``max_elections_per_imbalance`` records: (the records,
        whether it stopped at that bound with partitions left)."""
        view = self._view()
        limit = self._config.max_elections_per_imbalance
        bump = bumps_leader_epoch_on_isr_shrink(view.metadata_version)
        records: list[Record] = []
        for topic_id, pid in partitions:
            if len(records) >= limit:
                return records, True
            if skip is not None and skip(topic_id):
                continue
            record = PartitionChangeBuilder(
                view.partition(topic_id, pid),
                topic_id,
                pid,
                view.is_active,
                election,
                bump,
                *self.elr_settings(topic_id),
            ).build()
            if record is not None:
                records.append(record)
        return records, False

    # ------------------------------------------------------------ AlterPartition

    def alter_partition(self, req: AlterPartitionRequest, now_ms: int) -> ControllerResult:
        if not req.topics:
            # Kafka answers an empty request at once, without the epoch check.
            return ControllerResult((), AlterPartitionResponse(Errors.NONE))
        view = self._view()
        error = check_broker_epoch(view, req.broker_id, req.broker_epoch)
        if error is not None:
            return ControllerResult(
                (), AlterPartitionResponse(error.error, error.message, rule=error.rule)
            )
        version = req.version
        records: list[Record] = []
        merged: dict[int, tuple[PartitionRegistration, PartitionRegistration]] = {}
        members: dict[int, _Members] = {}
        # No AlterPartition writes a FeatureLevelRecord: one level for the request.
        bump = bumps_leader_epoch_on_isr_shrink(view.metadata_version)
        topic_results = []
        try:
            for topic in req.topics:
                if version > 1:
                    topic_id = topic.topic_id
                    known = (
                        topic_id is not None and topic_id != ZERO_UUID and view.has_topic(topic_id)
                    )
                    label = f"topic id {topic_id}"
                else:
                    topic_id = (
                        view.topic_id(topic.topic_name) if topic.topic_name is not None else None
                    )
                    known = topic_id is not None
                    label = f"topic {topic.topic_name!r}"
                if not known:
                    error = (
                        Errors.UNKNOWN_TOPIC_ID
                        if version > 1
                        else Errors.UNKNOWN_TOPIC_OR_PARTITION
                    )
                    results = tuple(
                        AlterPartitionPartitionResult(
                            p.partition_index,
                            error,
                            f"unknown {label}",
                            rule="alter-partition.topic-unknown",
                        )
                        for p in topic.partitions
                    )
                else:
                    election = self.election_for(topic_id)
                    elr = self.elr_settings(topic_id)
                    if (
                        FUSED_ALTER_PARTITION
                        and partition_change.QUICK_ISR_CHANGE
                        and not bump
                        and not elr[0]
                    ):
                        results = self._alter_quick(
                            req, topic_id, election, elr, topic.partitions, records, merged, members
                        )
                    else:
                        results = tuple(
                            self._alter_one(
                                req, topic_id, election, bump, elr, p, records, merged, members
                            )
                            for p in topic.partitions
                        )
                topic_results.append(
                    AlterPartitionTopicResult(
                        results,
                        topic_name=topic.topic_name if version <= 1 else None,
                        topic_id=topic.topic_id if version > 1 else None,
                    )
                )
        except Rejected as r:
            # An invalid leaderRecoveryState fails the whole request: Kafka
            # throws here and answers UNKNOWN_SERVER_ERROR (and resigns); it is
            # the request that is wrong, so say so and write nothing.
            return ControllerResult((), AlterPartitionResponse(r.code, r.message, rule=r.rule))
        return ControllerResult(
            tuple(records),
            AlterPartitionResponse(Errors.NONE, None, tuple(topic_results)),
            merged,
        )

    def _alter_quick(
        self,
        req: AlterPartitionRequest,
        topic_id: str,
        election: Election,
        elr: tuple[bool, int],
        partitions: tuple[AlterPartitionPartition, ...],
        records: list[Record],
        merged_by_record: dict[int, tuple[PartitionRegistration, PartitionRegistration]],
        members: dict[int, _Members],
    ) -> tuple[AlterPartitionPartitionResult, ...]:
        """``_alter_one`` for each partition of one topic (no leader-epoch bump
        on a shrink, ELR off), with its common case worked out in this loop:
        a valid request from the active leader whose new ISR is of its
        replicas and eligible, on a partition that is not being reassigned,
        holds no ELR and stays RECOVERED, so that only the ISR changes
        (``quick_isr_change``'s case). Every other partition goes through
        ``_alter_one``, which also gives every error. The one seam of this
        speed trick (FUSED_ALTER_PARTITION); the stateful controller tests
        check both give the same records and answers."""
        view = self._view()
        partition = view.partition_getter(topic_id)
        leader = req.broker_id
        leader_active = view.is_active(leader)
        v3 = req.version >= 3
        results = []
        for p in partitions:
            pid = p.partition_index
            part = partition(pid)
            source = p.new_isr_with_epochs if v3 else p.new_isr
            known = members.get(id(source))
            if known is None:
                states = source if v3 else tuple(BrokerState(b, -1) for b in source)
                known = members[id(source)] = _Members(states, tuple(s.broker_id for s in states))
            new_isr = known.new_isr
            if (
                part is None
                or not leader_active
                or part.leader != leader
                or p.leader_epoch != part.leader_epoch
                or p.partition_epoch != part.partition_epoch
                or p.leader_recovery_state != LRS_RECOVERED
                or part.leader_recovery_state != LRS_RECOVERED
                or part.removing_replicas
                or part.adding_replicas
                or part.elr
                or not known.plain
                or leader not in new_isr
            ):
                quick = False
            else:
                replicas = part.replicas
                for b in new_isr:  # a loop, not all() over a generator: 4x cheaper here
                    if b not in replicas:
                        quick = False
                        break
                else:
                    quick = True
                if quick:
                    reasons = known.reasons
                    if reasons is None:  # the view's brokers do not change during a request
                        reasons = known.reasons = self._ineligible(known.states)
                    quick = not reasons
            if not quick:
                results.append(
                    self._alter_one(
                        req, topic_id, election, False, elr, p, records, merged_by_record, members
                    )
                )
                continue
            if new_isr == part.isr:
                merged = part
            else:
                record = PartitionChangeRecord(pid, topic_id, new_isr)
                records.append(record)
                merged = _new_tuple(  # as PartitionRegistration.merge builds it
                    PartitionRegistration,
                    (
                        replicas,
                        replicas if new_isr == replicas else new_isr,
                        part.removing_replicas,
                        part.adding_replicas,
                        leader,
                        part.leader_recovery_state,
                        part.leader_epoch,
                        part.partition_epoch + 1,
                        part.elr,
                        part.last_known_elr,
                    ),
                )
                merged_by_record[id(record)] = (part, merged)
            results.append(
                AlterPartitionPartitionResult(
                    pid,
                    Errors.NONE,
                    None,
                    leader,
                    merged.leader_epoch,
                    merged.isr,
                    merged.leader_recovery_state,
                    merged.partition_epoch,
                )
            )
        return tuple(results)

    def _alter_one(
        self,
        req: AlterPartitionRequest,
        topic_id: str,
        election: Election,
        bump_on_isr_shrink: bool,
        elr: tuple[bool, int],
        p: AlterPartitionPartition,
        records: list[Record],
        merged_by_record: dict[int, tuple[PartitionRegistration, PartitionRegistration]],
        members: dict[int, _Members],
    ) -> AlterPartitionPartitionResult:
        view = self._view()
        pid = p.partition_index
        part = view.partition(topic_id, pid)
        # The same ISR list recurs across a request's partitions (the parser
        # shares equal ones): its members and their eligibility are worked out
        # once. Keyed by the id of the request's own tuple, alive all request.
        source = p.new_isr_with_epochs if req.version >= 3 else p.new_isr
        known = members.get(id(source))
        if known is None:
            # KIP-903: versions before 3 carry no epochs, so the check is skipped.
            states = source if req.version >= 3 else tuple(BrokerState(b, -1) for b in source)
            known = members[id(source)] = _Members(states, tuple(s.broker_id for s in states))
        new_isr = known.new_isr
        error = self._validate(req, topic_id, p, part, known)
        if error is not None:
            return AlterPartitionPartitionResult(pid, error.error, error.message, rule=error.rule)

        record = NOT_QUICK
        if partition_change.QUICK_ISR_CHANGE and not bump_on_isr_shrink and not elr[0]:
            record = quick_isr_change(
                part, topic_id, pid, new_isr, p.leader_recovery_state, view.is_active(part.leader)
            )
        if record is NOT_QUICK:
            # Positional: a keyword costs the hot path about 3% (one builder a partition).
            builder = PartitionChangeBuilder(
                part, topic_id, pid, view.is_active, election, bump_on_isr_shrink, *elr
            )
            builder.target_isr = new_isr
            builder.target_lrs = p.leader_recovery_state
            record = builder.build()
        if record is None:
            merged = part
        else:
            records.append(record)
            merged = part.merge(record)
            merged_by_record[id(record)] = (part, merged)
            if record.leader not in (NO_LEADER_CHANGE, req.broker_id):
                # Committing the ISR completed a reassignment that removed the
                # requester: the change is written, but it no longer leads.
                error = Errors.NEW_LEADER_ELECTED if req.version > 1 else Errors.FENCED_LEADER_EPOCH
                return AlterPartitionPartitionResult(
                    pid,
                    error,
                    f"the ISR change was applied and completed a reassignment; the new leader "
                    f"is {record.leader} at leader epoch {merged.leader_epoch}",
                    rule="alter-partition.new-leader-elected",
                )
        return AlterPartitionPartitionResult(
            pid,
            Errors.NONE,
            None,
            leader_id=merged.leader,
            leader_epoch=merged.leader_epoch,
            isr=merged.isr,
            leader_recovery_state=merged.leader_recovery_state,
            partition_epoch=merged.partition_epoch,
        )

    def _validate(
        self,
        req: AlterPartitionRequest,
        topic_id: str,
        p: AlterPartitionPartition,
        part: PartitionRegistration | None,
        members: _Members,
    ) -> ApiError | None:
        """docs/kafka-rules.md 2.2, in its order; the first failing check wins. An
        invalid leaderRecoveryState is Rejected: it fails the whole request."""
        new_isr = members.new_isr

        def name() -> str:  # only built for an error message: this is the hot path
            return f"{self._view().topic_name(topic_id)}-{p.partition_index}"

        if part is None:
            return ApiError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {name()} does not exist",
                "alter-partition.partition-unknown",
            )
        if p.leader_epoch > part.leader_epoch:
            return ApiError(
                Errors.NOT_CONTROLLER,
                f"leader epoch {p.leader_epoch} of {name()} is newer than this controller's "
                f"{part.leader_epoch}",
                "kip-497.leader-epoch-newer",
            )
        if p.partition_epoch > part.partition_epoch:
            return ApiError(
                Errors.NOT_CONTROLLER,
                f"partition epoch {p.partition_epoch} of {name()} is newer than this controller's "
                f"{part.partition_epoch}",
                "kip-497.partition-epoch-newer",
            )
        if p.leader_epoch < part.leader_epoch:
            return ApiError(
                Errors.FENCED_LEADER_EPOCH,
                f"leader epoch {p.leader_epoch} of {name()} is stale; the current leader epoch is "
                f"{part.leader_epoch}",
                "kip-497.leader-epoch-stale",
            )
        if req.broker_id != part.leader:
            return ApiError(
                Errors.INVALID_REQUEST,
                f"broker {req.broker_id} is not the leader of {name()} (the leader is {part.leader})",
                "kip-497.not-leader",
            )
        if p.partition_epoch < part.partition_epoch:
            return ApiError(
                Errors.INVALID_UPDATE_VERSION,
                f"partition epoch {p.partition_epoch} of {name()} is stale; the current partition "
                f"epoch is {part.partition_epoch}",
                "kip-497.partition-epoch-stale",
            )
        replicas = part.replicas
        seen: list[int] = []
        for broker in new_isr:
            if broker < 0 or broker not in replicas or broker in seen:
                why = (
                    "is negative"
                    if broker < 0
                    else "appears twice"
                    if broker in seen
                    else f"is not a replica of {name()} (replicas {list(part.replicas)})"
                )
                return ApiError(
                    Errors.INVALID_REQUEST,
                    f"invalid ISR {list(new_isr)}: broker {broker} {why}",
                    "alter-partition.isr-invalid",
                )
            seen.append(broker)
        if part.leader not in seen:
            return ApiError(
                Errors.INVALID_REQUEST,
                f"invalid ISR {list(new_isr)}: it does not contain the leader {part.leader}",
                "alter-partition.isr-without-leader",
            )
        if p.leader_recovery_state not in (LRS_RECOVERED, LRS_RECOVERING):
            raise Rejected(
                Errors.INVALID_REQUEST,
                f"leaderRecoveryState {p.leader_recovery_state} for {name()} is not valid "
                "(0 = RECOVERED, 1 = RECOVERING)",
                "kip-704.recovery-state-invalid",
            )
        if p.leader_recovery_state == LRS_RECOVERING and len(new_isr) > 1:
            return ApiError(
                Errors.INVALID_REQUEST,
                f"a RECOVERING partition ({name()}) must have an ISR of one broker, got {list(new_isr)}",
                "kip-704.recovering-isr-not-single",
            )
        if (
            part.leader_recovery_state == LRS_RECOVERED
            and p.leader_recovery_state == LRS_RECOVERING
        ):
            return ApiError(
                Errors.INVALID_REQUEST,
                f"{name()} is RECOVERED and cannot go back to RECOVERING",
                "kip-704.recovered-to-recovering",
            )
        reasons = members.reasons
        if reasons is None:  # the view's brokers do not change during a request
            reasons = members.reasons = self._ineligible(members.states)
        if reasons:
            error = Errors.INELIGIBLE_REPLICA if req.version > 1 else Errors.OPERATION_NOT_ATTEMPTED
            # The first ineligible member names the rule (Kafka names only that one).
            return ApiError(error, "; ".join(why for _, why in reasons), reasons[0][0])
        return None

    def _ineligible(self, states: tuple[BrokerState, ...]) -> list[tuple[str, str]]:
        """KIP-841 and KIP-903: (rule, why) for each ISR member that may not be
        in it, checked in Kafka's order (registered, controlled shutdown,
        fenced, epoch)."""
        view = self._view()
        reasons = []
        for state in states:
            reg = view.broker(state.broker_id)
            if reg is None:
                reasons.append(
                    (
                        "kip-841.replica-not-registered",
                        f"broker {state.broker_id} is not registered",
                    )
                )
            elif reg.in_controlled_shutdown:
                reasons.append(
                    (
                        "kip-841.replica-in-controlled-shutdown",
                        f"broker {state.broker_id} is in controlled shutdown",
                    )
                )
            elif reg.fenced:
                reasons.append(("kip-841.replica-fenced", f"broker {state.broker_id} is fenced"))
            elif state.broker_epoch != -1 and state.broker_epoch != reg.epoch:
                reasons.append(
                    (
                        "kip-903.stale-broker-epoch",
                        f"broker {state.broker_id} epoch mismatch: "
                        f"requested={state.broker_epoch} expected={reg.epoch}",
                    )
                )
        return reasons


def _heartbeat_answer(caught_up: bool, nxt: BrokerControlState) -> BrokerHeartbeatResponse:
    """A decided heartbeat's answer: the state it leaves its broker in."""
    return BrokerHeartbeatResponse(
        Errors.NONE,
        None,
        is_caught_up=caught_up,
        is_fenced=nxt.fenced,
        should_shut_down=nxt.should_shut_down,
    )
