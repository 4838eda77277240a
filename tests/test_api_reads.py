"""Reads over HTTP against a real single-voter node: brokers, topics, the log
(paging, NDJSON, long-poll), the snapshot, quorum status, probes, metrics."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from api import reads as reads_module
from metadata_records.codec import record_from_obj
from metadata_records.delta import apply_records
from metadata_records.image import EMPTY_IMAGE

from .local_node import registration_body


@pytest.fixture(scope="module")
def cluster(local, app):
    """Brokers 1-3 (3 stays fenced, 2 in controlled shutdown) and two topics."""
    epochs = {}
    for b in (1, 2, 3):
        r = local.request(
            app,
            "POST",
            "/v1/brokers/register",
            json=registration_body(local.cluster_id, b, rack=f"r{b}"),
        )
        epochs[b] = r.json()["brokerEpoch"]
    for b in (1, 2):
        hb = {"brokerId": b, "brokerEpoch": epochs[b], "currentMetadataOffset": 1 << 40}
        assert (
            local.request(app, "POST", "/v1/brokers/heartbeat", json=hb).json()["isFenced"] is False
        )
    topics = {
        "topics": [
            {
                "name": "alpha",
                "numPartitions": 3,
                "replicationFactor": 2,
                "configs": [{"name": "min.insync.replicas", "value": "1"}],
            },
            {"name": "beta", "assignments": [{"partitionIndex": 0, "brokerIds": [2, 1]}]},
        ]
    }
    assert local.request(app, "POST", "/v1/topics", json=topics).json()["errorName"] == "NONE"
    hb = {
        "brokerId": 2,
        "brokerEpoch": epochs[2],
        "currentMetadataOffset": 1 << 40,
        "wantShutDown": True,
    }
    assert (
        local.request(app, "POST", "/v1/brokers/heartbeat", json=hb).json()["shouldShutDown"]
        is False
    )
    return epochs


def get(local, app, path, **kwargs):
    r = local.request(app, "GET", path, **kwargs)
    assert r.status_code == 200, r.text
    return r


def test_brokers(local, app, cluster):
    r = get(local, app, "/v1/brokers")
    assert int(r.headers["X-Metadata-Offset"]) == local.node.image.last_offset
    brokers = {b["brokerId"]: b for b in r.json()["brokers"]}
    assert sorted(brokers) == [1, 2, 3]
    assert (brokers[1]["fenced"], brokers[1]["inControlledShutdown"]) == (False, False)
    assert (brokers[2]["fenced"], brokers[2]["inControlledShutdown"]) == (False, True)
    assert brokers[3]["fenced"] is True
    assert brokers[3]["rack"] == "r3"
    assert set(brokers[1]) == {
        "brokerId",
        "brokerEpoch",
        "incarnationId",
        "fenced",
        "inControlledShutdown",
        "rack",
        "listeners",
        "features",
        "registrationOffset",
    }
    assert get(local, app, "/v1/brokers/2").json() == brokers[2]


def test_unknown_broker_and_topic_are_404(local, app, cluster):
    r = local.request(app, "GET", "/v1/brokers/42")
    assert r.status_code == 404
    assert r.json()["errorName"] == "BROKER_ID_NOT_REGISTERED"
    r = local.request(app, "GET", "/v1/topics/none")
    assert r.status_code == 404
    assert (r.json()["errorCode"], r.json()["errorName"]) == (3, "UNKNOWN_TOPIC_OR_PARTITION")
    assert "X-Metadata-Offset" in r.headers


def test_topics(local, app, cluster):
    topics = {t["name"]: t for t in get(local, app, "/v1/topics").json()["topics"]}
    assert sorted(topics) == ["alpha", "beta"]
    alpha = topics["alpha"]
    assert alpha["configs"] == [{"name": "min.insync.replicas", "value": "1"}]
    assert [p["partitionIndex"] for p in alpha["partitions"]] == [0, 1, 2]
    assert set(alpha["partitions"][0]) == {
        "partitionIndex",
        "replicas",
        "isr",
        "leader",
        "leaderEpoch",
        "partitionEpoch",
        "leaderRecoveryState",
        "addingReplicas",
        "removingReplicas",
        "eligibleLeaderReplicas",  # KIP-966
        "lastKnownElr",
    }
    beta = get(local, app, "/v1/topics/beta").json()
    assert beta == topics["beta"]
    # Broker 2 went into controlled shutdown: beta-0 moved to broker 1.
    assert beta["partitions"][0]["leader"] == 1
    assert beta["partitions"][0]["isr"] == [1]


def test_topics_and_brokers_page_by_key_and_the_pages_make_the_whole_list(local, app, cluster):
    names = [f"page-{i:02}" for i in range(7)]
    body = {"topics": [{"name": n, "numPartitions": 1, "replicationFactor": 1} for n in names]}
    assert local.request(app, "POST", "/v1/topics", json=body).json()["errorName"] == "NONE"
    whole = get(local, app, "/v1/topics")
    assert whole.json()["nextAfter"] is None
    assert "X-Metadata-Offset" in whole.headers
    walked, after, pages = [], None, 0
    while True:
        query = "?limit=3" + ("" if after is None else f"&after={after}")
        page = get(local, app, "/v1/topics" + query).json()
        assert len(page["topics"]) <= 3
        walked += page["topics"]
        pages += 1
        after = page["nextAfter"]
        if after is None:
            break
        assert after == page["topics"][-1]["name"]
    assert walked == whole.json()["topics"] and pages == 3  # alpha, beta and seven more
    # A cursor need not exist: the page starts after where it would sort.
    page = get(local, app, "/v1/topics?after=page-03x&limit=2").json()
    assert [t["name"] for t in page["topics"]] == ["page-04", "page-05"]
    assert page["nextAfter"] == "page-05"
    assert get(local, app, "/v1/topics?after=zzz").json() == {"topics": [], "nextAfter": None}
    # Brokers by id, the same way.
    first = get(local, app, "/v1/brokers?limit=2").json()
    assert [b["brokerId"] for b in first["brokers"]] == [1, 2] and first["nextAfter"] == 2
    rest = get(local, app, "/v1/brokers?limit=2&after=2").json()
    assert [b["brokerId"] for b in rest["brokers"]] == [3] and rest["nextAfter"] is None
    assert get(local, app, "/v1/brokers").json()["nextAfter"] is None
    for bad in ("/v1/topics?limit=0", "/v1/topics?limit=10001", "/v1/brokers?after=x"):
        r = local.request(app, "GET", bad)
        assert r.status_code == 400, (bad, r.status_code, r.text)
        assert r.json()["errorName"] == "INVALID_REQUEST", r.text


def test_linearizable_read_sees_every_acknowledged_write(local, app, cluster):
    async def scenario():
        async with local.client(app) as client:
            write = await client.post(
                "/v1/topics",
                json={
                    "topics": [
                        {"name": "lin", "assignments": [{"partitionIndex": 0, "brokerIds": [1]}]}
                    ]
                },
            )
            assert write.json()["topics"][0]["errorName"] == "NONE"
            read = await client.get("/v1/topics/lin?consistency=linearizable")
            return write, read

    _, read = local.run(scenario())
    assert read.status_code == 200
    assert int(read.headers["X-Metadata-Offset"]) >= 0


def test_log_pages_and_headers(local, app, cluster):
    first = get(local, app, "/v1/log?fromOffset=0&maxRecords=2").json()
    assert [r["offset"] for r in first["records"]] == [0, 1]
    assert first["records"][0]["type"] == "LEADER_CHANGE"
    assert first["records"][0]["data"]["leaderId"] == 0
    assert first["records"][1] == {
        "offset": 1,
        "type": "FEATURE_LEVEL_RECORD",
        "version": 0,
        "timestampMs": first["records"][1]["timestampMs"],
        "controllerEpoch": first["records"][0]["controllerEpoch"],
        "batchOffset": first["records"][1]["batchOffset"],
        "who": {"principal": "controller", "api": "Bootstrap", "rule": "cluster.bootstrap"},
        "data": {"name": "metadata.version", "featureLevel": 12},
    }
    assert first["records"][0]["who"]["api"] == "LeaderChange"
    assert first["nextOffset"] == 2
    assert first["highWatermark"] == local.node.image.next_offset
    assert first["oldestOffset"] == 0
    rest = get(local, app, f"/v1/log?fromOffset={first['nextOffset']}").json()
    offsets = [r["offset"] for r in rest["records"]]
    assert offsets == list(range(2, rest["highWatermark"]))  # dense, from 0
    assert rest["nextOffset"] == rest["highWatermark"]
    # Every record decodes with the shared codec.
    for obj in first["records"] + rest["records"]:
        record_from_obj(obj)
    end = get(local, app, f"/v1/log?fromOffset={rest['nextOffset']}").json()
    assert end["records"] == [] and end["nextOffset"] == rest["nextOffset"]


def test_each_record_names_the_first_offset_of_its_batch(local, app, cluster):
    records = get(local, app, "/v1/log?fromOffset=0").json()["records"]
    batches: dict[int, list[dict]] = {}
    for r in records:
        batches.setdefault(r["batchOffset"], []).append(r)
    assert len(batches) < len(records)  # the bootstrap and the topics commit several at once
    for first, batch in batches.items():
        # A batch starts at its batchOffset, is contiguous, and was built at one
        # time by one controller epoch.
        assert [r["offset"] for r in batch] == list(range(first, first + len(batch)))
        assert len({(r["timestampMs"], r["controllerEpoch"]) for r in batch}) == 1
    # Read from the middle of a batch, a record still names where its batch began.
    first, batch = next((f, b) for f, b in batches.items() if len(b) > 1)
    middle = get(local, app, f"/v1/log?fromOffset={first + 1}&maxRecords=1").json()["records"]
    assert middle[0]["batchOffset"] == first
    ndjson = get(
        local, app, f"/v1/log?fromOffset={first}", headers={"Accept": "application/x-ndjson"}
    )
    assert orjson.loads(ndjson.content.splitlines()[1])["batchOffset"] == first


def test_log_as_ndjson(local, app, cluster):
    r = get(
        local, app, "/v1/log?fromOffset=0&maxRecords=5", headers={"Accept": "application/x-ndjson"}
    )
    assert r.headers["content-type"].startswith("application/x-ndjson")
    lines = r.content.splitlines()
    assert [orjson.loads(line)["offset"] for line in lines] == [0, 1, 2, 3, 4]
    assert r.headers["X-Next-Offset"] == "5"
    assert int(r.headers["X-High-Watermark"]) == local.node.image.next_offset


def test_log_long_poll_returns_when_a_record_commits(local, app, cluster):
    async def scenario():
        async with local.client(app) as client:
            end = local.node.image.next_offset
            started = time.monotonic()
            poll = asyncio.ensure_future(client.get(f"/v1/log?fromOffset={end}&waitMs=10000"))
            await asyncio.sleep(0)  # let the poll reach its wait
            write = await client.post(
                "/v1/topics",
                json={
                    "topics": [
                        {"name": "polled", "assignments": [{"partitionIndex": 0, "brokerIds": [1]}]}
                    ]
                },
            )
            assert write.json()["topics"][0]["errorName"] == "NONE"
            r = await poll
            return r, time.monotonic() - started, end

    r, elapsed, end = local.run(scenario())
    assert r.status_code == 200
    records = r.json()["records"]
    assert records and records[0]["offset"] == end
    assert records[0]["type"] == "TOPIC_RECORD" and records[0]["data"]["name"] == "polled"
    assert elapsed < 5


def test_log_long_poll_times_out_empty(local, app, cluster):
    end = local.node.image.next_offset
    started = time.monotonic()
    body = get(local, app, f"/v1/log?fromOffset={end}&waitMs=200").json()
    elapsed = time.monotonic() - started
    assert body["records"] == [] and body["nextOffset"] == end
    assert 0.15 <= elapsed < 5


def test_snapshot_recreates_the_image(local, app, cluster):
    r = get(local, app, "/v1/snapshot")
    body = r.json()
    image = local.node.image
    assert body["offset"] == int(r.headers["X-Metadata-Offset"]) == image.last_offset
    assert body["nextOffset"] == image.next_offset
    types = [rec["type"] for rec in body["records"]]
    assert types[:3] == ["LEADER_CHANGE", "KRAFT_VOTERS", "FEATURE_LEVEL_RECORD"]
    assert {"REGISTER_BROKER_RECORD", "TOPIC_RECORD", "CONFIG_RECORD", "PARTITION_RECORD"} <= set(
        types
    )
    assert {rec["offset"] for rec in body["records"]} == {image.last_offset}
    # The snapshot is one unit at one offset: its records are one batch.
    assert {rec["batchOffset"] for rec in body["records"]} == {image.last_offset}
    rebuilt = apply_records(EMPTY_IMAGE, [record_from_obj(rec) for rec in body["records"]])
    assert rebuilt.ignored_records == 0
    assert rebuilt.topics == image.topics
    assert rebuilt.topic_ids == image.topic_ids
    assert rebuilt.features == image.features
    assert rebuilt.voters == image.voters and image.voters
    assert (rebuilt.controller_epoch, rebuilt.leader_id, rebuilt.leader_url) == (
        image.controller_epoch,
        image.leader_id,
        image.leader_url,
    )
    # Registration offsets become the records' positions (as in Kafka); all else matches.
    strip = lambda brokers: {i: b._replace(registration_offset=0) for i, b in brokers.items()}  # noqa: E731
    assert strip(rebuilt.brokers) == strip(image.brokers)
    assert rebuilt.brokers[2].in_controlled_shutdown is True


def test_snapshot_as_ndjson(local, app, cluster):
    r = get(local, app, "/v1/snapshot", headers={"Accept": "application/x-ndjson"})
    records = [orjson.loads(line) for line in r.content.splitlines()]
    assert records and all(rec["offset"] == int(r.headers["X-Metadata-Offset"]) for rec in records)
    assert int(r.headers["X-Next-Offset"]) == int(r.headers["X-Metadata-Offset"]) + 1


@pytest.mark.parametrize("piece", [1, 3, 10_000])
def test_the_streamed_snapshot_is_the_records_whole_in_any_piece_size(
    local, cluster, monkeypatch, piece
):
    """GET /v1/snapshot's body is made SNAPSHOT_PIECE records at a time; in
    any piece size it is the records of snapshot_record_objs, as one JSON
    object or one per line."""
    monkeypatch.setattr(reads_module, "SNAPSHOT_PIECE", piece)
    image = local.node.image
    whole = orjson.loads(orjson.dumps(reads_module.snapshot_record_objs(image, 7, sensitive=False)))
    body = b"".join(reads_module.snapshot_pieces(image, 7, sensitive=False))
    assert orjson.loads(body) == {
        "offset": image.last_offset,
        "nextOffset": image.next_offset,
        "records": whole,
    }
    lines = b"".join(reads_module.snapshot_pieces(image, 7, sensitive=False, ndjson=True))
    assert lines.endswith(b"\n") and [orjson.loads(x) for x in lines.splitlines()] == whole


def test_quorum_status(local, app, cluster):
    r = get(local, app, "/v1/quorum/status")
    s = r.json()
    node = local.node
    assert s["clusterId"] == local.cluster_id
    assert (s["nodeId"], s["leaderId"], s["leaderUrl"]) == (0, 0, node.config.advertised_url)
    assert s["controllerEpoch"] == node.image.controller_epoch >= 1
    assert s["raftTerm"] >= 1
    assert s["highWatermark"] == s["lastAppliedOffset"] + 1 == node.image.next_offset
    assert s["metadataVersion"] == 12
    assert s["auth"] == "off"
    assert s["active"] is True and s["ready"] is True
    # What replay ignored and why (none in a log this controller wrote).
    assert (s["ignoredRecords"], s["ignoredReasons"]) == (
        node.image.ignored_records,
        list(node.image.ignored_reasons),
    )
    (voter,) = s["voters"]
    assert voter["nodeId"] == 0
    assert voter["url"] == node.config.advertised_url
    assert voter["raftAddress"] == node.config.voters[0]
    assert voter["connected"] is True
    assert voter["lagRecords"] == 0
    assert abs(voter["lastCaughtUpMs"] - time.time() * 1000) < 60_000


def test_probes(local, app):
    assert get(local, app, "/livez").json()["status"] == "alive"
    assert get(local, app, "/readyz").json() == {"status": "ready", "reason": None}


def test_metrics(local, app, cluster):
    get(local, app, "/v1/brokers/1")
    text = get(local, app, "/metrics").text
    image = local.node.image

    def value(name):
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(f"{name} missing")

    assert value("metaquorum_active_controller") == 1
    assert value("metaquorum_fenced_broker_count") == 1  # broker 3
    assert value("metaquorum_active_broker_count") == 2
    assert value("metaquorum_in_controlled_shutdown_broker_count") == 1
    assert value("metaquorum_last_applied_offset") == image.last_offset
    assert value("metaquorum_offline_partitions_count") == sum(
        1 for t in image.topics.values() for p in t.partitions.values() if p.leader < 0
    )
    assert value("metaquorum_preferred_replica_imbalance_count") == sum(
        1 for t in image.topics.values() for p in t.partitions.values() if p.leader != p.replicas[0]
    )
    assert value("metaquorum_leader_balance_elections_total") == 0
    assert value("metaquorum_quiet_heartbeats_total") == local.node.stats.quiet_heartbeats
    assert value("metaquorum_commit_lag") >= 0
    # Kafka's LastAppliedRecordTimestamp and LagMs: the last batch with records.
    stamp = value("metaquorum_last_applied_record_timestamp_ms")
    assert stamp == local.node.sm.last_applied_timestamp_ms > 0
    assert 0 <= value("metaquorum_last_applied_record_lag_ms") <= time.time() * 1000 - stamp + 1
    assert value("metaquorum_noop_records_total") == 0  # this node runs with the interval at 0
    assert value("metaquorum_queue_depth") == 0
    assert value("metaquorum_voters") == 1 and value("metaquorum_voter") == 1
    assert value("metaquorum_batch_records_count") >= 1
    assert value("metaquorum_commit_latency_seconds_count") >= 1
    assert value("metaquorum_journal_sync_duration_seconds_count") == value(
        "metaquorum_journal_syncs_total"
    )
    # One process serves it all here: the collector's figures are the core's.
    assert 'metaquorum_gc_collections_total{generation="2",process="core"}' in text
    assert 'metaquorum_gc_frozen_objects{process="core"}' in text
    assert (
        'metaquorum_http_request_duration_seconds_count{method="GET",route="/v1/brokers/{id}"}'
        in text
    )
    assert (
        'metaquorum_http_responses_total{method="GET",route="/v1/brokers/{id}",status="200"}'
        in text
    )
