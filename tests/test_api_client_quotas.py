"""AlterClientQuotas and DescribeClientQuotas over HTTP against a real
single-voter node (docs/api-additions.md; the client's calls are in
tests/test_e2e.py)."""

from __future__ import annotations

import pytest

from .test_api_admin import post


def comp(entity_type, name):
    return {"entityType": entity_type, "entityName": name}


def alter(local, app, *entries, validate_only=False):
    body = post(
        local, app, "/v1/client-quotas", {"entries": list(entries), "validateOnly": validate_only}
    )
    assert (body["errorCode"], body["throttleTimeMs"]) == (0, 0)
    return [
        (
            [(c["entityType"], c["entityName"]) for c in e["entity"]],
            e["errorName"],
            e["errorMessage"],
        )
        for e in body["entries"]
    ]


def entry(components, **ops):
    return {
        "entity": [comp(t, n) for t, n in components],
        "ops": [
            {"key": k, "remove": True} if v is None else {"key": k, "value": v}
            for k, v in ops.items()
        ],
    }


def describe(local, app, status=200, **params):
    r = local.request(app, "GET", "/v1/client-quotas", params=params)
    assert r.status_code == status, r.text
    if status == 200:
        assert int(r.headers["X-Metadata-Offset"]) >= 0
    return r.json()


def entities(body):
    return {
        tuple((c["entityType"], c["entityName"]) for c in e["entity"]): {
            v["key"]: v["value"] for v in e["values"]
        }
        for e in body["entries"]
    }


@pytest.fixture(scope="module")
def quotas(local, app):
    answers = alter(
        local,
        app,
        entry([("user", "alice")], producer_byte_rate=1024),
        entry([("user", "alice"), ("client-id", None)], consumer_byte_rate=2048),
        entry([("user", None)], request_percentage=50.5),
        entry([("client-id", "app")], controller_mutation_rate=10),
        entry([("ip", "10.0.0.1")], connection_creation_rate=100),
        entry([("ip", None)], connection_creation_rate=20),
    )
    assert {name for _, name, _ in answers} == {"NONE"}
    return answers


def test_every_filter_kind(local, app, quotas):
    assert entities(describe(local, app, user="alice")) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0},
        (("user", "alice"), ("client-id", None)): {"consumer_byte_rate": 2048.0},
    }
    assert entities(describe(local, app, user="alice", strict="true")) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0}
    }
    assert entities(describe(local, app, userDefault="true")) == {
        (("user", None),): {"request_percentage": 50.5}
    }
    assert list(entities(describe(local, app, anyUser="true", clientIdDefault="true"))) == [
        (("user", "alice"), ("client-id", None))
    ]
    assert list(entities(describe(local, app, anyClientId="true"))) == [
        (("user", "alice"), ("client-id", None)),
        (("client-id", "app"),),
    ]
    assert list(entities(describe(local, app, anyIp="true"))) == [
        (("ip", None),),
        (("ip", "10.0.0.1"),),
    ]
    assert len(describe(local, app)["entries"]) == 6
    assert describe(local, app, strict="true")["entries"] == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"user": "a", "userDefault": "true"}, "Entity type user cannot appear more than once"),
        ({"anyIp": "true", "user": "a"}, "Invalid entity filter component combination"),
    ],
)
def test_a_bad_filter_is_400_naming_it(local, app, params, message):
    body = describe(local, app, status=400, **params)
    assert body["errorName"] == "INVALID_REQUEST" and body["errorMessage"].startswith(message)


def test_refusals_per_entity_and_validate_only(local, app, quotas):
    before = describe(local, app)
    answers = alter(
        local,
        app,
        entry([("user", "bob")], producer_byte_rate=1.5),
        entry([("group", "g")], producer_byte_rate=1),
        entry([("ip", "not-an-ip")], connection_creation_rate=1),
        entry([("user", "carol")], producer_byte_rate=10),
        validate_only=True,
    )
    assert answers == [
        ([("user", "bob")], "INVALID_REQUEST", "producer_byte_rate cannot be a fractional value."),
        ([("group", "g")], "INVALID_REQUEST", "Unhandled client quota entity type: group"),
        (
            [("ip", "not-an-ip")],
            "INVALID_REQUEST",
            "not-an-ip is not a valid IP or resolvable host.",
        ),
        ([("user", "carol")], "NONE", None),
    ]
    assert describe(local, app)["entries"] == before["entries"]


def test_remove_then_the_entity_is_gone(local, app, quotas):
    alter(local, app, entry([("client-id", "gone")], producer_byte_rate=5))
    assert entities(describe(local, app, clientId="gone")) == {
        (("client-id", "gone"),): {"producer_byte_rate": 5.0}
    }
    assert alter(local, app, entry([("client-id", "gone")], producer_byte_rate=None)) == [
        ([("client-id", "gone")], "NONE", None)
    ]
    assert describe(local, app, clientId="gone")["entries"] == []


@pytest.mark.parametrize(
    "body",
    [
        {"entries": [{"entity": [comp("user", "a")], "ops": [{"key": "k", "value": "1"}]}]},
        {"entries": [{"entity": [comp("user", "a")], "ops": [{"key": "k", "remove": 1}]}]},
        {"entries": [{"entity": [{"entityName": "a"}], "ops": []}]},
        {"entries": [{"entity": [comp("user", "a")]}]},
    ],
)
def test_malformed_bodies_are_400(local, app, body):
    r = local.request(app, "POST", "/v1/client-quotas", json=body)
    assert r.status_code == 400 and r.json()["errorName"] == "INVALID_REQUEST", r.text


def test_the_snapshot_carries_the_quotas(local, app, quotas):
    """GET /v1/snapshot's records (api/reads.snapshot_records) rebuild every
    quota; the image's own encoding round-trips them too."""
    from api.reads import snapshot_records
    from metadata_records.delta import apply_records
    from metadata_records.image import EMPTY_IMAGE
    from metadata_records.snapshot import decode_image, encode_image

    image = local.node.image
    assert image.client_quotas
    rebuilt = apply_records(EMPTY_IMAGE, snapshot_records(image))
    assert rebuilt.client_quotas == image.client_quotas
    assert decode_image(encode_image(image)).client_quotas == image.client_quotas
