"""KRaft's lab size on one cluster: a voter's memory, a cold restart, a
replaced disk and a new voter at 2,000,000 partitions (figures, not asserts).

Three voters as real ``metaquorum serve`` processes on loopback (``--fsync
always``, the default layout for this machine), loaded with ``--partitions``
partitions (default 2,000,000; RF 3 over ``--brokers`` brokers, default 100,
in topics of ``--per-topic`` partitions, default 9,999: a topic is created
with as many as one request may write, its TopicRecord included), written to
until every voter has a snapshot of them (bench/disk_replace.py's set-up). A
writer registers a broker every ``--write-interval-ms`` through the leader
all along. Then:

* memory: each voter's processes together (the serve process and every
  process under it): resident set and proportional set (a forked snapshot
  writer shares its parent's pages; PSS counts each page once), and what
  that is a partition;
* restart: a follower SIGKILLed and started again on its data dir; the time
  to its HTTP API answering, to ``/readyz`` 200 and to caught up with the
  leader's commit index read just before;
* disk: a follower SIGKILLed, its data dir deleted and started again
  (bench/disk_replace.py's round): the time to the snapshot loaded, caught
  up, and ``role: voter`` again;
* add: a fourth voter started empty and added (bench/add_voter.py's
  round), then removed again, so the cluster is three voters as it began.

Each step prints the longest gap between two acknowledged writes from its
start to its end.

    python bench/voter_scale.py [--partitions N] [--brokers B] [--per-topic P] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from add_voter import add_round, remove_round  # noqa: E402 - bench/, after the path is set
from disk_replace import (  # noqa: E402
    LIMIT_S,
    PodCluster,
    Writer,
    loaded_cluster,
    partition_count,
    progress,
    replace_round,
    status,
)


def descendants(pid: int) -> list[int]:
    """``pid`` and every process under it (from each process's parent in /proc)."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(proc.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, ()))
    return found


def memory(pid: int) -> dict:
    """The voter's processes together: RSS, PSS and USS (pages no other
    process maps) in bytes, each process's USS, and the image files the
    serve process holds (memfds: memory that is no process's until mapped).
    ``total`` is PSS plus the image files: an upper bound on the voter's
    memory, as a file's mapped pages are counted in both. A snapshot writer
    (a fork of the serve process, with its command line, alive while it
    writes) is counted apart: it shares its parent's pages until either
    writes them."""
    rss = pss = uss = writers = 0
    pids, each = [], []
    own = Path(f"/proc/{pid}/cmdline").read_bytes()
    for p in descendants(pid):
        try:
            if p != pid and Path(f"/proc/{p}/cmdline").read_bytes() == own:
                writers += 1
                continue
        except OSError:
            continue
        pids.append(p)
    for p in pids:
        fields: dict[str, int] = {}
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                field, _, rest = line.partition(":")
                if rest.strip().endswith("kB"):
                    fields[field] = int(rest.split()[0]) * 1024
            role = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # it ended
        private = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
        rss += fields.get("Rss", 0)
        pss += fields.get("Pss", 0)
        uss += private
        name = (
            "serve"
            if p == pid
            else next(
                (part.decode().rsplit(".", 1)[-1] for part in role if part.startswith(b"voter.")),
                "process",
            )
        )
        each.append({"pid": p, "role": name, "uss": private, "pss": fields.get("Pss", 0)})
    files = image_files(pid)
    return {
        "processes": len(pids),
        "rss": rss,
        "pss": pss,
        "uss": uss,
        "imageFiles": files,
        "total": pss + files,
        "each": each,
        "snapshotWriters": writers,
    }


def image_files(pid: int) -> int:
    """Bytes of the image files (voter/shared_image.py's memfds) ``pid`` holds."""
    total = 0
    fds = Path(f"/proc/{pid}/fd")
    try:
        entries = list(fds.iterdir())
    except OSError:
        return 0
    for fd in entries:
        try:
            if os.readlink(fd).startswith("/memfd:metaquorum-image"):
                total += os.stat(fd).st_size
        except OSError:
            continue
    return total


def restart_round(cluster: PodCluster, writer: Writer) -> dict:
    """A follower SIGKILLed and started again on its own data dir."""
    cluster.wait_ready(timeout_s=300)
    leader = cluster.leader()
    victim = next(i for i in range(cluster.n) if i != leader)
    killed = time.monotonic()
    cluster.kill(victim)
    lead = status(cluster, leader) or {}
    cluster.start(victim)
    started = time.monotonic()
    seen: dict[str, float | None] = {"answering": None, "ready": None, "caughtUp": None}
    while time.monotonic() - started < LIMIT_S and seen["caughtUp"] is None:
        if not cluster.alive(victim):
            raise SystemExit(f"voter {victim} exited after its restart:\n{cluster.tail(victim)}")
        s = status(cluster, victim, timeout=2.0)
        now = time.monotonic() - started
        if s is not None:
            seen["answering"] = seen["answering"] or now
            if seen["ready"] is None and cluster.ready(victim):
                seen["ready"] = now
            if seen["ready"] is not None and s["raftLastApplied"] >= lead.get("raftCommitIndex", 0):
                seen["caughtUp"] = now
        time.sleep(0.02)
    return {
        "victim": victim,
        **seen,
        "longestWriteGap": writer.longest_gap(killed, time.monotonic()),
    }


def describe(m: dict) -> str:
    """One voter's memory on one line: totals, then each process's own (USS)."""
    each = ", ".join(f"{p['role']} {mib(p['uss'])}" for p in m["each"])
    return (
        f"{m['processes']} processes, RSS {mib(m['rss'])}, PSS {mib(m['pss'])}, image files "
        f"{mib(m['imageFiles'])}, in all <= {mib(m['total'])}; each one's own: {each}"
    )


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def secs(v: float | None) -> str:
    return "never" if v is None else f"{v:.2f} s"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=2_000_000)
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--per-topic", type=int, default=9_999)
    parser.add_argument(
        "--compaction-entries",
        type=int,
        default=2_000,
        help="the voters' --compaction-entries (default 2,000: low enough that the load "
        "ends in a snapshot, so a replaced disk and a new voter are sent one; each "
        "snapshot of N partitions costs every voter a writer process for seconds)",
    )
    parser.add_argument("--write-interval-ms", type=float, default=20)
    parser.add_argument("--http-workers", help="the voters' --http-workers (default: theirs)")
    parser.add_argument("--dir", help="keep the data dirs and voter logs here (default: removed)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.per_topic < 1 or args.partitions < 1 or args.brokers < 3:
        parser.error("--partitions and --per-topic must be >= 1 and --brokers >= 3 (RF 3)")
    extra = ("--http-workers", args.http_workers) if args.http_workers else ()
    out: dict = {"partitions": args.partitions, "brokers": args.brokers, "load": os.getloadavg()}
    t0 = time.monotonic()
    with loaded_cluster(
        args.dir,
        args.partitions,
        args.compaction_entries,
        "voter-scale-",
        per_topic=args.per_topic,
        brokers=args.brokers,
        extra=extra,
    ) as cluster:
        out["loadedInS"] = time.monotonic() - t0
        out["memory"] = [memory(cluster.procs[i].pid) for i in range(cluster.n)]
        for i, m in enumerate(out["memory"]):
            progress(f"voter {i}: {describe(m)}")
        cluster.removed = set()  # bench/add_voter.py's rounds keep the removed here
        writer = Writer(cluster, cluster.leader(), args.write_interval_ms / 1000)
        try:
            progress("a follower restarted on its data dir")
            out["restart"] = restart_round(cluster, writer)
            progress(json.dumps(out["restart"]))
            progress("a follower's disk replaced")
            out["disk"] = replace_round(cluster, writer, args.partitions)
            progress(json.dumps(out["disk"]))
            progress("a fourth voter added")
            out["add"] = add_round(cluster, writer, args.partitions)
            progress(json.dumps(out["add"]))
            if out["add"]["voter"] is not None:  # back to three voters
                out["remove"] = remove_round(cluster, writer, out["add"]["node"])
            out["memoryAfter"] = [
                memory(cluster.procs[i].pid) for i in range(3) if cluster.alive(i)
            ]
            out["partitionsSeen"] = partition_count(cluster, cluster.leader())
        finally:
            writer.stop()
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    n = args.partitions
    print(
        f"{n:,} partitions, RF 3, {args.brokers} brokers, topics of {args.per_topic:,} "
        f"(3 voters, fsync always, a write every {args.write_interval_ms:.0f} ms; "
        f"load at start {out['load'][0]:.1f}); loaded in {out['loadedInS']:.0f} s"
    )
    for i, m in enumerate(out["memory"]):
        print(f"  voter {i}: {describe(m)} ({m['total'] / n:,.0f} B a partition in all)")
    for i, m in enumerate(out.get("memoryAfter", [])):
        print(f"  after the rounds, voter {i}: {describe(m)}")
    r, d, a = out["restart"], out["disk"], out["add"]
    print(
        f"  cold restart: answering {secs(r['answering'])}, ready {secs(r['ready'])}, "
        f"caught up {secs(r['caughtUp'])}; longest write gap {r['longestWriteGap']:.3f} s"
    )
    print(
        f"  replaced disk: snapshot {secs(d['snapshot'])}, caught up {secs(d['caughtUp'])}, "
        f"voter {secs(d['voter'])}; longest write gap {d['longestWriteGap']:.3f} s"
    )
    print(
        f"  new voter: snapshot {secs(a['snapshot'])}, caught up {secs(a['caughtUp'])}, "
        f"answered {secs(a['answered'])} ({a['answer']}), voter {secs(a['voter'])}; "
        f"longest write gap {a['longestWriteGap']:.3f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
