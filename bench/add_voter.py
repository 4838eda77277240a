"""Online membership on a loaded cluster: how long add-voter takes when the
joiner must install a large snapshot, and what a writer sees during an add, a
remove and a replace (figures, not asserts; quorum/membership.py,
docs/decisions.md 50).

Three voters as real ``metaquorum serve`` processes on loopback (``--fsync
always``), loaded with N partitions (``--partitions``, default 1,000,000, in
CreatePartitions requests of 10,000, as bench/disk_replace.py does; then
writes until every voter has a snapshot holding them). A writer registers a
broker every ``--write-interval-ms`` all along. Then, one change at a time:

* ``add``: a joiner started empty (``serve --node-id 3 --raft-address ...``),
  then POST /v1/quorum/add-voter to the leader; the times from the request to
  the joiner's snapshot loaded (its image holds the N partitions), caught up
  (it applied the leader's commit index read just before), the answer, and
  the joiner saying ``role: voter``;
* ``remove``: remove-voter of that node (4 -> 3), then it is stopped and its
  data dir deleted, as an operator would;
* ``replace``: a fresh node (id 4) added, then an original follower removed,
  stopped and its data dir deleted (3 -> 4 -> 3).

Each change prints the longest gap between two acknowledged writes from its
request to its end.

    python bench/add_voter.py [--partitions N] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from disk_replace import (  # noqa: E402 - bench/disk_replace.py, after the path is set
    PodCluster,
    Writer,
    loaded_cluster,
    partition_count,
    progress,
    status,
)

LIMIT_S = 600.0  # add-voter's own ceiling (timeoutMs at most 600,000)


def post(cluster: PodCluster, path: str, body: dict, timeout: float) -> httpx.Response:
    url = cluster.url(cluster.leader(timeout_s=120)) + path
    with httpx.Client(timeout=timeout, trust_env=False) as http:
        return http.post(url, json=body, follow_redirects=True)


def add_round(cluster: PodCluster, writer: Writer, partitions: int) -> dict:
    """Starts a joiner, adds it, polls it; returns the times from the request."""
    cluster.wait_ready(voters=voter_slots(cluster), timeout_s=300)
    j = cluster.add_node()
    cluster.start(j)
    cluster.wait(lambda: status(cluster, j) is not None, 120, f"joiner {j} answering")
    leader = cluster.leader(timeout_s=120)
    answer: dict = {}
    body = {"nodeId": j, "address": cluster.raft_address(j), "timeoutMs": int(LIMIT_S * 1000)}

    def request() -> None:
        try:
            r = post(cluster, "/v1/quorum/add-voter", body, LIMIT_S + 30)
            answer["status"], answer["body"] = r.status_code, r.text[:300]
        except httpx.HTTPError as e:
            answer["status"], answer["body"] = None, repr(e)
        answer["at"] = time.monotonic()

    asked = time.monotonic()
    thread = threading.Thread(target=request, daemon=True)
    thread.start()
    seen: dict[str, float | None] = {"snapshot": None, "caughtUp": None, "voter": None}
    while time.monotonic() - asked < LIMIT_S + 30 and seen["voter"] is None:
        lead = status(cluster, leader)
        s = status(cluster, j)
        now = time.monotonic() - asked
        if not cluster.alive(j):
            raise SystemExit(f"joiner {j} exited:\n{cluster.tail(j)}")
        if s is None:
            time.sleep(0.05)
            continue
        if seen["snapshot"] is None and (partition_count(cluster, j) or 0) >= partitions:
            seen["snapshot"] = now
        if (
            seen["caughtUp"] is None
            and seen["snapshot"] is not None
            and lead is not None
            and s["raftLastApplied"] >= lead["raftCommitIndex"]
        ):
            seen["caughtUp"] = now
        if s.get("role") == "voter":
            seen["voter"] = now
        time.sleep(0.05)
    done = time.monotonic()
    thread.join(timeout=LIMIT_S + 60)
    return {
        "change": "add",
        "node": j,
        **seen,
        "answered": answer["at"] - asked if "at" in answer else None,
        "answer": answer.get("status"),
        "answerBody": answer.get("body") if answer.get("status") != 200 else None,
        "longestWriteGap": writer.longest_gap(asked, done),
        "writesDuring": sum(1 for t in writer.acks if asked < t < done),
    }


def remove_round(cluster: PodCluster, writer: Writer, node: int) -> dict:
    asked = time.monotonic()
    r = post(cluster, "/v1/quorum/remove-voter", {"nodeId": node}, 60)
    answered = time.monotonic()
    cluster.wait(
        lambda: (status(cluster, node) or {}).get("role") in ("removed", None),
        60,
        f"node {node} knowing it was removed",
    )
    cluster.stop(node)
    shutil.rmtree(cluster.data_dir(node), ignore_errors=True)
    done = time.monotonic()
    cluster.removed.add(node)
    return {
        "change": "remove",
        "node": node,
        "answered": answered - asked,
        "answer": r.status_code,
        "answerBody": r.text[:300] if r.status_code != 200 else None,
        "stoppedAndWiped": done - asked,
        "longestWriteGap": writer.longest_gap(asked, done),
        "writesDuring": sum(1 for t in writer.acks if asked < t < done),
    }


def voter_slots(cluster: PodCluster) -> list[int]:
    return [i for i in range(cluster.n) if i not in cluster.removed]


def fmt(v) -> str:
    return "-" if v is None else f"{v:.2f} s" if isinstance(v, float) else str(v)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--compaction-entries", type=int, default=500)
    parser.add_argument("--write-interval-ms", type=float, default=50)
    parser.add_argument("--dir", help="keep the data dirs and logs here (default: removed)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: list[dict] = []
    writer = None
    with loaded_cluster(
        args.dir, args.partitions, args.compaction_entries, "add-voter-"
    ) as cluster:
        cluster.removed = set()
        try:
            writer = Writer(cluster, cluster.leader(), args.write_interval_ms / 1000)
            time.sleep(2.0)  # the writer going before the first change
            progress("add: a joiner started empty, then add-voter")
            row = add_round(cluster, writer, args.partitions)
            progress(json.dumps(row))
            rows.append(row)
            if row["voter"] is not None:
                progress(f"remove: node {row['node']} (4 -> 3 voters)")
                rows.append(remove_round(cluster, writer, row["node"]))
                progress(json.dumps(rows[-1]))
                progress("replace: a fresh node added, then an original follower removed")
                row = add_round(cluster, writer, args.partitions)
                row["change"] = "replace (add)"
                progress(json.dumps(row))
                rows.append(row)
                if row["voter"] is not None:
                    leader = cluster.leader(timeout_s=120)
                    old = next(i for i in (0, 1, 2) if i != leader)
                    gone = remove_round(cluster, writer, old)
                    gone["change"] = "replace (remove)"
                    progress(json.dumps(gone))
                    rows.append(gone)
        finally:
            if writer is not None:
                writer.stop()
    if args.json:
        print(json.dumps({"partitions": args.partitions, "changes": rows}, indent=2))
        return 0
    print(
        f"online membership with {args.partitions:,} partitions (3 voters, fsync always, "
        f"compaction every {args.compaction_entries} entries, a write every "
        f"{args.write_interval_ms:.0f} ms; times from the request)"
    )
    print(
        f"{'change':>16} {'node':>4} {'snapshot':>9} {'caught up':>9} {'answered':>9} "
        f"{'voter':>9} {'write gap':>9} {'writes':>6}"
    )
    for r in rows:
        print(
            f"{r['change']:>16} {r['node']:>4} {fmt(r.get('snapshot')):>9} "
            f"{fmt(r.get('caughtUp')):>9} {fmt(r.get('answered')):>9} "
            f"{fmt(r.get('voter')):>9} {fmt(r['longestWriteGap']):>9} {r['writesDuring']:>6}"
        )
        if r.get("answerBody"):
            print(f"{'':>16} answer {r['answer']}: {r['answerBody']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
