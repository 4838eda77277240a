"""The operator commands against a real voter (``metaquorum serve``)."""

import json
import subprocess
import sys

from .nodes import free_port


def mq(*args, url):
    return subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", *args, "--url", url],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_status_for_people_and_scripts(voter):
    r = mq("status", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    assert "leader" in r.stdout and voter.cluster_id in r.stdout
    assert "elections (pre-vote on): rounds " in r.stdout  # a lone voter wins its own
    r = mq("status", "--json", url=voter.url(0))
    body = json.loads(r.stdout)
    assert body["clusterId"] == voter.cluster_id and body["leaderId"] == 0
    elections = body["elections"]
    assert elections["preVote"] is True and elections["preVoteRoundsWon"] >= 1, elections
    assert elections["preVoteRounds"] >= elections["preVoteRoundsWon"]


def test_create_topic_then_list_it_and_read_the_log(voter):
    # A topic needs brokers: register one through the API and unfence it.
    import uuid

    reg = voter.post(
        0,
        "/v1/brokers/register",
        {
            "brokerId": 1,
            "clusterId": voter.cluster_id,
            "incarnationId": str(uuid.uuid4()),
            "listeners": [],
            "features": [
                {"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}
            ],
        },
    ).json()
    voter.post(
        0,
        "/v1/brokers/heartbeat",
        {"brokerId": 1, "brokerEpoch": reg["brokerEpoch"], "currentMetadataOffset": 10**9},
    )
    r = mq(
        "create-topic", "ops-t", "--partitions", "3", "--replication-factor", "1", url=voter.url(0)
    )
    assert r.returncode == 0, r.stderr
    assert "created topic ops-t" in r.stdout
    r = mq("create-topic", "ops-t", url=voter.url(0))
    assert r.returncode == 1 and "TOPIC_ALREADY_EXISTS" in r.stderr
    r = mq("topics", "ops-t", "--json", url=voter.url(0))
    assert len(json.loads(r.stdout)["partitions"]) == 3
    r = mq("brokers", url=voter.url(0))
    assert r.returncode == 0 and "active" in r.stdout
    r = mq("log", "--json", "--max", "1000", url=voter.url(0))
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert records[0]["offset"] == 0 and records[0]["type"] == "LEADER_CHANGE"
    assert any(rec["type"] == "TOPIC_RECORD" for rec in records)


def test_failures_are_one_clear_line(voter):
    r = mq("topics", "no-such-topic", url=voter.url(0))
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    r = mq("status", url=f"http://127.0.0.1:{free_port()}")
    assert r.returncode == 1 and r.stderr.startswith("metaquorum: UNAVAILABLE")
    r = mq("create-topic", "x", "--config", "broken", url=voter.url(0))
    assert r.returncode == 1 and "NAME=VALUE" in r.stderr
