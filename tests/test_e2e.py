"""End to end on a real 3-voter cluster, through brokers/client.py: brokers
register and are unfenced, a topic is created, ISRs shrink and expand with
AlterPartition v3, ineligible replicas are refused with Kafka's reasons, a
controlled shutdown moves leadership, and a follower's linearizable read sees
every acknowledged write."""

import asyncio
import uuid

import httpx
import pytest

from brokers.client import MetaquorumClient

from .cluster import Cluster

pytestmark = pytest.mark.slow

MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]


def listeners(b):
    return [{"name": "PLAINTEXT", "host": "localhost", "port": 9090 + b, "securityProtocol": 0}]


def test_a_broker_cluster_lives_its_life_through_the_client(tmp_path):
    c = Cluster(tmp_path)
    try:
        c.start()
        c.wait_ready()
        leader = c.leader()
        follower = next(i for i in range(c.n) if i != leader)
        asyncio.run(scenario(c, leader, follower))
    finally:
        c.close()


async def scenario(c: Cluster, leader: int, follower: int) -> None:
    async with MetaquorumClient([c.url(follower)]) as client:
        # Register three brokers through a follower: the client follows the 307.
        epochs = {}
        for b in (1, 2, 3):
            reg = await client.register(b, c.cluster_id, str(uuid.uuid4()), listeners(b), MV)
            assert reg.ok, reg
            epochs[b] = reg.broker_epoch
        assert client.leader == c.url(leader)
        for b in (1, 2, 3):
            hb = await client.heartbeat(b, epochs[b], 10**9)
            assert hb.ok and not hb.is_fenced and hb.is_caught_up
        created = await client.create_topics(
            [
                {
                    "name": "e2e",
                    "assignments": [
                        {"partitionIndex": 0, "brokerIds": [1, 2, 3]},
                        {"partitionIndex": 1, "brokerIds": [2, 3, 1]},
                        {"partitionIndex": 2, "brokerIds": [3, 1, 2]},
                    ],
                }
            ]
        )
        assert created.body["topics"][0]["errorName"] == "NONE"
        topic_id = created.body["topics"][0]["topicId"]

        async def partition(p: int, on: int = follower) -> dict:
            async with MetaquorumClient([c.url(on)]) as reader:
                topic = (await reader.topic("e2e", linearizable=True)).body
            return topic["partitions"][p]

        async def alter(isr: list[int], epoch_of=None):
            part = await partition(0)
            epoch_of = epoch_of or epochs
            answer = await client.alter_partition(
                1,
                epochs[1],
                [
                    {
                        "topicId": topic_id,
                        "partitions": [
                            {
                                "partitionIndex": 0,
                                "leaderEpoch": part["leaderEpoch"],
                                "partitionEpoch": part["partitionEpoch"],
                                "newIsrWithEpochs": [
                                    {"brokerId": b, "brokerEpoch": epoch_of[b]} for b in isr
                                ],
                            }
                        ],
                    }
                ],
            )
            assert answer.ok, answer
            return answer.partitions[0]

        # Shrink, then expand: the partition epoch moves, the leader epoch does not.
        before = await partition(0)
        shrunk = await alter([1, 2])
        assert shrunk.error_name == "NONE" and shrunk.isr == (1, 2)
        assert shrunk.partition_epoch == before["partitionEpoch"] + 1
        assert shrunk.leader_epoch == before["leaderEpoch"]
        # A linearizable read on a follower sees the acknowledged change.
        assert (await partition(0, on=follower))["isr"] == [1, 2]
        expanded = await alter([1, 2, 3])
        assert expanded.error_name == "NONE" and expanded.isr == (1, 2, 3)

        # KIP-903: a stale broker epoch for a member is refused, with the reason.
        stale = await alter([1, 2, 3], epoch_of={**epochs, 2: epochs[2] - 1})
        assert stale.error_name == "INELIGIBLE_REPLICA"
        assert (
            stale.error_message
            == f"broker 2 epoch mismatch: requested={epochs[2] - 1} expected={epochs[2]}"
        )

        # KIP-841: a fenced broker may not join an ISR.
        hb = await client.heartbeat(3, epochs[3], 10**9, want_fence=True)
        assert hb.is_fenced
        assert 3 not in (await partition(0))["isr"]
        fenced = await alter([1, 2, 3])
        assert (
            fenced.error_name == "INELIGIBLE_REPLICA"
            and fenced.error_message == "broker 3 is fenced"
        )
        # The active controller keeps both refusals by rule; a follower sends
        # the read to it (307), as it would a write.
        query = "/v1/refusals?topic=e2e&partition=0"
        async with httpx.AsyncClient() as http:
            moved = await http.get(c.url(follower) + query)
            assert moved.status_code == 307, moved.text
            assert moved.headers["location"] == c.url(leader) + query
            kept = (await http.get(c.url(leader) + query)).json()["refusals"]
        assert [(r["rule"], r["brokerId"]) for r in kept[:2]] == [
            ("kip-841.replica-fenced", 1),
            ("kip-903.stale-broker-epoch", 1),
        ]
        hb = await client.heartbeat(3, epochs[3], 10**9)
        assert not hb.is_fenced

        # Controlled shutdown of broker 1: its leaderships move, it leaves every ISR.
        hb = await client.heartbeat(1, epochs[1], 10**9, want_shut_down=True)
        assert (hb.is_fenced, hb.should_shut_down) == (False, False)
        for p in range(3):
            part = await partition(p)
            assert 1 not in part["isr"] and part["leader"] != 1
        brokers = {
            b["brokerId"]: b for b in (await client.brokers(linearizable=True)).body["brokers"]
        }
        assert brokers[1]["inControlledShutdown"] and not brokers[1]["fenced"]
        # Once the others have replicated it, broker 1 is told to stop.
        for b in (2, 3):
            await client.heartbeat(b, epochs[b], 10**9)
        hb = await client.heartbeat(1, epochs[1], 10**9, want_shut_down=True)
        assert (hb.is_fenced, hb.should_shut_down) == (True, True)


@pytest.mark.layout("2-workers")
def test_a_stopped_broker_is_decommissioned_through_the_client(tmp_path):
    """Kafka's decommission (KRaftClusterTest.testUnregisterBroker): the broker
    stops, is fenced when its session times out, and is unregistered; every
    voter's image then lacks it, and the default replication factor counts
    the brokers left."""
    # With Kafka's default periodic NoOpRecord, which the log then holds too.
    c = Cluster(tmp_path, extra=["--session-timeout-ms", "2000"], noop_ms=500)
    try:
        c.start()
        c.wait_ready()
        leader = c.leader()
        follower = next(i for i in range(c.n) if i != leader)
        asyncio.run(decommission(c, follower))
    finally:
        c.close()


async def decommission(c: Cluster, follower: int) -> None:
    async with MetaquorumClient([c.url(follower)]) as client:
        epochs = {}
        for b in (1, 2, 3):
            reg = await client.register(b, c.cluster_id, str(uuid.uuid4()), listeners(b), MV)
            epochs[b] = reg.broker_epoch
        created = await client.create_topic("before", 2, 3)
        assert created.body["topics"][0]["errorName"] == "INVALID_REPLICATION_FACTOR"
        # Brokers 1 and 2 keep beating; broker 3 beats once, then stops.
        assert not (await client.heartbeat(3, epochs[3], 10**9)).is_fenced
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            for b in (1, 2):
                assert (await client.heartbeat(b, epochs[b], 10**9)).ok
            brokers = (await client.brokers(linearizable=True)).body["brokers"]
            state = {b["brokerId"]: b["fenced"] for b in brokers}
            if state == {1: False, 2: False, 3: True}:
                break
            assert asyncio.get_running_loop().time() < deadline, state
            await asyncio.sleep(0.3)
        assert (await client.create_topic("before", 2)).body["topics"][0]["replicationFactor"] == 3
        answer = await client.unregister_broker(3)
        assert answer.ok and answer.body["errorName"] == "NONE", answer.body
        brokers = (await client.brokers(linearizable=True)).body["brokers"]
        assert [b["brokerId"] for b in brokers] == [1, 2]
        for p in (await client.topic("before", linearizable=True)).body["partitions"]:
            assert 3 not in p["isr"] and p["leader"] in (1, 2), p
        dry = await client.create_topics([{"name": "after"}], validate_only=True)
        assert dry.body["topics"][0]["replicationFactor"] == 2
        assert (
            await client.topic("after", linearizable=True)
        ).error_name == "UNKNOWN_TOPIC_OR_PARTITION"
        after = await client.create_topic("after", 1)
        assert after.body["topics"][0]["replicationFactor"] == 2
        again = await client.unregister_broker(3)
        assert again.error_name == "BROKER_ID_NOT_REGISTERED"
        assert again.error_message == "Broker ID 3 is not currently registered"
        hb = await client.heartbeat(3, epochs[3], 10**9)
        assert hb.error_name == "STALE_BROKER_EPOCH"
        page = await client.log(0, 10_000)
        gone = [r for r in page.body["records"] if r["type"] == "UNREGISTER_BROKER_RECORD"]
        assert [r["data"] for r in gone] == [{"brokerId": 3, "brokerEpoch": epochs[3]}]
        assert any(r["type"] == "NO_OP_RECORD" for r in page.body["records"])
    # Every voter applied it.
    for i in range(c.n):
        async with MetaquorumClient([c.url(i)]) as voter:
            deadline = asyncio.get_running_loop().time() + 30
            while 3 in [b["brokerId"] for b in (await voter.brokers()).body["brokers"]]:
                assert asyncio.get_running_loop().time() < deadline, i
                await asyncio.sleep(0.2)


@pytest.mark.layout("default")
def test_configs_decide_elections_and_survive_a_failover(tmp_path):
    """IncrementalAlterConfigs and DescribeConfigs through the client: the
    cluster default's unclean.leader.election.enable makes a returning
    out-of-sync broker lead a leaderless partition, a topic's own false keeps
    its partition leaderless, every voter describes the same configs, and a
    new leader keeps them and takes more."""
    c = Cluster(tmp_path, extra=["--session-timeout-ms", "2000"])
    try:
        c.start()
        c.wait_ready()
        leader = c.leader()
        follower = next(i for i in range(c.n) if i != leader)
        asyncio.run(configs_scenario(c, leader, follower))
    finally:
        c.close()


async def beat_until(client, epochs, beating, done, what, timeout_s=60.0):
    """Heartbeats from the ``beating`` brokers until ``done()`` holds."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await done():
        for b in beating:
            assert (await client.heartbeat(b, epochs[b], 10**9)).ok
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.3)


def changes(name, *sets):
    return {
        "resourceType": 2 if name else 4,
        "resourceName": name or "",
        "configs": [{"name": k, "configOperation": 0, "value": v} for k, v in sets],
    }


async def configs_scenario(c: Cluster, leader: int, follower: int) -> None:
    async with MetaquorumClient([c.url(follower)]) as client:
        epochs = {}
        for b in (1, 2):
            reg = await client.register(b, c.cluster_id, str(uuid.uuid4()), listeners(b), MV)
            epochs[b] = reg.broker_epoch

        async def fenced():
            brokers = (await client.brokers(linearizable=True)).body["brokers"]
            return {b["brokerId"]: b["fenced"] for b in brokers}

        async def state_is(want):
            return await fenced() == want

        await beat_until(client, epochs, (1, 2), lambda: state_is({1: False, 2: False}), "unfenced")
        created = await client.create_topics(
            [
                {"name": "t", "assignments": [{"partitionIndex": 0, "brokerIds": [1, 2]}]},
                {
                    "name": "keep",
                    "assignments": [{"partitionIndex": 0, "brokerIds": [1, 2]}],
                    "configs": [{"name": "unclean.leader.election.enable", "value": "false"}],
                },
            ]
        )
        assert [t["errorName"] for t in created.body["topics"]] == ["NONE", "NONE"]
        # Broker 2 falls silent and is fenced (out of the ISR), then broker 1:
        # the partitions keep their last ISR member and no leader.
        await beat_until(client, epochs, (1,), lambda: state_is({1: False, 2: True}), "2 fenced")
        await beat_until(client, epochs, (), lambda: state_is({1: True, 2: True}), "1 fenced")
        for name in ("t", "keep"):
            (p,) = (await client.topic(name, linearizable=True)).body["partitions"]
            assert (p["leader"], p["isr"]) == (-1, [1]), (name, p)

        answer = await client.alter_configs(
            [
                changes(None, ("unclean.leader.election.enable", "true")),
                changes("t", ("retention.ms", "60000")),
            ]
        )
        assert [r["errorName"] for r in answer.body["responses"]] == ["NONE", "NONE"], answer.body
        # Broker 2 returns: unfencing elects it where the resolved config allows.
        await beat_until(client, epochs, (2,), lambda: state_is({1: True, 2: False}), "2 back")
        (t,) = (await client.topic("t", linearizable=True)).body["partitions"]
        (keep,) = (await client.topic("keep", linearizable=True)).body["partitions"]
        assert (t["leader"], t["isr"]) == (2, [2]) and keep["leader"] == -1, (t, keep)

        described = await client.describe_configs("t", include_synonyms=True, linearizable=True)
        configs = {x["name"]: x for x in described.body["configs"]}
        unclean = configs["unclean.leader.election.enable"]
        assert (unclean["value"], unclean["configSourceName"]) == (
            "true",
            "DYNAMIC_DEFAULT_BROKER_CONFIG",
        )
        assert (configs["retention.ms"]["value"], configs["retention.ms"]["configSourceName"]) == (
            "60000",
            "TOPIC_CONFIG",
        )

    # Every voter shows the same; then the leader goes and the configs stay.
    for i in range(c.n):
        async with MetaquorumClient([c.url(i)]) as voter:
            body = (await voter.describe_configs(linearizable=True)).body
            assert [(x["name"], x["value"]) for x in body["configs"]] == [
                ("unclean.leader.election.enable", "true")
            ], i
    c.kill(leader)
    survivors = [i for i in range(c.n) if i != leader]
    c.leader(among=survivors)
    async with MetaquorumClient([c.url(i) for i in survivors]) as client:
        answer = await client.alter_configs([changes("keep", ("retention.ms", "1000"))])
        assert answer.body["responses"][0]["errorName"] == "NONE", answer.body
        keep = await client.describe_configs("keep", linearizable=True)
        values = {x["name"]: (x["value"], x["configSourceName"]) for x in keep.body["configs"]}
        assert values["retention.ms"] == ("1000", "TOPIC_CONFIG")
        assert values["unclean.leader.election.enable"] == ("false", "TOPIC_CONFIG")
        cluster = await client.describe_configs(linearizable=True)
        assert [x["name"] for x in cluster.body["configs"]] == ["unclean.leader.election.enable"]
