"""serve --observer: a read-only follower (pysyncobj's read-only node) that
serves reads, the log long-poll and snapshots, and never votes or counts."""

from __future__ import annotations

import threading

import pytest

from .cluster import Cluster, holds_for
from .test_cluster import brokers, register, register_body

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, voters=3, fsync="always")
    try:
        c.start()
        yield c
    finally:
        c.close()


def test_an_observer_follows_and_serves_reads_but_never_counts(cluster):
    c = cluster
    leader = c.leader()
    acked = {b: register(c, leader, b) for b in range(1, 11)}
    o = c.add_observer()
    c.start(o)
    c.wait(lambda: (c.status(o) or {}).get("ready"), 60, "the observer ready")
    c.wait(
        lambda: c.status(o)["highWatermark"] == c.status(leader)["highWatermark"],
        60,
        "the observer caught up",
    )
    s = c.status(o)
    assert s["observer"] and s["role"] == "observer" and s["leaderId"] == leader
    assert o not in {v["nodeId"] for v in s["voters"]}
    assert brokers(c, o, linearizable=False).items() >= acked.items()
    assert brokers(c, o, linearizable=True).items() >= acked.items()  # a barrier via the leader
    c.wait(lambda: c.status(leader)["observersConnected"] == 1, 30, "the leader sees it")
    # The log long-poll: a write made while it waits comes back to it.
    offset = c.status(o)["highWatermark"]
    polled: dict = {}
    poll = threading.Thread(
        target=lambda: polled.update(
            r=c.get(o, f"/v1/log?fromOffset={offset}&waitMs=20000", timeout=30)
        )
    )
    poll.start()
    register(c, leader, 11)
    poll.join(timeout=30)
    records = polled["r"].json()["records"]
    assert any(r["data"].get("brokerId") == 11 for r in records), records
    snap = c.get(o, "/v1/snapshot")
    assert snap.status_code == 200 and snap.json()["records"]
    # A write sent to it goes to the leader.
    r = c.post(o, "/v1/brokers/register", register_body(c, 12))
    assert r.status_code == 307 and r.json()["leaderId"] == leader, r.text
    # It never counts: with two voters gone the third alone cannot commit,
    # and the observer is never elected.
    gone = [i for i in range(3) if i != leader]
    for i in gone:
        c.kill(i)
    c.wait(lambda: c.status(leader)["leaderId"] is None, 30, "the lone voter steps down")

    def neither_leads() -> None:
        for i in (leader, o):
            assert not c.status(i)["active"]

    holds_for(2.0, neither_leads)
