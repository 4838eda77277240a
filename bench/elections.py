"""Elections on a bad network day (issue 25; figures, not asserts).

Three voters as real ``metaquorum serve`` processes, each in its own network
namespace (as tests/faults: needs root and ``ip netns``), fsync always, a
writer registering brokers through any voter the whole time. Each round:

1. 10 s of writes, then one follower is cut off from the other two voters
   for 20 s (blackhole routes: its packets dropped, the process running),
   then the link heals and the writes go on for 10 s.
2. Printed: the leader and Raft term before and after, the leader changes
   and elections by cause the voters counted (quorum/leadership_events.py),
   and the **write outage of the heal**: the longest gap between two
   acknowledged writes around it (0 expected with pre-vote; with plain Raft
   the returning voter's higher term deposed the leader).
3. The leader's heartbeat gaps as the followers read them, from their
   ``/metrics`` histograms (bucket bounds): over 10 s idle (heartbeats every
   0.1 s alone) and 10 s of writes, with ``--burn N`` processes spinning on
   the CPU beside the voters: the jitter that the 0.7-1.5 s election
   timeout must outlast.

Rounds run with pre-vote (the default) and with ``serve --no-pre-vote``.

    python bench/elections.py [--rounds N] [--burn N] [--cut-s 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.faults.netns import Network, netns_unavailable_reason  # noqa: E402
from tests.faults.voters import NetnsCluster  # noqa: E402
from tests.k8s_rolling import Writer  # noqa: E402


def progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def _spin() -> None:
    while True:
        pass


def gap_buckets(c: NetnsCluster) -> list[tuple[float, int]]:
    """The leader-heartbeat-gap histogram summed over the voters: (le, count)."""
    total: dict[float, int] = {}
    for i in range(c.n):
        try:
            text = c.http.get(c.url(i) + "/metrics", timeout=5.0).text
        except Exception:  # noqa: BLE001 - a voter that does not answer adds nothing
            continue
        for line in text.splitlines():
            if line.startswith("metaquorum_leader_heartbeat_gap_seconds_bucket{"):
                le = line.split('le="', 1)[1].split('"', 1)[0]
                bound = float("inf") if le == "+Inf" else float(le)
                total[bound] = total.get(bound, 0) + int(float(line.rsplit(" ", 1)[1]))
    return sorted(total.items())


def gap_quantiles(before: list, after: list) -> dict:
    """p50/p99 (bucket bounds, ms) of the gaps measured between two readings."""
    was = dict(before)
    counts = [(le, n - was.get(le, 0)) for le, n in after]
    total = counts[-1][1] if counts else 0
    out: dict = {"gaps": total}
    for name, q in (("p50Ms", 0.5), ("p99Ms", 0.99), ("p999Ms", 0.999)):
        out[name] = next(
            (le * 1000 for le, n in counts if total and n >= q * total), None
        )  # cumulative counts: the first bound that holds the quantile
    return out


def elections_of(c: NetnsCluster) -> list[dict]:
    return [((c.status(i) or {}).get("elections") or {}) for i in range(c.n)]


def summed(rows: list[dict], key: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in rows:
        for cause, n in (row.get(key) or {}).items():
            out[cause] = out.get(cause, 0) + n
    return {k: v for k, v in out.items() if v}


def one_round(pre_vote: bool, cut_s: float, root: Path) -> dict:
    net = Network(3)
    c = None
    writer = None
    try:
        net.setup()
        c = NetnsCluster(net, root, extra=[] if pre_vote else ["--no-pre-vote"]).start()
        c.wait_ready()
        leader = c.wait(lambda: c.leader_and_term(), 60, "a leader")
        # The bench's schedule: 10 s idle (heartbeats alone), 10 s of writes.
        idle = gap_buckets(c)
        time.sleep(10)
        loaded = gap_buckets(c)
        writer = Writer(c.urls, "", c.cluster_id).start()
        c.wait(lambda: len(writer.acked) >= 20, 60, "writes flowing")
        follower = next(i for i in range(c.n) if i != leader[0])
        time.sleep(10)
        cut = gap_buckets(c)
        progress(f"cutting voter {follower} off for {cut_s:.0f} s (leader {leader[0]})")
        c.net.partition([i for i in range(c.n) if i != follower], [follower])
        time.sleep(cut_s)
        c.net.heal_cuts()
        healed = time.monotonic()
        progress("healed; 10 s more of writes")
        time.sleep(10)
        after = c.wait(lambda: c.leader_and_term(), 60, "a leader after the heal")
        writer.stop()
        rows = elections_of(c)
        return {
            "preVote": pre_vote,
            "leaderBefore": leader[0],
            "termBefore": leader[1],
            "leaderAfter": after[0],
            "termAfter": after[1],
            "healOutageS": round(writer.window(healed - 0.5, healed + 10), 3),
            "acked": len(writer.acked),
            "unknown": len(writer.unknown),
            "failed": len(writer.failed),
            "electionsStarted": summed(rows, "electionsStarted"),
            "leadershipLost": summed(rows, "leadershipLost"),
            "gapsIdle": gap_quantiles(idle, loaded),
            "gapsWriting": gap_quantiles(loaded, cut),
            "gapMaxMs": max(
                (((r.get("heartbeatGaps") or {}).get("maxMs") or 0) for r in rows), default=0
            ),
        }
    finally:
        if writer is not None:
            writer.stop()
        if c is not None:
            c.close()
        net.teardown()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds per mode")
    parser.add_argument("--cut-s", type=float, default=20.0)
    parser.add_argument("--burn", type=int, default=0, help="CPU-spinning processes beside")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    why = netns_unavailable_reason()
    if why is not None:
        print(f"bench/elections.py needs network namespaces: {why}", file=sys.stderr)
        return 2
    burners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.burn)]
    for b in burners:
        b.start()
    results = []
    try:
        for pre_vote in (True, False):
            for k in range(args.rounds):
                mode = "pre-vote" if pre_vote else "plain Raft"
                progress(f"{mode}, round {k + 1} of {args.rounds}")
                with tempfile.TemporaryDirectory(prefix="mq-elections-") as root:
                    results.append(one_round(pre_vote, args.cut_s, Path(root)))
    finally:
        for b in burners:
            b.terminate()
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"elections: a follower cut off for {args.cut_s:.0f} s, then healed ({args.burn} burners)"
    )
    for r in results:
        mode = "pre-vote  " if r["preVote"] else "plain Raft"
        print(
            f"  {mode} leader {r['leaderBefore']}->{r['leaderAfter']}, term "
            f"{r['termBefore']}->{r['termAfter']}; heal outage {r['healOutageS']:.2f} s; "
            f"elections {r['electionsStarted'] or 'none'}; lost {r['leadershipLost'] or 'none'}; "
            f"acked {r['acked']}, unknown {r['unknown']}, failed {r['failed']}"
        )
    print("  leader heartbeat gaps read by followers (bucket bounds; election timeout 700 ms+):")
    for r in results:
        mode = "pre-vote  " if r["preVote"] else "plain Raft"
        for phase in ("gapsIdle", "gapsWriting"):
            g = r[phase]
            print(
                f"    {mode} {'idle   ' if phase == 'gapsIdle' else 'writing'} {g['gaps']:6d} "
                f"gaps: p50 <= {g['p50Ms']} ms, p99 <= {g['p99Ms']} ms, "
                f"p99.9 <= {g['p999Ms']} ms"
            )
    print(f"  longest gap any voter read in any round: {max(r['gapMaxMs'] for r in results)} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
