"""Who changed what, through the real app (tokens and client certificates):
writes by several principals carry their who into the log, X-Request-Id is
echoed and recorded (or made by the voter), a bad one is refused with
nothing written, nothing in a request sets its principal or address, and
GET /v1/log filters by principal, API, broker, topic and time.

The client certificate reaches the scope as a real handshake leaves it there
(tests/test_tls.py checks that shape); the rest is the real app over a real
lone voter."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import pytest

from api import create_app
from api.cert_principals import CertPrincipals
from api.tls import PEER_CERT

from .local_node import registration_body
from .test_cert_principals import cert

TOKENS = """\
plain-admin-token admin
deploy.s3cr3t-value admin
read-token read
"""
ASGI_CLIENT = "127.0.0.1:123"  # the client address httpx's ASGITransport gives the scope


def with_certificate(app, name: str | None):
    """``app`` as reached over a TLS connection whose client certificate has CN ``name``."""

    async def tls_app(scope, receive, send):
        if name is not None and scope["type"] == "http":
            scope = {**scope, "extensions": {"tls": {PEER_CERT: cert(name)}}}
        await app(scope, receive, send)

    return tls_app


@pytest.fixture(scope="module")
def world(local, tmp_path_factory):
    """The app, every write of the scenario made, and the offsets it began at."""
    path = tmp_path_factory.mktemp("tokens") / "tokens"
    path.write_text(TOKENS)
    app = create_app(local.node, tokens=str(path), certificates=CertPrincipals.default())
    broker_3 = with_certificate(app, "broker-3")
    started_ms = int(time.time() * 1000)
    first = local.node.image.next_offset
    answers = {}

    def post(client_app, path, body, token=None, **headers):
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        return local.request(client_app, "POST", path, json=body, headers={**auth, **headers})

    r = post(
        broker_3,
        "/v1/brokers/register",
        registration_body(local.cluster_id, 3),
        **{"X-Request-Id": "reg-3", "X-Forwarded-For": "6.6.6.6", "X-Principal": "admin:x"},
    )
    assert r.status_code == 200, r.text
    answers["register"] = r
    epoch = r.json()["brokerEpoch"]
    r = post(
        broker_3,
        "/v1/brokers/heartbeat",
        {"brokerId": 3, "brokerEpoch": epoch, "currentMetadataOffset": 1 << 40},
    )
    assert r.status_code == 200 and r.json()["isFenced"] is False, r.text
    answers["heartbeat"] = r
    for name, token, request_id in (
        ("orders", "deploy.s3cr3t-value", "deploy-42"),
        ("audit", "plain-admin-token", None),
    ):
        headers = {"X-Request-Id": request_id} if request_id else {}
        r = post(
            app, "/v1/topics", {"topics": [{"name": name, "numPartitions": 2}]}, token, **headers
        )
        assert r.status_code == 200 and r.json()["topics"][0]["errorCode"] == 0, r.text
        answers[name] = r
    local.wait_until(lambda: local.node.image.topic_by_name("audit") is not None)
    return app, first, started_ms, answers


def read_log(local, app, token="read-token", **params):
    r = local.request(
        app, "GET", "/v1/log", params=params, headers={"Authorization": f"Bearer {token}"}
    )
    return r


def test_x_request_id_is_echoed_or_made_and_every_record_says_who(local, world):
    app, first, _, answers = world
    assert answers["register"].headers["X-Request-Id"] == "reg-3"
    assert answers["orders"].headers["X-Request-Id"] == "deploy-42"
    made = answers["heartbeat"].headers["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f]{12}-[0-9a-f]+", made), made
    assert answers["audit"].headers["X-Request-Id"] != made
    r = read_log(local, app, fromOffset=first)
    assert r.status_code == 200 and "X-Request-Id" in r.headers  # reads carry one too
    records = r.json()["records"]
    assert records and all("who" in rec for rec in records)
    register = next(rec for rec in records if rec["type"] == "REGISTER_BROKER_RECORD")
    # Nothing the request said about itself: not X-Forwarded-For, not X-Principal.
    assert register["who"] == {
        "principal": "broker:cert/CN=broker-3",
        "api": "RegisterBroker",
        "address": ASGI_CLIENT,
        "requestId": "reg-3",
    }
    change = next(rec for rec in records if rec["type"] == "BROKER_REGISTRATION_CHANGE_RECORD")
    assert change["who"]["api"] == "BrokerHeartbeat" and change["who"]["requestId"] == made
    orders = next(rec for rec in records if rec["data"].get("name") == "orders")
    assert orders["who"] == {
        "principal": "admin:token/deploy",
        "api": "CreateTopics",
        "address": ASGI_CLIENT,
        "requestId": "deploy-42",
    }
    audit = next(rec for rec in records if rec["data"].get("name") == "audit")
    assert audit["who"]["principal"] == "admin:token/line-1"
    assert audit["who"]["requestId"] == answers["audit"].headers["X-Request-Id"]
    # Never any part of a secret, in JSON or NDJSON.
    ndjson = local.request(
        app,
        "GET",
        "/v1/log",
        params={"fromOffset": first},
        headers={"Authorization": "Bearer read-token", "Accept": "application/x-ndjson"},
    )
    for text in (r.text, ndjson.text):
        assert "s3cr3t" not in text and "plain-admin-token" not in text
    assert ndjson.text.count('"who"') == len(records)


@pytest.mark.parametrize(
    "value,named",
    [
        ("x" * 65, "X-Request-Id is 65 bytes, more than 64"),
        ("caf\u00e9", "not printable ASCII"),
        ("tab\there", "not printable ASCII"),
    ],
)
def test_a_bad_x_request_id_is_refused_and_nothing_is_written(local, world, value, named):
    app = world[0]
    before = local.node.image.next_offset
    r = local.request(
        app,
        "POST",
        "/v1/topics",
        json={"topics": [{"name": "refused"}]},
        headers={"Authorization": "Bearer plain-admin-token", "X-Request-Id": value.encode()},
    )
    assert r.status_code == 400 and named in r.json()["errorMessage"], r.text
    assert local.node.image.next_offset == before
    assert local.node.image.topic_by_name("refused") is None


def offsets(response) -> list[int]:
    assert response.status_code == 200, response.text
    return [rec["offset"] for rec in response.json()["records"]]


def test_the_log_filters_by_principal_api_broker_topic_and_time(local, world):
    app, first, started_ms, _ = world
    everything = read_log(local, app, fromOffset=first).json()["records"]
    by_offset = {rec["offset"]: rec for rec in everything}

    def expect(predicate) -> list[int]:
        return [o for o, rec in by_offset.items() if predicate(rec)]

    broker = read_log(local, app, fromOffset=first, principal="broker:cert/CN=broker-3")
    assert offsets(broker) == expect(lambda r: r["who"]["principal"].startswith("broker:"))
    assert offsets(broker)
    creates = read_log(local, app, fromOffset=first, api="CreateTopics")
    assert offsets(creates) == expect(lambda r: r["who"]["api"] == "CreateTopics")
    both = read_log(
        local, app, fromOffset=first, api="CreateTopics", principal="admin:token/deploy"
    )
    assert offsets(both) == expect(lambda r: r["who"]["requestId"] == "deploy-42")
    orders = read_log(local, app, fromOffset=first, topic="orders")
    assert offsets(orders) == expect(lambda r: r["who"]["requestId"] == "deploy-42")
    assert len(offsets(orders)) == 3  # its TOPIC_RECORD and two partitions
    named_3 = read_log(local, app, fromOffset=first, brokerId=3).json()["records"]
    types = {rec["type"] for rec in named_3}
    assert {"REGISTER_BROKER_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD"} <= types
    assert "PARTITION_RECORD" in types  # the only broker: every partition's replica
    assert "TOPIC_RECORD" not in types
    assert offsets(read_log(local, app, fromOffset=first, brokerId=4)) == []
    since = datetime.fromtimestamp(started_ms / 1000 - 1, UTC).isoformat()
    assert offsets(read_log(local, app, fromOffset=first, since=since)) == sorted(by_offset)
    assert offsets(read_log(local, app, fromOffset=first, until=str(started_ms - 1000))) == []
    # A page: maxRecords matches, nextOffset past the last one to go on from.
    page = read_log(local, app, fromOffset=first, api="CreateTopics", maxRecords=2).json()
    assert [r["offset"] for r in page["records"]] == offsets(creates)[:2]
    assert page["nextOffset"] == offsets(creates)[1] + 1
    rest = read_log(local, app, fromOffset=page["nextOffset"], api="CreateTopics")
    assert offsets(rest) == offsets(creates)[2:]


@pytest.mark.parametrize(
    "params,named",
    [
        ({"principal": "kafka-3"}, "principal='kafka-3' is no principal"),
        ({"api": "AlterPartitions"}, "api='AlterPartitions' is not an API the log names"),
        ({"topic": "a/b"}, "topic: "),
        ({"since": "yesterday"}, "since='yesterday' is neither an ISO-8601 time"),
        ({"since": "2026-12-04T03:00:00Z", "until": "2026-12-04T02:00:00Z"}, "is not after"),
        ({"brokerId": "-1"}, "brokerId"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(local, world, params, named):
    r = read_log(local, world[0], **params)
    assert r.status_code == 400 and named in r.text, r.text
