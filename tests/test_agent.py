"""brokers/agent.py and brokers/metadata_cache.py against a real voter process."""

from __future__ import annotations

import asyncio
import time

import pytest

from brokers.agent import AgentConfig, BrokerAgent, State
from brokers.client import MetaquorumClient
from brokers.data_plane import World
from brokers.metadata_cache import LogFollower, MetadataCache
from brokers.stats import SimStats
from metadata_records.snapshot import image_digest

from .conftest import running_cluster


@pytest.fixture(scope="module")
def voter(tmp_path_factory, http_layout):
    # A short session timeout keeps crash tests short. One voter per HTTP
    # layout the module runs in (tests/conftest.py).
    with running_cluster(
        tmp_path_factory.mktemp("agent"), extra=["--session-timeout-ms", "3000"]
    ) as c:
        yield c


async def until(predicate, timeout_s: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s} s")
        await asyncio.sleep(0.05)


class Brokers:
    """Agents sharing one client, one log follower and one World, as in the simulator."""

    def __init__(self, voter, ids, **config) -> None:
        self.voter = voter
        self.ids = ids
        self.config = AgentConfig(
            heartbeat_interval_s=0.5, replica_lag_time_max_ms=1500, tick_s=0.1, **config
        )

    async def __aenter__(self):
        self.client = MetaquorumClient([self.voter.url(0)])
        self.follower = LogFollower(self.client, wait_ms=200)
        self.task = asyncio.create_task(self.follower.run())
        self.world = World()
        self.stats = SimStats()
        self.agents = {}
        for b in self.ids:
            agent = BrokerAgent(
                b,
                self.voter.cluster_id,
                self.client,
                self.follower,
                config=self.config,
                followers=self.world,
                stats=self.stats,
            )
            self.agents[b] = self.world.agents[b] = agent
            agent.start()
        await until(
            lambda: all(a.state is State.ACTIVE for a in self.agents.values()), what="all active"
        )
        return self

    async def __aexit__(self, *exc):
        for a in self.agents.values():
            await a.crash()
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.client.close()

    async def create_partition(self, name: str, replicas: list[int]) -> None:
        """A topic with one partition on ``replicas`` (the first leads), in the cache."""
        await self.client.create_topics(
            [{"name": name, "assignments": [{"partitionIndex": 0, "brokerIds": replicas}]}]
        )
        await until(lambda: self.partition(name) is not None, what=f"{name} in the cache")

    def partition(self, name: str, index: int = 0):
        image = self.follower.image
        topic = image.topic_by_name(name)
        return None if topic is None else topic.partitions.get(index)


def test_the_cache_follows_the_log_to_the_servers_image(voter):
    async def go():
        async with Brokers(voter, [101, 102]) as bs:
            await bs.client.create_topic("cache-t", 3, 2)
            await until(lambda: bs.partition("cache-t", 2) is not None, what="topic in cache")
            # Every broker is active: nothing writes to the log any more.
            status = (await bs.client._read("/v1/quorum/status", {"digest": "true"})).body
            last = status["lastAppliedOffset"]
            await until(lambda: bs.follower.cache.next_offset == last + 1, what="cache at the end")
            image = bs.follower.image
            assert image_digest(image) == status["imageDigest"]
            # The snapshot gives the same brokers and topics (registration offsets
            # aside: a snapshot cannot carry them, as in Kafka).
            snap = (await bs.client.snapshot()).body
            assert snap["nextOffset"] == last + 1
            loaded = MetadataCache().load_snapshot(snap["records"], snap["nextOffset"])
            assert loaded.next_offset == image.next_offset
            assert {b: r._replace(registration_offset=0) for b, r in loaded.brokers.items()} == {
                b: r._replace(registration_offset=0) for b, r in image.brokers.items()
            }
            assert loaded.topics == image.topics

    asyncio.run(go())


@pytest.mark.layout("2-workers")
def test_an_agent_is_unfenced_once_caught_up_and_shuts_down_cleanly(voter):
    async def go():
        async with Brokers(voter, [111, 112, 113]) as bs:
            await bs.create_partition("cs-t", [111, 112, 113])
            assert bs.partition("cs-t").leader == 111
            agent = bs.agents[111]
            assert agent.stats.events["unfencings"] >= 3
            assert await agent.stop()  # KIP-841: wantShutDown until shouldShutDown
            assert agent.state is State.STOPPED
            await until(lambda: bs.partition("cs-t").leader != 111, what="leadership moved")
            p = bs.partition("cs-t")
            assert 111 not in p.isr and p.leader in (112, 113)
            await until(lambda: bs.follower.image.brokers[111].fenced, what="fenced at the end")
            assert bs.follower.image.brokers[111].in_controlled_shutdown
            # A restart is a new incarnation: a new epoch, out of controlled shutdown.
            old_epoch = agent.epoch
            agent.start()
            await until(lambda: agent.state is State.ACTIVE, what="restarted broker active")
            assert agent.epoch > old_epoch
            await until(lambda: 111 in bs.partition("cs-t").isr, what="ISR expanded back")
            assert not bs.follower.image.brokers[111].in_controlled_shutdown

    asyncio.run(go())


@pytest.mark.layout("default")
def test_a_stalled_follower_is_shrunk_out_and_expanded_back(voter):
    async def go():
        async with Brokers(voter, [121, 122, 123]) as bs:
            await bs.create_partition("slow-t", [121, 122, 123])
            before = bs.partition("slow-t")
            assert before.isr == (121, 122, 123)
            bs.world.slow_until[123] = time.monotonic() + 3.0
            await until(lambda: 123 not in bs.partition("slow-t").isr, what="shrink")
            assert bs.partition("slow-t").leader == 121  # the leader's own AlterPartition
            await until(lambda: 123 in bs.partition("slow-t").isr, what="expand")
            after = bs.partition("slow-t")
            assert after.partition_epoch >= before.partition_epoch + 2
            # Both changes are the leader's AlterPartitions: answered, or (on a
            # loaded machine) timed out with an unknown outcome after committing.
            # The log follower can see the expansion before the leader has its
            # answer back, so the answers are waited for, not read at once.
            alter = bs.stats.endpoints["alter-partition"]

            def answered() -> int:
                unknown = alter.errors["OUTCOME_UNKNOWN"] + alter.errors["UNAVAILABLE"]
                return bs.stats.events["alter_partition_NONE"] + unknown

            await until(lambda: answered() >= 2, what="both AlterPartitions answered")
            await until(lambda: not bs.agents[121].in_flight_since, what="nothing in flight")

    asyncio.run(go())


@pytest.mark.layout("2-workers")
def test_a_crashed_broker_is_fenced_and_comes_back(voter):
    async def go():
        async with Brokers(voter, [131, 132, 133]) as bs:
            await bs.create_partition("crash-t", [133, 131, 132])
            agent = bs.agents[133]
            await agent.crash()  # no controlled shutdown: the session must expire
            await until(lambda: bs.follower.image.brokers[133].fenced, what="session fencing")
            p = bs.partition("crash-t")
            assert p.leader in (131, 132) and 133 not in p.isr
            agent.start()  # a new incarnation
            await until(lambda: agent.state is State.ACTIVE, what="back and unfenced")
            await until(lambda: 133 in bs.partition("crash-t").isr, what="back in the ISR")

    asyncio.run(go())


@pytest.mark.layout("default")
def test_a_rerun_with_the_same_seed_never_re_registers_as_the_old_incarnation(voter):
    """Issue 18: the main job's second run re-registered every broker whose
    incarnation id came from the same seed as the first run's: it kept the old
    epoch and, stopped in controlled shutdown, stayed fenced for ever."""

    async def go():
        ids = [141, 142, 143]
        async with Brokers(voter, ids) as first:
            await first.create_partition("rerun-t", ids)
            old = {b: first.agents[b].incarnation_id for b in ids}
            for b in ids:
                assert await first.agents[b].stop()
            await until(
                lambda: all(first.follower.image.brokers[b].fenced for b in ids),
                what="all fenced",
            )
            assert first.follower.image.brokers[141].in_controlled_shutdown
        # The same broker ids and the same default rng seeds, as a second run.
        async with Brokers(voter, ids) as second:  # waits for every agent ACTIVE
            image = second.follower.image
            for b in ids:
                assert second.agents[b].incarnation_id != old[b]
                assert not image.brokers[b].in_controlled_shutdown
            await until(lambda: second.partition("rerun-t").leader in ids, what="online again")

    asyncio.run(go())


@pytest.mark.layout("2-workers")
def test_an_incarnation_told_to_stop_without_asking_comes_back_as_a_new_one(voter):
    """A previous process of this broker asked to shut down and died: the
    controller lets the incarnation go at its next heartbeat; the agent must not
    keep it, it registers a new incarnation and becomes active again."""

    async def go():
        async with Brokers(voter, [151, 152, 153]) as bs:
            await bs.create_partition("unasked-t", [151, 152, 153])
            agent = bs.agents[151]
            old_epoch, old_incarnation = agent.epoch, agent.incarnation_id
            hb = await bs.client.heartbeat(
                151, old_epoch, bs.follower.image.last_offset, want_shut_down=True
            )
            assert hb.ok and not hb.should_shut_down  # it leads: controlled shutdown
            await until(
                lambda: agent.state is State.ACTIVE and agent.epoch > old_epoch,
                what="a new incarnation, active",
            )
            assert agent.incarnation_id != old_incarnation
            assert agent.stats.events["unasked_shutdowns"] == 1
            await until(lambda: 151 in bs.partition("unasked-t").isr, what="back in the ISR")
            assert not bs.follower.image.brokers[151].in_controlled_shutdown

    asyncio.run(go())


@pytest.mark.layout("default")
def test_a_live_broker_unregistered_by_an_operator_stops_for_good(voter):
    """UnregisterBroker while the agent runs (Kafka refuses no state): its
    leaderships move in the same batch; the agent's next heartbeat is stale,
    its cache shows why, and it stops instead of registering again."""

    async def go():
        async with Brokers(voter, [161, 162, 163]) as bs:
            await bs.create_partition("gone-t", [161, 162, 163])
            agent = bs.agents[161]
            answer = await bs.client.unregister_broker(161)
            assert answer.ok, answer.body
            await until(lambda: agent.state is State.DECOMMISSIONED, what="decommissioned")
            assert not agent.alive and agent.stats.events["decommissioned"] == 1
            assert agent.stats.events["stale_epoch_reregistrations"] == 0
            p = bs.partition("gone-t")
            assert p.leader in (162, 163) and 161 not in p.isr
            # Its lifecycle (register, then heartbeat) has ended: nothing registers it again.
            lifecycle = next(t for t in agent._tasks if t.get_name().endswith("lifecycle"))
            await until(lifecycle.done, what="the lifecycle task ended")
            brokers = (await bs.client.brokers(linearizable=True)).body["brokers"]
            assert 161 not in [b["brokerId"] for b in brokers]

    asyncio.run(go())


@pytest.mark.layout("2-workers")
def test_the_cache_measures_its_lag_in_time_by_the_periodic_noop(tmp_path):
    """On an idle cluster only the controller's NoOpRecords move the log: the
    cache applies them and takes the last one's timestamp as its clock."""

    async def go(c):
        async with MetaquorumClient([c.url(0)]) as client:
            follower = LogFollower(client, wait_ms=200)
            task = asyncio.create_task(follower.run())
            try:
                cache = follower.cache
                await until(lambda: cache.next_offset > 0, what="the cache following")
                start = cache.next_offset
                await until(lambda: cache.next_offset >= start + 3, what="three NoOps applied")
                end, stamp = cache.next_offset, cache.last_applied_timestamp_ms
                page = (await client.log(start, 10_000)).body["records"]
                assert page and {r["type"] for r in page} == {"NO_OP_RECORD"}
                last = next(r for r in page if r["offset"] == end - 1)
                assert stamp == last["timestampMs"]
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    with running_cluster(tmp_path, noop_ms=200) as c:
        asyncio.run(go(c))
    cache = MetadataCache()
    assert cache.lag_ms(10**12) is None
    cache.apply_page(
        [{"offset": 0, "timestampMs": 1000, "type": "NO_OP_RECORD", "version": 0, "data": {}}]
    )
    assert cache.lag_ms(1250) == 250 and cache.lag_ms(900) == 0


@pytest.mark.layout("default")
def test_agents_hand_out_producer_ids_never_twice_across_restarts(voter):
    """Each broker's producers draw ids from blocks AllocateProducerIds grants
    it (the next fetched at 90% used); two brokers and a restart in between
    never see an id twice, and the log's blocks follow each other."""

    async def go():
        async with Brokers(voter, [131, 132]) as bs:
            a, b = bs.agents[131], bs.agents[132]
            ids = [await a.producer_ids.generate() for _ in range(1500)]
            ids += await asyncio.gather(*(b.producer_ids.generate() for _ in range(800)))
            await a.crash()
            a.start()
            await until(lambda: a.state is State.ACTIVE, what="restarted broker active")
            ids += [await a.producer_ids.generate() for _ in range(600)]
            assert len(set(ids)) == len(ids) == 2900
            assert a.producer_ids.blocks >= 2 and b.producer_ids.problem is None
            page = await bs.client.log(0, 10_000)
            grants = [r["data"] for r in page.body["records"] if r["type"] == "PRODUCER_IDS_RECORD"]
            ends = [g["nextProducerId"] for g in grants]
            assert ends == sorted(ends) and len(set(ends)) == len(ends)
            assert all(e - s == 1000 for s, e in zip(ends, ends[1:], strict=False))
            assert {g["brokerId"] for g in grants} == {131, 132}

    asyncio.run(go())


@pytest.mark.layout("2-workers")
def test_with_elr_a_crashed_broker_leaves_the_elr_and_a_cleanly_stopped_one_stays(tmp_path):
    """KIP-966 through the agent (issue 21 item 7): it supports
    eligible.leader.replicas.version, so the feature can be turned on; its
    new incarnation names its last epoch after a controlled shutdown (it stays
    in the ELR) and -1 after a crash (it leaves it)."""

    async def go(voter):
        async with Brokers(voter, [141, 142, 143]) as bs:
            assert (await bs.client.update_features("eligible.leader.replicas.version", 1)).ok
            await bs.client.create_topics(
                [
                    {
                        "name": "elr-t",
                        "assignments": [{"partitionIndex": 0, "brokerIds": [141, 142, 143]}],
                        "configs": [{"name": "min.insync.replicas", "value": "3"}],
                    }
                ]
            )
            await until(lambda: bs.partition("elr-t") is not None, what="elr-t in the cache")
            clean, crashed = bs.agents[142], bs.agents[143]
            assert await clean.stop()
            await until(lambda: bs.partition("elr-t").elr == (142,), what="142 in the ELR")
            await crashed.crash()
            await until(lambda: bs.partition("elr-t").elr == (142, 143), what="143 in the ELR")
            assert bs.partition("elr-t").isr == (141,)
            old = bs.follower.image.brokers[143].epoch
            crashed.start()
            await until(lambda: bs.follower.image.brokers[143].epoch != old, what="143 back")
            assert 143 not in bs.partition("elr-t").elr  # out as it registered
            old = bs.follower.image.brokers[142].epoch
            clean.start()
            await until(lambda: bs.follower.image.brokers[142].epoch != old, what="142 back")
            p = bs.partition("elr-t")
            assert 142 in p.elr or 142 in p.isr, p  # kept until it is back in the ISR
            await until(lambda: len(bs.partition("elr-t").isr) == 3, what="all back")
            assert bs.partition("elr-t").elr == ()

    with running_cluster(tmp_path, extra=["--session-timeout-ms", "3000"]) as voter:
        asyncio.run(go(voter))
