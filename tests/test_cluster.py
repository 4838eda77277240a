"""Three real voters (``metaquorum serve`` processes) on loopback: election,
replication, redirects, leader loss, full restarts, snapshots, overload."""

import concurrent.futures
import time
import uuid

import httpx
import pytest

from .cluster import Cluster

pytestmark = pytest.mark.slow


MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]


def register_body(cluster, broker_id):
    return {
        "brokerId": broker_id,
        "clusterId": cluster.cluster_id,
        "incarnationId": str(uuid.uuid4()),
        "listeners": [
            {"name": "PLAINTEXT", "host": "localhost", "port": 9092, "securityProtocol": 0}
        ],
        "features": MV,
        "rack": None,
    }


def write(cluster, i, path, body):
    """A write through voter ``i``, following the redirect to the leader."""
    r = cluster.client.post(cluster.url(i) + path, json=body, follow_redirects=True)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def register(cluster, i, broker_id):
    body = write(cluster, i, "/v1/brokers/register", register_body(cluster, broker_id))
    assert body["errorName"] == "NONE", body
    return body["brokerEpoch"]


def brokers(cluster, i, linearizable=True):
    q = "?consistency=linearizable" if linearizable else ""
    r = cluster.get(i, "/v1/brokers" + q)
    assert r.status_code == 200, r.text
    body = r.json()
    items = body["brokers"] if isinstance(body, dict) else body
    return {b["brokerId"]: b["brokerEpoch"] for b in items}


def others(cluster, leader):
    return [i for i in range(cluster.n) if i != leader]


def test_voters_elect_replicate_and_redirect_writes_to_the_leader(cluster):
    cluster.wait_ready()
    leader = cluster.leader()
    follower = others(cluster, leader)[0]
    r = cluster.post(follower, "/v1/brokers/register", register_body(cluster, 1))
    assert r.status_code == 307
    assert r.headers["location"] == cluster.url(leader) + "/v1/brokers/register"
    assert r.json()["errorName"] == "NOT_CONTROLLER" and r.json()["leaderId"] == leader
    epoch = register(cluster, follower, 1)
    # A linearizable read on any voter sees the acknowledged write.
    for i in range(cluster.n):
        assert brokers(cluster, i) == {1: epoch}
    offsets = {cluster.status(i)["lastAppliedOffset"] for i in range(cluster.n)}
    assert len(offsets) == 1


def test_leader_sigkill_a_new_leader_takes_writes_and_nothing_acknowledged_is_lost(cluster):
    cluster.wait_ready()
    leader = cluster.leader()
    acked = {b: register(cluster, leader, b) for b in range(1, 11)}
    cluster.kill(leader)
    start = time.monotonic()
    survivors = others(cluster, leader)
    new_leader = cluster.leader(among=survivors)
    acked[11] = register(cluster, new_leader, 11)
    print(f"\nfailover: first accepted write {time.monotonic() - start:.2f} s after SIGKILL")
    assert new_leader != leader
    seen = brokers(cluster, new_leader)
    assert seen == acked
    cluster.start(leader)
    cluster.wait_ready()
    assert brokers(cluster, leader) == acked


@pytest.mark.layout("2-workers")
def test_all_voters_killed_and_restarted_keep_every_acknowledged_write(cluster):
    cluster.wait_ready()
    leader = cluster.leader()
    acked = {b: register(cluster, (leader + b) % 3, b) for b in range(1, 21)}
    topic = write(
        cluster,
        leader,
        "/v1/topics",
        {"topics": [{"name": "t", "numPartitions": 6, "replicationFactor": 1}]},
    )
    assert topic["topics"][0]["errorName"] in ("NONE", "INVALID_REPLICATION_FACTOR")
    for i in range(cluster.n):
        cluster.kill(i)
    cluster.start()
    cluster.wait_ready()
    cluster.leader()
    views = [brokers(cluster, i) for i in range(cluster.n)]
    assert all(v == acked for v in views)
    statuses = [cluster.status(i) for i in range(cluster.n)]
    assert all(s["clusterId"] == cluster.cluster_id for s in statuses)

    def digests():
        seen = {
            tuple(
                cluster.get(i, "/v1/quorum/status?digest=true").json()[k]
                for k in ("lastAppliedOffset", "imageDigest")
            )
            for i in range(cluster.n)
        }
        return len(seen) == 1

    # Identical images on every voter, byte for byte (canonical encoding).
    cluster.wait(digests, 30, "identical image digests on every voter")


@pytest.mark.layout("default")
def test_a_follower_restarted_after_compaction_catches_up_from_a_snapshot(tmp_path):
    c = Cluster(tmp_path, extra=["--compaction-entries", "40"])
    try:
        c.start()
        c.wait_ready()
        leader = c.leader()
        lagging = others(c, leader)[0]
        c.stop(lagging)
        epoch = register(c, leader, 1)
        for n in range(80):
            write(
                c,
                leader,
                "/v1/brokers/heartbeat",
                {
                    "brokerId": 1,
                    "brokerEpoch": epoch,
                    "currentMetadataOffset": 10**9,
                    "wantFence": n % 2 == 0,
                    "wantShutDown": False,
                },
            )
        c.start(lagging)
        c.wait_ready([lagging])
        want = c.status(leader)["lastAppliedOffset"]
        c.wait(lambda: c.status(lagging)["lastAppliedOffset"] >= want, 30, "the follower caught up")
        assert brokers(c, lagging) == brokers(c, leader)
        log = c.get(lagging, "/v1/log?fromOffset=0&maxRecords=1")
        assert log.status_code == 410 and log.json()["oldestOffset"] > 0
    finally:
        c.close()


@pytest.mark.layout("2-workers")
def test_overload_is_refused_with_429_and_the_cluster_keeps_serving(tmp_path):
    c = Cluster(tmp_path, extra=["--max-queued-requests", "4"])
    try:
        c.start()
        c.wait_ready()
        leader = c.leader()
        url = c.url(leader) + "/v1/brokers/register"

        def one(b):
            with httpx.Client(timeout=30) as client:
                return client.post(url, json=register_body(c, b))

        with concurrent.futures.ThreadPoolExecutor(64) as pool:
            results = list(pool.map(one, range(1, 400)))
        codes = {r.status_code for r in results}
        assert codes <= {200, 429}, codes
        throttled = [r for r in results if r.status_code == 429]
        if throttled:
            assert throttled[0].json()["errorName"] == "THROTTLING_QUOTA_EXCEEDED"
            assert float(throttled[0].headers["retry-after"]) >= 0
        accepted = {r.json()["brokerEpoch"] for r in results if r.status_code == 200}
        assert len(accepted) == sum(r.status_code == 200 for r in results)
        assert c.leader() == leader  # nothing wedged, nobody lost leadership
        register(c, leader, 999)
    finally:
        c.close()


@pytest.mark.layout("default")
def test_sigterm_on_the_leader_transfers_leadership_and_exits_0(cluster):
    cluster.wait_ready()
    leader = cluster.leader()
    assert cluster.stop(leader) == 0
    survivors = others(cluster, leader)
    new_leader = cluster.leader(among=survivors, timeout_s=30)
    register(cluster, new_leader, 5)


@pytest.mark.layout("2-workers")
def test_an_operator_moves_leadership_to_a_chosen_voter(cluster):
    cluster.wait_ready()
    leader = cluster.leader()
    target = others(cluster, leader)[-1]
    r = cluster.client.post(
        cluster.url(leader) + "/v1/quorum/transfer-leadership", json={"targetNodeId": target}
    )
    assert r.status_code == 200, r.text
    assert cluster.leader(timeout_s=30) == target

    # The new active controller takes writes; the old one redirects to it once
    # it knows the new leader's URL: from its LEADER_CHANGE, or from the one it
    # wrote when it led before (a 503 with Retry-After until then: the new
    # leader can commit that record without the old one).
    def redirected():
        r = cluster.post(leader, "/v1/brokers/register", register_body(cluster, 3))
        assert r.status_code in (307, 503), (r.status_code, r.text)
        return r.status_code == 307 and r.headers["location"].startswith(cluster.url(target))

    cluster.wait(redirected, 10, "the old leader redirecting to the new one")
    register(cluster, leader, 3)


@pytest.mark.layout("default")
def test_under_concurrent_writes_no_follower_truncates_entries_it_applied(tmp_path):
    """Late answers to AppendEntries must not make the leader send entries
    again (quorum/raft/raft_port.keep_next_index_forward): pysyncobj would have the
    follower truncate copies it already applied and log it at CRITICAL."""
    c = Cluster(tmp_path, fsync="always")
    try:
        c.start()
        c.wait_ready()
        leader = c.leader()
        url = c.url(leader) + "/v1/brokers/register"
        bodies = [register_body(c, b) for b in range(1, 1201)]
        deadline = time.monotonic() + 120

        def client(share):
            with httpx.Client(timeout=30) as http:
                for body in share:
                    assert time.monotonic() < deadline, "the writes took over two minutes"
                    r = http.post(url, json=body)
                    assert r.status_code == 200 and r.json()["errorName"] == "NONE", r.text

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(client, [bodies[i::16] for i in range(16)]))
        assert len(brokers(c, leader)) == 1200
    finally:
        c.close()
    for i in range(3):
        log = c.logs[i].read_text(errors="replace")
        assert "truncating already-applied" not in log, f"voter {i} truncated applied entries"
