"""IncrementalAlterConfigs and DescribeConfigs over HTTP against a real
single-voter node (docs/api-additions.md)."""

from __future__ import annotations

import pytest

from .test_api_admin import brokers, post  # noqa: F401 (a module fixture)


@pytest.fixture(scope="module")
def orders(local, app, brokers):  # noqa: F811
    post(local, app, "/v1/topics", {"topics": [{"name": "orders", "numPartitions": 2}]})
    return "orders"


def alter(local, app, *resources, validate_only=False):
    body = post(
        local, app, "/v1/configs", {"resources": list(resources), "validateOnly": validate_only}
    )
    assert (body["errorCode"], body["throttleTimeMs"]) == (0, 0)
    return [
        (r["resourceType"], r["resourceName"], r["errorName"], r["errorMessage"])
        for r in body["responses"]
    ]


def resource(kind, name, *changes):
    return {
        "resourceType": kind,
        "resourceName": name,
        "configs": [{"name": n, "configOperation": op, "value": v} for n, op, v in changes],
    }


def describe(local, app, path, **params):
    r = local.request(app, "GET", f"/v1/configs/{path}", params=params)
    assert r.status_code == 200, r.text
    assert int(r.headers["X-Metadata-Offset"]) >= 0
    return r.json()


def by_name(body):
    return {c["name"]: c for c in body["configs"]}


def test_a_topic_config_set_then_described_with_its_source(local, app, orders):
    assert alter(local, app, resource(2, orders, ("retention.ms", 0, "3600000"))) == [
        (2, "orders", "NONE", None)
    ]
    body = describe(local, app, "topics/orders")
    assert (body["resourceType"], body["resourceName"]) == (2, "orders")
    configs = by_name(body)
    assert len(configs) == 33
    retention = configs["retention.ms"]
    assert (retention["value"], retention["configSourceName"], retention["configSource"]) == (
        "3600000",
        "TOPIC_CONFIG",
        1,
    )
    assert (retention["configTypeName"], retention["synonyms"]) == ("LONG", [])
    assert configs["cleanup.policy"]["configSourceName"] == "DEFAULT_CONFIG"
    # The topic read shows what is set on it.
    topic = local.request(app, "GET", "/v1/topics/orders").json()
    assert {"name": "retention.ms", "value": "3600000"} in topic["configs"]


def test_the_cluster_default_reaches_every_topic_through_its_broker_synonym(local, app, orders):
    assert alter(local, app, resource(4, "", ("log.segment.bytes", 0, "2097152"))) == [
        (4, "", "NONE", None)
    ]
    segment = by_name(describe(local, app, "topics/orders", includeSynonyms="true"))[
        "segment.bytes"
    ]
    assert (segment["value"], segment["configSourceName"]) == (
        "2097152",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
    )
    assert [(s["name"], s["value"], s["sourceName"]) for s in segment["synonyms"]] == [
        ("log.segment.bytes", "2097152", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("segment.bytes", "1073741824", "DEFAULT_CONFIG"),
    ]
    cluster = describe(local, app, "cluster")
    assert (cluster["resourceType"], cluster["resourceName"]) == (4, "")
    assert [(c["name"], c["value"]) for c in cluster["configs"]] == [
        ("log.segment.bytes", "2097152")
    ]
    only = describe(local, app, "topics/orders", configurationKeys=["segment.bytes", "preallocate"])
    assert sorted(by_name(only)) == ["preallocate", "segment.bytes"]


def test_a_broker_resolves_its_own_then_the_cluster_default(local, app, brokers):  # noqa: F811
    alter(
        local,
        app,
        resource(4, "", ("num.io.threads", 0, "12")),
        resource(4, "2", ("num.io.threads", 0, "16"), ("my.plugin", 0, "on")),
    )
    two = by_name(describe(local, app, "brokers/2"))
    assert (two["num.io.threads"]["value"], two["num.io.threads"]["configSourceName"]) == (
        "16",
        "DYNAMIC_BROKER_CONFIG",
    )
    # A custom config's type is unknown, so it may hold a secret: shown as Kafka shows it.
    plugin = two["my.plugin"]
    assert (plugin["value"], plugin["isSensitive"], plugin["configTypeName"]) == (
        None,
        True,
        "UNKNOWN",
    )
    assert not two["num.io.threads"]["isSensitive"]
    three = by_name(describe(local, app, "brokers/3"))
    assert three["num.io.threads"]["configSourceName"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    assert three["num.network.threads"]["configSourceName"] == "DEFAULT_CONFIG"
    # Configs may wait for a broker that has not registered yet.
    assert describe(local, app, "brokers/99")["resourceName"] == "99"


def test_refusals_are_per_resource_and_write_nothing(local, app, orders):
    before = local.node.image.next_offset
    answers = alter(
        local,
        app,
        resource(2, "orders", ("retention.ms", 0, "1"), ("segment.ms", 0, "0")),
        resource(2, "nope", ("retention.ms", 0, "1")),
        resource(4, "x", ("num.io.threads", 0, "1")),
        resource(2, "orders", ("preallocate", 0, "true")),
    )
    assert answers == [
        (2, "orders", "INVALID_REQUEST", "Duplicate resource."),
        (2, "nope", "UNKNOWN_TOPIC_OR_PARTITION", "The topic 'nope' does not exist."),
        (4, "x", "INVALID_REQUEST", "Unable to parse broker name x"),
    ]
    assert local.node.image.next_offset == before


def test_validate_only_writes_nothing(local, app, orders):
    before = local.node.image.next_offset
    assert alter(local, app, resource(2, "orders", ("segment.ms", 0, "0")), validate_only=True) == [
        (
            2,
            "orders",
            "INVALID_CONFIG",
            "Invalid value 0 for configuration segment.ms: Value must be at least 1",
        )
    ]
    assert (
        alter(local, app, resource(2, "orders", ("segment.ms", 0, "5")), validate_only=True)[0][2]
        == "NONE"
    )
    assert local.node.image.next_offset == before
    assert (
        by_name(describe(local, app, "topics/orders"))["segment.ms"]["configSourceName"]
        == "DEFAULT_CONFIG"
    )


@pytest.mark.parametrize(
    "method, path, body, status, needle",
    [
        ("GET", "/v1/configs/topics/nope", None, 404, "topic 'nope' does not exist"),
        ("GET", "/v1/configs/brokers/-1", None, 400, "id"),
        ("GET", "/v1/configs/brokers/x", None, 400, "id"),
        ("POST", "/v1/configs", {"resources": [{"resourceType": 2, "resourceName": "orders"}]}, 400, "configs"),
        ("POST", "/v1/configs", {"resources": [{"resourceType": 300, "resourceName": "o", "configs": []}]}, 400, "resourceType"),
        ("POST", "/v1/configs", {"resources": [resource(2, "orders", ("x", 0, "v" * 4097))]}, 400, "value"),
        ("POST", "/v1/configs", {"resources": [resource(2, "o", ("x", 0, "1"))] * 101}, 400, "resources"),
    ],
)  # fmt: skip
def test_bad_requests_name_the_field(local, app, orders, method, path, body, status, needle):
    r = local.request(app, method, path, json=body)
    assert r.status_code == status, r.text
    assert r.json()["errorName"] in ("INVALID_REQUEST", "UNKNOWN_TOPIC_OR_PARTITION")
    assert needle in r.json()["errorMessage"]


def test_the_snapshot_carries_broker_configs(local, app, orders):
    alter(local, app, resource(4, "", ("log.retention.hours", 0, "48")))
    records = local.request(app, "GET", "/v1/snapshot").json()["records"]
    configs = [
        r for r in records if r["type"] == "CONFIG_RECORD" and r["data"]["resourceType"] == 4
    ]
    assert {
        "resourceType": 4,
        "resourceName": "",
        "name": "log.retention.hours",
        "value": "48",
    } in [r["data"] for r in configs]
