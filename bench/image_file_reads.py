"""HTTP reads with and without the voter's image file (figures, not asserts).

One voter with ``--http-workers 2`` on loopback, holding ``--topics`` topics
of ``--partitions`` partitions (RF 3 over 3 brokers). Its workers read their
partitions from the core's image file (voter/shared_image.py, decision 169)
or, with ``SHARED_IMAGE`` off, each keep a copy of their own. ``wrk`` reads
one topic (``GET /v1/topics/NAME``), the first page of topics
(``GET /v1/topics?limit=100``) and a topic drawn at random from all of them,
at ``--connections`` connections for ``--seconds`` each, while the brokers
heartbeat. A worker keeps the slots of the chunks it read most recently read
out (metadata_records/hot_chunks.py): with more topics than that holds, the
last row times reads that miss it. The two settings alternate for
``--rounds`` rounds, each on a fresh voter, one first in a round and the
other first in the next; each round's figures are shown as it ends, and the
median requests/s and p50 of each setting at the end.

    python bench/image_file_reads.py [--topics 300] [--partitions 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster  # noqa: E402 - after the path is set
from tests.test_cluster import register, write  # noqa: E402
from tests.test_http_workers import heartbeat_until_unfenced  # noqa: E402

SWITCH = "voter.shared_image.SHARED_IMAGE"


def progress(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def voter(root: Path, shared: bool) -> Cluster:
    cluster = Cluster(root, voters=1, extra=["--http-workers", "2"])
    if not shared:  # a sitecustomize.py sets the switch in every process at start
        site = root / "switches"
        site.mkdir()
        module, _, name = SWITCH.rpartition(".")
        (site / "sitecustomize.py").write_text(
            f"import importlib\nsetattr(importlib.import_module({module!r}), {name!r}, False)\n"
        )
        path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", str(ROOT))])
        cluster.env[0] = {"PYTHONPATH": path}
    return cluster


class Heartbeats(threading.Thread):
    """The brokers heartbeating every second, as live brokers do: without
    them their sessions end under the reads, and fencing them rewrites every
    partition (and, with the file, a new file and every process's rebase)."""

    def __init__(self, cluster: Cluster, epochs: dict[int, int]) -> None:
        super().__init__(daemon=True)
        self.url, self.epochs, self.stopped = cluster.url(0), epochs, threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=5) as client:
            while not self.stopped.wait(1.0):
                for broker, epoch in self.epochs.items():
                    client.post(
                        f"{self.url}/v1/brokers/heartbeat",
                        json={"brokerId": broker, "brokerEpoch": epoch, "currentMetadataOffset": 0},
                    )


def load(cluster: Cluster, topics: int, partitions: int) -> dict[int, int]:
    """The brokers' epochs, once they are unfenced and the topics made."""
    cluster.wait_ready()
    epochs = {b: register(cluster, 0, b) for b in (1, 2, 3)}
    for b, epoch in epochs.items():
        heartbeat_until_unfenced(cluster, 0, b, epoch)
    for lo in range(0, topics, 100):
        body = {
            "topics": [
                {"name": f"t{i}", "numPartitions": partitions, "replicationFactor": 3}
                for i in range(lo, min(topics, lo + 100))
            ]
        }
        write(cluster, 0, "/v1/topics", body)
    return epochs


def settled(cluster: Cluster, shared: bool) -> None:
    """Until the core has written its last file of the load (it writes one
    once writes calm down for 5 s) and every worker took it: reads timed
    during a rebase would time the rebase. Copies of their own wait as long
    (7 s of nothing new), so that both read as long after the load."""

    def files() -> tuple:
        status = cluster.status(0) or {}
        return (
            (status.get("imageFile") or {}).get("written"),
            tuple(w["imageRebases"] for w in status.get("httpWorkers", [])),
        )

    seen = [files(), time.monotonic()]

    def unchanged_for_7s() -> bool:
        now = files()
        if now != seen[0]:
            seen[:] = [now, time.monotonic()]
        return (all(now[1]) or not shared) and time.monotonic() - seen[1] >= 7.0

    cluster.wait(unchanged_for_7s, timeout_s=120, what="the last file written and taken")


def wrk(url: str, connections: int, seconds: int, script: str | None = None) -> tuple[float, float]:
    """(requests/s, p50 ms) of ``wrk`` reading ``url`` (or the paths ``script`` makes)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as lua:
        lua.write(script or "")
        lua.flush()
        out = subprocess.run(
            ["wrk", "-t", "2", "-c", str(connections), "-d", f"{max(1, round(seconds))}s"]
            + ["--latency", *(["-s", lua.name] if script else []), url],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50, unit = re.search(r"50%\s+([\d.]+)(us|ms|s)", out).groups()
    return rate, float(p50) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def any_topic(topics: int) -> str:
    """A wrk script reading a topic drawn at random from all of them: reads
    spread past what a worker keeps read out (metadata_records/hot_chunks.py)."""
    return (
        "math.randomseed(os.time())\n"
        "request = function()\n"
        f'  return wrk.format("GET", "/v1/topics/t" .. math.random(0, {topics - 1}))\n'
        "end\n"
    )


def one_round(shared: bool, args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory(prefix="image-file-reads-") as tmp:
        cluster = voter(Path(tmp), shared)
        try:
            cluster.start()
            heartbeats = Heartbeats(cluster, load(cluster, args.topics, args.partitions))
            heartbeats.start()
            settled(cluster, shared)
            url = cluster.url(0)
            try:
                return {
                    "one topic": wrk(f"{url}/v1/topics/t7", args.connections, args.seconds),
                    "a page of 100 topics": wrk(
                        f"{url}/v1/topics?limit=100", args.connections, args.seconds
                    ),
                    "any topic at random": wrk(
                        url, args.connections, args.seconds, any_topic(args.topics)
                    ),
                }
            finally:
                heartbeats.stopped.set()
                heartbeats.join()
        finally:
            cluster.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    if args.topics < 8 or args.partitions < 1 or args.rounds < 1:
        parser.error("--topics must be 8 or more, --partitions and --rounds 1 or more")
    results: dict[bool, list[dict]] = {True: [], False: []}
    for n in range(args.rounds):
        for shared in (True, False) if n % 2 == 0 else (False, True):  # neither always first
            progress(f"round {n + 1}: {'the image file' if shared else 'copies of their own'}")
            results[shared].append(one_round(shared, args))
            progress(
                ", ".join(f"{read} {r:,.0f}/s" for read, (r, _) in results[shared][-1].items())
            )
    print(
        f"{args.topics} topics of {args.partitions} partitions, one voter with 2 HTTP workers, "
        f"{args.connections} connections (load {os.getloadavg()[0]:.1f}); median of "
        f"{args.rounds} round(s), requests/s and p50"
    )
    for read in results[True][0]:
        cells = []
        for shared in (True, False):
            rate = statistics.median(r[read][0] for r in results[shared])
            p50 = statistics.median(r[read][1] for r in results[shared])
            cells.append(f"{rate:>9,.0f}/s {p50:6.2f} ms")
        print(f"  {read:22} file: {cells[0]}   own copies: {cells[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
