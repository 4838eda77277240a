"""Removing the leader under load (issue 42; figures, not asserts).

Three voters as real ``metaquorum serve`` processes on loopback (``--fsync
always``), a writer registering brokers through any voter the whole time
(tests/k8s_rolling.py's Writer, retrying at once). Each round, as an
operator would:

1. ``metaquorum remove-voter --node-id <the leader>`` (the CLI hands
   leadership over, retrying a handover that did not move it, then removes
   the node); its exit code, its lines and how long it took are kept;
2. the removed node is stopped, its data dir wiped, and it is started again
   empty and added back (``add-voter``), so the next round has 3 voters.

Printed per round: the **write gap around the removal** (the longest gap
between two acknowledged writes that overlaps the CLI's run), the handover's
outcome and how long the command took; then p50/p99/max of the gaps and how
many were within the 1 s failover bound. At the end every acknowledged write
is read back from a voter.

    python bench/leader_removal.py [--rounds 20] [--http-workers N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster  # noqa: E402 - after the path is set
from tests.k8s_rolling import Writer  # noqa: E402

BOUND_S = 1.0  # the failover bound of issue 42


def progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def cli(*args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
    )


def voters_of(c: Cluster, i: int) -> set[int]:
    s = c.status(i) or {}
    return {v["nodeId"] for v in s.get("voters", []) if v.get("voter", True)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def one_round(c: Cluster, writer: Writer, n: int) -> dict:
    leader = c.leader(timeout_s=60)
    urls = ",".join(c.url(i) for i in range(c.n))
    started = time.monotonic()
    done = cli("remove-voter", "--url", urls, "--node-id", str(leader))
    ended = time.monotonic()
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    others = [i for i in range(c.n) if i != leader]
    try:
        new_leader = c.leader(among=others, timeout_s=60)
    except AssertionError as e:
        raise SystemExit(f"round {n}: no other voter leads after {lines}:\n{e}") from None
    c.wait(lambda: leader not in voters_of(c, new_leader), 30, "the removal committed")
    # Give the writer a moment past the command so a gap that ends after it shows.
    c.wait(lambda: writer.acked and writer.acked[-1][1] > ended, 30, "a write after the removal")
    gap = writer.window(started, ended)
    # Back to three voters: wiped and added again, as a replaced pod would be.
    c.stop(leader)
    shutil.rmtree(c.data_dir(leader))
    c.start(leader)
    added = cli(
        "add-voter",
        "--url",
        urls,
        "--node-id",
        str(leader),
        "--address",
        c.raft_address(leader),
        "--timeout",
        "60",
    )
    if added.returncode != 0:
        raise SystemExit(f"round {n}: add-voter failed: {added.stdout}{added.stderr}")
    c.wait(lambda: voters_of(c, c.leader()) == set(range(c.n)), 60, "three voters again")
    c.wait_ready(timeout_s=60)
    return {
        "round": n,
        "removed": leader,
        "newLeader": new_leader,
        "exitCode": done.returncode,
        "commandS": round(ended - started, 3),
        "writeGapS": round(gap, 3),
        "lines": lines,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the voters' logs and data dirs")
    p.add_argument(
        "--http-workers",
        default=None,
        help="serve --http-workers (default: serve's own; N > 0 runs the orderer in a process)",
    )
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="leader-removal-"))
    extra = [] if args.http_workers is None else ["--http-workers", args.http_workers]
    c = Cluster(root, voters=3, fsync="always", extra=extra)
    rounds: list[dict] = []
    writer = None
    try:
        c.start()
        c.wait_ready(timeout_s=60)
        c.wait(lambda: voters_of(c, c.leader()) == {0, 1, 2}, 30, "the first voter set")
        seeds = [c.url(i) for i in range(c.n)]
        writer = Writer(seeds, token="", cluster_id=c.cluster_id, eager=True).start()
        c.wait(lambda: len(writer.acked) > 20, 30, "the writer writing")
        for n in range(1, args.rounds + 1):
            r = one_round(c, writer, n)
            rounds.append(r)
            progress(
                f"round {n}: removed {r['removed']} -> leader {r['newLeader']}, "
                f"write gap {r['writeGapS']:.3f} s, command {r['commandS']:.2f} s "
                f"(exit {r['exitCode']}): " + " | ".join(r["lines"])
            )
        writer.stop()
        acked = {b for b, _ in writer.acked}
        leader = c.leader()
        r = c.get(leader, "/v1/brokers?consistency=linearizable", timeout=30)
        present = {b["brokerId"] for b in r.json()["brokers"]}
        lost = sorted(acked - present)
    finally:
        if writer is not None:
            writer.stop()
        c.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            progress(f"logs and data dirs kept in {root}")
    gaps = [r["writeGapS"] for r in rounds]
    summary = {
        "rounds": len(rounds),
        "gapP50S": round(statistics.median(gaps), 3),
        "gapP99S": round(percentile(gaps, 0.99), 3),
        "gapMaxS": max(gaps),
        "withinBound": sum(1 for g in gaps if g <= BOUND_S),
        "cliExit0": sum(1 for r in rounds if r["exitCode"] == 0),
        "acked": len(acked),
        "lost": lost,
        "unknownOutcome": len(writer.unknown),
    }
    if args.json:
        print(json.dumps({"rounds": rounds, "summary": summary}, indent=2))
    else:
        for r in rounds:
            print(
                f"{r['round']:>3}  removed {r['removed']}  leader {r['newLeader']}  "
                f"gap {r['writeGapS']:.3f} s  command {r['commandS']:.2f} s  exit {r['exitCode']}"
            )
        print(
            f"write gap around a leader removal over {summary['rounds']} rounds: "
            f"p50 {summary['gapP50S']:.3f} s, p99 {summary['gapP99S']:.3f} s, "
            f"max {summary['gapMaxS']:.3f} s; {summary['withinBound']} within {BOUND_S:.0f} s; "
            f"CLI exit 0 in {summary['cliExit0']}; {summary['acked']} writes acknowledged, "
            f"{len(lost)} lost"
        )
    return 0 if not lost else 1


if __name__ == "__main__":
    sys.exit(main())
