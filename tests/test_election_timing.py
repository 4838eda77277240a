"""Election timing (quorum/raft/election_timing.py), without sockets or sleeps:
every figure derives from the minimum election timeout, and the followers of
a silent leader stand in turns that never overlap."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quorum.node_config import DEFAULT_ELECTION_TIMEOUT_MS
from quorum.raft.election_timing import ElectionTimeouts, silent_leader_timeout, turn

DEFAULT = ElectionTimeouts(
    DEFAULT_ELECTION_TIMEOUT_MS / 1000, DEFAULT_ELECTION_TIMEOUT_MS * 1.6 / 1000
)


def test_the_defaults_find_a_hung_leader_within_the_failover_bound():
    """A frozen leader's followers: the first in turn asks 0.5-0.55 s after the
    leader's last heartbeat, which leaves time for a pre-vote, a vote and the
    new leader's first commit inside 1 s (bench/hung_leader.py measures it)."""
    first = silent_leader_timeout({0, 1, 2}, 0, 2, DEFAULT, 0.999)
    second = silent_leader_timeout({0, 1, 2}, 1, 2, DEFAULT, 0.0)
    assert 0.5 <= first < 0.56 < 0.65 <= second
    assert DEFAULT.heartbeat_s == pytest.approx(0.05)
    assert DEFAULT.lease_s == pytest.approx(0.4)


def test_followers_of_a_silent_leader_take_turns_by_node_id_without_the_leader():
    voters = {1, 3, 5, 7}
    waits = {me: silent_leader_timeout(voters, me, 5, DEFAULT, 0.5) for me in (1, 3, 7)}
    assert sorted(waits, key=waits.get) == [1, 3, 7]
    # A voter the set does not name yet (a joiner) goes after every voter.
    assert turn(voters, 9, 5) == 3
    # A leader the voter cannot name (None): every voter takes a turn.
    assert turn(voters, 1, None) == 0 and turn(voters, 7, None) == 3


@given(
    min_ms=st.integers(100, 60_000),
    jitters=st.tuples(st.floats(0, 0.999), st.floats(0, 0.999)),
    n=st.integers(2, 7),
)
def test_turns_never_overlap_and_the_lease_ends_before_the_first_turn(min_ms, jitters, n):
    """Two turns never overlap, whatever the jitter: the next in turn asks
    only after the first's pre-vote and vote had a whole turn gap. The lease
    (a voter that heard the leader this recently refuses) ends two heartbeats
    before the first turn, so the first in turn is not refused by a voter
    that read the leader's last heartbeat a moment later than it did."""
    t = ElectionTimeouts(min_ms / 1000, min_ms * 1.6 / 1000)
    voters = set(range(n + 1))
    leader = n
    for me in range(n - 1):
        this = silent_leader_timeout(voters, me, leader, t, jitters[0])
        after = silent_leader_timeout(voters, me + 1, leader, t, jitters[1])
        assert after - this >= t.turn_s - t.jitter_s > 0
    assert t.lease_s == pytest.approx(t.min_s - 2 * t.heartbeat_s)
    assert 0 < t.lease_s < t.min_s
    assert t.min_s > 3 * t.heartbeat_s  # pysyncobj's own rule


class _Follower:
    """The least of a SyncObj that tick_on_time and silent_leader_turns read."""

    _SyncObj__raftState = 0  # _RAFT_STATE.FOLLOWER
    _SyncObj__raftLeader = "leader-node"
    _SyncObj__raftElectionDeadline = float("inf")
    _SyncObj__newAppendEntriesTime = float("inf")


def test_a_tick_wakes_at_the_deadline_that_comes_before_its_period():
    from pysyncobj.monotonic import monotonic

    from quorum.raft.leader_liveness import tick_on_time

    waited: list[float] = []
    tick = tick_on_time(lambda self, timeToWait=0.0: waited.append(timeToWait))  # noqa: N803
    follower = _Follower()
    follower._SyncObj__raftElectionDeadline = monotonic() + 0.01
    tick(follower, 0.05)
    assert 0.001 < waited[-1] <= 0.012  # woken just past the deadline, not 50 ms on
    follower._SyncObj__raftElectionDeadline = monotonic() - 1  # past: a voter that may not stand
    tick(follower, 0.05)
    assert waited[-1] == 0.05
    leader = _Follower()
    leader._SyncObj__raftState = 2  # LEADER: its next heartbeat is the deadline
    leader._SyncObj__newAppendEntriesTime = monotonic() + 0.02
    tick(leader, 0.05)
    assert 0.001 < waited[-1] <= 0.022


def test_only_a_follower_that_names_a_leader_waits_its_turn():
    from quorum.raft.leader_liveness import TURNS_ATTR, silent_leader_turns

    generate = silent_leader_turns(lambda self: 0.777)  # pysyncobj's random draw
    follower = _Follower()
    assert generate(follower) == 0.777  # no turns set: pre-vote off
    setattr(follower, TURNS_ATTR, lambda leader: 0.5 if leader == "leader-node" else None)
    assert generate(follower) == 0.5
    follower._SyncObj__raftLeader = None  # no leader known: Raft's random timeout
    assert generate(follower) == 0.777
    follower._SyncObj__raftLeader = "leader-node"
    follower._SyncObj__raftState = 1  # a candidate
    assert generate(follower) == 0.777
