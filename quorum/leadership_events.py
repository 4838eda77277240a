"""Why leadership moved, and how regularly the leader was heard (issue 25).

Counted on each node, pure (the clock is an argument), read by
``/v1/quorum/status``'s ``elections``, ``/metrics`` and ``metaquorum status``.

Elections this voter started, by cause:

* ``no_leader_yet``: it had heard no leader since it started (a new cluster,
  a restart of every voter);
* ``leader_silent``: no AppendEntries from its leader within the election
  timeout (a hung or partitioned leader, or this voter's own stall);
* ``leader_connection_closed``: the leader's connection closed and pre-vote's
  rule 5 asked at once (a crashed or killed leader);
* ``transfer``: the leader handed leadership to it (TimeoutNow).

Leaderships this voter lost, by cause:

* ``check_quorum``: a majority did not answer within the check-quorum window;
* ``term_ahead``: a voter told it of a higher term (pre-vote's rule 4);
* ``transfer``: it handed leadership over (``transfer-leadership``, a stop);
* ``disk_unwritable``: it could not write its data dir (quorum/disk_health.py);
* ``higher_term``: pysyncobj's own step-down, on a vote request or
  AppendEntries of a higher term.

The patches that make a leader step down (check-quorum, rule 4, a transfer,
the disk) say why with ``say_step_down`` just before; a step-down nobody
explained within ``STEP_DOWN_SAID_S`` is pysyncobj's own (``higher_term``).

Heartbeat gaps are the seconds between two AppendEntries from the same leader
as this follower read them, its own scheduling and GC delays included: that is
what the election timeout must outlast, so its distribution is the jitter
that justifies the timeout (``bench/elections.py`` prints it).

Each leadership this voter wins is kept (the last ``CHANGES_KEPT``) with what
it knows of it: the leader it followed before, why it stood, and the write
outage measured from the old leader's last AppendEntries as this voter read
it (from when it stood, if it had heard no leader since it last led): to
standing, to winning, to its LEADER_CHANGE applied (``active``) and to the
first batch of its term beyond the LEADER_CHANGE and NoOps applied (the first
write). That last figure is what a client saw of the failover, and it is the
``first_write`` histogram.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

ELECTION_CAUSES = ("no_leader_yet", "leader_silent", "leader_connection_closed", "transfer")
LOSS_CAUSES = ("check_quorum", "term_ahead", "transfer", "disk_unwritable", "higher_term")

# On the SyncObj: (cause, monotonic time) of the step-down a patch just caused.
STEP_DOWN_ATTR = "_metaquorum_step_down_cause"
EVENTS_ATTR = "_metaquorum_leadership_events"
# A transfer's TimeoutNow makes the leader step down once the target's term
# reaches it, within an election; a reason older than this explains nothing.
STEP_DOWN_SAID_S = 10.0


def forget_heartbeats_of(syncobj) -> None:
    """``syncobj`` gave its leader up (silent past the election timeout): the
    time until it hears one again is an outage, not a heartbeat gap."""
    events = getattr(syncobj, EVENTS_ATTR, None)
    if events is not None:
        events.forget_heartbeats()


def say_step_down(syncobj, cause: str, now: float) -> None:
    """Records why the leader ``syncobj`` is about to step down."""
    setattr(syncobj, STEP_DOWN_ATTR, (cause, now))


def step_down_cause(syncobj, now: float) -> str:
    """Why ``syncobj`` stepped down just now (and forgets the reason)."""
    said = getattr(syncobj, STEP_DOWN_ATTR, None)
    setattr(syncobj, STEP_DOWN_ATTR, None)
    if said is not None and now - said[1] <= STEP_DOWN_SAID_S:
        return said[0]
    return "higher_term"


# Upper bounds (seconds) of the heartbeat-gap buckets; the last bucket is open.
# The leader sends every 0.05 s (a tenth of the minimum election timeout,
# 0.5 s by default; quorum/raft/election_timing.py): the buckets resolve the
# range between, and a longer timeout's too.
GAP_BUCKETS = (0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5)


# Upper bounds (seconds) of the time-to-first-write buckets; the last is open.
# The goal is a new leader's first write within 1 s of the old one falling
# silent (issue 42); the buckets resolve that, and a slow outage beyond.
FIRST_WRITE_BUCKETS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
CHANGES_KEPT = 8  # the last leaderships won, in /v1/quorum/status


def cumulative(bounds: tuple[float, ...], counts: list[int]) -> list[tuple[str, int]]:
    """Prometheus ``le`` buckets: cumulative counts, ``+Inf`` last."""
    out, seen = [], 0
    for bound, count in zip((*bounds, float("inf")), counts, strict=True):
        seen += count
        out.append(("+Inf" if bound == float("inf") else repr(bound), seen))
    return out


def _bucket(bounds: tuple[float, ...], value: float) -> int:
    return next((i for i, bound in enumerate(bounds) if value <= bound), len(bounds))


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


@dataclass
class LeadershipWon:
    """One leadership this voter won. The ``*_s`` are seconds since ``since``:
    the previous leader's last AppendEntries read here, or the moment this
    voter stood when it had heard none since it last led."""

    at_ms: int  # wall clock when it won
    term: int
    previous_leader_id: int | None  # the leader whose AppendEntries it read last
    cause: str | None  # why it stood (ELECTION_CAUSES)
    since: float  # monotonic
    stood_s: float | None  # the silence before it stood (None: no leader heard)
    elected_s: float
    active_s: float | None = None  # its LEADER_CHANGE applied: writes taken from then
    first_write_s: float | None = None  # its first batch beyond LEADER_CHANGE and NoOps

    def as_dict(self) -> dict:
        return {
            "atMs": self.at_ms,
            "term": self.term,
            "previousLeaderId": self.previous_leader_id,
            "cause": self.cause,
            "silenceMs": _ms(self.stood_s),
            "electedMs": _ms(self.elected_s),
            "activeMs": _ms(self.active_s),
            "firstWriteMs": _ms(self.first_write_s),
        }


@dataclass
class LeadershipEvents:
    """One node's counters. Written on the tick thread; readers on other
    threads see plain ints (a read may be one event behind)."""

    elections: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ELECTION_CAUSES, 0))
    losses: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LOSS_CAUSES, 0))
    leader_changes: int = 0  # times the leader this node follows became another node
    gap_counts: list[int] = field(default_factory=lambda: [0] * (len(GAP_BUCKETS) + 1))
    gap_sum_s: float = 0.0
    gap_max_s: float = 0.0
    _leader: object = None  # the last leader known (a node, or this node's own id)
    _heard_from: object = None
    _heard_at: float | None = None
    won: deque[LeadershipWon] = field(default_factory=lambda: deque(maxlen=CHANGES_KEPT))
    first_write_counts: list[int] = field(
        default_factory=lambda: [0] * (len(FIRST_WRITE_BUCKETS) + 1)
    )
    first_write_sum_s: float = 0.0
    # The last AppendEntries read, (sender, monotonic time): kept across an
    # election, unlike _heard_at, since the outage is measured from it.
    _last_heard: tuple[object, float] | None = None
    _stood: tuple[str, float] | None = None  # (cause, monotonic time) of its last stand
    _awaiting: LeadershipWon | None = None  # won, its first write not applied yet

    def election_started(self, cause: str, now: float) -> None:
        self.elections[cause] += 1
        won = self._awaiting
        if won is not None and won.cause is None:
            # It stood and won within one pysyncobj tick (the tick polls for the
            # votes, and the stand is told at the tick's end): this stand is
            # that win's, and it stood about when it won.
            won.cause = cause
            return
        self._stood = (cause, now)

    def leadership_lost(self, cause: str) -> None:
        self.losses[cause] += 1
        self._awaiting = None

    def leadership_won(
        self, term: int, now: float, at_ms: int, node_id_of: Callable[[object], int | None]
    ) -> None:
        """This voter leads ``term`` from ``now``; ``node_id_of`` names the
        node whose AppendEntries it read last."""
        # Not told of its stand yet: it stood within this tick (election_started).
        cause, stood_at = self._stood if self._stood is not None else (None, now)
        if self._last_heard is not None:
            sender, since = self._last_heard
            previous, stood_s = node_id_of(sender), max(0.0, stood_at - since)
        else:
            previous, since, stood_s = None, stood_at, None
        self._awaiting = LeadershipWon(
            at_ms, term, previous, cause, since, stood_s, max(0.0, now - since)
        )
        self.won.append(self._awaiting)
        self._last_heard = self._stood = None  # a later win measures from a later silence

    @property
    def awaiting_term(self) -> int | None:
        """The term whose first write is awaited (the node watches applies until then)."""
        return None if self._awaiting is None else self._awaiting.term

    def became_active(self, term: int, now: float) -> None:
        """Its LEADER_CHANGE of ``term`` applied."""
        won = self._awaiting
        if won is not None and won.term == term and won.active_s is None:
            won.active_s = max(0.0, now - won.since)

    def first_write(self, term: int, now: float) -> None:
        """The first batch of ``term`` beyond its LEADER_CHANGE and NoOps applied."""
        won = self._awaiting
        if won is None or won.term != term:
            return
        self._awaiting = None
        won.first_write_s = seconds = max(0.0, now - won.since)
        self.first_write_counts[_bucket(FIRST_WRITE_BUCKETS, seconds)] += 1
        self.first_write_sum_s += seconds

    def leader_is(self, leader: object) -> None:
        """The leader this node knows now (None: none); counts a change to
        another leader than the last one known (the first leader counts)."""
        if leader is not None and leader != self._leader:
            self._leader = leader
            self.leader_changes += 1
            # Another leader won: a stand of this voter (lost) explains no later
            # win. Not on the old leader's heartbeats after a stand: a transfer's
            # target still reads them until its win.
            self._stood = None

    def heard(self, sender: object, now: float) -> None:
        """AppendEntries from ``sender`` read at ``now`` (monotonic seconds)."""
        if sender == self._heard_from and self._heard_at is not None:
            self._record_gap(now - self._heard_at)
        self._heard_from, self._heard_at = sender, now
        self._last_heard = (sender, now)
        self.leader_is(sender)

    def forget_heartbeats(self) -> None:
        """This node stopped following (it gave its leader up, stands, or
        leads): the next gap starts over rather than spanning the time
        without a leader. A follower whose own thread stalled reads the
        leader's heartbeats before it decides (raft_port.listen_before_electing),
        so its stall is measured."""
        self._heard_from = self._heard_at = None

    def _record_gap(self, gap: float) -> None:
        gap = max(0.0, gap)
        self.gap_counts[_bucket(GAP_BUCKETS, gap)] += 1
        self.gap_sum_s += gap
        self.gap_max_s = max(self.gap_max_s, gap)

    @property
    def gaps(self) -> int:
        return sum(self.gap_counts)

    def gap_quantile(self, q: float) -> float | None:
        """The upper bound of the bucket holding the ``q`` quantile (the max
        for the open bucket); None before two heartbeats were heard."""
        total = self.gaps
        if total == 0:
            return None
        rank = q * total
        seen = 0
        for i, count in enumerate(self.gap_counts):
            seen += count
            if seen >= rank and count:
                return GAP_BUCKETS[i] if i < len(GAP_BUCKETS) else self.gap_max_s
        return self.gap_max_s

    def cumulative_buckets(self) -> list[tuple[str, int]]:
        """The heartbeat gaps as Prometheus ``le`` buckets."""
        return cumulative(GAP_BUCKETS, self.gap_counts)

    def as_dict(self) -> dict:
        return {
            "electionsStarted": dict(self.elections),
            "leadershipLost": dict(self.losses),
            "leaderChanges": self.leader_changes,
            "heartbeatGaps": {
                "count": self.gaps,
                "p50Ms": _ms(self.gap_quantile(0.5)),
                "p99Ms": _ms(self.gap_quantile(0.99)),
                "maxMs": _ms(self.gap_max_s if self.gaps else None),
            },
            "leadershipsWon": [won.as_dict() for won in list(self.won)],  # one C call: no race
        }
