"""api/direct_routes.py: the broker endpoints served without FastAPI's routing
answer exactly as FastAPI's own routing of the same endpoints does (status,
body, headers), in FastAPI's order (auth, then query, then body), and other
methods on their paths still reach FastAPI."""

import pytest

from api import create_app

from .local_node import registration_body

TOKENS = """\
admin-token admin
broker-token-5 broker 5
read-token read
"""


@pytest.fixture(scope="module")
def apps(local, tmp_path_factory):
    path = tmp_path_factory.mktemp("tokens") / "tokens"
    path.write_text(TOKENS)
    return (
        create_app(local.node, tokens=str(path)),
        create_app(local.node, tokens=str(path), direct_routes=False),
    )


def alter_body(broker_id=5, **partition):
    return {
        "brokerId": broker_id,
        "brokerEpoch": 1,
        "topics": [
            {
                "topicId": "AAAAAAAAAAAAAAAAAAAAAA",
                "partitions": [
                    {"partitionIndex": 0, "leaderEpoch": 0, "partitionEpoch": 0, **partition}
                ],
            }
        ],
    }


HEARTBEAT = {"brokerId": 5, "brokerEpoch": 3, "currentMetadataOffset": 0}

CASES = [
    # (method, url, token, body: json object or raw bytes)
    ("POST", "/v1/brokers/heartbeat", None, HEARTBEAT),
    ("POST", "/v1/brokers/heartbeat", "read-token", HEARTBEAT),
    ("POST", "/v1/brokers/heartbeat", "broker-token-5", {**HEARTBEAT, "brokerId": 6}),
    ("POST", "/v1/brokers/heartbeat", "broker-token-5", HEARTBEAT),  # not registered
    ("POST", "/v1/brokers/heartbeat", "admin-token", b"{not json"),
    ("POST", "/v1/brokers/heartbeat", "admin-token", {**HEARTBEAT, "brokerEpoch": "x"}),
    ("POST", "/v1/brokers/heartbeat", "admin-token", b""),
    ("POST", "/v1/alter-partition?version=9", None, alter_body()),  # auth comes first
    ("POST", "/v1/alter-partition?version=9", "broker-token-5", alter_body()),
    ("POST", "/v1/alter-partition?version=three", "broker-token-5", alter_body()),
    ("POST", "/v1/alter-partition?version=-1", "broker-token-5", alter_body()),
    ("POST", "/v1/alter-partition?version=three&version=3", "broker-token-5", alter_body()),
    ("POST", "/v1/alter-partition?version=1", "broker-token-5", alter_body(newIsr=[5])),
    ("POST", "/v1/alter-partition?version=1", "broker-token-5",
     alter_body(newIsrWithEpochs=[{"brokerId": 5, "brokerEpoch": 1}])),  # a v3 field on v1
    ("POST", "/v1/alter-partition", "broker-token-5", alter_body(broker_id=7)),
    ("POST", "/v1/brokers/register", "broker-token-5",
     registration_body("not-this-cluster", 5)),
    ("POST", "/v1/brokers/register", "broker-token-5", registration_body("c", 8)),
    ("POST", "/v1/brokers/register", "read-token", registration_body("c", 5)),
    ("GET", "/v1/brokers/heartbeat", "admin-token", None),  # 405, FastAPI's
    ("PUT", "/v1/alter-partition", "admin-token", alter_body()),
    ("POST", "/v1/brokers/heartbeat/", "admin-token", HEARTBEAT),  # not the path
]  # fmt: skip


def send(local, app, method, url, token, body):
    kwargs = {}
    if isinstance(body, bytes):
        kwargs = {"content": body, "headers": {"Content-Type": "application/json"}}
    elif body is not None:
        kwargs = {"json": body}
    return local.request(app, method, url, token=token, **kwargs)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]} {c[1]} {c[2]}")
def test_direct_routes_answer_as_fastapi_does(local, apps, case):
    direct, routed = (send(local, app, *case) for app in apps)
    assert direct.status_code == routed.status_code, (direct.text, routed.text)
    assert direct.content == routed.content
    for header in ("content-type", "location", "retry-after", "www-authenticate"):
        assert direct.headers.get(header) == routed.headers.get(header), header


def test_a_successful_broker_write_answers_alike_and_is_timed_under_its_route(local, apps):
    direct, routed = apps
    body = registration_body(local.cluster_id, 5)
    first = send(local, direct, "POST", "/v1/brokers/register", "broker-token-5", body)
    again = send(local, routed, "POST", "/v1/brokers/register", "broker-token-5", body)
    assert first.status_code == again.status_code == 200
    # The same incarnation again (a retried registration) is accepted as well.
    assert first.json()["errorName"] == again.json()["errorName"] == "NONE", again.text
    metrics = send(local, direct, "GET", "/metrics", None, None).text
    assert 'route="/v1/brokers/register"' in metrics
