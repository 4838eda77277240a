"""Many simulated brokers in one process, with chaos, against a real cluster.

N ``BrokerAgent``s share one HTTP connection pool and one log follower (their
metadata caches would all be at the same offset anyway). A ``World`` plays the
data plane between them: a follower fetches from its leaders while it is alive,
with the broker epoch of its current incarnation (KIP-903), and stalls while it
is "slow". Chaos follows a schedule drawn from ``--seed`` before the run starts,
so a run can be repeated:

* crash: the broker stops without a word (heartbeats and fetches stop); its
  session expires and the controller fences it; it comes back as a new
  incarnation after ``crash_downtime_s`` (DUPLICATE_BROKER_REGISTRATION until
  the old session has expired, as in Kafka);
* bounce: a controlled shutdown (KIP-841), then a new incarnation at once;
* slow: its fetches stall past ``replica.lag.time.max.ms``: leaders shrink it
  out of their ISRs, then expand it back once it catches up;
* blip: nothing it sends reaches the controller for a few seconds (less than
  the session timeout: no fencing should follow);
* decommission: an operator retires the broker as Kafka's docs say: its
  replicas are reassigned to other active brokers, it shuts down (controlled),
  then it is unregistered (UnregisterBroker); after ``crash_downtime_s`` a new
  broker takes the id, empty, as a replacement machine would.

Afterwards the chaos stops, every broker comes back, and the run settles; then
the log is read back and checked (``metadata_records.log_invariants``), and no agent may be left
with an ISR change in flight.

This module is the run (``Simulation``: start, chaos, settle, stop, sum up); what
it plays sits beside it: the run's flags (sim_config.py), the chaos schedule
(chaos_schedule.py), the HTTP clients (sim_http.py), the data plane
(data_plane.py), the dashboard's snapshot and the summary (sim_report.py) and
the log read back at the end (log_check.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from metadata_records.image import PartitionRegistration
from metadata_records.log_invariants import Violation

from .agent import AgentConfig, BrokerAgent, State
from .chaos_schedule import ChaosEvent, chaos_schedule
from .client import ClientError, MetaquorumClient
from .data_plane import World
from .log_check import read_and_check_log
from .loop_lag import CLUSTER, SIMULATOR, LagMonitor
from .metadata_cache import LogFollower
from .sim_config import SimConfig
from .sim_http import sim_clients
from .sim_report import SimResult, Snapshot, image_counts, in_ms, lag_summary
from .stats import SimStats


class Simulation:
    def __init__(self, config: SimConfig, log: Callable[[str], None] = lambda s: None) -> None:
        bad = config.problems()
        if bad:
            raise ValueError("; ".join(bad))
        self.config = config
        self.say = log
        self.stats = SimStats()
        self.lag = LagMonitor(config.session_timeout_s, config.heartbeat_interval_s)
        self.world = World()
        self.schedule = chaos_schedule(config)
        self.chaos_done: Counter = Counter()
        self.chaos_skipped = 0
        self.recent_chaos: list[str] = []
        self.started = time.monotonic()
        self.phase = "starting"
        self.controller: dict[str, Any] = {}
        self.topic_ids: set[str] = set()
        self.client: MetaquorumClient | None = None  # the brokers' requests
        self.meta: MetaquorumClient | None = None  # metadata: log, snapshot, status
        self.follower: LogFollower | None = None
        self.agents: dict[int, BrokerAgent] = {}
        self._rates: list[tuple[float, int, int]] = []
        self._tasks: list[asyncio.Task] = []
        self._stop = asyncio.Event()
        self._run_start: float | None = None  # when the chaos clock started
        self._decommissioning: set[int] = set()  # brokers whose replicas are moving away
        self.problems: list[str] = []

    @property
    def _ran_s(self) -> float:
        """Seconds since the chaos clock started (0 before it did)."""
        return 0.0 if self._run_start is None else time.monotonic() - self._run_start

    def request_stop(self) -> None:
        """Ends the run early (Ctrl-C), still settling, stopping cleanly and checking."""
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    # ------------------------------------------------------------ views

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def snapshot(self) -> Snapshot:
        image = self.follower.image if self.follower else None
        counts = image_counts(image, self.topic_ids) if image is not None else {}
        states = Counter(a.state.value for a in self.agents.values())
        return Snapshot(
            self.elapsed_s, image.last_offset if image else -1, **counts, agent_states=dict(states)
        )

    def lag_now(self) -> dict[str, Any]:
        """The dashboard's line on the simulator's own lag."""
        return {
            "processes": 1,
            "now_s": self.lag.recent_max_s(),
            "worst_s": self.lag.worst_s,
            "heartbeat_late_p99_ms": in_ms(self.lag.heartbeats.quantile(0.99)),
            "fencings_late_heartbeats": self.stats.events.get(SIMULATOR, 0),
            "fencings_on_time": self.stats.events.get(CLUSTER, 0),
            "warning": self.lag.warning(),
        }

    def monitors(self) -> list[LagMonitor]:
        """The lag monitor of each simulator process."""
        return [self.lag]

    def cpu_seconds(self) -> float:
        """CPU used so far by the simulator's processes."""
        t = os.times()
        return t.user + t.system

    def troubles(self) -> tuple[int, str | None]:
        """How many brokers report a problem, and one of them, for the dashboard."""
        troubled = [a for a in self.agents.values() if a.problem]
        if not troubled:
            return 0, None
        return len(troubled), f"broker {troubled[0].broker_id}: {troubled[0].problem}"

    def isr_rates(self, window_s: float = 5.0) -> tuple[float, float]:
        """ISR shrinks and expands per second committed, over the last window."""
        if self.follower is None:
            return 0.0, 0.0
        cache = self.follower.cache
        now = time.monotonic()
        self._rates.append((now, cache.isr_shrinks, cache.isr_expands))
        while len(self._rates) > 2 and now - self._rates[0][0] > window_s:
            self._rates.pop(0)
        t0, s0, e0 = self._rates[0]
        span = now - t0
        if span <= 0:
            return 0.0, 0.0
        return (cache.isr_shrinks - s0) / span, (cache.isr_expands - e0) / span

    # ------------------------------------------------------------ the run

    async def run(self) -> SimResult:
        async with sim_clients(self.config) as (self.client, self.meta):
            try:
                return await self._run()
            finally:
                for t in self._tasks:
                    t.cancel()
                await asyncio.gather(*self._tasks, return_exceptions=True)
                await self._stop_brokers()

    async def _stop_brokers(self) -> None:
        """After the run, whatever ended it: no broker keeps running."""
        for a in self.agents.values():
            if a.alive:
                await a.crash()

    async def _run(self) -> SimResult:
        c = self.config
        cluster_id = await self._cluster_id()
        self.follower = LogFollower(self.meta, wait_ms=c.log_wait_ms)
        self._tasks.append(asyncio.create_task(self.follower.run(), name="log-follower"))
        self._tasks.append(asyncio.create_task(self._watch_controller(), name="controller"))
        self._tasks.append(asyncio.create_task(self.lag.run(), name="loop-lag"))
        self._make_agents(cluster_id)
        await self._start_agents()
        need = min(c.brokers, max(c.replication_factor, 1))
        await self._wait(
            lambda: sum(a.state is State.ACTIVE for a in self.agents.values()) >= need,
            60.0,
            f"{need} brokers active",
        )
        self.phase = "creating topics"
        await self._create_topics()
        self.phase = "running" + (f" with chaos ({','.join(c.chaos)})" if c.chaos else "")
        run_start = self._run_start = time.monotonic()
        chaos = asyncio.create_task(self._chaos(run_start), name="chaos")
        self._tasks.append(chaos)
        try:
            remaining = c.duration_s - (time.monotonic() - run_start) if c.duration_s else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), remaining)
        finally:
            chaos.cancel()
            await asyncio.gather(chaos, return_exceptions=True)
        return await self.finish()

    def _make_agents(self, cluster_id: str, owned: range | None = None) -> None:
        """The brokers of this process (``owned``; None: all). Each broker's rng
        is drawn from the seed in broker order, whichever process runs it."""
        c = self.config
        agent_config = AgentConfig(
            heartbeat_interval_s=c.heartbeat_interval_s,
            replica_lag_time_max_ms=c.replica_lag_time_max_ms,
            session_timeout_s=c.session_timeout_s,
        )
        rng = random.Random(c.seed)
        for i in range(c.brokers):
            b = c.first_broker_id + i
            seed = rng.getrandbits(64)
            if owned is not None and b not in owned:
                continue
            agent = BrokerAgent(
                b,
                cluster_id,
                self.client,
                self.follower,
                config=agent_config,
                followers=self.world,
                stats=self.stats,
                rack=f"rack-{i % 3}",
                rng=random.Random(seed),
                lag=self.lag,
            )
            self.agents[b] = self.world.agents[b] = agent

    async def _start_agents(self) -> None:
        self.phase = "registering brokers"
        for i, agent in enumerate(self.agents.values()):
            agent.start()
            if i % 100 == 99:
                await asyncio.sleep(0.05)  # a staggered start, as a rolling deploy would

    def _calm(self) -> None:
        """The chaos is over: every broker back, nothing slow or cut off."""
        self.world.slow_until.clear()
        for a in self.agents.values():
            a.blip_until = 0.0
            if not a.alive:
                a.start()

    def _stuck_lines(self) -> list[str]:
        c = self.config
        return [
            f"broker {a.broker_id}: {self._tp_name(tp)} has had a change in flight for "
            f"over {c.stuck_after_s:.0f} s"
            for a in self.agents.values()
            for tp in a.stuck_changes(c.stuck_after_s)
        ]

    async def finish(self) -> SimResult:
        """Calm down, settle, stop every broker cleanly, check the log."""
        c = self.config
        cache = self.follower.cache
        running = {"isr_shrinks": cache.isr_shrinks, "isr_expands": cache.isr_expands}
        self.phase = "settling: every broker back, ISRs full"
        self._calm()
        settle_start = time.monotonic()
        settled = await self._wait(self._settled, c.settle_timeout_s, None)
        settle_s = time.monotonic() - settle_start if settled else None
        stuck = self._stuck_lines()
        final = image_counts(self.follower.image, self.topic_ids)
        self.phase = "stopping brokers (controlled shutdown)"
        results = await asyncio.gather(*(a.stop() for a in self.agents.values()))
        unclean = sum(1 for ok in results if not ok)
        return await self._result(
            final, settled, settle_s, stuck, running, unclean, [self.lag], processes=1
        )

    async def _result(
        self,
        final: dict,
        settled: bool,
        settle_s: float | None,
        stuck: list[str],
        running: dict,
        unclean: int,
        monitors: list,
        processes: int,
    ) -> SimResult:
        """Checks the log (unless told not to) and sums the run up: one
        process's run or several's (brokers/sim_workers.py)."""
        c = self.config
        cache = self.follower.cache
        violations: list[Violation] = []
        checked = fencings = 0
        if c.check_log:
            self.phase = "checking the log"
            checker = await read_and_check_log(self.meta)
            violations, checked, fencings = checker.violations, checker.records, checker.fencings
        warning = next((w for w in (m.warning() for m in monitors) if w), None)
        return SimResult(
            seed=c.seed,
            brokers=c.brokers,
            partitions=final["partitions"],
            duration_s=round(self.elapsed_s, 1),
            chaos=dict(self.chaos_done),
            chaos_skipped=self.chaos_skipped,
            # What was due (a run until Ctrl-C draws a day's schedule up front).
            schedule=[asdict(e) for e in self.schedule if e.at_s <= self._ran_s],
            settled=settled,
            settle_s=None if settle_s is None else round(settle_s, 2),
            stuck=stuck,
            violations=[str(v) for v in violations],
            records_checked=checked,
            fencings=fencings,
            isr_shrinks=cache.isr_shrinks,
            isr_expands=cache.isr_expands,
            isr_while_running=running,
            events=dict(self.stats.events),
            requests=self.request_summary(),
            unclean_shutdowns=unclean,
            final=final,
            problems=self.problems,
            lag=lag_summary(monitors, self.stats.events),
            warnings=[warning] if warning else [],
            processes=processes,
        )

    def _settled(self) -> bool:
        return self._agents_settled() and self._isrs_full()

    def _agents_settled(self) -> bool:
        if any(a.state is not State.ACTIVE for a in self.agents.values()):
            return False
        return not any(a.in_flight_since for a in self.agents.values())

    def _isrs_full(self) -> bool:
        # Only partitions on our brokers can heal (a topic left by an earlier run
        # with other broker ids stays as it is).
        c = self.config
        ours = set(range(c.first_broker_id, c.first_broker_id + c.brokers))
        for topic_id in self.topic_ids:
            topic = self.follower.image.topics.get(topic_id)
            for p in topic.partitions.values() if topic else ():
                if ours.issuperset(p.replicas) and (len(p.isr) < len(p.replicas) or p.leader == -1):
                    return False
        return True

    def request_summary(self) -> dict[str, dict[str, Any]]:
        out = {}
        for name, ep in sorted(self.stats.endpoints.items()):
            h = ep.total
            out[name] = {
                "count": h.total,
                "p50_ms": in_ms(h.quantile(0.5)),
                "p99_ms": in_ms(h.quantile(0.99)),
                "max_ms": in_ms(h.max_s if h.total else None),
                "errors": dict(ep.errors),
            }
        return out

    # ------------------------------------------------------------ steps

    async def _cluster_id(self) -> str:
        deadline = time.monotonic() + 60
        while True:
            try:
                status = await self.meta.status()
                if status.ok and status.body.get("clusterId"):
                    self.controller = status.body
                    return status.body["clusterId"]
                problem = f"{status.error_name}: {status.error_message}"
            except ClientError as e:
                problem = str(e)
            if time.monotonic() > deadline:
                raise ClientError(
                    f"no voter answered /v1/quorum/status within 60 s ({problem}); "
                    f"is the cluster running at {', '.join(self.config.urls)}?"
                )
            self.say(f"waiting for the cluster: {problem}")
            await asyncio.sleep(1.0)

    async def _create_topics(self) -> None:
        c = self.config
        if c.topics == 0:
            return
        answer = await self.client.create_topics(
            [
                {
                    "name": f"{c.topic_prefix}{i}",
                    "numPartitions": c.partitions,
                    "replicationFactor": c.replication_factor,
                }
                for i in range(c.topics)
            ]
        )
        for t in answer.body.get("topics") or []:
            if t["errorName"] not in ("NONE", "TOPIC_ALREADY_EXISTS"):
                raise ClientError(
                    f"creating topic {t['name']}: {t['errorName']}: {t.get('errorMessage')}"
                )
        names = {f"{c.topic_prefix}{i}" for i in range(c.topics)}

        def known() -> bool:
            ids = self.follower.image.topic_ids
            return all(n in ids for n in names)

        await self._wait(known, 30.0, "the topics in the metadata log")
        self.topic_ids = {self.follower.image.topic_ids[n] for n in names}

    async def _chaos(self, run_start: float) -> None:
        pending: set[asyncio.Task] = set()
        try:
            for event in self.schedule:
                delay = run_start + event.at_s - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                task = asyncio.create_task(self._disturb(event))
                pending.add(task)
                task.add_done_callback(pending.discard)
            await asyncio.Event().wait()
        finally:
            for t in list(pending):
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _disturb(self, e: ChaosEvent) -> None:
        agent = self.agents[e.broker_id]
        busy = (
            not agent.alive
            or agent.state is not State.ACTIVE
            or time.monotonic() < self.world.slow_until.get(e.broker_id, 0.0)
            or agent._blipped()
            or e.broker_id in self._decommissioning
        )
        if busy:
            self.chaos_skipped += 1  # still recovering from an earlier event
            return
        self.chaos_done[e.kind] += 1
        self._note(f"{self.elapsed_s:6.1f}s  {e.kind:6} broker {e.broker_id}")
        if e.kind == "crash":
            await agent.crash()
            await asyncio.sleep(e.duration_s)
            agent.start()
        elif e.kind == "bounce":
            # Shielded: a bounce cut short by the end of the run would leave the
            # broker half shut down; it finishes, and the settle waits for it.
            await asyncio.shield(self._bounce(agent))
        elif e.kind == "slow":
            self.world.slow_until[e.broker_id] = time.monotonic() + e.duration_s
        elif e.kind == "blip":
            agent.blip(e.duration_s)
        elif e.kind == "decommission":
            await self._decommission(agent, e.duration_s)

    @staticmethod
    async def _bounce(agent: BrokerAgent) -> None:
        await agent.stop()
        agent.start()

    async def _decommission(self, agent: BrokerAgent, downtime_s: float) -> None:
        """Retires a broker as an operator does (Kafka's docs: move its
        replicas away, stop it, unregister it), then lets a new, empty broker
        take its id after ``downtime_s``. A step that fails is said on the
        dashboard and the rest is not done: a broker that still holds
        replicas is never unregistered."""
        b = agent.broker_id
        self._decommissioning.add(b)
        try:
            moves = self._moves_away_from(b)
            if moves is None:
                return self._decommission_failed(b, "no broker to move its replicas to")
            if moves:
                try:
                    refused = _reassign_errors(await self.client.reassign(moves))
                except ClientError as e:
                    refused = str(e)
                if refused:
                    return self._decommission_failed(b, f"reassignment refused: {refused}")
            if not await self._wait(
                lambda: not self._replicas_on(b), self.config.move_timeout_s, None
            ):
                return self._decommission_failed(
                    b, f"replicas still on it after {self.config.move_timeout_s:.0f} s"
                )
            # Shielded, as a bounce: stopped and unregistered, or neither. Cut
            # short by the end of the run, the new broker starts when it is done.
            retire = asyncio.ensure_future(self._retire(agent))
            try:
                await asyncio.shield(retire)
            except asyncio.CancelledError:
                retire.add_done_callback(lambda _: agent.alive or agent.start())
                raise
        finally:
            self._decommissioning.discard(b)
        await asyncio.sleep(downtime_s)
        if not agent.alive:
            agent.start()

    def _decommission_failed(self, broker_id: int, why: str) -> None:
        """Said on the dashboard and counted in the summary's events."""
        self.stats.count("decommissions_abandoned")
        self._note(f"{self.elapsed_s:6.1f}s  decommission of broker {broker_id} abandoned: {why}")
        self.say(f"decommission of broker {broker_id} abandoned: {why}")

    async def _retire(self, agent: BrokerAgent) -> None:
        await agent.stop()
        try:
            answer = await self.client.unregister_broker(agent.broker_id)
            refused = None if answer.ok else f"{answer.error_name}: {answer.error_message}"
        except ClientError as e:
            refused = str(e)
        if refused is None:
            self.stats.count("brokers_unregistered")
        else:
            self.stats.count("decommissions_abandoned")
            self._note(f"{self.elapsed_s:6.1f}s  unregister broker {agent.broker_id}: {refused}")
            self.say(f"unregister broker {agent.broker_id}: {refused}")

    def _replicas_on(self, broker_id: int) -> list[tuple[str, int, PartitionRegistration]]:
        """This run's partitions that still list ``broker_id`` as a replica."""
        image = self.follower.image
        return [
            (topic.name, index, p)
            for topic_id in self.topic_ids
            if (topic := image.topics.get(topic_id)) is not None
            for index, p in topic.partitions.items()
            if broker_id in p.replicas
        ]

    def _moves_away_from(self, broker_id: int) -> list[dict] | None:
        """The reassignment that takes every replica off ``broker_id``: in
        each replica list it is replaced, in place, by the active broker of
        this run holding the fewest replicas that is not in the list yet.
        None when some partition has no such broker."""
        c = self.config
        image = self.follower.image
        ours = range(c.first_broker_id, c.first_broker_id + c.brokers)
        load = Counter(
            r
            for topic_id in self.topic_ids
            if (topic := image.topics.get(topic_id)) is not None
            for p in topic.partitions.values()
            for r in p.replicas
        )
        candidates = [
            r
            for r in ours
            if r != broker_id
            and r not in self._decommissioning
            and (reg := image.brokers.get(r)) is not None
            and reg.active
        ]
        by_topic: dict[str, list[dict]] = {}
        for name, index, p in self._replicas_on(broker_id):
            free = [r for r in candidates if r not in p.replicas]
            if not free:
                return None
            to = min(free, key=lambda r: (load[r], r))
            load[to] += 1
            replicas = [to if r == broker_id else r for r in p.replicas]
            by_topic.setdefault(name, []).append({"partitionIndex": index, "replicas": replicas})
        return [{"name": name, "partitions": parts} for name, parts in sorted(by_topic.items())]

    def _note(self, line: str) -> None:
        self.recent_chaos.append(line)
        del self.recent_chaos[:-8]

    async def _watch_controller(self) -> None:
        while True:
            try:
                status = await self.meta.status()
                if status.ok:
                    self.controller = status.body
            except ClientError:
                pass
            await asyncio.sleep(1.0)

    async def _wait(self, predicate, timeout_s: float, what: str | None) -> bool:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                if what is None:
                    return False
                raise ClientError(f"{what} not reached within {timeout_s:.0f} s")
            await asyncio.sleep(0.1)
        return True

    def _tp_name(self, tp: tuple[str, int]) -> str:
        topic = self.follower.image.topics.get(tp[0])
        return f"{topic.name if topic else tp[0]}-{tp[1]}"


def _reassign_errors(answer) -> str | None:
    """What a reassignment's answer refused, in a line (None: all accepted)."""
    if not answer.ok:
        return f"{answer.error_name}: {answer.error_message}"
    for t in answer.body.get("responses") or []:
        for p in t.get("partitions", []):
            if p.get("errorName", "NONE") != "NONE":
                return (
                    f"{t['name']}-{p['partitionIndex']}: {p['errorName']}: {p.get('errorMessage')}"
                )
    return None
