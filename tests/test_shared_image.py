"""One image a voter (voter/shared_image.py): the HTTP workers and the
orderer of a real voter read their partitions from the core's image file
and take each newer one while writes go on. Readers on every connection see
whole, ordered states throughout (a state an acknowledged write left, never
a mix and never older than one already seen), also while a worker is killed
mid-read and started again from the file; at the end every worker answers
the state the acknowledged writes made."""

import os
import random
import signal
import threading

import httpx
import pytest

from .cluster import Cluster
from .test_cluster import register, write
from .test_http_workers import heartbeat_until_unfenced

pytestmark = pytest.mark.slow

PARTITIONS = 600  # three chunks of 256
BROKERS = (1, 2, 3)


def topic_state(body: dict) -> dict[int, tuple]:
    return {
        p["partitionIndex"]: (tuple(sorted(p["isr"])), p["leader"], p["partitionEpoch"])
        for p in body["partitions"]
    }


def test_workers_read_the_voters_image_file_while_it_is_rewritten_and_a_worker_dies(tmp_path):
    cluster = Cluster(
        tmp_path, voters=1, extra=["--http-workers", "2", "--session-timeout-ms", "600000"]
    )
    cluster.env[0] = {"METAQUORUM_IMAGE_FILE_RECORDS": "150"}
    stop = threading.Event()
    try:
        cluster.start()
        cluster.wait_ready()
        epochs = {b: register(cluster, 0, b) for b in BROKERS}
        for b, epoch in epochs.items():
            heartbeat_until_unfenced(cluster, 0, b, epoch)
        created = write(
            cluster,
            0,
            "/v1/topics",
            {"topics": [{"name": "t", "numPartitions": PARTITIONS, "replicationFactor": 3}]},
        )
        assert created["topics"][0]["errorName"] == "NONE", created
        first = cluster.get(0, "/v1/topics/t?consistency=linearizable").json()
        topic_id = first["topicId"]
        model = {p["partitionIndex"]: p for p in first["partitions"]}

        seen_errors: list[str] = []
        torn: list[str] = []

        def reader() -> None:
            last: dict[int, int] = {}
            while not stop.is_set():
                try:
                    with httpx.Client(timeout=10) as fresh:  # a new connection: either worker
                        r = fresh.get(cluster.url(0) + "/v1/topics/t?consistency=linearizable")
                except httpx.HTTPError as e:  # the worker killed under it
                    seen_errors.append(type(e).__name__)
                    continue
                if r.status_code != 200:
                    seen_errors.append(str(r.status_code))
                    continue
                state = topic_state(r.json())
                if len(state) != PARTITIONS:
                    torn.append(f"{len(state)} partitions")
                for pid, (isr, leader, epoch) in state.items():
                    if leader not in isr or epoch < last.get(pid, 0):
                        torn.append(f"partition {pid}: isr {isr} leader {leader} epoch {epoch}")
                    last[pid] = epoch

        readers = [threading.Thread(target=reader) for _ in range(3)]
        for t in readers:
            t.start()
        rng = random.Random(7)
        killed = False
        for n in range(400):
            pid = rng.randrange(PARTITIONS)
            p = model[pid]
            leader = p["leader"]
            isr = [leader] if len(p["isr"]) > 1 else sorted(p["replicas"])
            body = write(
                cluster,
                0,
                "/v1/alter-partition?version=3",
                {
                    "brokerId": leader,
                    "brokerEpoch": epochs[leader],
                    "topics": [
                        {
                            "topicId": topic_id,
                            "partitions": [
                                {
                                    "partitionIndex": pid,
                                    "leaderEpoch": p["leaderEpoch"],
                                    "partitionEpoch": p["partitionEpoch"],
                                    "newIsrWithEpochs": [
                                        {"brokerId": b, "brokerEpoch": epochs[b]} for b in isr
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
            p.update(isr=answer["isr"], partitionEpoch=answer["partitionEpoch"])
            if n == 200 and not killed:
                victim = cluster.status(0)["httpWorkers"][0]
                os.kill(victim["pid"], signal.SIGKILL)  # while the readers read through it
                # No write was in flight; the writer's kept-alive connection may
                # have been to the killed worker: new connections from here.
                cluster.client.close()
                cluster.client = httpx.Client(timeout=10)
                killed = True
        status = {}

        def settled() -> bool:
            status.update(cluster.status(0) or {})
            workers = status.get("httpWorkers", [])
            return (
                len(workers) == 2
                and all(w["alive"] for w in workers)
                and status["imageFile"]["written"] >= 3
                and status["imageFile"]["serveRebases"] >= 2
                and status["ordererProcess"]["imageRebases"] >= 1
                and any(w["imageRebases"] >= 1 for w in workers)
            )

        cluster.wait(settled, timeout_s=60, what="the workers up again, each file taken")
        stop.set()
        for t in readers:
            t.join(timeout=30)
        assert not torn, torn[:5]
        assert status["imageFile"]["failed"] == 0 and status["imageFile"]["bytes"] > 0
        assert status["httpWorkers"][0]["restarts"] == 1
        expected = {
            pid: (tuple(sorted(p["isr"])), p["leader"], p["partitionEpoch"])
            for pid, p in model.items()
        }
        for _ in range(8):  # new connections land on either worker, the restarted one too
            with httpx.Client(timeout=10) as fresh:
                r = fresh.get(cluster.url(0) + "/v1/topics/t?consistency=linearizable")
            assert r.status_code == 200, r.text
            assert topic_state(r.json()) == expected
        log = cluster.logs[0].read_text()
        assert "could not write the image file" not in log
        assert "keeps a copy of its own" not in log  # no process fell back for good
    finally:
        stop.set()
        cluster.close()
