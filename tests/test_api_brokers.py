"""Broker endpoints over HTTP against a real single-voter node: registration,
heartbeats, controlled shutdown, AlterPartition v0-3 (docs/api.md "Broker endpoints")."""

from __future__ import annotations

import uuid

import pytest

from api import create_app
from metadata_records.uuids import parse_uuid, to_standard

from .local_node import MV_FEATURES, incarnation_id, registration_body


def post(local, app, path, body):
    return local.request(app, "POST", path, json=body)


def register(local, app, broker_id, generation=0, **extra):
    r = post(
        local,
        app,
        "/v1/brokers/register",
        registration_body(local.cluster_id, broker_id, generation, **extra),
    )
    assert r.status_code == 200, r.text
    return r.json()


def heartbeat(local, app, broker_id, epoch, **flags):
    body = {"brokerId": broker_id, "brokerEpoch": epoch, "currentMetadataOffset": 1 << 40, **flags}
    r = post(local, app, "/v1/brokers/heartbeat", body)
    assert r.status_code == 200, r.text
    return r.json()


def active_broker(local, app, broker_id):
    epoch = register(local, app, broker_id)["brokerEpoch"]
    assert heartbeat(local, app, broker_id, epoch)["isFenced"] is False
    return epoch


# ---------------------------------------------------------------- registration


def test_new_incarnation_gets_the_offset_of_its_record_as_epoch(local, app):
    body = register(local, app, 1)
    assert body == {
        "errorCode": 0,
        "errorName": "NONE",
        "errorMessage": None,
        "rule": None,
        "throttleTimeMs": 0,
        "brokerEpoch": body["brokerEpoch"],
    }
    epoch = body["brokerEpoch"]
    log = local.request(app, "GET", f"/v1/log?fromOffset={epoch}&maxRecords=1").json()
    (record,) = log["records"]
    assert record["offset"] == epoch
    assert record["type"] == "REGISTER_BROKER_RECORD"
    assert record["data"]["brokerId"] == 1
    assert record["data"]["incarnationId"] == incarnation_id(1)
    broker = local.request(app, "GET", "/v1/brokers/1").json()
    assert broker["brokerEpoch"] == epoch
    assert broker["fenced"] is True
    assert broker["inControlledShutdown"] is False
    assert broker["registrationOffset"] == epoch


def test_same_incarnation_keeps_its_epoch(local, app):
    first = register(local, app, 2)["brokerEpoch"]
    again = register(local, app, 2)
    assert again["errorName"] == "NONE"
    assert again["brokerEpoch"] == first


def test_standard_uuid_is_accepted_and_shown_as_base64url(local, app):
    standard = str(uuid.UUID(int=0x1234_5678_9ABC_DEF0_1122_3344_5566_7788))
    body = registration_body(local.cluster_id, 3)
    body["incarnationId"] = standard
    r = post(local, app, "/v1/brokers/register", body)
    assert r.json()["errorName"] == "NONE"
    shown = local.request(app, "GET", "/v1/brokers/3").json()["incarnationId"]
    assert len(shown) == 22
    assert shown == parse_uuid(standard)
    assert to_standard(shown) == standard


def test_wrong_cluster_id_is_a_protocol_error_with_status_200(local, app):
    r = post(local, app, "/v1/brokers/register", registration_body("another-cluster", 4))
    assert r.status_code == 200
    body = r.json()
    assert (body["errorCode"], body["errorName"]) == (104, "INCONSISTENT_CLUSTER_ID")
    assert body["brokerEpoch"] == -1
    assert body["errorMessage"]


def test_unsupported_metadata_version_range(local, app):
    features = [{"name": "metadata.version", "minSupportedVersion": 1, "maxSupportedVersion": 1}]
    r = post(
        local,
        app,
        "/v1/brokers/register",
        registration_body(local.cluster_id, 5, features=features),
    )
    body = r.json()
    assert (body["errorCode"], body["errorName"]) == (35, "UNSUPPORTED_VERSION")
    assert "metadata.version" in body["errorMessage"]


def test_zookeeper_broker_is_refused(local, app):
    body = registration_body(local.cluster_id, 6, isMigratingZkBroker=True)
    assert (
        post(local, app, "/v1/brokers/register", body).json()["errorName"]
        == "BROKER_ID_NOT_REGISTERED"
    )


@pytest.mark.parametrize("direct_routes", [True, False])
def test_bad_listeners_are_an_invalid_request_answered_by_the_controller(local, direct_routes):
    """Issue 18 item 6: status 200 (the controller decided), Kafka's error fields,
    brokerEpoch -1, and nothing written; through either routing path."""
    app = create_app(local.node, direct_routes=direct_routes)
    for listeners, expected in (
        (
            [{"name": "SECURE", "host": "h", "port": 9093, "securityProtocol": 9}],
            "Unknown security protocol 9 in listener SECURE",
        ),
        (
            [{"name": "L", "host": "a", "port": 1, "securityProtocol": 0}] * 2,
            "Duplicate listener name L",
        ),
    ):
        before = local.node.image.next_offset
        r = post(
            local,
            app,
            "/v1/brokers/register",
            registration_body(local.cluster_id, 40, listeners=listeners),
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["errorCode"], body["errorName"], body["brokerEpoch"]) == (
            42,
            "INVALID_REQUEST",
            -1,
        )
        assert body["errorMessage"].startswith(expected)
        assert local.node.image.next_offset == before
    assert local.request(app, "GET", "/v1/brokers/40").status_code == 404


def test_duplicate_registration_while_the_session_is_valid(local, app):
    active_broker(local, app, 7)
    other = post(
        local, app, "/v1/brokers/register", registration_body(local.cluster_id, 7, generation=1)
    )
    assert other.json()["errorName"] == "DUPLICATE_BROKER_REGISTRATION"


# ---------------------------------------------------------------- heartbeats


def test_heartbeat_unfences_a_caught_up_broker(local, app):
    epoch = register(local, app, 8)["brokerEpoch"]
    behind = heartbeat(local, app, 8, epoch, currentMetadataOffset=epoch - 1)
    assert (behind["isCaughtUp"], behind["isFenced"]) == (False, True)
    body = heartbeat(local, app, 8, epoch, currentMetadataOffset=epoch)
    assert body == {
        "errorCode": 0,
        "errorName": "NONE",
        "errorMessage": None,
        "rule": None,
        "throttleTimeMs": 0,
        "isCaughtUp": True,
        "isFenced": False,
        "shouldShutDown": False,
    }
    assert local.request(app, "GET", "/v1/brokers/8").json()["fenced"] is False
    # Report a far offset again: a controlled shutdown waits for every active
    # broker's reported offset (test_controlled_shutdown_moves_leadership_first).
    heartbeat(local, app, 8, epoch)


def test_heartbeat_with_a_stale_epoch(local, app):
    epoch = register(local, app, 9)["brokerEpoch"]
    body = heartbeat(local, app, 9, epoch + 1000)
    assert (body["errorCode"], body["errorName"]) == (77, "STALE_BROKER_EPOCH")
    # Kafka's error defaults: not caught up, fenced, no shutdown.
    assert (body["isCaughtUp"], body["isFenced"], body["shouldShutDown"]) == (False, True, False)


def test_heartbeat_before_registration(local, app):
    body = heartbeat(local, app, 999, 5)
    assert body["errorName"] == "STALE_BROKER_EPOCH"


def test_shutdown_of_a_broker_that_leads_nothing(local, app):
    epoch = active_broker(local, app, 13)
    body = heartbeat(local, app, 13, epoch, wantShutDown=True)
    assert (body["isFenced"], body["shouldShutDown"]) == (True, True)


def test_controlled_shutdown_moves_leadership_first(local, app):
    e20 = active_broker(local, app, 20)
    active_broker(local, app, 21)
    create = post(
        local,
        app,
        "/v1/topics",
        {"topics": [{"name": "cs", "assignments": [{"partitionIndex": 0, "brokerIds": [20, 21]}]}]},
    )
    assert create.json()["topics"][0]["errorName"] == "NONE"
    body = heartbeat(local, app, 20, e20, wantShutDown=True)
    assert (body["isFenced"], body["shouldShutDown"]) == (False, False)
    broker = local.request(app, "GET", "/v1/brokers/20").json()
    assert broker["inControlledShutdown"] is True
    partition = local.request(app, "GET", "/v1/topics/cs").json()["partitions"][0]
    assert partition["leader"] == 21
    assert partition["isr"] == [21]
    # Every active broker here last reported a far offset, so it may go now.
    done = heartbeat(local, app, 20, e20)
    assert (done["isFenced"], done["shouldShutDown"]) == (True, True)


# ---------------------------------------------------------------- AlterPartition


@pytest.fixture(scope="module")
def isr_topic(local, app):
    """Topic "ap" on active brokers 30, 31, 32 (leader 30); returns their epochs."""
    epochs = {b: active_broker(local, app, b) for b in (30, 31, 32)}
    r = post(
        local,
        app,
        "/v1/topics",
        {
            "topics": [
                {"name": "ap", "assignments": [{"partitionIndex": 0, "brokerIds": [30, 31, 32]}]}
            ]
        },
    )
    assert r.json()["topics"][0]["errorName"] == "NONE"
    return epochs


def state(local, app, topic="ap"):
    t = local.request(app, "GET", f"/v1/topics/{topic}").json()
    return t["topicId"], t["partitions"][0]


def alter(local, app, version, body):
    r = local.request(app, "POST", f"/v1/alter-partition?version={version}", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_alter_partition_v3_shrinks_the_isr(local, app, isr_topic):
    topic_id, p = state(local, app)
    body = alter(
        local,
        app,
        3,
        {
            "brokerId": 30,
            "brokerEpoch": isr_topic[30],
            "topics": [
                {
                    "topicId": to_standard(topic_id),  # the 36-character form works too
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            "leaderEpoch": p["leaderEpoch"],
                            "partitionEpoch": p["partitionEpoch"],
                            "newIsrWithEpochs": [
                                {"brokerId": 30, "brokerEpoch": isr_topic[30]},
                                {"brokerId": 31, "brokerEpoch": -1},
                            ],
                        }
                    ],
                }
            ],
        },
    )
    assert (body["errorCode"], body["errorName"], body["errorMessage"]) == (0, "NONE", None)
    (topic,) = body["topics"]
    assert topic == {"topicId": topic_id, "partitions": topic["partitions"]}  # echoed as base64url
    (entry,) = topic["partitions"]
    assert entry["errorName"] == "NONE"
    assert entry["leaderId"] == 30
    assert entry["isr"] == [30, 31]
    assert entry["leaderEpoch"] == p["leaderEpoch"]  # a shrink does not bump it (MV >= 3.6)
    assert entry["partitionEpoch"] == p["partitionEpoch"] + 1
    assert entry["leaderRecoveryState"] == 0
    assert state(local, app)[1]["isr"] == [30, 31]


def test_alter_partition_v1_by_topic_name_expands_the_isr(local, app, isr_topic):
    _, p = state(local, app)
    body = alter(
        local,
        app,
        1,
        {
            "brokerId": 30,
            "brokerEpoch": isr_topic[30],
            "topics": [
                {
                    "topicName": "ap",
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            "leaderEpoch": p["leaderEpoch"],
                            "partitionEpoch": p["partitionEpoch"],
                            "newIsr": [30, 31, 32],
                            "leaderRecoveryState": 0,
                        }
                    ],
                }
            ],
        },
    )
    (topic,) = body["topics"]
    assert topic["topicName"] == "ap" and "topicId" not in topic
    assert topic["partitions"][0]["errorName"] == "NONE"
    assert topic["partitions"][0]["isr"] == [30, 31, 32]


def test_ineligible_replica_reasons_are_on_the_partition(local, app, isr_topic):
    topic_id, _ = state(local, app)
    stale = isr_topic[32] + 1000

    def request(version, isr_field, isr, topic_key, topic_value):
        p = state(local, app)[1]
        return {
            "brokerId": 30,
            "brokerEpoch": isr_topic[30],
            "topics": [
                {
                    topic_key: topic_value,
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            "leaderEpoch": p["leaderEpoch"],
                            "partitionEpoch": p["partitionEpoch"],
                            isr_field: isr,
                        }
                    ],
                }
            ],
        }

    isr = [{"brokerId": 30, "brokerEpoch": -1}, {"brokerId": 32, "brokerEpoch": stale}]
    body = alter(local, app, 3, request(3, "newIsrWithEpochs", isr, "topicId", topic_id))
    assert body["errorMessage"] is None
    entry = body["topics"][0]["partitions"][0]
    assert (entry["errorCode"], entry["errorName"]) == (107, "INELIGIBLE_REPLICA")
    assert (
        f"broker 32 epoch mismatch: requested={stale} expected={isr_topic[32]}"
        in entry["errorMessage"]
    )
    assert entry["leaderId"] == 0 and entry["isr"] == []  # Kafka's error entry: zeros

    isr = [{"brokerId": 30, "brokerEpoch": -1}, {"brokerId": 77, "brokerEpoch": -1}]
    body = alter(local, app, 3, request(3, "newIsrWithEpochs", isr, "topicId", topic_id))
    assert body["topics"][0]["partitions"][0]["errorName"] == "INVALID_REQUEST"  # 77: no replica

    # Versions 0-1 answer OPERATION_NOT_ATTEMPTED for an ineligible member.
    heartbeat(local, app, 32, isr_topic[32], wantFence=True)  # also drops 32 from the ISR
    body = alter(local, app, 0, request(0, "newIsr", [30, 31, 32], "topicName", "ap"))
    entry = body["topics"][0]["partitions"][0]
    assert (entry["errorCode"], entry["errorName"]) == (55, "OPERATION_NOT_ATTEMPTED")
    assert "broker 32 is fenced" in entry["errorMessage"]


def test_alter_partition_unknown_topics_by_version(local, app, isr_topic):
    partitions = [{"partitionIndex": 0, "leaderEpoch": 0, "partitionEpoch": 0, "newIsr": [30]}]
    v2 = alter(
        local,
        app,
        2,
        {
            "brokerId": 30,
            "brokerEpoch": isr_topic[30],
            "topics": [{"topicId": "AAAAAAAAAAAAAAAAAAAAAA", "partitions": partitions}],
        },
    )
    assert v2["topics"][0]["partitions"][0]["errorName"] == "UNKNOWN_TOPIC_ID"
    v1 = alter(
        local,
        app,
        1,
        {
            "brokerId": 30,
            "brokerEpoch": isr_topic[30],
            "topics": [{"topicName": "nope", "partitions": partitions}],
        },
    )
    assert v1["topics"][0]["partitions"][0]["errorName"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_alter_partition_with_a_stale_broker_epoch(local, app, isr_topic):
    _, p = state(local, app)
    body = alter(
        local,
        app,
        3,
        {
            "brokerId": 30,
            "brokerEpoch": isr_topic[30] + 1000,
            "topics": [
                {
                    "topicId": state(local, app)[0],
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            "leaderEpoch": p["leaderEpoch"],
                            "partitionEpoch": p["partitionEpoch"],
                            "newIsrWithEpochs": [{"brokerId": 30}],
                        }
                    ],
                }
            ],
        },
    )
    assert (body["errorCode"], body["errorName"]) == (77, "STALE_BROKER_EPOCH")
    assert body["topics"] == []


def test_default_version_is_3_and_empty_topics_answer_none(local, app):
    r = local.request(app, "POST", "/v1/alter-partition", json={"brokerId": 1, "topics": []})
    assert r.status_code == 200
    assert r.json()["errorName"] == "NONE"
    # Version 3 refuses the v0-2 field, which proves the default is 3.
    r = local.request(
        app,
        "POST",
        "/v1/alter-partition",
        json={
            "brokerId": 1,
            "topics": [
                {
                    "topicId": "AAAAAAAAAAAAAAAAAAAAAA",
                    "partitions": [
                        {"partitionIndex": 0, "leaderEpoch": 0, "partitionEpoch": 0, "newIsr": [1]}
                    ],
                }
            ],
        },
    )
    assert r.status_code == 400
    assert r.json()["errorMessage"].startswith("topics[0].partitions[0].newIsr:")


def test_features_list_is_echoed_in_the_registration(local, app):
    register(local, app, 40, rack="rack-a")
    broker = local.request(app, "GET", "/v1/brokers/40").json()
    assert broker["rack"] == "rack-a"
    assert broker["features"] == MV_FEATURES
    assert broker["listeners"][0]["name"] == "PLAINTEXT"
