"""``serve --http-workers 2``: real voters whose HTTP is served by worker
processes in front of one core (metaquorum/http_workers.py). What a broker
sees is the same as with one process; a worker that dies is replaced without
the voter losing its role, and its clients never get an acknowledgement the
core did not give."""

import concurrent.futures
import os
import signal
import socket
import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from .cluster import Cluster
from .test_cluster import brokers, others, register, register_body, write

pytestmark = pytest.mark.slow

WORKERS = 2


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, extra=["--http-workers", str(WORKERS)])
    try:
        yield c.start()
    finally:
        c.close()


def workers_of(cluster, i):
    status = cluster.status(i)
    return status["httpWorkers"] if status else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead too
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def heartbeat_until_unfenced(cluster, leader, broker_id, epoch):
    def unfenced():
        body = write(
            cluster,
            leader,
            "/v1/brokers/heartbeat",
            {"brokerId": broker_id, "brokerEpoch": epoch, "currentMetadataOffset": 10**9},
        )
        return not body["isFenced"]

    cluster.wait(unfenced, 30, f"broker {broker_id} unfenced")


def test_writes_reads_redirects_status_and_metrics_through_workers(cluster):
    cluster.wait_ready()
    leader = cluster.leader()
    follower = others(cluster, leader)[0]
    for i in range(cluster.n):
        workers = workers_of(cluster, i)
        assert [w["index"] for w in workers] == list(range(WORKERS)), workers
        assert all(w["alive"] and w["restarts"] == 0 for w in workers), workers
    # A follower's worker redirects a write to the leader, with the leader's URL.
    r = cluster.post(follower, "/v1/brokers/register", register_body(cluster, 1))
    assert r.status_code == 307, r.text
    assert r.headers["location"] == cluster.url(leader) + "/v1/brokers/register"
    epochs = {b: register(cluster, follower, b) for b in (1, 2, 3)}
    for b, epoch in epochs.items():
        heartbeat_until_unfenced(cluster, leader, b, epoch)
    created = write(
        cluster,
        follower,
        "/v1/topics",
        {"topics": [{"name": "t", "numPartitions": 2, "replicationFactor": 3}]},
    )
    assert created["topics"][0]["errorName"] == "NONE", created
    # Every worker of every voter answers a linearizable read with the writes.
    for i in range(cluster.n):
        for _ in range(4 * WORKERS):  # new connections land on either worker
            with httpx.Client(timeout=10) as fresh:
                r = fresh.get(cluster.url(i) + "/v1/brokers?consistency=linearizable")
            assert r.status_code == 200, r.text
            assert {b["brokerId"]: b["brokerEpoch"] for b in r.json()["brokers"]} == epochs
    # An AlterPartition through the leader's worker, read back on a follower.
    topic = cluster.get(follower, "/v1/topics/t?consistency=linearizable").json()
    p = topic["partitions"][0]
    shrunk = [r for r in p["isr"] if r != p["leader"]][:1] + [p["leader"]]
    body = write(
        cluster,
        follower,
        "/v1/alter-partition?version=3",
        {
            "brokerId": p["leader"],
            "brokerEpoch": epochs[p["leader"]],
            "topics": [
                {
                    "topicId": topic["topicId"],
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            "leaderEpoch": p["leaderEpoch"],
                            "partitionEpoch": p["partitionEpoch"],
                            "newIsrWithEpochs": [
                                {"brokerId": b, "brokerEpoch": epochs[b]} for b in sorted(shrunk)
                            ],
                            "leaderRecoveryState": 0,
                        }
                    ],
                }
            ],
        },
    )
    answer = body["topics"][0]["partitions"][0]
    assert answer["errorName"] == "NONE", body
    again = cluster.get(follower, "/v1/topics/t?consistency=linearizable").json()
    assert sorted(again["partitions"][0]["isr"]) == sorted(shrunk)
    # The log long-poll is served by a worker: it wakes on the next write.
    head = cluster.get(follower, "/v1/log?fromOffset=0&maxRecords=10000").json()
    waiting = concurrent.futures.ThreadPoolExecutor(1).submit(
        cluster.get, follower, f"/v1/log?fromOffset={head['nextOffset']}&waitMs=20000"
    )
    time.sleep(0.2)  # the poll is in flight (it would also pass if it were not)
    register(cluster, leader, 4)
    polled = waiting.result(timeout=30).json()
    assert any(
        r["type"] == "REGISTER_BROKER_RECORD" and r["data"]["brokerId"] == 4
        for r in polled["records"]
    ), polled
    # /metrics: one view of the voter, the workers' requests summed.
    text = cluster.get(leader, "/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    answered = sum(
        s.value
        for s in families["metaquorum_http_responses"].samples
        if s.labels.get("route") == "/v1/brokers/register" and s.name.endswith("_total")
    )
    assert answered >= 4, answered
    assert families["metaquorum_active_controller"].samples[0].value == 1
    assert "metaquorum_http_open_connections" in families


def test_a_worker_killed_under_load_is_replaced_and_acknowledges_nothing_false(cluster):
    cluster.wait_ready()
    leader = cluster.leader()
    term = cluster.status(leader)["raftTerm"]
    victim = workers_of(cluster, leader)[0]
    acknowledged: dict[int, int] = {}  # broker id -> epoch, acknowledged
    errors: list[str] = []
    stop = threading.Event()

    def writer(first: int) -> None:
        broker = first
        with httpx.Client(timeout=15) as client:
            while not stop.is_set():
                try:
                    r = client.post(
                        cluster.url(leader) + "/v1/brokers/register",
                        json=register_body(cluster, broker),
                    )
                except httpx.HTTPError as e:  # the killed worker's connections
                    errors.append(type(e).__name__)
                    broker += 1000
                    continue
                if r.status_code == 200 and r.json()["errorName"] == "NONE":
                    acknowledged[broker] = r.json()["brokerEpoch"]
                elif r.status_code != 200:
                    errors.append(str(r.status_code))
                broker += 1000

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(1, 9)]
    for t in threads:
        t.start()
    try:
        cluster.wait(lambda: len(acknowledged) >= 50, 60, "writes under way")
        os.kill(victim["pid"], signal.SIGKILL)
        before = len(acknowledged)

        def replaced():
            workers = workers_of(cluster, leader)
            w = next((w for w in workers if w["index"] == victim["index"]), None)
            return w is not None and w["pid"] != victim["pid"] and w["alive"]

        cluster.wait(replaced, 30, "the killed worker replaced")
        # The other worker and the new one keep answering writes.
        cluster.wait(lambda: len(acknowledged) >= before + 100, 60, "writes after the kill")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert not alive(victim["pid"])
    status = cluster.status(leader)
    assert status["leaderId"] == leader and status["active"], status
    assert status["raftTerm"] == term, "killing a worker cost the voter its leadership"
    w = next(w for w in status["httpWorkers"] if w["index"] == victim["index"])
    assert w["restarts"] == 1, status["httpWorkers"]
    # Every acknowledged registration is in the log, with its epoch, on every voter.
    for i in range(cluster.n):
        seen = brokers(cluster, i)
        lost = {b: e for b, e in acknowledged.items() if seen.get(b) != e}
        assert not lost, f"voter {i} lacks acknowledged registrations {sorted(lost)[:10]}"


def test_the_core_killed_takes_its_workers_and_the_port_with_it(tmp_path):
    c = Cluster(tmp_path, voters=1, extra=["--http-workers", str(WORKERS)])
    try:
        c.start()
        c.wait_ready()
        pids = [w["pid"] for w in workers_of(c, 0)]
        assert len(pids) == WORKERS and all(alive(p) for p in pids)
        c.kill(0)
        c.wait(lambda: not any(alive(p) for p in pids), 10, "the workers gone with their core")
        # Nobody holds the API port: a restarted voter can take it.
        with socket.create_server(("127.0.0.1", c.http[0])):
            pass
        c.start(0)
        c.wait_ready()
        assert register(c, 0, 1) > 0
    finally:
        c.close()


def test_sigterm_stops_the_workers_and_exits_0(tmp_path):
    c = Cluster(tmp_path, voters=1, extra=["--http-workers", str(WORKERS)])
    try:
        c.start()
        c.wait_ready()
        pids = [w["pid"] for w in workers_of(c, 0)]
        assert c.stop(0) == 0, c.tail(0)
        assert not any(alive(p) for p in pids)
    finally:
        c.close()


def test_a_bad_worker_count_is_refused_at_start(tmp_path):
    c = Cluster(tmp_path, voters=1, extra=["--http-workers", "many"])
    try:
        c.start()
        assert c.procs[0].wait(timeout=30) == 2
        assert "--http-workers 'many' is not a number of processes" in c.tail(0)
    finally:
        c.close()

