"""One broker, as the controller sees it: registration, heartbeats, controlled
shutdown, and the leader side of ISR management, over HTTP only.

Modelled on Kafka's ``BrokerLifecycleManager`` (register with a fresh incarnation
id, random for every start as Kafka's ``Uuid.randomUuid()`` is, never drawn from
the simulator's seed: a second run of the simulator must not re-register as the
first run's incarnations and inherit their state; heartbeat every interval with the real metadata offset, unfenced only once
caught up, ``wantShutDown`` until ``shouldShutDown``) and ``Partition`` /
``AlterPartitionManager`` for the partitions it leads (``brokers/isr_manager.py``
holds that policy; this module drives it).

The data plane is simulated: each led partition's log grows, and a
``FollowerModel`` says what each follower fetched (caught up, lagging, stalled,
and with which broker epoch, for KIP-903). Everything else is real: the
metadata cache is the log replayed with ``metadata_records``' own ``apply``, and
every request is a real HTTP call through ``brokers/client.py``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import time
import uuid
from dataclasses import dataclass
from typing import Protocol

from metadata_records.errors import Errors
from metadata_records.features import (
    ELR_VERSION,
    MAX_ELR_VERSION,
    MAX_METADATA_VERSION,
    METADATA_VERSION,
    MIN_METADATA_VERSION,
)
from metadata_records.image import MetadataImage

from .client import ClientError, MetaquorumClient, OutcomeUnknown, RequestRejected
from .isr_manager import IsrManager
from .loop_lag import HeartbeatClock, LagMonitor
from .metadata_cache import LogFollower
from .producer_ids import ProducerIdManager
from .stats import SimStats

log = logging.getLogger(__name__)

LISTENER_PORT_BASE = 9092
METADATA_VERSION_RANGE = {
    "name": METADATA_VERSION,
    "minSupportedVersion": MIN_METADATA_VERSION,
    "maxSupportedVersion": MAX_METADATA_VERSION,
}
# KIP-966: the agent follows ELR (an empty ISR, leaders from the ELR), so it
# supports eligible.leader.replicas.version 0-1 and may have it finalized.
ELR_VERSION_RANGE = {
    "name": ELR_VERSION,
    "minSupportedVersion": 0,
    "maxSupportedVersion": MAX_ELR_VERSION,
}


def _end_nap(nap: asyncio.Future) -> None:
    if not nap.done():
        nap.set_result(False)


def new_incarnation_id() -> str:
    """A fresh incarnation id for every start, from the OS's randomness (Kafka's
    ``Uuid.randomUuid()``). Not from the agent's seeded rng: a rerun with the
    same seed would re-register as the previous run's incarnation, keep its
    epoch and its state (KAFKA-16757), in controlled shutdown among them, and
    stay fenced for ever (issue 18)."""
    return str(uuid.uuid4())


class State(enum.Enum):
    STOPPED = "stopped"  # not started, or stopped cleanly
    REGISTERING = "registering"
    FENCED = "fenced"  # registered; catching up, or fenced by the controller
    ACTIVE = "active"
    CONTROLLED_SHUTDOWN = "controlled-shutdown"  # wantShutDown sent, not yet told to stop
    CRASHED = "crashed"  # gone without a word: heartbeats stop, fetches stop
    # Unregistered by an operator (UnregisterBroker): stops and never registers again.
    DECOMMISSIONED = "decommissioned"


@dataclass
class AgentConfig:
    heartbeat_interval_s: float = 2.0  # Kafka's broker.heartbeat.interval.ms
    replica_lag_time_max_ms: int = 30000  # Kafka's replica.lag.time.max.ms
    tick_s: float = 0.25  # how often the leader looks at its partitions
    # How often a broker that leads nothing looks whether it leads something
    # now: most of 20,000 brokers lead nothing, and their ticks were a fifth
    # of the simulator's CPU. A new leader starts tracking within this.
    idle_tick_s: float = 1.0
    session_timeout_s: float = 9.0  # the cluster's, to judge whose fault a fencing is
    register_retry_s: float = 1.0
    shutdown_timeout_s: float = 60.0  # then give up on controlled shutdown, as Kafka does
    records_per_tick: int = 20  # simulated produce rate per led partition


class FollowerModel(Protocol):
    """What a follower of a led partition fetched just now: ``(fetch offset,
    broker epoch it reported)``, or None if it did not fetch."""

    def fetch(
        self, follower_id: int, topic_id: str, partition: int, leader_leo: int, now_ms: int
    ) -> tuple[int, int] | None: ...


class HealthyFollowers:
    """Followers as a healthy cluster has them: every registered, unfenced replica
    fetches up to the leader's log end with the epoch the metadata shows."""

    def __init__(self, follower: LogFollower) -> None:
        self.follower = follower

    def fetch(self, follower_id, topic_id, partition, leader_leo, now_ms):
        reg = self.follower.image.brokers.get(follower_id)
        if reg is None or reg.fenced:
            return None
        return leader_leo, reg.epoch


class BrokerAgent:
    def __init__(
        self,
        broker_id: int,
        cluster_id: str,
        client: MetaquorumClient,
        follower: LogFollower,
        *,
        config: AgentConfig | None = None,
        followers: FollowerModel | None = None,
        stats: SimStats | None = None,
        rack: str | None = None,
        rng: random.Random | None = None,
        clock=time.monotonic,
        lag: LagMonitor | None = None,
    ) -> None:
        """``lag``: the process's monitor, told how late each heartbeat went out."""
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.client = client
        self.follower = follower
        self.config = config or AgentConfig()
        self.followers = followers or HealthyFollowers(follower)
        self.stats = stats or SimStats()
        self.rack = rack
        self.rng = rng or random.Random(broker_id)
        self.clock = clock
        self.lag = lag
        self.beats = HeartbeatClock(self.config.session_timeout_s)
        self.state = State.STOPPED
        self.epoch = -1
        self.previous_epoch = -1  # the epoch of a clean previous run (KIP-966's field)
        self.incarnation_id = ""
        self.isr = IsrManager(broker_id, self.config.replica_lag_time_max_ms)
        self._leo: dict[tuple[str, int], int] = {}
        self._want_shut_down = False
        self._shutdown_done: asyncio.Event | None = None
        self._poked = False  # something to say now: beat at once
        self._napping: asyncio.Future | None = None
        self._seen_image: MetadataImage | None = None
        self._tasks: list[asyncio.Task] = []
        self._alter_task: asyncio.Task | None = None
        self._alter_backoff_until = 0.0
        self.blip_until = 0.0  # a network blip: nothing reaches the controller until then
        self.in_flight_since: dict[tuple[str, int], float] = {}
        self.problem: str | None = None  # the last thing that went wrong, for people
        # Producer ids for this broker's producers (InitProducerId), from blocks
        # AllocateProducerIds grants to its current incarnation.
        self.producer_ids = ProducerIdManager(
            lambda: self.client.allocate_producer_ids(self.broker_id, self.epoch)
        )

    # ---------------------------------------------------------------- lifecycle

    @property
    def alive(self) -> bool:
        return self.state not in (State.STOPPED, State.CRASHED, State.DECOMMISSIONED)

    def start(self) -> None:
        """Starts a new incarnation (a process start): register, then heartbeat."""
        assert not self.alive, f"broker {self.broker_id} is already running"
        self.state = State.REGISTERING
        self.epoch = -1
        self.incarnation_id = new_incarnation_id()
        self.isr = IsrManager(self.broker_id, self.config.replica_lag_time_max_ms)
        self._leo.clear()
        self.in_flight_since.clear()
        self._want_shut_down = False
        self._shutdown_done = asyncio.Event()
        self._poked = False
        self.beats.reset()
        self._seen_image = None
        self._tasks = [
            asyncio.create_task(self._lifecycle(), name=f"broker-{self.broker_id}-lifecycle"),
            asyncio.create_task(self._leader_loop(), name=f"broker-{self.broker_id}-isr"),
        ]

    async def stop(self) -> bool:
        """Controlled shutdown (KIP-841): ``wantShutDown`` until the controller says
        ``shouldShutDown``. Returns False if it gave up after the timeout."""
        if not self.alive:
            return True
        self._want_shut_down = True
        self._poke()  # say it now, not at the next interval
        if self.state is State.REGISTERING:
            await self._cancel(State.STOPPED)
            return True
        assert self._shutdown_done is not None
        try:
            await asyncio.wait_for(self._shutdown_done.wait(), self.config.shutdown_timeout_s)
            clean = True
        except TimeoutError:
            self.stats.count("controlled_shutdown_timeouts")
            self.problem = "controlled shutdown timed out; stopped anyway"
            clean = False
        self.previous_epoch = self.epoch if clean else -1
        await self._cancel(State.STOPPED)
        return clean

    async def crash(self) -> None:
        """Stops without a word, as a killed process: no controlled shutdown."""
        if self.alive:
            self.previous_epoch = -1
            await self._cancel(State.CRASHED)

    async def _cancel(self, state: State) -> None:
        tasks = [t for t in (*self._tasks, self._alter_task) if t is not None]
        current = asyncio.current_task()
        for t in tasks:
            if t is not current:
                t.cancel()
        await asyncio.gather(*(t for t in tasks if t is not current), return_exceptions=True)
        self._tasks, self._alter_task = [], None
        self.state = state

    def blip(self, seconds: float) -> None:
        """A network blip between this broker and the controller."""
        self.blip_until = max(self.blip_until, self.clock() + seconds)

    def _blipped(self) -> bool:
        return self.clock() < self.blip_until

    # ---------------------------------------------------------------- timed requests

    async def _timed(self, endpoint: str, call):
        start = self.clock()
        try:
            answer = await call
        except OutcomeUnknown:
            self.stats.observe(endpoint, self.clock() - start, "OUTCOME_UNKNOWN")
            raise
        except RequestRejected as e:
            self.stats.observe(endpoint, self.clock() - start, f"HTTP_{e.status}")
            raise
        except ClientError:
            self.stats.observe(endpoint, self.clock() - start, "UNAVAILABLE")
            raise
        self.stats.observe(endpoint, self.clock() - start, answer.error_name)
        return answer

    # ---------------------------------------------------------------- register + heartbeat

    async def _lifecycle(self) -> None:
        try:
            await self._register()
            await self._heartbeats()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug here must not take the whole simulator down
            log.exception("broker %d: lifecycle failed", self.broker_id)
            self.problem = f"lifecycle failed: {e!r}"
            self.state = State.CRASHED

    async def _register(self) -> None:
        while True:
            if self._blipped():
                await asyncio.sleep(self.config.register_retry_s)
                continue
            try:
                answer = await self._timed(
                    "register",
                    self.client.register(
                        self.broker_id,
                        self.cluster_id,
                        self.incarnation_id,
                        [
                            {
                                "name": "PLAINTEXT",
                                "host": "localhost",
                                "port": LISTENER_PORT_BASE + self.broker_id % 50000,
                                "securityProtocol": 0,
                            }
                        ],
                        [METADATA_VERSION_RANGE, ELR_VERSION_RANGE],
                        rack=self.rack,
                        previous_broker_epoch=self.previous_epoch,
                    ),
                )
            except (ClientError, RequestRejected) as e:
                # An unknown outcome is safe to retry: the same incarnation id
                # re-registers without a new epoch.
                self.problem = f"register: {e}"
                await asyncio.sleep(self.config.register_retry_s)
                continue
            if answer.ok:
                self.epoch = answer.broker_epoch
                self.state = State.FENCED
                self.problem = None
                self.stats.count("registrations")
                return
            # DUPLICATE_BROKER_REGISTRATION: the previous incarnation's session is
            # still valid; it expires within the session timeout. Anything else
            # (INCONSISTENT_CLUSTER_ID, UNSUPPORTED_VERSION) is shown and retried.
            self.problem = f"register: {answer.error_name}: {answer.error_message}"
            await asyncio.sleep(self.config.register_retry_s)

    async def _heartbeats(self) -> None:
        interval = self.config.heartbeat_interval_s
        # Spread the first beats so many agents do not beat in lockstep.
        await asyncio.sleep(self.rng.uniform(0, min(interval, 0.2)))
        late = 0.0  # how long after it was due this beat goes out
        while True:
            started = self.clock()
            if not self._blipped():
                await self._heartbeat_once(late)
                if self.state in (State.STOPPED, State.DECOMMISSIONED):
                    return
            late = 0.0
            remaining = max(0.0, interval - (self.clock() - started))
            if self.state is State.FENCED and self.follower.image.last_offset < self.epoch:
                # Catching up after registering: the beat that reports the
                # registration's offset is the one that unfences, so send it as
                # soon as the cache gets there rather than a whole interval later.
                await self.follower.wait_for_offset(self.epoch, remaining)
                continue
            elif self.state is State.CONTROLLED_SHUTDOWN:
                remaining = min(remaining, 0.5)  # waiting to be let go: ask more often
            due = self.clock() + remaining
            if not await self._nap(remaining):
                late = self.clock() - due  # woken by the timer: the loop's lag

    async def _nap(self, seconds: float) -> bool:
        """Waits ``seconds`` or until poked (True). One future and one timer:
        ``asyncio.wait_for`` costs a task per wait (3.11), 10,000 a second."""
        if self._poked:
            self._poked = False
            return True
        loop = asyncio.get_running_loop()
        self._napping = nap = loop.create_future()
        timer = loop.call_later(seconds, _end_nap, nap)
        try:
            return await nap
        finally:
            timer.cancel()
            self._napping = None
            self._poked = False

    def _poke(self) -> None:
        if self._napping is not None and not self._napping.done():
            self._napping.set_result(True)
        else:
            self._poked = True

    async def _heartbeat_once(self, late_s: float = 0.0) -> None:
        sent_at = self.clock()
        self.beats.sent(late_s)
        if self.lag is not None:
            self.lag.observe_heartbeat(late_s)
        offset = self.follower.image.last_offset
        try:
            hb = await self._timed(
                "heartbeat",
                self.client.heartbeat(
                    self.broker_id, self.epoch, offset, want_shut_down=self._want_shut_down
                ),
            )
        except (ClientError, RequestRejected) as e:
            self.problem = f"heartbeat: {e}"
            return
        if hb.error_code == Errors.STALE_BROKER_EPOCH:
            if await self._was_unregistered():
                # An operator decommissioned this id: registering again would
                # undo that (decisions.md 88).
                self.stats.count("decommissioned")
                self.problem = "unregistered by an operator: decommissioned, stopped for good"
                self.state = State.DECOMMISSIONED
                return
            # Our registration was replaced (or the controller never saw it): a
            # new incarnation must register again.
            self.stats.count("stale_epoch_reregistrations")
            await self._new_incarnation(f"heartbeat: {hb.error_message}; registering again")
            return
        if not hb.ok:
            self.problem = f"heartbeat: {hb.error_name}: {hb.error_message}"
            return
        self.problem = None
        if hb.should_shut_down and not self._want_shut_down:
            # The controller let this incarnation go although it did not ask:
            # it is over (Kafka's broker process exits). Its supervisor starts a
            # new incarnation; the old one is never kept alive.
            self.stats.count("unasked_shutdowns")
            await self._new_incarnation("told to shut down without asking; registering again")
            return
        if hb.should_shut_down:
            self.state = State.STOPPED
            if self._shutdown_done is not None:
                self._shutdown_done.set()
            return
        if self._want_shut_down:
            self.state = State.CONTROLLED_SHUTDOWN
        elif hb.is_fenced:
            if self.state is State.ACTIVE:
                # Fenced although alive and beating: the session expired (a false
                # fencing if this broker was healthy) or the controller failed over.
                # Whose fault: loop_lag.py's rule.
                self.stats.count("unexpected_fencings")
                self.stats.count(self.beats.blame(sent_at))
            self.state = State.FENCED
        else:
            self.beats.answered_unfenced(sent_at)
            if self.state is State.FENCED:
                self.stats.count("unfencings")
            self.state = State.ACTIVE

    def _unregistered(self) -> bool:
        """The cache has applied this incarnation's registration and, after
        it, an UnregisterBrokerRecord: its id has no registration now."""
        image = self.follower.image
        return 0 <= self.epoch <= image.last_offset and self.broker_id not in image.brokers

    async def _was_unregistered(self) -> bool:
        """After a STALE_BROKER_EPOCH: gives the cache up to a heartbeat
        interval to show why (the controller decided before answering, so the
        record is committed; the cache is usually milliseconds behind)."""
        deadline = self.clock() + self.config.heartbeat_interval_s
        while not self._unregistered():
            left = deadline - self.clock()
            if left <= 0 or self.broker_id in self.follower.image.brokers:
                return False
            await self.follower.wait_for_offset(self.follower.image.last_offset + 1, left)
        return True

    async def _new_incarnation(self, why: str) -> None:
        self.problem = why
        self.incarnation_id = new_incarnation_id()
        self.epoch = -1
        self.previous_epoch = -1
        self.state = State.REGISTERING
        await self._register()

    # ---------------------------------------------------------------- leader side

    def _on_image(self, image: MetadataImage) -> None:
        self._seen_image = image
        self.isr.on_metadata(image)
        self._forget_settled()

    def _forget_settled(self) -> None:
        for tp in list(self.in_flight_since):
            if self.isr.in_flight(tp) is None:
                del self.in_flight_since[tp]

    async def _leader_loop(self) -> None:
        tick = self.config.tick_s
        await asyncio.sleep(self.rng.uniform(0, tick))
        while True:
            try:
                self._step()
            except Exception as e:  # noqa: BLE001 - keep the agent alive, say what broke
                log.exception("broker %d: leader step failed", self.broker_id)
                self.problem = f"leader step failed: {e!r}"
            idle = not self.isr.has_partitions() and self._alter_task is None
            await asyncio.sleep(self.config.idle_tick_s if idle else tick)

    def _step(self) -> None:
        if self.state not in (State.ACTIVE, State.CONTROLLED_SHUTDOWN, State.FENCED):
            return
        image = self.follower.image
        if image is not self._seen_image:
            self._on_image(image)
        led = self.isr.led_partitions()
        if not led:
            return
        now = self.clock()
        now_ms = int(now * 1000)
        n = self.config.records_per_tick
        for tp in led:
            leo = self._leo.get(tp, 0) + (self.rng.randint(0, 2 * n) if n else 0)
            self._leo[tp] = leo
            self.isr.on_append(tp[0], tp[1], leo, now_ms)
            committed = self.isr.committed(tp)
            if committed is None:
                continue
            for b in committed.replicas:
                if b == self.broker_id:
                    continue
                fetched = self.followers.fetch(b, tp[0], tp[1], leo, now_ms)
                if fetched is not None:
                    self.isr.on_fetch(tp[0], tp[1], b, fetched[1], fetched[0], now_ms)
        if self._alter_task is not None or self._blipped() or now < self._alter_backoff_until:
            return
        topics = self.isr.decide(now_ms, image)
        if topics:
            for t in topics:
                for p in t["partitions"]:
                    self.in_flight_since.setdefault((t["topicId"], p["partitionIndex"]), now)
            self._alter_task = asyncio.create_task(self._alter(topics))

    async def _alter(self, topics: list[dict]) -> None:
        try:
            answer = await self._timed(
                "alter-partition", self.client.alter_partition(self.broker_id, self.epoch, topics)
            )
        except (ClientError, RequestRejected) as e:
            self.isr.on_request_failed(int(self.clock() * 1000))
            self.problem = f"alter-partition: {e}"
            self._alter_backoff_until = self.clock() + 1.0
            return
        finally:
            self._alter_task = None
        now_ms = int(self.clock() * 1000)
        self.isr.on_response(now_ms, answer.body.get("topics") or [], answer.error_code)
        if not answer.ok:
            # STALE_BROKER_EPOCH, NOT_CONTROLLER, ...: nothing was decided. Pause a
            # little rather than resend at the tick rate.
            self.problem = f"alter-partition: {answer.error_name}: {answer.error_message}"
            self._alter_backoff_until = self.clock() + 1.0
        for p in answer.partitions:
            self.stats.count(f"alter_partition_{p.error_name}")
        self._forget_settled()

    # ---------------------------------------------------------------- queries

    def stuck_changes(self, older_than_s: float) -> list[tuple[str, int]]:
        """Led partitions with a change in flight for longer than ``older_than_s``."""
        now = self.clock()
        return sorted(
            tp
            for tp, since in self.in_flight_since.items()
            if self.isr.in_flight(tp) is not None and now - since > older_than_s
        )
