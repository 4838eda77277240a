"""brokers/client.py against a real voter (a ``metaquorum serve`` process)."""

import asyncio
import signal
import uuid

import pytest

from brokers.client import ClientError, MetaquorumClient, OutcomeUnknown, RequestRejected

from .cluster import Cluster
from .nodes import free_port
from .test_cluster import register_body

MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]
LISTENERS = [{"name": "PLAINTEXT", "host": "localhost", "port": 9092, "securityProtocol": 0}]


def run(coro):
    return asyncio.run(coro)


def test_broker_lifecycle_through_the_client(voter):
    async def go():
        async with MetaquorumClient([voter.url(0)]) as client:
            reg = await client.register(1, voter.cluster_id, str(uuid.uuid4()), LISTENERS, MV)
            assert reg.ok and reg.broker_epoch >= 0
            hb = await client.heartbeat(1, reg.broker_epoch, 10**9)
            assert hb.ok and not hb.is_fenced and hb.is_caught_up
            await client.register(2, voter.cluster_id, str(uuid.uuid4()), LISTENERS, MV)
            created = await client.create_topic("client-t", 2, 1)
            topic = created.body["topics"][0]
            assert topic["errorName"] == "NONE", topic
            t = await client.topic("client-t", linearizable=True)
            assert t.metadata_offset is not None and len(t.body["partitions"]) == 2
            stale = await client.heartbeat(1, reg.broker_epoch + 1000, 0)
            assert not stale.ok and stale.error_name == "STALE_BROKER_EPOCH" and stale.is_fenced
            page = await client.log(0, 5)
            assert [r["offset"] for r in page.body["records"]] == list(range(5))

    run(go())


def test_alter_partition_answers_are_typed(voter):
    async def go():
        async with MetaquorumClient([voter.url(0)]) as client:
            reg = await client.register(7, voter.cluster_id, str(uuid.uuid4()), LISTENERS, MV)
            await client.heartbeat(7, reg.broker_epoch, 10**9)
            await client.create_topics(
                [{"name": "ap", "assignments": [{"partitionIndex": 0, "brokerIds": [7]}]}]
            )
            t = (await client.topic("ap", linearizable=True)).body
            p = t["partitions"][0]
            answer = await client.alter_partition(
                7,
                reg.broker_epoch,
                [
                    {
                        "topicId": t["topicId"],
                        "partitions": [
                            {
                                "partitionIndex": 0,
                                "leaderEpoch": p["leaderEpoch"],
                                "partitionEpoch": p["partitionEpoch"],
                                "newIsrWithEpochs": [
                                    {"brokerId": 7, "brokerEpoch": reg.broker_epoch + 1}
                                ],
                            }
                        ],
                    }
                ],
            )
            assert answer.ok
            (result,) = answer.partitions
            assert result.error_name == "INELIGIBLE_REPLICA"
            assert "broker 7 epoch mismatch" in result.error_message

    run(go())


def test_a_dead_seed_is_skipped(voter):
    async def go():
        dead = f"http://127.0.0.1:{free_port()}"
        async with MetaquorumClient([dead, voter.url(0)], backoff_s=0.01) as client:
            status = await client.status()
            assert status.body["nodeId"] == 0

    run(go())


def test_bad_requests_are_rejected_not_retried(voter):
    async def go():
        async with MetaquorumClient([voter.url(0)]) as client:
            with pytest.raises(RequestRejected) as e:
                await client.heartbeat(2**31, 1, 1)  # brokerId beyond int32
            assert e.value.status == 400 and "brokerId" in (e.value.body.get("errorMessage") or "")

    run(go())


def test_nobody_answering_is_an_error_that_says_so():
    async def go():
        async with MetaquorumClient(
            [f"http://127.0.0.1:{free_port()}"], max_attempts=3, backoff_s=0.01
        ) as c:
            with pytest.raises(ClientError, match="gave up after 3 attempts"):
                await c.status()

    run(go())


def test_a_write_without_an_answer_is_an_unknown_outcome(tmp_path, voter):
    c = Cluster(tmp_path, voters=1)
    try:
        c.start()
        c.wait_ready()
        c.leader()
        c.signal(0, signal.SIGSTOP)

        async def go():
            async with MetaquorumClient([c.url(0), voter.url(0)], timeout_s=0.5) as client:
                with pytest.raises(OutcomeUnknown):
                    await client.register(3, c.cluster_id, str(uuid.uuid4()), LISTENERS, MV)
                # The paused node is not asked again: the next write goes to the
                # next seed (here another, live voter with the same cluster id).
                again = await client.register(3, voter.cluster_id, str(uuid.uuid4()), LISTENERS, MV)
                assert again.ok and client.leader == voter.url(0)

        run(go())
    finally:
        c.signal(0, signal.SIGCONT)
        c.close()


def test_the_exact_retry_hint_beats_the_whole_seconds_header():
    client = MetaquorumClient(["http://127.0.0.1:1"], max_backoff_s=2.0)
    try:
        assert client._delay(0, "1", {"retryAfterMs": 250}) == 0.25
        assert client._delay(0, "2", {"errorCode": 41}) == 2.0
        assert client._delay(0, "60", None) == 8.0  # capped at 4x the backoff cap
        assert client._delay(0, None, {"retryAfterMs": 60_000}) == 8.0
    finally:
        run(client.close())


def test_a_seed_that_knows_no_leader_is_left_for_the_next(tmp_path, voter):
    """A voter cut off from its majority answers writes 503 (no leader known):
    the client asks the next seed instead of waiting on that one (Kafka's
    clients move through their bootstrap servers the same way)."""
    c = Cluster(tmp_path, voters=3)
    try:
        c.start(0)  # alone of its three voters: it never knows a leader
        c.wait(lambda: c.status(0) is not None, 30, "the lone voter answering")
        lonely = c.post(0, "/v1/brokers/register", register_body(c, 1))
        assert lonely.status_code == 503, lonely.text

        async def go():
            async with MetaquorumClient([c.url(0), voter.url(0)], backoff_s=0.01) as client:
                reg = await client.register(4, voter.cluster_id, str(uuid.uuid4()), LISTENERS, MV)
                assert reg.ok and client.leader == voter.url(0)

        run(go())
    finally:
        c.close()
