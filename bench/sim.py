"""Broker-side capacity: how many heartbeating brokers a 3-voter loopback cluster
carries, and how many ISR changes per second the default simulation commits.

    python bench/sim.py                          # steps 500..5000, 60 s each
    python bench/sim.py --steps 5000 --window 600  # the issue's 10-minute figure
    python bench/sim.py --isr-only

Heartbeat capacity: for each step, N simulated brokers (no partitions) beat every
2 s against a cluster with a 9 s session timeout (Kafka's defaults). Once all N
are active, a window is measured: heartbeats answered, false fencings (an active
broker told it is fenced), the most brokers fenced at once, heartbeat latency,
and CPU per heartbeat on the leader (from /proc) and in this process (the
simulator, which shares the machine's two cores with the three voters).

Figures, not asserts: what is printed is what was measured on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from brokers.agent import METADATA_VERSION_RANGE, State  # noqa: E402
from brokers.sim import Simulation  # noqa: E402
from brokers.sim_config import SimConfig  # noqa: E402
from tests.cluster import Cluster  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def progress(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def heartbeat_step(cluster: Cluster, n: int, first_id: int, window_s: float) -> dict:
    urls = [cluster.url(i) for i in range(cluster.n)]
    sim = Simulation(
        SimConfig(
            urls=urls,
            brokers=n,
            topics=0,
            duration_s=0,
            first_broker_id=first_id,
            heartbeat_interval_s=2.0,
            check_log=False,
            max_connections=64,
            settle_timeout_s=30,
        ),
        log=progress,
    )
    run = asyncio.create_task(sim.run())
    started = time.monotonic()
    while sum(a.state is State.ACTIVE for a in sim.agents.values()) < n or not sim.agents:
        if run.done():
            run.result()
        if time.monotonic() - started > 300:
            sim.request_stop()
            await run
            return {"brokers": n, "error": "not all brokers became active within 300 s"}
        await asyncio.sleep(0.5)
    ramp_s = time.monotonic() - started
    progress(f"{n} brokers active after {ramp_s:.0f} s; measuring {window_s:.0f} s")
    leader = cluster.leader()
    pid = cluster.procs[leader].pid
    hb = sim.stats.endpoints["heartbeat"]
    before = (
        hb.total.copy(),
        sim.stats.events["unexpected_fencings"],
        cpu_seconds(pid),
        self_cpu(),
    )
    t0 = time.monotonic()
    max_fenced = 0
    ids = set(sim.agents)
    while time.monotonic() - t0 < window_s:
        await asyncio.sleep(1.0)
        image = sim.follower.image
        fenced = sum(1 for b in ids if (r := image.brokers.get(b)) is not None and r.fenced)
        max_fenced = max(max_fenced, fenced)
    elapsed = time.monotonic() - t0
    window = hb.total.since(before[0])
    beats = window.total
    false_fencings = sim.stats.events["unexpected_fencings"] - before[1]
    leader_cpu = cpu_seconds(pid) - before[2]
    sim_cpu = self_cpu() - before[3]
    sim.request_stop()
    await run
    return {
        "brokers": n,
        "ramp_s": round(ramp_s, 1),
        "window_s": round(elapsed, 1),
        "heartbeats_per_s": round(beats / elapsed, 1),
        "expected_per_s": round(n / 2.0, 1),
        "false_fencings": false_fencings,
        "max_fenced_at_once": max_fenced,
        "heartbeat_p50_ms": _ms(window.quantile(0.5)),
        "heartbeat_p99_ms": _ms(window.quantile(0.99)),
        "leader_cpu_ms_per_heartbeat": round(1000 * leader_cpu / max(beats, 1), 3),
        "leader_cpu_util": round(leader_cpu / elapsed, 2),
        "simulator_cpu_ms_per_heartbeat": round(1000 * sim_cpu / max(beats, 1), 3),
        "simulator_cpu_util": round(sim_cpu / elapsed, 2),
        "heartbeat_errors": dict(hb.errors),
    }


async def isr_rate(cluster: Cluster, seconds: float) -> dict:
    urls = [cluster.url(i) for i in range(cluster.n)]
    sim = Simulation(
        SimConfig(
            urls=urls,
            duration_s=seconds,
            chaos=("crash", "bounce", "slow", "blip"),
            first_broker_id=900_001,
            topic_prefix="bench-isr-",
        ),
        log=progress,
    )
    t0 = time.monotonic()
    result = await sim.run()
    # The run's own part: its end (every broker shuts down) shrinks every ISR.
    shrinks = result.isr_while_running["isr_shrinks"]
    expands = result.isr_while_running["isr_expands"]
    changes = shrinks + expands
    return {
        "brokers": result.brokers,
        "partitions": result.partitions,
        "seconds": round(time.monotonic() - t0, 1),
        "isr_shrinks": shrinks,
        "isr_expands": expands,
        "isr_changes_per_s": round(changes / seconds, 1),
        "alter_partition_accepted": result.events.get("alter_partition_NONE", 0),
        "chaos": result.chaos,
        "violations": len(result.violations),
        "alter_partition_p99_ms": result.requests.get("alter-partition", {}).get("p99_ms"),
    }


WRK_HEARTBEATS = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local epochs = {@EPOCHS@}
local first, n, pause = @FIRST@, @N@, @DELAY_MS@
local i = math.random(0, n - 1)
changes, errors = 0, 0
request = function()
  i = (i + 1) % n
  local body = string.format('{"brokerId":%d,"brokerEpoch":%d,"currentMetadataOffset":1000000000000}',
    first + i, epochs[i + 1])
  return wrk.format(nil, nil, nil, body)
end
delay = function() return pause end
response = function(status, headers, body)
  if status ~= 200 or not string.find(body, '"errorCode":0', 1, true) then errors = errors + 1
  elseif string.find(body, '"isFenced":true', 1, true) then changes = changes + 1 end
end
"""


async def wrk_step(cluster: Cluster, n: int, first_id: int, window_s: float) -> dict:
    """N brokers whose heartbeats come from wrk (C, paced with its delay hook at
    one beat per broker every 2 s): the server's capacity without a Python load
    generator on the same cores. False fencings: fence records the controller
    wrote during the window, and beats answered isFenced."""
    import shutil

    from bench.api import run_wrk

    if shutil.which("wrk") is None:
        return {"brokers": n, "error": "wrk is not installed (apt-get install wrk)"}
    url = cluster.url(cluster.leader())
    async with httpx.AsyncClient(base_url=url, timeout=60, follow_redirects=True) as c:
        cluster_id = (await c.get("/v1/quorum/status")).json()["clusterId"]
        slots = asyncio.Semaphore(32)
        epochs: dict[int, int] = {}

        async def register(b: int) -> None:
            async with slots:
                body = {
                    "brokerId": b, "clusterId": cluster_id,
                    "incarnationId": str(uuid.UUID(int=b, version=4)),
                    "listeners": [], "features": [METADATA_VERSION_RANGE],
                }  # fmt: skip
                epochs[b] = (await c.post("/v1/brokers/register", json=body)).json()["brokerEpoch"]
                await c.post(
                    "/v1/brokers/heartbeat",
                    json={"brokerId": b, "brokerEpoch": epochs[b], "currentMetadataOffset": 10**12},
                )

        t0 = time.monotonic()
        await asyncio.gather(*(register(first_id + i) for i in range(n)))
        progress(f"{n} brokers registered and unfenced in {time.monotonic() - t0:.0f} s (httpx)")
    connections = 50
    pause_ms = max(1, int(connections * 2000 / n))  # each broker beats every ~2 s
    script = WRK_HEARTBEATS
    for name, value in (
        ("@EPOCHS@", ",".join(str(epochs[first_id + i]) for i in range(n))),
        ("@FIRST@", first_id), ("@N@", n), ("@DELAY_MS@", pause_ms),
    ):  # fmt: skip
        script = script.replace(name, str(value))
    pid = cluster.procs[cluster.leader()].pid
    cpu0 = cpu_seconds(pid)
    load = asyncio.create_task(
        asyncio.to_thread(run_wrk, url, "/v1/brokers/heartbeat", script, connections, window_s)
    )
    # Brokers registered first went unheard while the rest registered, and their
    # sessions may have expired then: fencings count from wrk's first full round.
    await asyncio.sleep(5.0)
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        start = (await c.get("/v1/quorum/status")).json()["highWatermark"]
    figures = await load
    leader_cpu = cpu_seconds(pid) - cpu0
    fences = 0
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        offset = start
        while True:
            page = (
                await c.get("/v1/log", params={"fromOffset": offset, "maxRecords": 5000})
            ).json()
            for r in page["records"]:
                data = r["data"]
                if r["type"] == "BROKER_REGISTRATION_CHANGE_RECORD" and data.get("fenced") == 1:
                    fences += 1
            if not page["records"]:
                break
            offset = page["nextOffset"]
    beats = figures["requests_per_s"] * window_s
    return {
        "brokers": n,
        "load": "wrk",
        "window_s": window_s,
        "heartbeats_per_s": round(figures["requests_per_s"], 1),
        "expected_per_s": n / 2.0,
        "false_fencings": fences,
        "answered_fenced": int(figures["changes_per_s"] * window_s),
        "errors": figures["errors"],
        "heartbeat_p50_ms": figures["p50_ms"],
        "heartbeat_p99_ms": figures["p99_ms"],
        "leader_cpu_ms_per_heartbeat": round(1000 * leader_cpu / max(beats, 1), 3),
        "leader_cpu_util": round(leader_cpu / window_s, 2),
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def print_step(s: dict) -> None:
    if "error" in s:
        print(f"{s['brokers']:>8} {s['error']}")
        return
    sim = s.get("simulator_cpu_ms_per_heartbeat")  # none when wrk sent the heartbeats
    print(
        f"{s['brokers']:>8} {s['heartbeats_per_s']:>8} {s['expected_per_s']:>7} "
        f"{s['false_fencings']:>6} {s['heartbeat_p50_ms']:>7} {s['heartbeat_p99_ms']:>7} "
        f"{s['leader_cpu_ms_per_heartbeat']:>12} {s['leader_cpu_util']:>10}"
        + ("" if sim is None else f" {sim:>9}")
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", default="500,1000,2000,3000,5000", help="broker counts to try")
    p.add_argument("--window", type=float, default=60.0, help="seconds measured per step")
    p.add_argument("--isr-seconds", type=float, default=60.0)
    p.add_argument("--isr-only", action="store_true")
    p.add_argument(
        "--wrk",
        default="",
        metavar="STEPS",
        help="also: broker counts whose heartbeats come from wrk instead of the simulator",
    )
    p.add_argument("--fsync", default="always", choices=["always", "never"])
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    out: dict = {"machine": f"{os.cpu_count()} cores", "fsync": args.fsync, "steps": []}
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
        cluster = Cluster(Path(tmp), voters=3, fsync=args.fsync)
        try:
            cluster.start()
            cluster.wait_ready()
            cluster.leader()
            if not args.isr_only:
                for i, n in enumerate(int(s) for s in args.steps.split(",") if s):
                    progress(f"step {i + 1}: {n} brokers at a 2 s heartbeat interval")
                    step = asyncio.run(heartbeat_step(cluster, n, 100_000 * (i + 1), args.window))
                    out["steps"].append(step)
                    progress(json.dumps(step))
                    if (
                        step.get("error")
                        or step["false_fencings"]
                        or (step["heartbeats_per_s"] < 0.9 * step["expected_per_s"])
                    ):
                        progress("this step lost heartbeats or fenced brokers: stopping here")
                        break
            out["wrk_steps"] = []
            for i, n in enumerate(int(x) for x in args.wrk.split(",") if x):
                progress(f"wrk step: {n} brokers at a 2 s heartbeat interval, {args.window:.0f} s")
                step = asyncio.run(wrk_step(cluster, n, 10_000_000 * (i + 1), args.window))
                out["wrk_steps"].append(step)
                progress(json.dumps(step))
            progress(f"ISR changes under the default simulation, {args.isr_seconds:.0f} s")
            out["isr"] = asyncio.run(isr_rate(cluster, args.isr_seconds))
        finally:
            cluster.close()
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"\nheartbeat capacity (3 voters on loopback, fsync {args.fsync}, {out['machine']}):")
    print(
        f"{'brokers':>8} {'hb/s':>8} {'expect':>7} {'false':>6} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'leader ms/hb':>12} {'leader cpu':>10} {'sim ms/hb':>9}"
    )
    for s in out["steps"]:
        print_step(s)
    if out["wrk_steps"]:
        print("\nheartbeats from wrk (paced at one per broker every 2 s):")
        for s in out["wrk_steps"]:
            print_step(s)
    isr = out["isr"]
    print(
        f"\nISR changes under the default simulation ({isr['brokers']} brokers, "
        f"{isr['partitions']} partitions, chaos {isr['chaos']}): {isr['isr_changes_per_s']}/s "
        f"({isr['isr_shrinks']} shrinks, {isr['isr_expands']} expands, "
        f"{isr['violations']} violations)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
