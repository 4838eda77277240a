"""When a voter stands for election: the timeouts and the turns.

Raft finds a lost leader by its silence and spreads the voters' deadlines at
random so that two of them rarely stand at once. Two rules here replace the
random spread by turns (quorum/raft/pre_vote.py rules 5 and 6): the followers
that lost a leader take turns by node id, so they never split a vote, and
the first in turn asks as soon as the leader's silence is long enough to
mean something. Everything is derived from one figure, the minimum election
timeout (``serve --election-timeout-ms``); docs/durability.md "Elections"
says what each part costs. Pure: the jitter is an argument.
"""

from __future__ import annotations

from dataclasses import dataclass

# Rule 5: how soon after its leader's connection closed a follower asks.
LEADER_LOST_FIRST_S = 0.05  # the first in turn
LEADER_LOST_TURN_S = 0.25  # each next one: several 50 ms ticks apart
LEADER_LOST_JITTER_S = 0.05


@dataclass(frozen=True)
class ElectionTimeouts:
    """A voter's election timing, all derived from one figure (the minimum
    election timeout, ``serve --election-timeout-ms``); docs/durability.md
    "Elections" says what each costs."""

    min_s: float  # a follower of a silent leader stands no sooner (the first in turn)
    max_s: float  # a candidate or a voter with no leader waits a random time up to this

    @property
    def heartbeat_s(self) -> float:
        """The leader sends AppendEntries at least this often: ten to a timeout."""
        return self.min_s / 10

    @property
    def lease_s(self) -> float:
        """A voter that heard a leader this recently refuses pre-votes and votes.
        Two heartbeats under ``min_s``: the first follower in turn asks
        ``min_s`` after *its* last AppendEntries, and the other may have read
        the same heartbeat a few milliseconds later."""
        return self.min_s - 2 * self.heartbeat_s

    @property
    def turn_s(self) -> float:
        """Between two followers' turns: more than a pre-vote and a vote round."""
        return 0.3 * self.min_s

    @property
    def jitter_s(self) -> float:
        return 0.1 * self.min_s

    @property
    def beacon_stall_s(self) -> float:
        """A leader whose Raft thread has not begun a tick for this long sends
        no liveness beacon (quorum/raft/beacon.py): its followers then replace
        it one timeout later. Check-quorum's window: a leader stuck longer
        could not have kept its majority anyway."""
        return 2 * self.max_s


def turn(voters: set[int], me: int, lost: int | None) -> int:
    """This voter's place among the voters that lost the leader ``lost`` (by
    node id): 0 asks first. A voter the set does not name yet goes last."""
    others = sorted(v for v in voters if v != lost)
    return others.index(me) if me in others else len(others)


def leader_lost_delay(voters: set[int], me: int, lost: int | None, jitter: float) -> float:
    """Rule 5: this voter's turn among the voters that lost the leader ``lost``,
    as a delay; ``jitter`` in [0, 1) spreads voters of one turn."""
    return (
        LEADER_LOST_FIRST_S
        + turn(voters, me, lost) * LEADER_LOST_TURN_S
        + jitter * LEADER_LOST_JITTER_S
    )


def silent_leader_timeout(
    voters: set[int], me: int, leader: int | None, timeouts: ElectionTimeouts, jitter: float
) -> float:
    """Rule 6: how long a follower of ``leader`` waits for its next word before
    it asks for a pre-vote. Turns as in rule 5, from the minimum election
    timeout: the first in turn asks after ``min_s``, the next ``turn_s`` later,
    so two followers of a leader that hangs never stand in the same term (a
    split vote costs a whole timeout more); ``jitter`` in [0, 1) spreads
    voters of one turn over ``jitter_s``."""
    return timeouts.min_s + turn(voters, me, leader) * timeouts.turn_s + jitter * timeouts.jitter_s
