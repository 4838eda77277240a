"""Pre-vote and the leader lease on votes: a voter that lost contact never
deposes a leader that a majority still hears (Raft thesis 9.6 and 4.2.3,
etcd's PreVote and CheckQuorum, Kafka's KIP-996).

pysyncobj 0.3.17 has plain elections: a follower whose election deadline
passes raises its term and asks for votes, and any voter that sees the higher
term drops its leader. A follower cut off for 20 s reached term 7 and, when
the link healed, its term deposed a healthy leader (issue 25); a follower
whose thread was held up did the same under load (decisions.md 38).

The rules (``PreVote``, pure: the clock is an argument):

1. Before it raises its term, a voter whose deadline passed asks every voter
   whether it *would* vote for it at term + 1 (a pre-vote request carries the
   term it would stand in and its last log index and term). Its own term does
   not change. It stands for election only once a majority of the voter set,
   itself included, granted the pre-vote in this round; else it waits for its
   next deadline and asks again.
2. A voter grants a pre-vote only if it is admitted (quorum/voter_guard.py),
   the asker counts, the asked-for term is above its own, the asker's log is
   at least as up to date as its own (Raft's vote rule), and it is not in a
   leader's lease: it is not the leader and has not heard AppendEntries from
   a leader within the minimum election timeout.
3. A real vote request is dropped the same way while in a lease (thesis
   4.2.3), so neither its term nor its vote moves, unless the request comes
   from a leadership transfer: the target of the leader's TimeoutNow marks its
   vote requests, and a transfer deposes the leader on purpose.
4. A refusal carries the refuser's term; an asker behind it takes that term
   (as etcd does), so a voter with the longest log but an old term is not shut
   out by voters whose term ran ahead. The other way round too: a voter that
   stood and lost has a term above the leader's, drops the leader's entries
   as stale (pysyncobj answers nothing), and its vote requests are dropped in
   the lease, so it would stay out for good. It tells the leader its term
   (``TERM_AHEAD``), and the leader steps down to that term, as etcd's leader
   does on a higher-term answer; the next election, pre-voted as always,
   brings every voter to one term.
5. A follower whose connection to its leader closes (a crashed or killed
   leader's kernel closes its sockets at once) gives up the lease and runs a
   pre-vote round soon after instead of at its election deadline (rule 6):
   failover after a crash is that much shorter (issue 25). The surviving
   voters take turns by node id (``leader_lost_delay``): the first asks after
   50-100 ms, the next 250 ms later, and so on. Random delays alone collided:
   the closed connection wakes every follower's tick loop at the same moment,
   so their 50 ms ticks are in step, and two followers that asked in the same
   tick each granted the other's pre-vote, stood in the same term and split
   the vote (10 of 50 failovers took 0.9-1.4 s). It is still a pre-vote: a
   voter whose own connection to a live leader stays up refuses it, and one
   that reconnects and hears the leader meanwhile does not ask. A voter that
   starts, or reaches no voter, takes its turn the same way (``turn_delay``)
   once it reaches one: a restarted cluster elects as soon as a majority is
   up, with no start-up delay, and a voter restarted under a live leader is
   refused by the voters that hear it (issue 42).
6. A leader that hangs without closing its sockets (frozen, or its packets
   dropped) is found by its silence: a follower that has read no
   AppendEntries for the minimum election timeout asks for a pre-vote, in
   the same turns as rule 5 (``silent_leader_timeout``: 0.5 s, then 0.65 s
   by default). Random deadlines put two followers in the same term in a few
   percent of hangs, a split vote that cost a whole timeout more (issue 42);
   turns do not, and the first in turn is refused only by a voter that heard
   the leader within its lease, two heartbeats shorter than the timeout. A
   candidate and a voter that knows no leader keep Raft's random timeout.

What it changes in pysyncobj (``may_stand``, installed with the other
replacements of quorum/raft/patches.py): where pysyncobj would start an election (its
``__connectedToAnyone`` check) a pre-vote round runs instead, and the election
starts only after a round is won; the
messages travel through ``GuardedTransport`` (quorum/raft/raft_port.py), which hands
them here and never to pysyncobj.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..leadership_events import forget_heartbeats_of, say_step_down
from ..log_limiter import RateLimitedLog
from .election_timing import leader_lost_delay
from .leader_liveness import heard_by_beacon

log = logging.getLogger(__name__)
# A peer can make this voter refuse as often as it likes: a few lines a minute.
refusal_log = RateLimitedLog(log, period_s=60.0, burst=3)

PRE_VOTE = "metaquorum_pre_vote"
PRE_VOTE_ANSWER = "metaquorum_pre_vote_answer"
TRANSFER = "metaquorum_transfer"  # the mark on a transfer target's vote requests
TERM_AHEAD = "metaquorum_term_ahead"  # rule 4: "your entries are from an old term"


@dataclass(frozen=True)
class LogPosition:
    """What the vote rule compares: a voter's term and the end of its log."""

    term: int
    last_index: int
    last_term: int


def at_least_as_up_to_date(last_term: int, last_index: int, mine: LogPosition) -> bool:
    """Raft's vote rule (thesis 3.6.1): a later last term wins, then a longer log."""
    return (last_term, last_index) >= (mine.last_term, mine.last_index)


def term_ahead(entries_term: object, my_term: int, admitted: bool) -> dict | None:
    """Rule 4: the answer to AppendEntries from a leader whose term is below
    this voter's, or None (the usual case, or a voter whose word does not count)."""
    if not admitted or not isinstance(entries_term, int) or entries_term >= my_term:
        return None
    return {"type": TERM_AHEAD, "term": my_term}


@dataclass
class PreVoteStats:
    rounds: int = 0  # pre-vote rounds this voter started
    rounds_won: int = 0  # ... that a majority granted (then it stood for election)
    granted: int = 0  # pre-votes this voter granted to others
    refused: int = 0  # ... and refused
    votes_refused_in_lease: int = 0  # real vote requests dropped in a leader's lease
    leader_connections_lost: int = 0  # the leader's connection closed under a follower
    # The liveness beacons' counters (quorum/raft/beacon.py), when they run.
    beacons: Callable[[], dict[str, int]] | None = None

    def as_dict(self) -> dict:
        return {
            "preVoteRounds": self.rounds,
            "preVoteRoundsWon": self.rounds_won,
            "preVotesGranted": self.granted,
            "preVotesRefused": self.refused,
            "votesRefusedInLease": self.votes_refused_in_lease,
            "leaderConnectionsLost": self.leader_connections_lost,
            **({} if self.beacons is None else {"beacons": self.beacons()}),
        }


@dataclass
class PreVote:
    """One voter's pre-vote state and rules (tick thread only)."""

    lease_s: float  # the minimum election timeout
    clock: Callable[[], float] = time.monotonic
    heard_leader_at: float = float("-inf")
    # When the leader's connection last closed: a beacon that arrived before
    # it, counted by the tick after, is older news than the close.
    leader_lost_at: float = float("-inf")
    # Rule 5 cut the wait short: the leader's connection closed, and no leader
    # was heard since (the cause of the election that follows).
    leader_connection_closed: bool = False
    round_term: int | None = None  # the term the open round asks to stand in
    granted_by: set[int] = field(default_factory=set)
    transfer_term: int | None = None  # the term of a transfer election this voter runs
    stats: PreVoteStats = field(default_factory=PreVoteStats)

    # ------------------------------------------------------------ the asker

    def open_round(self, mine: LogPosition) -> dict:
        """Starts a round; returns the request to send to every other voter."""
        self.round_term = mine.term + 1
        self.granted_by = set()
        self.stats.rounds += 1
        return {
            "type": PRE_VOTE,
            "term": self.round_term,
            "last_log_index": mine.last_index,
            "last_log_term": mine.last_term,
        }

    def on_answer(self, node_id: int | None, answer: dict, counts: bool) -> None:
        """Counts a grant of the open round from a voter whose grant counts."""
        if (
            counts
            and node_id is not None
            and answer.get("granted") is True
            and answer.get("term") == self.round_term
        ):
            self.granted_by.add(node_id)

    def won(self, voters: int, term: int) -> bool:
        """A majority of ``voters`` (this one included) granted the open round,
        and this voter's term (``term``) has not moved since it opened."""
        return self.round_term == term + 1 and 1 + len(self.granted_by) > voters / 2

    def stand(self) -> int:
        """The round is won: closes it; returns the term of the election."""
        term = self.round_term
        self.round_term = None
        self.granted_by = set()
        self.stats.rounds_won += 1
        return term

    # ------------------------------------------------------------ the asked

    def heard_leader(self, at: float | None = None) -> bool:
        """Word from the leader now, or at ``at`` (a liveness beacon's arrival);
        False for word older than the last close of its connection."""
        at = self.clock() if at is None else at
        if at < self.leader_lost_at:
            return False
        if at > self.heard_leader_at:
            self.heard_leader_at = at
            self.leader_connection_closed = False
        return True

    def leader_lost(self) -> None:
        """The connection to the leader closed: no lease is held any more."""
        self.heard_leader_at = float("-inf")
        self.leader_lost_at = self.clock()
        self.leader_connection_closed = True
        self.stats.leader_connections_lost += 1

    def in_lease(self, is_leader: bool) -> bool:
        """A leader, or a voter that heard one within the minimum election timeout."""
        return is_leader or self.clock() - self.heard_leader_at < self.lease_s

    def answer(
        self, request: dict, mine: LogPosition, *, is_leader: bool, admitted: bool, counts: bool
    ) -> tuple[bool, str]:
        """Whether to grant a pre-vote request, and why not."""
        try:
            term = int(request["term"])
            last_index = int(request["last_log_index"])
            last_term = int(request["last_log_term"])
        except (KeyError, TypeError, ValueError):
            return False, "a malformed pre-vote request"
        if not admitted:
            why = "this voter is not admitted to the voter set"
        elif not counts:
            why = "the asker is not a voter of the set this voter holds"
        elif term <= mine.term:
            why = f"the asked-for term {term} is not above this voter's term {mine.term}"
        elif not at_least_as_up_to_date(last_term, last_index, mine):
            why = "the asker's log is behind this voter's"
        elif self.in_lease(is_leader):
            why = "this voter hears a leader" if not is_leader else "this voter is the leader"
        else:
            self.stats.granted += 1
            return True, ""
        self.stats.refused += 1
        return False, why

    def allows_vote(self, request: dict, is_leader: bool) -> bool:
        """A real vote request may reach pysyncobj: not in a lease, or a transfer."""
        if request.get(TRANSFER) is True or not self.in_lease(is_leader):
            return True
        self.stats.votes_refused_in_lease += 1
        return False


def may_stand(connected: Callable) -> Callable:
    """Wraps ``SyncObj.__connectedToAnyone`` (quorum/raft/patches.py): pysyncobj calls it exactly
    where it would stand for election (a follower or candidate whose deadline
    has passed), and only there. A voter that has a ``PreVote`` attached
    (``attach_pre_vote``) stands only if it is connected to a voter and a
    pre-vote round was won; else it opens a round (or waits) and pysyncobj does
    not stand in this tick. The check sits inside pysyncobj's own: a check made
    earlier in the tick let pysyncobj stand unasked when its deadline passed
    in between (the other tick patches read the sockets first)."""
    from pysyncobj.monotonic import monotonic

    def may_stand(self) -> bool:
        pre_vote: PreVote | None = getattr(self, PRE_VOTE_ATTR, None)
        if pre_vote is None:
            return connected(self)
        if not connected(self):
            # Nobody to ask: ask in turn as soon as someone is reachable, not a
            # whole election timeout later (a restarted cluster, issue 42).
            _wait(self, monotonic, "no voter is reachable", retry_s=turn_delay(self))
            return False
        if self._SyncObj__transferInProgress:
            return True  # TimeoutNow: the leader asked this voter to stand at once
        if not getattr(self, _GUARD_ATTR).admitted:
            # Not a voter (an observer, a removed voter): never stands, also
            # after a tick that outlasted its deadline installing a snapshot.
            _wait(self, monotonic, "this node is not a voter")
            return False
        if pre_vote.won(len(self._SyncObj__otherNodes) + 1, self._SyncObj__raftCurrentTerm):
            log.info("pre-vote won: standing for election at Raft term %d", pre_vote.stand())
            return True
        return _open_round(self, pre_vote, monotonic)

    return may_stand


PRE_VOTE_ATTR = "_metaquorum_pre_vote"
_GUARD_ATTR = "_metaquorum_voter_guard"


def _position(syncobj) -> LogPosition:
    return LogPosition(
        syncobj._SyncObj__raftCurrentTerm,
        syncobj._SyncObj__getCurrentLogIndex(),
        syncobj._SyncObj__getCurrentLogTerm(),
    )


def turn_delay(syncobj) -> float:
    """How long this voter waits before it asks, once it can, when no voter
    has a leader to lose: rule 5's turns with no voter lost, so that voters
    that become reachable at the same moment do not ask in the same tick."""
    guard = getattr(syncobj, _GUARD_ATTR)
    return leader_lost_delay(set(guard.voter_set()), guard.node_id, None, random.random())


def _wait(syncobj, monotonic, why: str, retry_s: float | None = None) -> None:
    """Forgets a silent leader (saying ``why`` this node does not stand now)
    and pushes the election deadline on: ``retry_s`` on, else an election timeout."""
    leader = syncobj._SyncObj__raftLeader
    if leader is not None:
        syncobj._SyncObj__raftLeader = None
        syncobj._SyncObj__onLeaderChanged()
        forget_heartbeats_of(syncobj)
        log.warning(
            "no word from the leader %s within the election timeout: %s (no leader is "
            "known meanwhile; writes answer 503)",
            getattr(leader, "id", leader),
            why,
        )
    wait_s = syncobj._SyncObj__generateRaftTimeout() if retry_s is None else retry_s
    syncobj._SyncObj__raftElectionDeadline = monotonic() + wait_s


def _open_round(syncobj, pre_vote: PreVote, monotonic) -> bool:
    """As ``_wait``, then asks every voter for a pre-vote; True when no other
    voter needs asking (pysyncobj's election then starts at once)."""
    _wait(syncobj, monotonic, "asking the voters for a pre-vote")
    request = pre_vote.open_round(_position(syncobj))
    transport = syncobj._SyncObj__transport
    for node in syncobj._SyncObj__otherNodes:
        transport.send(node, request)
    if pre_vote.won(len(syncobj._SyncObj__otherNodes) + 1, syncobj._SyncObj__raftCurrentTerm):
        log.info("pre-vote won alone: standing for election at Raft term %d", pre_vote.stand())
        return True
    return False


def attach_pre_vote(syncobj, pre_vote: PreVote, guard) -> Callable:
    """Turns pre-vote on for ``syncobj``; returns the message hook its
    ``GuardedTransport`` calls (after the voter guard's filter) with each
    incoming message: the message to hand to pysyncobj, or None."""
    from pysyncobj.syncobj import _RAFT_STATE

    setattr(syncobj, PRE_VOTE_ATTR, pre_vote)
    setattr(syncobj, _GUARD_ATTR, guard)
    transport = syncobj._SyncObj__transport

    def is_leader() -> bool:
        return syncobj._SyncObj__raftState == _RAFT_STATE.LEADER

    def on_message(node, node_id: int | None, message):
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "append_entries":
            mine = syncobj._SyncObj__raftCurrentTerm
            if message.get("term", -1) >= mine:
                pre_vote.heard_leader()
                return message
            answer = term_ahead(message.get("term"), mine, guard.admitted)
            if answer is not None:
                transport.send(node, answer)
            return message  # pysyncobj ignores it (an old term)
        if kind == TERM_AHEAD:
            term = message.get("term")
            if (
                is_leader()
                and guard.counts(node_id)
                and isinstance(term, int)
                and term > syncobj._SyncObj__raftCurrentTerm
            ):
                syncobj._SyncObj__setCurrentTerm(term, None)
                say_step_down(syncobj, "term_ahead", time.monotonic())
                syncobj._SyncObj__setState(_RAFT_STATE.FOLLOWER)
                syncobj._SyncObj__raftLeader = None
                log.warning(
                    "voter %s is at Raft term %d, above this leader's: stepping down so "
                    "that an election brings every voter to one term",
                    node_id,
                    term,
                )
            return None
        if kind == "request_vote":
            heard_by_beacon(syncobj)
            if pre_vote.allows_vote(message, is_leader()):
                return message
            refusal_log.info(
                "a vote request from node %s at term %s was dropped: this voter hears "
                "a leader (pre-vote and the leader lease, quorum/raft/pre_vote.py)",
                node_id,
                message.get("term"),
            )
            return None
        if kind == "timeout_now":
            if node == syncobj._SyncObj__raftLeader:
                pre_vote.transfer_term = syncobj._SyncObj__raftCurrentTerm + 1
            return message
        if kind == PRE_VOTE:
            heard_by_beacon(syncobj)
            mine = _position(syncobj)
            granted, why = pre_vote.answer(
                message,
                mine,
                is_leader=is_leader(),
                admitted=guard.admitted,
                counts=guard.counts(node_id),
            )
            if not granted:
                refusal_log.info("refused node %s a pre-vote: %s", node_id, why)
            transport.send(
                node,
                {
                    "type": PRE_VOTE_ANSWER,
                    "term": message.get("term"),
                    "granted": granted,
                    "voter_term": mine.term,
                },
            )
            return None
        if kind == PRE_VOTE_ANSWER:
            _on_answer(syncobj, pre_vote, guard, node_id, message)
            return None
        return message

    return on_message


def leader_lost_hook(syncobj, pre_vote: PreVote, guard, node_id: int) -> Callable:
    """Rule 5: the hook ``GuardedTransport`` calls when a connection closes."""
    from pysyncobj.monotonic import monotonic
    from pysyncobj.syncobj import _RAFT_STATE

    def on_disconnected(node) -> None:
        if (
            node != syncobj._SyncObj__raftLeader
            or syncobj._SyncObj__raftState == _RAFT_STATE.LEADER
            or not guard.admitted  # it never stands; its deadline is QuorumNode's
        ):
            return
        pre_vote.leader_lost()
        lost = guard.node_id_of(getattr(node, "id", ""))
        delay = leader_lost_delay(set(guard.voter_set()), node_id, lost, random.random())
        deadline = monotonic() + delay
        if deadline < syncobj._SyncObj__raftElectionDeadline:
            syncobj._SyncObj__raftElectionDeadline = deadline
        log.info(
            "the connection to the leader %s closed: asking the voters for a pre-vote in "
            "%d ms unless it is heard again",
            getattr(node, "id", node),
            delay * 1000,
        )

    return on_disconnected


def _on_answer(syncobj, pre_vote: PreVote, guard, node_id, answer: dict) -> None:
    from pysyncobj.syncobj import _RAFT_STATE

    their_term = answer.get("voter_term")
    if (
        isinstance(their_term, int)
        and guard.counts(node_id)
        and their_term > syncobj._SyncObj__raftCurrentTerm
        and syncobj._SyncObj__raftState != _RAFT_STATE.LEADER
    ):
        # Rule 4: catch up with the term; the next round asks above it.
        syncobj._SyncObj__setCurrentTerm(their_term, None)
        syncobj._SyncObj__setState(_RAFT_STATE.FOLLOWER)
        pre_vote.round_term = None
        return
    pre_vote.on_answer(node_id, answer, guard.counts(node_id))
    if pre_vote.won(len(syncobj._SyncObj__otherNodes) + 1, syncobj._SyncObj__raftCurrentTerm):
        syncobj._SyncObj__raftElectionDeadline = 0  # stand in the next tick


def mark_transfer_vote(pre_vote: PreVote, message: dict) -> dict:
    """A transfer target's vote request says so (rule 3)."""
    if (
        pre_vote.transfer_term is not None
        and message.get("type") == "request_vote"
        and message.get("term") == pre_vote.transfer_term
    ):
        return {**message, TRANSFER: True}
    return message
