"""CPU per request of each process role, and what it projects for a 16-core
voter (figures, not asserts).

For each layout (``serve --http-workers 0``, ``1``, ``2``; a fresh 3-voter
loopback cluster each) the load of bench/api.py runs through wrk:
AlterPartition v3 of 1 partition (16, 64 and 256 connections) and of 100
partitions (4 and 16 connections), heartbeats (16 connections); then a
burst of 1,000 broker registrations over 100 connections (10 each, one
after another) and one over 250 (4 each), each timed from the first send to
the last answer and then read back, as linearizable reads on fresh
connections, against the answers. Around each window the processes' own
CPU counters (/proc/PID/stat utime + stime) are read: the leader's core
process, its orderer process (with workers: decision 119), each of its HTTP
workers, each follower's processes.
So each role's CPU time per request and per partition change is measured,
not guessed from throughput on a shared 2-core machine.

The projection for a 16-core voter is Amdahl's, from each kind's run with
the most connections (the most group commit). That is also the concurrency
the projected rates imply: 100,000 changes/s of 100 partitions a request is
1,000 requests/s, so at 15 ms a request 15 in flight (Little's law), as many
as the 16-connection run keeps; a batch holds what arrived while the one
before it committed, so the core's cost per change falls as batches grow,
and a run with fewer connections than the rate implies overstates it. The
core (one interpreter, one
GIL) takes 1 core, the orderer process (with workers) 1, the workers the
others, so at most min(1 / core CPU per request, 1 / orderer CPU per request,
14 / workers' CPU per request) requests/s; and
a follower's core (alone) follows at most 1 / its CPU per change. A second
figure counts what Amdahl's leaves out: every worker follows the whole image,
so each of the 15 pays the apply cost of every change (measured on the
followers' workers, which serve nothing).

    python bench/cores.py [--quick] [--json] [--seconds S] [--layouts 0,1,2] [--fsync never]

The load generator runs on the same cores as the three voters: the CPU per
request is the figure to read; the throughputs are those of this machine and
its load at the time (the load average is printed with each layout). The
counters tick every 10 ms: a burst of a quarter second would be read to
10 µs per registration, so the burst runs BURSTS times (distinct brokers
each time, one after another) in one window; its CPU figures are per
registration over all of them, its wall time the median burst's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api import (  # noqa: E402 - after the path is set
    MV,
    alter_partitions,
    alter_script,
    fresh_topic,
    heartbeat_script,
    progress,
    report_stalls,
    run_wrk,
    setup,
)
from tests.cluster import Cluster  # noqa: E402

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
CORES = 16  # the projected voter's
BURST = 1_000
# 100 connections, each registering 10 brokers one after another, as before;
# then 250 at once, 4 each: about as many as a voter admits at once by default
# (256 broker writes, 256 connections from one address), so as many as a
# burst of 1,000 brokers has in flight. The projection takes the latter, as
# it takes every kind's run with the most connections.
BURST_CONNECTIONS = (100, 250)
BURST_FIRST_ID = 1_000  # above setup's brokers 1..6
BURSTS = 3  # bursts in one CPU window (the counters tick every 10 ms)

# Issue 26's goals, per leader.
GOAL_SINGLE_PER_S = 20_000
GOAL_CHANGES_PER_S = 100_000
GOAL_P99_MS = 20
GOAL_BURST_S = 0.05
GOAL_CORE_US_PER_REQUEST = 25
GOAL_CORE_US_PER_CHANGE = 7
GOAL_WORKER_US_PER_REQUEST = 100
GOAL_FOLLOWER_US_PER_CHANGE = 5


# ---------------------------------------------------------------- CPU counters


def cpu_s(pid: int) -> tuple[float, float] | None:
    """(its own CPU s, its reaped children's: the snapshot forks) of a live
    process, all threads; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after "pid (comm)"
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) * TICK_S, (cutime + cstime) * TICK_S


def children_running(core: int, module: bytes) -> list[tuple[int, list[bytes]]]:
    """(pid, argv) of each child of ``core`` that runs ``python -m module``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == core and module in argv:
            found.append((int(entry.name), argv))
    return found


def orderer_of(core: int) -> int | None:
    """A core's orderer process (voter/orderer_process.py), if it has one."""
    found = children_running(core, b"voter.orderer_process")
    return found[0][0] if found else None


def workers_of(core: int) -> list[int]:
    """The HTTP worker processes of a core, by worker index."""
    found = []
    for pid, argv in children_running(core, b"voter.worker_pool"):
        config = json.loads(argv[argv.index(b"voter.worker_pool") + 1])
        found.append((config["index"], pid))
    return [pid for _, pid in sorted(found)]


@dataclass
class Voter:
    index: int
    leader: bool
    core: int  # the serve process's pid
    workers: list[int] = field(default_factory=list)
    orderer: int | None = None  # its orderer process's pid (with workers)

    @property
    def pids(self) -> list[int]:
        return [self.core, *self.workers, *([self.orderer] if self.orderer else [])]


def voters_of(cluster: Cluster, leader: int, workers: int, timeout_s: float = 60) -> list[Voter]:
    """Every voter's processes, once each core has started its workers."""
    deadline = time.monotonic() + timeout_s
    while True:
        voters = [
            Voter(
                i,
                i == leader,
                cluster.procs[i].pid,
                workers_of(cluster.procs[i].pid),
                orderer_of(cluster.procs[i].pid),
            )
            for i in range(cluster.n)
        ]
        if all(len(v.workers) == workers and bool(v.orderer) == bool(workers) for v in voters):
            return voters
        if time.monotonic() > deadline:
            raise SystemExit(f"not {workers} HTTP workers per voter: {voters}")
        time.sleep(0.2)


def sample(voters: list[Voter]) -> dict[int, tuple[float, float] | None]:
    return {pid: cpu_s(pid) for v in voters for pid in v.pids}


def spent(voters: list[Voter], before: dict, after: dict) -> dict:
    """Each role's CPU seconds between two samples; a process that died
    meanwhile (a worker restarted) counts None and is named in ``lost``."""
    lost = [pid for pid in before if before[pid] is None or after[pid] is None]

    def own(pid: int) -> float | None:
        return None if pid in lost else after[pid][0] - before[pid][0]

    roles: dict = {"followers": [], "lost": lost}
    for v in voters:
        figures = {
            "voter": v.index,
            "core": own(v.core),
            "workers": [own(pid) for pid in v.workers],
            "orderer": own(v.orderer) if v.orderer else None,
            "forks": None if v.core in lost else after[v.core][1] - before[v.core][1],
        }
        if v.leader:
            roles["leader"] = figures
        else:
            roles["followers"].append(figures)
    return roles


def load_generator_s() -> float:
    """This process's CPU and its reaped children's (wrk, once it has exited)."""
    mine = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


@contextmanager
def cpu_window(voters: list[Voter]):
    """Yields a dict that holds, once the block is done, each role's CPU
    seconds in it (``cpu``), the load generator's and the load average."""
    figures: dict = {}
    generator = load_generator_s()
    before = sample(voters)
    yield figures
    after = sample(voters)
    figures["cpu"] = spent(voters, before, after)
    figures["cpu"]["load_generator"] = load_generator_s() - generator
    figures["loadavg"] = list(os.getloadavg())


# ---------------------------------------------------------------- the runs


def register_request(host: str, cluster_id: str, broker_id: int) -> bytes:
    body = json.dumps(
        {
            "brokerId": broker_id,
            "clusterId": cluster_id,
            "incarnationId": str(uuid.uuid4()),
            "listeners": [
                {"name": "PLAINTEXT", "host": "localhost", "port": 9092, "securityProtocol": 0}
            ],
            "features": MV,
            "rack": None,
        }
    ).encode()
    head = (
        f"POST /v1/brokers/register HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def answer(reader: asyncio.StreamReader) -> tuple[int, dict]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
    if length is None:
        raise RuntimeError(f"an answer without Content-Length: {head!r}")
    body = await reader.readexactly(int(length.group(1)))
    return int(head.split(b" ", 2)[1]), json.loads(body)


async def registration_burst(
    url: str,
    cluster_id: str,
    voters: list[Voter],
    connections: int,
    first_id: int,
) -> dict:
    """BURSTS bursts, one after another, each of BURST registrations of
    distinct brokers (ids from ``first_id``) over ``connections`` keep-alive
    connections (opened first), each connection sending its share one after
    another: the wall time of each from its first send to its last answer.
    Raw HTTP/1.1 on asyncio streams: httpx would spend more of the two cores
    than the voters do."""
    where = urlsplit(url)
    latencies: list[float] = []
    errors: list[str] = []
    epochs: dict[int, int] = {}  # broker id -> the epoch its answer gave
    walls: list[float] = []

    async def send(stream, mine: list[tuple[int, bytes]]) -> None:
        reader, writer = stream
        for k, (broker_id, request) in enumerate(mine):
            t = time.perf_counter()
            try:
                writer.write(request)
                status, body = await answer(reader)
            except (asyncio.IncompleteReadError, ConnectionError) as e:
                # Closed by the voter (a connection cap): an error for this
                # registration and each one left on the connection.
                errors.extend([f"connection closed without an answer: {e!r}"] * (len(mine) - k))
                return
            latencies.append(time.perf_counter() - t)
            if status != 200 or body.get("errorName") != "NONE":
                errors.append(f"{status} {body}")
            else:
                epochs[broker_id] = body["brokerEpoch"]

    with cpu_window(voters) as figures:
        for n in range(BURSTS):
            first = first_id + n * BURST
            requests = [
                (b, register_request(where.netloc, cluster_id, b))
                for b in range(first, first + BURST)
            ]
            streams = [
                await asyncio.open_connection(where.hostname, where.port)
                for _ in range(connections)
            ]
            try:
                start = time.perf_counter()
                await asyncio.gather(
                    *(send(s, requests[i::connections]) for i, s in enumerate(streams))
                )
                walls.append(time.perf_counter() - start)
            finally:
                for _, writer in streams:
                    writer.close()
    latencies.sort()
    wall = statistics.median(walls)
    return {
        "run": f"register {BURST} x {connections} conn",
        "kind": "burst",
        "clients": connections,
        "requests": BURST * BURSTS,
        "changes": BURST * BURSTS,
        "bursts": BURSTS,
        "seconds": wall,
        "walls": walls,
        "requests_per_s": BURST / wall,
        "changes_per_s": BURST / wall,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(0.99 * len(latencies))] * 1000,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "read_back_mismatches": await read_back(url, epochs),
        **figures,
    }


async def read_back(url: str, epochs: dict[int, int], readers: int = 6) -> list[str]:
    """The registered brokers as linearizable reads on ``readers`` fresh
    connections (so, with workers, from more than one worker's image) show:
    what differs from the registrations' answers."""
    wrong = []
    for _ in range(readers):
        async with httpx.AsyncClient(base_url=url, timeout=30) as c:
            r = await c.get("/v1/brokers", params={"consistency": "linearizable"})
        if r.status_code != 200:
            wrong.append(f"GET /v1/brokers: {r.status_code} {r.text[:200]}")
            continue
        seen = {b["brokerId"]: b["brokerEpoch"] for b in r.json()["brokers"]}
        for broker_id, epoch in epochs.items():
            if seen.get(broker_id) != epoch:
                wrong.append(
                    f"broker {broker_id}: answered epoch {epoch}, read {seen.get(broker_id)}"
                )
    return wrong[:10]


async def alter_run(url, epochs, voters, clients, per_request, seconds, run_id) -> dict:
    # Each partition comes round again only after 16 requests per connection:
    # with bench/api.py's 4 per connection, a request stalled a few hundred
    # ms on this loaded machine was overtaken by the next change of its own
    # partitions, sent with the same epochs (INVALID_UPDATE_VERSION).
    partitions = max(alter_partitions(clients, per_request), 16 * clients * per_request)
    topic_id = await fresh_topic(url, f"cores-{run_id}", partitions)
    script = alter_script(epochs, topic_id, partitions, per_request)
    with cpu_window(voters) as figures:
        figures |= run_wrk(url, "/v1/alter-partition?version=3", script, clients, seconds)
    return {
        "run": f"alter {per_request}p x {clients} conn",
        "kind": "single" if per_request == 1 else "multi",
        "clients": clients,
        "partitions_per_request": per_request,
        **figures,
    }


def heartbeat_run(url, epochs, voters, clients, seconds) -> dict:
    with cpu_window(voters) as figures:
        figures |= run_wrk(url, "/v1/brokers/heartbeat", heartbeat_script(epochs), clients, seconds)
    return {
        "run": f"heartbeats x {clients} conn",
        "kind": "heartbeat",
        "clients": clients,
        **figures,
    }


async def run_layout(workers: int, seconds: float, fsync: str) -> dict:
    root = Path(tempfile.mkdtemp(prefix="mq-cores-bench-"))
    # A long session: the brokers send no heartbeats while writes are measured.
    # Admission above the most connections of any run, shared among the
    # workers (the kernel does not spread connections evenly): what is
    # measured is the cost of writes, not their refusal with 429.
    cluster = Cluster(
        root,
        fsync=fsync,
        extra=[
            "--session-timeout-ms",
            "3600000",
            "--http-workers",
            str(workers),
            "--max-pending-writes",
            "2048",
        ],  # fmt: skip
    )
    try:
        progress(f"--http-workers {workers}: starting 3 voters (fsync {fsync})")
        cluster.start()
        cluster.wait_ready()
        leader = cluster.leader()
        url = cluster.url(leader)
        voters = voters_of(cluster, leader, workers)
        epochs, _, _ = await setup(url, cluster.cluster_id, 1)
        runs = []
        runs_of = ((16, 1), (64, 1), (256, 1), (4, 100), (16, 100))
        for n, (clients, per_request) in enumerate(runs_of, 1):
            progress(
                f"--http-workers {workers}: AlterPartition {per_request} partition(s)/request, "
                f"{clients} connections, {seconds:.0f} s"
            )
            runs.append(await alter_run(url, epochs, voters, clients, per_request, seconds, n))
        progress(f"--http-workers {workers}: heartbeats, 16 connections, {seconds:.0f} s")
        runs.append(heartbeat_run(url, epochs, voters, 16, seconds))
        first_id = BURST_FIRST_ID
        for connections in BURST_CONNECTIONS:
            progress(
                f"--http-workers {workers}: {BURST} registrations over {connections} "
                f"connections, {BURSTS} times"
            )
            runs.append(
                await registration_burst(url, cluster.cluster_id, voters, connections, first_id)
            )
            first_id += BURST * BURSTS
        restarted = [v.index for v in voters if workers_of(v.core) != v.workers]
        report_stalls(cluster)
        return {
            "http_workers": workers,
            "fsync": fsync,
            "leader": leader,
            "workers_restarted_on_voters": restarted,
            "log_errors": log_errors(cluster),
            "runs": runs,
        }
    finally:
        cluster.close()
        shutil.rmtree(root, ignore_errors=True)


def log_errors(cluster: Cluster, most: int = 20) -> list[str]:
    """The voters' (and their workers') logged errors and tracebacks."""
    found = []
    for i, path in enumerate(cluster.logs):
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                if " ERROR " in line or " CRITICAL " in line or line.startswith("Traceback"):
                    found.append(f"voter {i}: {line}")
    return found[:most]


# ---------------------------------------------------------------- costs


def us_per(seconds: float | None, count: int) -> float | None:
    return None if seconds is None or not count else seconds / count * 1e6


def total_s(voter: dict) -> float | None:
    """A voter's CPU seconds, its workers' included."""
    parts = [
        voter["core"],
        *voter["workers"],
        *([voter["orderer"]] if voter["orderer"] is not None else []),
    ]
    return None if None in parts else sum(parts)


def costs(run: dict) -> dict:
    """Each role's CPU µs per request and per partition change."""
    cpu, requests, changes = run["cpu"], run["requests"], max(run["changes"], 0)
    leader = cpu["leader"]
    each = leader["workers"]
    total = None if None in each else sum(each)
    followers = cpu["followers"]
    follower_workers = [w for f in followers for w in f["workers"]]
    # A follower's orderer process follows every change, as its workers do.
    follower_orderers = [f["orderer"] for f in followers if f.get("orderer") is not None]
    return {
        "core_per_request": us_per(leader["core"], requests),
        "core_per_change": us_per(leader["core"], changes),
        "orderer_per_request": us_per(leader.get("orderer"), requests),
        "orderer_per_change": us_per(leader.get("orderer"), changes),
        "workers_per_request": us_per(total, requests) if each else None,
        "each_worker_per_request": [us_per(w, requests) for w in each],
        "follower_core_per_change": [us_per(f["core"], changes) for f in followers],
        # Following the image only: a follower's workers serve no requests.
        "follower_worker_per_change": [us_per(w, changes) for w in follower_workers],
        "follower_orderer_per_change": [us_per(w, changes) for w in follower_orderers],
        "follower_total_per_request": [us_per(total_s(f), requests) for f in followers],
        "follower_total_per_change": [us_per(total_s(f), changes) for f in followers],
        "load_generator_per_request": us_per(cpu["load_generator"], requests),
    }


def best(runs: list[dict], kind: str) -> dict | None:
    """The run of ``kind`` with the most connections: the most group commit,
    as a loaded 16-core voter would have."""
    return max(
        (r for r in runs if r["kind"] == kind), key=lambda r: r.get("clients", 0), default=None
    )


def mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def projection(layout: dict, cores: int = CORES) -> dict:
    """Requests/s and changes/s of one leader with ``cores`` cores, from the
    layout's measured costs (µs): the core on one core, the workers on the
    rest; a follower's core alone; each worker also applying every change."""
    single, multi, burst = (best(layout["runs"], k) for k in ("single", "multi", "burst"))
    out: dict = {"cores": cores}
    for name, run in (("single", single), ("multi", multi), ("burst", burst)):
        if run is None:
            continue
        c = costs(run)
        per_request = run["changes"] / run["requests"] if run["requests"] else 1
        limits = {"core": 1e6 / c["core_per_request"]} if c["core_per_request"] else {}
        # The orderer process, when there is one, on a core of its own too.
        serving_cores = cores - 1
        if c["orderer_per_request"]:
            limits["orderer"] = 1e6 / c["orderer_per_request"]
            serving_cores -= 1
        apply = mean(c["follower_worker_per_change"])  # a worker's cost of following
        if c["workers_per_request"]:
            limits["workers"] = serving_cores * 1e6 / c["workers_per_request"]
            if apply is not None:
                # Each of the leader's N workers applied every change; with
                # cores - 1 workers each still does.
                n = len(c["each_worker_per_request"])
                serving = max(c["workers_per_request"] - n * apply * per_request, 0.0)
                limits["workers_following"] = 1e6 / (serving / serving_cores + apply * per_request)
        follower = max(
            [
                *c["follower_core_per_change"],
                *c["follower_worker_per_change"],
                *c["follower_orderer_per_change"],
            ],
            key=lambda v: v or 0,
            default=None,
        )
        if follower:
            limits["followers"] = 1e6 / follower / per_request
        amdahl = min(v for k, v in limits.items() if k != "workers_following")
        out[name] = {
            "from_run": run["run"],
            "limits_requests_per_s": limits,
            "requests_per_s": amdahl,
            "changes_per_s": amdahl * per_request,
            "requests_per_s_following": min(v for k, v in limits.items() if k != "workers"),
            "measured_p99_ms": run["p99_ms"],
        }
        if name == "burst":
            out[name]["burst_cpu_bound_s"] = BURST / amdahl
            out[name]["measured_s"] = run["seconds"]
    return out


def goals(layout: dict, proj: dict) -> list[tuple[str, float | None, float, bool, bool]]:
    """(goal, figure, bound, lower is better, met) of each goal, from the
    projection and the measured per-role costs."""
    single, multi, burst = (best(layout["runs"], k) for k in ("single", "multi", "burst"))
    out = []

    def at_most(name: str, figure: float | None, bound: float) -> None:
        out.append((name, figure, bound, True, figure is not None and figure <= bound))

    def at_least(name: str, figure: float | None, bound: float) -> None:
        out.append((name, figure, bound, False, figure is not None and figure >= bound))

    if "single" in proj:
        at_least(
            f">= {GOAL_SINGLE_PER_S:,} single-partition requests/s (projected)",
            proj["single"]["requests_per_s"],
            GOAL_SINGLE_PER_S,
        )
    if "multi" in proj:
        at_least(
            f">= {GOAL_CHANGES_PER_S:,} partition changes/s (projected)",
            proj["multi"]["changes_per_s"],
            GOAL_CHANGES_PER_S,
        )
    for run in (single, multi):
        if run is not None:
            at_most(
                f"p99 <= {GOAL_P99_MS} ms, {run['run']} (measured here)", run["p99_ms"], GOAL_P99_MS
            )
    if burst is not None:
        at_most(
            f"{BURST}-broker burst <= {GOAL_BURST_S} s (measured here)",
            burst["seconds"],
            GOAL_BURST_S,
        )
        at_most(
            f"{BURST}-broker burst <= {GOAL_BURST_S} s (projected CPU bound)",
            proj["burst"]["burst_cpu_bound_s"],
            GOAL_BURST_S,
        )
    if single is not None:
        c = costs(single)
        at_most(
            f"core <= {GOAL_CORE_US_PER_REQUEST} µs per single-partition request",
            c["core_per_request"],
            GOAL_CORE_US_PER_REQUEST,
        )
        if c["orderer_per_request"] is not None:
            at_most(
                f"the orderer process <= {GOAL_CORE_US_PER_REQUEST} µs per single-partition "
                "request",
                c["orderer_per_request"],
                GOAL_CORE_US_PER_REQUEST,
            )
        if c["each_worker_per_request"]:
            # The sum over the workers: with N of them it holds N - 1 other
            # workers' following of each change too.
            at_most(
                f"a worker <= {GOAL_WORKER_US_PER_REQUEST} µs per request (all workers' CPU)",
                c["workers_per_request"],
                GOAL_WORKER_US_PER_REQUEST,
            )
    if multi is not None:
        c = costs(multi)
        at_most(
            f"core <= {GOAL_CORE_US_PER_CHANGE} µs per partition change",
            c["core_per_change"],
            GOAL_CORE_US_PER_CHANGE,
        )
        if c["orderer_per_change"] is not None:
            at_most(
                f"the orderer process <= {GOAL_CORE_US_PER_CHANGE} µs per partition change",
                c["orderer_per_change"],
                GOAL_CORE_US_PER_CHANGE,
            )
        at_most(
            f"a follower's core <= {GOAL_FOLLOWER_US_PER_CHANGE} µs per partition change (worst)",
            max(c["follower_core_per_change"], key=lambda v: v or 0),
            GOAL_FOLLOWER_US_PER_CHANGE,
        )
    return out


# ---------------------------------------------------------------- printing


def fmt(value: float | None, width: int = 6) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width},.0f}"


def print_layout(layout: dict) -> None:
    loads = [r["loadavg"][0] for r in layout["runs"]]
    print(
        f"-- --http-workers {layout['http_workers']}: 3 voters on loopback, fsync "
        f"{layout['fsync']}, {os.cpu_count()} cores, load average (1 min) during the runs "
        f"{min(loads):.1f}-{max(loads):.1f}"
        + ("  HIGH: other jobs share the cores" if max(loads) > (os.cpu_count() or 1) else "")
    )
    for line in layout["log_errors"]:
        print(f"  logged: {line}")
    if layout["workers_restarted_on_voters"]:
        print(f"  HTTP workers restarted on voters {layout['workers_restarted_on_voters']}")
    print(
        f"  {'run':<24}{'req/s':>7}{'changes/s':>10}{'p50 ms':>8}{'p99 ms':>8}{'err':>5} |"
        f" CPU µs per request: {'core':>5}{'orderer':>8}{'workers':>8} {'(each)':<15}"
        f"{'followers':<14}| load gen"
    )
    for r in layout["runs"]:
        c = costs(r)
        each = "+".join(fmt(w, 0) for w in c["each_worker_per_request"])
        per_request = r["changes"] / r["requests"] if r["requests"] else 0
        followers = ", ".join(fmt(f, 0) for f in c["follower_total_per_request"])
        print(
            f"  {r['run']:<24}{r['requests_per_s']:>7,.0f}{r['changes_per_s']:>10,.0f}"
            f"{r['p50_ms']:>8.1f}{r['p99_ms']:>8.1f}{r['errors']:>5} |"
            f" {'':20}{fmt(c['core_per_request'], 5)}{fmt(c['orderer_per_request'], 8)}"
            f"{fmt(c['workers_per_request'], 8)}"
            f" {('(' + each + ')') if each else '':<15}{followers:<14}|"
            f" {fmt(c['load_generator_per_request'], 8)}"
        )
        if r["kind"] == "multi":
            print(
                f"  {'':24}per partition change: core {fmt(c['core_per_change'], 0)} µs, "
                + (
                    f"orderer {fmt(c['orderer_per_change'], 0)} µs, "
                    if c["orderer_per_change"] is not None
                    else ""
                )
                + f"workers {fmt(us_per_change(c['workers_per_request'], per_request), 0)} µs, "
                f"followers' cores "
                + ", ".join(fmt(f, 0) for f in c["follower_core_per_change"])
                + " µs"
                + (
                    ", followers' workers "
                    + ", ".join(fmt(f, 0) for f in c["follower_worker_per_change"])
                    + " µs (following only)"
                    if c["follower_worker_per_change"]
                    else ""
                )
            )
        if r["kind"] == "burst":
            print(f"  {'':24}burst wall time {r['seconds'] * 1000:,.0f} ms, the median of "
                  f"{', '.join(f'{w * 1000:,.0f}' for w in r['walls'])} (first send to last answer)"
                  + (f"; first error: {r['first_error']}" if r["errors"] else ""))  # fmt: skip
            for wrong in r["read_back_mismatches"]:
                print(f"  {'':24}WRONG read back after the burst: {wrong}")
        if r.get("error_kinds"):
            named = ", ".join(f"{name} {n:,}" for name, n in r["error_kinds"].items())
            print(f"  {'':24}errors: {named}")
        forks = r["cpu"]["leader"]["forks"]
        if forks:
            print(f"  {'':24}the leader's snapshot forks: {forks * 1000:.0f} ms CPU")
        if r["cpu"]["lost"]:
            print(f"  {'':24}processes gone during the run (CPU not counted): {r['cpu']['lost']}")


def us_per_change(per_request: float | None, changes_per_request: float) -> float | None:
    return (
        None
        if per_request is None or not changes_per_request
        else per_request / changes_per_request
    )


def print_projection(layout: dict, proj: dict) -> None:
    print(f"  projection for a {proj['cores']}-core voter (Amdahl: core on 1 core, the orderer "
          f"on 1, workers on the rest; a follower's core alone):")  # fmt: skip
    for name, what in (
        ("single", "single-partition"),
        ("multi", "100-partition"),
        ("burst", "registration"),
    ):
        if name not in proj:
            continue
        p = proj[name]
        limits = ", ".join(
            f"{k} {v:,.0f}"
            for k, v in p["limits_requests_per_s"].items()
            if k != "workers_following"
        )
        print(
            f"    {what} (costs of '{p['from_run']}'): {p['requests_per_s']:,.0f} requests/s, "
            f"{p['changes_per_s']:,.0f} changes/s; limits in requests/s: {limits}"
        )
        if "workers_following" in p["limits_requests_per_s"]:
            following = p["limits_requests_per_s"]["workers_following"]
            serving = proj["cores"] - (2 if "orderer" in p["limits_requests_per_s"] else 1)
            print(f"      if each of the {serving} workers also applies every change: workers "
                  f"{following:,.0f}, so {p['requests_per_s_following']:,.0f} requests/s, "
                  f"{p['requests_per_s_following'] * p['changes_per_s'] / p['requests_per_s']:,.0f} changes/s")  # fmt: skip
    for name, figure, bound, lower, met in goals(layout, proj):
        if figure is None:
            verdict = "not measured"
        elif met:
            verdict = f"met ({figure:,.3g})"
        else:
            factor = figure / bound if lower else bound / figure if figure else float("inf")
            verdict = f"MISSED by {factor:.1f}x ({figure:,.3g})"
        print(f"    goal {name}: {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="3 s windows")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--seconds", type=float, default=None, help="each wrk window")
    parser.add_argument("--layouts", default="0,1,2", help="the --http-workers counts to run")
    parser.add_argument(
        "--fsync", choices=("always", "never"), default="always", help="the voters' --fsync"
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed (apt-get install wrk)")
    seconds = args.seconds or (3.0 if args.quick else 10.0)
    progress(f"load average at the start: {os.getloadavg()} on {os.cpu_count()} cores")
    try:
        layouts = [
            asyncio.run(run_layout(int(n), seconds, args.fsync)) for n in args.layouts.split(",")
        ]
    except KeyboardInterrupt:
        progress("interrupted (the voters were stopped)")
        return 130
    projections = [projection(layout) for layout in layouts]
    if args.json:
        for layout, proj in zip(layouts, projections, strict=True):
            layout["costs_us"] = [costs(r) | {"run": r["run"]} for r in layout["runs"]]
            layout["projection"] = proj
            layout["goals"] = [
                {"goal": n, "figure": f, "bound": b, "met": m}
                for n, f, b, _, m in goals(layout, proj)
            ]
        print(json.dumps(layouts, indent=2))
        return 0
    for layout, proj in zip(layouts, projections, strict=True):
        print_layout(layout)
        print_projection(layout, proj)
    return 0


if __name__ == "__main__":
    sys.exit(main())
