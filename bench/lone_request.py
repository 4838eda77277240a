"""One write alone: where a lone AlterPartition's time goes (figures, not asserts).

Starts a real 3-voter loopback cluster with ``--fsync always`` and prints,
side by side:

* the disk's own ``fdatasync`` latency (p50/p99) for a small write into
  allocated space, one writer alone: the floor of one commit's own sync;
* single-partition AlterPartition at 1, 8 and 64 connections: requests/s,
  p50, p99 (wrk when installed, ``apt-get install wrk``; otherwise a lean
  Python client, which says so and costs the two cores more);
* each voter's own journal syncs during the lone requests (its ``/metrics``:
  syncs and the seconds they took), beside the disk's figure alone: what a
  sync costs with three voters syncing one disk and sharing the cores;
* the per-stage breakdown of a lone request: ``--lone`` requests sent one
  after another by a lean client in this process, each stage timed by the
  voters themselves (quorum/stage_trace.py, on through
  ``METAQUORUM_STAGE_TRACE``), on the clock every process shares, lined up by
  the request's Raft index. Each row is the median over the requests of the
  time from the stage before; the critical path is the sum of the rows a
  request waits for in turn.

    python bench/lone_request.py [--lone N] [--seconds S] [--http-workers K]
                                 [--clients 1,8,64] [--switch NAME=on|off ...]
                                 [--leader-sync-thread] [--no-disk] [--json]

``--no-disk`` keeps the voters' data dirs on a tmpfs (/dev/shm): every
``fdatasync`` returns at once, and what is left is the floor of everything
but the disk (not durable: a measurement, never a way to run).
``--switch NAME=off`` (any switch of metaquorum/speed_switches.py, on or
off) runs the voters with that switch set, and ``--leader-sync-thread``
with the leader's journal sync on a thread of its own
(``quorum.raft.durability.leader_sync_off_thread``, off by default): run
one and the default one after the other for a before/after.

The stages are in docs/performance.md ("One write alone"). The machine's
load average is printed with every figure: on a shared 2-core machine
a lone request's p50 moves with what else runs.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import orjson
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api import alter_partitions, alter_script, fresh_topic, run_wrk, setup  # noqa: E402
from quorum import stage_trace  # noqa: E402
from tests.cluster import Cluster  # noqa: E402

DISK_SYNC_S = 2.0
DISK_WRITE_BYTES = 1_000  # one batch of one AlterPartition record, about
TAIL_SHARE = 0.02  # the slowest requests whose stages get a column of their own


def progress(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def disk_sync(directory: str, seconds: float = DISK_SYNC_S) -> dict:
    """One writer alone: a small pwrite into allocated space, then fdatasync."""
    path = os.path.join(directory, "disk-probe")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.pwrite(fd, bytes(16 << 20), 0)
        os.fdatasync(fd)
        data, offset, took = os.urandom(DISK_WRITE_BYTES), 0, []
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            os.pwrite(fd, data, offset)
            offset = (offset + DISK_WRITE_BYTES) % ((16 << 20) - DISK_WRITE_BYTES)
            t = time.perf_counter()
            os.fdatasync(fd)
            took.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    return {"syncs": len(took), "p50_ms": pct(took, 0.5) * 1e3, "p99_ms": pct(took, 0.99) * 1e3}


# ---------------------------------------------------------------- a lean client


class LeanAlter:
    """One keep-alive connection that flips the ISR of its own partitions
    (led by broker 1, epochs from 0) between [1,2,3] and [1,2]."""

    def __init__(self, host: str, port: int, epochs: dict, topic_id: str, partitions: list[int]):
        self.host, self.port = host, port
        self.epochs, self.topic_id = epochs, topic_id
        self.partitions = partitions
        self.pe = dict.fromkeys(partitions, 0)
        self.shrunk = dict.fromkeys(partitions, False)
        self.next = 0
        self.errors = 0

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        self.writer.close()

    def _request(self) -> tuple[int, bytes]:
        p = self.partitions[self.next % len(self.partitions)]
        self.next += 1
        e = self.epochs
        isr = [1, 2, 3] if self.shrunk[p] else [1, 2]
        body = orjson.dumps(
            {
                "brokerId": 1,
                "brokerEpoch": e[1],
                "topics": [
                    {
                        "topicId": self.topic_id,
                        "partitions": [
                            {
                                "partitionIndex": p,
                                "leaderEpoch": 0,
                                "partitionEpoch": self.pe[p],
                                "newIsrWithEpochs": [
                                    {"brokerId": b, "brokerEpoch": e[b]} for b in isr
                                ],
                            }
                        ],
                    }
                ],
            }
        )
        head = (
            f"POST /v1/alter-partition?version=3 HTTP/1.1\r\nHost: {self.host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        return p, head.encode() + body

    async def one(self) -> tuple[int, int]:
        """Sends one request and reads its answer: (sent, received) in monotonic ns."""
        p, data = self._request()
        sent = time.monotonic_ns()
        self.writer.write(data)
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        body = await self.reader.readexactly(length)
        received = time.monotonic_ns()
        answer = orjson.loads(body)
        part = answer["topics"][0]["partitions"][0] if answer.get("errorCode") == 0 else None
        if part is not None and part["errorCode"] == 0:
            self.pe[p] = part["partitionEpoch"]
            self.shrunk[p] = not self.shrunk[p]
        else:
            self.errors += 1
        return sent, received


async def lean_load(url: str, epochs: dict, topic_id: str, clients: int, seconds: float) -> dict:
    host, port = url.removeprefix("http://").split(":")
    conns = [
        LeanAlter(host, int(port), epochs, topic_id, list(range(i, 2000, clients)))
        for i in range(clients)
    ]
    for c in conns:
        await c.open()
    latencies: list[float] = []
    stop = time.monotonic() + seconds

    async def run(c: LeanAlter) -> None:
        while time.monotonic() < stop:
            sent, received = await c.one()
            latencies.append((received - sent) / 1e6)

    start = time.monotonic()
    await asyncio.gather(*(run(c) for c in conns))
    elapsed = time.monotonic() - start
    for c in conns:
        c.close()
    return {
        "requests_per_s": len(latencies) / elapsed,
        "p50_ms": pct(latencies, 0.5),
        "p99_ms": pct(latencies, 0.99),
        "errors": sum(c.errors for c in conns),
    }


# ---------------------------------------------------------------- the breakdown

# (row, from stage, to stage, whose): "leader" / "follower" (the first to
# answer) events of the request's Raft index, or the client's own.
ROWS = (
    ("client -> app (loopback, uvicorn's HTTP parse)", ("client", "sent"), ("leader", "route")),
    ("route: auth, body parse -> orderer", ("leader", "route"), ("leader", "submit")),
    ("decide + encode -> handed to Raft", ("leader", "submit"), ("leader", "propose")),
    ("hand-off to the Raft thread -> leader append", ("leader", "propose"), ("leader", "append")),
    ("leader: pickle, compress, encrypt, send", ("leader", "append"), ("leader", "sent")),
    ("leader's own journal sync (from its send)", ("leader", "sent"), ("leader", "synced")),
    ("send -> follower reads the AppendEntries", ("leader", "sent"), ("follower", "received")),
    ("follower: decode -> append", ("follower", "received"), ("follower", "append")),
    ("follower: journal sync", ("follower", "append"), ("follower", "synced")),
    ("follower: answer out", ("follower", "synced"), ("follower", "acked")),
    ("answer -> leader reads it", ("follower", "acked"), ("leader", "ack_in")),
    (
        "both durable (leader sync, first answer) -> commit",
        ("leader", "ready"),
        ("leader", "commit"),
    ),
    ("commit -> applied (leader)", ("leader", "commit"), ("leader", "applied")),
    ("applied -> settled on the event loop", ("leader", "applied"), ("leader", "settled")),
    ("settled -> answer built", ("leader", "settled"), ("leader", "answer")),
    ("answer -> client has read it", ("leader", "answer"), ("client", "received")),
)


def breakdown(trace_dir: str, requests: list[tuple[int, int]]) -> dict:
    """Each request's stages from the voters' traces, lined up by Raft index."""
    by_pid: dict[int, list[tuple[int, str, int]]] = {}
    for path in glob.glob(os.path.join(trace_dir, "stages-*.tsv")):
        by_pid[int(Path(path).stem.split("-")[1])] = stage_trace.read(path)
    sent_by: dict[int, int] = {}  # Raft index -> the pid that sent it (the leader's core)
    received_by: dict[int, set[int]] = defaultdict(set)
    for pid, events in by_pid.items():
        for _, stage, idx in events:
            if stage == "sent":
                sent_by[idx] = pid
            elif stage == "received":
                received_by[idx].add(pid)
    rows: dict[str, list[float]] = defaultdict(list)
    totals, waits, matched = [], [], 0
    each: list[tuple[float, dict[str, float]]] = []  # (end to end, its rows) per request
    for sent, received in requests:
        # The leader's events inside the request's window, from every process.
        window = [
            (t, stage, idx, pid)
            for pid, events in by_pid.items()
            for t, stage, idx in events
            if sent <= t <= received
        ]
        idx = next((i for _, s, i, pid in sorted(window) if s == "append" and i in sent_by), None)
        if idx is None:
            continue
        leader_core = sent_by[idx]
        followers = received_by[idx]
        first: dict[tuple[str, str], int] = {
            ("client", "sent"): sent,
            ("client", "received"): received,
        }
        seen: dict[tuple[str, str], list[int]] = defaultdict(list)
        for t, stage, i, pid in sorted(window):
            if pid in followers:
                continue
            if stage in ("append", "sent", "synced", "ack_in", "commit") and i != -1 and i < idx:
                continue
            if pid == leader_core or stage in ("route", "answer", "submit"):
                first.setdefault(("leader", stage), t)
                seen[("leader", stage)].append(t)
        # The follower that answered first.
        acks = [
            (t, pid)
            for t, stage, i, pid in (
                (t, s, i, pid) for pid in followers for t, s, i in by_pid[pid] if i == idx
            )
            if stage == "acked"
        ]
        if not acks or ("leader", "commit") not in first:
            continue
        fpid = min(acks)[1]
        for t, stage, i in by_pid[fpid]:
            if i == idx and ("follower", stage) not in first:
                first[("follower", stage)] = t
        if ("leader", "synced") in first and ("leader", "ack_in") in first:
            first[("leader", "ready")] = max(
                first[("leader", "synced")], first[("leader", "ack_in")]
            )
        matched += 1
        totals.append((received - sent) / 1e3)
        its: dict[str, float] = {}
        for name, a, b in ROWS:
            if a not in first:
                continue
            # The first b at or after a (the leader polls and syncs many times).
            tb = next((t for t in seen[b] if t >= first[a]), None) if b in seen else first.get(b)
            if tb is not None:
                its[name] = (tb - first[a]) / 1e3
                rows[name].append(its[name])
        each.append((totals[-1], its))
        if first[("leader", "commit")] < first.get(("leader", "synced"), 1 << 62):
            waits.append("followers")
        elif ("leader", "synced") in first and ("leader", "ready") in first:
            waits.append(
                "leader"
                if first[("leader", "synced")] >= first[("leader", "ack_in")]
                else "follower"
            )
    # The slowest TAIL_SHARE of the requests: where a tail request's time goes.
    tail = sorted(each, key=lambda e: e[0])[-max(1, int(len(each) * TAIL_SHARE)) :]

    def tail_median(name: str) -> float | None:
        values = [its[name] for _, its in tail if name in its]
        return statistics.median(values) if values else None

    table = [
        {
            "stage": name,
            "median_us": statistics.median(rows[name]) if rows[name] else None,
            "tail_median_us": tail_median(name),
        }
        for name, _, _ in ROWS
    ]
    return {
        "requests": len(requests),
        "matched": matched,
        "end_to_end_median_us": statistics.median(totals) if totals else None,
        "tail_requests": len(tail),
        "tail_end_to_end_median_us": statistics.median(t for t, _ in tail) if tail else None,
        "rows": table,
        "commit_waited_for_leader_sync": waits.count("leader"),
        "commit_waited_for_follower": waits.count("follower"),
        "committed_on_two_followers_first": waits.count("followers"),
    }


async def lone_series(url: str, epochs: dict, topic_id: str, n: int) -> list[tuple[int, int]]:
    host, port = url.removeprefix("http://").split(":")
    conn = LeanAlter(host, int(port), epochs, topic_id, list(range(64)))
    await conn.open()
    try:
        for _ in range(20):  # warm the path
            await conn.one()
        return [await conn.one() for _ in range(n)]
    finally:
        conn.close()


# ---------------------------------------------------------------- the run


def switched(root: Path, switches: dict[str, bool]) -> dict[str, str]:
    """The environment that starts a voter with ``switches`` set: a
    sitecustomize.py, imported by Python at start, sets each."""
    if not switches:
        return {}
    site = root / "switches"
    site.mkdir()
    lines = ["import importlib"]
    for switch, value in switches.items():
        module, _, name = switch.rpartition(".")
        lines.append(f"setattr(importlib.import_module({module!r}), {name!r}, {value!r})")
    (site / "sitecustomize.py").write_text("\n".join(lines) + "\n")
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", str(ROOT))])}


def journal_syncs(cluster: Cluster) -> list[tuple[float, float]]:
    """Each voter's journal syncs so far and the seconds they took, read
    from its ``/metrics``."""
    names = ("metaquorum_journal_syncs", "metaquorum_journal_sync_seconds")
    found = []
    for i in range(cluster.n):
        text = cluster.get(i, "/metrics").text
        got = {
            family.name: family.samples[0].value
            for family in text_string_to_metric_families(text)
            if family.name in names and family.samples
        }
        found.append((got.get(names[0], 0.0), got.get(names[1], 0.0)))
    return found


def syncs_between(before: list, after: list, leader: int) -> list[dict]:
    return [
        {
            "voter": i,
            "leader": i == leader,
            "syncs": int(a[0] - b[0]),
            "mean_us": (a[1] - b[1]) / (a[0] - b[0]) * 1e6 if a[0] > b[0] else None,
        }
        for i, (b, a) in enumerate(zip(before, after, strict=True))
    ]


async def run(
    lone: int,
    seconds: float,
    workers: int,
    concurrency: list[int],
    switches: dict[str, bool],
    no_disk: bool = False,
) -> dict:
    root = Path(tempfile.mkdtemp(prefix="mq-lone-bench-", dir="/dev/shm" if no_disk else None))
    trace_dir = root / "trace"
    trace_dir.mkdir()
    figures: dict = {
        "layout": f"{workers} HTTP worker(s)" if workers else "one process",
        "no_disk": no_disk,
        "switches": {name: "on" if on else "off" for name, on in switches.items()},
    }
    progress(f"disk: one writer, {DISK_WRITE_BYTES} B then fdatasync, {DISK_SYNC_S:g} s")
    figures["disk"] = disk_sync(str(root)) | {"load": load()}
    cluster = Cluster(
        root,
        fsync="always",
        extra=["--session-timeout-ms", "3600000", "--http-workers", str(workers)],
    )
    env = {stage_trace.ENV: str(trace_dir), **switched(root, switches)}
    for i in range(3):
        cluster.env[i] = env
    try:
        cluster.start()
        cluster.wait_ready()
        leader = cluster.leader()
        url = cluster.url(leader)
        progress("setup: 6 brokers")
        epochs, _, _ = await setup(url, cluster.cluster_id, 1)
        progress(f"lone requests: {lone}, one after another")
        topic_id = await fresh_topic(url, "lone", 64)
        before = journal_syncs(cluster)
        requests = await lone_series(url, epochs, topic_id, lone)
        figures["voter_syncs"] = syncs_between(before, journal_syncs(cluster), leader)
        await asyncio.sleep(3 * stage_trace.FLUSH_EVERY_S)
        figures["lone"] = breakdown(str(trace_dir), requests) | {
            "p50_ms": pct([(b - a) / 1e6 for a, b in requests], 0.5),
            "p99_ms": pct([(b - a) / 1e6 for a, b in requests], 0.99),
            "load": load(),
        }
        # The load runs without the marking's cost (stage_trace: "off").
        (trace_dir / "off").touch()
        await asyncio.sleep(3 * stage_trace.FLUSH_EVERY_S)
        figures["load_runs"] = []
        use_wrk = shutil.which("wrk") is not None
        figures["client"] = "wrk" if use_wrk else "lean Python client (no wrk installed)"
        for n, clients in enumerate(concurrency):
            progress(
                f"AlterPartition, 1 partition a request, {clients} connection(s), {seconds:g} s"
            )
            partitions = alter_partitions(clients, 1)
            topic_id = await fresh_topic(url, f"load-{n}", partitions)
            if use_wrk:
                script = alter_script(epochs, topic_id, partitions, 1)
                got = run_wrk(url, "/v1/alter-partition?version=3", script, clients, seconds)
            else:
                got = await lean_load(url, epochs, topic_id, clients, seconds)
            figures["load_runs"].append(
                {
                    "clients": clients,
                    "requests_per_s": got["requests_per_s"],
                    "p50_ms": got["p50_ms"],
                    "p99_ms": got["p99_ms"],
                    "errors": got["errors"],
                    "load": load(),
                }
            )
        return figures
    finally:
        cluster.close()
        shutil.rmtree(root, ignore_errors=True)


def print_figures(f: dict) -> None:
    d = f["disk"]
    switches = ", ".join(f"{name}={value}" for name, value in f["switches"].items())
    print(
        f"-- one write alone: 3 voters, --fsync always, {f['layout']}"
        + (f" (switches: {switches})" if switches else "")
    )
    if f["no_disk"]:
        print("data dirs on a tmpfs (--no-disk): every fdatasync returns at once, nothing durable")
    print(
        f"disk fdatasync, one writer alone: p50 {d['p50_ms']:.3f} ms, p99 {d['p99_ms']:.3f} ms "
        f"({d['syncs']} syncs; load {d['load']})"
    )
    print(
        "each voter's journal syncs during the lone requests (its /metrics), mean: "
        + ", ".join(
            f"voter {v['voter']}{' (leader)' if v['leader'] else ''} "
            + ("-" if v["mean_us"] is None else f"{v['mean_us']:.0f} us")
            + f" over {v['syncs']}"
            for v in f["voter_syncs"]
        )
    )
    print(f"single-partition AlterPartition ({f['client']}):")
    for r in f["load_runs"]:
        print(
            f"  C={r['clients']:<3} {r['requests_per_s']:8,.0f} req/s  p50 {r['p50_ms']:6.2f} ms  "
            f"p99 {r['p99_ms']:6.2f} ms  errors {r['errors']}  (load {r['load']})"
        )
    lone = f["lone"]
    print(
        f"a lone request, stage by stage ({lone['matched']} of {lone['requests']} requests "
        f"lined up; end to end p50 {lone['p50_ms']:.3f} ms, p99 {lone['p99_ms']:.3f} ms; "
        f"load {lone['load']}):"
    )
    tail_us = lone["tail_end_to_end_median_us"]
    print(
        f"  {'(median; the slowest ' + str(lone['tail_requests']) + ' requests: median)':<55} "
        f"{'all':>10} {'slowest':>10}"
    )
    for row in lone["rows"]:
        cells = [row["median_us"], row["tail_median_us"]]
        print(
            f"  {row['stage']:<55} "
            + " ".join(f"{'-':>10}" if us is None else f"{us:7.0f} us" for us in cells)
        )
    if tail_us is not None:
        print(f"  {'end to end':<55} {lone['end_to_end_median_us']:7.0f} us {tail_us:7.0f} us")
    print(
        f"  commits that waited for the leader's own sync: {lone['commit_waited_for_leader_sync']}, "
        f"for the first follower's answer: {lone['commit_waited_for_follower']}; "
        f"committed on two followers before the leader's sync: "
        f"{lone['committed_on_two_followers_first']}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lone", type=int, default=500, help="lone requests traced")
    parser.add_argument("--seconds", type=float, default=5.0, help="each load run")
    parser.add_argument("--http-workers", type=int, default=0)
    parser.add_argument("--clients", default="1,8,64")
    parser.add_argument(
        "--switch", action="append", default=[], metavar="NAME=on|off",
        help="module.NAME of a speed switch (metaquorum/speed_switches.py) and its setting",
    )  # fmt: skip
    parser.add_argument(
        "--leader-sync-thread", action="store_true",
        help="the leader syncs its journal on a thread of its own (off by default)",
    )  # fmt: skip
    parser.add_argument(
        "--no-disk", action="store_true",
        help="the voters' data dirs on a tmpfs: the floor without the disk (not durable)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from metaquorum.speed_switches import SWITCHES

    known = {f"{s.module}.{s.attribute}" for s in SWITCHES}
    switches: dict[str, bool] = {}
    for given in args.switch:
        name, _, value = given.partition("=")
        if name not in known:
            parser.error(f"--switch {given!r}: {name!r} is not in metaquorum/speed_switches.py")
        if value not in ("on", "off"):
            parser.error(f"--switch {given!r}: say {name}=on or {name}=off")
        switches[name] = value == "on"
    if args.leader_sync_thread:
        switches["quorum.raft.durability.leader_sync_off_thread"] = True
    if args.lone < 1 or args.seconds <= 0 or args.http_workers < 0:
        parser.error("--lone must be 1 or more, --seconds above 0, --http-workers 0 or more")
    try:
        concurrency = [int(c) for c in args.clients.split(",") if c]
    except ValueError:
        parser.error(f"--clients {args.clients!r}: a comma-separated list of numbers")
    if args.no_disk and not os.path.isdir("/dev/shm"):
        parser.error("--no-disk needs a tmpfs at /dev/shm, and this machine has none")
    figures = asyncio.run(
        run(args.lone, args.seconds, args.http_workers, concurrency, switches, args.no_disk)
    )
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
