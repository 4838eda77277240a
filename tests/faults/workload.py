"""The nemesis workload: simulated brokers and an operator, through
brokers/client.py, recording every write with its outcome.

* Brokers register (a new incarnation each life), heartbeat until unfenced,
  change the ISRs of partitions they lead (AlterPartition v3 with broker
  epochs), now and then shut down in a controlled way or "crash" (stop
  heartbeating, come back as a new incarnation).
* An operator creates topics.
* A follower reads the committed log as it grows (GET /v1/log from any voter):
  the reference log the checker replays, and the offset brokers report as
  ``currentMetadataOffset``.

Outcomes: ``ok`` (HTTP 200, errorCode 0: acknowledged), ``rejected`` (a protocol
error or a 4xx: the controller decided, nothing of it commits), ``unknown``
(timed out, answer lost, or no controller answered within the client's
attempts: it may or may not commit). An unknown write is retried as the same
request (same incarnation, same topic name, same partition epoch), as a real
broker would; the checker verifies none is applied twice.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from brokers.client import ClientError, MetaquorumClient, OutcomeUnknown, RequestRejected

MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]


@dataclass
class Op:
    id: int
    kind: str  # register, heartbeat, shutdown, alter_partition, create_topic
    broker: int | None
    start: float  # seconds since the workload began
    end: float = 0.0
    outcome: str = "pending"  # ok, rejected, unknown
    request: dict[str, Any] = field(default_factory=dict)
    response: dict[str, Any] | None = None
    error: str | None = None
    retry_of: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Workload:
    def __init__(
        self,
        urls: list[str],
        cluster_id: str,
        seed: int,
        brokers: int = 5,
        topic_interval_s: tuple[float, float] = (1.5, 3.0),
    ) -> None:
        self.urls = urls
        self.cluster_id = cluster_id
        self.rng = random.Random(seed)
        self.broker_ids = list(range(1, brokers + 1))
        self.topic_interval_s = topic_interval_s
        self.tag = f"{self.rng.randrange(16**4):04x}"
        self.ops: list[Op] = []
        self.records: list[dict] = []  # the reference log, offset = index
        self.log_sources: dict[int, int] = {}  # voter index -> records read from it
        self.topics: dict[str, str] = {}  # name -> topic id, as acknowledged or read
        self.stopping = asyncio.Event()
        self.t0 = time.monotonic()
        self._http: list[httpx.AsyncClient] = []

    # ------------------------------------------------------------ plumbing

    def now(self) -> float:
        return time.monotonic() - self.t0

    def client(self, timeout_s: float = 5.0) -> MetaquorumClient:
        http = httpx.AsyncClient(
            timeout=timeout_s,
            trust_env=False,
            limits=httpx.Limits(max_connections=20, max_keepalive_connections=10),
        )
        self._http.append(http)
        # Seeds in a per-client order, so brokers spread their first attempts.
        seeds = self.urls[:]
        self.rng.shuffle(seeds)
        return MetaquorumClient(
            seeds, http=http, max_attempts=6, rng=random.Random(self.rng.random())
        )

    async def call(self, kind: str, broker: int | None, request: dict, coro, retry_of=None) -> Op:
        """Runs one write and records it with its outcome."""
        op = Op(len(self.ops), kind, broker, self.now(), request=request, retry_of=retry_of)
        self.ops.append(op)
        try:
            answer = await coro
        except OutcomeUnknown as e:
            op.outcome, op.error = "unknown", str(e)
        except RequestRejected as e:
            op.outcome, op.error, op.response = "rejected", str(e), e.body
        except ClientError as e:
            # Gave up after retries (503s, redirects, refused connections): an
            # earlier attempt may have reached a leader that commits it later.
            op.outcome, op.error = "unknown", str(e)
        except httpx.HTTPError as e:
            op.outcome, op.error = "unknown", repr(e)
        else:
            op.response = answer.body
            op.outcome = "ok" if answer.ok else "rejected"
        op.end = self.now()
        return op

    @property
    def metadata_offset(self) -> int:
        return len(self.records) - 1

    async def pause(self, low: float, high: float) -> bool:
        """Sleeps; False when the workload is stopping."""
        try:
            await asyncio.wait_for(self.stopping.wait(), self.rng.uniform(low, high))
        except TimeoutError:
            return True
        return False

    # ------------------------------------------------------------ run

    async def run(self, until: asyncio.Event) -> None:
        """Runs brokers, operator and log follower until ``until`` is set."""
        follower = asyncio.create_task(self.follow_log())
        actors = [asyncio.create_task(self.broker_life(b)) for b in self.broker_ids]
        actors.append(asyncio.create_task(self.operator()))
        try:
            await until.wait()
        finally:
            self.stopping.set()
            await asyncio.gather(*actors, return_exceptions=False)
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)

    async def close(self) -> None:
        for http in self._http:
            await http.aclose()

    # ------------------------------------------------------------ log follower

    async def follow_log(self, stop_at: int | None = None) -> None:
        """Appends the committed log to ``self.records``, from whichever voter
        answers; checks offsets are dense. Runs until cancelled or ``stop_at``."""
        http = httpx.AsyncClient(timeout=10.0, trust_env=False)
        self._http.append(http)
        source = 0
        pages = 0
        while stop_at is None or len(self.records) <= stop_at:
            url = self.urls[source % len(self.urls)]
            try:
                r = await http.get(
                    url + "/v1/log",
                    params={"fromOffset": len(self.records), "maxRecords": 1000, "waitMs": 1000},
                )
            except httpx.HTTPError:
                source += 1
                await asyncio.sleep(0.1)
                continue
            if r.status_code != 200:  # 410 (it loaded a snapshot), 503 (replaying)
                source += 1
                await asyncio.sleep(0.1)
                continue
            page = r.json()["records"]
            if not page:
                # Nothing new here: maybe nothing is committed, maybe this node
                # is a joiner that stopped catching up (it answers 200, empty,
                # after each wait). Ask the next one: sitting on it, the
                # follower fell behind every voter's compaction for good.
                source += 1
            for rec in page:
                if rec["offset"] != len(self.records):
                    raise AssertionError(
                        f"log from {url}: offset {rec['offset']} where {len(self.records)} was due"
                    )
                self.records.append(rec)
                self.log_sources[source % len(self.urls)] = (
                    self.log_sources.get(source % len(self.urls), 0) + 1
                )
            pages += 1
            if pages % 20 == 0:
                source += 1  # read from every voter over the run

    # ------------------------------------------------------------ operator

    async def operator(self) -> None:
        client = self.client()
        seq = 0
        while await self.pause(*self.topic_interval_s):
            seq += 1
            name = f"nem-{self.tag}-{seq}"
            request = {"name": name, "numPartitions": 2, "replicationFactor": 3}
            op = await self.call("create_topic", None, request, client.create_topics([request]))
            tries = 0
            while op.outcome == "unknown" and tries < 3 and not self.stopping.is_set():
                tries += 1
                op = await self.call(
                    "create_topic", None, request, client.create_topics([request]), op.id
                )
            if op.outcome == "ok":
                topic = op.response["topics"][0]
                if topic["errorCode"] == 0:
                    self.topics[name] = topic["topicId"]
                else:
                    op.outcome = "rejected"  # per-topic error under a NONE top level
            if seq % 10 == 0:
                await self.refresh_topics(client)

    async def refresh_topics(self, client: MetaquorumClient) -> None:
        try:
            answer = await client.topics()
        except (ClientError, httpx.HTTPError):
            return
        for t in answer.body.get("topics") or answer.body.get("items") or []:
            self.topics.setdefault(t["name"], t["topicId"])

    # ------------------------------------------------------------ brokers

    async def broker_life(self, b: int) -> None:
        client = self.client()
        while not self.stopping.is_set():
            epoch = await self.register(client, b, str(uuid.uuid4()))
            if epoch is None:
                return
            ending = await self.live(client, b, epoch)
            if ending == "crash" and not await self.pause(1.0, 12.0):
                return

    async def register(self, client: MetaquorumClient, b: int, incarnation: str) -> int | None:
        request = {
            "brokerId": b,
            "clusterId": self.cluster_id,
            "incarnationId": incarnation,
            "listeners": [
                {"name": "PLAINTEXT", "host": f"broker-{b}", "port": 9092, "securityProtocol": 0}
            ],
            "features": MV,
        }
        retry_of = None
        while not self.stopping.is_set():
            op = await self.call(
                "register",
                b,
                request,
                client.register(
                    b, self.cluster_id, incarnation, request["listeners"], request["features"]
                ),
                retry_of,
            )
            if op.outcome == "ok":
                return op.response["brokerEpoch"]
            # Unknown: the same incarnation again (a retry keeps the epoch).
            # DUPLICATE_BROKER_REGISTRATION: the last life's session is still valid.
            retry_of = op.id if op.outcome == "unknown" else retry_of
            if not await self.pause(0.3, 1.0):
                return None
        return None

    async def live(self, client: MetaquorumClient, b: int, epoch: int) -> str:
        """Heartbeats and acts until this life ends: crash, shutdown or stale."""
        fenced = True
        while await self.pause(0.4, 0.9):
            op = await self.heartbeat(client, b, epoch)
            if op.outcome == "ok":
                fenced = op.response.get("isFenced", True)
            elif op.response and op.response.get("errorName") == "STALE_BROKER_EPOCH":
                return "stale"
            if fenced:
                continue
            roll = self.rng.random()
            if roll < 0.01:
                return "crash"
            if roll < 0.02:
                await self.controlled_shutdown(client, b, epoch)
                return "shutdown"
            if roll < 0.30:
                await self.alter_partition(client, b, epoch)
        return "stopped"

    async def heartbeat(self, client, b: int, epoch: int, shut_down: bool = False) -> Op:
        offset = self.metadata_offset
        request = {
            "brokerId": b,
            "brokerEpoch": epoch,
            "currentMetadataOffset": offset,
            "wantFence": False,
            "wantShutDown": shut_down,
        }
        return await self.call(
            "shutdown" if shut_down else "heartbeat",
            b,
            request,
            client.heartbeat(b, epoch, offset, want_shut_down=shut_down),
        )

    async def controlled_shutdown(self, client, b: int, epoch: int) -> None:
        for _ in range(40):
            op = await self.heartbeat(client, b, epoch, shut_down=True)
            if op.outcome == "ok" and op.response.get("shouldShutDown"):
                return
            if op.response and op.response.get("errorName") == "STALE_BROKER_EPOCH":
                return
            if not await self.pause(0.3, 0.6):
                return

    async def alter_partition(self, client: MetaquorumClient, b: int, epoch: int) -> None:
        if not self.topics:
            return
        name = self.rng.choice(sorted(self.topics))
        try:
            topic = (await client.topic(name, linearizable=True)).body
            brokers = (await client.brokers()).body
        except (ClientError, httpx.HTTPError):
            return
        parts = [p for p in topic.get("partitions") or [] if p.get("leader") == b]
        if not parts:
            return
        part = self.rng.choice(parts)
        epochs = {x["brokerId"]: x["brokerEpoch"] for x in brokers.get("brokers") or []}
        isr = list(part["isr"])
        outside = [r for r in part["replicas"] if r not in isr]
        if len(isr) > 1 and (not outside or self.rng.random() < 0.5):
            isr.remove(self.rng.choice([r for r in isr if r != b]))
        elif outside:
            isr.append(self.rng.choice(outside))
        else:
            return
        topics = [
            {
                "topicId": topic["topicId"],
                "partitions": [
                    {
                        "partitionIndex": part["partitionIndex"],
                        "leaderEpoch": part["leaderEpoch"],
                        "newIsrWithEpochs": [
                            {"brokerId": r, "brokerEpoch": epochs.get(r, -1)} for r in isr
                        ],
                        "leaderRecoveryState": 0,
                        "partitionEpoch": part["partitionEpoch"],
                    }
                ],
            }
        ]
        request = {"brokerId": b, "brokerEpoch": epoch, "topics": topics}
        op = await self.call(
            "alter_partition", b, request, client.alter_partition(b, epoch, topics)
        )
        if op.outcome == "unknown" and not self.stopping.is_set():
            op = await self.call(
                "alter_partition", b, request, client.alter_partition(b, epoch, topics), op.id
            )
        if op.outcome == "ok" and any(
            p["errorCode"] != 0 for t in op.response["topics"] for p in t["partitions"]
        ):
            op.outcome = "rejected"  # a partition-level error: not acknowledged
