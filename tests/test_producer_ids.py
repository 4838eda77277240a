"""The broker side of AllocateProducerIds (brokers/producer_ids.py): against
scripted answers, then a real node."""

from __future__ import annotations

import asyncio

import pytest

from brokers.client import Answer
from brokers.producer_ids import ProducerIdManager, ProducerIdsUnavailable

from .local_node import registration_body


def ok(start, length=10):
    body = {"errorCode": 0, "errorName": "NONE", "errorMessage": None,
            "producerIdStart": start, "producerIdLen": length}  # fmt: skip
    return Answer(0, "NONE", None, body)


def refused(name="STALE_BROKER_EPOCH"):
    body = {"errorCode": 77, "errorName": name, "errorMessage": "Expected broker epoch 3"}
    return Answer(77, name, "Expected broker epoch 3", body)


class Controller:
    """Scripted answers; counts the calls."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = 0

    async def __call__(self):
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def run(coro):
    return asyncio.run(coro)


def test_ids_come_from_blocks_and_the_next_one_is_fetched_at_ninety_percent():
    controller = Controller(ok(0), ok(10), ok(20))

    async def scenario():
        m = ProducerIdManager(controller)
        ids = [await m.generate() for _ in range(9)]
        assert ids == list(range(9)) and controller.calls == 1
        assert await m.generate() == 9  # the 10th id: 90% used, the prefetch starts
        await asyncio.sleep(0)
        assert controller.calls == 2
        ids = [await m.generate() for _ in range(10)]
        assert ids == list(range(10, 20)) and m.blocks == 2
        return m

    assert run(scenario()).problem is None


def test_a_refusal_or_an_unreachable_controller_is_retriable():
    controller = Controller(refused(), ConnectionError("down"), ok(100))

    async def scenario():
        m = ProducerIdManager(controller)
        with pytest.raises(ProducerIdsUnavailable, match="STALE_BROKER_EPOCH"):
            await m.generate()
        with pytest.raises(ProducerIdsUnavailable, match="down"):
            await m.generate()
        assert await m.generate() == 100
        assert m.problem is None

    run(scenario())


def test_a_block_below_what_was_handed_out_is_refused():
    controller = Controller(ok(100), ok(105), ok(110))

    async def scenario():
        m = ProducerIdManager(controller)
        assert [await m.generate() for _ in range(10)] == list(range(100, 110))
        await asyncio.sleep(0)  # the prefetch answered 105: overlapping, refused
        assert "is not above the ids already handed out" in m.problem
        assert await m.generate() == 110  # a fresh fetch
        assert controller.calls == 3

    run(scenario())


def test_concurrent_callers_share_one_fetch_and_get_distinct_ids():
    controller = Controller(ok(0, 1000), ok(1000, 1000), ok(2000, 1000))

    async def scenario():
        m = ProducerIdManager(controller)
        ids = await asyncio.gather(*(m.generate() for _ in range(1500)))
        assert sorted(ids) == list(range(1500)) and controller.calls <= 3

    run(scenario())


def test_blocks_from_a_real_node(local, app):
    r = local.request(
        app, "POST", "/v1/brokers/register", json=registration_body(local.cluster_id, 7)
    )
    epoch = r.json()["brokerEpoch"]

    def allocate(body):
        return local.request(app, "POST", "/v1/brokers/allocate-producer-ids", json=body)

    first = allocate({"brokerId": 7, "brokerEpoch": epoch}).json()
    second = allocate({"brokerId": 7, "brokerEpoch": epoch}).json()
    assert (first["errorName"], first["producerIdLen"]) == ("NONE", 1000)
    assert second["producerIdStart"] == first["producerIdStart"] + 1000
    stale = allocate({"brokerId": 7, "brokerEpoch": epoch + 1}).json()
    assert (stale["errorName"], stale["producerIdStart"], stale["producerIdLen"]) == (
        "STALE_BROKER_EPOCH", 0, 0,
    )  # fmt: skip
    assert local.node.image.next_producer_id == second["producerIdStart"] + 1000
    bad = local.request(app, "POST", "/v1/brokers/allocate-producer-ids", json={"brokerId": 7})
    assert bad.status_code == 400 and "brokerEpoch" in bad.json()["errorMessage"]
