"""Leader changes with their cause, and the leader's heartbeat gaps
(quorum/leadership_events.py): the counters, then real voters."""

from __future__ import annotations

import pytest

from quorum.leadership_events import (
    GAP_BUCKETS,
    LeadershipEvents,
    say_step_down,
    step_down_cause,
)

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
        for i in survivors:
            e = elections(i)
            assert e["leaderChanges"] >= 3, e  # first, target, new
            assert e["heartbeatGaps"]["count"] > 0, e
        metrics = c.get(new, "/metrics").text
        assert 'metaquorum_elections_started_total{cause="transfer"}' in metrics
        assert "metaquorum_leader_heartbeat_gap_seconds_bucket" in metrics
        assert 'metaquorum_leadership_lost_total{cause="check_quorum"}' in metrics
