"""A voter: Raft underneath (pysyncobj, built and driven only through
quorum/raft/host.py), the orderer (the controller and group commit,
quorum/orderer.py) on top when it leads; add-voter and remove-voter in
quorum/voter_changes.py; leadership handed over in quorum/handover.py.

Threads: pysyncobj's tick thread applies entries and fires callbacks; every
controller decision is made on the asyncio loop. Callbacks cross over with
``loop.call_soon_threadsafe``; nothing here blocks the loop or the tick thread.
The node is the orderer's ``RaftSide``: it proposes the orderer's batches,
tells it when leadership comes and goes, and says why a write is refused.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from pysyncobj import FAIL_REASON

from controller.config import ControllerConfig
from controller.controller import Controller
from metadata_records.codec import encode_batch
from metadata_records.delta import ImageDelta
from metadata_records.image import MetadataImage
from metadata_records.records import (
    Batch,
    NoOpRecord,
    Voter,
)
from metadata_records.snapshot import image_digest

from . import stage_trace
from .callers import Caller
from .data_dir_reader import voters_past_commit
from .disk_health import DiskHealth, quiet_tick_tracebacks
from .handover import Handover
from .history import HistoryWriter
from .history_images import HistoryReader
from .leadership_events import LeadershipEvents
from .membership import (
    addresses,
    describe,
)
from .node_config import DataDirIdentity, NodeConfig, record_formation
from .node_errors import (
    NodeError,
    OutcomeUnknownError,
    UnavailableError,
    not_controller,
    refusal,
)
from .offset_waiters import OffsetWaiters
from .orderer import (
    BatchStats,
    Orderer,
    OrderingConfig,
    Reply,
    wall_clock_ms,
)
from .raft import patches
from .raft.durability import use_journal
from .raft.host import RaftHost
from .raft.internals import node_name
from .raft.pre_vote import PreVote
from .raft.status import RaftStatus
from .startup_checks import check_journal_holds_what_was_committed, check_snapshot_covers_journal
from .state_machine import MetadataStateMachine
from .voter_changes import VoterChanges
from .voter_guard import VoterGuard, bootstrap_voters, replacement

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ the node


class ApplyWatcher(Protocol):
    """Told on the loop after batches applied. ``needs_wakeup`` is asked on the
    Raft thread, just after the image moved: False when the watcher will look
    at the image soon anyway (its own timer is armed), so the Raft thread
    does not wake the loop for it (a syscall and a GIL hand-over per batch)."""

    def needs_wakeup(self) -> bool: ...
    def on_applied(self) -> None: ...


# A leader that cannot write hands leadership to a caught-up voter; if none is
# caught up within this long, it steps down and the others elect one.
DISK_HANDOVER_S = 1.0


def _nothing_starting() -> str | None:
    return None


class QuorumNode:
    def __init__(self, config: NodeConfig, identity: DataDirIdentity) -> None:
        """Builds Raft (quorum/raft/host.py): call from the main thread (its
        tick thread stops when the constructing thread ends)."""
        self.config = config
        self.identity = identity
        cluster_id = self.cluster_id = identity.cluster_id
        self.node_id = config.node_id
        self.controller_config = ControllerConfig(
            cluster_id,
            session_timeout_ms=config.session_timeout_ms,
            leader_imbalance_check_interval_ms=config.leader_imbalance_check_interval_ms,
            delegation_token_secret=config.delegation_token_secret,
            delegation_token_max_lifetime_ms=config.delegation_token_max_lifetime_ms,
            delegation_token_expiry_time_ms=config.delegation_token_expiry_time_ms,
            delegation_token_expiry_check_interval_ms=(
                config.delegation_token_expiry_check_interval_ms
            ),
        )
        self.sm = MetadataStateMachine(config.log_retention)
        # The cluster as it was (quorum/history.py): written here, read by
        # whichever process serves GET /v1/image (history_images.py).
        self.history: HistoryReader | None = None
        if config.history is not None:
            self.sm.history = HistoryWriter(config.history_dir, config.history)
            self.sm.history.start()
            self.history = HistoryReader(config.history_dir, config.history)
        # Entries on no file would hang the node or be dropped silently (refused, exit 3).
        check_snapshot_covers_journal(config.journal_file, config.dump_file)
        check_journal_holds_what_was_committed(config.journal_file, config.dump_file)
        # Whether this voter can persist (quorum/disk_health.py); the journal reports to it.
        self.disk = DiskHealth(config.data_dir)
        use_journal(config.fsync, self.disk)
        quiet_tick_tracebacks()
        # Every replacement in pysyncobj, in order, once per process (quorum/raft/patches.py).
        patches.install()
        # The first member list: --voters. Once the log is replayed (the
        # first ticks) it is the committed voter set (_follow_voter_set).
        others = [
            addr
            for node_id, addr in sorted(config.voters.items())
            if node_id != self.node_id and addr != config.raft_address
        ]
        # Read before pysyncobj opens the journal (decisions.md 50).
        self._pending_voters = voters_past_commit(config.journal_file)
        if self._pending_voters is not None:
            log.info(
                "the journal holds a voter set past the stored commit index (Raft index "
                "%d): it is this node's voter set until applied: %s",
                self._pending_voters[0],
                describe(self._pending_voters[1]),
            )
        self.guard = VoterGuard(
            cluster_id=cluster_id,
            node_id=self.node_id,
            directory_id=identity.directory_id,
            addresses=config.voters,
            formed=identity.formed,
            bootstrap=identity.bootstrap,
            committed_voters=self._voters_in_force,
            persist_formation=self._persist_formation,
            joining=config.joining and not identity.formed,
            applied=self._applied_voters,
        )
        self.guard.set_book(self._book(config.voters, {}))
        # Elections and step-downs by cause, heartbeat gaps (issue 25); made
        # before pysyncobj's tick thread can reach RaftHost.never_stand.
        self.leadership = LeadershipEvents()
        # Told on the loop when the leader this node knows of (its id, or
        # the URL its LEADER_CHANGE announced) changes: the HTTP workers and
        # the orderer process then hear at once how to redirect a write.
        self.leader_watchers: list[Callable[[], None]] = []
        self._leader_seen: tuple[int | None, str | None] = (None, None)
        # node id -> the URL its last LEADER_CHANGE seen here announced (_leader_url_of).
        self._leader_urls: dict[int, str] = {}
        # While a leadership won here awaits its first write: the offset the
        # next batch to look at starts at, once its LEADER_CHANGE applied.
        self._writes_from: int | None = None
        self.raft = RaftHost(config, others, self.sm, self.guard, self._on_leading_changed)
        self.raft.add_tick_callback(self._guard_tick)
        self._members_of: tuple = (None, None, None)  # (voters, learners, heard) followed
        self._said_flag_differs: tuple[Voter, ...] = ()
        # add-voter, remove-voter and update-voter, one at a time (quorum/voter_changes.py).
        self.voter_changes = VoterChanges(self)
        # update-voter over the Raft port: a voter restarted at a new address
        # asks to be moved; the leader moves it (quorum/membership.py rule 6).
        self.raft.answer_voter_updates(self.voter_changes.own_ask, self.voter_changes.answer_ask)
        self._wire_disk_health()  # first: its tick runs even when a journal sync raises
        self.raft.sync_journal_before_acks()
        self.raft.stop_on_divergence(self._on_diverged)
        self.pre_vote: PreVote | None = None
        if config.pre_vote:
            timeouts = config.election_timeouts
            self.pre_vote = PreVote(lease_s=timeouts.lease_s)
            self.raft.use_pre_vote(self.pre_vote, self.guard, self.node_id, timeouts)
            bind = config.raft_bind or config.raft_address
            if config.raft_secret and bind:
                self.raft.use_beacons(
                    self.pre_vote, self.guard, self.node_id, timeouts, config.raft_secret, bind,
                    peers=lambda: [a for n, a in self.voter_addresses().items() if n != self.node_id],
                )  # fmt: skip
        self.raft.report_to(self.leadership)
        self.raft.defer_commit_push(held_batches=lambda: self.sm.record_batches)
        # Replay gate: not ready before the commit index found on disk is applied.
        self.replay_target = self.raft.commit_index
        self.loop: asyncio.AbstractEventLoop | None = None
        # The controller and group commit, on the loop (quorum/orderer.py).
        self.orderer = Orderer(self, OrderingConfig.of(config))
        # wait_for_offset's waiters, woken after an apply only while there are
        # some: waking the event loop for every batch nobody waits on would
        # cost a syscall and a GIL hand-over on the Raft thread's critical path.
        self._waiters = OffsetWaiters()
        # Told on the loop after batches applied (coalesced): the HTTP
        # workers' links send the new batches on (voter/core_link.py).
        self.apply_watchers: list[ApplyWatcher] = []
        self._applied_wakeup_pending = False
        self._barrier: asyncio.Future | None = None
        self._barriers_proposed = 0  # numbers the barriers: a read uses one proposed after it
        self.stopping = False
        # With HTTP workers: why they do not all listen on the API port yet
        # (CoreLinks.starting), else None. Not ready before: the first worker
        # to listen would take every early connection (decision 136).
        self.http_starting: Callable[[], str | None] = _nothing_starting
        self._digest: tuple[MetadataImage, str] | None = None
        # Leadership handed to another voter (quorum/handover.py).
        self.handover = Handover(self)

    def _wire_disk_health(self) -> None:
        """A voter that cannot write its data dir takes no entries, casts no
        vote and sends no acknowledgement (the transport drops them), stands
        for no election and does not lead (``_disk_tick``); its snapshots
        check for room first (quorum/disk_health.py)."""
        disk = self.disk
        self.raft.refuse_writes_unless(lambda: disk.writable)
        self._journal = self.raft.journal
        self._disk_leaving_since: float | None = None
        self.sm.disk = disk
        self.sm.journal_file = self.config.journal_file
        self.raft.add_tick_callback(self._disk_tick)

    def _disk_tick(self) -> None:  # tick thread, at the end of every tick
        journal = self._journal
        if journal.sync_failed is not None:
            if self.sm.fatal is None:  # what is on disk is unknown: stop (serve exits 3)
                self.sm.fatal = journal.sync_failed
                self.call_on_loop(self.orderer.step_down, "this voter's journal sync failed")
            return
        disk = self.disk
        disk.check()
        if disk.writable and self._disk_leaving_since is None:
            return
        if not disk.writable:
            # It could not store the term and vote of a candidacy: never stand.
            self.raft.stand_no_sooner_than(self.config.raft_max_timeout)
        if self.raft.is_leader:
            # Once begun, a handover is finished even if room came back meanwhile:
            # this node stopped being the controller, so it must not stay leader.
            self._hand_over_for_disk()
        elif disk.writable:
            self._disk_leaving_since = None

    def _hand_over_for_disk(self) -> None:  # tick thread
        """Stops deciding writes at once, hands leadership to a caught-up voter
        (Raft's TimeoutNow: it is elected at its next tick), and steps down;
        without a caught-up voter within ``DISK_HANDOVER_S`` it steps down
        anyway and the others elect a leader within an election timeout."""
        now = time.monotonic()
        if self._disk_leaving_since is None:
            self._disk_leaving_since = now
            self.call_on_loop(self.orderer.step_down, "this voter cannot write to its disk")
        handed = self.raft.transfer_leadership() == FAIL_REASON.SUCCESS
        self.raft.say_step_down("disk_unwritable", now)
        if not handed and now - self._disk_leaving_since < DISK_HANDOVER_S:
            return
        self.raft.step_down()
        log.warning(
            "stepped down as leader after %.2f s because this voter cannot write to its disk (%s)",
            now - self._disk_leaving_since,
            "leadership handed to a caught-up voter"
            if handed
            else "no other voter was caught up: a leader is elected within an election timeout",
        )

    def disk_refusal(self) -> str | None:
        """Why a write sent to a voter that cannot write its disk is refused
        (a 503 naming the disk), unless another leader is known (then the
        usual 307)."""
        reason = self.disk.reason()
        if reason is None:
            return None
        leader = self.raft_leader_id
        if leader is not None and leader != self.node_id and self.leader_url is not None:
            return None
        return (
            f"this voter cannot write to its disk, so it does not lead: {reason}. Another "
            "voter takes over within seconds: retry after Retry-After"
        )

    def _persist_formation(self, voters: dict) -> None:  # tick thread (or the constructor)
        self.identity = record_formation(self.config.data_dir, self.identity, voters)

    def _guard_tick(self) -> None:  # tick thread, at the end of every tick
        """An observer is admitted once the committed voter set names it; until
        then (and any voter not admitted) it never stands for election."""
        guard = self.guard
        if not guard.formed and self._pending_voters is None:
            guard.on_applied()  # admitted by an applied set, never by a pending one
        # Voters its peers name, kept only while not admitted (voter_guard rule 7).
        heard = None if guard.admitted else guard.heard_of
        members_of = (self._voters_in_force(), guard.learners, heard)
        if any(a is not b for a, b in zip(members_of, self._members_of, strict=True)):
            set_changed = members_of[0] is not self._members_of[0]
            self._members_of = members_of
            self._follow_voter_set(*members_of)
            if set_changed and guard.send_hello is not None:
                guard.send_hello()  # peers learn the new set (and its book)
        if not guard.admitted:
            # Tick thread: it never stands, and forgets a leader silent for an
            # election timeout (RaftHost.never_stand says why).
            self.raft.never_stand(self.config.raft_max_timeout, self.leadership.forget_heartbeats)
        self._watch_leader()

    def _watch_leader(self) -> None:  # tick thread, every tick: one leader lookup
        image = self.image
        if image.leader_id >= 0 and image.leader_url:
            self._leader_urls[image.leader_id] = image.leader_url
        leader = self.raft_leader_id
        seen = (leader, self._leader_url_of(leader))
        if seen != self._leader_seen:
            self._leader_seen = seen
            if self.leader_watchers:
                self.call_on_loop(self._leader_moved)

    def _leader_moved(self) -> None:
        for watcher in list(self.leader_watchers):
            watcher()

    def _follow_voter_set(
        self,
        voters: tuple[Voter, ...],
        learners: dict[int, str],
        heard: dict[int, str] | None,
    ) -> None:
        """Tick thread: pysyncobj's members are the committed voter set (or
        --voters before one is written), its read-only nodes the learners
        (quorum/membership.py rules 1-2) and, on a node that is not admitted,
        the voters its peers name that its own set does not (voter_guard
        rule 7: pysyncobj only talks to nodes it lists)."""
        book = addresses(voters) if voters else dict(self.config.voters)
        members = {a for nid, a in book.items() if nid != self.node_id}
        extra = {**(heard or {}), **learners}
        extra = {nid: a for nid, a in extra.items() if nid not in book and nid != self.node_id}
        self.guard.set_book(self._book(book, extra))
        # A lone voter ticks fast while it is alone (RaftHost.set_members).
        alone = not members and self.config.raft_address is not None
        if self.raft.set_members(members, set(extra.values()), alone) and voters:
            log.info(
                "Raft members now: voters %s%s",
                describe(voters),
                f"; also connected to {sorted(extra)}" if extra else "",
            )
        if voters and book != self.config.voters and not self.config.joining:
            self._say_flag_differs(voters)
        self.guard.say_if_removed()

    def _say_flag_differs(self, voters: tuple[Voter, ...]) -> None:
        """Once per voter set: --voters disagrees with the set in the log, which
        is in force (the flag only says who forms a new cluster; issue 24,
        finding 6: a voter restarted with another list used to act on it)."""
        if voters == self._said_flag_differs:
            return
        self._said_flag_differs = voters
        flag = ",".join(f"{nid}@{addr}" for nid, addr in sorted(self.config.voters.items()))
        log.warning(
            "--voters %s differs from the voter set in the log (%s): the log's set is in "
            "force, --voters only says who forms a new cluster and where a joiner finds it. "
            "Change membership with metaquorum add-voter / remove-voter, and start voters "
            "with the current set",
            flag,
            describe(voters),
        )

    def _book(self, voters: dict[int, str], learners: dict[int, str]) -> dict[int, str]:
        """Who is who on the Raft port: the voters, the learners, this node."""
        own = self.config.raft_address
        return {**voters, **learners, **({self.node_id: own} if own else {})}

    def voter_addresses(self) -> dict[int, str]:
        """The voters' Raft addresses by node id: the committed set, else --voters."""
        voters = self._voters_in_force()
        return addresses(voters) if voters else dict(self.config.voters)

    def _voters_in_force(self) -> tuple[Voter, ...]:
        """The voter set this node counts votes and acknowledgements by: the
        last one applied, or a later one its journal held at start (KIP-853
        reads the set from the whole log) until it has applied past it."""
        pending = self._pending_voters
        if pending is not None:
            raft = getattr(self, "raft", None)  # None while pysyncobj starts
            if raft is None or raft.last_applied < pending[0]:
                return pending[1]
            self._pending_voters = None  # applied past it: the image says
        return self.sm.image.voters

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.loop = self.orderer.loop = asyncio.get_running_loop()
        self.sm.on_applied = self._on_applied_threadsafe
        if self.raft.is_leader:
            self.loop.call_soon(self._leading_changed, True)

    async def stop(self, transfer: bool = True, timeout_s: float = 5.0) -> None:
        """Hands leadership over (if leading and asked to), then stops Raft."""
        self.stopping = True
        if transfer and self.raft.is_leader and len(self.voter_addresses()) > 1:
            try:
                await self.transfer_leadership(None, timeout_s=timeout_s)
            except UnavailableError as e:
                # Stop anyway: the others elect a leader after an election timeout.
                log.warning("leadership not handed over before stopping: %s", e)
        self.orderer.step_down("this node is shutting down")
        self.sm.on_applied = None
        self.raft.destroy()
        await asyncio.get_running_loop().run_in_executor(None, self.sm.finish_snapshot)
        if self.sm.history is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.sm.history.close)

    @property
    def image(self) -> MetadataImage:
        return self.sm.image

    def _applied_voters(self) -> tuple[int, tuple[Voter, ...]]:
        image = self.image  # one image: the offset and the set agree
        return image.last_offset, image.voters

    @property
    def raft_alive(self) -> bool:
        return self.raft.alive and self.sm.fatal is None

    @property
    def replaying(self) -> bool:
        return self.raft.last_applied < self.replay_target

    @property
    def raft_leader_id(self) -> int | None:
        leader = self.raft.leader
        return None if leader is None else self.guard.node_id_of(leader)

    @property
    def leader_url(self) -> str | None:
        """The active controller's URL, as its LEADER_CHANGE announced it."""
        return self._leader_url_of(self.raft_leader_id)

    def _leader_url_of(self, leader: int | None) -> str | None:
        image = self.image
        if image.leader_id >= 0 and image.leader_id == leader:
            return image.leader_url
        # Raft elected ``leader`` before its LEADER_CHANGE applied here: the URL
        # it announced when it led before still reaches it, so a write sent
        # here is redirected there rather than refused (issue 42).
        return None if leader is None else self._leader_urls.get(leader)

    @property
    def caught_up(self) -> bool:
        """Applied nearly everything the leader says is committed (a few
        entries of lag under load are normal and must not flap readiness).
        The leader's commit index, not this node's: a node that has just
        joined (an observer, a new voter) knows the leader before it holds
        any entry, and its own commit index is then 0."""
        raft = self.raft
        committed = max(raft.commit_index, raft.leader_commit_index)
        return committed - raft.last_applied <= self.config.ready_lag_entries

    @property
    def ready(self) -> bool:
        return (
            self.raft_alive
            and not self.replaying
            and not self.stopping
            and self.raft_leader_id is not None
            and self.caught_up
            and self.disk.writable
            and self.http_starting() is None
            and self.guard.role() != "removed"
            and self.guard.moved() is None  # counts for nothing until moved (rule 6)
        )

    # ------------------------------------------------------------ tick-thread bridges

    def call_on_loop(self, fn, *args) -> None:
        """Runs ``fn(*args)`` on the loop thread, from the tick thread (none once the loop closed)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # loop closed during shutdown
            pass

    def _on_diverged(self, why: str) -> None:  # tick thread
        # Stops applies, writes, reads and readiness at once; serve exits with 3.
        self.sm.fatal = why
        self.call_on_loop(self.orderer.step_down, "this voter's log diverged from the leader's")

    def _on_leading_changed(self, was_leading: bool, leading: bool) -> None:  # tick thread
        now = time.monotonic()
        if was_leading:
            self.leadership.leadership_lost(self.raft.step_down_cause(now))
        if leading:
            self._writes_from = None
            self.leadership.leadership_won(
                self.raft.term, now, int(time.time() * 1000), self._node_id_of
            )
        self.call_on_loop(self._leading_changed, leading)

    def _on_applied_threadsafe(self) -> None:  # tick thread, after the image moved
        if self.leadership.awaiting_term is not None:
            self._watch_first_write()
        # A waiter counts itself before it reads the image (wait_for_offset), so
        # either it sees the new image or this sees it waiting: no lost wakeup.
        if self._applied_wakeup_pending:
            return
        if self._waiters.count or any(w.needs_wakeup() for w in self.apply_watchers):
            self._applied_wakeup_pending = True
            self.call_on_loop(self._on_applied)

    def _node_id_of(self, raft_node) -> int | None:
        """The node id of a pysyncobj node (one that sent AppendEntries)."""
        return self.guard.node_id_of(node_name(raft_node))

    def _watch_first_write(self) -> None:  # tick thread, after an apply
        """Times a leadership won here to its LEADER_CHANGE applied, then to
        the first batch of its term that is more than NoOps: the failover a
        client saw (quorum/leadership_events.py)."""
        term, image, now = self.leadership.awaiting_term, self.image, time.monotonic()
        if image.controller_epoch != term or image.leader_id != self.node_id:
            return  # its LEADER_CHANGE has not applied yet
        if self._writes_from is None:
            self.leadership.became_active(term, now)
            self._writes_from = image.next_offset
            return
        # Called after each entry: one batch to look at, and its first record
        # tells (a NoOp is a batch of its own).
        entries = self.sm.log.read(self._writes_from, 1)
        self._writes_from = image.next_offset
        if entries and not isinstance(entries[0].record, NoOpRecord):
            self.leadership.first_write(term, now)

    # ------------------------------------------------------------ the orderer's side (RaftSide)

    def propose(
        self, batch: Batch, known: dict | None = None, view: ImageDelta | None = None
    ) -> asyncio.Future:
        """Submits a batch; the future gets (result, error) from the apply callback.
        ``known``: ControllerResult.merged for the batch's records; ``view``:
        the controller's view, holding exactly this batch on top of the image
        it was rebased on (MetadataStateMachine.expect)."""
        payload = encode_batch(batch)
        self.sm.expect(payload, batch, known, view)
        return self.append(payload)

    def propose_payload(self, payload: bytes) -> asyncio.Future:
        """``propose`` for a batch encoded already (an orderer process's).
        Held while a handover runs: the orderer process hears of it over its
        link, after batches it proposed meanwhile, which must not enter the
        log after TimeoutNow (quorum/handover.py)."""
        held = self.handover.hold(payload)
        return held if held is not None else self.append(payload)

    def append(self, payload: bytes) -> asyncio.Future:
        """Hands ``payload`` to pysyncobj; the future gets (result, error)."""
        loop = self.loop
        future = loop.create_future()

        def callback(result, error):  # tick thread, or this thread for QUEUE_FULL
            def settle():
                if stage_trace.TRACE is not None:
                    stage_trace.TRACE.mark("settled")
                if not future.done():
                    future.set_result((result, error))

            if loop.is_closed():
                return
            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:
                pass

        if stage_trace.TRACE is not None:
            stage_trace.TRACE.mark("propose")
        self.sm.apply_batch(payload, callback=callback)
        return future

    def leads(self, term: int) -> bool:
        return self.raft.is_leader and self.raft.term == term

    def nothing_to_propose(self) -> None:
        self.raft.commit_push_may_go()

    def refusal(self) -> NodeError | None:
        return refusal(self.sm.fatal, self.replaying, self.disk_refusal())

    def not_controller(self, why: str) -> NodeError:
        return not_controller(
            why, self.stopping, self.node_id, self.raft_leader_id, self.leader_url
        )

    def wanted_voters(self) -> tuple[Voter, ...] | None:
        """The first voter set once every voter's directory is known, or the
        set with a voter's new directory once that data dir has caught up
        (quorum/voter_guard.py); None while a voter change runs."""
        if self.voter_changes.running:
            return None
        voters = self.image.voters
        if not voters:
            return bootstrap_voters(self.guard)
        return replacement(voters, self.guard, self.raft.commit_index)

    def stepped_down(self) -> None:
        self.guard.learners = {}  # only a leader streams to learners

    # ------------------------------------------------------------ leadership

    def _leading_changed(self, leading: bool) -> None:
        if leading:
            self.handover.leading(self.raft.term)
        if leading and not self.stopping:
            asyncio.ensure_future(self.orderer.become_active(self.raft.term))
        elif not leading:
            if self.raft_leader_id is None:
                self.orderer.step_down(
                    "this voter stopped leading and no other leader is known yet"
                )
            else:
                self.orderer.step_down("leadership moved to another voter")

    # ------------------------------------------------------------ writes

    @property
    def active(self) -> bool:
        """The active controller: the leader, with its LEADER_CHANGE applied."""
        return self.orderer.active

    @property
    def controller(self) -> Controller | None:
        return self.orderer.controller

    @property
    def stats(self) -> BatchStats:
        return self.orderer.stats

    @property
    def throttled(self) -> int:
        return self.orderer.throttled

    @property
    def queue_depth(self) -> int:
        return self.orderer.queue_depth

    async def submit(
        self, request: object, timeout_s: float = 10.0, caller: Caller | None = None
    ) -> object:
        """Decides ``request`` as the active controller and returns its response
        once the records are applied. Raises a NodeError otherwise. ``caller``:
        who asked (quorum/callers.py), written with the records."""
        future = self.submit_future(request, caller=caller)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            raise OutcomeUnknownError(
                f"no answer within {timeout_s:.1f} s; the write may still commit"
            ) from None

    def submit_future(
        self, request: object, pump: bool = True, caller: Caller | None = None
    ) -> asyncio.Future:
        """``submit`` without the wait: raises the NodeError at once, or
        returns the future that gets the response (or the NodeError) once the
        records are applied. A caller that gives up leaves it alone (the
        orderer still decides it: only a future that is done is skipped)."""
        future = self.loop.create_future()
        self.orderer.submit_to(request, future, pump, caller)
        return future

    def submit_to(
        self, request: object, reply: Reply, pump: bool = True, caller: Caller | None = None
    ) -> None:
        """``submit_future`` into ``reply``: a Future, or anything with its
        ``done``, ``set_result`` and ``set_exception``, called on the loop (the
        HTTP workers' link answers straight into its outbox, with no Future
        and callback per write: voter/core_link.py). Orderer.submit_to says more."""
        self.orderer.submit_to(request, reply, pump, caller)

    def pump(self) -> None:
        """Decides what ``submit_to(..., pump=False)`` queued."""
        self.orderer.pump()

    # ------------------------------------------------------------ reads

    def _on_applied(self) -> None:
        self._applied_wakeup_pending = False
        self._waiters.wake()
        for watcher in self.apply_watchers:
            watcher.on_applied()

    async def wait_for_offset(self, offset: int, timeout_s: float) -> bool:
        """Waits until the log reaches ``offset`` (exclusive end) or the timeout."""
        return await self._waiters.wait(offset, timeout_s, lambda: self.image.next_offset)

    async def barrier(self, timeout_s: float = 5.0) -> int:
        """Linearizable read barrier: returns an offset such that every write
        acknowledged before the call is at or below it in this node's image.

        One empty batch through the log, shared by the reads that arrive
        while none is in flight; it takes no offsets, so it can interleave
        with the leader's batches anywhere. A read never uses a barrier
        proposed before it arrived (etcd's ReadIndex batches the same way):
        on a follower that barrier may sit in the log before a write the
        leader acknowledged since, and it applies here before that write.
        Such a read waits for it to end and shares the next one."""
        if self.replaying:
            raise UnavailableError("this node is still replaying its log", 1.0)
        deadline = time.monotonic() + timeout_s
        arrived = self._barriers_proposed
        while True:
            if self._barrier is None or self._barrier.done():
                if self.raft_leader_id is None:
                    raise UnavailableError("no leader is known; a linearizable read needs one", 0.5)
                self._barriers_proposed += 1
                self._barrier = self.propose(
                    Batch(self.image.controller_epoch, wall_clock_ms(), ())
                )
            barrier, number = self._barrier, self._barriers_proposed
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise UnavailableError("the read barrier did not commit in time", 0.5)
            try:
                result, error = await asyncio.wait_for(asyncio.shield(barrier), remaining)
            except TimeoutError:
                raise UnavailableError("the read barrier did not commit in time", 0.5) from None
            if number <= arrived:
                continue  # proposed before this read arrived: the next one
            if error == FAIL_REASON.SUCCESS and result is not None and result >= 0:
                return self.image.last_offset
            # The epoch moved (new leader) or the entry was lost: try again.
            if self._barrier is barrier:
                self._barrier = None
            await asyncio.sleep(0.02)

    # ------------------------------------------------------------ operations

    async def transfer_leadership(self, target: int | None, timeout_s: float = 5.0) -> int | None:
        """Hands leadership to ``target`` or the most caught-up voter (Handover.transfer)."""
        return await self.handover.transfer(target, timeout_s)

    # ------------------------------------------------------------ voter changes

    async def add_voter(self, node_id: int, address: str, timeout_s: float) -> tuple[Voter, bool]:
        """Adds ``node_id`` at Raft ``address`` to the voter set; returns the
        voter and whether this call changed the set (VoterChanges.add)."""
        return await self.voter_changes.add(node_id, address, timeout_s)

    async def remove_voter(self, node_id: int) -> tuple[Voter, ...]:
        """Removes ``node_id`` from the voter set; returns the new set (VoterChanges.remove)."""
        return await self.voter_changes.remove(node_id)

    async def update_voter(
        self,
        node_id: int,
        directory_id: str | None,
        address: str,
        kraft_versions: tuple[int, int] = (0, 1),
    ) -> tuple[tuple[Voter, ...], bool]:
        """Moves voter ``node_id`` to Raft ``address``, its directory id kept;
        returns the voter set and whether this call changed it (VoterChanges.update)."""
        return await self.voter_changes.update(node_id, directory_id, address, kraft_versions)

    def image_digest(self) -> tuple[int, str]:
        """(offset, SHA-256) of the current image; cached until the image changes."""
        image = self.image
        cached = self._digest
        if cached is None or cached[0] is not image:
            cached = self._digest = (image, image_digest(image))
        return image.last_offset, cached[1]

    def answer_ages(self) -> dict[str, float]:
        """Seconds since each peer (by Raft address) last answered this
        leader (RaftHost.answer_ages); empty unless this voter leads."""
        return self.raft.answer_ages()

    def status(self) -> RaftStatus:
        """Role, term, leader, commit index, last applied and members: all that
        code outside quorum/ reads of Raft (quorum/raft/status.py)."""
        return self.raft.status()

    def raft_status(self) -> dict:
        """pysyncobj's own status dict (RaftHost.status_dict)."""
        return self.raft.status_dict()
