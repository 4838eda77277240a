"""No false elections under the heaviest load (issue 42; figures, not asserts).

The election timeout that finds a hung leader fast must not find a busy one:
this runs the heaviest AlterPartition load of ``bench/api.py`` (``wrk``, 64
connections, 100 partitions a request, every request a real ISR change) at
the active controller of three voters (real ``metaquorum serve`` processes in
network namespaces, fsync always) for ``--minutes``, with ``--burn`` processes
spinning on the CPU beside them (2 by default: on this 2-core machine the
voters then get about half the CPU they would alone), while the six brokers
of the load heartbeat every 2 s (Kafka's default) with the 9 s session.

Printed: leader changes, elections started and leaderships lost by cause (the
voters' own counters, ``/v1/quorum/status``), brokers fenced during the run
(the leader's ``metaquorum_fenced_broker_count`` read every second: a broker
that heartbeats on time is never fenced), the leader's heartbeat gaps as the
followers read them (their ``metaquorum_leader_heartbeat_gap_seconds``
histograms: p50/p99/p99.9 bucket bounds and the longest), and the load's own
figures (partition changes/s, p99).

    python bench/steady_leader.py [--minutes 10] [--burn 2] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api import alter_script, fresh_topic, run_wrk, setup  # noqa: E402
from bench.elections import gap_buckets, gap_quantiles  # noqa: E402
from tests.faults.netns import Network, netns_unavailable_reason  # noqa: E402
from tests.faults.voters import NetnsCluster  # noqa: E402

CLIENTS, PER_REQUEST = 64, 100
HEARTBEAT_S = 2.0  # Kafka's broker.heartbeat.interval.ms


def progress(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _spin() -> None:
    while True:
        pass


class Watch:
    """Beside the load: the brokers' heartbeats every 2 s, and the leader's
    fenced-broker gauge read every second (its maximum kept)."""

    def __init__(self, url: str, epochs: dict[int, int]) -> None:
        self.url = url
        self.epochs = epochs
        self.max_fenced = 0
        self.heartbeat_errors: dict[str, int] = {}
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._heartbeats, daemon=True),
            threading.Thread(target=self._fenced, daemon=True),
        ]

    def start(self) -> Watch:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)

    def _heartbeats(self) -> None:
        with httpx.Client(
            base_url=self.url, timeout=5.0, follow_redirects=True, trust_env=False
        ) as c:
            while not self._stop.wait(HEARTBEAT_S):
                for broker, epoch in self.epochs.items():
                    body = {
                        "brokerId": broker,
                        "brokerEpoch": epoch,
                        "currentMetadataOffset": 10**12,
                    }
                    try:
                        r = c.post("/v1/brokers/heartbeat", json=body)
                        name = r.json().get("errorName", f"HTTP {r.status_code}")
                    except (httpx.HTTPError, ValueError) as e:
                        name = type(e).__name__
                    if name != "NONE":
                        self.heartbeat_errors[name] = self.heartbeat_errors.get(name, 0) + 1

    def _fenced(self) -> None:
        with httpx.Client(timeout=5.0, trust_env=False) as c:
            while not self._stop.wait(1.0):
                try:
                    text = c.get(self.url + "/metrics").text
                except httpx.HTTPError:
                    continue
                for line in text.splitlines():
                    if line.startswith("metaquorum_fenced_broker_count "):
                        self.max_fenced = max(self.max_fenced, int(float(line.split()[1])))


def counters(c: NetnsCluster) -> dict:
    """Each voter's election counters, summed."""
    out: dict = {"leaderChanges": 0, "electionsStarted": {}, "leadershipLost": {}, "gapMaxMs": 0}
    for i in range(c.n):
        e = (c.status(i, timeout=5.0) or {}).get("elections") or {}
        out["leaderChanges"] += e.get("leaderChanges", 0)
        for key in ("electionsStarted", "leadershipLost"):
            for cause, n in (e.get(key) or {}).items():
                out[key][cause] = out[key].get(cause, 0) + n
        out["gapMaxMs"] = max(out["gapMaxMs"], (e.get("heartbeatGaps") or {}).get("maxMs") or 0)
    return out


def changed(before: dict, after: dict, key: str) -> dict[str, int]:
    return {
        k: n - before[key].get(k, 0) for k, n in after[key].items() if n - before[key].get(k, 0)
    }


def run(minutes: float, root: Path) -> dict:
    net = Network(3)
    c = None
    watch = None
    try:
        net.setup()
        c = NetnsCluster(net, root).start()
        c.wait_ready()
        leader = c.wait(lambda: c.leader_and_term(), 60, "a leader")
        url = c.url(leader[0])
        epochs, _, _ = asyncio.run(setup(url, c.cluster_id, 10))
        topic_id = asyncio.run(fresh_topic(url, "steady", 4 * CLIENTS * PER_REQUEST))
        script = alter_script(epochs, topic_id, 4 * CLIENTS * PER_REQUEST, PER_REQUEST)
        watch = Watch(url, epochs).start()
        before, gaps_before = counters(c), gap_buckets(c)
        progress(f"{CLIENTS} connections x {PER_REQUEST} partitions for {minutes:g} min")
        load = run_wrk(url, "/v1/alter-partition?version=3", script, CLIENTS, minutes * 60)
        watch.stop()
        after, gaps_after = counters(c), gap_buckets(c)
        now = c.leader_and_term()
        return {
            "minutes": minutes,
            "leaderBefore": leader[0],
            "termBefore": leader[1],
            "leaderAfter": None if now is None else now[0],
            "termAfter": None if now is None else now[1],
            "leaderChanges": after["leaderChanges"] - before["leaderChanges"],
            "electionsStarted": changed(before, after, "electionsStarted"),
            "leadershipLost": changed(before, after, "leadershipLost"),
            "maxFencedBrokers": watch.max_fenced,
            "heartbeatErrors": watch.heartbeat_errors,
            "gaps": gap_quantiles(gaps_before, gaps_after),
            "gapMaxMs": after["gapMaxMs"],
            "changesPerS": round(load["changes_per_s"]),
            "p99Ms": load["p99_ms"],
            "errors": load["errors"],
            "errorKinds": load["error_kinds"],
        }
    finally:
        if watch is not None:
            watch.stop()
        if c is not None:
            c.close()
        net.teardown()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--burn", type=int, default=2, help="CPU-spinning processes beside")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    why = netns_unavailable_reason()
    if why is None and shutil.which("wrk") is None:
        why = "the load comes from wrk: apt-get install -y wrk"
    if why is not None:
        print(f"bench/steady_leader.py cannot run here: {why}", file=sys.stderr)
        return 2
    burners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.burn)]
    for b in burners:
        b.start()
    try:
        with tempfile.TemporaryDirectory(prefix="mq-steady-") as root:
            r = run(args.minutes, Path(root))
    finally:
        for b in burners:
            b.terminate()
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    g = r["gaps"]
    print(
        f"steady leader: {r['minutes']:g} min of AlterPartition ({CLIENTS} connections x "
        f"{PER_REQUEST} partitions) with {args.burn} burners beside\n"
        f"  leader {r['leaderBefore']}->{r['leaderAfter']}, term {r['termBefore']}->"
        f"{r['termAfter']}; leader changes {r['leaderChanges']}; elections "
        f"{r['electionsStarted'] or 'none'}; leaderships lost {r['leadershipLost'] or 'none'}\n"
        f"  brokers fenced (most at once) {r['maxFencedBrokers']}; heartbeat errors "
        f"{r['heartbeatErrors'] or 'none'}\n"
        f"  leader heartbeat gaps read by the followers: {g['gaps']} gaps, p50 <= {g['p50Ms']} "
        f"ms, p99 <= {g['p99Ms']} ms, p99.9 <= {g['p999Ms']} ms, longest {r['gapMaxMs']} ms\n"
        f"  load: {r['changesPerS']} partition changes/s, p99 {r['p99Ms']:.1f} ms, errors "
        f"{r['errors']} {r['errorKinds'] or ''}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
