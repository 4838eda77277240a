"""Kafka's remaining operator reads end to end on a real 3-voter cluster,
through brokers/client.py: a reassignment started through a follower is
listed by every voter (ListPartitionReassignments), every voter describes the
same features with kraft.version 1 (its voter set is in the log), topics are
deleted by several names through a follower, and after the leader is killed
the new one lists and cancels the reassignment."""

import uuid

import pytest

from brokers.client import MetaquorumClient

from .cluster import Cluster
from .conftest import run_on_three_voters
from .test_e2e import MV, listeners

pytestmark = pytest.mark.slow


def test_reassignments_features_and_deletes_from_every_voter(tmp_path):
    run_on_three_voters(tmp_path, scenario)


async def scenario(c: Cluster, leader: int, follower: int) -> None:
    async with MetaquorumClient([c.url(follower)]) as client:
        for b in (1, 2, 3):
            reg = await client.register(b, c.cluster_id, str(uuid.uuid4()), listeners(b), MV)
            beat = await client.heartbeat(b, reg.broker_epoch, 1 << 40)
            assert not beat.is_fenced
        created = await client.create_topics(
            [
                {"name": n, "assignments": [{"partitionIndex": 0, "brokerIds": [1]}]}
                for n in ("moving", "gone-1", "gone-2")
            ]
        )
        assert [t["errorName"] for t in created.body["topics"]] == ["NONE"] * 3, created.body
        # Brokers 2 and 3 never fetch: the reassignment stays in progress.
        moved = await client.reassign(
            [{"name": "moving", "partitions": [{"partitionIndex": 0, "replicas": [2, 3]}]}]
        )
        assert moved.body["responses"][0]["partitions"][0]["errorName"] == "NONE", moved.body
        deleted = await client.delete_topics(["gone-1", "gone-2", "never"])
        assert [t["errorName"] for t in deleted.body["responses"]] == [
            "NONE", "NONE", "UNKNOWN_TOPIC_OR_PARTITION"]  # fmt: skip
        assert client.leader == c.url(leader)  # the writes followed the 307

    ongoing = [{"partitionIndex": 0, "replicas": [2, 3, 1],
                "addingReplicas": [2, 3], "removingReplicas": [1]}]  # fmt: skip
    features = None
    for i in range(c.n):
        async with MetaquorumClient([c.url(i)]) as voter:
            listed = await voter.list_reassignments(linearizable=True)
            assert listed.metadata_offset is not None
            assert [(t["name"], t["partitions"]) for t in listed.body["topics"]] == [
                ("moving", ongoing)
            ], (i, listed.body)
            topics = await voter.topics(linearizable=True)
            assert [t["name"] for t in topics.body["topics"]] == ["moving"], i
            described = {
                f["name"]: f["finalizedVersionLevelName"]
                for f in (await voter.describe_features(linearizable=True)).body["features"]
            }
            assert described["kraft.version"] == "1" and described["metadata.version"] == "3.6-IV0"
            assert features in (None, described), i
            features = described

    c.kill(leader)
    survivors = [i for i in range(c.n) if i != leader]
    c.leader(among=survivors)
    async with MetaquorumClient([c.url(i) for i in survivors]) as client:
        listed = await client.list_reassignments(["moving:0"], linearizable=True)
        assert listed.body["topics"][0]["partitions"] == ongoing, listed.body
        cancelled = await client.reassign(
            [{"name": "moving", "partitions": [{"partitionIndex": 0, "replicas": None}]}]
        )
        assert cancelled.body["responses"][0]["partitions"][0]["errorName"] == "NONE"
        assert (await client.list_reassignments(linearizable=True)).body["topics"] == []
