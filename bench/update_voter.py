"""A voter moved to a new Raft port under load (issue 47, KIP-853
UpdateRaftVoter; figures, not asserts).

Three voters as real ``metaquorum serve`` processes on loopback (``--fsync
always``), a writer registering brokers through any voter the whole time
(tests/k8s_rolling.py's Writer). Each round, as an operator would on a host
whose port changes: a voter (the leader on even rounds, a follower on odd
ones) is stopped and started again with its data dir at a new Raft port (its
--voters entry spelled the new way); it asks the leader to move it
(quorum/voter_changes.py), and nobody runs remove-voter or add-voter.

Printed per round: how long from its start to every voter's status naming it
at the new address (``movedS``), the longest gap between two acknowledged
writes from its stop to then (``writeGapS``: a leader's move includes an
election), then p50/max, the load average, and every acknowledged write read
back from a voter.

    python bench/update_voter.py [--rounds 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster  # noqa: E402 - after the path is set
from tests.k8s_rolling import Writer  # noqa: E402
from tests.nodes import free_port  # noqa: E402


def progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def seen_at(c: Cluster, i: int, address: str) -> bool:
    for j in range(c.n):
        s = c.status(j) or {}
        voters = {v["nodeId"]: v for v in s.get("voters", []) if v.get("voter", True)}
        if voters.get(i, {}).get("raftAddress") != address:
            return False
    return True


def one_round(c: Cluster, writer: Writer, n: int) -> dict:
    leader = c.leader(timeout_s=60)
    node = leader if n % 2 == 0 else next(i for i in range(c.n) if i != leader)
    stopped = time.monotonic()
    c.stop(node)
    c.raft[node] = free_port()
    c.voters = ",".join(f"{j}@127.0.0.1:{c.raft[j]}" for j in range(c.n))
    started = time.monotonic()
    c.start(node)
    c.wait(lambda: seen_at(c, node, c.raft_address(node)), 60, f"node {node} moved")
    moved = time.monotonic()
    c.wait(lambda: writer.acked and writer.acked[-1][1] > moved, 30, "a write after the move")
    c.wait_ready(timeout_s=60)
    return {
        "round": n,
        "node": node,
        "wasLeader": node == leader,
        "movedS": round(moved - started, 3),
        "writeGapS": round(writer.window(stopped, moved), 3),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="update-voter-"))
    c = Cluster(root, voters=3, fsync="always")
    rounds: list[dict] = []
    writer = None
    loads = []
    try:
        c.start()
        c.wait_ready(timeout_s=60)
        seeds = [c.url(i) for i in range(c.n)]
        writer = Writer(seeds, token="", cluster_id=c.cluster_id, eager=True).start()
        c.wait(lambda: len(writer.acked) > 20, 30, "the writer writing")
        for n in range(1, args.rounds + 1):
            loads.append(os.getloadavg()[0])
            r = one_round(c, writer, n)
            rounds.append(r)
            progress(
                f"round {n}: node {r['node']} ({'leader' if r['wasLeader'] else 'follower'}) "
                f"moved {r['movedS']:.3f} s after its start, write gap {r['writeGapS']:.3f} s"
            )
        writer.stop()
        acked = {b for b, _ in writer.acked}
        r = c.get(c.leader(), "/v1/brokers?consistency=linearizable", timeout=30)
        lost = sorted(acked - {b["brokerId"] for b in r.json()["brokers"]})
    finally:
        if writer is not None:
            writer.stop()
        c.close()
        shutil.rmtree(root, ignore_errors=True)
    summary = {"acked": len(acked), "lost": lost, "loadAvg1m": [min(loads), max(loads)]}
    for kind, mine in (("follower", False), ("leader", True)):
        of = [r for r in rounds if r["wasLeader"] is mine]
        if of:
            summary[kind] = {
                "rounds": len(of),
                "movedP50S": statistics.median(r["movedS"] for r in of),
                "movedMaxS": max(r["movedS"] for r in of),
                "gapP50S": statistics.median(r["writeGapS"] for r in of),
                "gapMaxS": max(r["writeGapS"] for r in of),
            }
    if args.json:
        print(json.dumps({"rounds": rounds, "summary": summary}, indent=2))
    else:
        for kind in ("follower", "leader"):
            if kind in summary:
                s = summary[kind]
                print(
                    f"{kind} moved ({s['rounds']} rounds): from its start to every voter naming "
                    f"its new address p50 {s['movedP50S']:.3f} s, max {s['movedMaxS']:.3f} s; "
                    f"write gap from its stop p50 {s['gapP50S']:.3f} s, max {s['gapMaxS']:.3f} s"
                )
        print(
            f"{summary['acked']} writes acknowledged, {len(lost)} lost; load average (1 min) "
            f"{min(loads):.1f}-{max(loads):.1f}"
        )
    return 0 if not lost else 1


if __name__ == "__main__":
    sys.exit(main())
