"""The one pysyncobj ``SyncObj`` of a voter, built and driven here only.

``RaftHost`` builds the SyncObj with metaquorum's configuration (group commit
ourselves, the journal always with a snapshot, election timing, the guarded
port) and hooks up what the node asks for, one named method each: the journal
syncs, pre-vote, divergence, leadership events, the deferred commit push. The
node (quorum/node.py) reads and drives Raft through its named methods and
properties and names no pysyncobj attribute.

Threads: the SyncObj's tick thread starts inside the constructor, so build it
on the main thread (its tick thread stops when the constructing thread ends),
after ``patches.install()``, and hook up in the order the node calls the
methods. Reads are single attribute reads of the SyncObj (pysyncobj keeps no
lock); those that walk a dict the tick thread changes retry.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf
from pysyncobj.monotonic import monotonic
from pysyncobj.node import TCPNode

from ..leadership_events import EVENTS_ATTR, LeadershipEvents, say_step_down, step_down_cause
from ..node_config import NodeConfig
from ..startup_checks import refuse_unbound_port
from ..state_machine import MetadataStateMachine
from ..voter_guard import VoterGuard
from . import durability, internals
from .beacon import BeaconBook, BeaconPort, BeaconThread, beacon_key
from .divergence import watch_divergence
from .durability import LeaderView, MetaquorumJournal
from .election_timing import ElectionTimeouts, silent_leader_timeout
from .leader_liveness import BEACONS_ATTR, TURNS_ATTR, BeaconHooks
from .membership_port import check_port, set_members
from .pre_vote import (
    PreVote,
    attach_pre_vote,
    leader_lost_hook,
    mark_transfer_vote,
    turn_delay,
)
from .raft_port import (
    COMMIT_PUSH_DELAY_S,
    COMMIT_PUSH_HOLD_S,
    GuardedTransport,
    commit_push_may_go,
    defer_commit_push,
    excuse_own_stall,
    raft_password,
)
from .snapshot_transfer import TRANSFER_PIECE
from .status import RaftStatus, raft_status

_LEADER = 2  # pysyncobj 0.3.17's _RAFT_STATE.LEADER

# A follower's journal sync this long moves its election deadline on by as much
# (raft_port.excuse_own_stall); shorter ones are far inside the election timeout.
STALL_EXCUSED_S = 0.05
# A lone voter gets no network event to wake its poller after an append, so
# each commit would wait a whole tick (50 ms, the period with peers).
ALONE_TICK_S, TICK_S = 0.005, 0.05


class RaftHost:
    def __init__(
        self,
        config: NodeConfig,
        others: list[str],
        sm: MetadataStateMachine,
        guard: VoterGuard,
        on_leading_changed: Callable[[bool, bool], None],
    ) -> None:
        """Builds the SyncObj replicating to ``others`` (Raft addresses) and
        applying into ``sm``; ``on_leading_changed(was_leading, leading)`` runs
        on the tick thread at each change of Raft state. Refuses (ConfigError,
        exit 2) a Raft port pysyncobj could not bind."""
        conf = SyncObjConf(
            appendEntriesUseBatch=False,  # ~1-2 ms rounds; we group-commit ourselves
            autoTickPeriod=ALONE_TICK_S
            if len(config.voters) == 1 and not config.joining
            else TICK_S,
            journalFile=config.journal_file,
            fullDumpFile=config.dump_file,  # always with the journal (docs/pysyncobj.md 3.3)
            serializer=sm.write_snapshot,
            deserializer=sm.read_snapshot,
            serializeChecker=sm.snapshot_state,
            logCompactionMinEntries=config.compaction_entries,
            logCompactionMinTime=3600,
            raftMinTimeout=config.raft_min_timeout,
            raftMaxTimeout=config.raft_max_timeout,
            appendEntriesPeriod=config.election_timeouts.heartbeat_s,
            connectionTimeout=max(4.0, config.raft_max_timeout + 0.5),
            # pysyncobj's own step-down, a backstop: check_quorum steps down
            # after two raft_max_timeouts without a majority (leader_liveness.py).
            leaderFallbackTimeout=max(5.0, 2 * config.raft_max_timeout),
            dnsCacheTime=2.0,
            dnsFailCacheTime=2.0,
            # A restarted voter is dialled by the peers whose address sorts
            # higher (docs/pysyncobj.md 4.1): until they retry it can neither ask
            # nor grant a pre-vote, and a leader lost meanwhile was replaced
            # 1.5 s later instead of 0.2 s. A refused connect costs little.
            connectionRetryTime=0.25,
            commandsQueueSize=1000,
            # Our entries are whole batches: send each in one message, not in
            # 64 KiB pieces that the follower must reassemble.
            appendEntriesBatchSizeBytes=4 << 20,
            # A snapshot sent to a follower in pieces of 1 MiB, not 64 KiB
            # (quorum/raft/snapshot_transfer.py).
            logCompactionBatchSize=TRANSFER_PIECE,
            commandsWaitLeader=False,
            password=raft_password(config.raft_secret, len(config.voters) + config.joining),
            bindAddress=config.raft_bind,
            onStateChanged=lambda old, new: on_leading_changed(old == _LEADER, new == _LEADER),
            maxBindRetries=30,
        )
        self.beacons: BeaconThread | None = None  # use_beacons
        self._pushed_deadline: float | None = None  # never_stand's last push
        self._heard_at = 0.0
        self._syncobj = SyncObj(
            config.raft_address,  # None: an observer, pysyncobj's read-only node
            others,
            conf=conf,
            consumers=[sm],
            transportClass=GuardedTransport.with_guard(guard),
        )
        if not config.observer:
            refuse_unbound_port(
                self._syncobj, config.raft_bind or config.raft_address, config.node_id
            )
        check_port(self._syncobj)

    # ------------------------------------------------------------ hookups

    def add_tick_callback(self, callback: Callable[[], None]) -> None:
        """``callback()`` on the tick thread at the end of every tick, in the
        order added, under pysyncobj's tick-callback lock."""
        self._syncobj.addOnTickCallback(callback)

    def remove_tick_callback(self, callback: Callable[[], None]) -> None:
        """Not from inside a tick callback: that would deadlock the tick thread."""
        self._syncobj.removeOnTickCallback(callback)

    def refuse_writes_unless(self, writable: Callable[[], bool]) -> None:
        """While ``writable()`` is False the transport drops entries, votes and
        acknowledgements (quorum/disk_health.py)."""
        internals.transport(self._syncobj).disk_writable = writable

    def sync_journal_before_acks(self) -> None:
        """With fsync on, the journal syncs before a follower acknowledges
        and at the end of each leader tick, or, with
        ``durability.leader_sync_off_thread``, a leader's on a thread of its
        own, its entries counted toward the commit once synced
        (quorum/raft/durability.py says why)."""
        journal = self.journal
        transport = self.transport
        if not isinstance(journal, MetaquorumJournal) or not isinstance(
            transport, GuardedTransport
        ):
            raise RuntimeError(
                "pysyncobj did not build metaquorum's journal and transport: "
                "pin the pysyncobj of pyproject.toml"
            )
        syncobj = self._syncobj

        def sync_before_ack() -> None:
            held = journal.sync_pending()
            if held >= STALL_EXCUSED_S:
                excuse_own_stall(syncobj, held)

        transport.before_ack = sync_before_ack
        if durability.leader_sync_off_thread:
            journal.sync_off_thread(
                LeaderView(
                    leading=functools.partial(internals.is_leader, syncobj),
                    matched=functools.partial(internals.match_indexes, syncobj),
                    voters=functools.partial(internals.voter_count, syncobj),
                    term=functools.partial(internals.current_term, syncobj),
                    set_commit=functools.partial(internals.set_commit_index, syncobj),
                    wake=functools.partial(internals.wake, syncobj),
                )
            )
        syncobj.addOnTickCallback(journal.end_of_tick)

    def stop_on_divergence(self, on_diverged: Callable[[str], None]) -> None:
        """``on_diverged(why)`` on the tick thread once this voter's log
        diverged from the leader's (quorum/raft/divergence.py); it must not raise."""
        watch_divergence(self._syncobj, on_diverged)

    def use_pre_vote(
        self, pre_vote: PreVote, guard: VoterGuard, node_id: int, timeouts: ElectionTimeouts
    ) -> None:
        """Pre-vote and the leader lease (quorum/raft/pre_vote.py): a voter that lost
        contact asks before it raises its term, and one that hears a leader
        refuses it; the followers of a silent leader ask in turns (rule 6)."""
        transport = self.transport
        transport.on_pre_vote_message = attach_pre_vote(self._syncobj, pre_vote, guard)
        transport.mark_vote_request = functools.partial(mark_transfer_vote, pre_vote)
        transport.on_node_disconnected = leader_lost_hook(self._syncobj, pre_vote, guard, node_id)
        # A voter that starts knows no leader: it asks in its turn once it reaches
        # a voter, not after a whole election timeout, so a restarted cluster
        # elects as soon as a majority is up. No start-up delay is needed for a
        # rolling restart: the voters that hear the leader refuse the pre-vote.
        internals.set_election_deadline(self._syncobj, monotonic() + turn_delay(self._syncobj))

        def turns(leader_node) -> float:  # tick thread, at each AppendEntries
            leader = guard.node_id_of(getattr(leader_node, "id", ""))
            voters = guard.voter_set().keys()
            return silent_leader_timeout(voters, node_id, leader, timeouts, random.random())

        setattr(self._syncobj, TURNS_ATTR, turns)

    def use_beacons(
        self,
        pre_vote: PreVote,
        guard: VoterGuard,
        node_id: int,
        timeouts: ElectionTimeouts,
        secret: str,
        bind: str,
        peers: Callable[[], list[str]],
    ) -> BeaconThread:
        """Liveness beacons (quorum/raft/beacon.py) on UDP ``bind`` ("host:port",
        the Raft port's): sent every heartbeat while this voter leads and its
        tick thread ticks, counted from the leader it follows."""
        host, _, port = bind.rpartition(":")
        book = BeaconBook()
        syncobj = self._syncobj

        def leading_term() -> int | None:
            return syncobj._SyncObj__raftCurrentTerm if self.is_leader else None

        beacon_port = BeaconPort(
            node_id=node_id,
            bind=(host.strip("[]"), int(port)),
            peers=peers,
            leading_term=leading_term,
            ticked_at=lambda: getattr(syncobj, "_mq_ticked_at", 0.0),
        )
        self.beacons = BeaconThread(
            beacon_port, beacon_key(secret), timeouts.heartbeat_s, timeouts.beacon_stall_s, book
        )
        setattr(syncobj, BEACONS_ATTR, BeaconHooks(book, guard.node_id_of, pre_vote))
        pre_vote.stats.beacons = self.beacons.counters
        return self.beacons.start()

    def report_to(self, events: LeadershipEvents) -> None:
        """Elections, step-downs and heartbeat gaps are counted in ``events``."""
        setattr(self._syncobj, EVENTS_ATTR, events)
        self.transport.events = events

    def defer_commit_push(
        self,
        delay_s: float = COMMIT_PUSH_DELAY_S,
        hold_s: float = COMMIT_PUSH_HOLD_S,
        held_batches: Callable[[], int] | None = None,
    ) -> None:
        """A moved commit index goes with the next batch (raft_port.defer_commit_push)."""
        defer_commit_push(self._syncobj, delay_s, hold_s, held_batches)

    def commit_push_may_go(self) -> None:
        """The orderer proposes nothing more for now (raft_port.commit_push_may_go)."""
        commit_push_may_go(self._syncobj)

    # ------------------------------------------------------------ reads

    @property
    def transport(self) -> GuardedTransport | None:
        return internals.transport(self._syncobj)

    @property
    def journal(self) -> MetaquorumJournal | None:
        return internals.journal(self._syncobj)

    @property
    def is_leader(self) -> bool:
        return self._syncobj._isLeader()

    @property
    def leader(self) -> str | None:
        """The leader's Raft address as pysyncobj names it, or None."""
        leader = self._syncobj._getLeader()
        return None if leader is None else internals.node_name(leader)

    @property
    def term(self) -> int:
        return self._syncobj.raftCurrentTerm

    @property
    def commit_index(self) -> int:
        return self._syncobj.raftCommitIndex

    @property
    def last_applied(self) -> int:
        return self._syncobj.raftLastApplied

    @property
    def leader_commit_index(self) -> int:
        """The commit index the leader last announced (0 before any)."""
        return internals.leader_commit_index(self._syncobj)

    @property
    def election_deadline(self) -> float:
        """When this voter stands next, on pysyncobj's monotonic clock."""
        return internals.election_deadline(self._syncobj)

    @property
    def alive(self) -> bool:
        return self._syncobj.tick_thread_alive()

    def status(self) -> RaftStatus:
        return raft_status(self._syncobj)

    def status_dict(self) -> dict:
        """pysyncobj's status ({} if the tick thread kept changing it)."""
        return internals.read_racing(self._syncobj.getStatus) or {}

    def answer_ages(self) -> dict[str, float]:
        """Seconds since each peer (by Raft address) last answered this
        leader's AppendEntries; empty unless this voter leads. A peer not
        heard since the election is absent (leader_liveness.remember_election_answers)."""
        syncobj = self._syncobj
        if not syncobj._isLeader():
            return {}
        answered = internals.read_racing(lambda: internals.last_response_times(syncobj))
        if answered is None:
            return {}
        counted = getattr(syncobj, "_mq_counted_at_election", {})
        now = monotonic()
        # A `serve --observer` peer is a read-only pysyncobj node: it has no
        # address (the status names no observer).
        return {
            peer.address: max(0.0, now - at)
            for peer, at in answered.items()
            if counted.get(peer) != at and isinstance(peer, TCPNode)
        }

    # ------------------------------------------------------------ leadership (tick thread)

    def transfer_leadership(self, address: str | None = None) -> int | None:
        """Asks pysyncobj to hand leadership to the voter at ``address`` (None:
        the most caught-up one); returns its answer (a FAIL_REASON), or None
        if it gave none; REQUEST_DENIED also while proposed commands wait to
        enter the log. Only safe on the tick thread."""
        if internals.commands_queued(self._syncobj):
            # A batch proposed just before the handover, not in the log yet,
            # would be appended after TimeoutNow: the target's log would end
            # before this leader's, no voter holding that entry would vote for
            # it, and it would lose its election (issue 42). Denied, so the
            # caller asks again at the next tick, once the queue is in the log.
            return FAIL_REASON.REQUEST_DENIED
        answers = []  # pysyncobj answers through the callback, synchronously
        self._syncobj.transferLeadership(node=address, callback=lambda r, e: answers.append(e))
        return answers[0] if answers else None

    def say_step_down(self, cause: str, now: float) -> None:
        """Records why this leader is about to step down (leadership_events)."""
        say_step_down(self._syncobj, cause, now)

    def step_down_cause(self, now: float) -> str:
        """Why this voter stepped down just now (and forgets the reason)."""
        return step_down_cause(self._syncobj, now)

    def step_down(self) -> None:
        """A leader steps down to follower with no leader, as pysyncobj's own fallback."""
        internals.become_follower(self._syncobj)

    def stand_no_sooner_than(self, seconds: float) -> None:
        """This voter does not stand for election within ``seconds``."""
        internals.set_election_deadline(self._syncobj, monotonic() + seconds)

    def never_stand(self, silence_s: float, on_leader_forgotten: Callable[[], None]) -> None:
        """Tick thread: a node that is not admitted never reaches its election
        deadline (a candidate at a higher term would refuse the leader's
        entries). The deadline is also how a follower tells that its leader
        went silent (leader_liveness.forget_silent_leader), so that is done
        here instead: pysyncobj moves the deadline itself on every
        AppendEntries, and a leader not heard for ``silence_s`` is forgotten
        (a removed node then names no leader)."""
        syncobj, now = self._syncobj, monotonic()
        if internals.election_deadline(syncobj) != self._pushed_deadline:
            self._heard_at = now  # pysyncobj moved it: the leader was heard
        elif internals.knows_a_leader(syncobj) and now - self._heard_at > silence_s:
            internals.forget_leader(syncobj)
            on_leader_forgotten()
        self._pushed_deadline = now + silence_s
        internals.set_election_deadline(syncobj, self._pushed_deadline)

    # ------------------------------------------------------------ members and lifecycle

    def answer_voter_updates(
        self, request: Callable[[], dict | None], on_request: Callable[[dict], dict]
    ) -> None:
        """UpdateRaftVoter over the Raft port (quorum/membership.py rule 6):
        ``request()`` (tick thread) is what this voter asks the voters it lists
        while its address is not the voter set's, None otherwise;
        ``on_request(payload)`` (tick thread) is the answer to another's ask."""
        transport = self.transport
        if transport is not None:
            transport.update_request = request
            transport.on_update_request = on_request

    def set_members(self, members: set[str], learners: set[str], alone: bool) -> bool:
        """Tick thread: pysyncobj's members and read-only nodes become exactly
        these (quorum/raft/membership_port.py); True if anything changed. A
        voter ``alone`` ticks fast (see ALONE_TICK_S)."""
        internals.set_tick_period(self._syncobj, ALONE_TICK_S if alone else TICK_S)
        return set_members(self._syncobj, members, learners)

    def force_log_compaction(self) -> None:
        """Writes a snapshot now instead of after ``compaction_entries``."""
        self._syncobj.forceLogCompaction()

    def destroy(self) -> None:
        """Stops the tick thread and the beacons, closes the journal; returns once done."""
        if self.beacons is not None:
            self.beacons.stop()
        self._syncobj.destroy_synchronous()
