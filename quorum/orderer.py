"""The one place that orders writes: the controller, the sessions it keeps,
and group commit, on the asyncio loop of the voter that leads.

Writes go through group commit with one batch in flight: while a batch
replicates, requests queue; when it has applied, the whole queue is decided
against the new image and becomes the next batch. The queue is bounded: past
it a request is refused at once (THROTTLING_QUOTA_EXCEEDED), because
pysyncobj collapses instead of slowing down when overloaded.

Each batch says who asked for its records (``Batch.who``): every request
comes with its caller (quorum/callers.py), and ``_pump`` counts each
decided request's records into one Who; the controller's own work (the
sweeps, the NoOp, bootstrap, LEADER_CHANGE, voter sets) is the
``controller``'s, with the rule that made it act.

The orderer knows Raft only through ``RaftSide``: the committed image, a way
to propose a batch and hear whether it committed, whether this voter still
leads a term, and why it refuses. ``QuorumNode`` is that side in the same
process; the seam is where a process boundary goes when Raft leaves the
ordering core (issue 26).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

from pysyncobj import FAIL_REASON

from controller.config import ControllerConfig
from controller.controller import Controller
from controller.messages import (
    AlterClientQuotasRequest,
    AlterPartitionReassignmentsRequest,
    AlterUserScramCredentialsRequest,
    BrokerHeartbeatRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
)
from controller.refusals import RefusalRing, RefusalsQuery
from metadata_records.delta import ImageDelta
from metadata_records.features import (
    LEGACY_LEVELS,
    MAX_METADATA_VERSION,
    METADATA_VERSION,
    MIN_METADATA_VERSION,
    release_name,
    supports_noop_record,
)
from metadata_records.image import MetadataImage
from metadata_records.records import (
    Batch,
    LeaderChangeRecord,
    NoOpRecord,
    Record,
    Voter,
    VotersRecord,
)

from . import callers, stage_trace
from .callers import Caller, WhoRuns
from .node_config import NodeConfig
from .node_errors import NodeError, OutcomeUnknownError, ThrottledError
from .state_machine import STALE

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    """Stamps batches (``timestampMs``) for people and the audit; never a duration."""
    return int(time.time() * 1000)


def session_clock_ms() -> int:
    """The controller's clock for broker sessions and fencing: monotonic, so an
    NTP step of the wall clock fences no live broker and spares no dead one
    (Kafka's BrokerHeartbeatManager uses a monotonic clock too)."""
    return time.monotonic_ns() // 1_000_000


class Reply(Protocol):
    """Where a write's response goes: what the pump and ``settle`` use of a Future."""

    def done(self) -> bool: ...
    def set_result(self, value: object) -> None: ...
    def set_exception(self, error: BaseException) -> None: ...


@dataclass(frozen=True)
class OrderingConfig:
    """What the orderer reads of the voter's configuration."""

    advertised_url: str | None
    max_queued_requests: int
    max_batch_records: int
    max_batches_in_flight: int
    heartbeat_deadline_s: float
    metadata_max_idle_interval_ms: int

    @classmethod
    def of(cls, config: NodeConfig) -> OrderingConfig:
        return cls(**{f: getattr(config, f) for f in cls.__dataclass_fields__})


class RaftSide(Protocol):
    """What the orderer needs of Raft: QuorumNode in the same process, or
    the voter's serve process seen from an orderer process of its own
    (voter/orderer_process.RemoteRaft)."""

    node_id: int
    controller_config: ControllerConfig

    @property
    def image(self) -> MetadataImage:
        """The committed image, with every applied batch in it."""

    def propose(
        self, batch: Batch, known: dict | None = None, view: ImageDelta | None = None
    ) -> asyncio.Future:
        """Submits a batch; the future gets (result, error) once it applied or failed."""

    def leads(self, term: int) -> bool:
        """Whether this voter is still the Raft leader of ``term``."""

    def nothing_to_propose(self) -> None:
        """A batch was done and no other followed it: the commit index it
        moved need not wait for the next batch (raft_port.defer_commit_push)."""

    def refusal(self) -> NodeError | None:
        """Why this voter takes no write at all now (it stopped, it replays,
        its disk is full), or None."""

    def not_controller(self, why: str) -> NodeError:
        """The answer to a write sent while this voter does not order writes."""

    def wanted_voters(self) -> tuple[Voter, ...] | None:
        """A voter set the active controller should write now, or None."""

    def stepped_down(self) -> None:
        """The orderer stopped ordering (leadership lost or a batch failed)."""


@dataclass
class _Pending:
    request: object  # a controller request, or one of the queue items below
    future: Reply | None
    caller: Caller | None = None  # who asked (quorum/callers.py); None: in-process
    enqueued: float = field(default_factory=time.monotonic)


_FENCE = object()  # queue item: run the session-timeout fencer
_UNCLEAN = object()  # queue item: run the unclean-election sweep
_BALANCE = object()  # queue item: elect preferred leaders back (leader rebalancing)
_TOKEN_SWEEP = object()  # queue item: remove expired delegation tokens
_BOOTSTRAP = object()  # queue item: write the bootstrap records of a new cluster
_NOOP = object()  # queue item: write a NoOpRecord (metadata.max.idle.interval.ms)


@dataclass
class _InFlight:
    """A proposed batch: who waits for it, and for how long it has been out."""

    decided: list[tuple[_Pending, object]]  # (request, its response) in order
    records: int
    noops: int = 0  # of which periodic NoOpRecords
    balanced: int = 0  # of which preferred elections of the leader balancing
    started: float = field(default_factory=time.monotonic)


# Admin writes that may take the controller tens of milliseconds to decide
# (up to 10,000 records: controller/record_cap.py) are decided in a thread,
# alone in their batch, so that the event loop goes on answering broker
# heartbeats meanwhile (Controller.quiet_heartbeat; decisions.md 139). What
# counts is a cheap estimate of the entries a request names, per kind; past
# OFF_LOOP_ENTRIES it is decided off the loop. None of these kinds touches a
# broker's registration or session, which is all a quiet heartbeat reads, and
# the ISR index they update is built before the thread starts.
OFF_LOOP_ENTRIES = 500
_ENTRIES = {
    CreateAclsRequest: lambda r, view: len(r.creations),
    # What a filter matches is known only once decided: every DeleteAcls.
    DeleteAclsRequest: lambda r, view: OFF_LOOP_ENTRIES,
    AlterClientQuotasRequest: lambda r, view: sum(len(e.ops) for e in r.entries),
    # Each upsertion's keys are two HMACs and a hash (bench/scram.py).
    AlterUserScramCredentialsRequest: lambda r, view: len(r.deletions) + len(r.upsertions),
    IncrementalAlterConfigsRequest: lambda r, view: sum(len(c.configs) for c in r.resources),
    CreateTopicsRequest: lambda r, view: sum(
        max(t.num_partitions, len(t.assignments), 1) for t in r.topics
    ),
    CreatePartitionsRequest: lambda r, view: r.count,
    AlterPartitionReassignmentsRequest: lambda r, view: sum(len(t.partitions) for t in r.topics),
    ElectLeadersRequest: lambda r, view: (
        OFF_LOOP_ENTRIES
        if r.topic_partitions is None
        else sum(len(parts) for _, parts in r.topic_partitions)
    ),
    DeleteTopicsRequest: lambda r, view: sum(
        len(view.partition_ids(topic_id))
        for name in r.names
        if (topic_id := view.topic_id(name)) is not None
    ),
}


def decided_off_loop(request: object, view: ImageDelta) -> bool:
    """Whether ``request`` is a large admin write, decided in a thread."""
    entries = _ENTRIES.get(type(request))
    return entries is not None and entries(request, view) >= OFF_LOOP_ENTRIES


# Under sustained load batches are always in flight and the controller's view
# (a delta over the last image it was rebased on) keeps growing; every so many
# batches the pump lets the pipeline drain and rebases the view on the image.
REBASE_EVERY_BATCHES = 256


@dataclass
class BatchStats:
    batches: int = 0
    records: int = 0
    sizes: collections.deque = field(default_factory=lambda: collections.deque(maxlen=1024))
    latencies: collections.deque = field(default_factory=lambda: collections.deque(maxlen=1024))
    most_in_flight: int = 0  # the most batches ever out at once
    noop_records: int = 0  # periodic NoOpRecords committed (metadata.max.idle.interval.ms)
    # Partitions whose preferred leader the balancing elected back, committed
    # (auto.leader.rebalance.enable).
    balance_elections: int = 0
    # Heartbeats that changed nothing, answered from the committed image
    # without a place in the queue (Controller.quiet_heartbeat).
    quiet_heartbeats: int = 0


class Orderer:
    def __init__(self, raft: RaftSide, config: OrderingConfig) -> None:
        self.raft = raft
        self.config = config
        self.loop: asyncio.AbstractEventLoop | None = None
        self.controller: Controller | None = None
        self.active = False  # leader with its LEADER_CHANGE applied
        self.term = 0
        self._queue: collections.deque[_Pending] = collections.deque()
        self._in_flight: collections.deque[_InFlight] = collections.deque()
        self._batches_since_rebase = 0
        self._rebuild_pending = False  # a batch failed: rebuild the controller once drained
        self._proposals = 0  # batches proposed, ever (did a batch done lead to another?)
        self._timer_handle: asyncio.TimerHandle | None = None
        # When the next NoOpRecord is due (session clock); None while one is
        # queued, while not active, or with the interval at 0.
        self._noop_due: int | None = None
        # No new batch while leadership is handed over (quorum/handover.py).
        self.transferring = False
        self.voters_change_pending = False  # a VotersRecord queued by maybe_change_voters
        self.stats = BatchStats()
        self.throttled = 0
        # A large admin write being decided in a thread (decided_off_loop):
        # nothing else is decided until it is done.
        self._deciding: _Pending | None = None
        # What this controller refused lately (controller/refusals.py), for
        # GET /v1/refusals; a new term starts it empty.
        self.refusals = RefusalRing()

    # ------------------------------------------------------------ leadership

    async def become_active(self, term: int) -> None:
        """Commit LEADER_CHANGE; answer writes only once it has applied."""
        raft = self.raft
        self.step_down("a new term started")
        self.term = term
        self.refusals = RefusalRing()
        record = LeaderChangeRecord(
            controller_epoch=term, leader_id=raft.node_id, leader_url=self.config.advertised_url
        )
        for attempt in range(3):
            if not raft.leads(term):
                return
            image = raft.image
            if image.controller_epoch == term and image.leader_id == raft.node_id:
                break  # an orderer started again under the same leader: written already
            who = callers.controller_who(callers.LEADER_CHANGE, 1)
            result, error = await raft.propose(Batch(term, wall_clock_ms(), (record,), -1, who))
            image = raft.image
            if image.controller_epoch == term and image.leader_id == raft.node_id:
                break
            log.warning(
                "LEADER_CHANGE for epoch %d did not apply (%s, %s); retrying", term, result, error
            )
            await asyncio.sleep(0.05 * (attempt + 1))
        else:
            return
        if not raft.leads(term):
            return
        self.controller = Controller(raft.image, raft.controller_config, session_clock_ms())
        self.active = True
        # Kafka schedules the first an interval after its activation records commit.
        self._schedule_noop(session_clock_ms())
        log.info("node %d is the active controller at epoch %d", raft.node_id, term)
        # Queued together, so a new cluster's first batch holds its voter set and
        # its bootstrap records: whoever waits for metadata.version sees both.
        level = raft.image.features.get(METADATA_VERSION)
        if level is None or level in LEGACY_LEVELS:
            if level is not None:
                log.warning(
                    "metadata.version %d is metaquorum's level from before it took Kafka's "
                    "numbering (docs/decisions.md 62): writing %d (Kafka %s), which follows "
                    "the same rules; brokers must now register with metadata.version %d-%d",
                    level,
                    LEGACY_LEVELS[level],
                    release_name(LEGACY_LEVELS[level]),
                    MIN_METADATA_VERSION,
                    MAX_METADATA_VERSION,
                )
            self._queue.append(_Pending(_BOOTSTRAP, None, callers.BOOTSTRAP))
        self.maybe_change_voters()
        self._schedule_timer(self.controller.next_fence_check_ms())
        self._pump()

    def step_down(self, why: str) -> None:
        """Stops ordering: the batches in flight may still commit (their
        callers hear so), the queued requests are refused with ``why``."""
        was_active = self.active
        self.active = False
        self.controller = None
        self._noop_due = None  # Kafka's cancelNextWriteNoOpRecord on renounce
        if self._timer_handle is not None:
            self._timer_handle.cancel()
            self._timer_handle = None
        error = self.raft.not_controller(why)
        while self._in_flight:
            for pending, _ in self._in_flight.popleft().decided:
                fail(pending.future, OutcomeUnknownError(f"{why}; the write may still commit"))
        self._rebuild_pending = False
        if self._deciding is not None:  # its thread's result is dropped
            fail(self._deciding.future, error)
            self._deciding = None
        while self._queue:
            fail(self._queue.popleft().future, error)
        self.raft.stepped_down()
        if was_active:
            log.info("node %d stopped being the active controller: %s", self.raft.node_id, why)

    # ------------------------------------------------------------ writes

    def submit_to(
        self, request: object, reply: Reply, pump: bool = True, caller: Caller | None = None
    ) -> None:
        """Queues ``request`` for the next batch; its response (or a NodeError)
        goes to ``reply`` once the records are applied. Raises the NodeError
        at once when this voter takes no write. ``pump`` False: the caller
        queues more first, then calls ``pump``, so that one batch holds them
        all. ``caller``: who asked, written with its records (quorum/callers.py)."""
        if (refusal := self.raft.refusal()) is not None:
            raise refusal
        if not self.active:
            raise self.raft.not_controller("this node is not the active controller")
        if type(request) is RefusalsQuery:  # a read of the ring: nothing to decide
            session = None
            if request.session_of is not None:
                heartbeats = self.controller.heartbeats
                session = heartbeats.facts(request.session_of, session_clock_ms())
            reply.set_result(self.refusals.answer(request, session))
            return
        if type(request) is BrokerHeartbeatRequest and not self.transferring:
            # One that changes nothing is answered now from the committed
            # image, not after the batches in flight (decisions.md 139).
            result = self.controller.quiet_heartbeat(request, session_clock_ms(), self.raft.image)
            if result is not None:
                self.stats.quiet_heartbeats += 1
                reply.set_result(result.response)  # never a refusal: not noted
                return
        if len(self._queue) >= self.config.max_queued_requests:
            self.throttled += 1
            raise ThrottledError(
                f"{len(self._queue)} requests are queued (the limit is "
                f"{self.config.max_queued_requests}); nothing was written"
            )
        self._queue.append(_Pending(request, reply, caller))
        if stage_trace.TRACE is not None:
            stage_trace.TRACE.mark("submit")
        if pump:
            self._pump()

    def pump(self) -> None:
        """Decides what ``submit_to(..., pump=False)`` queued."""
        self._pump()

    def enqueue(self, request: object, reply: Reply | None, caller: Caller | None = None) -> None:
        """Queues work of the voter's own (a voter set, a periodic sweep)
        past the admission limit, and pumps; ``caller`` says which
        (quorum/callers.py)."""
        self._queue.append(_Pending(request, reply, caller))
        self._pump()

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    def _pump(self) -> None:
        """Decides what is queued into the next batch, while fewer than
        ``max_batches_in_flight`` are out; each is decided on top of the view
        that already holds the records of the batches in flight."""
        if not self.active or not self._queue or self._deciding is not None:
            return
        if self.transferring:
            return  # the queue waits: the new leader answers it (307) or we resume
        if self._in_flight and (
            len(self._in_flight) >= self.config.max_batches_in_flight
            or self._rebuild_pending
            or self._batches_since_rebase >= REBASE_EVERY_BATCHES
        ):
            return  # _batch_done pumps again
        controller = self.controller
        if not self._in_flight:
            if self._rebuild_pending:
                # A batch failed (decided on a view the log did not follow): the
                # leader state is rebuilt from what the log says.
                self._rebuild_pending = False
                controller = self.controller = Controller(
                    self.raft.image, self.raft.controller_config, session_clock_ms()
                )
            controller.committed(self.raft.image)
            self._batches_since_rebase = 0
        base_offset = controller.view.next_offset
        now = session_clock_ms()
        decided: list[tuple[_Pending, object]] = []
        records: list[Record] = []
        noops = balanced = 0
        known: dict = {}  # ControllerResult.merged of every result in the batch
        # Who asked for which records: each request's are counted once the
        # next is taken (the branches below leave by ``continue``).
        runs = WhoRuns()
        asked: _Pending | None = None
        mark = 0
        while self._queue and len(records) < self.config.max_batch_records:
            pending = self._queue[0]
            if pending.future is not None and pending.future.done():
                self._queue.popleft()
                continue  # its caller gave up before we decided it
            if decided_off_loop(pending.request, controller.view):
                if records or decided or self._in_flight:
                    break  # decided alone, once what is ahead of it is done
                self._queue.popleft()
                self._decide_off_loop(controller, pending, now, base_offset)
                return
            self._queue.popleft()
            if asked is not None:
                runs.add(asked.caller, asked.request, len(records) - mark)
            asked, mark = pending, len(records)
            try:
                if pending.request is _FENCE:
                    while (result := controller.maybe_fence_stale_broker(now)) is not None:
                        records.extend(result.records)
                    continue
                if pending.request is _UNCLEAN:
                    result = controller.maybe_elect_unclean_leaders(now)
                    if result is not None:
                        records.extend(result.records)
                    continue
                if pending.request is _TOKEN_SWEEP:
                    # Token times are absolute: the sweep compares them with
                    # the wall clock (controller/delegation_token_control.py).
                    result = controller.maybe_sweep_delegation_tokens(now, wall_clock_ms())
                    if result is not None and result.records:
                        records.extend(result.records)
                        log.info(
                            "delegation tokens: %d expired token(s) removed%s",
                            len(result.records),
                            "; more to do" if result.response else "",
                        )
                    continue
                if pending.request is _BALANCE:
                    result = controller.maybe_balance_partition_leaders(now)
                    if result is not None and result.records:
                        records.extend(result.records)
                        balanced += len(result.records)
                        log.info(
                            "leader balancing: %d partition(s) led by their preferred replica "
                            "again%s",
                            len(result.records),
                            "; more to do" if result.response else "",
                        )
                    continue
                if pending.request is _NOOP:
                    # Kafka's writeNoOpRecord event schedules the next one when
                    # it runs: one per interval, whatever else is written.
                    self._schedule_noop(now)
                    if supports_noop_record(controller.view.metadata_version):
                        # Into the view too: what is decided after it in this
                        # batch sees its offset taken (a registration's epoch
                        # is the offset of its own record).
                        noop = (NoOpRecord(),)
                        controller.replay(noop)
                        records.extend(noop)
                        noops += 1
                    continue
                if pending.request is _BOOTSTRAP:
                    boot = controller.bootstrap_records()
                    controller.replay(boot)
                    records.extend(boot)
                    continue
                if type(pending.request) is VotersRecord:
                    controller.replay((pending.request,))
                    records.append(pending.request)
                    decided.append((pending, None))
                    continue
                if (
                    type(pending.request) is BrokerHeartbeatRequest
                    and time.monotonic() - pending.enqueued > self.config.heartbeat_deadline_s
                ):
                    result = controller.expire_heartbeat(pending.request, now)
                else:
                    result = controller.handle(pending.request, now)
            except Exception as e:  # a bug: answer it, keep serving the rest
                log.exception("the controller failed on %r", pending.request)
                fail(pending.future, e)
                continue
            records.extend(result.records)
            if result.merged:
                known.update(result.merged)
            decided.append((pending, result.response))
        if asked is not None:
            runs.add(asked.caller, asked.request, len(records) - mark)
        if not records:
            if self._in_flight:
                # Rejections decided on a view that holds uncommitted records:
                # answered when those commit, as Kafka does (its purgatory).
                self._in_flight[-1].decided.extend(decided)
            else:
                for pending, response in decided:
                    self._settle(pending, response)
            self._pump()
            return
        self._propose(controller, records, runs.who(), decided, known, base_offset, noops, balanced)
        self._pump()

    def _propose(
        self,
        controller: Controller,
        records: list[Record],
        who: tuple,
        decided: list[tuple[_Pending, object]],
        known: dict,
        base_offset: int,
        noops: int = 0,
        balanced: int = 0,
    ) -> None:
        batch = Batch(self.term, wall_clock_ms(), tuple(records), base_offset, who)
        entry = _InFlight(decided, len(records), noops, balanced)
        self._in_flight.append(entry)
        self.stats.most_in_flight = max(self.stats.most_in_flight, len(self._in_flight))
        self._batches_since_rebase += 1
        # With one batch in flight the view was rebased on the image before
        # this batch was decided, and nothing more is replayed into it until
        # the batch is done (the checks above return): its apply may take it.
        view = controller.view if self.config.max_batches_in_flight == 1 else None
        self._proposals += 1
        future = self.raft.propose(batch, known, view)
        future.add_done_callback(functools.partial(self._batch_done, entry))

    def _decide_off_loop(
        self, controller: Controller, pending: _Pending, now: int, base_offset: int
    ) -> None:
        """Decides a large admin write in a thread; ``_decided_off_loop``
        proposes its records, alone in their batch. Nothing else is decided
        meanwhile; a quiet heartbeat is still answered."""
        controller.build_index()
        self._deciding = pending
        decision = self.loop.run_in_executor(None, controller.handle, pending.request, now)
        decision.add_done_callback(
            functools.partial(self._decided_off_loop, controller, pending, base_offset)
        )

    def _decided_off_loop(
        self, controller: Controller, pending: _Pending, base_offset: int, decision
    ) -> None:
        if self._deciding is not pending:
            return  # stepped down meanwhile: its caller was told, its view dropped
        self._deciding = None
        try:
            result = decision.result()
        except Exception as e:  # a bug: answer it, keep serving the rest
            log.exception("the controller failed on %r", pending.request)
            fail(pending.future, e)
            self._rebuild_pending = True  # it may have replayed part of its records
            self._pump()
            return
        if self.transferring:
            # Nothing new is proposed while leadership is handed over; its
            # records are in the view, which is rebuilt before the next decision.
            fail(pending.future, self.raft.not_controller("leadership is being handed over"))
            self._rebuild_pending = True
            return
        if not result.records:
            self._settle(pending, result.response)
        else:
            runs = WhoRuns()
            runs.add(pending.caller, pending.request, len(result.records))
            self._propose(
                controller,
                list(result.records),
                runs.who(),
                [(pending, result.response)],
                dict(result.merged or {}),
                base_offset,
            )
        self._pump()

    def _settle(self, pending: _Pending, response: object) -> None:
        """Answers one decided request, keeping what it refused."""
        if response is not None:
            self.refusals.note(pending.request, response, wall_clock_ms, self._topic_name)
        settle(pending.future, response)

    def _topic_name(self, topic_id: str) -> str | None:
        controller = self.controller
        return None if controller is None else controller.view.topic_name(topic_id)

    def _batch_done(self, entry: _InFlight, future: asyncio.Future) -> None:
        if not self._in_flight or self._in_flight[0] is not entry:
            return  # we stepped down meanwhile; those callers were told already
        self._in_flight.popleft()
        proposals = self._proposals
        try:
            self._settle_batch(entry, future)
        finally:
            if self._proposals == proposals:
                self.raft.nothing_to_propose()

    def _settle_batch(self, entry: _InFlight, future: asyncio.Future) -> None:
        result, error = future.result()
        if error == FAIL_REASON.SUCCESS and result is not None and result >= 0:
            self.stats.batches += 1
            self.stats.records += entry.records
            self.stats.noop_records += entry.noops
            self.stats.balance_elections += entry.balanced
            self.stats.sizes.append(entry.records)
            self.stats.latencies.append(time.monotonic() - entry.started)
            for pending, response in entry.decided:
                self._settle(pending, response)
            self._pump()
            return
        why = f"the batch did not commit ({reason(error, result)})"
        log.warning("%s", why)
        for pending, _ in entry.decided:
            fail(pending.future, OutcomeUnknownError(why))
        if self.raft.leads(self.term) and result == STALE:
            # Our view was wrong. The batches behind this one were decided on
            # top of it and will come back STALE too; once they have, rebuild.
            self._rebuild_pending = True
            self._pump()
        else:
            self.step_down(why)

    # ------------------------------------------------------------ periodic work

    def _due_ms(self, fence_check_ms: int | None) -> int | None:
        """When the controller's next periodic work is due (Kafka's deferred
        events): the session-timeout fencer (``fence_check_ms``, as the
        caller read it), the unclean-election sweep or the next NoOpRecord."""
        due = [
            t
            for t in (
                fence_check_ms,
                self.controller.next_unclean_election_ms(),
                self.controller.next_balance_ms(),
                self.controller.next_token_sweep_ms(),
                self._noop_due,
            )
            if t is not None
        ]
        return min(due, default=None)

    def _schedule_noop(self, now: int) -> None:
        interval = self.config.metadata_max_idle_interval_ms
        self._noop_due = now + interval if interval > 0 else None

    def _schedule_timer(self, fence_check_ms: int | None) -> None:
        """The next tick, at the earliest thing due (at most a second away).
        ``fence_check_ms``: the controller's ``next_fence_check_ms()`` as the
        caller read it, so the sessions (one per broker) are walked once a tick."""
        if not self.active:
            return
        next_check = self._due_ms(fence_check_ms)
        delay = 1.0 if next_check is None else max(0.05, (next_check - session_clock_ms()) / 1000)
        self._timer_handle = self.loop.call_later(min(delay, 1.0), self._timer_tick)

    def _timer_tick(self) -> None:
        self._timer_handle = None
        if not self.active:
            return
        self.maybe_change_voters()
        self._pump()
        now = session_clock_ms()
        next_check = self.controller.next_fence_check_ms()
        if next_check is not None and next_check <= now:
            self.enqueue(_FENCE, None, callers.FENCE)
        next_sweep = self.controller.next_unclean_election_ms()
        if next_sweep is not None and next_sweep <= now:
            self.enqueue(_UNCLEAN, None, callers.UNCLEAN)
        next_balance = self.controller.next_balance_ms()
        if next_balance is not None and next_balance <= now:
            self.enqueue(_BALANCE, None, callers.BALANCE)
        next_token_sweep = self.controller.next_token_sweep_ms()
        if next_token_sweep is not None and next_token_sweep <= now:
            self.enqueue(_TOKEN_SWEEP, None, callers.TOKEN_SWEEP)
        if self._noop_due is not None and self._noop_due <= now:
            self._noop_due = None  # one queued at a time (Kafka's noOpRecordScheduled)
            self.enqueue(_NOOP, None, callers.NOOP)
        # A fence queued above makes this one early, never late: the tick
        # then comes in 50 ms and reads it again.
        self._schedule_timer(next_check)

    # ------------------------------------------------------------ voter set

    def maybe_change_voters(self) -> None:
        """Queues the voter set Raft's side wants written (the first set, or
        a voter's new directory: quorum/voter_guard.py). One change at a
        time: the next waits until this one has applied. The caller pumps."""
        if self.voters_change_pending:
            return
        wanted = self.raft.wanted_voters()
        if wanted is None:
            return
        log.info(
            "writing the voter set %s",
            ", ".join(f"{v.voter_id}/{v.voter_directory_id}" for v in wanted),
        )
        self.voters_change_pending = True
        future = self.loop.create_future()

        def done(f: asyncio.Future) -> None:
            self.voters_change_pending = False
            if not f.cancelled() and f.exception() is not None:
                log.warning("the voter set was not written: %s", f.exception())

        future.add_done_callback(done)
        self._queue.append(_Pending(VotersRecord(voters=wanted), future, callers.VOTER_SET))


def settle(future: Reply | None, value) -> None:
    if future is not None and not future.done():
        future.set_result(value)


def fail(future: Reply | None, error: BaseException) -> None:
    if future is not None and not future.done():
        future.set_exception(error)


_REASONS = {getattr(FAIL_REASON, n): n for n in dir(FAIL_REASON) if n.isupper()}


def reason(error, result) -> str:
    """Why a proposed batch did not commit, in words."""
    if error == FAIL_REASON.SUCCESS:
        return "stale epoch or offset" if result == STALE else "not a valid batch"
    return _REASONS.get(error, str(error))
