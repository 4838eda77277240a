"""Leader balancing end to end on a real 3-voter cluster, through
brokers/client.py: a partition whose preferred replica was fenced is led by
another; once that replica is back and in the ISR, the active controller
elects it back on its own (--leader-imbalance-check-interval-seconds), and
/metrics says so."""

import asyncio
import uuid

import pytest

from brokers.client import MetaquorumClient

from .cluster import Cluster
from .test_e2e import MV, listeners

pytestmark = pytest.mark.slow


def test_the_preferred_leader_is_elected_back_without_a_request(tmp_path):
    c = Cluster(tmp_path, extra=["--leader-imbalance-check-interval-seconds", "1"])
    try:
        c.start()
        c.wait_ready()
        leader = c.leader()
        follower = next(i for i in range(c.n) if i != leader)
        asyncio.run(scenario(c, follower))

        def metric(name: str) -> float | None:
            for line in c.get(leader, "/metrics").text.splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
            return None

        assert metric("metaquorum_leader_balance_elections_total") == 1
        assert metric("metaquorum_preferred_replica_imbalance_count") == 0
        log = c.logs[leader].read_text()
        assert "leader balancing: 1 partition(s) led by their preferred replica again" in log
    finally:
        c.close()


async def scenario(c: Cluster, follower: int) -> None:
    async with MetaquorumClient([c.url(follower)]) as client:
        epochs = {}
        for b in (1, 2):
            reg = await client.register(b, c.cluster_id, str(uuid.uuid4()), listeners(b), MV)
            assert reg.ok, reg
            epochs[b] = reg.broker_epoch
            hb = await client.heartbeat(b, epochs[b], 10**9)
            assert hb.ok and not hb.is_fenced
        created = await client.create_topics(
            [{"name": "bal", "assignments": [{"partitionIndex": 0, "brokerIds": [1, 2]}]}]
        )
        assert created.body["topics"][0]["errorName"] == "NONE"
        topic_id = created.body["topics"][0]["topicId"]

        async def partition() -> dict:
            return (await client.topic("bal", linearizable=True)).body["partitions"][0]

        # 1, the preferred replica, is fenced: 2 leads.
        assert (await client.heartbeat(1, epochs[1], 10**9, want_fence=True)).is_fenced
        part = await partition()
        assert (part["leader"], part["isr"]) == (2, [2])
        # 1 comes back and 2 takes it back into the ISR.
        assert not (await client.heartbeat(1, epochs[1], 10**9)).is_fenced
        answer = await client.alter_partition(
            2,
            epochs[2],
            [
                {
                    "topicId": topic_id,
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            "leaderEpoch": part["leaderEpoch"],
                            "partitionEpoch": part["partitionEpoch"],
                            "newIsrWithEpochs": [
                                {"brokerId": b, "brokerEpoch": epochs[b]} for b in (2, 1)
                            ],
                        }
                    ],
                }
            ],
        )
        assert answer.ok and answer.partitions[0].error_name == "NONE", answer
        # No request asks for it: the controller elects 1 back within the interval.
        deadline = asyncio.get_running_loop().time() + 30
        while (part := await partition())["leader"] != 1:
            assert asyncio.get_running_loop().time() < deadline, part
            # Brokers keep their sessions meanwhile, as live brokers do.
            for b in (1, 2):
                await client.heartbeat(b, epochs[b], 10**9)
            await asyncio.sleep(0.2)
        assert part["isr"] == [2, 1] and part["leaderEpoch"] > answer.partitions[0].leader_epoch
