"""HTTP API benchmark against a 3-voter loopback cluster (figures, not asserts).

AlterPartition v3 with C concurrent clients (1, 16, 64) and requests of 1 and
of 100 partitions: requests/s, partition changes/s, latency p50/p99; then
heartbeats/s. Every request is a real ISR change (shrink, then expand back),
sent by the partition's leader with its current epochs.

    python bench/api.py [--quick] [--json] [--seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster  # noqa: E402 - after the path is set

BROKERS = 6
MV = [{"name": "metadata.version", "minSupportedVersion": 1, "maxSupportedVersion": 2}]


def progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def setup(url: str, cluster_id: str, partitions: int) -> tuple[dict, str, list]:
    async with httpx.AsyncClient(base_url=url, timeout=60, follow_redirects=True) as c:
        epochs = {}
        for b in range(1, BROKERS + 1):
            r = await c.post(
                "/v1/brokers/register",
                json={
                    "brokerId": b,
                    "clusterId": cluster_id,
                    "incarnationId": f"AAAAAAAAAAAAAAAAAAAA{'ABCDEFGH'[b]}Q",
                    "listeners": [],
                    "features": MV,
                },
            )
            epochs[b] = r.json()["brokerEpoch"]
        for b, e in epochs.items():
            await c.post(
                "/v1/brokers/heartbeat",
                json={"brokerId": b, "brokerEpoch": e, "currentMetadataOffset": 10**12},
            )
        r = await c.post(
            "/v1/topics",
            json={
                "topics": [{"name": "bench", "numPartitions": partitions, "replicationFactor": 3}]
            },
        )
        assert r.json()["topics"][0]["errorName"] == "NONE", r.text
        topic = (await c.get("/v1/topics/bench", params={"consistency": "linearizable"})).json()
        return epochs, topic["topicId"], topic["partitions"]


async def alter_load(url, epochs, topic_id, parts, clients, per_request, seconds) -> dict:
    """Each client owns disjoint partitions of one leader and flips their ISR."""
    by_leader: dict[int, list] = {}
    for p in parts:
        by_leader.setdefault(p["leader"], []).append(
            {
                "pid": p["partitionIndex"],
                "le": p["leaderEpoch"],
                "pe": p["partitionEpoch"],
                "isr": list(p["isr"]),
                "shrunk": False,
            }
        )
    leaders = sorted(by_leader)
    owned = []
    for i in range(clients):
        leader = leaders[i % len(leaders)]
        pool = by_leader[leader]
        share = len(pool) // (
            (clients + len(leaders) - 1 - (i % len(leaders))) // len(leaders) or 1
        )
        take, by_leader[leader] = pool[:share], pool[share:]
        owned.append((leader, take))
    latencies: list[float] = []
    changes = 0
    requests = 0
    errors = 0
    stop = time.monotonic() + seconds

    async def client(leader: int, mine: list) -> None:
        nonlocal changes, requests, errors
        async with httpx.AsyncClient(base_url=url, timeout=30) as c:
            i = 0
            while time.monotonic() < stop and mine:
                batch = [mine[(i + j) % len(mine)] for j in range(min(per_request, len(mine)))]
                i += per_request
                entries = []
                for p in batch:
                    isr = p["isr"][:-1] if not p["shrunk"] else p["isr"]
                    entries.append(
                        {
                            "partitionIndex": p["pid"],
                            "leaderEpoch": p["le"],
                            "partitionEpoch": p["pe"],
                            "newIsrWithEpochs": [
                                {"brokerId": b, "brokerEpoch": epochs[b]} for b in isr
                            ],
                        }
                    )
                body = {
                    "brokerId": leader,
                    "brokerEpoch": epochs[leader],
                    "topics": [{"topicId": topic_id, "partitions": entries}],
                }
                t = time.perf_counter()
                r = await c.post("/v1/alter-partition", json=body)
                latencies.append(time.perf_counter() - t)
                requests += 1
                if r.status_code != 200:
                    errors += 1
                    continue
                results = {x["partitionIndex"]: x for x in r.json()["topics"][0]["partitions"]}
                for p in batch:
                    res = results[p["pid"]]
                    if res["errorName"] == "NONE":
                        p["pe"] = res["partitionEpoch"]
                        p["le"] = res["leaderEpoch"]
                        p["shrunk"] = not p["shrunk"]
                        changes += 1
                    else:
                        errors += 1

    start = time.monotonic()
    await asyncio.gather(*(client(leader, mine) for leader, mine in owned))
    elapsed = time.monotonic() - start
    return {
        "clients": clients,
        "partitions_per_request": per_request,
        "requests_per_s": requests / elapsed,
        "changes_per_s": changes / elapsed,
        "p50_ms": pct(latencies, 0.5) * 1000,
        "p99_ms": pct(latencies, 0.99) * 1000,
        "errors": errors,
    }


async def heartbeat_load(url, epochs, clients, seconds) -> dict:
    stop = time.monotonic() + seconds
    count = 0
    latencies: list[float] = []

    async def client(i: int) -> None:
        nonlocal count
        b = 1 + i % BROKERS
        async with httpx.AsyncClient(base_url=url, timeout=30) as c:
            while time.monotonic() < stop:
                t = time.perf_counter()
                r = await c.post(
                    "/v1/brokers/heartbeat",
                    json={"brokerId": b, "brokerEpoch": epochs[b], "currentMetadataOffset": 10**12},
                )
                latencies.append(time.perf_counter() - t)
                if r.status_code == 200:
                    count += 1

    start = time.monotonic()
    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.monotonic() - start
    return {
        "clients": clients,
        "heartbeats_per_s": count / elapsed,
        "p50_ms": pct(latencies, 0.5) * 1000,
    }


async def run(seconds: float, quick: bool) -> dict:
    root = Path(tempfile.mkdtemp(prefix="mq-api-bench-"))
    cluster = Cluster(root, fsync="always")
    try:
        cluster.start()
        cluster.wait_ready()
        leader = cluster.leader()
        url = cluster.url(leader)
        concurrency = (1, 16) if quick else (1, 16, 64)
        partitions = max(concurrency) * 100 * 2
        progress(f"setup: {BROKERS} brokers, topic 'bench' with {partitions} partitions (RF 3)")
        epochs, topic_id, parts = await setup(url, cluster.cluster_id, partitions)
        figures = {"alter_partition": [], "heartbeats": []}
        for per_request in (1, 100):
            for clients in concurrency:
                progress(
                    f"AlterPartition: {clients} client(s), {per_request} partition(s)/request, {seconds:.0f} s"
                )
                # Fresh epochs for every run: re-read the topic.
                async with httpx.AsyncClient(base_url=url, timeout=60) as c:
                    parts = (
                        await c.get("/v1/topics/bench", params={"consistency": "linearizable"})
                    ).json()["partitions"]
                figures["alter_partition"].append(
                    await alter_load(url, epochs, topic_id, parts, clients, per_request, seconds)
                )
        for clients in concurrency:
            progress(f"heartbeats: {clients} client(s), {seconds:.0f} s")
            figures["heartbeats"].append(await heartbeat_load(url, epochs, clients, seconds))
        return figures
    finally:
        cluster.close()
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args()
    seconds = args.seconds or (2.0 if args.quick else 5.0)
    figures = asyncio.run(run(seconds, args.quick))
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print("-- metaquorum HTTP API bench: 3 voters on loopback, fsync always, AlterPartition v3")
    for f in figures["alter_partition"]:
        print(
            f"  {f['clients']:>3} client(s) x {f['partitions_per_request']:>3} partition(s)/request: "
            f"{f['requests_per_s']:>8,.0f} requests/s {f['changes_per_s']:>9,.0f} changes/s  "
            f"p50 {f['p50_ms']:6.1f} ms  p99 {f['p99_ms']:6.1f} ms  errors {f['errors']}"
        )
    for f in figures["heartbeats"]:
        print(
            f"  heartbeats, {f['clients']:>3} client(s): {f['heartbeats_per_s']:>8,.0f}/s  p50 {f['p50_ms']:.1f} ms"
        )
    print(
        "  targets: >= 3,000 single-partition requests/s; >= 20,000 changes/s with 100-partition requests at p99 <= 50 ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
