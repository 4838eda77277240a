"""A restarted cluster's first election (issue 42; figures, not asserts).

Three voters as real ``metaquorum serve`` processes on loopback (as
tests/cluster.py starts them), fsync always, some brokers registered. Each
round kills all three with SIGKILL and starts them again: every voter at once,
or (every other round) only two of the three, the third started after the
round. Printed per round and as p50/p99/max over the rounds, from **majority
up** (the moment the Raft port of the second voter to bind is listening, read
from /proc/net/tcp, so nothing connects to it early):

- to the election: when the winner stood (its log line, so also while its
  HTTP server is not up yet);
- to the first leader: a voter whose status names itself as Raft leader
  (its HTTP server answering);
- to the first acknowledged write: a broker registration sent to any voter
  (307s followed) answered 200 NONE;

and the Raft term the round ended in, and that every write acknowledged so far
is still there on the new leader (linearizable read). Its own section rather
than one in bench/quorum.py: the rounds restart processes, the figures are
start-up ones, and a run takes minutes, not seconds.

    python bench/restart_election.py [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster  # noqa: E402

MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]


def progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def listening_ports() -> set[int]:
    """TCP ports in LISTEN state on this host's network namespace."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def register_body(c: Cluster, broker_id: int) -> dict:
    return {
        "brokerId": broker_id,
        "clusterId": c.cluster_id,
        "incarnationId": str(uuid.uuid4()),
        "listeners": [{"name": "PLAINTEXT", "host": "h", "port": 9092, "securityProtocol": 0}],
        "features": MV,
        "rack": None,
    }


def try_write(http: httpx.Client, c: Cluster, i: int, broker_id: int) -> bool:
    try:
        r = http.post(
            c.url(i) + "/v1/brokers/register",
            json=register_body(c, broker_id),
            follow_redirects=True,
            timeout=2.0,
        )
    except httpx.HTTPError:
        return False
    return r.status_code == 200 and r.json().get("errorName") == "NONE"


def raft_leader(http: httpx.Client, c: Cluster, voters: list[int]) -> tuple[int, int] | None:
    """(voter, term) of a voter whose status names itself as the Raft leader."""
    for i in voters:
        try:
            r = http.get(c.url(i) + "/v1/quorum/status", timeout=0.5)
        except httpx.HTTPError:
            continue
        if r.status_code == 200 and r.json().get("leaderId") == i:
            return i, int(r.json().get("raftTerm", 0))
    return None


def one_round(c: Cluster, voters: list[int], broker_id: int, timeout_s: float = 60.0) -> dict:
    """Kills every voter, starts ``voters``; the round's times from majority up."""
    for i in range(c.n):
        c.kill(i)
    majority = c.n // 2 + 1
    for i in voters:
        c.start(i)
    deadline = time.monotonic() + timeout_s
    ports = {c.raft[i] for i in voters}
    while len(ports & listening_ports()) < majority:
        if time.monotonic() > deadline:
            raise RuntimeError(f"Raft ports not listening within {timeout_s} s")
        time.sleep(0.002)
    majority_up, majority_up_wall = time.monotonic(), time.time()
    found: dict[str, float | tuple[int, int]] = {}

    def watch_leader() -> None:
        with httpx.Client() as http:
            while time.monotonic() < deadline and "leader" not in found:
                led = raft_leader(http, c, voters)
                if led is not None:
                    found["leader"], found["leader_of"] = time.monotonic(), led
                time.sleep(0.01)

    watcher = threading.Thread(target=watch_leader, daemon=True)
    watcher.start()
    with httpx.Client() as http:
        k = 0
        while not try_write(http, c, voters[k % len(voters)], broker_id):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no write acknowledged within {timeout_s} s")
            k += 1
            time.sleep(0.01)
        acked = time.monotonic()
    watcher.join(timeout_s)
    leader_at = found.get("leader", acked)  # a leader found only after the ack: the ack bounds it
    led = found.get("leader_of", (None, None))
    stood = stood_at(c, voters, led[1])
    return {
        "started": len(voters),
        "electedSeconds": None if stood is None else stood - majority_up_wall,
        "leaderSeconds": min(leader_at, acked) - majority_up,
        "writeSeconds": acked - majority_up,
        "leader": led[0],
        "term": led[1],
    }


def stood_at(c: Cluster, voters: list[int], term: int | None) -> float | None:
    """When the winner of ``term`` stood for election, from its log (wall clock):
    the election itself, before its HTTP server answers."""
    if term is None:
        return None
    mark = f"stands for election at Raft term {term}"
    for i in voters:
        for line in reversed(c.logs[i].read_text(errors="replace").splitlines()):
            if mark in line:
                stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
                return stamp.timestamp()
    return None


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--json", action="store_true")
    p.add_argument("--extra", default="", help="more serve flags for every voter")
    args = p.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="restart-election-") as tmp:
        c = Cluster(Path(tmp), voters=3, fsync="always", extra=args.extra.split())
        try:
            c.start()
            c.wait_ready(timeout_s=120)
            acked: set[int] = set()
            with httpx.Client() as http:
                for b in range(1, 21):
                    if try_write(http, c, b % 3, b):
                        acked.add(b)
            for n in range(args.rounds):
                voters = [0, 1, 2] if n % 2 == 0 else [v for v in range(3) if v != n % 3]
                broker = 1000 + n
                r = one_round(c, voters, broker)
                acked.add(broker)
                leader = r["leader"] if r["leader"] is not None else c.leader(voters)
                seen = set(
                    b["brokerId"]
                    for b in c.get(leader, "/v1/brokers?consistency=linearizable").json()["brokers"]
                )
                r["lost"] = sorted(acked - seen)
                results.append(r)
                elected = r["electedSeconds"]
                progress(
                    f"round {n + 1}: {r['started']} of 3 started, stood "
                    f"{'?' if elected is None else f'{elected * 1000:.0f}'} ms, leader "
                    f"{r['leaderSeconds'] * 1000:.0f} ms, first write "
                    f"{r['writeSeconds'] * 1000:.0f} ms after majority up "
                    f"(term {r['term']}, lost {len(r['lost'])})"
                )
                for v in set(range(3)) - set(voters):
                    c.start(v)
                c.wait_ready(timeout_s=120)
        finally:
            c.close()
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"full-cluster restarts, {len(results)} rounds (3 voters, fsync always, loopback):")
    for key, name in (
        ("electedSeconds", "winner stood"),
        ("leaderSeconds", "first leader"),
        ("writeSeconds", "first write"),
    ):
        values = [r[key] for r in results if r[key] is not None]
        if not values:
            continue
        print(
            f"  majority up -> {name:<13} p50 {statistics.median(values) * 1000:5.0f} ms  "
            f"p99 {pct(values, 0.99) * 1000:5.0f} ms  max {max(values) * 1000:5.0f} ms"
        )
    lost = sum(len(r["lost"]) for r in results)
    print(f"  acknowledged writes lost: {lost}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
