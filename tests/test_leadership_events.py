"""Leader changes with their cause, and the leader's heartbeat gaps
(quorum/leadership_events.py): the counters, then real voters."""

from __future__ import annotations

import pytest

from quorum.leadership_events import (
    CHANGES_KEPT,
    FIRST_WRITE_BUCKETS,
    GAP_BUCKETS,
    LeadershipEvents,
    cumulative,
    say_step_down,
    step_down_cause,
)
from quorum.node_errors import NotControllerError, UnavailableError, not_controller

from .cluster import Cluster
from .conftest import running


def test_a_gap_is_measured_between_two_heartbeats_of_the_same_leader():
    e = LeadershipEvents()
    e.heard("a", 10.0)
    e.heard("a", 10.1)
    e.heard("a", 10.25)
    assert e.gaps == 2 and e.gap_max_s == pytest.approx(0.15)
    e.heard("b", 12.0)  # another leader: no gap across the election
    assert e.gaps == 2
    e.heard("b", 12.1)
    assert e.gaps == 3


def test_the_time_without_a_leader_is_not_a_gap():
    e = LeadershipEvents()
    e.heard("a", 1.0)
    e.forget_heartbeats()  # this voter stood for election
    e.heard("a", 5.0)
    assert e.gaps == 0


def test_quantiles_are_bucket_bounds_and_the_open_bucket_reports_the_max():
    e = LeadershipEvents()
    at = 0.0
    e.heard("a", at)
    for gap in [0.0625] * 98 + [0.25, 2.5]:  # exact in binary: no rounding at a bound
        at += gap
        e.heard("a", at)
    assert e.gap_quantile(0.5) == 0.1
    assert e.gap_quantile(0.99) == 0.3
    assert e.gap_quantile(1.0) == pytest.approx(2.5)
    buckets = e.cumulative_buckets()
    assert buckets[-1] == ("+Inf", 100) and len(buckets) == len(GAP_BUCKETS) + 1
    assert [n for _, n in buckets] == sorted(n for _, n in buckets)
    assert LeadershipEvents().gap_quantile(0.5) is None


def test_leader_changes_count_each_new_leader_once():
    e = LeadershipEvents()
    for leader in ["a", "a", None, "a", "b", "b", "a"]:
        e.leader_is(leader)
    assert e.leader_changes == 3  # a, then b, then a again


def test_a_step_down_nobody_explained_is_pysyncobjs_own():
    class Raft:
        pass

    raft = Raft()
    assert step_down_cause(raft, 100.0) == "higher_term"
    say_step_down(raft, "check_quorum", 100.0)
    assert step_down_cause(raft, 100.1) == "check_quorum"
    assert step_down_cause(raft, 100.2) == "higher_term"  # said once, used once
    say_step_down(raft, "transfer", 100.0)
    assert step_down_cause(raft, 200.0) == "higher_term"  # too old to explain it


NODE_IDS = {"a": 0, "b": 1}.get


def test_a_leadership_won_is_timed_from_the_old_leaders_last_heartbeat():
    e = LeadershipEvents()
    e.heard("a", 10.0)
    e.heard("a", 10.1)  # the old leader's last AppendEntries
    e.forget_heartbeats()
    e.election_started("leader_silent", 10.8)
    e.leadership_won(7, 10.9, 1_795_000_000_000, NODE_IDS)
    assert e.awaiting_term == 7
    e.first_write(6, 11.0)  # another term's: not this leadership's
    e.became_active(7, 10.95)
    assert e.awaiting_term == 7  # a LEADER_CHANGE is not a write
    e.first_write(7, 11.1)
    assert e.awaiting_term is None
    (won,) = e.as_dict()["leadershipsWon"]
    assert won == {
        "atMs": 1_795_000_000_000,
        "term": 7,
        "previousLeaderId": 0,
        "cause": "leader_silent",
        "silenceMs": 700.0,
        "electedMs": 800.0,
        "activeMs": 850.0,
        "firstWriteMs": 1000.0,
    }
    buckets = cumulative(FIRST_WRITE_BUCKETS, e.first_write_counts)
    assert dict(buckets)["0.75"] == 0 and dict(buckets)["1.0"] == 1 and buckets[-1] == ("+Inf", 1)
    assert e.first_write_sum_s == pytest.approx(1.0)
    e.first_write(7, 12.0)  # counted once
    assert buckets[-1][1] == sum(e.first_write_counts)


def test_a_leader_that_heard_nobody_times_from_its_stand_and_a_loss_stops_the_clock():
    e = LeadershipEvents()
    e.election_started("no_leader_yet", 5.0)
    e.leadership_won(1, 5.2, 0, NODE_IDS)
    e.leadership_lost("check_quorum")  # before any write: none is timed
    assert e.awaiting_term is None
    e.first_write(1, 5.5)
    assert sum(e.first_write_counts) == 0
    (won,) = e.as_dict()["leadershipsWon"]
    assert won["previousLeaderId"] is None and won["silenceMs"] is None
    assert won["electedMs"] == 200.0 and won["firstWriteMs"] is None
    # Its own leadership is not the previous one: it heard nobody since.
    e.election_started("leader_silent", 9.0)
    e.leadership_won(2, 9.1, 0, NODE_IDS)
    assert e.as_dict()["leadershipsWon"][-1]["previousLeaderId"] is None


def test_a_stand_told_after_the_win_of_the_same_tick_is_that_wins():
    """pysyncobj polls for the votes within the tick in which it stands, and
    the stand is told at the tick's end: after the win (loopback, a transfer)."""
    e = LeadershipEvents()
    e.heard("a", 3.0)
    e.leadership_won(4, 3.05, 0, NODE_IDS)
    e.election_started("transfer", 3.06)
    won = e.as_dict()["leadershipsWon"][-1]
    assert won["cause"] == "transfer" and won["silenceMs"] == won["electedMs"] == 50.0
    e.election_started("leader_silent", 9.0)  # a later stand is not that win's
    assert e.as_dict()["leadershipsWon"][-1]["cause"] == "transfer"
    e.leadership_lost("higher_term")
    e.leadership_won(6, 9.2, 0, NODE_IDS)
    assert e.as_dict()["leadershipsWon"][-1]["cause"] == "leader_silent"


def test_a_stand_lost_to_another_leader_explains_no_later_win():
    e = LeadershipEvents()
    e.election_started("no_leader_yet", 1.0)  # lost: "a" leads
    e.heard("a", 1.5)
    e.heard("a", 2.0)  # "a" is killed
    e.leadership_won(3, 2.2, 0, NODE_IDS)  # stood and won within one tick
    e.election_started("leader_connection_closed", 2.2)
    won = e.as_dict()["leadershipsWon"][-1]
    assert won["cause"] == "leader_connection_closed", won
    assert won["silenceMs"] == won["electedMs"] == pytest.approx(200.0)


def test_the_old_leaders_heartbeats_after_a_transfers_stand_keep_its_cause():
    e = LeadershipEvents()
    e.heard("a", 1.0)
    e.forget_heartbeats()
    e.election_started("transfer", 1.01)
    e.heard("a", 1.02)  # "a" has not seen the new term yet
    e.leadership_won(5, 1.03, 0, NODE_IDS)
    won = e.as_dict()["leadershipsWon"][-1]
    assert won["cause"] == "transfer" and won["previousLeaderId"] == 0, won


def test_a_transfer_names_the_leader_that_handed_over_and_only_the_last_are_kept():
    e = LeadershipEvents()
    for term in range(1, CHANGES_KEPT + 3):
        e.heard("b", term * 10.0)
        e.forget_heartbeats()
        e.election_started("transfer", term * 10.0 + 0.01)
        e.leadership_won(term, term * 10.0 + 0.05, term, NODE_IDS)
    won = e.as_dict()["leadershipsWon"]
    assert len(won) == CHANGES_KEPT and won[-1]["term"] == CHANGES_KEPT + 2
    assert won[-1]["previousLeaderId"] == 1 and won[-1]["cause"] == "transfer"
    assert won[-1]["silenceMs"] == pytest.approx(10.0) and won[-1]["electedMs"] == 50.0


def test_a_follower_redirects_to_a_new_leader_whose_url_it_knows():
    """Just after an election (issue 42): the leader is known, with a URL
    (its LEADER_CHANGE, or the one it wrote when it led before): a 307."""
    error = not_controller("why", False, 0, 1, "http://n1")
    assert isinstance(error, NotControllerError) and error.leader_url == "http://n1"
    unknown = not_controller("why", False, 0, 1, None)
    assert isinstance(unknown, UnavailableError) and "the leader is node 1" in str(unknown)
    myself = not_controller("why", False, 0, 0, "http://n0")
    assert isinstance(myself, UnavailableError) and "just elected" in str(myself)
    assert "no leader is known" in str(not_controller("why", False, 0, None, None))
    assert "shutting down" in str(not_controller("why", True, 0, 1, "http://n1"))


@pytest.mark.slow
def test_real_voters_say_why_leadership_moved(tmp_path):
    """A transfer, then a SIGKILL of the leader: the status of each voter
    names the cause, ``/metrics`` has the series, and followers measured
    their leader's heartbeat gaps."""
    with running(Cluster(tmp_path)) as c:
        first = c.leader()
        target = next(i for i in range(c.n) if i != first)
        r = c.post(first, "/v1/quorum/transfer-leadership", {"targetNodeId": target})
        assert r.status_code == 200, r.text
        c.wait(lambda: c.leader() == target, 30, "the transfer")

        def elections(i: int) -> dict:
            return (c.status(i) or {}).get("elections") or {}

        c.wait(
            lambda: elections(first).get("leadershipLost", {}).get("transfer") == 1,
            30,
            "the old leader counting the transfer",
        )
        assert elections(target)["electionsStarted"]["transfer"] == 1
        c.kill(target)  # SIGKILL
        survivors = [i for i in range(c.n) if i != target]
        new = c.leader(among=survivors, timeout_s=30)
        started = elections(new)["electionsStarted"]
        # Pre-vote's rule 5: the killed leader's connection closed under it.
        assert started["leader_connection_closed"] >= 1, started
        won = elections(new)["leadershipsWon"][-1]  # how it took over, as it knows it
        assert won["previousLeaderId"] == target and won["activeMs"] is not None, won
        assert won["cause"] in ("leader_connection_closed", "leader_silent"), won
        assert elections(first)["leadershipsWon"], "the first leader lists its leadership"
        for i in survivors:
            e = elections(i)
            assert e["leaderChanges"] >= 3, e  # first, target, new
            assert e["heartbeatGaps"]["count"] > 0, e
        metrics = c.get(new, "/metrics").text
        assert 'metaquorum_elections_started_total{cause="transfer"}' in metrics
        assert "metaquorum_leader_heartbeat_gap_seconds_bucket" in metrics
        assert "metaquorum_leader_change_first_write_seconds_bucket" in metrics
        assert 'metaquorum_leadership_lost_total{cause="check_quorum"}' in metrics
