"""Large admin writes hold no broker's heartbeat for long (issue 40, item 4),
on a real `metaquorum serve` voter: brokers heartbeat in closed loops while
10,000-binding CreateAcls and a DeleteAcls matching 10,000 run with 20,000
ACLs stored. Before decisions 139 one such CreateAcls held every heartbeat
1-7 s; the bound here is loose (a loaded CI machine), the figures are
bench/admin_floods.py's."""

from __future__ import annotations

import asyncio
import time

import httpx
import orjson
import pytest

from .cluster import Cluster
from .overload import RawClient, acl_bindings, setup_brokers

pytestmark = pytest.mark.slow

BOUND_S = 2.5  # the slowest heartbeat; one CreateAcls alone held them 7 s before


async def flood(cluster: Cluster) -> tuple[list[tuple[float, int]], list[float]]:
    port = cluster.http[cluster.leader()]
    client = RawClient("127.0.0.1", port, max_connections=16)
    http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120)
    answers: list[tuple[float, int]] = []
    stop = asyncio.Event()
    try:
        epochs = await setup_brokers(client, cluster.cluster_id, 8)

        async def beat(broker: int) -> None:
            body = orjson.dumps(
                {
                    "brokerId": broker,
                    "brokerEpoch": epochs[broker],
                    "currentMetadataOffset": 1 << 50,
                }
            )
            while not stop.is_set():
                sent = time.monotonic()
                answer = await client.post("/v1/brokers/heartbeat", body)
                answers.append((time.monotonic() - sent, answer.status))
                await asyncio.sleep(0.05)

        for start in (0, 10_000):  # stored before the heartbeats start
            r = await http.post(
                "/v1/acls", json={"creations": acl_bindings(f"b{start}-", "b", 10_000)}
            )
            assert r.status_code == 200
        beats = [asyncio.ensure_future(beat(b)) for b in epochs]
        writes = []
        for round_no in range(2):
            t0 = time.monotonic()
            r = await http.post(
                "/v1/acls",
                json={"creations": acl_bindings(f"f{round_no}-", f"f{round_no}", 10_000)},
            )
            assert r.status_code == 200 and not any(x["errorCode"] for x in r.json()["results"])
            r = await http.post(
                "/v1/acls/delete",
                json={
                    "filters": [
                        {"resourceTypeFilter": "TOPIC", "resourceNameFilter": f"f{round_no}"}
                    ]
                },
            )
            assert len(r.json()["filterResults"][0]["matchingAcls"]) == 10_000
            writes.append(time.monotonic() - t0)
        stop.set()
        await asyncio.gather(*beats)
    finally:
        stop.set()
        client.close()
        await http.aclose()
    return answers, writes


def test_heartbeats_are_answered_while_large_acl_writes_run(tmp_path) -> None:
    cluster = Cluster(tmp_path, voters=1)
    try:
        cluster.start()
        cluster.wait_ready()
        answers, writes = asyncio.run(flood(cluster))
    finally:
        cluster.close()
    assert answers and all(status == 200 for _, status in answers)
    slowest = max(latency for latency, _ in answers)
    assert slowest < BOUND_S, (
        f"a heartbeat waited {slowest:.2f} s during the ACL writes ({len(answers)} heartbeats; "
        f"the writes took {', '.join(f'{w:.2f}' for w in writes)} s)"
    )
