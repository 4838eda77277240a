"""The leader's wall clock stepped as NTP steps it (+1 h, then back 2 h to
-1 h, then forward to the true time) while brokers heartbeat every 2 s against
a 9 s session (Kafka's defaults), then leadership handed to a follower whose
clock is an hour ahead: no heartbeating broker is ever fenced, and a broker
that stopped is fenced after its session timeout, neither at once nor an hour
late. Sessions run on a monotonic clock (quorum/node.py ``session_clock_ms``)."""

from __future__ import annotations

import time

import pytest

from .heartbeating import (
    BROKERS,
    HEARTBEAT_EVERY_S,
    LATE_SLACK_S,
    SESSION_S,
    Heartbeats,
    fence_records,
    fenced,
    register_unfenced,
)
from .wall_clock import step_library, stepped_cluster

pytestmark = pytest.mark.slow


def test_a_stepped_wall_clock_on_the_leader_fences_no_live_broker_and_delays_no_dead_one(
    tmp_path,
):
    step_library()  # skips (fails in CI) before any process starts
    cluster, clocks = stepped_cluster(tmp_path, SESSION_S)
    heartbeats = None
    try:
        cluster.start()
        cluster.wait_ready()
        leader = cluster.leader()
        epochs = {b: register_unfenced(cluster, leader, b) for b in BROKERS}
        heartbeats = Heartbeats(cluster, epochs)
        heartbeats.thread.start()
        cluster.wait(lambda: heartbeats.rounds >= 1, 30, "a first heartbeat round")

        follower = next(i for i in range(cluster.n) if i != leader)
        clocks[follower].step(+3600)  # a follower's step: sessions are not its business

        def dies_on_time(dead: int, at: int, since: float, what: str) -> None:
            last = heartbeats.stop_one(dead)
            cluster.wait(
                lambda: fenced(cluster, at, dead),
                SESSION_S + LATE_SLACK_S + 5,
                f"broker {dead} fenced after its heartbeats stopped ({what})",
            )
            took = time.monotonic() - last
            late = time.monotonic() - max(last, since)
            assert took >= SESSION_S and late <= SESSION_S + LATE_SLACK_S, (
                f"broker {dead} was fenced {took:.1f} s after its last heartbeat ({what}); "
                f"its session is {SESSION_S} s"
            )

        for step_s, dead in ((+3600, 5), (-3600, 4)):
            clocks[leader].step(step_s)
            dies_on_time(dead, leader, 0.0, f"the leader's clock stepped {step_s:+d} s")
        clocks[leader].step(0)  # and back: a step of an hour forward
        rounds = heartbeats.rounds
        cluster.wait(
            lambda: heartbeats.rounds >= rounds + 2,
            5 * HEARTBEAT_EVERY_S + 10,
            "two heartbeat rounds after the clock was stepped back",
        )
        assert cluster.leader() == leader, "leadership moved: the test's timing bounds assume it"

        # The follower an hour ahead becomes the leader: it grants fresh sessions
        # on its own monotonic clock, and fences on time.
        r = cluster.post(leader, "/v1/quorum/transfer-leadership", {"targetNodeId": follower})
        assert r.status_code == 200, r.text
        assert cluster.leader(among=[follower]) == follower
        dies_on_time(3, follower, time.monotonic(), "a new leader whose clock is 1 h ahead")
        assert cluster.leader() == follower, "leadership moved again during the test"

        assert heartbeats.problems == []
        assert fence_records(cluster, follower) == {1: 0, 2: 0, 3: 1, 4: 1, 5: 1}
    finally:
        if heartbeats is not None:
            heartbeats.close()
        cluster.close()
