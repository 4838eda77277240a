"""HTTP reads with and without the voter's image file (figures, not asserts).

One voter with ``--http-workers 2`` on loopback, holding ``--topics`` topics
of ``--partitions`` partitions (RF 3 over 3 brokers). Its workers read their
partitions from the core's image file (voter/shared_image.py, decision 169)
or, with ``SHARED_IMAGE`` off, each keep a copy of their own. ``wrk`` reads
one topic (``GET /v1/topics/NAME``) and the first page of topics
(``GET /v1/topics?limit=100``) at ``--connections`` connections for
``--seconds`` each; the two settings alternate for ``--rounds`` rounds, each
on a fresh voter, and the median requests/s and p50 of each are printed.

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
import time
from pathlib import Path

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


def load(cluster: Cluster, topics: int, partitions: int) -> None:
    cluster.wait_ready()
    for b in (1, 2, 3):
        heartbeat_until_unfenced(cluster, 0, b, register(cluster, 0, b))
    for lo in range(0, topics, 100):
        body = {
            "topics": [
                {"name": f"t{i}", "numPartitions": partitions, "replicationFactor": 3}
                for i in range(lo, min(topics, lo + 100))
            ]
        }
        write(cluster, 0, "/v1/topics", body)


def wrk(url: str, connections: int, seconds: int) -> tuple[float, float]:
    """(requests/s, p50 ms) of ``wrk`` reading ``url``."""
    out = subprocess.run(
        [
            "wrk",
            "-t",
            "2",
            "-c",
            str(connections),
            "-d",
            f"{max(1, round(seconds))}s",
            "--latency",
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50, unit = re.search(r"50%\s+([\d.]+)(us|ms|s)", out).groups()
    return rate, float(p50) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def one_round(shared: bool, args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory(prefix="image-file-reads-") as tmp:
        cluster = voter(Path(tmp), shared)
        try:
            cluster.start()
            load(cluster, args.topics, args.partitions)
            if shared:  # the workers read from a file written after the load
                cluster.wait(
                    lambda: all(
                        w["imageRebases"] >= 1 for w in (cluster.status(0) or {})["httpWorkers"]
                    ),
                    timeout_s=60,
                    what="every worker on a file written after the load",
                )
            url = cluster.url(0)
            return {
                "one topic": wrk(f"{url}/v1/topics/t7", args.connections, args.seconds),
                "a page of 100 topics": wrk(
                    f"{url}/v1/topics?limit=100", args.connections, args.seconds
                ),
            }
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
        for shared in (True, False):
            progress(f"round {n + 1}: {'the image file' if shared else 'copies of their own'}")
            results[shared].append(one_round(shared, args))
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
