"""``metaquorum sim --processes K``: the brokers split across K worker processes.

One simulator process carries a few thousand heartbeating brokers per core;
past that its event loop falls behind and its heartbeats go out late
(brokers/loop_lag.py). Here the parent (``MultiSimulation``) keeps what there
is one of: the log follower that feeds the dashboard and the final log check,
the topics, the settle verdict, the summary. Each worker (``Worker``, spawned,
with its own uvloop) runs a contiguous range of broker ids with its own HTTP
connections and its own log follower (its brokers' metadata caches).

* Reproducible: every process draws the same chaos schedule and the same
  per-broker rngs from ``--seed`` and runs the events of its own brokers.
* The data plane crosses processes: a leader in one worker asks about a
  follower in another through ``SharedWorld``: the follower's process says
  which of its brokers are down or slow (every report), the parent relays it;
  any other broker fetches as the image shows it (registered, unfenced).
* Stats travel as plain data (``SimStats.to_wire``) twice a second; the parent
  adds them up for the dashboard and the summary.
* Nothing outlives the parent: a worker ignores Ctrl-C (the parent decides),
  exits when its pipe closes (the parent died), and the parent terminates, then
  kills, any worker still running when it ends, however it ends.

Messages (tuples over a ``multiprocessing`` pipe): parent -> worker ``("run",
run_start, topic_ids)``, ``("calm",)``, ``("stop",)``, ``("peers", {id: [alive, epoch,
slow_until]})``; worker -> parent ``("report", dict)``, ``("final", dict)``,
``("error", text)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import multiprocessing
import os
import signal
import time
import traceback
from collections import Counter
from multiprocessing.connection import Connection
from typing import Any

from .agent import State
from .client import ClientError
from .data_plane import World
from .loop_lag import CLUSTER, SIMULATOR, LagMonitor
from .metadata_cache import LogFollower
from .sim import Simulation
from .sim_config import SimConfig
from .sim_http import sim_clients
from .sim_report import SimResult, image_counts, in_ms
from .stats import Histogram, SimStats
from .tls import load_client_tls

REPORT_EVERY_S = 0.5
BROKERS_PER_PROCESS = 5000  # what one process carries with room to spare (bench/sim_scale.py)


def auto_processes(brokers: int, cores: int | None = None) -> int:
    """``--processes auto``: one per BROKERS_PER_PROCESS brokers, at most one
    per core (the cluster under test needs cores too)."""
    cores = cores or os.cpu_count() or 1
    return max(1, min(cores, math.ceil(brokers / BROKERS_PER_PROCESS)))


def split(config: SimConfig, k: int) -> list[range]:
    """Contiguous broker id ranges, as even as can be."""
    first, n = config.first_broker_id, config.brokers
    bounds = [first + n * i // k for i in range(k + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(k) if bounds[i] < bounds[i + 1]]


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system


# ---------------------------------------------------------------- the worker side


class SharedWorld(World):
    """The data plane where some followers live in other processes."""

    def __init__(self, follower: LogFollower) -> None:
        super().__init__()
        self.follower = follower
        self.remote: dict[int, list] = {}  # broker -> [alive, epoch, slow_until]

    def fetch(self, follower_id, topic_id, partition, leader_leo, now_ms):
        if follower_id in self.agents:
            return super().fetch(follower_id, topic_id, partition, leader_leo, now_ms)
        key = (follower_id, topic_id, partition)
        told = self.remote.get(follower_id)
        if told is not None:
            alive, epoch, slow_until = told
            if not alive or epoch < 0:
                return None
            if self.clock() < slow_until:
                return self._stalled_at.setdefault(key, max(0, leader_leo - 1)), epoch
        self._stalled_at.pop(key, None)
        reg = self.follower.image.brokers.get(follower_id)
        if reg is None or reg.fenced:
            return None
        return leader_leo, reg.epoch

    def disturbed(self) -> dict[int, list]:
        """This process's brokers that do not fetch as the image shows them:
        crashed (the image shows them unfenced until their session expires) or
        slow. Few, so the message stays small: a pipe holds 64 KB, and a
        parent and a worker each blocked sending to the other would deadlock.
        (Registering or stopped brokers are not here: the image has them
        fenced or not at all, so they do not fetch either way.)"""
        now = self.clock()
        out = {}
        for b, a in self.agents.items():
            slow = self.slow_until.get(b, 0.0)
            if a.state is State.CRASHED or slow > now:
                out[b] = [a.alive, a.epoch, slow]
        return out


class Worker(Simulation):
    """The brokers of one range, driven by the parent's messages."""

    def __init__(self, config: SimConfig, owned: range, started: float, conn: Connection) -> None:
        super().__init__(config)
        self.owned = owned
        self.started = started  # the parent's: chaos lines carry the same clock
        self.conn = conn
        self.schedule = [e for e in self.schedule if e.broker_id in owned]
        self._inbox: asyncio.Queue = asyncio.Queue()

    async def run_worker(self, cluster_id: str) -> None:
        c = self.config
        loop = asyncio.get_running_loop()
        loop.add_reader(self.conn.fileno(), self._receive)
        async with sim_clients(c, metadata_connections=2) as (self.client, self.meta):
            self.follower = LogFollower(self.meta, wait_ms=c.log_wait_ms)
            self.world = SharedWorld(self.follower)
            self._tasks += [
                asyncio.create_task(self.follower.run(), name="log-follower"),
                asyncio.create_task(self.lag.run(), name="loop-lag"),
                asyncio.create_task(self._report_loop(), name="report"),
            ]
            chaos: asyncio.Task | None = None
            try:
                self._make_agents(cluster_id, self.owned)
                await self._start_agents()
                while True:
                    msg = await self._inbox.get()
                    if msg is None:
                        return  # the parent is gone
                    if msg[0] == "run":
                        self.phase = "running"
                        self.topic_ids = set(msg[2])  # what a decommission moves
                        chaos = asyncio.create_task(self._chaos(msg[1]), name="chaos")
                    elif msg[0] == "calm":
                        if chaos is not None:
                            chaos.cancel()
                            await asyncio.gather(chaos, return_exceptions=True)
                        self._calm()
                    elif msg[0] == "stop":
                        stuck = self._stuck_lines()
                        results = await asyncio.gather(*(a.stop() for a in self.agents.values()))
                        final = self.report()
                        final["stuck"] = stuck
                        final["unclean"] = sum(1 for ok in results if not ok)
                        self.conn.send(("final", final))
                        return
            finally:
                loop.remove_reader(self.conn.fileno())
                if chaos is not None:
                    chaos.cancel()
                for t in self._tasks:
                    t.cancel()
                await asyncio.gather(*self._tasks, return_exceptions=True)

    def _receive(self) -> None:
        try:
            msg = self.conn.recv()
        except (EOFError, OSError):
            msg = None
        if msg is not None and msg[0] == "peers":
            mine = self.owned
            self.world.remote = {b: v for b, v in msg[1].items() if b not in mine}
            return
        if msg is None:
            asyncio.get_running_loop().remove_reader(self.conn.fileno())
        self._inbox.put_nowait(msg)

    async def _report_loop(self) -> None:
        while True:
            await asyncio.sleep(REPORT_EVERY_S)
            self.conn.send(("report", self.report()))

    def report(self) -> dict[str, Any]:
        count, example = self.troubles()
        return {
            "states": dict(Counter(a.state.value for a in self.agents.values())),
            "settled": self._agents_settled(),
            "stats": self.stats.to_wire(),
            "lag": {
                "loop": self.lag.loop.to_wire(),
                "heartbeats": self.lag.heartbeats.to_wire(),
                "worst_s": self.lag.worst_s,
                "now_s": self.lag.recent_max_s(),
            },
            "chaos_done": dict(self.chaos_done),
            "chaos_skipped": self.chaos_skipped,
            "recent_chaos": list(self.recent_chaos),
            "troubles": [count, example],
            "disturbed": self.world.disturbed(),
            "cpu_s": cpu_s(),
        }


def worker_main(
    conn: Connection, config: SimConfig, owned: range, cluster_id: str, started: float
) -> None:
    """A spawned worker's entry point."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    import uvloop  # noqa: PLC0415

    try:
        if config.tls_files is not None:
            config = dataclasses.replace(config, tls=load_client_tls(*config.tls_files))
        worker = Worker(config, owned, started, conn)
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(worker.run_worker(cluster_id))
    except Exception:  # noqa: BLE001 - tell the parent, which names it in the summary
        with contextlib.suppress(OSError):
            conn.send(("error", traceback.format_exc(limit=8)))
    finally:
        conn.close()


# ---------------------------------------------------------------- the parent side


class MultiSimulation(Simulation):
    """The parent: the dashboard's and the summary's ``Simulation``, with the
    brokers in worker processes."""

    def __init__(self, config: SimConfig, log=lambda s: None) -> None:
        super().__init__(config, log)
        self.ranges = split(config, config.processes)
        self.procs: list[multiprocessing.process.BaseProcess] = []
        self.conns: list[Connection] = []
        self.reports: list[dict | None] = [None] * len(self.ranges)
        self.finals: list[dict | None] = [None] * len(self.ranges)
        self._worker_stats: SimStats | None = None

    # ------------------------------------------------------------ views

    def snapshot(self):
        snap = super().snapshot()
        states: Counter = Counter()
        for r in self._latest():
            states.update(r["states"])
        snap.agent_states = dict(states)
        return snap

    def _latest(self) -> list[dict]:
        return [f or r for f, r in zip(self.finals, self.reports, strict=True) if f or r]

    def lag_now(self) -> dict[str, Any]:
        latest = self._latest()
        monitors = self.monitors()
        worst = max(m.worst_s for m in monitors)
        beats = Histogram()
        for m in monitors:
            beats.merge(m.heartbeats)
        events = self.stats.events
        return {
            "processes": len(monitors),  # the parent and its workers
            "now_s": max([self.lag.recent_max_s()] + [r["lag"]["now_s"] for r in latest]),
            "worst_s": worst,
            "heartbeat_late_p99_ms": in_ms(beats.quantile(0.99)),
            "fencings_late_heartbeats": events.get(SIMULATOR, 0),
            "fencings_on_time": events.get(CLUSTER, 0),
            "warning": next((m.warning() for m in monitors if m.warning()), None),
        }

    def monitors(self) -> list[LagMonitor]:
        """The parent's monitor, and one rebuilt from each worker's last report."""
        out = [self.lag]
        for r in self._latest():
            m = LagMonitor(self.config.session_timeout_s, self.config.heartbeat_interval_s)
            m.loop = Histogram.from_wire(r["lag"]["loop"])
            m.heartbeats = Histogram.from_wire(r["lag"]["heartbeats"])
            m.worst_s = r["lag"]["worst_s"]
            out.append(m)
        return out

    def troubles(self) -> tuple[int, str | None]:
        count, example = 0, None
        for r in self._latest():
            count += r["troubles"][0]
            example = example or r["troubles"][1]
        return count, example

    def cpu_seconds(self) -> float:
        """CPU used so far by the parent and by every worker (their reports)."""
        return cpu_s() + sum(r["cpu_s"] for r in self._latest())

    # ------------------------------------------------------------ the workers

    def _spawn(self, cluster_id: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        wire_config = dataclasses.replace(self.config, tls=None)  # an SSLContext does not pickle
        loop = asyncio.get_running_loop()
        for i, owned in enumerate(self.ranges):
            parent_end, child_end = ctx.Pipe()
            p = ctx.Process(
                target=worker_main,
                args=(child_end, wire_config, owned, cluster_id, self.started),
                name=f"metaquorum-sim-worker-{i}",
                daemon=True,
            )
            p.start()
            child_end.close()
            self.procs.append(p)
            self.conns.append(parent_end)
            loop.add_reader(parent_end.fileno(), self._receive, i)

    def _receive(self, i: int) -> None:
        conn = self.conns[i]
        try:
            kind, body = conn.recv()
        except (EOFError, OSError) as e:
            asyncio.get_running_loop().remove_reader(conn.fileno())
            if self.finals[i] is None:
                self.procs[i].join(1.0)
                self.problems.append(
                    f"worker {i} ended without a final report "
                    f"(exit code {self.procs[i].exitcode}, {e!r})"
                )
                self.finals[i] = self.reports[i] or _empty_report()
            return
        if kind == "error":
            self.problems.append(f"worker {i} failed: {body.strip().splitlines()[-1]}")
            self.say(body)
            return
        if kind == "final":
            self.finals[i] = body
        else:
            self.reports[i] = body
        self._merge()
        if kind == "report":
            disturbed: dict[int, list] = {}
            for r in self._latest():
                disturbed.update(r["disturbed"])
            for j, other in enumerate(self.conns):
                if j != i and self.finals[j] is None:
                    with contextlib.suppress(OSError):
                        other.send(("peers", disturbed))

    def _merge(self) -> None:
        latest = self._latest()
        self.stats = SimStats.merged([r["stats"] for r in latest])
        self.chaos_done = Counter()
        self.chaos_skipped = 0
        lines: list[str] = []
        for r in latest:
            self.chaos_done.update(r["chaos_done"])
            self.chaos_skipped += r["chaos_skipped"]
            lines += r["recent_chaos"]
        self.recent_chaos = sorted(lines, key=lambda line: float(line.split("s", 1)[0]))[-8:]

    def _tell(self, *msg) -> None:
        for i, conn in enumerate(self.conns):
            if self.finals[i] is None:
                with contextlib.suppress(OSError):
                    conn.send(msg)

    def _stop_workers(self) -> None:
        """Every worker ends with this call, also on Ctrl-C or a failure."""
        loop = asyncio.get_running_loop()
        for conn in self.conns:
            with contextlib.suppress(OSError, ValueError):
                loop.remove_reader(conn.fileno())
            conn.close()  # a worker exits when its pipe closes
        deadline = time.monotonic() + 5.0
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.terminate()
                p.join(2.0)
            if p.is_alive():
                p.kill()
                p.join(2.0)

    # ------------------------------------------------------------ the run

    async def _stop_brokers(self) -> None:
        self._stop_workers()  # the brokers run in them

    async def _run(self) -> SimResult:
        c = self.config
        cluster_id = await self._cluster_id()
        self.follower = LogFollower(self.meta, wait_ms=c.log_wait_ms)
        self._tasks += [
            asyncio.create_task(self.follower.run(), name="log-follower"),
            asyncio.create_task(self._watch_controller(), name="controller"),
            asyncio.create_task(self.lag.run(), name="loop-lag"),
        ]
        self.phase = f"registering brokers ({len(self.ranges)} processes)"
        self._spawn(cluster_id)
        need = min(c.brokers, max(c.replication_factor, 1))
        await self._wait(
            lambda: self._failed() or self.snapshot().agent_states.get("active", 0) >= need,
            60.0,
            f"{need} brokers active",
        )
        if self._failed():
            raise ClientError("; ".join(self.problems))
        self.phase = "creating topics"
        await self._create_topics()
        self.phase = "running" + (f" with chaos ({','.join(c.chaos)})" if c.chaos else "")
        run_start = self._run_start = time.monotonic()
        self._tell("run", run_start, sorted(self.topic_ids))
        remaining = c.duration_s if c.duration_s else None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), remaining)
        return await self.finish()

    def _failed(self) -> bool:
        return any(p.startswith("worker") for p in self.problems)

    def _settled(self) -> bool:
        reports = [r for r in self.reports if r is not None]
        return (
            len(reports) == len(self.ranges)
            and all(r["settled"] for r in reports)
            and self._isrs_full()
        )

    async def finish(self) -> SimResult:
        c = self.config
        cache = self.follower.cache
        running = {"isr_shrinks": cache.isr_shrinks, "isr_expands": cache.isr_expands}
        self.phase = "settling: every broker back, ISRs full"
        self._tell("calm")
        settle_start = time.monotonic()
        # A report from before "calm" may say settled: ask for two fresh ones.
        await asyncio.sleep(2 * REPORT_EVERY_S + 0.1)
        settled = await self._wait(self._settled, c.settle_timeout_s, None)
        settle_s = time.monotonic() - settle_start if settled else None
        final = image_counts(self.follower.image, self.topic_ids)
        self.phase = "stopping brokers (controlled shutdown)"
        self._tell("stop")
        await self._wait(
            lambda: all(f is not None for f in self.finals),
            c.settle_timeout_s + 90.0,  # a controlled shutdown may take 60 s
            None,
        )
        for i, f in enumerate(self.finals):
            if f is None:
                self.problems.append(f"worker {i} sent no final report")
        finals = [f for f in self.finals if f is not None]
        stuck = [line for f in finals for line in f.get("stuck", [])]
        unclean = sum(f.get("unclean", 0) for f in finals)
        return await self._result(
            final, settled, settle_s, stuck, running, unclean, self.monitors(), len(self.ranges)
        )


def _empty_report() -> dict[str, Any]:
    return {
        "states": {},
        "settled": False,
        "stats": SimStats().to_wire(),
        "lag": {"loop": Histogram().to_wire(), "heartbeats": Histogram().to_wire(),
                "worst_s": 0.0, "now_s": 0.0},
        "chaos_done": {},
        "chaos_skipped": 0,
        "recent_chaos": [],
        "troubles": [0, None],
        "disturbed": {},
        "cpu_s": 0.0,
    }  # fmt: skip


def make_simulation(config: SimConfig, log=lambda s: None) -> Simulation:
    """One process (``--processes 1``) or a parent with workers."""
    if config.processes > 1:
        return MultiSimulation(config, log)
    return Simulation(config, log)
