"""Overload driver for tests/test_overload.py and bench/overload.py.

The load is broker heartbeats that alternate ``wantFence`` per broker, so
nearly every one writes a record through Raft (a fence or an unfence) and the
ceiling measured is the controller's, not only HTTP's. The client is a minimal
HTTP/1.1 keep-alive client on asyncio streams: a Python load generator shares
the two cores with the voters, and httpx would cost as much CPU per request as
the server spends.

* ``closed_loop``: C workers, each sending its next request when the previous
  answered: the ceiling (requests/s) and the latency at it;
* ``open_loop``: requests sent at a fixed rate whatever the answers (what real
  brokers do), up to a cap of requests in flight in this client;
* ``recovery``: after the open loop stops, closed-loop windows until
  throughput and p99 are back to the baseline's.
"""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass, field

import orjson

MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]
DOCUMENTED = {200, 429, 503}  # 503: REQUEST_TIMED_OUT (outcome unknown) or no leader


class Saturated(Exception):
    """This client has no free connection (counted, never sent)."""


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


class RawClient:
    """Keep-alive HTTP/1.1 POSTs over up to ``max_connections`` connections."""

    def __init__(self, host: str, port: int, max_connections: int = 512) -> None:
        self.host, self.port, self.max = host, port, max_connections
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._open = 0

    async def post(self, path: str, body: bytes) -> Answer:
        request = (
            b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (path.encode(), self.host.encode(), len(body), body)
        )
        # A pooled connection the server closed while idle (keep-alive timeout)
        # answers EOF or a reset: send again once on a new one, as HTTP clients do.
        reused = bool(self._idle)
        answer = await self._send(request)
        if answer is None and reused:
            answer = await self._send(request, fresh=True)
        if answer is None:
            raise ConnectionResetError("the server closed the connection without answering")
        return answer

    async def _send(self, request: bytes, fresh: bool = False) -> Answer | None:
        if self._idle and not fresh:
            reader, writer = self._idle.pop()
        elif self._open < self.max:
            self._open += 1
            try:
                reader, writer = await asyncio.open_connection(self.host, self.port)
            except OSError:
                self._open -= 1
                raise
        else:
            raise Saturated()
        try:
            writer.write(request)
            try:
                status_line = await reader.readline()
            except (ConnectionResetError, BrokenPipeError):
                status_line = b""  # the same case: a closed idle connection
            if not status_line:
                self._open -= 1
                writer.close()
                return None
            status = int(status_line.split(b" ", 2)[1])
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            content = await reader.readexactly(int(headers.get("content-length", "0")))
        except BaseException:
            self._open -= 1
            writer.close()
            raise
        self._idle.append((reader, writer))
        return Answer(status, headers, content)

    def close(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()
        self._open = 0


class Heartbeats:
    """Request bodies: broker ``b`` alternately asks to be fenced and unfenced."""

    def __init__(self, epochs: dict[int, int]) -> None:
        self.bodies = {
            (b, fence): orjson.dumps(
                {
                    "brokerId": b,
                    "brokerEpoch": e,
                    "currentMetadataOffset": 1 << 50,
                    "wantFence": fence,
                }
            )  # fmt: skip
            for b, e in epochs.items()
            for fence in (False, True)
        }
        self.brokers = sorted(epochs)
        self.sent = 0

    def next(self) -> bytes:
        n = self.sent
        self.sent += 1
        b = self.brokers[n % len(self.brokers)]
        return self.bodies[(b, (n // len(self.brokers)) % 2 == 0)]


async def setup_brokers(client: RawClient, cluster_id: str, count: int) -> dict[int, int]:
    """Registers and unfences ``count`` brokers; returns their epochs."""
    epochs = {}
    for b in range(1, count + 1):
        body = {
            "brokerId": b,
            "clusterId": cluster_id,
            "incarnationId": f"{b:032x}"[:8] + "-0000-4000-8000-" + f"{b:012x}",
            "listeners": [],
            "features": MV,
        }
        answer = await client.post("/v1/brokers/register", orjson.dumps(body))
        assert answer.status == 200, answer
        epochs[b] = orjson.loads(answer.body)["brokerEpoch"]
        hb = {"brokerId": b, "brokerEpoch": epochs[b], "currentMetadataOffset": 1 << 50}
        await client.post("/v1/brokers/heartbeat", orjson.dumps(hb))
    return epochs


@dataclass
class Stats:
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)  # of 200s
    statuses: collections.Counter = field(default_factory=collections.Counter)
    errors: collections.Counter = field(default_factory=collections.Counter)  # errorName, non-200
    throttled_without_retry_after: int = 0
    unexpected: list[str] = field(default_factory=list)  # statuses outside DOCUMENTED
    not_sent: int = 0  # open loop: this client had no free connection
    failed: collections.Counter = field(default_factory=collections.Counter)  # by error type
    offered: int = 0

    @property
    def ok_per_s(self) -> float:
        return self.statuses[200] / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        values = sorted(self.latencies)
        return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")

    def record(self, answer: Answer, latency: float) -> None:
        self.statuses[answer.status] += 1
        if answer.status == 200:
            self.latencies.append(latency)
            return
        try:
            self.errors[orjson.loads(answer.body).get("errorName", "?")] += 1
        except orjson.JSONDecodeError:
            self.errors["<not json>"] += 1
        if answer.status == 429 and "retry-after" not in answer.headers:
            self.throttled_without_retry_after += 1
        if answer.status not in DOCUMENTED:
            self.unexpected.append(f"{answer.status} {answer.body[:200]!r}")


async def _one(client: RawClient, body: bytes, stats: Stats) -> None:
    start = time.perf_counter()
    try:
        answer = await client.post("/v1/brokers/heartbeat", body)
    except Saturated:
        stats.not_sent += 1
        return
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as e:
        stats.failed[type(e).__name__] += 1
        return
    stats.record(answer, time.perf_counter() - start)


async def closed_loop(client: RawClient, load: Heartbeats, concurrency: int, seconds: float):
    stats = Stats()
    deadline = time.perf_counter() + seconds

    async def worker():
        while time.perf_counter() < deadline:
            await _one(client, load.next(), stats)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    stats.seconds = time.perf_counter() - start
    stats.offered = sum(stats.statuses.values())
    return stats


async def open_loop(
    client: RawClient, load: Heartbeats, rate: float, seconds: float, progress=None
) -> Stats:
    """Sends ``rate`` requests/s for ``seconds``; then abandons what is still in
    flight (as timed-out clients would) and returns."""
    stats = Stats()
    tasks: set[asyncio.Task] = set()
    start = time.perf_counter()
    sent, next_report = 0, 5.0
    while (elapsed := time.perf_counter() - start) < seconds:
        due = int(rate * elapsed) - sent
        for _ in range(due):
            task = asyncio.create_task(_one(client, load.next(), stats))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        sent += max(due, 0)
        if progress and elapsed >= next_report:
            progress(f"open loop {elapsed:.0f}/{seconds:.0f} s: {dict(stats.statuses)}")
            next_report += 5.0
        await asyncio.sleep(0.002)
    stats.seconds = time.perf_counter() - start
    stats.offered = sent
    for task in list(tasks):
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return stats


async def recovery(
    client: RawClient,
    load: Heartbeats,
    baseline: Stats,
    concurrency: int,
    window_s: float = 0.5,
    deadline_s: float = 60.0,
) -> tuple[float | None, list[Stats]]:
    """Seconds from the end of the overload until one window's throughput is at
    least 80% of the baseline's and its p99 at most twice the baseline's (plus
    10 ms of slack); None if not within ``deadline_s``."""
    start = time.perf_counter()
    windows = []
    while time.perf_counter() - start < deadline_s:
        w = await closed_loop(client, load, concurrency, window_s)
        windows.append(w)
        if w.ok_per_s >= 0.8 * baseline.ok_per_s and w.pct(0.99) <= 2 * baseline.pct(0.99) + 0.01:
            return time.perf_counter() - start, windows
    return None, windows


def acl_bindings(principal_prefix: str, resource: str, count: int) -> list[dict]:
    """CreateAcls' creations: ``count`` READ grants on one topic, a principal each."""
    return [
        {
            "resourceType": "TOPIC",
            "resourceName": resource,
            "principal": f"User:{principal_prefix}{i}",
            "operation": "READ",
            "permissionType": "ALLOW",
        }
        for i in range(count)
    ]
