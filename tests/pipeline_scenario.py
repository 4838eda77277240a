"""A short broker scenario through brokers/client.py, for the pipeline tests:
three brokers register and are unfenced, a topic is created, an ISR shrinks
and expands (AlterPartition v3), a broker is fenced and unfenced, and one
goes through a controlled shutdown."""

from __future__ import annotations

import uuid

from brokers.client import MetaquorumClient

MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]


def listeners(b: int) -> list[dict]:
    return [{"name": "PLAINTEXT", "host": "localhost", "port": 9090 + b, "securityProtocol": 0}]


async def broker_scenario(
    url: str,
    cluster_id: str,
    topic: str = "audited",
    ids: tuple[int, int, int] = (1, 2, 3),
    alive: dict[int, int] | None = None,
) -> dict[int, int]:
    """Returns the epochs of the brokers left running; ``alive`` are brokers of
    an earlier run that keep heartbeating (a controlled shutdown completes only
    once every active broker has caught up with it)."""
    one, two, three = ids
    async with MetaquorumClient([url]) as client:
        epochs = {}
        for b in ids:
            reg = await client.register(b, cluster_id, str(uuid.uuid4()), listeners(b), MV)
            assert reg.ok, reg
            epochs[b] = reg.broker_epoch
        for b in ids:
            hb = await client.heartbeat(b, epochs[b], 10**9)
            assert hb.ok and not hb.is_fenced, hb
        created = await client.create_topics(
            [
                {
                    "name": topic,
                    "assignments": [
                        {"partitionIndex": 0, "brokerIds": [one, two, three]},
                        {"partitionIndex": 1, "brokerIds": [two, three, one]},
                        {"partitionIndex": 2, "brokerIds": [three, one, two]},
                    ],
                }
            ]
        )
        assert created.body["topics"][0]["errorName"] == "NONE", created.body
        topic_id = created.body["topics"][0]["topicId"]

        async def alter(isr: list[int]) -> None:
            part = (await client.topic(topic, linearizable=True)).body["partitions"][0]
            answer = await client.alter_partition(
                one,
                epochs[one],
                [
                    {
                        "topicId": topic_id,
                        "partitions": [
                            {
                                "partitionIndex": 0,
                                "leaderEpoch": part["leaderEpoch"],
                                "partitionEpoch": part["partitionEpoch"],
                                "newIsrWithEpochs": [
                                    {"brokerId": b, "brokerEpoch": epochs[b]} for b in isr
                                ],
                            }
                        ],
                    }
                ],
            )
            assert answer.ok and answer.partitions[0].error_name == "NONE", answer

        await alter([one, two])
        await alter([one, two, three])
        assert (await client.heartbeat(three, epochs[three], 10**9, want_fence=True)).is_fenced
        assert not (await client.heartbeat(three, epochs[three], 10**9)).is_fenced
        await alter([one, two, three])
        hb = await client.heartbeat(two, epochs[two], 10**9, want_shut_down=True)
        assert hb.ok and not hb.should_shut_down, hb
        running = {**(alive or {}), one: epochs[one], three: epochs[three]}
        for b, epoch in running.items():
            await client.heartbeat(b, epoch, 10**9)
        hb = await client.heartbeat(two, epochs[two], 10**9, want_shut_down=True)
        assert hb.should_shut_down, hb
        return running
