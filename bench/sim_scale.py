"""How many heartbeating brokers ``metaquorum sim`` itself carries on this
machine: for each step, N simulated brokers (no partitions) beat every 2 s
against a local 3-voter cluster (fsync never, 9 s sessions, Kafka's defaults),
split over ``--processes`` simulator processes (auto: brokers/sim_workers.py).

    python bench/sim_scale.py                       # 5,000 / 10,000 / 20,000
    python bench/sim_scale.py --steps 20000 --processes 2 --window 60
    python bench/sim_scale.py --steps 20000 --http-workers 1

Once all N are active, a window is measured: heartbeats/s offered (N / 2 s) and
achieved (answered), the simulator's CPU per heartbeat (its processes' own
counters, os.times, parent and workers), its event-loop lag p50/p99 and how late
heartbeats went out (brokers/loop_lag.py), fencings of active brokers split by
whose fault they were, and the leader's CPU per heartbeat (/proc: its serve
process, and with ``--http-workers`` its workers and orderer process too). The
simulator shares the machine's cores with the three voters.

Figures, not asserts: what is printed is what was measured on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop  # noqa: E402

from bench.cores import orderer_of, workers_of  # noqa: E402
from bench.sim import cpu_seconds, progress  # noqa: E402
from brokers.loop_lag import CLUSTER, SIMULATOR  # noqa: E402
from brokers.sim_config import SimConfig  # noqa: E402
from brokers.sim_workers import auto_processes, make_simulation  # noqa: E402
from brokers.stats import Histogram  # noqa: E402
from tests.cluster import Cluster  # noqa: E402


def merged(monitors, which: str) -> Histogram:
    h = Histogram()
    for m in monitors:
        h.merge(getattr(m, which))
    return h


async def step(cluster: Cluster, n: int, processes: int, first_id: int, window_s: float) -> dict:
    sim = make_simulation(
        SimConfig(
            urls=[cluster.url(i) for i in range(cluster.n)],
            brokers=n,
            topics=0,
            duration_s=0,
            first_broker_id=first_id,
            heartbeat_interval_s=2.0,
            check_log=False,
            settle_timeout_s=30,
            processes=processes,
        ),
        log=progress,
    )
    run = asyncio.create_task(sim.run())
    started = time.monotonic()
    while sim.snapshot().agent_states.get("active", 0) < n:
        if run.done():
            run.result()
        if time.monotonic() - started > 300:
            sim.request_stop()
            await run
            return {"brokers": n, "error": "not all brokers became active within 300 s"}
        await asyncio.sleep(0.5)
    ramp_s = time.monotonic() - started
    progress(f"{n} brokers active after {ramp_s:.0f} s; measuring {window_s:.0f} s")
    await asyncio.sleep(2 * 0.5 + 0.1)  # fresh worker reports
    core = cluster.procs[cluster.leader()].pid
    orderer = orderer_of(core)
    pids = [core, *workers_of(core), *([orderer] if orderer else [])]

    def sample():
        monitors = sim.monitors()
        return (
            sim.stats.endpoints["heartbeat"].total.copy(),
            dict(sim.stats.events),
            sim.cpu_seconds(),
            sum(cpu_seconds(pid) for pid in pids),
            merged(monitors, "loop"),
            merged(monitors, "heartbeats"),
            time.monotonic(),
        )

    before = sample()
    max_fenced = 0
    ids = range(first_id, first_id + n)
    while time.monotonic() - before[-1] < window_s:
        await asyncio.sleep(1.0)
        image = sim.follower.image
        fenced = sum(1 for b in ids if (r := image.brokers.get(b)) is not None and r.fenced)
        max_fenced = max(max_fenced, fenced)
    after = sample()
    elapsed = after[-1] - before[-1]
    beats = after[0].since(before[0])
    loop = after[4].since(before[4])
    late = after[5].since(before[5])
    sim_cpu = after[2] - before[2]
    leader_cpu = after[3] - before[3]
    events = lambda k: after[1].get(k, 0) - before[1].get(k, 0)  # noqa: E731
    sim.request_stop()
    await run
    return {
        "brokers": n,
        "processes": processes,
        "ramp_s": round(ramp_s, 1),
        "window_s": round(elapsed, 1),
        "offered_per_s": n / 2.0,
        "achieved_per_s": round(beats.total / elapsed, 1),
        "sim_cpu_ms_per_hb": round(1000 * sim_cpu / max(beats.total, 1), 3),
        "sim_cpu_util": round(sim_cpu / elapsed, 2),
        "leader_cpu_ms_per_hb": round(1000 * leader_cpu / max(beats.total, 1), 3),
        "leader_cpu_util": round(leader_cpu / elapsed, 2),
        "loop_lag_p50_ms": _ms(loop.quantile(0.5)),
        "loop_lag_p99_ms": _ms(loop.quantile(0.99)),
        "hb_late_p99_ms": _ms(late.quantile(0.99)),
        "hb_p50_ms": _ms(beats.quantile(0.5)),
        "hb_p99_ms": _ms(beats.quantile(0.99)),
        "false_fencings": events("unexpected_fencings"),
        "fenced_late_heartbeats": events(SIMULATOR),
        "fenced_on_time": events(CLUSTER),
        "max_fenced_at_once": max_fenced,
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


COLUMNS = (
    ("brokers", 8), ("processes", 5), ("offered_per_s", 8), ("achieved_per_s", 9),
    ("sim_cpu_ms_per_hb", 10), ("sim_cpu_util", 8), ("leader_cpu_ms_per_hb", 11),
    ("loop_lag_p50_ms", 9), ("loop_lag_p99_ms", 9), ("hb_late_p99_ms", 9),
    ("hb_p99_ms", 8), ("false_fencings", 6), ("fenced_late_heartbeats", 6),
    ("fenced_on_time", 6),
)  # fmt: skip
HEADER = (
    "brokers", "proc", "offered", "achieved", "sim ms/hb", "sim cpu", "leader ms/hb",
    "lag p50", "lag p99", "late p99", "hb p99", "false", "late", "ontime",
)  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", default="5000,10000,20000", help="broker counts to try")
    p.add_argument("--processes", default="auto", help="simulator processes per step, or auto")
    p.add_argument("--window", type=float, default=30.0, help="seconds measured per step")
    p.add_argument(
        "--http-workers", help="each voter's HTTP workers (serve's flag; default: serve's own)"
    )
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    out: dict = {
        "machine": f"{os.cpu_count()} cores",
        "fsync": "never",
        "http_workers": args.http_workers,
        "steps": [],
    }
    with tempfile.TemporaryDirectory(prefix="bench-sim-scale-") as tmp:
        flags = [] if args.http_workers is None else ["--http-workers", args.http_workers]
        cluster = Cluster(Path(tmp), voters=3, fsync="never", extra=flags)
        try:
            cluster.start()
            cluster.wait_ready()
            cluster.leader()
            for i, n in enumerate(int(s) for s in args.steps.split(",") if s):
                k = auto_processes(n) if args.processes == "auto" else int(args.processes)
                progress(f"step {i + 1}: {n} brokers in {k} process(es), a 2 s interval")
                with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                    s = runner.run(step(cluster, n, k, 1_000_000 * (i + 1), args.window))
                out["steps"].append(s)
                progress(json.dumps(s))
        finally:
            cluster.close()
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"\nsimulator capacity (3 voters on loopback, fsync never, {out['machine']}, "
        f"--http-workers {args.http_workers or 'auto'}):"
    )
    print(" ".join(f"{h:>{w}}" for h, (_, w) in zip(HEADER, COLUMNS, strict=True)))
    for s in out["steps"]:
        if "error" in s:
            print(f"{s['brokers']:>8} {s['error']}")
            continue
        print(" ".join(f"{s[k]!s:>{w}}" for k, w in COLUMNS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
