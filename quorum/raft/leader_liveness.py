"""Quorum health: a leader is known only while it is heard, and a leader holds
writes only while a majority hears it.

Invariant: within about one election timeout of losing its majority, no voter
names a leader. Then ``QuorumNode.raft_leader_id`` is None, writes answer 503
with Retry-After, ``/readyz`` fails and ``/v1/quorum/status`` says no leader,
instead of redirecting clients to a dead or isolated leader.

pysyncobj 0.3.17 breaks it on both sides:

* **A follower keeps its leader** until it hears of a new term. A follower cut
  off from every voter never starts an election (``__connectedToAnyone``), so
  it named the dead leader for as long as anyone watched (issue 17: 40 s of
  307s to a killed leader).
* **A leader steps down** only after ``leaderFallbackTimeout`` without a
  majority of answers (5 s here), holding writes meanwhile.

Both are patched by name, one function each, like quorum/raft/raft_port.py
(pinned to pysyncobj 0.3.17).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pysyncobj.monotonic import monotonic

from ..leadership_events import forget_heartbeats_of, say_step_down
from .beacon import BeaconBook


class PreVoteLease(Protocol):
    def heard_leader(self, at: float | None = None) -> bool: ...


log = logging.getLogger(__name__)


def forget_silent_leader(original: Callable) -> Callable:
    """A follower forgets its leader once its election deadline has passed.

    pysyncobj moves a follower's election deadline to a random point in
    [raftMinTimeout, raftMaxTimeout] after every AppendEntries (heartbeats
    come every 0.1 s), and a follower that can reach another voter stands for
    election there, forgetting its leader. This applies the same bound to a
    follower that can reach nobody: it forgets the leader (and fails the
    commands it forwarded to it) without an election. The same deadline, not
    a second timer, so the two paths agree, and a follower's own journal
    stall (``raft_port.excuse_own_stall``) excuses it here too. Checked after
    the tick has read its sockets, and an overdue follower reads them once
    more first (its thread may have been held up between the two), so a
    heartbeat that arrived is counted.
    What it changes in pysyncobj: ``__raftLeader`` becomes None while the
    follower stays follower; the leader's next AppendEntries sets it again.
    Wraps ``SyncObj._onTick`` (quorum/raft/patches.py)."""
    from pysyncobj.syncobj import _RAFT_STATE

    def on_tick(self, timeToWait=0.0):  # noqa: N803 - pysyncobj's name
        original(self, timeToWait)
        if (
            _silent_leader(self, _RAFT_STATE.FOLLOWER) is not None
            and self._SyncObj__transport.ready
        ):
            self._poller.poll(0)  # this thread may have been held up past the deadline
        leader = _silent_leader(self, _RAFT_STATE.FOLLOWER)
        if leader is not None:
            self._SyncObj__raftLeader = None
            self._SyncObj__onLeaderChanged()
            forget_heartbeats_of(self)
            log.warning(
                "no word from the leader %s within the election timeout: no leader is "
                "known until one is elected (writes answer 503; a majority of voters "
                "must be reachable)",
                getattr(leader, "id", leader),
            )

    return on_tick


def _silent_leader(syncobj, follower: int):
    """The leader a follower names past its election deadline, else None (not
    while the leader's TimeoutNow has set the deadline to 0: a transfer)."""
    leader = syncobj._SyncObj__raftLeader
    if (
        leader is not None
        and syncobj._SyncObj__raftState == follower
        and syncobj._SyncObj__raftElectionDeadline < monotonic()
        and not syncobj._SyncObj__transferInProgress
    ):
        return leader
    return None


def silent_leader_turns(original: Callable) -> Callable:
    """A follower's election deadline after each AppendEntries is its turn
    (quorum/raft/election_timing.py, rule 6 of quorum/raft/pre_vote.py), not
    pysyncobj's random point in [raftMinTimeout, raftMaxTimeout].

    pysyncobj draws a new timeout whenever it moves the deadline: after each
    AppendEntries (the leader it names is the sender, except for a new
    leader's first message), after granting a vote and when it stands. Only a
    follower that names a leader and has turns set (``_mq_silent_turns``, by
    ``RaftHost.use_pre_vote``) gets its turn; a candidate, a voter with no
    leader, and a voter without pre-vote keep Raft's random timeout.
    Replaces ``SyncObj.__generateRaftTimeout`` (quorum/raft/patches.py)."""
    from pysyncobj.syncobj import _RAFT_STATE

    def generate(self) -> float:
        turns = getattr(self, TURNS_ATTR, None)
        leader = self._SyncObj__raftLeader
        if turns is None or leader is None or self._SyncObj__raftState != _RAFT_STATE.FOLLOWER:
            return original(self)
        return turns(leader)

    return generate


TURNS_ATTR = "_mq_silent_turns"


def tick_on_time(original: Callable) -> Callable:
    """A tick that would sleep past a deadline wakes at the deadline instead.

    pysyncobj's tick ends by waiting on its sockets for the whole tick period
    (50 ms) and checks its deadlines only at the start of the next tick: a
    follower noticed a silent leader up to a tick late, and a leader sent its
    heartbeat up to a tick after it was due (every 50-100 ms for a 50 ms
    period). The wait is cut to the follower's election deadline, or the
    leader's next AppendEntries, when that comes first. A deadline already
    past keeps the whole period (a voter that may not stand would spin).
    Wraps ``SyncObj._onTick`` (quorum/raft/patches.py)."""
    from pysyncobj.syncobj import _RAFT_STATE

    def on_tick(self, timeToWait=0.0):  # noqa: N803 - pysyncobj's name
        now = self._mq_ticked_at = monotonic()  # the beacon thread's sign of life
        if self._SyncObj__raftState == _RAFT_STATE.LEADER:
            due = self._SyncObj__newAppendEntriesTime
        else:
            heard_by_beacon(self)
            due = self._SyncObj__raftElectionDeadline
        if now < due < now + timeToWait:
            timeToWait = due - now + 0.001  # pysyncobj compares with >: just past it
        original(self, timeToWait)

    return on_tick


@dataclass
class BeaconHooks:
    """What a follower needs to count the leader's liveness beacons
    (quorum/raft/beacon.py); set by ``RaftHost.use_beacons``."""

    book: BeaconBook
    node_id_of: Callable[[str], int | None]  # a Raft address -> its node id
    pre_vote: PreVoteLease
    counted_at: float = float("-inf")  # the latest beacon already counted


BEACONS_ATTR = "_mq_beacons"


def heard_by_beacon(syncobj) -> None:
    """A follower counts its leader's latest beacon as word from it: the
    election deadline and the lease move on as for an AppendEntries.
    Only the leader this follower names, at the term it follows it in, and
    not while a transfer asked it to stand (tick thread)."""
    hooks: BeaconHooks | None = getattr(syncobj, BEACONS_ATTR, None)
    leader = syncobj._SyncObj__raftLeader
    if hooks is None or leader is None or syncobj._SyncObj__transferInProgress:
        return
    at = hooks.book.heard(
        hooks.node_id_of(getattr(leader, "id", "")), syncobj._SyncObj__raftCurrentTerm
    )
    if at is None or at <= hooks.counted_at:
        return
    hooks.counted_at = at
    if not hooks.pre_vote.heard_leader(at):
        return  # sent before the leader's connection closed: the close is newer
    turns = getattr(syncobj, TURNS_ATTR, None)
    deadline = at + (
        turns(leader) if turns is not None else syncobj._SyncObj__generateRaftTimeout()
    )
    if deadline > syncobj._SyncObj__raftElectionDeadline:
        syncobj._SyncObj__raftElectionDeadline = deadline


def majority_heard(answered_at: list[float], within_s: float, now: float) -> bool:
    """Whether a leader and the other voters that answered it within
    ``within_s`` (``answered_at``: each other voter's last answer) are a
    majority of the voters."""
    since = now - within_s
    heard = 1 + sum(1 for at in answered_at if at > since)
    return heard > (len(answered_at) + 1) / 2


CHECK_QUORUM_TIMEOUTS = 2


def _leader_heard(syncobj, within_s: float) -> bool:
    answered = syncobj._SyncObj__lastResponseTime
    at = [answered.get(node, 0.0) for node in syncobj._SyncObj__otherNodes]
    return majority_heard(at, within_s, monotonic())


def check_quorum(original: Callable) -> Callable:
    """A leader that a majority has not answered within two election timeouts
    (``CHECK_QUORUM_TIMEOUTS * raftMaxTimeout``, 3 s here) steps down (Raft's
    check-quorum). Two, not one: under three times its ceiling on two loaded
    cores, a leader's own thread fell behind reading its followers' answers
    for more than one timeout and stepped down while they were all alive
    (tests/test_overload.py); a follower that really lost the leader elects
    another after one timeout anyway, and the old leader's writes cannot
    commit meanwhile.

    pysyncobj's own check waits ``leaderFallbackTimeout`` (5 s here); by then
    the followers of a partitioned leader may have elected another one, and
    its clients waited for writes that could not commit. An overdue leader
    first reads what has arrived (its own thread may have been held up, by a
    journal sync or the scheduler, with the answers unread in its sockets),
    as ``raft_port.listen_before_electing`` does for a follower. A leader
    elected just now counts every voter as heard (pysyncobj resets the answer
    times when it becomes leader). What it changes in pysyncobj: the leader
    becomes a follower with no leader, as its own fallback does, only sooner;
    ``onStateChanged`` tells QuorumNode, which stops being the controller.
    Wraps ``SyncObj._onTick`` (quorum/raft/patches.py)."""
    from pysyncobj.syncobj import _RAFT_STATE

    def on_tick(self, timeToWait=0.0):  # noqa: N803 - pysyncobj's name
        if self._SyncObj__raftState == _RAFT_STATE.LEADER and self._SyncObj__otherNodes:
            timeout = CHECK_QUORUM_TIMEOUTS * self._SyncObj__conf.raftMaxTimeout
            if not _leader_heard(self, timeout):
                if self._SyncObj__transport.ready:
                    self._poller.poll(0)
                if self._SyncObj__raftState == _RAFT_STATE.LEADER and not _leader_heard(
                    self, timeout
                ):
                    say_step_down(self, "check_quorum", monotonic())
                    self._SyncObj__setState(_RAFT_STATE.FOLLOWER)
                    self._SyncObj__raftLeader = None
                    log.warning(
                        "check-quorum: a majority of voters has not answered this leader "
                        "within %.1f s: stepping down (writes answer 503 until a leader "
                        "is elected; check the other voters and the network between them)",
                        timeout,
                    )
        original(self, timeToWait)

    return on_tick


def remember_election_answers(original: Callable) -> Callable:
    """Keeps what pysyncobj counted as answers when this voter was elected.

    A new leader sets every other voter's last answer to the moment of its
    election (``__onBecomeLeader``; check_quorum above relies on it), so that
    time says nothing about the voter. The counted times are kept on the
    SyncObj (``_mq_counted_at_election``), and ``QuorumNode.answer_ages``
    leaves out a voter whose last answer is still the counted one: the
    status's ``lastFetchMs`` is then unknown, as Kafka's LastFetchTimestamp is
    for a voter that has not fetched from the new leader. Wraps
    ``SyncObj.__onBecomeLeader`` (quorum/raft/patches.py)."""

    def on_become_leader(self):
        original(self)
        self._mq_counted_at_election = dict(self._SyncObj__lastResponseTime)

    return on_become_leader
