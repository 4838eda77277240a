"""GET /v1/image?atOffset= and /v1/image/diff on a real 3-voter cluster:
equal to a replay of GET /v1/log up to the offset, from the leader, from a
follower (voter 1 with an HTTP worker process: the worker reads the store
itself), from a restarted voter and from an observer started late; atTime;
the diff; 410 beyond the window; the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys

import orjson
import pytest

from api.image_view import PARTS, diff, image_chunks
from brokers.client import MetaquorumClient
from metadata_records.codec import record_from_obj
from metadata_records.delta import apply_records
from metadata_records.image import EMPTY_IMAGE

from .cluster import Cluster
from .pipeline_scenario import broker_scenario

WINDOW = 60  # --history-retention-records: the window is the last 60 records


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("history")
    c = Cluster(
        root,
        voters=3,
        extra=[
            "--compaction-entries",
            "5",
            "--history-retention-records",
            str(WINDOW),
            # No write but the tests': brokers' sessions never expire here, no rebalance.
            "--session-timeout-ms",
            "600000",
            "--auto-leader-rebalance-enable",
            "false",
        ],  # fmt: skip
    )
    plain_args = c.args
    c.args = lambda i: plain_args(i) + (["--http-workers", "1"] if i == 1 else [])
    try:
        c.start()
        c.wait_ready()
        leader = c.leader()
        asyncio.run(writes(c.url(leader), c.cluster_id))
        # Every voter has snapshotted (checkpoints) and applied everything.
        end = c.get(leader, "/v1/log", params={"fromOffset": 0}).json()["highWatermark"]
        for i in range(3):
            c.wait(
                lambda i=i: (
                    any((c.data_dir(i) / "history").glob("ckpt-*.snap"))
                    and c.get(i, "/v1/image", params={"only": "features"}).json()["nextOffset"]
                    >= end
                ),
                30,
                f"voter {i}: a checkpoint and offset {end}",
            )
        yield c
    finally:
        c.close()


async def writes(url: str, cluster_id: str) -> None:
    await broker_scenario(url, cluster_id)
    async with MetaquorumClient([url]) as client:
        for n in range(12):
            created = await client.create_topics(
                [
                    {
                        "name": f"t{n}",
                        "assignments": [
                            {"partitionIndex": 0, "brokerIds": [1, 2]},
                            {"partitionIndex": 1, "brokerIds": [2, 3]},
                        ],
                    }
                ]
            )
            assert created.body["topics"][0]["errorName"] == "NONE", created.body
            configs = [{"name": "retention.ms", "configOperation": 0, "value": str(1000 + n)}]
            answer = await client.alter_configs(
                [{"resourceType": 2, "resourceName": f"t{n}", "configs": configs}]
            )
            assert answer.ok, answer
        answer = await client.create_acls(
            [
                {
                    "resourceType": "TOPIC",
                    "resourceName": "t1",
                    "resourcePatternType": "LITERAL",
                    "principal": "User:alice",
                    "host": "*",
                    "operation": "READ",
                    "permissionType": "ALLOW",
                }
            ]
        )
        assert answer.ok, answer
        answer = await client.alter_client_quotas(
            [
                {
                    "entity": [{"entityType": "user", "entityName": "alice"}],
                    "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
                }
            ]
        )
        assert answer.ok, answer


def log_of(c: Cluster, i: int) -> list[dict]:
    records, offset = [], 0
    while True:
        page = c.get(i, "/v1/log", params={"fromOffset": offset, "maxRecords": 10_000}).json()
        records += page["records"]
        if page["nextOffset"] >= page["highWatermark"]:
            return records
        offset = page["nextOffset"]


def replay(log: list[dict], offset: int):
    return apply_records(EMPTY_IMAGE, [record_from_obj(r) for r in log[: offset + 1]])


def parts_of(image) -> dict:
    return {
        k: v for k, v in orjson.loads(b"".join(image_chunks(image, {}, PARTS, None, True))).items()
    }


def image_at(c: Cluster, i: int, **params) -> dict:
    r = c.get(i, "/v1/image", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_images_at_offsets_equal_a_replay_of_the_log(cluster) -> None:
    c = cluster
    leader = c.leader()
    log = log_of(c, leader)
    assert [r["offset"] for r in log] == list(range(len(log)))
    oldest = image_at(c, leader, only="features")["oldestOffset"]
    assert len(log) - WINDOW <= oldest < len(log) - WINDOW // 2
    follower = 1 if leader != 1 else 2
    rng = random.Random(43)
    offsets = sorted({oldest, len(log) - 1, *rng.sample(range(oldest, len(log)), 4)})
    for offset in offsets:
        want = parts_of(replay(log, offset))
        for i in (leader, follower, 1):
            got = image_at(c, i, atOffset=offset)
            assert got["offset"] == offset and got["nextOffset"] == offset + 1
            assert got["timestampMs"] == log[offset]["timestampMs"]
            assert {k: got[k] for k in PARTS} == want, (i, offset)
    # Parts, and topics narrowed.
    got = image_at(c, follower, atOffset=len(log) - 1, only="topics,configs", topics="t3")
    assert [t["name"] for t in got["topics"]] == ["t3"] and "brokers" not in got
    assert got["configs"] == [
        {"resourceType": 2, "resourceName": "t3", "configs": {"retention.ms": "1003"}}
    ]


def test_at_time_diff_and_the_window(cluster) -> None:
    c = cluster
    leader = c.leader()
    log = log_of(c, leader)
    oldest = image_at(c, leader, only="features")["oldestOffset"]
    # atTime: the image after the last batch stamped at or before it.
    stamp = log[oldest + 10]["timestampMs"]
    last = max(r["offset"] for r in log if r["timestampMs"] <= stamp)
    got = image_at(c, 2, atTime=str(stamp), only="brokers")
    assert got["offset"] == last
    # diff: equal to the diff of two replays.
    a, b = oldest + 3, len(log) - 1
    r = c.get(1, "/v1/image/diff", params={"from": a, "to": b})
    assert r.status_code == 200, r.text
    want = orjson.loads(orjson.dumps(diff(replay(log, a), replay(log, b), True)))
    assert r.json()["changes"] == want and r.json()["total"] == len(want) > 0
    kinds = {change["kind"] for change in want}
    assert {"topic", "partition", "config"} <= kinds
    # Beyond the window: 410 naming the oldest; beyond the log: 404 naming its end.
    r = c.get(0, "/v1/image", params={"atOffset": 0})
    assert r.status_code == 410 and r.json()["oldestOffset"] >= oldest, r.text
    r = c.get(0, "/v1/image", params={"atOffset": 10**9})
    assert r.status_code == 404 and r.json()["highWatermark"] >= len(log), r.text
    r = c.get(0, "/v1/image", params={"atTime": "yesterday"})
    assert r.status_code == 400 and "ISO-8601" in r.text


def test_a_restarted_voter_still_serves_its_window(cluster) -> None:
    c = cluster
    leader = c.leader()
    log = log_of(c, leader)
    voter = 2 if leader != 2 else 0
    oldest = image_at(c, voter, only="features")["oldestOffset"]
    assert c.stop(voter) == 0
    c.start(voter)
    c.wait_ready([voter])
    # The same window (an election the restart set off would add a record or two).
    now = image_at(c, voter, only="features")["oldestOffset"]
    assert oldest <= now <= oldest + 4
    oldest = now
    for offset in (oldest, (oldest + len(log)) // 2, len(log) - 1):
        got = image_at(c, voter, atOffset=offset)
        assert {k: got[k] for k in PARTS} == parts_of(replay(log, offset)), offset
    # Its log in memory starts at the snapshot it loaded; GET /v1/log reads
    # what comes before from the history, the same records (and who) as the leader's.
    page = c.get(voter, "/v1/log", params={"fromOffset": oldest, "maxRecords": 10_000}).json()
    assert page["oldestOffset"] > oldest
    assert page["records"][: len(log) - oldest] == log[oldest:]
    filtered = c.get(voter, "/v1/log", params={"fromOffset": oldest, "api": "CreateTopics"}).json()[
        "records"
    ]
    assert filtered == [r for r in log[oldest:] if r.get("who", {}).get("api") == "CreateTopics"]


def cli(c: Cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", *args, "--url", c.url(0)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_the_cli_reads_the_past_and_diffs(cluster) -> None:
    c = cluster
    log = log_of(c, c.leader())
    oldest = image_at(c, 0, only="features")["oldestOffset"]
    created = next(r["offset"] for r in log if r["type"] == "TOPIC_RECORD" and r["offset"] > oldest)
    name = log[created]["data"]["name"]
    before, after = created - 1, created + 2  # the topic and its two partitions
    done = cli(c, "topics", name, "--at-offset", str(before), "--json")
    assert done.returncode == 1 and "did not exist after offset" in done.stderr, done
    done = cli(c, "topics", name, "--at-offset", str(after), "--json")
    assert done.returncode == 0, done.stderr
    assert [p["partitionIndex"] for p in json.loads(done.stdout)["partitions"]] == [0, 1]
    done = cli(c, "brokers", "--at-offset", str(after))
    assert done.returncode == 0 and f"brokers at offset {after}" in done.stdout, done
    done = cli(c, "configs", "--topic", name, "--at-time", str(log[-1]["timestampMs"]))
    assert done.returncode == 0 and "retention.ms" in done.stdout, done
    done = cli(c, "acls", "--at-offset", str(len(log) - 1), "--principal", "User:alice")
    assert done.returncode == 0 and "User:alice" in done.stdout, done
    done = cli(c, "diff", str(before), str(after))
    assert done.returncode == 0, done.stderr
    assert f"+ topic {name}" in done.stdout and f"+ partition {name}-1" in done.stdout
    done = cli(c, "diff", str(before), str(after), "--json")
    assert {ch["kind"] for ch in json.loads(done.stdout)["changes"]} == {"topic", "partition"}
    done = cli(c, "topics", "--at-offset", "0")
    assert done.returncode == 1 and f"--at-offset {oldest}" in done.stderr, done


def test_an_observer_serves_the_window_it_holds(cluster) -> None:
    """Started late, it holds the history from the snapshot it was sent (or
    the log it replayed) on: its images equal a replay too."""
    c = cluster
    leader = c.leader()
    log = log_of(c, leader)
    o = c.add_observer()
    c.start(o)
    c.wait(
        lambda: (c.status(o) or {}).get("highWatermark") == len(log),
        30,
        "the observer caught up",
    )
    got = c.wait(
        lambda: (
            (r := c.get(o, "/v1/image", params={"only": "features"})).status_code == 200
            and r.json()["oldestOffset"] is not None
            and r.json()
        ),
        30,
        "the observer's history",
    )
    oldest = got["oldestOffset"]
    assert oldest < len(log)
    for offset in sorted({oldest, (oldest + len(log)) // 2, len(log) - 1}):
        got = image_at(c, o, atOffset=offset)
        assert {k: got[k] for k in PARTS} == parts_of(replay(log, offset)), offset
    r = c.get(o, "/v1/image", params={"atOffset": max(oldest - 1, 0)})
    assert oldest == 0 or r.status_code == 410, r.text
