"""The operator commands against a real voter (``metaquorum serve``):
what they print for people and scripts, and their exit codes (docs/cli.md)."""

import json
import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest

from .conftest import running_cluster
from .nodes import free_port
from .test_cluster import register_body

ESC = "\x1b"


def mq(*args, url, env=None):
    return subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", *args, "--url", url],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def on_a_terminal(*args, url, **env) -> str:
    """What ``metaquorum ARGS`` prints with a pseudo-terminal as stdout."""
    main, child = pty.openpty()
    inherited = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    environment = {**inherited, "TERM": "xterm-256color", "COLUMNS": "200", **env}
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaquorum.cli", *args, "--url", url],
        stdout=child,
        stderr=subprocess.PIPE,
        env=environment,
    )
    os.close(child)
    out = b""
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
        os.close(main)
    return out.decode()


def test_status_for_people_and_scripts(voter):
    r = mq("status", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    assert "leader" in r.stdout and voter.cluster_id in r.stdout
    assert "elections (pre-vote on): rounds " in r.stdout  # a lone voter wins its own
    assert "leaderships won by node 0 (oldest first):" in r.stdout, r.stdout
    assert "  term 1 won " in r.stdout and "since it stood (no leader heard): elected " in r.stdout
    r = mq("status", "--json", url=voter.url(0))
    assert r.returncode == 0 and r.stderr == ""
    body = json.loads(r.stdout)
    assert body["clusterId"] == voter.cluster_id and body["leaderId"] == 0
    assert "leaderStatus" not in body  # the node at --url leads: one answer read
    elections = body["elections"]
    assert elections["preVote"] is True and elections["preVoteRoundsWon"] >= 1, elections
    assert elections["preVoteRounds"] >= elections["preVoteRoundsWon"]
    (won,) = elections["leadershipsWon"]  # its bootstrap records are its first write
    assert won["term"] == 1 and won["previousLeaderId"] is None, won
    assert won["electedMs"] <= won["activeMs"] <= won["firstWriteMs"], won
    (me,) = body["voters"]
    assert me["logEndOffset"] == body["highWatermark"] and me["lagRecords"] == 0
    assert me["lastFetchMs"] is not None and me["directoryId"] == body["directoryId"]


def kafka_status(stdout: str) -> dict[str, str]:
    """The ``Name:  value`` lines of kafka-metadata-quorum describe --status."""
    fields = {}
    for line in stdout.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.isalpha() and name[0].isupper():
            fields[name] = value.strip()
    return fields


def replication_rows(stdout: str) -> list[dict[str, str]]:
    """The --replication table, split on whitespace (plain output keeps one row a line)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("NodeId "))
    headers = lines[start].split()
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = line.split()
        assert len(cells) == len(headers), line
        rows.append(dict(zip(headers, cells, strict=True)))
    return rows


def test_status_shows_what_kafka_metadata_quorum_describe_shows(voter):
    r = mq("status", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    assert ESC not in r.stdout and "\u2501" not in r.stdout  # a pipe: no escapes, no boxes
    status = kafka_status(r.stdout)
    body = json.loads(mq("status", "--json", url=voter.url(0)).stdout)
    assert status["ClusterId"] == voter.cluster_id and status["LeaderId"] == "0"
    assert int(status["LeaderEpoch"]) == body["raftTerm"] >= 1
    assert int(status["HighWatermark"]) >= 1  # at least the LEADER_CHANGE
    assert status["MaxFollowerLag"] == "0" and status["MaxFollowerLagTimeMs"] == "0"
    (voter_entry,) = json.loads(status["CurrentVoters"])
    assert voter_entry["id"] == 0 and voter_entry["directoryId"] == body["directoryId"]
    assert voter_entry["endpoints"] == [voter.url(0), f"raft://{body['voters'][0]['raftAddress']}"]
    assert json.loads(status["CurrentObservers"]) == []
    (row,) = replication_rows(r.stdout)
    assert row["NodeId"] == "0" and row["Status"] == "Leader" and row["Lag"] == "0"
    assert row["DirectoryId"] == body["directoryId"]
    assert int(row["LogEndOffset"]) >= int(status["HighWatermark"])
    now_ms = time.time() * 1000
    for column in ("LastFetchTimestamp", "LastCaughtUpTimestamp"):
        assert now_ms - 600_000 < int(row[column]) <= now_ms, row  # epoch ms, as Kafka
    r = mq("status", "--human-readable", url=voter.url(0))
    assert re.search(r" \d+ ms ago +\d+ ms ago +Leader ", r.stdout), r.stdout  # as Kafka's


def test_a_terminal_gets_colour_and_no_color_turns_it_off(voter):
    coloured = on_a_terminal("status", url=voter.url(0))
    assert ESC in coloured  # the check below can see escapes
    for env in ({"NO_COLOR": "1"}, {"TERM": "dumb"}):
        out = on_a_terminal("status", url=voter.url(0), **env)
        assert ESC not in out and voter.cluster_id in out, env
        assert "\u2501" not in out and "\u2503" not in out  # rich's box drawing
        assert replication_rows(out.replace("\r\n", "\n"))[0]["Status"] == "Leader"


def test_every_read_command_prints_json_alone_on_stdout(voter):
    for args in (("status",), ("brokers",), ("topics",), ("log", "--max", "5")):
        r = mq(*args, "--json", url=voter.url(0))
        assert r.returncode == 0 and r.stderr == "", (args, r.stderr)
        assert ESC not in r.stdout
        if args[0] == "log":  # NDJSON: one record a line
            records = [json.loads(line) for line in r.stdout.splitlines()]
            assert records[0]["offset"] == 0 and records[0]["type"] == "LEADER_CHANGE"
            assert {"offset", "type", "version", "data", "batchOffset"} <= records[0].keys()
        elif args[0] == "status":
            assert json.loads(r.stdout)["clusterId"] == voter.cluster_id
        else:
            assert isinstance(json.loads(r.stdout), list)


def test_exit_codes(voter, tmp_path):
    url = voter.url(0)
    assert mq("status", url=url).returncode == 0
    r = mq("topics", "no-such-topic", url=url)
    assert r.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr  # the cluster said no
    r = mq("status", "--no-such-flag", url=url)
    assert r.returncode == 2 and "unrecognized arguments: --no-such-flag" in r.stderr
    r = mq("log", "--max", "0", url=url)
    assert r.returncode == 2 and "--max 0 must be within 1..10000" in r.stderr
    r = mq("status", "--token-file", str(tmp_path / "absent"), url=url)
    assert r.returncode == 2 and "--token-file" in r.stderr
    r = mq("brokers", url=f"http://127.0.0.1:{free_port()}")
    assert r.returncode == 2 and r.stderr.startswith("metaquorum: UNAVAILABLE")
    assert r.stdout == ""
    for command in ("status", "create-topic", "add-voter"):
        r = subprocess.run(
            [sys.executable, "-m", "metaquorum.cli", command, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "Exit codes: 0" in " ".join(r.stdout.split()), command


def test_a_reader_that_goes_away_is_not_an_error(voter):
    """``metaquorum status | head -0``: the pipe is closed before anything is written."""
    for args in (("status",), ("log", "--json")):
        proc = subprocess.Popen(
            [sys.executable, "-m", "metaquorum.cli", *args, "--url", voter.url(0)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            proc.stdout.close()
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0 and b"Traceback" not in err, (args, err.decode())
        assert b"BrokenPipe" not in err


@pytest.mark.slow
def test_status_from_a_follower_shows_the_leaders_view(tmp_path):
    with running_cluster(tmp_path, voters=3) as c:
        leader = c.leader()
        follower = next(i for i in range(3) if i != leader)
        deadline = time.monotonic() + 60
        while True:  # every follower answered the leader since its election
            r = mq("status", "--json", url=c.url(follower))
            assert r.returncode == 0, r.stderr
            view = json.loads(r.stdout).get("leaderStatus") or {}
            rows = view.get("voters", [])
            if len(rows) == 3 and all(v["lastFetchMs"] is not None for v in rows):
                break
            assert time.monotonic() < deadline, r.stdout
            time.sleep(0.2)
        body = json.loads(r.stdout)
        assert body["nodeId"] == follower and view["nodeId"] == body["leaderId"] == leader
        assert all(v["logEndOffset"] is not None for v in view["voters"])
        r = mq("status", url=c.url(follower))
        assert r.returncode == 0, r.stderr
        assert f"as the leader (node {leader}) sees it" in r.stdout
        # How the leader took over, from its own record (issue 42).
        assert f"leaderships won by node {leader} (the leader) (oldest first):" in r.stdout
        rows = replication_rows(r.stdout)
        assert sorted(row["Status"] for row in rows) == ["Follower", "Follower", "Leader"]
        assert all(row["LastFetchTimestamp"] != "-" for row in rows)
        status = kafka_status(r.stdout)
        assert len(json.loads(status["CurrentVoters"])) == 3
        assert status["MaxFollowerLag"].isdigit()


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
    assert r.returncode == 0, r.stderr
    # Active, or fenced again if this loaded machine let its 9 s session lapse.
    assert re.search(r"^1 +\d+ +(active|fenced) ", r.stdout, re.M), r.stdout
    r = mq("log", "--json", "--max", "1000", url=voter.url(0))
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert records[0]["offset"] == 0 and records[0]["type"] == "LEADER_CHANGE"
    assert any(rec["type"] == "TOPIC_RECORD" for rec in records)


def test_log_who_and_its_filters_as_an_operator_reads_them(voter):
    """``metaquorum log --who`` prints who asked for each run of records
    (auth is off here: admin:anonymous), the filters reach GET /v1/log, and
    a bad one is one clear line naming it (exit 1, as the server refused it)."""
    reg = voter.post(0, "/v1/brokers/register", register_body(voter, 2)).json()
    voter.post(
        0,
        "/v1/brokers/heartbeat",
        {"brokerId": 2, "brokerEpoch": reg["brokerEpoch"], "currentMetadataOffset": 10**9},
    )
    r = mq(
        "create-topic", "who-t", "--partitions", "2", "--replication-factor", "1", url=voter.url(0)
    )
    assert r.returncode == 0, r.stderr
    r = mq("log", "--who", "--api", "CreateTopics", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert lines and all("admin:anonymous" in line and "CreateTopics" in line for line in lines)
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z +\d+(-\d+)? ", lines[-1])
    assert re.search(r"127\.0\.0\.1:\d+ +CreateTopics +request=\S+", lines[-1]), lines[-1]
    r = mq("log", "--who", "--json", "--topic", "who-t", url=voter.url(0))
    runs = [json.loads(line) for line in r.stdout.splitlines()]
    # Its creation; on a loaded machine broker 2's session may lapse after it,
    # and the controller's fencing changes the topic's partitions too.
    created = [run for run in runs if run["api"] == "CreateTopics"]
    assert len(created) == 1 and created[0]["records"] == 3, runs  # TOPIC_RECORD, 2 partitions
    assert created[0]["principal"] == "admin:anonymous" and runs[0] == created[0], runs
    assert all(run["principal"] == "controller" for run in runs[1:]), runs
    r = mq("log", "--who", "--principal", "controller", "--json", url=voter.url(0))
    apis = {json.loads(line)["api"] for line in r.stdout.splitlines()}
    assert "LeaderChange" in apis and "Bootstrap" in apis, apis
    r = mq("log", "--api", "CreateTopic", url=voter.url(0))  # refused by the server: 1
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "api='CreateTopic' is not an API the log names" in r.stderr
    r = mq("log", "--since", "yesterday", url=voter.url(0))
    assert r.returncode == 1 and "since='yesterday'" in r.stderr


def test_failures_are_one_clear_line(voter):
    r = mq("topics", "no-such-topic", url=voter.url(0))
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    r = mq("status", url=f"http://127.0.0.1:{free_port()}")
    assert r.returncode == 2 and r.stderr.startswith("metaquorum: UNAVAILABLE")
    r = mq("create-topic", "x", "--config", "broken", url=voter.url(0))
    assert r.returncode == 2 and "NAME=VALUE" in r.stderr


def test_unregister_broker_json_and_exit_codes(voter):
    reg = voter.post(0, "/v1/brokers/register", register_body(voter, 77)).json()
    assert reg["errorName"] == "NONE"
    r = mq("unregister-broker", "77", url=voter.url(0))
    assert r.returncode == 0 and "unregistered broker 77" in r.stdout, r.stderr
    r = mq("unregister-broker", "77", "--json", url=voter.url(0))
    assert r.returncode == 1
    assert json.loads(r.stdout)["errorName"] == "BROKER_ID_NOT_REGISTERED"
    assert (
        r.stderr
        == "metaquorum: BROKER_ID_NOT_REGISTERED: Broker ID 77 is not currently registered\n"
    )
    r = mq("unregister-broker", "x", url=voter.url(0))
    assert r.returncode == 2 and "invalid int value" in r.stderr


def test_alter_configs_then_read_them_back(voter):
    r = mq("alter-configs", "--cluster", "--set", "log.retention.hours=48", url=voter.url(0))
    assert r.returncode == 0 and "changed 1 config(s) of the cluster-wide default" in r.stdout
    reg = voter.post(0, "/v1/brokers/register", register_body(voter, 79)).json()
    hb = {"brokerId": 79, "brokerEpoch": reg["brokerEpoch"], "currentMetadataOffset": 10**9}
    voter.post(0, "/v1/brokers/heartbeat", hb)
    r = mq("create-topic", "cfg-ops", "--replication-factor", "1", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    r = mq(
        "alter-configs", "--topic", "cfg-ops", "--set", "segment.ms=60000",
        "--append", "cleanup.policy=compact", url=voter.url(0),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    # For people: what is set, with its source; the default-valued ones with --all.
    r = mq("configs", "--topic", "cfg-ops", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()[2:]}
    assert rows == {
        "cleanup.policy": ["delete,compact", "TOPIC_CONFIG"],
        "retention.ms": ["172800000", "DYNAMIC_DEFAULT_BROKER_CONFIG"],
        "segment.ms": ["60000", "TOPIC_CONFIG"],
    }
    r = mq("configs", "--topic", "cfg-ops", "--all", "--json", "--synonyms", url=voter.url(0))
    body = json.loads(r.stdout)
    assert len(body["configs"]) == 33
    (retention,) = [c for c in body["configs"] if c["name"] == "retention.ms"]
    assert [s["name"] for s in retention["synonyms"]] == ["log.retention.hours", "retention.ms"]
    r = mq("configs", "--cluster", "--json", url=voter.url(0))
    assert [c["name"] for c in json.loads(r.stdout)["configs"]] == ["log.retention.hours"]


def test_alter_configs_refusals_and_exit_codes(voter):
    r = mq(
        "alter-configs", "--broker", "1", "--set", "num.io.threads=0", "--json", url=voter.url(0)
    )
    assert r.returncode == 1 and json.loads(r.stdout)["errorName"] == "INVALID_CONFIG"
    assert r.stderr == (
        "metaquorum: INVALID_CONFIG: Invalid value 0 for configuration num.io.threads: "
        "Value must be at least 1\n"
    )
    r = mq("alter-configs", "--topic", "nope", "--delete", "retention.ms", url=voter.url(0))
    assert r.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION: The topic 'nope' does not exist." in r.stderr
    r = mq("alter-configs", "--broker", "1", "--set", "novalue", url=voter.url(0))
    assert r.returncode == 2 and "--set 'novalue' is not NAME=VALUE" in r.stderr
    r = mq("alter-configs", "--broker", "1", url=voter.url(0))
    assert r.returncode == 2 and "nothing to change" in r.stderr
    r = mq("alter-configs", "--broker", "1", "--topic", "x", "--delete", "a", url=voter.url(0))
    assert r.returncode == 2 and "not allowed with argument" in r.stderr
    r = mq("configs", "--topic", "nope", url=voter.url(0))
    assert r.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr
    r = mq(
        "alter-configs",
        "--cluster",
        "--set",
        "num.io.threads=4",
        "--validate-only",
        url=voter.url(0),
    )
    assert r.returncode == 0 and "would change 1 config(s)" in r.stdout
    r = mq("configs", "--cluster", "--json", url=voter.url(0))
    assert "num.io.threads" not in r.stdout


def test_alter_client_quotas_then_describe_them(voter):
    r = mq(
        "alter-client-quotas", "--user", "alice", "--client-id-default",
        "--add", "producer_byte_rate=1024,consumer_byte_rate=2048", url=voter.url(0),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "changed 2 quota(s) of user=alice,client-id=<default>" in r.stdout
    r = mq(
        "alter-client-quotas",
        "--ip-default",
        "--add",
        "connection_creation_rate=5",
        url=voter.url(0),
    )
    assert r.returncode == 0, r.stderr
    r = mq("client-quotas", "--user", "alice", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()[2:]]
    assert rows == [
        ["user=alice,client-id=<default>", "consumer_byte_rate", "2048"],
        ["user=alice,client-id=<default>", "producer_byte_rate", "1024"],
    ]
    r = mq("client-quotas", "--any-ip", "--json", url=voter.url(0))
    body = json.loads(r.stdout)
    assert body["entries"] == [
        {
            "entity": [{"entityType": "ip", "entityName": None}],
            "values": [{"key": "connection_creation_rate", "value": 5.0}],
        }
    ]
    r = mq(
        "alter-client-quotas", "--user", "alice", "--client-id-default",
        "--delete", "producer_byte_rate", "--validate-only", url=voter.url(0),
    )  # fmt: skip
    assert r.returncode == 0 and "would change 1 quota(s)" in r.stdout
    r = mq("client-quotas", "--user", "alice", "--json", url=voter.url(0))
    assert len(json.loads(r.stdout)["entries"][0]["values"]) == 2


def test_alter_client_quotas_refusals_and_exit_codes(voter):
    r = mq(
        "alter-client-quotas", "--user", "bob", "--add", "producer_byte_rate=1.5", "--json",
        url=voter.url(0),
    )  # fmt: skip
    assert r.returncode == 1 and json.loads(r.stdout)["errorName"] == "INVALID_REQUEST"
    assert r.stderr == (
        "metaquorum: INVALID_REQUEST: producer_byte_rate cannot be a fractional value.\n"
    )
    r = mq(
        "alter-client-quotas", "--user", "bob", "--ip", "1.2.3.4", "--add", "x=1", url=voter.url(0)
    )
    assert r.returncode == 1 and "IP entity should" in r.stderr
    r = mq("alter-client-quotas", "--user", "bob", "--add", "producer_byte_rate", url=voter.url(0))
    assert r.returncode == 2 and "is not KEY=NUMBER" in r.stderr
    r = mq("alter-client-quotas", "--add", "producer_byte_rate=1", url=voter.url(0))
    assert r.returncode == 2 and "no entity" in r.stderr
    r = mq("alter-client-quotas", "--user", "bob", url=voter.url(0))
    assert r.returncode == 2 and "nothing to change" in r.stderr
    r = mq("alter-client-quotas", "--user", "a", "--user-default", "--add", "x=1", url=voter.url(0))
    assert r.returncode == 2 and "not allowed with argument" in r.stderr
    r = mq("client-quotas", "--ip", "1.2.3.4", "--any-user", url=voter.url(0))
    assert r.returncode == 1 and "INVALID_REQUEST: Invalid entity filter component" in r.stderr


def test_create_acl_list_and_delete_them_as_kafka_acls_does(voter):
    r = mq(
        "create-acl", "--topic", "acl-ops", "--allow-principal", "User:alice",
        "--allow-principal", "User:bob", "--operation", "read", "--operation", "Describe",
        url=voter.url(0),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "created 4 ACL(s) on TOPIC:LITERAL:acl-ops" in r.stdout
    r = mq(
        "create-acl", "--topic", "acl-", "--resource-pattern-type", "prefixed",
        "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--operation", "ALL",
        url=voter.url(0),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    # For people: one row per binding; MATCH shows every pattern applying to the topic.
    r = mq("acls", "--topic", "acl-ops", "--resource-pattern-type", "match", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    rows = sorted(tuple(line.split()) for line in r.stdout.splitlines()[2:])
    assert rows == [
        ("TOPIC:acl-", "PREFIXED", "User:mallory", "10.0.0.9", "ALL", "DENY"),
        ("TOPIC:acl-ops", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"),
        ("TOPIC:acl-ops", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC:acl-ops", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"),
        ("TOPIC:acl-ops", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
    ]
    r = mq("acls", "--principal", "User:bob", "--json", url=voter.url(0))
    body = json.loads(r.stdout)
    assert [len(res["acls"]) for res in body["resources"]] == [2]
    # A principal without --operation: all of its ACLs on the resource.
    r = mq("delete-acls", "--topic", "acl-ops", "--allow-principal", "User:bob", url=voter.url(0))
    assert r.returncode == 0 and "deleted 2 ACL(s)" in r.stdout, r.stderr
    r = mq("delete-acls", "--topic", "acl-ops", "--json", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["filterResults"][0]["matchingAcls"]) == 2
    r = mq("acls", "--json", "--topic", "acl-ops", "--resource-pattern-type", "MATCH",
           url=voter.url(0))  # fmt: skip
    assert [res["resourceName"] for res in json.loads(r.stdout)["resources"]] == ["acl-"]


def test_acl_commands_refusals_and_exit_codes(voter):
    r = mq("create-acl", "--topic", "t", "--allow-principal", "alice", "--operation", "READ",
           url=voter.url(0))  # fmt: skip
    assert r.returncode == 1
    assert r.stderr == (
        "metaquorum: INVALID_REQUEST: expected a string in format "
        "principalType:principalName but got 'alice'\n"
    )
    r = mq("create-acl", "--topic", "t", "--allow-principal", "User:a", "--operation", "REED",
           url=voter.url(0))  # fmt: skip
    assert r.returncode == 1 and "operation 'REED' is not one of" in r.stderr
    r = mq("create-acl", "--topic", "t", "--allow-principal", "User:a", url=voter.url(0))
    assert r.returncode == 2 and "nothing to create" in r.stderr
    r = mq("create-acl", "--allow-principal", "User:a", "--operation", "READ", url=voter.url(0))
    assert r.returncode == 2 and "one of the arguments" in r.stderr
    r = mq("acls", "--resource", "TOPIC", url=voter.url(0))
    assert r.returncode == 2 and "is not TYPE:NAME" in r.stderr
    r = mq("acls", "--operation", "FLY", url=voter.url(0))
    assert r.returncode == 1 and "operation 'FLY' is not one of" in r.stderr


def test_update_features_and_status_show_the_finalized_levels(voter):
    """metaquorum update-features (Kafka's UpdateFeatures, issue 21 item 7):
    what it says, its refusals and exit codes; status lists the features."""
    r = mq("update-features", "metadata.version=12", "--validate-only", url=voter.url(0))
    assert r.returncode == 0 and "would finalize metadata.version at level 12" in r.stdout, r.stderr
    r = mq("update-features", "eligible.leader.replicas.version=2", "--json", url=voter.url(0))
    assert r.returncode == 1
    assert json.loads(r.stdout)["errorName"] == "INVALID_UPDATE_VERSION"
    assert "The controller only supports versions 0-1" in r.stderr
    r = mq("update-features", "eligible.leader.replicas.version", url=voter.url(0))
    assert r.returncode == 2 and "is not NAME=LEVEL" in r.stderr
    r = mq(
        "update-features",
        "metadata.version=11",
        "--downgrade",
        "--unsafe-downgrade",
        url=voter.url(0),
    )
    assert r.returncode == 2 and "not allowed with argument" in r.stderr
    r = mq("status", "--json", url=voter.url(0))
    assert json.loads(r.stdout)["finalizedFeatures"]["metadata.version"] == 12, r.stdout
    r = mq("status", url=voter.url(0))
    assert "features metadata.version=12" in r.stdout, r.stdout
