"""GET /v1/explain/brokers/{id} and /v1/explain/partitions/{topic}/{partition}
on a real single-voter node through the real app: a broker that asked to be
fenced, a partition it keeps under-replicated with the rule and the refused
AlterPartition, the registration's who, the 404s and 400s."""

from __future__ import annotations

import time

import pytest

from api import create_app
from api import models as M
from quorum.node_errors import NotControllerError

from .local_node import LocalNode, registration_body
from .test_api_openapi import conforms


@pytest.fixture(scope="module")
def cluster(local, app):
    """Brokers 1-3 unfenced; topic orders (min ISR 2) p0 on [1, 2, 3]; then
    broker 3 asks to be fenced (wantFence), and leader 1's AlterPartition to
    put 3 back in the ISR is refused by kip-841.replica-fenced."""
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
    topic = {
        "name": "orders",
        "assignments": [{"partitionIndex": 0, "brokerIds": [1, 2, 3]}],
        "configs": [{"name": "min.insync.replicas", "value": "2"}],
    }
    r = local.request(app, "POST", "/v1/topics", json={"topics": [topic]})
    assert r.json()["errorName"] == "NONE", r.text
    fence = {
        "brokerId": 3,
        "brokerEpoch": epochs[3],
        "currentMetadataOffset": 1 << 40,
        "wantFence": True,
    }
    assert local.request(app, "POST", "/v1/brokers/heartbeat", json=fence).json()["isFenced"]
    p = local.request(app, "GET", "/v1/topics/orders").json()["partitions"][0]
    assert p["isr"] == [1, 2]
    refused = local.request(
        app, "POST", "/v1/alter-partition?version=3",
        json={
            "brokerId": 1,
            "brokerEpoch": epochs[1],
            "topics": [{
                "topicId": local.node.image.topic_ids["orders"],
                "partitions": [{
                    "partitionIndex": 0,
                    "leaderEpoch": p["leaderEpoch"],
                    "partitionEpoch": p["partitionEpoch"],
                    "newIsrWithEpochs": [{"brokerId": b} for b in (1, 2, 3)],
                }],
            }],
        },
    )  # fmt: skip
    part = refused.json()["topics"][0]["partitions"][0]
    assert part["rule"] == "kip-841.replica-fenced", refused.text
    return epochs


def get(local, app, path: str, status: int = 200):
    r = local.request(app, "GET", path)
    assert r.status_code == status, r.text
    assert int(r.headers["X-Metadata-Offset"]) == local.node.image.last_offset
    return r.json()


def test_a_broker_fenced_at_its_own_request(local, app, cluster):
    body = get(local, app, "/v1/explain/brokers/3")
    conforms(M.BrokerExplainOut, body)
    assert body["offset"] == local.node.image.last_offset
    assert body["servedBy"] == {"nodeId": local.node.node_id, "activeController": True,
                                "leaderId": local.node.node_id}  # fmt: skip
    assert (body["brokerId"], body["state"]) == (3, "fenced")
    fenced = body["events"][0]
    assert fenced["event"] == "fenced"
    assert "asked to be fenced" in fenced["cause"]
    assert fenced["who"]["api"] == "BrokerHeartbeat"
    assert f"offset {fenced['offset']}" in body["summary"] and "fenced" in body["summary"]
    assert [e["event"] for e in body["events"]] == ["fenced", "unfenced", "registered"]
    reg = body["registration"]
    assert reg["brokerEpoch"] == cluster[3] and reg["who"]["api"] == "RegisterBroker"
    assert reg["offset"] == body["events"][-1]["offset"]
    assert body["session"]["sessionTimeoutMs"] > 0
    assert body["session"]["heardByThisController"] is True
    assert body["refusalsFrom"].endswith("is the active controller")
    assert body["controlledShutdown"] is None
    assert body["lookBack"]["ended"] == "oldest"


def test_an_active_broker_and_its_refusals(local, app, cluster):
    body = get(local, app, "/v1/explain/brokers/1")
    assert body["state"] == "unfenced"
    assert "last heartbeat" in body["summary"]
    assert [r["rule"] for r in body["refusals"]] == ["kip-841.replica-fenced"]


def test_a_partition_kept_under_replicated_by_a_fenced_replica(local, app, cluster):
    body = get(local, app, "/v1/explain/partitions/orders/0")
    conforms(M.PartitionExplainOut, body)
    assert (body["leader"], body["isr"], body["replicas"], body["minIsr"]) == (
        1,
        [1, 2],
        [1, 2, 3],
        2,
    )
    assert body["status"] == ["online", "underReplicated"]
    assert len(body["reasons"]) == 1 and "3: broker 3 is fenced" in body["reasons"][0]
    states = {r["brokerId"]: r for r in body["replicaStates"]}
    assert states[3]["rule"] == "kip-841.replica-fenced" and states[3]["eligible"] is False
    assert states[1]["eligible"] and states[1]["rule"] is None
    assert body["lastRefusedAlterPartition"]["rule"] == "kip-841.replica-fenced"
    newest, created = body["history"][0], body["history"][-1]
    assert newest["isr"] == [1, 2] and newest["who"]["api"] == "BrokerHeartbeat"
    assert created["change"] == "created" and created["isr"] == [1, 2, 3]
    assert newest["partitionEpoch"] == body["partitionEpoch"]


def test_unknown_and_bad_ids(local, app, cluster):
    missing = get(local, app, "/v1/explain/brokers/9", status=404)
    assert "broker 9 is not registered" in missing["errorMessage"]
    assert (
        "no topic 'nope'" in get(local, app, "/v1/explain/partitions/nope/0", 404)["errorMessage"]
    )
    assert (
        "no partition 5" in get(local, app, "/v1/explain/partitions/orders/5", 404)["errorMessage"]
    )
    r = local.request(app, "GET", "/v1/explain/brokers/x")
    assert r.status_code == 400, r.text
    r = local.request(app, "GET", "/v1/explain/partitions/orders/-1")
    assert r.status_code == 400, r.text


def test_a_node_that_is_not_the_active_controller_says_who_is(local, app, cluster, monkeypatch):
    async def not_controller(request, timeout_s=0.0, caller=None):
        raise NotControllerError(7, "http://voter-7:7070", "this node is not the active controller")

    monkeypatch.setattr(local.node, "submit", not_controller)
    body = get(local, app, "/v1/explain/brokers/3")
    assert body["state"] == "fenced"  # from the image and the log all the same
    assert (body["refusals"], body["session"]) == (None, None)
    assert body["servedBy"]["activeController"] is False
    assert body["refusalsFrom"] == (
        f"node {local.node.node_id} is not the active controller: ask node 7 at http://voter-7:7070"
    )
    part = get(local, app, "/v1/explain/partitions/orders/0")
    assert (part["refusals"], part["lastRefusedAlterPartition"]) == (None, None)
    assert part["replicaStates"][2]["rule"] == "kip-841.replica-fenced"


def test_the_look_back_reaches_into_the_history_store(tmp_path):
    """A retained log of 8 records: the broker's registration and unfencing
    are read from the history store (issue 43), with their who."""
    small = LocalNode(str(tmp_path), log_retention=8)
    try:
        small.wait_active()
        small_app = create_app(small.node)
        reg = small.request(
            small_app, "POST", "/v1/brokers/register", json=registration_body(small.cluster_id, 5)
        ).json()
        hb = {"brokerId": 5, "brokerEpoch": reg["brokerEpoch"], "currentMetadataOffset": 1 << 40}
        small.request(small_app, "POST", "/v1/brokers/heartbeat", json=hb)
        for b in range(10, 30):  # push both out of the retained log
            small.request(small_app, "POST", "/v1/brokers/register",
                          json=registration_body(small.cluster_id, b))  # fmt: skip
        assert small.node.sm.log.oldest_offset > reg["brokerEpoch"]
        deadline = time.monotonic() + 30
        while True:  # the history store writes behind the apply: wait for it
            body = small.request(small_app, "GET", "/v1/explain/brokers/5").json()
            if [e["event"] for e in body["events"]] == ["unfenced", "registered"]:
                break
            assert time.monotonic() < deadline, body
            time.sleep(0.05)
        assert body["registration"]["who"]["api"] == "RegisterBroker"
        assert body["registration"]["offset"] == reg["brokerEpoch"]
        assert body["lookBack"]["ended"] == "oldest"
    finally:
        small.close()
