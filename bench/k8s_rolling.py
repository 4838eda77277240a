"""Write unavailability during a StatefulSet rolling restart.

Renders k8s/ (base: 3 voters, or --overlay prod: 5), runs the rendered
container as real processes on loopback (tests/k8s_pods.py: the rendered
command, args and environment, pod DNS names mapped to loopback addresses,
a read-only root filesystem when run as root), and restarts every pod,
highest ordinal first, the way the kubelet does (preStop, SIGTERM, wait for
ready), while one writer registers brokers through brokers/client.py.

Per restart it prints the write-unavailability window seen by the writer
(the longest gap between two acknowledged writes overlapping the restart),
whether the pod was the leader, and the gap in the log itself (between the
commit timestamps of consecutive records). --no-prestop measures what the
preStop hook buys (serve still hands leadership over on SIGTERM).

    .venv/bin/python bench/k8s_rolling.py [--rounds 3] [--overlay base|prod] [--no-prestop]
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.k8s_pods import LoopbackStatefulSet  # noqa: E402 - after the path is set
from tests.k8s_render import named, prepared_copy, render  # noqa: E402
from tests.k8s_rolling import (  # noqa: E402
    Writer,
    converged,
    registered_brokers,
    report_lines,
    rolling_restart,
)


def log_gaps(pods: LoopbackStatefulSet, token: str, windows: list[tuple[float, float]]) -> list:
    """Per window (wall-clock seconds), the longest gap between consecutive
    records' timestamps (the leader's clock when it built the batch) in the
    log, in ms: how long no write at all went in."""
    headers = {"authorization": f"Bearer {token}"}
    stamps: list[int] = []
    offset = 0
    with httpx.Client(timeout=30.0, headers=headers, verify=pods.client_tls.context) as http:
        while True:
            body = http.get(
                pods.url(0) + "/v1/log", params={"fromOffset": offset, "maxRecords": 10000}
            ).json()
            records = body.get("records", [])
            stamps += [r["timestampMs"] for r in records if r["type"] != "LEADER_CHANGE"]
            if not records or body["nextOffset"] >= body["highWatermark"]:
                break
            offset = body["nextOffset"]
    gaps = []
    for start, end in windows:
        lo, hi = start * 1000, end * 1000
        worst = 0
        for a, b in zip(stamps, stamps[1:], strict=False):
            if b >= lo and a <= hi:
                worst = max(worst, b - a)
        gaps.append(worst)
    return gaps


def one_round(overlay: str, prestop: bool, work: Path) -> list[dict]:
    print(f"  rendering k8s/ ({overlay}) and starting the pods ...", flush=True)
    objects = render(prepared_copy(work), overlay)
    token = (
        base64.b64decode(named(objects, "Secret", "metaquorum-tokens")["data"]["admin-token"])
        .decode()
        .strip()
    )
    cluster_id = named(objects, "ConfigMap", "metaquorum-config")["data"]["METAQUORUM_CLUSTER_ID"]
    pods = LoopbackStatefulSet(objects, work / "run")
    try:
        pods.start_all()
        pods.wait(lambda: all(pods.ready(i) for i in range(pods.replicas)), 120, "every pod ready")
        seeds = [pods.url(i) for i in range(pods.replicas)]
        writer = Writer(seeds, token, cluster_id, tls=pods.client_tls).start()
        eager = Writer(
            seeds, token, cluster_id, eager=True, first_id=1_000_000, tls=pods.client_tls
        ).start()
        try:
            pods.wait(lambda: len(writer.acked) >= 50, 60, "the writer's first acks")
            # Baseline: the same measures over 5 s without a restart.
            quiet = time.monotonic()
            time.sleep(5.0)
            print(
                f"    no restart (5 s)          longest gap between acks: broker client "
                f"{writer.window(quiet, time.monotonic()) * 1000:4.0f} ms, eager client "
                f"{eager.window(quiet, time.monotonic()) * 1000:4.0f} ms"
            )
            wall0, mono0 = time.time(), time.monotonic()
            results = rolling_restart(pods, writer, token, prestop=prestop, eager=eager)
        finally:
            writer.stop()
            eager.stop()
        pods.wait(lambda: converged(pods, token), 60, "the voters to converge")
        acked = {b for b, _ in writer.acked + eager.acked}
        lost = {i: len(acked - registered_brokers(pods, i, token)) for i in range(pods.replicas)}
        # Restart windows in wall-clock time for the log's timestamps.
        windows = []
        for r in results:
            start = wall0 + (r["t0"] - mono0)
            windows.append((start, start + r["downSeconds"]))
        for r, gap in zip(results, log_gaps(pods, token, windows), strict=True):
            r["logGapMs"] = gap
        for line, r in zip(report_lines(results), results, strict=True):
            print(f"    {line}   log gap {r['logGapMs']:5d} ms")
        print(
            f"    acknowledged {len(acked)}, outcome unknown {len(writer.unknown + eager.unknown)}, "
            f"failed {len(writer.failed + eager.failed)}, acknowledged writes missing per voter "
            f"{lost}"
            + (
                f" first failure {(writer.failed + eager.failed)[0]}"
                if writer.failed + eager.failed
                else ""
            )
        )
        return results
    finally:
        pods.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--overlay", choices=["base", "prod"], default="base")
    parser.add_argument("--no-prestop", action="store_true", help="SIGTERM only")
    args = parser.parse_args()
    hook = "without preStop" if args.no_prestop else "with preStop"
    print(f"k8s rolling restart, {args.overlay}, {hook}, {args.rounds} rounds")
    leader, follower = [], []
    for n in range(args.rounds):
        print(f"round {n + 1}/{args.rounds}", flush=True)
        with tempfile.TemporaryDirectory(prefix="mq-k8s-bench-") as tmp:
            for r in one_round(args.overlay, not args.no_prestop, Path(tmp)):
                (leader if r["wasLeader"] else follower).append(r)

    def summary(name: str, rows: list[dict]) -> None:
        if not rows:
            return
        for label, values in (
            (
                "broker client (honours Retry-After)",
                [r["writeUnavailableSeconds"] * 1000 for r in rows],
            ),
            ("eager client (retries at once)", [r["eagerUnavailableSeconds"] * 1000 for r in rows]),
            ("gap in the log", [r["logGapMs"] for r in rows]),
        ):
            print(
                f"{name:<18} n={len(rows):<3} {label:<37} median {statistics.median(values):5.0f} ms"
                f"  max {max(values):5.0f} ms"
            )

    print("summary")
    summary("leader restarts", leader)
    summary("follower restarts", follower)
    return 0


if __name__ == "__main__":
    sys.exit(main())
