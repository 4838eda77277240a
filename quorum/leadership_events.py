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
"""

from __future__ import annotations

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
# The leader sends every 0.1 s (pysyncobj's appendEntriesPeriod) and the
# minimum election timeout is 0.7 s: the buckets resolve the range between.
GAP_BUCKETS = (0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5)


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

    def election_started(self, cause: str) -> None:
        self.elections[cause] += 1

    def leadership_lost(self, cause: str) -> None:
        self.losses[cause] += 1

    def leader_is(self, leader: object) -> None:
        """The leader this node knows now (None: none); counts a change to
        another leader than the last one known (the first leader counts)."""
        if leader is not None and leader != self._leader:
            self._leader = leader
            self.leader_changes += 1

    def heard(self, sender: object, now: float) -> None:
        """AppendEntries from ``sender`` read at ``now`` (monotonic seconds)."""
        if sender == self._heard_from and self._heard_at is not None:
            self._record_gap(now - self._heard_at)
        self._heard_from, self._heard_at = sender, now
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
        i = next((i for i, bound in enumerate(GAP_BUCKETS) if gap <= bound), len(GAP_BUCKETS))
        self.gap_counts[i] += 1
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
        """Prometheus ``le`` buckets: cumulative counts, ``+Inf`` last."""
        out, seen = [], 0
        for bound, count in zip((*GAP_BUCKETS, float("inf")), self.gap_counts, strict=True):
            seen += count
            out.append(("+Inf" if bound == float("inf") else repr(bound), seen))
        return out

    def as_dict(self) -> dict:
        def ms(seconds: float | None) -> float | None:
            return None if seconds is None else round(seconds * 1000, 1)

        return {
            "electionsStarted": dict(self.elections),
            "leadershipLost": dict(self.losses),
            "leaderChanges": self.leader_changes,
            "heartbeatGaps": {
                "count": self.gaps,
                "p50Ms": ms(self.gap_quantile(0.5)),
                "p99Ms": ms(self.gap_quantile(0.99)),
                "maxMs": ms(self.gap_max_s if self.gaps else None),
            },
        }
