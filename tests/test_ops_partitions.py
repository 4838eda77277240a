"""``metaquorum reassignments``, ``elect-leaders``, ``delete-topics`` and
``describe-features`` against a real voter (``metaquorum serve``): what they
print (Kafka's tools' words), their --json and their exit codes."""

import json

from .test_cluster import register_body
from .test_ops import mq
from .test_ops_what_if import live_brokers  # noqa: F401 - a fixture: brokers 81, 82; topics wi, wj


def test_describe_features_prints_what_kafka_features_prints(voter):
    r = mq("describe-features", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    mv = next(line for line in lines if line.startswith("Feature: metadata.version\t"))
    assert mv.split("\t")[1:4] == [
        "SupportedMinVersion: 3.3-IV2",
        "SupportedMaxVersion: 3.6-IV0",
        "FinalizedVersionLevel: 3.6-IV0",
    ]
    assert any(line.startswith("Feature: kraft.version\t") and
               "FinalizedVersionLevel: 1\t" in line for line in lines), lines  # fmt: skip
    assert mv.split("\t")[4].startswith("Epoch: ")
    body = json.loads(mq("describe-features", "--json", url=voter.url(0)).stdout)
    assert "metadata.version" in {f["name"] for f in body["features"]}


def test_reassignments_and_elections(voter, live_brokers, tmp_path):  # noqa: F811
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "wi", "partition": 0, "replicas": [82], "log_dirs": ["any"]}]}))  # fmt: skip
    r = mq("reassignments", "execute", str(plan), url=voter.url(0))
    assert (r.returncode, r.stdout) == (
        0,
        "Successfully started partition reassignments for wi-0\n",
    )
    # Broker 82 fetches nothing here: the reassignment stays in progress.
    r = mq("reassignments", "list", url=voter.url(0))
    assert r.stdout == (
        "Current partition reassignments:\nwi-0: replicas: 82,81. adding: 82. removing: 81.\n"
    ), r.stderr
    r = mq("reassignments", "list", "--topic", "wj", "--topic", "nope", url=voter.url(0))
    assert r.stdout == "No partition reassignments found.\nNot found: nope\n", r.stderr
    listed = json.loads(mq("reassignments", "list", "--json", url=voter.url(0)).stdout)
    assert listed["topics"][0]["partitions"][0]["addingReplicas"] == [82]
    r = mq("reassignments", "cancel", str(plan), url=voter.url(0))
    assert (r.returncode, r.stdout) == (
        0,
        "Successfully cancelled partition reassignments for wi-0\n",
    )
    r = mq("reassignments", "cancel", str(plan), url=voter.url(0))
    assert r.returncode == 1 and "wi-0: NO_REASSIGNMENT_IN_PROGRESS" in r.stdout, r.stdout
    assert "1 partition(s) refused" in r.stderr

    r = mq("elect-leaders", "--election-type", "preferred", "--topic", "wj:0", url=voter.url(0))
    assert (r.returncode, r.stdout) == (0, "Valid replica already elected for partitions wj-0\n")
    r = mq("elect-leaders", "--election-type", "preferred", "--topic", "wj:7", url=voter.url(0))
    assert r.returncode == 1 and "Election failed for wj-7: UNKNOWN_TOPIC_OR_PARTITION" in r.stdout


def test_a_bad_reassignment_file_is_named_and_nothing_is_sent(voter, tmp_path):
    cases = {
        "not json": "not JSON",
        '{"version": 1}': 'no "partitions" list',
        '{"version": 2, "partitions": []}': "only version 1",
        '{"partitions": [{"topic": "wi", "partition": -1, "replicas": [1]}]}': "partitions[0]",
        '{"partitions": [{"topic": "wi", "partition": 0, "replicas": []}]}': '"replicas"',
    }
    for i, (text, named) in enumerate(cases.items()):
        plan = tmp_path / f"bad-{i}.json"
        plan.write_text(text)
        r = mq("reassignments", "execute", str(plan), url=voter.url(0))
        assert r.returncode == 2 and named in r.stderr and str(plan) in r.stderr, (text, r.stderr)
    r = mq("reassignments", "execute", url=voter.url(0))
    assert r.returncode == 2 and "needs the reassignment FILE" in r.stderr, r.stderr


def test_a_bad_election_target_is_named(voter):
    r = mq("elect-leaders", "--election-type", "preferred", "--topic", "wj", url=voter.url(0))
    assert r.returncode == 2 and "NAME:PARTITION" in r.stderr, r.stderr


def test_delete_topics_by_several_names(voter):
    epoch = voter.post(0, "/v1/brokers/register", register_body(voter, 91)).json()["brokerEpoch"]
    beat = {"brokerId": 91, "brokerEpoch": epoch, "currentMetadataOffset": 10**9}
    assert voter.post(0, "/v1/brokers/heartbeat", beat).json()["isFenced"] is False
    for name in ("dx1", "dx2"):
        r = voter.post(0, "/v1/topics", {"topics": [{"name": name, "assignments": [
            {"partitionIndex": 0, "brokerIds": [91]}]}]})  # fmt: skip
        assert r.json()["topics"][0]["errorName"] == "NONE", r.text
    r = mq("delete-topics", "dx1", "nope", "dx2", url=voter.url(0))
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("deleted topic dx1 (") and lines[2].startswith("deleted topic dx2 (")
    assert lines[1] == "not deleted nope: UNKNOWN_TOPIC_OR_PARTITION: Topic 'nope' does not exist."
    assert "1 of 3 topic(s) not deleted" in r.stderr
    remaining = {t["name"] for t in voter.get(0, "/v1/topics").json()["topics"]}
    assert not {"dx1", "dx2"} & remaining
