"""The leader's wall clock stepped as NTP steps it (+1 h, then back 2 h to
-1 h, then forward to the true time) while brokers heartbeat every 2 s against
a 9 s session (Kafka's defaults), then leadership handed to a follower whose
clock is an hour ahead: no heartbeating broker is ever fenced, and a broker
that stopped is fenced after its session timeout, neither at once nor an hour
late. Sessions run on a monotonic clock (quorum/node.py ``session_clock_ms``)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from ..cluster import Cluster
from ..local_node import registration_body
from .wall_clock import SteppedClock, step_library

pytestmark = pytest.mark.slow

SESSION_S = 9.0
HEARTBEAT_EVERY_S = 2.0
BROKERS = (1, 2, 3, 4, 5)
# Fencing runs on a timer of at most 1 s; a loaded 2-core machine adds more.
LATE_SLACK_S = 10.0


class Heartbeats:
    """Brokers heartbeating every 2 s from a thread, until each is stopped."""

    def __init__(self, cluster: Cluster, epochs: dict[int, int]) -> None:
        self.cluster = cluster
        self.epochs = epochs
        self.live = set(epochs)
        self.last_sent: dict[int, float] = {}
        self.rounds = 0
        self.problems: list[str] = []
        self.lock = threading.Lock()  # held while a heartbeat is out
        self.stopped = threading.Event()
        self.client = httpx.Client(timeout=5.0, follow_redirects=True)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self.stopped.is_set():
            for broker_id in sorted(self.epochs):
                with self.lock:
                    if broker_id not in self.live:
                        continue
                    self.last_sent[broker_id] = time.monotonic()
                    try:
                        # Through any voter, in turn: followers redirect to the leader.
                        r = self.client.post(
                            self.cluster.url(i % self.cluster.n) + "/v1/brokers/heartbeat",
                            json=self.body(broker_id),
                        )
                    except httpx.HTTPError as e:
                        self.problems.append(f"broker {broker_id}: heartbeat failed: {e!r}")
                        continue
                answer = r.json() if r.status_code == 200 else {}
                if r.status_code != 200 or answer.get("errorCode") != 0:
                    self.problems.append(f"broker {broker_id}: {r.status_code} {r.text}")
                elif answer["isFenced"]:
                    self.problems.append(f"broker {broker_id} heartbeating was told it is fenced")
            i += 1
            self.rounds += 1
            self.stopped.wait(HEARTBEAT_EVERY_S)

    def body(self, broker_id: int) -> dict:
        return {
            "brokerId": broker_id,
            "brokerEpoch": self.epochs[broker_id],
            "currentMetadataOffset": 1 << 40,
        }

    def stop_one(self, broker_id: int) -> float:
        """Stops ``broker_id``'s heartbeats; returns when its last one was sent."""
        with self.lock:
            self.live.discard(broker_id)
            return self.last_sent[broker_id]

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=10)
        self.client.close()


def fenced(cluster: Cluster, leader: int, broker_id: int) -> bool:
    r = cluster.get(leader, f"/v1/brokers/{broker_id}", timeout=2.0)
    return r.status_code == 200 and r.json()["fenced"]


def fence_records(cluster: Cluster, leader: int) -> dict[int, int]:
    r = cluster.get(leader, "/v1/log?fromOffset=0&maxRecords=10000")
    assert r.status_code == 200, r.text
    records = r.json()["records"]
    counts = dict.fromkeys(BROKERS, 0)
    for r in records:
        if r["type"] == "BROKER_REGISTRATION_CHANGE_RECORD" and r["data"].get("fenced") == 1:
            counts[r["data"]["brokerId"]] += 1
    return counts


def register_unfenced(cluster: Cluster, leader: int, broker_id: int) -> int:
    url = cluster.url(leader)
    r = cluster.client.post(
        url + "/v1/brokers/register", json=registration_body(cluster.cluster_id, broker_id)
    )
    assert r.status_code == 200 and r.json()["errorCode"] == 0, r.text
    epoch = r.json()["brokerEpoch"]
    body = {"brokerId": broker_id, "brokerEpoch": epoch, "currentMetadataOffset": 1 << 40}
    r = cluster.client.post(url + "/v1/brokers/heartbeat", json=body)
    assert r.status_code == 200 and r.json()["isFenced"] is False, r.text
    return epoch


def test_a_stepped_wall_clock_on_the_leader_fences_no_live_broker_and_delays_no_dead_one(
    tmp_path,
):
    step_library()  # skips (fails in CI) before any process starts
    cluster = Cluster(tmp_path, extra=["--session-timeout-ms", str(int(SESSION_S * 1000))])
    clocks = [SteppedClock(tmp_path / f"clock-{i}") for i in range(cluster.n)]
    cluster.env = {i: clock.env() for i, clock in enumerate(clocks)}
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
