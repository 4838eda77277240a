"""Admin endpoints over HTTP against a real single-voter node (docs/api.md "Admin endpoints")."""

from __future__ import annotations

import pytest

from .local_node import registration_body


@pytest.fixture(scope="module")
def brokers(local, app):
    """Brokers 1, 2, 3 registered and unfenced; returns their epochs."""
    epochs = {}
    for b in (1, 2, 3):
        r = local.request(
            app, "POST", "/v1/brokers/register", json=registration_body(local.cluster_id, b)
        )
        epochs[b] = r.json()["brokerEpoch"]
        hb = {"brokerId": b, "brokerEpoch": epochs[b], "currentMetadataOffset": 1 << 40}
        assert (
            local.request(app, "POST", "/v1/brokers/heartbeat", json=hb).json()["isFenced"] is False
        )
    return epochs


NONE_BODY = {"errorCode": 0, "errorName": "NONE", "errorMessage": None}


def post(local, app, path, body):
    r = local.request(app, "POST", path, json=body)
    assert r.status_code == 200, r.text
    return r.json()


def topic(local, app, name):
    r = local.request(app, "GET", f"/v1/topics/{name}")
    assert r.status_code == 200, r.text
    return r.json()


# ---------------------------------------------------------------- CreateTopics


def test_create_topics_with_defaults(local, app, brokers):
    body = post(local, app, "/v1/topics", {"topics": [{"name": "defaults"}]})
    assert (body["errorCode"], body["errorName"], body["errorMessage"]) == (0, "NONE", None)
    (result,) = body["topics"]
    assert result["name"] == "defaults"
    assert result["errorName"] == "NONE"
    assert (result["numPartitions"], result["replicationFactor"]) == (1, 3)
    assert len(result["topicId"]) == 22
    shown = topic(local, app, "defaults")
    assert shown["topicId"] == result["topicId"]
    (p,) = shown["partitions"]
    assert sorted(p["replicas"]) == [1, 2, 3]
    assert p["isr"] == p["replicas"]  # every replica is active, in assignment order
    assert p["leader"] == p["replicas"][0]
    assert (p["leaderEpoch"], p["partitionEpoch"], p["leaderRecoveryState"]) == (0, 0, 0)


def test_create_topics_with_assignments_and_configs(local, app, brokers):
    body = post(
        local,
        app,
        "/v1/topics",
        {
            "topics": [
                {
                    "name": "manual",
                    "assignments": [
                        {"partitionIndex": 0, "brokerIds": [2, 3]},
                        {"partitionIndex": 1, "brokerIds": [3, 1]},
                    ],
                    "configs": [
                        {"name": "min.insync.replicas", "value": "2"},
                        {"name": "unclean.leader.election.enable", "value": "true"},
                    ],
                }
            ]
        },
    )
    (result,) = body["topics"]
    assert (result["errorName"], result["numPartitions"], result["replicationFactor"]) == (
        "NONE",
        2,
        2,
    )
    shown = topic(local, app, "manual")
    assert [p["replicas"] for p in shown["partitions"]] == [[2, 3], [3, 1]]
    assert [p["leader"] for p in shown["partitions"]] == [2, 3]
    assert shown["configs"] == [
        {"name": "min.insync.replicas", "value": "2"},
        {"name": "unclean.leader.election.enable", "value": "true"},
    ]


def test_create_topics_protocol_errors_are_per_topic(local, app, brokers):
    post(local, app, "/v1/topics", {"topics": [{"name": "taken"}]})
    body = post(
        local,
        app,
        "/v1/topics",
        {
            "topics": [
                {"name": "taken"},
                {"name": "bad/name"},
                {"name": "cfg", "configs": [{"name": "retention.ms", "value": "-7"}]},
                {"name": "rf", "replicationFactor": 4},
                {"name": "fine"},
            ]
        },
    )
    assert body["errorName"] == "NONE"
    names = {t["name"]: (t["errorCode"], t["errorName"]) for t in body["topics"]}
    assert names == {
        "taken": (36, "TOPIC_ALREADY_EXISTS"),
        "bad/name": (17, "INVALID_TOPIC_EXCEPTION"),
        "cfg": (40, "INVALID_CONFIG"),
        "rf": (38, "INVALID_REPLICATION_FACTOR"),
        "fine": (0, "NONE"),
    }
    assert all(t["errorMessage"] for t in body["topics"] if t["errorCode"])
    assert local.request(app, "GET", "/v1/topics/cfg").status_code == 404


def test_create_topics_validate_only_answers_as_a_real_request_and_creates_nothing(
    local, app, brokers
):
    before = local.node.image.next_offset
    topics = [
        {"name": "v", "numPartitions": 2},
        {"name": "v-rf", "replicationFactor": 9},
        {"name": "v-cfg", "configs": [{"name": "retention.ms", "value": "-7"}]},
    ]
    body = post(local, app, "/v1/topics", {"topics": topics, "validateOnly": True})
    results = [(t["name"], t["errorName"], t["numPartitions"]) for t in body["topics"]]
    assert results == [
        ("v", "NONE", 2),
        ("v-rf", "INVALID_REPLICATION_FACTOR", -1),
        ("v-cfg", "INVALID_CONFIG", -1),
    ]
    assert len(body["topics"][0]["topicId"]) == 22
    assert body["topics"][1]["errorMessage"].startswith("Unable to replicate the partition 9")
    assert local.request(app, "GET", "/v1/topics/v").status_code == 404
    assert local.node.image.next_offset == before  # nothing written, not even a batch
    real = post(local, app, "/v1/topics", {"topics": topics})
    assert [(t["name"], t["errorName"], t["numPartitions"]) for t in real["topics"]] == results


def test_create_partitions_validate_only_is_refused(local, app, brokers):
    # A departure from Kafka: docs/kafka-conformance.md.
    post(local, app, "/v1/topics", {"topics": [{"name": "v2", "numPartitions": 1}]})
    r = local.request(
        app, "POST", "/v1/topics/v2/partitions", json={"count": 2, "validateOnly": True}
    )
    assert r.status_code == 400 and "validateOnly" in r.json()["errorMessage"]
    assert len(topic(local, app, "v2")["partitions"]) == 1


# ---------------------------------------------------------------- DeleteTopics


def test_delete_topic(local, app, brokers):
    created = post(local, app, "/v1/topics", {"topics": [{"name": "doomed"}]})["topics"][0]
    r = local.request(app, "DELETE", "/v1/topics/doomed")
    assert r.status_code == 200
    body = r.json()
    assert body["errorName"] == "NONE"
    assert body["responses"] == [
        {
            "name": "doomed",
            "topicId": created["topicId"],
            "errorCode": 0,
            "errorName": "NONE",
            "errorMessage": None,
            "rule": None,
        }
    ]
    assert local.request(app, "GET", "/v1/topics/doomed").status_code == 404
    log = local.request(app, "GET", "/v1/log?fromOffset=0&maxRecords=10000").json()["records"]
    assert log[-1]["type"] == "REMOVE_TOPIC_RECORD"
    assert log[-1]["data"] == {"topicId": created["topicId"]}


def test_delete_unknown_topic_is_200_with_the_error_at_both_levels(local, app, brokers):
    r = local.request(app, "DELETE", "/v1/topics/never-was")
    assert r.status_code == 200
    body = r.json()
    assert (body["errorCode"], body["errorName"]) == (3, "UNKNOWN_TOPIC_OR_PARTITION")
    assert body["responses"][0]["errorName"] == "UNKNOWN_TOPIC_OR_PARTITION"


# ---------------------------------------------------------------- CreatePartitions


def test_create_partitions(local, app, brokers):
    post(
        local,
        app,
        "/v1/topics",
        {"topics": [{"name": "grow", "numPartitions": 1, "replicationFactor": 2}]},
    )
    body = post(local, app, "/v1/topics/grow/partitions", {"count": 3})
    assert body["errorName"] == "NONE"
    assert body["results"] == [
        {"name": "grow", "errorCode": 0, "errorName": "NONE", "errorMessage": None, "rule": None}
    ]
    assert len(topic(local, app, "grow")["partitions"]) == 3
    # Kafka's {"brokerIds": [...]} form, and a bare list, both work.
    body = post(
        local,
        app,
        "/v1/topics/grow/partitions",
        {"count": 5, "assignments": [{"brokerIds": [1, 2]}, [3, 1]]},
    )
    assert body["errorName"] == "NONE"
    parts = topic(local, app, "grow")["partitions"]
    assert [p["replicas"] for p in parts[3:]] == [[1, 2], [3, 1]]


def test_create_partitions_errors(local, app, brokers):
    body = post(local, app, "/v1/topics/nope/partitions", {"count": 2})
    assert (body["errorCode"], body["errorName"]) == (3, "UNKNOWN_TOPIC_OR_PARTITION")
    post(local, app, "/v1/topics", {"topics": [{"name": "small", "numPartitions": 2}]})
    body = post(local, app, "/v1/topics/small/partitions", {"count": 1})
    assert body["errorName"] == "INVALID_PARTITIONS"
    assert body["results"][0]["errorName"] == "INVALID_PARTITIONS"


# ---------------------------------------------------------------- reassignments and elections


def test_reassignment_and_cancel(local, app, brokers):
    post(
        local,
        app,
        "/v1/topics",
        {"topics": [{"name": "move", "assignments": [{"partitionIndex": 0, "brokerIds": [1, 2]}]}]},
    )
    body = post(
        local,
        app,
        "/v1/reassignments",
        {"topics": [{"name": "move", "partitions": [{"partitionIndex": 0, "replicas": [2, 3]}]}]},
    )
    assert body["errorName"] == "NONE"
    (result,) = body["responses"]
    assert result["name"] == "move"
    assert result["partitions"] == [
        {
            "partitionIndex": 0,
            "errorCode": 0,
            "errorName": "NONE",
            "errorMessage": None,
            "rule": None,
        }
    ]
    p = topic(local, app, "move")["partitions"][0]
    assert p["addingReplicas"] == [3] and p["removingReplicas"] == [1]
    cancel = {"topics": [{"name": "move", "partitions": [{"partitionIndex": 0, "replicas": None}]}]}
    assert (
        post(local, app, "/v1/reassignments", cancel)["responses"][0]["partitions"][0]["errorName"]
        == "NONE"
    )
    p = topic(local, app, "move")["partitions"][0]
    # Kafka reverts to the current replicas minus the adding ones, in their current order.
    assert p["replicas"] == [2, 1] and p["addingReplicas"] == [] and p["removingReplicas"] == []
    again = post(local, app, "/v1/reassignments", cancel)["responses"][0]["partitions"][0]
    assert (again["errorCode"], again["errorName"]) == (85, "NO_REASSIGNMENT_IN_PROGRESS")
    assert again["errorMessage"]


def test_replicas_is_required_null_is_explicit(local, app, brokers):
    r = local.request(
        app,
        "POST",
        "/v1/reassignments",
        json={"topics": [{"name": "move", "partitions": [{"partitionIndex": 0}]}]},
    )
    assert r.status_code == 400
    assert r.json()["errorMessage"].startswith("topics[0].partitions[0].replicas:")


def test_elect_leaders(local, app, brokers):
    post(
        local,
        app,
        "/v1/topics",
        {
            "topics": [
                {"name": "elect", "assignments": [{"partitionIndex": 0, "brokerIds": [1, 2]}]}
            ]
        },
    )
    body = post(
        local,
        app,
        "/v1/elect-leaders",
        {
            "electionType": 0,
            "topicPartitions": [
                {"topic": "elect", "partitions": [0, 7]},
                {"topic": "ghost", "partitions": [0]},
            ],
        },
    )
    assert body["errorName"] == "NONE"
    results = {r["topic"]: r["partitionResult"] for r in body["replicaElectionResults"]}
    assert [(p["partitionId"], p["errorName"]) for p in results["elect"]] == [
        (0, "ELECTION_NOT_NEEDED"),
        (7, "UNKNOWN_TOPIC_OR_PARTITION"),
    ]
    assert results["ghost"][0]["errorCode"] == 3
    # electionType 2 fits an int8, so the controller answers it (INVALID_REQUEST, status
    # 200), on every partition named as Kafka's getErrorResponse does.
    body = post(
        local,
        app,
        "/v1/elect-leaders",
        {"electionType": 2, "topicPartitions": [{"topic": "elect", "partitions": [0]}]},
    )
    assert (body["errorCode"], body["errorName"]) == (42, "INVALID_REQUEST")
    assert body["errorMessage"].startswith("Unknown election type 2")
    ((entry,),) = [r["partitionResult"] for r in body["replicaElectionResults"]]
    assert (entry["partitionId"], entry["errorName"]) == (0, "INVALID_REQUEST")


def test_elect_leaders_without_partitions_lists_every_topic(local, app, brokers):
    """Kafka's electLeaders with null topicPartitions: an entry per topic, with an
    empty partitionResult where no election was needed (issue 18 item 7)."""
    body = post(local, app, "/v1/elect-leaders", {"electionType": 0})
    assert body["errorName"] == "NONE"
    listed = {r["topic"]: r["partitionResult"] for r in body["replicaElectionResults"]}
    shown = local.request(app, "GET", "/v1/topics").json()["topics"]
    assert sorted(listed) == sorted(t["name"] for t in shown)
    assert [r["topic"] for r in body["replicaElectionResults"]] == sorted(listed)
    # Earlier tests left some partitions led by another replica; only those appear.
    assert any(results == [] for results in listed.values())
    assert all(p["errorName"] != "ELECTION_NOT_NEEDED" for r in listed.values() for p in r)
    again = post(local, app, "/v1/elect-leaders", {"electionType": 0})["replicaElectionResults"]
    assert sorted(r["topic"] for r in again) == sorted(listed)  # still every topic


def test_reassignments_past_the_record_cap_fail_on_every_partition(local, app, brokers):
    post(
        local,
        app,
        "/v1/topics",
        {"topics": [{"name": "wide", "numPartitions": 9_999, "replicationFactor": 1}]},
    )
    before = local.node.image.next_offset
    moves = [{"partitionIndex": p, "replicas": [1, 2]} for p in range(9_999)]
    body = post(
        local,
        app,
        "/v1/reassignments",
        {"topics": [{"name": "wide", "partitions": moves}, {"name": "defaults", "partitions": [
            {"partitionIndex": 0, "replicas": [3, 2, 1]},
            {"partitionIndex": 0, "replicas": [1, 2]},
        ]}]},
    )  # fmt: skip
    assert (body["errorCode"], body["errorName"]) == (44, "POLICY_VIOLATION")
    assert body["errorMessage"].startswith("Unable to perform excessively large batch operation")
    assert [len(t["partitions"]) for t in body["responses"]] == [9_999, 2]
    assert {p["errorName"] for t in body["responses"] for p in t["partitions"]} == {
        "POLICY_VIOLATION"
    }
    assert local.node.image.next_offset == before


# ---------------------------------------------------------------- features and leadership


def test_update_features(local, app, brokers):
    """Kafka's UpdateFeatures for one feature (issue 18 item 7): the current level
    writes its record, every refusal is INVALID_UPDATE_VERSION under Kafka's
    "failed for all features" sentence, validateOnly writes nothing."""
    before = local.node.image.next_offset
    body = post(local, app, "/v1/features", {"name": "metadata.version", "level": 12})
    assert (body["errorCode"], body["errorName"], body["errorMessage"]) == (0, "NONE", None)
    assert local.node.image.next_offset == before + 1  # Kafka writes the same level again
    down = post(local, app, "/v1/features", {"name": "metadata.version", "level": 7})
    assert (down["errorCode"], down["errorName"]) == (95, "INVALID_UPDATE_VERSION")
    assert down["errorMessage"].startswith(
        "The update failed for all features since the following feature had an error: "
    )
    assert "without setting the upgrade type" in down["errorMessage"]
    safe = {"name": "metadata.version", "level": 7, "upgradeType": 2}
    assert "might delete metadata" in post(local, app, "/v1/features", safe)["errorMessage"]
    check = {"name": "metadata.version", "level": 11, "upgradeType": 2, "validateOnly": True}
    assert post(local, app, "/v1/features", check)["errorName"] == "NONE"
    assert local.node.image.metadata_version == 12
    assert local.node.image.next_offset == before + 1
    unknown = post(local, app, "/v1/features", {"name": "kraft.version", "level": 1})
    assert unknown["errorName"] == "INVALID_UPDATE_VERSION"
    assert unknown["errorMessage"].endswith("does not support this feature.")
    odd = post(
        local, app, "/v1/features", {"name": "metadata.version", "level": 12, "upgradeType": 9}
    )
    assert "does not support the given upgrade type" in odd["errorMessage"]
    for bad, field in (({"level": 40000}, "int16"), ({"level": 12, "upgradeType": 300}, "int8")):
        r = local.request(app, "POST", "/v1/features", json={"name": "metadata.version", **bad})
        assert r.status_code == 400 and field in r.json()["errorMessage"]


def test_transfer_leadership_needs_another_voter(local, app):
    r = local.request(app, "POST", "/v1/quorum/transfer-leadership")
    assert r.status_code == 400
    assert r.json()["errorMessage"].startswith("targetNodeId:")
    r = local.request(app, "POST", "/v1/quorum/transfer-leadership", json={"targetNodeId": 5})
    assert r.status_code == 400
    assert "5 is not another voter" in r.json()["errorMessage"]
    assert local.node.active  # nothing moved


# ---------------------------------------------------------------- voter changes


def test_voter_changes_on_a_lone_voter_are_refused_with_their_reason(local, app):
    def call(path, body):
        r = local.request(app, "POST", path, json=body)
        return r.status_code, r.json()

    address = local.node.config.raft_address
    status, body = call("/v1/quorum/add-voter", {"nodeId": 0, "address": "127.0.0.1:1"})
    assert (status, body["errorCode"], body["errorName"]) == (409, 126, "DUPLICATE_VOTER")
    assert body["errorMessage"].startswith("node 0 is already a voter")
    status, body = call("/v1/quorum/add-voter", {"nodeId": 0, "address": address})
    assert status == 200 and body["changed"] is False  # a retried add that finished
    assert [v["nodeId"] for v in body["voters"]] == [0]
    status, body = call("/v1/quorum/add-voter", {"nodeId": 5, "address": "127.0.0.1:1"})
    assert status == 409 and "without --raft-secret-file" in body["errorMessage"]
    status, body = call("/v1/quorum/remove-voter", {"nodeId": 7})
    assert (status, body["errorName"]) == (409, "VOTER_NOT_FOUND")
    status, body = call("/v1/quorum/remove-voter", {"nodeId": 0})
    assert (status, body["errorName"]) == (409, "INVALID_REQUEST")
    assert (
        body["errorMessage"] == "node 0 is the last voter: a cluster cannot remove its last voter"
    )
    status, body = call("/v1/quorum/add-voter", {"nodeId": 5})
    assert status == 400 and body["errorMessage"] == "address: required field is missing"
    status, body = call("/v1/quorum/add-voter", {"nodeId": 5, "address": "h:1", "timeoutMs": 0})
    assert status == 400 and body["errorMessage"].startswith("timeoutMs:")
    assert [v.voter_id for v in local.node.image.voters] == [0]  # nothing changed


def test_update_voter_on_a_lone_voter_is_refused_with_its_rule(local, app):
    """POST /v1/quorum/update-voter: each refusal a 409 with Kafka's code and
    its rule, nothing written; the voter's own address is a no-op."""

    def call(body):
        r = local.request(app, "POST", "/v1/quorum/update-voter", json=body)
        return r.status_code, r.json()

    address = local.node.config.raft_address
    directory = local.node.guard.directory_id
    before = local.node.image.voters
    ok = {"nodeId": 0, "directoryId": directory, "raftAddress": address}
    status, body = call(ok)
    assert status == 200 and body["changed"] is False  # where it already is
    assert body["voters"] == [{"nodeId": 0, "directoryId": directory, "raftAddress": address}]
    refusals = [
        ({**ok, "nodeId": 7}, "VOTER_NOT_FOUND", "kip-853.voter-not-found"),
        ({**ok, "directoryId": "another"}, "VOTER_NOT_FOUND", "kip-853.voter-directory-mismatch"),
        ({**ok, "directoryId": ""}, "INVALID_REQUEST", "kip-853.voter-directory-id-missing"),
        ({**ok, "raftAddress": "nohost"}, "INVALID_REQUEST", "kip-853.voter-endpoint-invalid"),
        (
            {**ok, "kraftVersion": {"minSupportedVersion": 0, "maxSupportedVersion": 0}},
            "INVALID_REQUEST",
            "kip-853.kraft-version-unsupported",
        ),
        # The leader runs at its address: moving its entry would cut it off.
        (
            {**ok, "raftAddress": "127.0.0.1:1"},
            "INVALID_REQUEST",
            "kip-853.voter-running-elsewhere",
        ),
    ]
    for request, name, rule in refusals:
        status, body = call(request)
        assert (status, body["errorName"], body["rule"]) == (409, name, rule), body
        assert body["errorMessage"]
    status, body = call({"nodeId": 0, "raftAddress": address})
    assert status == 400 and body["errorMessage"] == "directoryId: required field is missing"
    status, body = call({**ok, "nodeId": -1})
    assert status == 400 and body["errorMessage"].startswith("nodeId:")
    assert local.node.image.voters == before  # nothing written


# ---------------------------------------------------------------- UnregisterBroker


def test_unregister_broker_removes_it_and_moves_its_leaderships_in_one_batch(local, app, brokers):
    r = local.request(
        app, "POST", "/v1/brokers/register", json=registration_body(local.cluster_id, 7)
    )
    epoch = r.json()["brokerEpoch"]
    hb = {"brokerId": 7, "brokerEpoch": epoch, "currentMetadataOffset": 1 << 40}
    assert local.request(app, "POST", "/v1/brokers/heartbeat", json=hb).json()["isFenced"] is False
    created = post(
        local,
        app,
        "/v1/topics",
        {"topics": [{"name": "on7", "assignments": [{"partitionIndex": 0, "brokerIds": [7, 1]}]}]},
    )
    assert created["topics"][0]["errorName"] == "NONE"
    assert topic(local, app, "on7")["partitions"][0]["leader"] == 7
    start = local.node.image.next_offset
    r = local.request(app, "DELETE", "/v1/brokers/7")
    assert r.status_code == 200, r.text
    assert r.json() == {**NONE_BODY, "rule": None, "throttleTimeMs": 0}
    (p,) = topic(local, app, "on7")["partitions"]
    assert (p["leader"], p["isr"]) == (1, [1])
    assert local.request(app, "GET", "/v1/brokers/7").status_code == 404
    records = local.request(app, "GET", f"/v1/log?fromOffset={start}").json()["records"]
    assert [rec["type"] for rec in records] == [
        "PARTITION_CHANGE_RECORD",
        "UNREGISTER_BROKER_RECORD",
    ]
    assert records[1]["data"] == {"brokerId": 7, "brokerEpoch": epoch}
    assert records[0]["batchOffset"] == records[1]["batchOffset"] == start
    # Its heartbeats are stale now; unregistering it again is refused, writing nothing.
    r = local.request(app, "POST", "/v1/brokers/heartbeat", json=hb)
    assert r.json()["errorName"] == "STALE_BROKER_EPOCH"
    r = local.request(app, "DELETE", "/v1/brokers/7")
    assert r.status_code == 200
    assert r.json() == {
        "errorCode": 102,
        "errorName": "BROKER_ID_NOT_REGISTERED",
        "errorMessage": "Broker ID 7 is not currently registered",
        "rule": "unregister.broker-not-registered",
        "throttleTimeMs": 0,
    }
    assert local.node.image.next_offset == start + 2


@pytest.mark.parametrize("bad", ["x", str(2**31), "1.5"])
def test_unregister_broker_with_a_bad_id_is_invalid_request(local, app, bad):
    before = local.node.image.next_offset
    r = local.request(app, "DELETE", f"/v1/brokers/{bad}")
    assert r.status_code == 400 and r.json()["errorName"] == "INVALID_REQUEST", r.text
    assert local.node.image.next_offset == before
