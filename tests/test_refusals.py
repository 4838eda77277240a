"""The ring of recent refusals (controller/refusals.py) and what reads it:
the answers' ``rule`` on both of the app's paths, and GET /v1/refusals."""

from __future__ import annotations

import pytest

from api import create_app
from api import models_fast as MF
from controller.messages import (
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from controller.refusals import Refusal, RefusalRing
from metadata_records.errors import Errors

from .test_api_brokers import active_broker, heartbeat, post

NOW = 1_796_359_920_000


def clock() -> int:
    return NOW


def hb_refused(broker_id: int) -> tuple[object, object]:
    request = BrokerHeartbeatRequest(broker_id, 7, 0)
    response = BrokerHeartbeatResponse(
        Errors.STALE_BROKER_EPOCH, "stale", rule="kip-380.broker-epoch-mismatch"
    )
    return request, response


def alter_partition(broker_id: int, *refused: int) -> tuple[object, object]:
    """Partitions 0-3 of topic id T, those in ``refused`` refused as fenced."""
    parts = tuple(
        AlterPartitionPartitionResult(
            p, Errors.INELIGIBLE_REPLICA, "fenced", rule="kip-841.replica-fenced"
        )
        if p in refused
        else AlterPartitionPartitionResult(p)
        for p in range(4)
    )
    response = AlterPartitionResponse(
        Errors.NONE, None, (AlterPartitionTopicResult(parts, topic_id="T"),)
    )
    return AlterPartitionRequest(broker_id, 5, ()), response


# ---------------------------------------------------------------- the ring


def test_accepted_answers_note_nothing_and_do_not_read_the_clock():
    ring = RefusalRing()

    def no_clock() -> int:
        raise AssertionError("the clock was read for an accepted answer")

    ring.note(BrokerHeartbeatRequest(1, 7, 0), BrokerHeartbeatResponse(Errors.NONE), no_clock)
    ring.note(*alter_partition(1), lambda: NOW)
    assert len(ring) == 0 and ring.noted == 0


def test_a_refused_heartbeat_is_found_by_its_broker():
    ring = RefusalRing()
    ring.note(*hb_refused(3), clock)
    (r,) = ring.recent(broker_id=3)
    assert r == Refusal(
        NOW, "BrokerHeartbeat", "kip-380.broker-epoch-mismatch", Errors.STALE_BROKER_EPOCH,
        "stale", broker_id=3,
    )  # fmt: skip
    assert ring.recent(broker_id=4) == []


def test_refused_partitions_are_found_by_topic_partition_and_broker():
    ring = RefusalRing()
    ring.note(*alter_partition(1, 1, 3), clock, {"T": "orders"}.get)
    assert [(r.topic, r.partition) for r in ring.recent(topic="orders")] == [
        ("orders", 3),
        ("orders", 1),
    ]
    (r,) = ring.recent(topic="orders", partition=1)
    assert (r.api, r.rule, r.error, r.broker_id) == (
        "AlterPartition", "kip-841.replica-fenced", Errors.INELIGIBLE_REPLICA, 1,
    )  # fmt: skip
    assert ring.recent(topic="orders", partition=0) == []
    assert len(ring.recent(broker_id=1)) == 2
    assert ring.recent(topic="orders", broker_id=2) == []
    with pytest.raises(ValueError, match="topic"):
        ring.recent(partition=1)


def test_per_entry_refusals_of_an_admin_request():
    ring = RefusalRing()
    response = CreateTopicsResponse(
        (
            CreatableTopicResult("ok"),
            CreatableTopicResult(
                "a/b", Errors.INVALID_TOPIC_EXCEPTION, "bad", rule="topic.name-invalid"
            ),
        )
    )
    ring.note(CreateTopicsRequest(()), response, clock)
    (r,) = ring.recent()
    assert (r.api, r.topic, r.rule) == ("CreateTopics", "a/b", "topic.name-invalid")


def test_the_ring_and_each_key_are_bounded():
    ring = RefusalRing(capacity=50, per_key=4)
    for i in range(200):
        ring.note(*hb_refused(i % 100), clock)
    assert len(ring) == 50 and ring.noted == 200
    assert [r.broker_id for r in ring.recent(limit=3)] == [99, 98, 97]
    assert len(ring._by_key) <= 50  # the least recently refused keys went first
    assert ring.recent(broker_id=0) == []  # pushed out of both
    for _ in range(10):
        ring.note(*hb_refused(7), clock)
    assert len(ring.recent(broker_id=7)) == 4


# ---------------------------------------------------------------- the app


@pytest.fixture(scope="module")
def plain_app(local):
    """The same node without the fast path: pydantic parses, models answer."""
    return create_app(local.node, direct_routes=False)


def both(local, app, plain_app, path, body):
    """The answer of the fast path and of the pydantic one: the same bytes."""
    fast = post(local, app, path, body)
    MF.QUICK = False
    try:
        plain = post(local, plain_app, path, body)
    finally:
        MF.QUICK = True
    assert fast.status_code == plain.status_code == 200, (fast.text, plain.text)
    assert fast.content == plain.content
    return fast.json()


def test_refusals_carry_their_rule_on_both_paths_and_are_listed(local, app, plain_app):
    e1 = active_broker(local, app, 61)
    e2 = active_broker(local, app, 62)
    body = {"brokerId": 61, "brokerEpoch": e1 + 1000, "currentMetadataOffset": 0}
    answer = both(local, app, plain_app, "/v1/brokers/heartbeat", body)
    assert (answer["errorName"], answer["rule"]) == (
        "STALE_BROKER_EPOCH", "kip-380.broker-epoch-mismatch",
    )  # fmt: skip

    created = post(
        local, app, "/v1/topics",
        {"topics": [{"name": "rf", "assignments": [{"partitionIndex": 0, "brokerIds": [61, 62]}]}]},
    ).json()  # fmt: skip
    assert created["topics"][0]["rule"] is None
    heartbeat(local, app, 62, e2, wantFence=True)
    t = local.request(app, "GET", "/v1/topics/rf").json()
    p = t["partitions"][0]
    assert p["isr"] == [61]
    request = {
        "brokerId": 61,
        "brokerEpoch": e1,
        "topics": [
            {
                "topicId": t["topicId"],
                "partitions": [
                    {
                        "partitionIndex": 0,
                        "leaderEpoch": p["leaderEpoch"],
                        "partitionEpoch": p["partitionEpoch"],
                        "newIsrWithEpochs": [
                            {"brokerId": 61, "brokerEpoch": e1},
                            {"brokerId": 62, "brokerEpoch": e2},
                        ],
                    }
                ],
            }
        ],
    }
    answer = both(local, app, plain_app, "/v1/alter-partition", request)
    (part,) = answer["topics"][0]["partitions"]
    assert (answer["rule"], part["errorName"], part["rule"]) == (
        None, "INELIGIBLE_REPLICA", "kip-841.replica-fenced",
    )  # fmt: skip

    listed = local.request(app, "GET", "/v1/refusals?topic=rf&partition=0").json()
    assert listed["noted"] >= 4
    newest = listed["refusals"][0]
    assert (newest["api"], newest["rule"], newest["brokerId"], newest["topic"]) == (
        "AlterPartition", "kip-841.replica-fenced", 61, "rf",
    )  # fmt: skip
    by_broker = local.request(app, "GET", "/v1/refusals?brokerId=61&limit=10").json()
    assert {r["rule"] for r in by_broker["refusals"]} == {
        "kip-380.broker-epoch-mismatch",
        "kip-841.replica-fenced",
    }
    assert local.request(app, "GET", "/v1/refusals?limit=1").json()["refusals"] == [newest]


def test_a_partition_needs_its_topic(local, app):
    r = local.request(app, "GET", "/v1/refusals?partition=0")
    assert r.status_code == 400
    assert "topic" in r.json()["errorMessage"]
