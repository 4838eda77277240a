"""Leader changes as the new leader reports them, against what a client saw
(issue 42; figures, not asserts).

Three real ``metaquorum serve`` voters on loopback (tests/cluster.py), fsync
always, a writer registering brokers through every voter the whole time,
ignoring Retry-After (tests/k8s_rolling.Writer, eager). Each round moves the
leader one way: ``kill`` (SIGKILL, then it starts again), ``freeze`` (SIGSTOP
until another voter leads, then SIGCONT), or ``transfer``
(``POST /v1/quorum/transfer-leadership``). Printed per round, from the new
leader's ``elections.leadershipsWon`` (quorum/leadership_events.py): the
cause, the silence before it stood and the time to elected, to active and to
the first write, measured from the old leader's last AppendEntries; and the
client's own figure: the longest gap between two acknowledged writes around
the change. The two agree when ``firstWriteMs`` is a faithful figure of the
outage. The writer sends one write at a time with a 5 s timeout: a write it
sent to a frozen leader waits that long, and so does the new leader's first
write (it can only time a write that comes).

    python bench/leader_changes.py [--rounds N] [--ways kill,freeze,transfer] [--json]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster  # noqa: E402
from tests.k8s_rolling import Writer  # noqa: E402


def one_round(c: Cluster, writer: Writer, way: str) -> dict:
    old = c.leader()
    term = c.status(old)["raftTerm"]
    c.wait(lambda: len(writer.acked) > 20, 60, "writes before the fault")
    fault_at = time.monotonic()
    if way == "kill":
        c.kill(old)
    elif way == "freeze":
        c.signal(old, signal.SIGSTOP)
    else:
        others = [i for i in range(c.n) if i != old]
        r = c.post(old, "/v1/quorum/transfer-leadership", {"targetNodeId": others[0]})
        assert r.status_code == 200, r.text
    survivors = [i for i in range(c.n) if i != old]
    new = c.leader(among=survivors, timeout_s=60)

    def first_write_timed():
        elections = (c.status(new) or {}).get("elections") or {}
        won = [w for w in elections.get("leadershipsWon", []) if w["term"] > term]
        return won[-1] if won and won[-1]["firstWriteMs"] is not None else None

    won = c.wait(first_write_timed, 30, "the new leader timing its first write")
    settled = fault_at + won["firstWriteMs"] / 1000
    c.wait(lambda: writer.acked[-1][1] > settled, 30, "writes after the new leader's first")
    if way == "kill":
        c.start(old)
    elif way == "freeze":
        c.signal(old, signal.SIGCONT)
    c.wait_ready(timeout_s=120)
    return {
        "way": way,
        "from": old,
        "to": new,
        **{k: won[k] for k in ("cause", "previousLeaderId", "silenceMs", "electedMs")},
        **{k: won[k] for k in ("activeMs", "firstWriteMs")},
        "clientGapMs": round(writer.window(fault_at, settled) * 1000, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each way")
    ap.add_argument("--ways", default="kill,freeze,transfer")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        c = Cluster(Path(tmp), fsync="always")
        writer = None
        try:
            c.start()
            c.wait_ready(timeout_s=120)
            urls = [c.url(i) for i in range(c.n)]
            writer = Writer(urls, "", c.cluster_id, eager=True).start()
            for _ in range(args.rounds):
                for way in args.ways.split(","):
                    row = one_round(c, writer, way)
                    rows.append(row)
                    if not args.json:
                        print(
                            f"{row['way']:<8} {row['from']} -> {row['to']}: cause {row['cause']}, "
                            f"previous {row['previousLeaderId']}; since its last heartbeat: "
                            f"stood {row['silenceMs']} ms, elected {row['electedMs']} ms, "
                            f"active {row['activeMs']} ms, first write {row['firstWriteMs']} ms; "
                            f"client: longest gap between acks {row['clientGapMs']} ms",
                            flush=True,
                        )
        finally:
            if writer is not None:
                writer.stop()
            c.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for way in args.ways.split(","):
        mine = [r for r in rows if r["way"] == way]
        if mine:
            first = [r["firstWriteMs"] for r in mine]
            client = [r["clientGapMs"] for r in mine]
            print(
                f"{way}: {len(mine)} rounds; first write p50 {statistics.median(first):.0f} ms, "
                f"max {max(first):.0f} ms; client's longest gap between acks p50 "
                f"{statistics.median(client):.0f} ms, max {max(client):.0f} ms"
            )


if __name__ == "__main__":
    main()
