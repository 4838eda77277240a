"""Failover when the leader hangs instead of dying (issue 42; figures, not asserts).

A killed leader's kernel closes its sockets and the followers react at once
(``bench/quorum.py`` failover). A leader that *hangs* closes nothing: the
followers must notice its silence. Three voters as real ``metaquorum serve``
processes, each in its own network namespace (as tests/faults: needs root and
``ip netns``), fsync always. Each round:

1. A steady cluster: every voter ready and one active controller.
2. The fault, at a moment printed as 0: ``freeze`` stops the leader with
   SIGSTOP (its child processes too), as a stalled VM or a disk that blocks
   every thread would; ``blackhole`` drops every packet between the leader
   and the other voters (routes inside the namespaces; the process runs on
   and clients still reach it), as a silent network fault would.
3. Measured: the time from the fault to the **first write acknowledged by
   another voter**. Writers ask every voter at once, each on its own
   connection with a 0.3 s deadline per request: one per voter follows
   redirects, as a broker does, and one per voter does not (it sees the
   moment that voter takes writes itself, not a request it sent on to the
   old leader and waits out), so the figure is the cluster's, not one
   client's retry policy.
4. The leader is resumed (SIGCONT) or its links healed, and the round ends
   when the cluster is steady again.

At the end every acknowledged write is read back from the active controller
(a linearizable read): the count of acknowledged writes lost must be 0.
Printed: per round the new leader, the failover time, and the elections the
voters counted by cause; then p50/p99/max per fault.

    python bench/hung_leader.py [--rounds 20] [--faults freeze,blackhole] [--burn N] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.faults.netns import Network, netns_unavailable_reason  # noqa: E402
from tests.faults.voters import NetnsCluster  # noqa: E402

MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]
REQUEST_DEADLINE_S = 0.3  # a writer gives a request this long, then asks again
FAULTS = ("freeze", "blackhole")


def progress(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _spin() -> None:
    while True:
        pass


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc), parents first."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return out


def signal_tree(pid: int, sig: int) -> None:
    for p in process_tree(pid):
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


class Writers:
    """One writer per voter URL, registering a new broker id per write, for
    as long as it runs. ``acked``: (broker id, monotonic time of the answer,
    the URL that answered)."""

    def __init__(self, urls: list[str], cluster_id: str) -> None:
        self.urls = urls
        self.cluster_id = cluster_id
        self.acked: list[tuple[int, float, str]] = []
        self.unknown = 0  # deadline passed: may or may not commit
        self._next_id = 10_000
        self._stop = asyncio.Event()

    def _broker_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def _write(self, http: httpx.AsyncClient, url: str, follow: bool) -> None:
        broker_id = self._broker_id()
        body = {
            "brokerId": broker_id,
            "clusterId": self.cluster_id,
            "incarnationId": str(uuid.uuid4()),
            "listeners": [],
            "features": MV,
        }
        target = url
        for _hop in range(3):  # one redirect, and one more if the leader moved meanwhile
            try:
                r = await http.post(
                    target + "/v1/brokers/register", json=body, timeout=REQUEST_DEADLINE_S
                )
            except httpx.TimeoutException:
                self.unknown += 1
                return
            except httpx.HTTPError:
                await asyncio.sleep(0.01)
                return
            if r.status_code == 307 and follow:
                target = r.headers["location"].split("/v1/", 1)[0]
                continue
            if r.status_code == 200 and r.json().get("errorCode") == 0:
                self.acked.append((broker_id, time.monotonic(), target))
            else:
                await asyncio.sleep(0.01)  # 503: no leader yet; the next write asks again
            return

    async def _loop(self, url: str, follow: bool) -> None:
        async with httpx.AsyncClient(trust_env=False) as http:
            while not self._stop.is_set():
                await self._write(http, url, follow)
                await asyncio.sleep(0.005)

    async def run(self) -> None:
        await asyncio.gather(
            *(self._loop(u, follow) for u in self.urls for follow in (True, False))
        )

    def stop(self) -> None:
        self._stop.set()

    def first_ack_after(self, t: float, not_from: str) -> tuple[float, str] | None:
        """(time, URL) of the first write acknowledged after ``t`` by another voter."""
        for _, at, url in self.acked:
            if at > t and url != not_from:
                return at, url
        return None


def elections(c: NetnsCluster) -> dict[str, int]:
    """Elections started by cause, summed over the voters that answer."""
    out: dict[str, int] = {}
    for i in range(c.n):
        row = ((c.status(i) or {}).get("elections") or {}).get("electionsStarted") or {}
        for cause, n in row.items():
            out[cause] = out.get(cause, 0) + n
    return out


def steady(c: NetnsCluster) -> int | None:
    """The leader's slot once every voter is ready and names it, else None."""
    leader = c.leader()
    if leader is None:
        return None
    node = c.node_ids[leader]
    for i in range(c.n):
        s = c.status(i, timeout=1.0)
        if not s or s.get("leaderId") != node or not c.ready(i):
            return None
    return leader


def wait_steady(c: NetnsCluster) -> int:
    found = c.wait(
        lambda: (lambda s: None if s is None else [s])(steady(c)), 60, "a steady cluster"
    )
    return found[0]


async def one_fault(c: NetnsCluster, writers: Writers, fault: str, k: int) -> dict:
    loop = asyncio.get_running_loop()
    leader = await loop.run_in_executor(None, wait_steady, c)
    before = await loop.run_in_executor(None, elections, c)
    await asyncio.sleep(0.5)  # writes flowing through the steady leader
    others = [i for i in range(c.n) if i != leader]
    at = time.monotonic()
    if fault == "freeze":
        signal_tree(c.serve_pid(leader), signal.SIGSTOP)
    else:
        c.net.partition([leader], others)
    deadline = at + 30
    first = None
    while time.monotonic() < deadline:
        first = writers.first_ack_after(at, not_from=c.url(leader))
        if first is not None:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.5)
    if fault == "freeze":
        signal_tree(c.serve_pid(leader), signal.SIGCONT)
    else:
        c.net.heal_cuts()
    new = None if first is None else c.urls.index(first[1])
    after = await loop.run_in_executor(None, elections, c)
    caused = {k2: after.get(k2, 0) - before.get(k2, 0) for k2 in after}
    row = {
        "fault": fault,
        "round": k,
        "leader": leader,
        "newLeader": new,
        "failoverS": None if first is None else round(first[0] - at, 3),
        "elections": {k2: v for k2, v in caused.items() if v},
    }
    took = "no write within 30 s" if first is None else f"{first[0] - at:.3f} s"
    progress(f"{fault} {k}: leader {leader} -> {new}: first write after {took}; {row['elections']}")
    return row


async def run(c: NetnsCluster, faults: list[str], rounds: int) -> tuple[list[dict], dict]:
    writers = Writers(c.urls, c.cluster_id)
    task = asyncio.ensure_future(writers.run())
    rows = []
    try:
        for k in range(rounds):
            for fault in faults:
                rows.append(await one_fault(c, writers, fault, k + 1))
    finally:
        writers.stop()
        await task
    lost = await check_acked(c, writers)
    return rows, {"acked": len(writers.acked), "unknown": writers.unknown, "lost": lost}


async def check_acked(c: NetnsCluster, writers: Writers) -> list[int]:
    """The acknowledged broker ids that the active controller does not hold."""
    loop = asyncio.get_running_loop()
    leader = await loop.run_in_executor(None, wait_steady, c)
    async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
        r = await http.get(c.url(leader) + "/v1/brokers", params={"consistency": "linearizable"})
        r.raise_for_status()
        held = {b["brokerId"] for b in r.json()["brokers"]}
    return sorted(b for b, _, _ in writers.acked if b not in held)


def quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=20, help="rounds of each fault")
    parser.add_argument("--faults", default=",".join(FAULTS), help="freeze,blackhole")
    parser.add_argument("--burn", type=int, default=0, help="CPU-spinning processes beside")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", help="keep the voters' data dirs and logs in this directory")
    args = parser.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    wrong = [f for f in faults if f not in FAULTS]
    if wrong or not faults:
        parser.error(f"--faults {args.faults!r}: each must be one of {', '.join(FAULTS)}")
    why = netns_unavailable_reason()
    if why is not None:
        print(f"bench/hung_leader.py needs network namespaces: {why}", file=sys.stderr)
        return 2
    burners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.burn)]
    for b in burners:
        b.start()
    net = Network(3)
    c = None
    try:
        with tempfile.TemporaryDirectory(prefix="mq-hung-") as tmp:
            root = args.keep or tmp
            net.setup()
            c = NetnsCluster(net, Path(root)).start()
            c.wait_ready()
            progress(f"3 voters ready; {args.rounds} rounds of {', '.join(faults)}")
            rows, totals = asyncio.run(run(c, faults, args.rounds))
    finally:
        for b in burners:
            b.terminate()
        if c is not None:
            c.close()
        net.teardown()
    if args.json:
        print(json.dumps({"rounds": rows, **totals}, indent=2))
        return 0
    print(f"hung leader: time from the fault to the first write a new leader acknowledged "
          f"({args.burn} burners)")  # fmt: skip
    for fault in faults:
        times = [r["failoverS"] for r in rows if r["fault"] == fault and r["failoverS"] is not None]
        missed = sum(1 for r in rows if r["fault"] == fault and r["failoverS"] is None)
        causes: dict[str, int] = {}
        for r in rows:
            if r["fault"] == fault:
                for cause, n in r["elections"].items():
                    causes[cause] = causes.get(cause, 0) + n
        if times:
            print(
                f"  {fault:9s} {len(times)} rounds: p50 {statistics.median(times):.3f} s, "
                f"p99 {quantile(times, 0.99):.3f} s, max {max(times):.3f} s, "
                f"within 1 s {sum(t <= 1.0 for t in times)}/{len(times)}"
                + (f", {missed} with no new leader" if missed else "")
                + f"; elections {causes}"
            )
    print(f"  writes acknowledged {totals['acked']}, outcome unknown {totals['unknown']}, "
          f"acknowledged and lost {len(totals['lost'])}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
