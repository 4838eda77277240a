"""Every error path of the HTTP contract (docs/api.md's status table), against real
nodes: 400 naming the field, 401, 403 (roles, broker binding), 404, 410, 413,
429, 503 (no leader, shutting down), and the 307/503 response builders.

307 needs a node that is not the leader but knows one; with one voter that
cannot happen honestly, so the redirect is tested here on the response builder
and end to end by the multi-voter cluster tests.
"""

from __future__ import annotations

import asyncio
import re

import orjson
import pytest
from starlette.requests import Request

from api import TokensFileError, create_app, load_tokens, parse_tokens
from api.errors import node_error_response
from quorum.history import Retention
from quorum.node_errors import (
    NotControllerError,
    OutcomeUnknownError,
    ThrottledError,
    UnavailableError,
)

from .local_node import LocalNode, registration_body
from .nodes import free_port

JSON = {"Content-Type": "application/json"}

TOKENS = """\
# metaquorum tokens: token role [brokerId]
admin-secret admin
broker-any   broker          # may act for any broker
broker-five  broker 5
reader       read
"""


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    # A tiny queue (429) and a tiny log (410); the tests are sequential otherwise.
    node = LocalNode(
        str(tmp_path_factory.mktemp("errors")),
        max_queued_requests=1,
        log_retention=8,
        history=Retention(records=16),
    )
    try:
        node.wait_active()
        yield node
    finally:
        node.close()


@pytest.fixture(scope="module")
def app(local):
    return create_app(local.node)


@pytest.fixture(scope="module")
def secured(local, tmp_path_factory):
    path = tmp_path_factory.mktemp("tokens") / "tokens"
    path.write_text(TOKENS)
    return create_app(local.node, tokens=str(path))


@pytest.fixture(scope="module")
def broker1(local, app):
    r = local.request(
        app, "POST", "/v1/brokers/register", json=registration_body(local.cluster_id, 1)
    )
    epoch = r.json()["brokerEpoch"]
    hb = {"brokerId": 1, "brokerEpoch": epoch, "currentMetadataOffset": 1 << 40}
    assert local.request(app, "POST", "/v1/brokers/heartbeat", json=hb).json()["isFenced"] is False
    return epoch


def expect(r, status, code, message_part=None):
    assert r.status_code == status, r.text
    body = r.json()
    assert body["errorCode"] == code, body
    assert set(body) >= {"errorCode", "errorName", "errorMessage"}
    if message_part is not None:
        assert message_part in body["errorMessage"], body["errorMessage"]
    return body


# ---------------------------------------------------------------- 400


def reg(local, **changes):
    body = registration_body(local.cluster_id, 50)
    body.update(changes)
    return body


BAD_BODIES = [
    ("not json", b"{nope", "body: not valid JSON"),
    ("empty", b"", "body: not valid JSON"),
    ("array", b"[]", "body: expected an object"),
    ("bool as int32", {"brokerId": True}, "brokerId: expected an integer, got boolean"),
    ("string as int32", {"brokerId": "5"}, "brokerId: expected an integer, got string"),
    ("float as int32", {"brokerId": 5.0}, "brokerId: expected an integer, got number"),
    ("int32 overflow", {"brokerId": 2**31}, "brokerId: 2147483648 is out of the int32 range"),
    ("int32 underflow", {"brokerId": -(2**31) - 1}, "is out of the int32 range"),
    (
        "int64 overflow",
        {"previousBrokerEpoch": 2**63},
        "previousBrokerEpoch: 9223372036854775808 is out of the int64 range",
    ),
    ("missing field", {"clusterId": None}, "clusterId: "),
    ("bad uuid", {"incarnationId": "not-a-uuid"}, "incarnationId: 'not-a-uuid' is not a UUID"),
    ("uuid not a string", {"incarnationId": 7}, "incarnationId: expected a string"),
    ("rack not a string", {"rack": 3}, "rack: expected a string"),
]


@pytest.mark.parametrize("name,change,message", BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_registration_bodies_are_400_naming_the_field(local, app, name, change, message):
    before = local.node.image.next_offset
    if isinstance(change, bytes):
        r = local.request(app, "POST", "/v1/brokers/register", content=change, headers=JSON)
    else:
        body = reg(local, **change)
        if change == {"clusterId": None}:
            del body["clusterId"]
        r = local.request(app, "POST", "/v1/brokers/register", json=body)
    expect(r, 400, 42, message)
    assert r.json()["errorName"] == "INVALID_REQUEST"
    assert local.node.image.next_offset == before  # nothing was written


def test_missing_field_message(local, app):
    body = reg(local)
    del body["clusterId"]
    expect(
        local.request(app, "POST", "/v1/brokers/register", json=body),
        400,
        42,
        "clusterId: required field is missing",
    )


def test_nested_ranges_name_the_path(local, app):
    listener = {"name": "L", "host": "h", "port": 70000, "securityProtocol": 0}
    r = local.request(app, "POST", "/v1/brokers/register", json=reg(local, listeners=[listener]))
    expect(r, 400, 42, "listeners[0].port: 70000 is out of the uint16 range [0, 65535]")
    listener = {"name": "L", "host": "h", "port": 1, "securityProtocol": 40000}
    r = local.request(app, "POST", "/v1/brokers/register", json=reg(local, listeners=[listener]))
    expect(r, 400, 42, "listeners[0].securityProtocol: 40000 is out of the int16 range")
    features = [
        {"name": "metadata.version", "minSupportedVersion": 1, "maxSupportedVersion": -40000}
    ]
    r = local.request(app, "POST", "/v1/brokers/register", json=reg(local, features=features))
    expect(r, 400, 42, "features[0].maxSupportedVersion:")
    hb = {"brokerId": 1, "currentMetadataOffset": 0, "wantFence": "yes"}
    expect(
        local.request(app, "POST", "/v1/brokers/heartbeat", json=hb),
        400,
        42,
        "wantFence: expected a boolean",
    )


def alter_body(topic, partition):
    return {
        "brokerId": 1,
        "brokerEpoch": 1,
        "topics": [
            {
                **topic,
                "partitions": [
                    {"partitionIndex": 0, "leaderEpoch": 0, "partitionEpoch": 0, **partition}
                ],
            }
        ],
    }


TOPIC_ID = {"topicId": "fPZv1VBsRFmnlRvmGcOW9w"}
TOPIC_NAME = {"topicName": "t"}
WITH_EPOCHS = {"newIsrWithEpochs": [{"brokerId": 1, "brokerEpoch": -1}]}
NEW_ISR = {"newIsr": [1]}
VERSION_MISMATCHES = [
    (3, TOPIC_ID, NEW_ISR, "topics[0].partitions[0].newIsr: not in AlterPartition version 3"),
    (
        3,
        TOPIC_ID,
        {},
        "topics[0].partitions[0].newIsrWithEpochs: required in AlterPartition version 3",
    ),
    (
        2,
        TOPIC_ID,
        WITH_EPOCHS,
        "topics[0].partitions[0].newIsrWithEpochs: not in AlterPartition version 2",
    ),
    (2, TOPIC_NAME, NEW_ISR, "topics[0].topicName: not in AlterPartition version 2"),
    (2, {}, NEW_ISR, "topics[0].topicId: required in AlterPartition version 2"),
    (1, TOPIC_ID, NEW_ISR, "topics[0].topicId: not in AlterPartition version 1"),
    (1, {}, NEW_ISR, "topics[0].topicName: required in AlterPartition version 1"),
    (
        0,
        TOPIC_NAME,
        {**NEW_ISR, "leaderRecoveryState": 0},
        "topics[0].partitions[0].leaderRecoveryState: not in AlterPartition version 0",
    ),
    (
        1,
        TOPIC_NAME,
        {**NEW_ISR, "leaderRecoveryState": 200},
        "topics[0].partitions[0].leaderRecoveryState: 200 is out of the int8 range",
    ),
    (3, {"topicId": "zzz"}, WITH_EPOCHS, "topics[0].topicId: 'zzz' is not a UUID"),
]


@pytest.mark.parametrize("version,topic,partition,message", VERSION_MISMATCHES)
def test_alter_partition_body_must_fit_its_version(local, app, version, topic, partition, message):
    r = local.request(
        app, "POST", f"/v1/alter-partition?version={version}", json=alter_body(topic, partition)
    )
    expect(r, 400, 42, message)


@pytest.mark.parametrize(
    "method,path,message",
    [
        ("POST", "/v1/alter-partition?version=4", "version (query parameter)"),
        ("POST", "/v1/alter-partition?version=three", "version (query parameter)"),
        ("GET", "/v1/topics?consistency=eventual", "consistency (query parameter)"),
        ("GET", "/v1/brokers?consistency=", "consistency (query parameter)"),
        ("GET", "/v1/log?maxRecords=0", "maxRecords (query parameter)"),
        ("GET", "/v1/log?waitMs=-1", "waitMs (query parameter)"),
        ("GET", "/v1/log?fromOffset=x", "fromOffset (query parameter)"),
        ("GET", "/v1/brokers/abc", "id (path parameter)"),
        ("GET", "/v1/brokers/2147483648", "id (path parameter)"),
    ],
)
def test_bad_query_and_path_values_are_400(local, app, method, path, message):
    r = local.request(
        app, method, path, json={"brokerId": 1, "topics": []} if method == "POST" else None
    )
    expect(r, 400, 42, message)


def test_types_in_admin_bodies(local, app):
    r = local.request(
        app, "POST", "/v1/topics", json={"topics": [{"name": "x", "numPartitions": "3"}]}
    )
    expect(r, 400, 42, "topics[0].numPartitions: expected an integer")
    r = local.request(
        app, "POST", "/v1/topics", json={"topics": [{"name": "x", "replicationFactor": 40000}]}
    )
    expect(r, 400, 42, "topics[0].replicationFactor: 40000 is out of the int16 range")
    r = local.request(app, "POST", "/v1/elect-leaders", json={"electionType": 300})
    expect(r, 400, 42, "electionType: 300 is out of the int8 range")
    r = local.request(
        app, "POST", "/v1/topics/x/partitions", json={"count": 2, "assignments": [["a"]]}
    )
    expect(r, 400, 42, "assignments[0].brokerIds[0]")


# ---------------------------------------------------------------- 401 / 403


def test_auth_missing_unknown_and_malformed_tokens_are_401(local, secured):
    for headers in (
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": "Basic YWRtaW4="},
        {"Authorization": "Bearer"},
    ):
        r = local.request(secured, "GET", "/v1/brokers", headers=headers)
        body = expect(r, 401, 31)
        assert body["errorName"] == "CLUSTER_AUTHORIZATION_FAILED"
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
    # Authentication comes before parsing: a bad body without a token is still 401.
    expect(local.request(secured, "POST", "/v1/topics", content=b"{bad"), 401, 31)


def test_roles(local, secured, broker1):
    def call(token, method, path, body=None):
        return local.request(secured, method, path, token=token, json=body)

    for token in ("reader", "broker-any", "broker-five", "admin-secret"):
        assert call(token, "GET", "/v1/brokers").status_code == 200
        assert call(token, "GET", "/v1/quorum/status").json()["auth"] == "on"
    create = {
        "topics": [{"name": "roles", "assignments": [{"partitionIndex": 0, "brokerIds": [1]}]}]
    }
    for token in ("reader", "broker-any", "broker-five"):
        expect(call(token, "POST", "/v1/topics", create), 403, 31, "needs the admin role")
        expect(call(token, "DELETE", "/v1/topics/roles"), 403, 31)
    expect(
        call(
            "reader", "POST", "/v1/brokers/heartbeat", {"brokerId": 1, "currentMetadataOffset": 0}
        ),
        403,
        31,
        "broker role",
    )
    assert (
        call("admin-secret", "POST", "/v1/topics", create).json()["topics"][0]["errorName"]
        == "NONE"
    )
    hb = {"brokerId": 1, "brokerEpoch": broker1, "currentMetadataOffset": 1 << 40}
    assert call("broker-any", "POST", "/v1/brokers/heartbeat", hb).json()["errorName"] == "NONE"
    assert call("admin-secret", "POST", "/v1/brokers/heartbeat", hb).json()["errorName"] == "NONE"


def test_a_bound_broker_token_acts_only_for_its_broker(local, secured):
    before = local.node.image.next_offset
    body = expect(
        local.request(
            secured,
            "POST",
            "/v1/brokers/register",
            token="broker-five",
            json=registration_body(local.cluster_id, 6),
        ),
        403,
        31,
        "may not act for broker 6",
    )
    assert body["errorName"] == "CLUSTER_AUTHORIZATION_FAILED"
    assert local.node.image.next_offset == before  # nothing was written
    hb = {"brokerId": 6, "currentMetadataOffset": 0}
    expect(
        local.request(secured, "POST", "/v1/brokers/heartbeat", token="broker-five", json=hb),
        403,
        31,
    )
    ap = {"brokerId": 6, "topics": []}
    expect(
        local.request(secured, "POST", "/v1/alter-partition", token="broker-five", json=ap), 403, 31
    )
    own = local.request(
        secured,
        "POST",
        "/v1/brokers/register",
        token="broker-five",
        json=registration_body(local.cluster_id, 5),
    )
    assert own.status_code == 200 and own.json()["errorName"] == "NONE"


def test_probes_and_metrics_need_no_token(local, secured):
    for path in ("/livez", "/readyz", "/metrics"):
        assert local.request(secured, "GET", path).status_code == 200, path


def test_tokens_file_parsing(tmp_path):
    table = parse_tokens(TOKENS)
    assert len(table) == 4
    assert table.lookup("broker-five").broker_id == 5
    assert table.lookup("admin-secret").role == "admin"
    assert table.lookup("nope") is None
    bad = {
        "t1 admin\nt2\n": "line 2: expected 'token role [brokerId]'",
        "t1 admin\n\n# c\nt2 root\n": "line 4: unknown role 'root'",
        "t1 broker five\n": "line 1: brokerId 'five' is not an integer",
        "t1 broker -3\n": "line 1: brokerId '-3'",
        "t1 read 3\n": "line 1: only a broker token can be bound",
        "t1 admin\nt1 read\n": "line 2: this token is already defined on line 1",
        "t1 a b c\n": "line 1:",
        "# nothing\n\n": "no tokens",
    }
    for text, message in bad.items():
        with pytest.raises(TokensFileError, match=re.escape(message)):
            parse_tokens(text)
    path = tmp_path / "tokens"
    path.write_text("ok admin\nbad\n")
    with pytest.raises(TokensFileError, match=re.escape(f"{path} line 2")):
        load_tokens(path)
    with pytest.raises(TokensFileError, match="cannot read"):
        load_tokens(tmp_path / "missing")


# ---------------------------------------------------------------- 404 / 405


def test_unknown_things_are_404(local, app):
    expect(local.request(app, "GET", "/v1/brokers/77"), 404, 102, "broker 77")
    expect(local.request(app, "GET", "/v1/topics/ghost"), 404, 3, "ghost")
    expect(local.request(app, "GET", "/v1/nothing-here"), 404, 42, "no such endpoint")
    expect(local.request(app, "PUT", "/v1/topics"), 405, 42, "PUT is not allowed")


# ---------------------------------------------------------------- 410


def test_log_below_the_oldest_offset_is_410(local, app, broker1):
    # The log keeps 8 records here: write enough to push offset 0 out.
    for i in range(12):
        hb = {"brokerId": 1, "brokerEpoch": broker1, "currentMetadataOffset": 1 << 40}
        create = {
            "topics": [
                {"name": f"fill-{i}", "assignments": [{"partitionIndex": 0, "brokerIds": [1]}]}
            ]
        }
        assert local.request(app, "POST", "/v1/topics", json=create).status_code == 200
        local.request(app, "POST", "/v1/brokers/heartbeat", json=hb)
    # The history (16 records) holds more than the log in memory (8): what is
    # in neither is 410, naming the oldest either holds.
    end = local.node.image.next_offset
    local.wait_until(
        lambda: local.node.history.window()[1] == end, 10, "the history at the log end"
    )
    r = local.request(app, "GET", "/v1/log?fromOffset=0")
    body = expect(r, 410, 1, "/v1/snapshot")
    assert body["errorName"] == "OFFSET_OUT_OF_RANGE"
    oldest = body["oldestOffset"]
    assert 0 < oldest < local.node.sm.log.oldest_offset
    page = local.request(app, "GET", f"/v1/log?fromOffset={oldest}").json()
    assert [r["offset"] for r in page["records"]] == list(range(oldest, end))
    assert page["oldestOffset"] == local.node.sm.log.oldest_offset  # the log in memory


# ---------------------------------------------------------------- 413


def test_body_over_the_limit_is_413(local):
    small = create_app(local.node, body_limit_bytes=1024)
    big = {"topics": [{"name": "x" * 2000}]}
    expect(local.request(small, "POST", "/v1/topics", json=big), 413, 42, "the limit is 1024 bytes")

    async def chunks():  # no Content-Length: the size is counted as it arrives
        for _ in range(10):
            yield b" " * 200

    r = local.request(small, "POST", "/v1/topics", content=chunks(), headers=JSON)
    expect(r, 413, 42, "more than 1024 bytes arrived")
    ok = local.request(small, "POST", "/v1/topics", json={"topics": []})
    assert ok.status_code == 200
    with pytest.raises(ValueError):
        create_app(local.node, body_limit_bytes=0)


# ---------------------------------------------------------------- 429


def test_admission_control_is_429_and_writes_nothing(local, app, broker1):
    names = [f"flood-{i}" for i in range(40)]

    async def flood():
        async with local.client(app) as client:
            return await asyncio.gather(
                *(
                    client.post(
                        "/v1/topics",
                        json={
                            "topics": [
                                {
                                    "name": n,
                                    "assignments": [{"partitionIndex": 0, "brokerIds": [1]}],
                                }
                            ]
                        },
                    )
                    for n in names
                )
            )

    responses = local.run(flood())
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 429}, statuses
    assert statuses.count(429) > 0 and statuses.count(200) > 0, statuses
    for name, r in zip(names, responses, strict=True):
        exists = local.request(app, "GET", f"/v1/topics/{name}").status_code == 200
        if r.status_code == 429:
            body = expect(r, 429, 89)
            assert body["errorName"] == "THROTTLING_QUOTA_EXCEEDED"
            assert int(r.headers["Retry-After"]) >= 1
            assert not exists  # nothing was written
        else:
            assert r.json()["topics"][0]["errorName"] == "NONE" and exists
    metrics = local.request(app, "GET", "/metrics").text
    throttled = [
        line
        for line in metrics.splitlines()
        if line.startswith("metaquorum_throttled_requests_total ")
    ]
    assert float(throttled[0].split()[1]) >= statuses.count(429)


# ---------------------------------------------------------------- 503


@pytest.fixture
def leaderless(tmp_path):
    """A real voter of two whose peer never starts: no majority, so no leader
    (a lone voter elects itself in its turn, within 0.1 s of starting)."""
    node = LocalNode(
        str(tmp_path / "idle"),
        other_voters={1: f"127.0.0.1:{free_port()}"},
        raft_secret="0123456789abcdef0123",
        cluster_id="leaderless",
    )
    try:
        yield node
    finally:
        node.close()


def test_no_leader_then_shutting_down_is_503(leaderless):
    app = create_app(leaderless.node)
    body = expect(
        leaderless.request(
            app, "POST", "/v1/brokers/register", json=registration_body(leaderless.cluster_id, 1)
        ),
        503,
        41,
        "no leader is known",
    )
    assert body["errorName"] == "NOT_CONTROLLER"
    r = leaderless.request(app, "POST", "/v1/topics", json={"topics": []})
    assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1
    # Local reads still answer from the image (X-Metadata-Offset says how
    # fresh); a linearizable read needs a leader.
    for path in ("/v1/brokers", "/v1/topics", "/v1/log", "/v1/snapshot"):
        r = leaderless.request(app, "GET", path)
        assert r.status_code == 200 and "X-Metadata-Offset" in r.headers, (path, r.text)
    expect(
        leaderless.request(app, "GET", "/v1/brokers?consistency=linearizable"), 503, 41, "no leader"
    )
    ready = leaderless.request(app, "GET", "/readyz")
    assert ready.status_code == 503 and ready.json()["reason"] == "no leader is known"
    assert "Retry-After" in ready.headers
    assert leaderless.request(app, "GET", "/livez").status_code == 200
    status = leaderless.request(app, "GET", "/v1/quorum/status").json()
    assert (status["leaderId"], status["active"], status["ready"]) == (None, False, False)
    # Bad requests are still 400 on a node without a leader: parsing comes first.
    expect(leaderless.request(app, "POST", "/v1/brokers/heartbeat", json={}), 400, 42)

    leaderless.stop()
    expect(
        leaderless.request(app, "POST", "/v1/topics", json={"topics": []}), 503, 41, "shutting down"
    )
    dead = leaderless.request(app, "GET", "/livez")
    assert dead.status_code == 503 and dead.json()["status"] == "dead"


# ---------------------------------------------------------------- response builders


def request_for(path: str, query: bytes = b"") -> Request:
    return Request(
        {
            "type": "http",
            "method": "POST",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query,
            "headers": [],
        }
    )


def test_not_controller_redirects_to_the_leader():
    error = NotControllerError(
        2, "http://controller-2:8080/", "this node is not the active controller"
    )
    r = node_error_response(error, request_for("/v1/alter-partition", b"version=2"))
    assert r.status_code == 307
    assert r.headers["Location"] == "http://controller-2:8080/v1/alter-partition?version=2"
    assert orjson.loads(r.body) == {
        "errorCode": 41,
        "errorName": "NOT_CONTROLLER",
        "errorMessage": "this node is not the active controller",
        "leaderId": 2,
        "leaderUrl": "http://controller-2:8080/",
    }
    plain = node_error_response(
        NotControllerError(1, "http://c1", "x"), request_for("/v1/topics/a%2Fb")
    )
    assert plain.headers["Location"] == "http://c1/v1/topics/a%2Fb"
    unknown = node_error_response(NotControllerError(1, None, "x"), request_for("/v1/topics"))
    assert unknown.status_code == 503 and "Retry-After" in unknown.headers


def test_other_node_errors():
    r = node_error_response(UnavailableError("replaying", 2.5), request_for("/v1/topics"))
    assert (r.status_code, r.headers["Retry-After"]) == (503, "3")
    assert orjson.loads(r.body)["errorCode"] == 41
    # The header has whole seconds (HTTP); the body has the exact hint.
    r = node_error_response(UnavailableError("no leader yet", 0.25), request_for("/v1/topics"))
    assert (r.headers["Retry-After"], orjson.loads(r.body)["retryAfterMs"]) == ("1", 250)
    r = node_error_response(ThrottledError("full", 0.5), request_for("/v1/topics"))
    assert (r.status_code, r.headers["Retry-After"]) == (429, "1")
    assert orjson.loads(r.body)["errorName"] == "THROTTLING_QUOTA_EXCEEDED"
    assert orjson.loads(r.body)["retryAfterMs"] == 500
    r = node_error_response(
        OutcomeUnknownError("the batch did not commit (LEADER_CHANGED)"), request_for("/v1/topics")
    )
    body = orjson.loads(r.body)
    assert (r.status_code, body["errorCode"], body["errorName"]) == (503, 7, "REQUEST_TIMED_OUT")
    assert "may still commit" in body["errorMessage"]
    assert r.headers["Retry-After"] == "1"
