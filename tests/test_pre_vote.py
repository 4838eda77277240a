"""The pre-vote rules of quorum/raft/pre_vote.py, without sockets or sleeps: the
clock is an argument."""

from __future__ import annotations

import pytest

from quorum.raft.election_timing import leader_lost_delay
from quorum.raft.pre_vote import (
    PRE_VOTE,
    TERM_AHEAD,
    TRANSFER,
    LogPosition,
    PreVote,
    at_least_as_up_to_date,
    mark_transfer_vote,
    term_ahead,
)

LEASE = 0.7


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


def pre_vote(clock) -> PreVote:
    return PreVote(lease_s=LEASE, clock=clock)


def request(term: int, last_index: int = 10, last_term: int = 3) -> dict:
    return {
        "type": PRE_VOTE,
        "term": term,
        "last_log_index": last_index,
        "last_log_term": last_term,
    }


MINE = LogPosition(term=4, last_index=10, last_term=3)


def grant(pv: PreVote, req: dict, *, is_leader=False, admitted=True, counts=True, mine=MINE):
    return pv.answer(req, mine, is_leader=is_leader, admitted=admitted, counts=counts)


def test_the_vote_rule_prefers_a_later_last_term_then_a_longer_log():
    mine = LogPosition(term=9, last_index=10, last_term=3)
    assert at_least_as_up_to_date(4, 1, mine)
    assert at_least_as_up_to_date(3, 10, mine)
    assert not at_least_as_up_to_date(3, 9, mine)
    assert not at_least_as_up_to_date(2, 99, mine)


def test_a_voter_that_heard_no_leader_grants_an_up_to_date_asker(clock):
    pv = pre_vote(clock)
    assert grant(pv, request(5)) == (True, "")
    assert pv.stats.granted == 1


def test_a_voter_in_a_leaders_lease_refuses_until_the_lease_ends(clock):
    pv = pre_vote(clock)
    pv.heard_leader()
    clock.now += LEASE - 0.01
    granted, why = grant(pv, request(5))
    assert not granted and "hears a leader" in why
    clock.now += 0.02
    assert grant(pv, request(5))[0]
    assert pv.stats.refused == 1 and pv.stats.granted == 1


def test_the_leader_refuses_every_pre_vote(clock):
    granted, why = grant(pre_vote(clock), request(5), is_leader=True)
    assert not granted and "is the leader" in why


@pytest.mark.parametrize(
    ("req", "kwargs", "reason"),
    [
        (request(4), {}, "not above"),  # the asked-for term is this voter's own
        (request(5, last_index=9), {}, "behind"),
        (request(5, last_term=2, last_index=99), {}, "behind"),
        (request(5), {"admitted": False}, "not admitted"),
        (request(5), {"counts": False}, "not a voter"),
        ({"type": PRE_VOTE, "term": "x"}, {}, "malformed"),
        ({"type": PRE_VOTE}, {}, "malformed"),
    ],
)
def test_refusals_name_their_reason(clock, req, kwargs, reason):
    granted, why = grant(pre_vote(clock), req, **kwargs)
    assert not granted and reason in why


def test_a_round_is_won_by_a_majority_of_the_voter_set_itself_included(clock):
    pv = pre_vote(clock)
    message = pv.open_round(MINE)
    assert message == request(5) and pv.round_term == 5
    assert not pv.won(voters=3, term=4)
    pv.on_answer(1, {"granted": True, "term": 5}, counts=True)
    assert pv.won(voters=3, term=4)
    assert not pv.won(voters=5, term=4)  # two of five
    pv.on_answer(2, {"granted": True, "term": 5}, counts=True)
    assert pv.won(voters=5, term=4)
    assert pv.stand() == 5
    assert pv.round_term is None and not pv.won(voters=3, term=4)
    assert pv.stats.rounds == 1 and pv.stats.rounds_won == 1


def test_grants_that_do_not_count_are_not_counted(clock):
    pv = pre_vote(clock)
    pv.open_round(MINE)
    pv.on_answer(1, {"granted": True, "term": 5}, counts=False)  # not a voter of the set
    pv.on_answer(2, {"granted": False, "term": 5}, counts=True)
    pv.on_answer(3, {"granted": True, "term": 6}, counts=True)  # another round's term
    pv.on_answer(None, {"granted": True, "term": 5}, counts=True)
    pv.on_answer(1, {"granted": True, "term": 5}, counts=True)
    pv.on_answer(1, {"granted": True, "term": 5}, counts=True)  # the same voter twice
    assert pv.granted_by == {1}
    assert not pv.won(voters=5, term=4)


def test_a_round_is_void_once_the_voters_term_moved(clock):
    """The voter took part in another's election meanwhile: its round's grants
    were for a term it no longer stands in."""
    pv = pre_vote(clock)
    pv.open_round(MINE)
    pv.on_answer(1, {"granted": True, "term": 5}, counts=True)
    assert pv.won(voters=3, term=4)
    assert not pv.won(voters=3, term=5)


def test_a_new_round_forgets_the_grants_of_the_last(clock):
    pv = pre_vote(clock)
    pv.open_round(MINE)
    pv.on_answer(1, {"granted": True, "term": 5}, counts=True)
    pv.open_round(MINE)
    assert pv.granted_by == set() and not pv.won(voters=3, term=4)


def test_a_lone_voter_wins_its_round_alone(clock):
    pv = pre_vote(clock)
    pv.open_round(MINE)
    assert pv.won(voters=1, term=4)


def test_real_votes_are_dropped_in_a_lease_unless_a_transfer_asks(clock):
    pv = pre_vote(clock)
    vote = {"type": "request_vote", "term": 5, "last_log_index": 10, "last_log_term": 3}
    assert pv.allows_vote(vote, is_leader=False)  # no leader heard
    pv.heard_leader()
    assert not pv.allows_vote(vote, is_leader=False)
    assert not pv.allows_vote(vote, is_leader=True)
    assert pv.allows_vote({**vote, TRANSFER: True}, is_leader=False)
    assert pv.allows_vote({**vote, TRANSFER: True}, is_leader=True)
    assert pv.stats.votes_refused_in_lease == 2
    clock.now += LEASE
    assert pv.allows_vote(vote, is_leader=False)


def test_a_transfer_target_marks_the_vote_requests_of_its_transfer_election_only(clock):
    """The leader's TimeoutNow made this voter stand at term 5: its requests at
    term 5 say so, so voters that just heard that leader still vote."""
    pv = pre_vote(clock)
    vote = {"type": "request_vote", "term": 5, "last_log_index": 10, "last_log_term": 3}
    assert mark_transfer_vote(pv, vote) == vote
    pv.transfer_term = 5
    assert mark_transfer_vote(pv, vote) == {**vote, TRANSFER: True}
    assert mark_transfer_vote(pv, {**vote, "term": 6}) == {**vote, "term": 6}
    assert mark_transfer_vote(pv, {"type": "append_entries", "term": 5}) == {
        "type": "append_entries",
        "term": 5,
    }


def test_a_closed_leader_connection_gives_up_the_lease_at_once(clock):
    """Rule 5: the leader's kernel closed its sockets (a crash, a kill): this
    voter grants pre-votes at once instead of after the minimum timeout."""
    pv = pre_vote(clock)
    pv.heard_leader()
    assert not grant(pv, request(5))[0]
    pv.leader_lost()
    assert grant(pv, request(5)) == (True, "")
    assert pv.allows_vote({"type": "request_vote", "term": 5}, is_leader=False)
    assert pv.stats.leader_connections_lost == 1
    pv.heard_leader()  # it reconnected and the leader was heard again
    assert not grant(pv, request(5))[0]


def test_a_beacon_that_arrived_before_the_close_does_not_bring_the_lease_back(clock):
    """A liveness beacon received just before the leader's connection closed
    but counted by a later tick is older news than the close: the lease stays
    given up and the election's cause stays the closed connection."""
    pv = pre_vote(clock)
    pv.heard_leader()
    arrived = clock.now + 0.01
    clock.now += 0.02
    pv.leader_lost()
    assert pv.heard_leader(arrived) is False
    assert pv.leader_connection_closed
    assert grant(pv, request(5)) == (True, "")
    clock.now += 0.01
    assert pv.heard_leader(clock.now) is True  # a beacon sent after: it lives
    assert not pv.leader_connection_closed


def test_voters_that_lost_the_leader_take_turns_by_node_id():
    """Rule 5: a closed connection wakes every follower at once, so random
    delays alone put two of them in one tick, where each granted the other's
    pre-vote and the vote split. Turns are whole ticks apart."""
    voters = {1, 2, 3, 4, 5}
    delays = {me: leader_lost_delay(voters, me, lost=3, jitter=0.5) for me in (1, 2, 4, 5)}
    assert sorted(delays, key=delays.get) == [1, 2, 4, 5]
    turns = sorted(delays.values())
    assert turns[0] == pytest.approx(0.075)
    assert all(b - a == pytest.approx(0.25) for a, b in zip(turns, turns[1:], strict=False))
    # Jitter stays within a turn; a voter the set does not name goes last.
    assert leader_lost_delay(voters, 1, 3, 0.0) < leader_lost_delay(voters, 1, 3, 0.999) < 0.1
    assert leader_lost_delay({1, 2, 3}, 7, 3, 0.0) == pytest.approx(0.05 + 2 * 0.25)
    assert leader_lost_delay({1, 2, 3}, 2, None, 0.0) == pytest.approx(0.05 + 0.25)


def test_a_voter_whose_term_ran_ahead_tells_the_leader():
    """Rule 4: it stood and lost; pysyncobj drops the leader's entries as stale
    and answers nothing, and its vote requests are dropped in the lease: without
    this answer it would stay out of the cluster for good."""
    assert term_ahead(2, 3, admitted=True) == {"type": TERM_AHEAD, "term": 3}
    assert term_ahead(3, 3, admitted=True) is None  # the usual case
    assert term_ahead(4, 3, admitted=True) is None  # a newer leader: pysyncobj follows it
    assert term_ahead(2, 3, admitted=False) is None  # an observer's term counts for nothing
    assert term_ahead(None, 3, admitted=True) is None
