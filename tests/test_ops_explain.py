"""``metaquorum explain`` against a real voter (``metaquorum serve``, a 1.5 s
broker session): a broker that stops heartbeating is fenced by session
expiry, and the explain says so with the fence's offset; a partition it
leaves under-replicated names it and the rule; the exit codes."""

import json
import time

import pytest

from metaquorum.ops_explain import target_of

from .conftest import running_cluster
from .test_cluster import register_body
from .test_ops import mq

SESSION_MS = 1500


@pytest.fixture(scope="module")
def voter(tmp_path_factory):
    root = tmp_path_factory.mktemp("ops_explain")
    with running_cluster(root, extra=["--session-timeout-ms", str(SESSION_MS)]) as c:
        yield c


def wait_for(condition, what: str, deadline_s: float = 30.0):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if (got := condition()) is not None:
            return got
        time.sleep(0.1)
    raise AssertionError(f"waited {deadline_s} s for {what}")


def test_a_broker_fenced_by_its_expired_session(voter):
    reg = voter.post(0, "/v1/brokers/register", register_body(voter, 71)).json()
    beat = {"brokerId": 71, "brokerEpoch": reg["brokerEpoch"], "currentMetadataOffset": 10**9}
    assert voter.post(0, "/v1/brokers/heartbeat", beat).json()["isFenced"] is False
    topic = {"name": "ex", "assignments": [{"partitionIndex": 0, "brokerIds": [71]}]}
    assert voter.post(0, "/v1/topics", {"topics": [topic]}).json()["topics"][0]["errorName"] == (
        "NONE"
    )

    # It beats no more: its session expires and the controller fences it.
    def fenced():
        b = voter.get(0, "/v1/brokers/71").json()
        return b if b.get("fenced") else None

    wait_for(fenced, "broker 71's session to expire and fence it")

    r = mq("explain", "broker", "71", "--json", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    fence = body["events"][0]
    assert (body["state"], fence["event"]) == ("fenced", "fenced")
    assert fence["who"]["api"] == "FenceExpiredSessions"
    assert fence["rule"] == "kip-631.session-expired"
    assert fence["cause"].startswith(f"session expired: no heartbeat within {SESSION_MS} ms")
    assert body["session"]["expiresInMs"] < 0

    r = mq("explain", "broker", "71", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("broker 71: FENCED")
    assert f"fenced since offset {fence['offset']} (" in lines[1]
    assert "session expired" in lines[1]
    assert any(line.startswith("registered at offset ") for line in lines)

    r = mq("explain", "partition", "ex", "0", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ex-0: offline")
    assert "[kip-841.replica-fenced]" in r.stdout


def test_exit_codes(voter):
    r = mq("explain", "broker", "4242", url=voter.url(0))
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "broker 4242 is not registered" in r.stderr


def test_a_target_that_does_not_parse_is_a_usage_error():
    # In process: the same ValueError run_op turns into exit 2 (INVALID_REQUEST).
    assert target_of("broker", ["7"]) == (7,)
    assert target_of("partition", ["orders", "3"]) == ("orders", 3)
    with pytest.raises(ValueError, match=r"explain partition takes 2 argument\(s\), got 1"):
        target_of("partition", ["orders"])
    with pytest.raises(ValueError, match="broker id 'x' is not a non-negative integer"):
        target_of("broker", ["x"])
    with pytest.raises(ValueError, match="partition id '-1' is not"):
        target_of("partition", ["orders", "-1"])
