"""Broker heartbeats while an admin floods the controller with large writes
(figures, not asserts; tests/test_admin_floods.py holds a looser bound).

A 3-voter loopback cluster (``--fsync always`` by default), ``--brokers``
registered brokers each heartbeating every ``--interval-ms`` (a closed loop
per broker: send, wait for the answer, sleep), and, with 0, 10,000 and
100,000 ACLs stored in turn, each kind of large admin write ``--rounds``
times, one after another, while the heartbeats go on:

* ``acls-create``: a CreateAcls of 10,000 new bindings (the record cap);
* ``acls-delete``: a DeleteAcls whose one filter matches those 10,000;
* ``acls-describe``: a DescribeAcls (a read) of one principal's bindings;
* ``configs``: an IncrementalAlterConfigs of 100 broker resources x 64
  configs (6,400 records, the request's limits);
* ``quotas``: an AlterClientQuotas of 2,000 entities x 5 keys (10,000
  records);
* ``topics``: a CreateTopics of one topic of 9,999 partitions (10,000
  records with its TopicRecord), then its DeleteTopics;
* ``reassign``: an AlterPartitionReassignments of the 9,999 partitions of
  a topic made (and read) before the measure, each to the reverse of its
  replicas, then back.

For each, the heartbeats answered while the writes ran: how many, p50, p99
and the slowest, beside the same figures with no admin write (``idle``).
Between the ACL counts, CreateAcls of 10,000 bindings each bring the store to
the next count (not measured).

    python bench/admin_floods.py [--present 0,10000,100000] [--kinds acls-create,...]
        [--rounds 3] [--brokers 30] [--interval-ms 50] [--fsync always|never] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster  # noqa: E402 - after the path is set
from tests.overload import RawClient, acl_bindings, setup_brokers  # noqa: E402

KINDS = (
    "acls-create",
    "acls-delete",
    "acls-describe",
    "configs",
    "quotas",
    "topics",
    "reassign",
)


def progress(text: str) -> None:
    print(f"[admin-floods] {text}", file=sys.stderr, flush=True)


class Heartbeats:
    """Each broker in a closed loop; every answer's (sent at, latency, status)."""

    def __init__(self, client: RawClient, epochs: dict[int, int], interval_s: float) -> None:
        self.client, self.epochs, self.interval_s = client, epochs, interval_s
        self.samples: list[tuple[float, float, int]] = []
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        self._tasks = [asyncio.ensure_future(self._broker(b)) for b in self.epochs]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def _broker(self, broker: int) -> None:
        body = orjson.dumps(
            {
                "brokerId": broker,
                "brokerEpoch": self.epochs[broker],
                "currentMetadataOffset": 1 << 50,
            }
        )
        await asyncio.sleep(self.interval_s * broker / len(self.epochs))  # spread
        while not self._stop.is_set():
            sent = time.monotonic()
            answer = await self.client.post("/v1/brokers/heartbeat", body)
            self.samples.append((sent, time.monotonic() - sent, answer.status))
            await asyncio.sleep(self.interval_s)

    def window(self, start: float, end: float) -> dict:
        """The heartbeats sent in [start, end)."""
        inside = [(lat, st) for sent, lat, st in self.samples if start <= sent < end]
        lat = sorted(lat for lat, st in inside if st == 200)

        def pct(q: float) -> float | None:
            return round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 1) if lat else None

        return {
            "heartbeats": len(inside),
            "not_200": sum(1 for _, st in inside if st != 200),
            "p50_ms": pct(0.5),
            "p99_ms": pct(0.99),
            "max_ms": round(lat[-1] * 1000, 1) if lat else None,
        }


class Admin:
    """The admin writes, each a function of its round."""

    def __init__(self, http: httpx.AsyncClient, brokers: int) -> None:
        self.http, self.brokers = http, brokers
        self.reassigned: list[dict] = []

    async def _post(self, path: str, body: dict) -> dict:
        answer = await self.http.post(path, json=body)
        if answer.status_code != 200:
            raise RuntimeError(f"{path}: {answer.status_code} {answer.text[:300]}")
        return answer.json()

    async def create_acls(self, principal_prefix: str, resource: str, count: int) -> None:
        answer = await self._post(
            "/v1/acls", {"creations": acl_bindings(principal_prefix, resource, count)}
        )
        bad = [r for r in answer["results"] if r["errorCode"]]
        if bad:
            raise RuntimeError(f"CreateAcls: {len(bad)} failed, first {bad[0]}")

    async def prepare(self, kind: str) -> None:
        """What a kind needs before it is measured: a reassignment's topic, and
        its partitions in both orders (a read of 9,999 partitions is not an
        admin write)."""
        if kind != "reassign" or self.reassigned:
            return
        await self._post(
            "/v1/topics",
            {"topics": [{"name": "reassigned", "numPartitions": 9_999, "replicationFactor": 3}]},
        )
        topic = (await self.http.get("/v1/topics/reassigned")).json()
        flipped = {
            **topic,
            "partitions": [
                {**p, "replicas": list(reversed(p["replicas"]))} for p in topic["partitions"]
            ],
        }
        self.reassigned = [topic, flipped]

    async def run(self, kind: str, round_no: int) -> None:
        if kind == "acls-create":
            await self.create_acls(f"flood{round_no}-", f"flood-{round_no}", 10_000)
        elif kind == "acls-delete":
            answer = await self._post(
                "/v1/acls/delete",
                {
                    "filters": [
                        {"resourceTypeFilter": "TOPIC", "resourceNameFilter": f"flood-{round_no}"}
                    ]
                },
            )
            matched = len(answer["filterResults"][0]["matchingAcls"])
            if matched != 10_000:
                raise RuntimeError(f"DeleteAcls matched {matched}, not 10,000")
        elif kind == "acls-describe":
            answer = await self.http.get("/v1/acls", params={"principal": f"User:base{round_no}"})
            answer.raise_for_status()
        elif kind == "configs":
            await self._post(
                "/v1/configs",
                {
                    "resources": [
                        {
                            "resourceType": 4,
                            "resourceName": str(1000 + r),
                            "configs": [
                                {
                                    "name": f"custom.flood.{c}",
                                    "configOperation": 0,
                                    "value": f"{round_no}",
                                }
                                for c in range(64)
                            ],
                        }  # fmt: skip
                        for r in range(100)
                    ]
                },
            )
        elif kind == "quotas":
            await self._post(
                "/v1/client-quotas",
                {
                    "entries": [
                        {
                            "entity": [{"entityType": "user", "entityName": f"u{e}"}],
                            "ops": [
                                {"key": key, "value": 1000.0 + round_no, "remove": False}
                                for key in (
                                    "producer_byte_rate",
                                    "consumer_byte_rate",
                                    "request_percentage",
                                    "controller_mutation_rate",
                                    "connection_creation_rate",
                                )
                            ],  # fmt: skip
                        }
                        for e in range(2000)
                    ]
                },
            )
        elif kind == "topics":
            await self._post(
                "/v1/topics",
                {"topics": [{"name": f"flood-{round_no}", "numPartitions": 9_999,
                             "replicationFactor": 3}]},
            )  # fmt: skip
            answer = await self.http.delete(f"/v1/topics/flood-{round_no}")
            answer.raise_for_status()
        elif kind == "reassign":
            topic = self.reassigned[round_no % 2]
            await self._post(
                "/v1/reassignments",
                {
                    "topics": [
                        {
                            "name": "reassigned",
                            "partitions": [
                                {
                                    "partitionIndex": p["partitionIndex"],
                                    "replicas": list(reversed(p["replicas"])),
                                }
                                for p in topic["partitions"]
                            ],
                        }  # fmt: skip
                    ]
                },
            )
        else:
            raise ValueError(kind)


async def measure(cluster: Cluster, args, report=progress) -> dict:
    leader = cluster.leader()
    port = cluster.http[leader]
    client = RawClient("127.0.0.1", port, max_connections=args.brokers + 8)
    http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120)
    figures: dict = {}
    try:
        epochs = await setup_brokers(client, cluster.cluster_id, args.brokers)
        admin = Admin(http, args.brokers)
        beats = Heartbeats(client, epochs, args.interval_ms / 1000)
        beats.start()
        stored = 0
        for present in args.present:
            while stored < present:  # not measured
                batch = min(10_000, present - stored)
                await admin.create_acls(f"base{stored}-", f"base-{stored // 10_000}", batch)
                stored += batch
            report(f"{stored} ACLs stored")
            start = time.monotonic()
            await asyncio.sleep(3.0)
            row = {"idle": beats.window(start, time.monotonic())}
            report(f"  idle: {row['idle']}")
            for kind in args.kinds:
                await admin.prepare(kind)
                start = time.monotonic()
                took = []
                for round_no in range(args.rounds):
                    t0 = time.monotonic()
                    await admin.run(kind, round_no)
                    took.append(round(time.monotonic() - t0, 3))
                row[kind] = {**beats.window(start, time.monotonic()), "write_s": took}
                report(f"  {kind}: {row[kind]}")
            figures[str(present)] = row
        await beats.stop()
    finally:
        client.close()
        await http.aclose()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--present", default="0,10000,100000", help="ACL counts, ascending")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=30)
    parser.add_argument("--interval-ms", type=int, default=50)
    parser.add_argument("--fsync", choices=("always", "never"), default="always")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.present = sorted(int(p) for p in args.present.split(","))
    args.kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(args.kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown kinds {sorted(unknown)}; choose from {', '.join(KINDS)}")
    with tempfile.TemporaryDirectory(prefix="admin-floods-") as root:
        cluster = Cluster(Path(root), fsync=args.fsync)
        try:
            cluster.start()
            cluster.wait_ready()
            figures = asyncio.run(measure(cluster, args))
        finally:
            cluster.close()
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"heartbeats of {args.brokers} brokers every {args.interval_ms} ms, p50/p99/max ms")
    for present, row in figures.items():
        print(f"{int(present):>7,} ACLs stored")
        for kind, f in row.items():
            took = (
                f" (writes {', '.join(f'{t:.2f}' for t in f['write_s'])} s)"
                if "write_s" in f
                else ""
            )
            print(
                f"  {kind:<14} {f['heartbeats']:>5} beats  {f['p50_ms']}/{f['p99_ms']}/"
                f"{f['max_ms']}  not 200: {f['not_200']}{took}"
            )


if __name__ == "__main__":
    main()
