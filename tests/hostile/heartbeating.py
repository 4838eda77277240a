"""Brokers that heartbeat every 2 s against a 9 s session (Kafka's defaults)
from a thread, and what the controller made of them: for the wall-clock tests
(tests/hostile/test_wall_clock_steps.py) and bench/clock_steps.py."""

from __future__ import annotations

import threading
import time

import httpx

from ..cluster import Cluster
from ..local_node import registration_body

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


def fence_records(cluster: Cluster, leader: int, brokers=BROKERS) -> dict[int, int]:
    """How many times the log fenced each of ``brokers``."""
    r = cluster.get(leader, "/v1/log?fromOffset=0&maxRecords=10000")
    assert r.status_code == 200, r.text
    counts = dict.fromkeys(brokers, 0)
    for record in r.json()["records"]:
        data = record["data"]
        if record["type"] == "BROKER_REGISTRATION_CHANGE_RECORD" and data.get("fenced") == 1:
            if data["brokerId"] in counts:
                counts[data["brokerId"]] += 1
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
