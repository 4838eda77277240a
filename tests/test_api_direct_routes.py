"""The seam between api/direct_routes.py and FastAPI's routing: the broker
endpoints served without FastAPI's routing answer exactly as FastAPI's own
routing of the same endpoints does (status, body, headers), in FastAPI's order
(auth, then query, then body), and other methods on their paths still reach
FastAPI. The switch is ``create_app(direct_routes=False)``."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    ("POST", "/v1/alter-partition", "broker-token-5", alter_body(newIsr=[5])),  # v3 by default
    ("POST", "/v1/alter-partition?version=2", "broker-token-5", alter_body(newIsr=[5])),
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


# ---------------------------------------------------------------- any request, both apps

not_ints = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.text(max_size=4),
                     st.lists(st.integers(-9, 9), max_size=2))  # fmt: skip
odd = not_ints | st.integers(-(2**70), 2**70)
broker_ids = st.sampled_from([5, 6, -1, 2**31]) | odd
# Never broker 5's real epoch (a small offset): nothing these requests do may
# change the image, so the two apps answer against the same one.
epochs = st.sampled_from([10**12, 2**63, -(2**63) - 1]) | not_ints


MISSING = object()


def mostly(good, wrong=odd):
    """Usually ``good`` (a value or a strategy), now and then ``wrong`` or missing."""
    good = good if isinstance(good, st.SearchStrategy) else st.just(good)
    return st.integers(0, 11).flatmap(
        lambda i: good if i < 10 else (wrong if i == 10 else st.just(MISSING))
    )


def some_of(**fields):
    """An object whose fields are mostly right, and maybe an unknown one."""
    return st.fixed_dictionaries(
        {k: mostly(v, not_ints if k == "brokerEpoch" else odd) for k, v in fields.items()},
        optional={"x": odd},
    ).map(lambda d: {k: v for k, v in d.items() if v is not MISSING})


heartbeats = some_of(brokerId=broker_ids, brokerEpoch=epochs, currentMetadataOffset=0,
                     wantFence=st.booleans(), wantShutDown=st.booleans())  # fmt: skip
registrations = st.sampled_from([registration_body("not-this-cluster", 5),
                                 registration_body("other", 6)]).flatmap(
    lambda body: some_of(**body))  # fmt: skip
partitions = some_of(partitionIndex=0, leaderEpoch=0, partitionEpoch=0,
                     newIsr=st.sampled_from([[5], [5], MISSING]),
                     newIsrWithEpochs=st.sampled_from([[{"brokerId": 5}], MISSING, MISSING]),
                     leaderRecoveryState=st.sampled_from([0, 1, MISSING]))  # fmt: skip
topics = some_of(topicId=st.sampled_from(["AAAAAAAAAAAAAAAAAAAAAA", MISSING]),
                 topicName=st.sampled_from(["t", MISSING]),
                 partitions=st.lists(partitions, min_size=1, max_size=2) | st.just([]))  # fmt: skip
alter_partitions = some_of(brokerId=st.just(5) | broker_ids, brokerEpoch=epochs,
                           topics=st.lists(topics, min_size=1, max_size=2) | st.just([]))  # fmt: skip
garbage = st.one_of(
    st.sampled_from(["", "{", "[]", "null", '{"brokerId": 5, "brokerId": 6}']),
    st.binary(max_size=20).map(lambda b: b.decode("latin-1")),
)
# Each broker path mostly with its own kind of body, now and then another path.
requests = st.one_of(
    st.tuples(st.just("/v1/brokers/heartbeat"), heartbeats.map(json.dumps) | garbage),
    st.tuples(st.just("/v1/brokers/register"), registrations.map(json.dumps) | garbage),
    st.tuples(st.just("/v1/alter-partition"), alter_partitions.map(json.dumps) | garbage),
    st.tuples(st.sampled_from(["/v1/brokers/heartbeat/", "/v1/alter-partition/", "/v1/brokers"]),
              heartbeats.map(json.dumps)),
)  # fmt: skip
queries = st.sampled_from(["", "", "", "", "?version=0", "?version=1", "?version=2", "?version=3",
                           "?version=4", "?version=-1", "?version=x", "?version=1&version=2",
                           "?version=", "?other=1"])  # fmt: skip
tokens = st.sampled_from(["broker-token-5"] * 4 + [None, "admin-token", "read-token", "wrong"])
content_types = st.sampled_from(["application/json"] * 4 + ["text/plain", None])


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.sampled_from(["POST"] * 6 + ["GET", "PUT"]), requests, queries, tokens, content_types)
def test_any_request_is_answered_alike_with_direct_routes_on_and_off(
    local, apps, method, request, query, token, content_type
):
    path, body = request
    headers = {} if content_type is None else {"Content-Type": content_type}
    content = None if method == "GET" else body.encode("utf-8", "surrogatepass")
    direct, routed = (
        local.request(app, method, path + query, token=token, content=content, headers=headers)
        for app in apps
    )
    assert direct.status_code == routed.status_code, (direct.text, routed.text)
    assert direct.content == routed.content
    for header in ("content-type", "location", "retry-after", "www-authenticate", "allow"):
        assert direct.headers.get(header) == routed.headers.get(header), header


def test_validated_queries_are_kept_bounded_and_answer_alike(local, apps, monkeypatch):
    """The direct routes keep the query strings that validated; a client
    sending a new one each time cannot grow that, and each is still answered
    as FastAPI answers it."""
    from api import direct_routes

    monkeypatch.setattr(direct_routes, "_VALID_QUERIES", {})
    for i in range(direct_routes.VALID_QUERIES_KEPT + 40):
        query = f"?version={i % 5}&n={i}"  # 4 is out of range: a 400, never kept
        direct, routed = (
            local.request(app, "POST", "/v1/alter-partition" + query, token="broker-token-5",
                          json=alter_body())
            for app in apps
        )  # fmt: skip
        assert (direct.status_code, direct.content) == (routed.status_code, routed.content)
        assert len(direct_routes._VALID_QUERIES) <= direct_routes.VALID_QUERIES_KEPT
    assert all(v in (0, 1, 2, 3) for v in direct_routes._VALID_QUERIES.values())
