"""GET /v1/what-if on a real single-voter node through the real app: the
answer for a known cluster, the cap on the partitions listed, the 400s that
name what is wrong, and that nothing is written."""

from __future__ import annotations

import pytest

RACKS = {1: "r1", 2: "r1", 3: "r2", 4: "r2"}


@pytest.fixture(scope="module")
def cluster(local, app):
    """Brokers 1-4 on racks r1 (1, 2) and r2 (3, 4), all unfenced; topic
    orders (min ISR 2): p0 on [1, 2] (r1 only), p1 on [1, 3], p2 on [3, 4]."""
    for b, rack in RACKS.items():
        local.unfenced_broker(app, b, rack=rack)
    topic = {
        "name": "orders",
        "assignments": [
            {"partitionIndex": 0, "brokerIds": [1, 2]},
            {"partitionIndex": 1, "brokerIds": [1, 3]},
            {"partitionIndex": 2, "brokerIds": [3, 4]},
        ],
        "configs": [{"name": "min.insync.replicas", "value": "2"}],
    }
    r = local.request(app, "POST", "/v1/topics", json={"topics": [topic]})
    assert r.json()["errorName"] == "NONE", r.text


def what_if(local, app, query: str, status: int = 200):
    r = local.request(app, "GET", f"/v1/what-if?{query}")
    assert r.status_code == status, r.text
    assert int(r.headers["X-Metadata-Offset"]) == local.node.image.last_offset
    return r.json()


def test_losing_a_rack(local, app, cluster):
    before = local.node.image
    body = what_if(local, app, "lose=racks:r1")
    assert body["offset"] == before.last_offset
    assert (body["lost"], body["alreadyFenced"], body["totalPartitions"]) == ([1, 2], [], 3)
    assert body["counts"] == {
        "offline": 1, "underMinIsr": 1, "leaderMoved": 0, "isrShrunk": 0, "untouched": 1,
    }  # fmt: skip
    offline, under = body["partitions"]
    assert (offline["partition"], offline["outcome"], offline["newLeader"]) == (0, "offline", -1)
    assert (under["partition"], under["outcome"], under["newLeader"]) == (1, "underMinIsr", 3)
    assert (under["isr"], under["newIsr"], under["minIsr"]) == ([1, 3], [3], 2)
    assert body["truncated"] is False
    assert local.node.image.next_offset == before.next_offset  # nothing was written
    assert not any(reg.fenced for reg in local.node.image.brokers.values())


def test_both_kinds_together_and_the_cap(local, app, cluster):
    body = what_if(local, app, "lose=brokers:4&lose=racks:r1&limit=1")
    assert body["lost"] == [1, 2, 4]
    assert body["counts"]["offline"] == 1 and body["counts"]["underMinIsr"] == 2
    assert [p["outcome"] for p in body["partitions"]] == ["offline"]
    assert body["truncated"] is True
    counts_only = what_if(local, app, "lose=brokers:3&limit=0")
    assert counts_only["counts"]["underMinIsr"] == 2  # p2 led by 4 now, p1 by 1: ISRs of one
    assert (counts_only["partitions"], counts_only["truncated"]) == ([], True)


def test_a_bad_loss_is_a_400_naming_the_problem(local, app, cluster):
    body = what_if(local, app, "lose=brokers:9,1&lose=racks:r9", status=400)
    assert body["errorName"] == "INVALID_REQUEST"
    assert "broker ids not registered: 9" in body["errorMessage"]
    assert "r9 (known racks: r1, r2)" in body["errorMessage"]
    assert "brokers:ID,ID" in what_if(local, app, "lose=hosts:1", status=400)["errorMessage"]
    r = local.request(app, "GET", "/v1/what-if")
    assert r.status_code == 400 and "lose" in r.text


def test_the_openapi_document_shows_it_with_examples(local, app, cluster):
    doc = local.request(app, "GET", "/openapi.json").json()
    op = doc["paths"]["/v1/what-if"]["get"]
    assert op["operationId"] == "whatIf"
    assert "examples" in op["responses"]["400"]["content"]["application/json"]
    assert doc["components"]["schemas"]["WhatIfOut"]["examples"]
