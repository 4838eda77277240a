"""A StatefulSet rolling restart of the rendered pods, under a steady writer.

The writer registers a new broker per write through ``brokers/client.py``
(as a broker would: seeds = the voters, 307s followed to the leader) and
records every acknowledged write with its time. A restart goes the way the
StatefulSet controller and the kubelet do it: highest ordinal first, preStop,
SIGTERM, wait for exit, start the pod again, wait until its readiness probe
passes, then the next. The write-unavailability window of a restart is the
longest gap between two consecutive acknowledgements that overlaps it.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass, field

from brokers.client import ClientError, MetaquorumClient, OutcomeUnknown
from brokers.tls import ClientTls

from .k8s_pods import LoopbackStatefulSet

MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]


class EagerClient(MetaquorumClient):
    """Retries at once instead of waiting the server's Retry-After: what it
    sees is how long the service itself could not take a write."""

    def _delay(self, attempt: int, retry_after: str | None, body: dict | None = None) -> float:
        return super()._delay(attempt, None, None)


@dataclass
class Writer:
    seeds: list[str]
    token: str
    cluster_id: str
    eager: bool = False  # ignore Retry-After (see EagerClient)
    first_id: int = 1000
    tls: ClientTls | None = None  # for https seeds (LoopbackStatefulSet.client_tls)
    acked: list[tuple[int, float]] = field(default_factory=list)  # (broker id, monotonic ack)
    unknown: list[int] = field(default_factory=list)  # outcome unknown: may or may not commit
    failed: list[tuple[int, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Writer:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    async def _run(self) -> None:
        cls = EagerClient if self.eager else MetaquorumClient
        async with cls(
            self.seeds,
            token=self.token,
            timeout_s=5.0,
            max_attempts=1000 if self.eager else 200,
            backoff_s=0.01 if self.eager else 0.05,
            max_backoff_s=0.05 if self.eager else 0.2,
            tls=self.tls,
        ) as client:
            broker_id = self.first_id
            while not self._stop.is_set():
                broker_id += 1
                listeners = [
                    {
                        "name": "PLAINTEXT",
                        "host": f"b{broker_id}",
                        "port": 9092,
                        "securityProtocol": 0,
                    }
                ]
                try:
                    reg = await client.register(
                        broker_id, self.cluster_id, str(uuid.uuid4()), listeners, MV
                    )
                except OutcomeUnknown:
                    self.unknown.append(broker_id)
                    continue
                except ClientError as e:
                    self.failed.append((broker_id, str(e)))
                    continue
                if reg.ok:
                    self.acked.append((broker_id, time.monotonic()))
                else:
                    self.failed.append((broker_id, f"{reg.error_name}: {reg.error_message}"))
                await asyncio.sleep(0.005)

    def window(self, start: float, end: float) -> float:
        """The longest gap between consecutive acks that overlaps [start, end]."""
        times = [t for _, t in self.acked]
        worst = 0.0
        for a, b in zip(times, times[1:], strict=False):
            if b >= start and a <= end:
                worst = max(worst, b - a)
        return worst


def leader_of(pods: LoopbackStatefulSet, token: str) -> int | None:
    for pod in pods.pods:
        s = pods.status(pod.ordinal, token)
        if s and s.get("leaderId") == pod.ordinal and s.get("controllerEpoch", 0) > 0:
            return pod.ordinal
    return None


def rolling_restart(
    pods: LoopbackStatefulSet,
    writer: Writer,
    token: str,
    ready_timeout_s: float = 120.0,
    prestop: bool = True,
    eager: Writer | None = None,
) -> list[dict]:
    """Restarts every pod, highest ordinal first; one result per restart."""
    results = []
    for ordinal in reversed(range(pods.replicas)):
        leader_before = _leader(pods, token)
        term_before = _term(pods, token, leader_before)
        t0 = time.monotonic()
        stop = pods.terminate(ordinal, prestop=prestop)
        t_down = time.monotonic()
        pods.start(ordinal)
        name = pods.pods[ordinal].name
        pods.wait(lambda o=ordinal: pods.ready(o), ready_timeout_s, f"{name} ready")
        t_ready = time.monotonic()
        # Let the writer show it is through (an ack after the pod is ready).
        acks_then = len(writer.acked)
        pods.wait(lambda n=acks_then: len(writer.acked) > n + 2, 60, "writes after the restart")
        results.append(
            {
                "pod": pods.pods[ordinal].name,
                "t0": t0,
                "wasLeader": leader_before == ordinal,
                "leaderBefore": leader_before,
                "leaderAfter": (leader_after := _leader(pods, token)),
                # Raft terms this restart cost: 1 per leader handover or election.
                "terms": _term(pods, token, leader_after) - term_before,
                "stoppedSeconds": t_down - t0,
                "downSeconds": t_ready - t0,
                "writeUnavailableSeconds": writer.window(t0, t_ready),
                "eagerUnavailableSeconds": eager.window(t0, t_ready) if eager else None,
                **stop,
            }
        )
    return results


def _leader(pods: LoopbackStatefulSet, token: str) -> int:
    return pods.wait(lambda: _plus_one(leader_of(pods, token)), 60, "an active leader") - 1


def _term(pods: LoopbackStatefulSet, token: str, ordinal: int) -> int:
    status = pods.status(ordinal, token) or {}
    return int(status.get("raftTerm", 0))


def _plus_one(value: int | None) -> int | None:
    return None if value is None else value + 1


def converged(pods: LoopbackStatefulSet, token: str) -> list[dict] | None:
    """Every voter's status once all report the same applied offset and digest."""
    statuses = [pods.status(p.ordinal, token) for p in pods.pods]
    if any(s is None for s in statuses):
        return None
    keys = {(s["lastAppliedOffset"], s["imageDigest"]) for s in statuses}
    return statuses if len(keys) == 1 else None


def registered_brokers(pods: LoopbackStatefulSet, ordinal: int, token: str) -> set[int]:
    r = pods.http.get(
        pods.url(ordinal) + "/v1/brokers",
        headers={"authorization": f"Bearer {token}"},
        timeout=10.0,
    )
    r.raise_for_status()
    body = r.json()
    items = body["brokers"] if isinstance(body, dict) else body
    return {b["brokerId"] for b in items}


def report_lines(results: list[dict]) -> list[str]:
    lines = []
    for r in results:
        eager = r.get("eagerUnavailableSeconds")
        lines.append(
            f"{r['pod']:<14} {'leader' if r['wasLeader'] else 'follower':<8} "
            f"write-unavailable {r['writeUnavailableSeconds'] * 1000:5.0f} ms"
            + (f" (eager client {eager * 1000:4.0f} ms)" if eager is not None else "")
            + f"   stop {r['stoppedSeconds']:5.2f} s (preStop {r['preStopSeconds']:4.2f} s, "
            f"exit {r['exitCode']}{', KILLED' if r['killed'] else ''})   "
            f"back ready after {r['downSeconds']:5.2f} s   "
            f"leader {r['leaderBefore']} -> {r['leaderAfter']} (+{r['terms']} terms)"
        )
    return lines
