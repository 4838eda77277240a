"""The order of journal syncs and answers, seen by strace (a check that prints,
not a test: it needs strace and ptrace rights).

Starts a 3-voter loopback cluster with ``--fsync always`` (one process a
voter), attaches ``strace -f`` to every thread of the leader and of one
follower, sends ``--writes`` lone AlterPartition requests one after another,
and reads the system calls back:

* the follower: every answer it sends on the Raft port after appending to
  its journal (``pwrite64`` on ``raft.journal``) must leave after an
  ``fdatasync`` of the journal that began after that append and has
  returned;
* the leader: every HTTP 200 it writes must leave after a majority held the
  write's journal entry synced: its own ``fdatasync`` (begun after its
  append, returned) and one follower's answer read from the Raft port, or
  answers from both followers.

Printed: how many answers were checked on each side, how many broke the
order (0 is the only good figure), and on the leader how many commits were
carried by its own sync and one follower, and how many by two followers
before its sync returned.

    python bench/fsync_order.py [--writes N] [--off-thread] [--keep]

``--off-thread`` runs the voters with the leader's sync on a thread of its
own (``quorum.raft.durability.leader_sync_off_thread``, off by default).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api import fresh_topic, setup  # noqa: E402
from bench.lone_request import LeanAlter, progress, switched  # noqa: E402
from tests.cluster import Cluster  # noqa: E402

# "TID 1733333333.123456 name(fd<...>, ..." and the split forms strace -f writes.
LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")
CALL = re.compile(r"^(\w+)\((\d+)<(.*?)>(?=[,) ])")  # "->" inside a socket's name
RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>")


def syscalls(path: Path) -> list[tuple[float, float, str, str, str]]:
    """(began, returned, call, fd's description, whole line) per system call,
    the two halves of an interrupted call joined by thread."""
    pending: dict[str, tuple[float, str, str, str]] = {}
    calls = []
    for raw in path.read_text(errors="replace").splitlines():
        m = LINE.match(raw)
        if not m:
            continue
        tid, at, rest = m.group(1), float(m.group(2)), m.group(3)
        if rest.endswith("<unfinished ...>"):
            c = CALL.match(rest)
            if c:
                pending[tid] = (at, c.group(1), c.group(3), rest)
            continue
        r = RESUMED.match(rest)
        if r:
            began = pending.pop(tid, None)
            if began is not None:
                calls.append((began[0], at, began[1], began[2], began[3] + rest))
            continue
        c = CALL.match(rest)
        if c:
            calls.append((at, at, c.group(1), c.group(3), rest))
    return sorted(calls)


def is_journal(fd: str) -> bool:
    return fd.endswith("/raft.journal")


def on_ports(fd: str, ports: set[int]) -> bool:
    """A TCP socket one of whose ends is on one of ``ports``."""
    return any(f":{p}]" in fd or f":{p}->" in fd for p in ports)


def check_follower(calls, raft_ports: set[int]) -> tuple[int, int]:
    """(answers checked, answers sent before their entry was synced)."""
    checked = broken = 0
    appended_at = None  # the earliest append not yet covered by a returned sync
    syncs = [(b, r) for b, r, call, fd, _ in calls if call == "fdatasync" and is_journal(fd)]
    for began, _, call, fd, _ in calls:
        if call == "pwrite64" and is_journal(fd) and appended_at is None:
            appended_at = began
        elif call in ("sendto", "sendmsg", "write") and on_ports(fd, raft_ports):
            if appended_at is None:
                continue  # nothing appended since the last synced answer
            checked += 1
            if not any(b >= appended_at and r <= began for b, r in syncs):
                broken += 1
            appended_at = None
    return checked, broken


def check_leader(calls, http_port: int, raft_ports: set[int]) -> dict:
    """Each HTTP 200: did a majority hold its entry synced before it left?"""
    syncs = [(b, r) for b, r, call, fd, _ in calls if call == "fdatasync" and is_journal(fd)]
    appends = [b for b, _, call, fd, _ in calls if call == "pwrite64" and is_journal(fd)]
    reads = [
        (r, fd)
        for _, r, call, fd, line in calls
        if call in ("recvfrom", "read", "recvmsg")
        and on_ports(fd, raft_ports)
        and not re.search(r"= (-1|0)\b", line)
    ]
    figures = {"answers": 0, "broken": 0, "leader_and_one": 0, "two_followers": 0}
    for began, _, call, fd, line in calls:
        if call not in ("write", "sendto", "writev", "sendmsg") or "HTTP/1.1 200" not in line:
            continue
        if not on_ports(fd, {http_port}):
            continue
        before = [a for a in appends if a < began]
        if not before:
            continue
        entry = before[-2] if len(before) > 1 else before[-1]  # the entry, then its end offset
        figures["answers"] += 1
        own = any(b >= entry and r <= began for b, r in syncs)
        peers = {fd for r, fd in reads if entry < r <= began}
        if own and peers:
            figures["leader_and_one"] += 1
        elif len(peers) >= 2:
            figures["two_followers"] += 1
        else:
            figures["broken"] += 1
    return figures


def strace(pid: int, out: Path) -> subprocess.Popen:
    tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    return subprocess.Popen(
        ["strace", "-f", "-ttt", "-yy", "-s", "16", "-o", str(out),
         "-e", "trace=pwrite64,fdatasync,sendto,sendmsg,write,writev,recvfrom,recvmsg,read",
         *[arg for t in tids for arg in ("-p", str(t))]],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


async def run(writes: int, off_thread: bool = False, keep: bool = False) -> int:
    if shutil.which("strace") is None:
        print("bench/fsync_order.py: strace is not installed (apt-get install strace)")
        return 2
    root = Path(tempfile.mkdtemp(prefix="mq-fsync-order-"))
    cluster = Cluster(
        root, fsync="always", extra=["--session-timeout-ms", "3600000", "--http-workers", "0"]
    )
    if off_thread:
        env = switched(root, {"quorum.raft.durability.leader_sync_off_thread": True})
        for i in range(3):
            cluster.env[i] = env
    tracers: list[subprocess.Popen] = []
    try:
        cluster.start()
        cluster.wait_ready()
        leader = cluster.leader()
        follower = next(i for i in range(3) if i != leader)
        url = cluster.url(leader)
        epochs, _, _ = await setup(url, cluster.cluster_id, 1)
        topic_id = await fresh_topic(url, "order", 16)
        outs = {}
        for who, i in (("leader", leader), ("follower", follower)):
            outs[who] = root / f"{who}.strace"
            tracers.append(strace(cluster.procs[i].pid, outs[who]))
        time.sleep(1.0)  # attached
        host, port = url.removeprefix("http://").split(":")
        conn = LeanAlter(host, int(port), epochs, topic_id, list(range(16)))
        await conn.open()
        progress(f"{writes} lone writes under strace")
        for _ in range(writes):
            await conn.one()
        conn.close()
        time.sleep(0.5)
        for t in tracers:
            t.send_signal(signal.SIGINT)
            t.wait(timeout=30)
        raft_ports = set(cluster.raft)
        checked, broken = check_follower(syscalls(outs["follower"]), raft_ports)
        lead = check_leader(syscalls(outs["leader"]), cluster.http[leader], raft_ports)
        print(
            f"-- fsync order under strace: {writes} lone writes, 3 voters, --fsync always, "
            f"the leader's sync {'on a thread of its own' if off_thread else 'on its Raft thread'}"
        )
        print(
            f"follower: {checked} answers on the Raft port after an append; "
            f"{broken} left before the journal's fdatasync returned"
        )
        print(
            f"leader: {lead['answers']} HTTP 200s; {lead['broken']} left before a majority "
            f"had the entry synced; carried by the leader's own sync and one follower: "
            f"{lead['leader_and_one']}, by two followers before the leader's sync returned: "
            f"{lead['two_followers']}"
        )
        return 0
    finally:
        for t in tracers:
            if t.poll() is None:
                t.kill()
        cluster.close()
        if keep:
            print(f"the traces are in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument(
        "--off-thread", action="store_true", help="the leader syncs on a thread of its own"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the cluster's directory and traces"
    )
    args = parser.parse_args()
    if args.writes < 1:
        parser.error("--writes must be 1 or more")
    return asyncio.run(run(args.writes, args.off_thread, args.keep))


if __name__ == "__main__":
    sys.exit(main())
