"""Quorum loss: how soon a voter that lost its majority stops pointing at a
leader (figures, not asserts; quorum/raft/leader_liveness.py).

Three voters as real ``metaquorum serve`` processes on loopback. Each round
SIGKILLs a majority's worth of voters and polls the one left (writes and
``/readyz``, one request every few ms) from just before the kill:

* ``follower``: the leader and one follower die; the survivor is a follower
  that can reach no voter (issue 17: it redirected to the dead leader).
* ``leader``: both followers die; the leader must step down (check-quorum).

Printed per round and as the median with its range: the time to the first
write answered 503 with Retry-After (``NOT_CONTROLLER``, or
``REQUEST_TIMED_OUT`` for a write a leader held until it stepped down), to
the first failing ``/readyz`` (polled after each write returns), and,
after one killed voter is started again, to the first write that commits.
With raft timeouts of 0.7-1.5 s, a follower's first figure is bounded by about
1.5 s and a leader's by about 3 s (check-quorum waits two timeouts), plus a
Raft tick and the poll; issue 17 asks for under 5 s.

    python bench/quorum_loss.py [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster  # noqa: E402 - after the path is set

LIMIT_S = 30.0  # a round that sees nothing within this is reported as such
_broker_ids = itertools.count(1)  # a new broker per write: each one that commits is a record


def progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def register_body(cluster: Cluster, broker_id: int) -> dict:
    return {
        "brokerId": broker_id,
        "clusterId": cluster.cluster_id,
        "incarnationId": str(uuid.uuid4()),
        "listeners": [
            {"name": "PLAINTEXT", "host": "localhost", "port": 9092, "securityProtocol": 0}
        ],
        "features": [
            {"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}
        ],
        "rack": None,
    }


def write(cluster: Cluster, i: int) -> httpx.Response | None:
    return write_to(cluster.url(i) + "/v1/brokers/register", cluster)


def write_to(url: str, cluster: Cluster) -> httpx.Response | None:
    try:
        return cluster.client.post(url, json=register_body(cluster, next(_broker_ids)), timeout=5)
    except httpx.HTTPError:
        return None


def until(predicate, since: float) -> float | None:
    """Seconds from ``since`` until ``predicate()`` first holds (None: not within LIMIT_S)."""
    while time.monotonic() - since < LIMIT_S:
        if predicate():
            return time.monotonic() - since
        time.sleep(0.005)
    return None


def one_round(cluster: Cluster, scenario: str) -> dict:
    cluster.wait_ready(timeout_s=60)
    leader = cluster.leader()
    followers = [i for i in range(cluster.n) if i != leader]
    if scenario == "follower":
        watched, killed = followers[0], [leader, followers[1]]
    else:
        watched, killed = leader, followers
    r = write(cluster, watched)
    assert r is not None and r.status_code in (200, 307), r
    seen: dict = {"first503": None, "answer": None, "readyzFails": None}

    def poll() -> bool:
        if seen["first503"] is None:
            r = write(cluster, watched)
            if r is not None and r.status_code == 503 and r.headers.get("retry-after"):
                # NOT_CONTROLLER, or REQUEST_TIMED_OUT for a write the leader
                # held until it stepped down.
                seen["first503"] = time.monotonic() - lost
                seen["answer"] = r.json().get("errorName")
        if seen["readyzFails"] is None and not cluster.ready(watched):
            seen["readyzFails"] = time.monotonic() - lost
        return seen["first503"] is not None and seen["readyzFails"] is not None

    lost = time.monotonic()
    for i in killed:
        cluster.kill(i)
    until(poll, lost)
    back = killed[-1]
    cluster.start(back)
    restarted = time.monotonic()

    def committed() -> bool:
        r = write(cluster, watched)
        if r is not None and r.status_code == 307:
            r = write_to(r.headers["location"], cluster)
        return r is not None and r.status_code == 200 and r.json().get("errorName") == "NONE"

    restored = until(committed, restarted)
    for i in killed:
        if not cluster.alive(i):
            cluster.start(i)
    return {"scenario": scenario, **seen, "writeAfterRestart": restored}


def summary(values: list[float | None]) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "never"
    missed = len(values) - len(got)
    text = f"{statistics.median(got):.2f} s ({min(got):.2f}-{max(got):.2f})"
    return text + (f", {missed} rounds never" if missed else "")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each scenario")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="quorum-loss-") as root:
        cluster = Cluster(Path(root))
        try:
            cluster.start()
            for n in range(args.rounds):
                for scenario in ("follower", "leader"):
                    progress(f"round {n + 1}/{args.rounds}: {scenario}")
                    rows.append(one_round(cluster, scenario))
        finally:
            cluster.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{'scenario':<10} {'first 503':>10} {'(errorName)':<18} {'readyz fails':>13} "
        f"{'write after restart':>20}"
    )
    for row in rows:
        cells = [row["first503"], row["readyzFails"], row["writeAfterRestart"]]
        shown = ["never" if v is None else f"{v:.2f} s" for v in cells]
        print(
            f"{row['scenario']:<10} {shown[0]:>10} {row['answer'] or '-':<18} {shown[1]:>13} "
            f"{shown[2]:>20}"
        )
    for scenario, what in (
        ("follower", "leader + follower killed"),
        ("leader", "followers killed"),
    ):
        mine = [r for r in rows if r["scenario"] == scenario]
        print(
            f"{what}: first 503 {summary([r['first503'] for r in mine])}; "
            f"/readyz fails {summary([r['readyzFails'] for r in mine])}; "
            f"a write commits {summary([r['writeAfterRestart'] for r in mine])} after a restart"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
