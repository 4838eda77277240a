"""ELR (KIP-966, issue 21 item 7) end to end on a real 3-voter cluster,
through brokers/client.py: the feature eligible.leader.replicas.version is
finalized with UpdateFeatures; an ISR shrunk below min.insync.replicas puts
the replicas that left it in the ELR; fencing the last ISR member elects a
leader from the ELR; a broker that re-registers after an unclean shutdown
(previousBrokerEpoch -1) leaves the ELR, one after a clean shutdown (its own
epoch) stays; every voter shows the same."""

import uuid

import pytest

from brokers.client import MetaquorumClient

from .cluster import Cluster
from .conftest import run_on_three_voters
from .test_e2e import MV, beat_until, listeners

pytestmark = pytest.mark.slow

ELR = "eligible.leader.replicas.version"
FEATURES = [*MV, {"name": ELR, "minSupportedVersion": 0, "maxSupportedVersion": 1}]


def test_elr_keeps_clean_replicas_eligible_and_drops_unclean_ones(tmp_path):
    run_on_three_voters(tmp_path, elr_scenario, extra=["--session-timeout-ms", "2000"])


async def elr_scenario(c: Cluster, leader: int, follower: int) -> None:
    async with MetaquorumClient([c.url(follower)]) as client:
        epochs = {}
        for b in (1, 2, 3):
            reg = await client.register(b, c.cluster_id, str(uuid.uuid4()), listeners(b), FEATURES)
            assert reg.ok, reg
            epochs[b] = reg.broker_epoch

        async def fenced():
            brokers = (await client.brokers(linearizable=True)).body["brokers"]
            return {b["brokerId"]: b["fenced"] for b in brokers}

        async def state_is(want):
            return await fenced() == want

        async def partition():
            (p,) = (await client.topic("t", linearizable=True)).body["partitions"]
            return p

        await beat_until(
            client, epochs, (1, 2, 3), lambda: state_is({1: False, 2: False, 3: False}), "up"
        )
        # Off by default, as Kafka 4.0; then finalized at level 1.
        status = (await client.status()).body
        assert ELR not in status["finalizedFeatures"], status
        answer = await client.update_features(ELR, 1)
        assert answer.ok, answer.body

        async def elr_finalized():
            # The follower's status is its own image: wait until it applied the write.
            return (await client.status()).body["finalizedFeatures"].get(ELR) == 1

        await beat_until(client, epochs, (1, 2, 3), elr_finalized, "ELR finalized")

        created = await client.create_topics(
            [
                {
                    "name": "t",
                    "assignments": [{"partitionIndex": 0, "brokerIds": [1, 2, 3]}],
                    "configs": [{"name": "min.insync.replicas", "value": "2"}],
                }
            ]
        )
        assert created.body["topics"][0]["errorName"] == "NONE", created.body
        topic_id = created.body["topics"][0]["topicId"]
        p = await partition()
        assert (p["leader"], p["isr"], p["eligibleLeaderReplicas"]) == (1, [1, 2, 3], [])

        # The leader shrinks the ISR to itself, below min.insync.replicas 2:
        # the replicas that left it are the ELR.
        answer = await client.alter_partition(
            1,
            epochs[1],
            [
                {
                    "topicId": topic_id,
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            "leaderEpoch": p["leaderEpoch"],
                            "partitionEpoch": p["partitionEpoch"],
                            "newIsrWithEpochs": [{"brokerId": 1, "brokerEpoch": epochs[1]}],
                        }
                    ],
                }
            ],
        )
        assert answer.ok and answer.partitions[0].error_name == "NONE", answer
        p = await partition()
        assert (p["isr"], p["eligibleLeaderReplicas"]) == ([1], [2, 3]), p

        # The last ISR member falls silent and is fenced: a clean replica
        # from the ELR leads, and is the ISR.
        await beat_until(
            client, epochs, (2, 3), lambda: state_is({1: True, 2: False, 3: False}), "1 fenced"
        )
        p = await partition()
        assert (p["leader"], p["isr"], p["eligibleLeaderReplicas"]) == (2, [2], [1, 3]), p
        assert p["leaderRecoveryState"] == 0 and p["lastKnownElr"] == [], p

        # Broker 3 crashes: fenced, then a new incarnation with no clean
        # shutdown behind it (previousBrokerEpoch -1): out of the ELR.
        await beat_until(
            client, epochs, (2,), lambda: state_is({1: True, 2: False, 3: True}), "3 fenced"
        )
        reg = await client.register(3, c.cluster_id, str(uuid.uuid4()), listeners(3), FEATURES)
        assert reg.ok, reg
        p = await partition()
        assert p["eligibleLeaderReplicas"] == [1], p
        # Broker 1 stopped cleanly: its new incarnation names its epoch and stays.
        reg = await client.register(
            1,
            c.cluster_id,
            str(uuid.uuid4()),
            listeners(1),
            FEATURES,
            previous_broker_epoch=epochs[1],
        )
        assert reg.ok, reg
        p = await partition()
        assert (p["leader"], p["isr"], p["eligibleLeaderReplicas"]) == (2, [2], [1]), p

    # Every voter shows the same partition.
    for i in range(c.n):
        async with MetaquorumClient([c.url(i)]) as voter:
            (q,) = (await voter.topic("t", linearizable=True)).body["partitions"]
            assert q == p, (i, q, p)
