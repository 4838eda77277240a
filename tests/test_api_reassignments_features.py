"""Kafka's ListPartitionReassignments (GET /v1/reassignments), DescribeFeatures
(GET /v1/features) and DeleteTopics by several names (POST /v1/topics/delete)
on a real single-voter node through the real app, against what the image
holds."""

from __future__ import annotations

import pytest

from api.reads import reassignments_obj
from api.routes.reassignments import parse_topics


@pytest.fixture(scope="module")
def cluster(local, app):
    """Brokers 1-4, unfenced; topic orders: p0 on [1, 2], p1 on [2, 1]."""
    for b in (1, 2, 3, 4):
        local.unfenced_broker(app, b)
    topic = {
        "name": "orders",
        "assignments": [
            {"partitionIndex": 0, "brokerIds": [1, 2]},
            {"partitionIndex": 1, "brokerIds": [2, 1]},
        ],
    }
    r = local.request(app, "POST", "/v1/topics", json={"topics": [topic]})
    assert r.json()["errorName"] == "NONE", r.text


def reassign(local, app, partition: int, replicas: list[int] | None) -> None:
    body = {"topics": [{"name": "orders", "partitions": [
        {"partitionIndex": partition, "replicas": replicas}]}]}  # fmt: skip
    r = local.request(app, "POST", "/v1/reassignments", json=body)
    assert r.status_code == 200 and r.json()["errorName"] == "NONE", r.text


def listed(local, app, query: str = "", status: int = 200) -> dict:
    r = local.request(app, "GET", "/v1/reassignments" + query)
    assert r.status_code == status, r.text
    assert int(r.headers["X-Metadata-Offset"]) == local.node.image.last_offset
    return r.json()


def test_a_reassignment_is_listed_until_it_is_cancelled(local, app, cluster):
    assert listed(local, app)["topics"] == []
    # Brokers 3 and 4 are not in the ISR (no broker fetches here): it stays in progress.
    reassign(local, app, 0, [3, 4])
    ongoing = {"partitionIndex": 0, "replicas": [3, 4, 1, 2],
               "addingReplicas": [3, 4], "removingReplicas": [1, 2]}  # fmt: skip
    topic_id = local.node.image.topic_by_name("orders").topic_id
    everything = listed(local, app)
    assert everything == {
        "offset": local.node.image.last_offset,
        "topics": [{"name": "orders", "topicId": topic_id, "partitions": [ongoing]}],
        "notFound": [],
    }
    # Asked by name and partition: p1 is not reassigning, so it is left out, as Kafka does.
    assert listed(local, app, "?topic=orders:1,0")["topics"][0]["partitions"] == [ongoing]
    assert listed(local, app, "?topic=orders:1")["topics"] == []
    asked = listed(local, app, "?topic=orders:0,9&topic=nope")
    assert asked["notFound"] == ["nope", "orders:9"] and asked["topics"][0]["partitions"] == [
        ongoing
    ]
    reassign(local, app, 0, None)  # cancelled
    assert listed(local, app)["topics"] == []


@pytest.mark.parametrize("bad", ["orders:x", ":1", "orders:", "orders:-1", "orders:1,,2"])
def test_a_bad_topic_is_a_400_naming_it(local, app, cluster, bad):
    body = listed(local, app, f"?topic={bad}", status=400)
    assert body["errorName"] == "INVALID_REQUEST" and repr(bad) in body["errorMessage"]


def test_parse_topics():
    assert parse_topics(["a", "b:3,1"]) == [("a", None), ("b", (3, 1))]


def test_describe_features_names_each_level_as_kafka_prints_it(local, app, cluster):
    r = local.request(app, "GET", "/v1/features")
    assert r.status_code == 200, r.text
    body = r.json()
    image = local.node.image
    assert body["finalizedFeaturesEpoch"] == image.last_offset
    by_name = {f["name"]: f for f in body["features"]}
    assert list(by_name) == sorted(by_name)
    mv = by_name["metadata.version"]
    assert (mv["supportedMinVersion"], mv["supportedMaxVersion"]) == (6, 12)
    assert (mv["supportedMinVersionName"], mv["supportedMaxVersionName"]) == ("3.3-IV2", "3.6-IV0")
    assert mv["finalizedVersionLevel"] == image.metadata_version == 12
    assert mv["finalizedVersionLevelName"] == "3.6-IV0"
    # The first leader wrote the voter set into the log: a dynamic quorum (KIP-853).
    assert image.voters
    kraft = by_name["kraft.version"]
    assert (kraft["finalizedVersionLevel"], kraft["finalizedVersionLevelName"]) == (1, "1")
    elr = by_name["eligible.leader.replicas.version"]
    assert (elr["supportedMaxVersion"], elr["finalizedVersionLevel"]) == (1, 0)


def test_deleting_several_topics_answers_each(local, app, cluster):
    for name in ("t1", "t2"):
        r = local.request(app, "POST", "/v1/topics", json={"topics": [
            {"name": name, "numPartitions": 1, "replicationFactor": 1}]})  # fmt: skip
        assert r.json()["errorName"] == "NONE", r.text
    r = local.request(
        app, "POST", "/v1/topics/delete", json={"topicNames": ["t1", "nope", "t2", "t2"]}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["errorName"] == "NONE"
    assert [(t["name"], t["errorName"]) for t in body["responses"]] == [
        ("t1", "NONE"), ("nope", "UNKNOWN_TOPIC_OR_PARTITION"),
        ("t2", "INVALID_REQUEST"), ("t2", "INVALID_REQUEST"),
    ]  # fmt: skip
    assert local.node.image.topic_by_name("t1") is None
    assert local.node.image.topic_by_name("t2") is not None  # named twice: refused
    assert [t["rule"] for t in body["responses"]][1:] == [
        "topic.unknown", "topic.name-duplicate", "topic.name-duplicate"]  # fmt: skip
    r = local.request(app, "POST", "/v1/topics/delete", json={"topicNames": []})
    assert r.status_code == 400, r.text


def test_reassignments_obj_of_an_empty_image():
    from metadata_records.image import EMPTY_IMAGE

    assert reassignments_obj(EMPTY_IMAGE, None) == {"offset": -1, "topics": [], "notFound": []}
    assert reassignments_obj(EMPTY_IMAGE, [("a", (0,))])["notFound"] == ["a"]
