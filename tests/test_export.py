"""``metaquorum export``, ``synth-log`` and the Python replay of the audit's
checks (no Spark here: tests/test_pipeline.py has the Spark ones)."""

import asyncio
import os
import shutil
import struct
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from metadata_records.codec import log_record_to_obj, record_data
from metadata_records.log_invariants import RULES as INVARIANTS
from metadata_records.records import (
    RECORD_TYPES,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    Endpoint,
    EntityData,
    FeatureLevelRecord,
    FeatureRange,
    Kind,
    LeaderChangeRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    Voter,
    VotersRecord,
)
from metaquorum.cli import main
from metaquorum.export import ExportError, _records, run_export
from metaquorum.synth_log import PLANT_KINDS, PLANT_RULES, run_synth_log
from pipeline.export_files import OffsetRangeWriter, export_files
from pipeline.replay_audit import read_records, read_rows, replay_audit, replay_checker, who_at
from pipeline.schema import COLUMN_NAMES, RENAMED, WHO_COLUMNS, WHO_KEYS, who_row

from .cluster import Cluster
from .conftest import running
from .invariant_corpus import corpus, legacy, write_export
from .pipeline_scenario import broker_scenario
from .test_cluster import register

CORPUS = corpus()
REGISTER = "REGISTER_BROKER_RECORD"

TID = "fPZv1VBsRFmnlRvmGcOW9w"
EVERY_TYPE = [
    LeaderChangeRecord(controller_epoch=1, leader_id=0, leader_url="http://c0"),
    VotersRecord(voters=(Voter(0, TID, "c0", 7071),)),
    FeatureLevelRecord(name="metadata.version", feature_level=12),
    RegisterBrokerRecord(
        broker_id=1,
        incarnation_id=TID,
        broker_epoch=2,
        end_points=(Endpoint("PLAINTEXT", "h", 9092, 0),),
        features=(FeatureRange("metadata.version", 6, 12),),
        rack="r1",
    ),
    BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=2, fenced=-1, version=1),
    UnregisterBrokerRecord(broker_id=1, broker_epoch=2),
    ProducerIdsRecord(broker_id=1, broker_epoch=2, next_producer_id=1000),
    ClientQuotaRecord(
        entity=(EntityData("user", "u"), EntityData("client-id", None)),
        key="producer_byte_rate",
        value=1024.0,
    ),
    AccessControlEntryRecord(
        id=TID,
        resource_type=2,
        resource_name="t",
        pattern_type=3,
        principal="User:a",
        host="*",
        operation=3,
        permission_type=3,
    ),  # fmt: skip
    RemoveAccessControlEntryRecord(id=TID),
    UserScramCredentialRecord(
        name="u", mechanism=1, salt=b"s", stored_key=b"k", server_key=b"v", iterations=4096
    ),
    RemoveUserScramCredentialRecord(name="u", mechanism=1),
    DelegationTokenRecord(
        owner="User:a",
        requester="User:b",
        renewers=("User:c", "User:d"),
        issue_timestamp=1,
        max_timestamp=3,
        expiration_timestamp=2,
        token_id="tok",
    ),  # fmt: skip
    RemoveDelegationTokenRecord(token_id="tok"),
    TopicRecord(name="t", topic_id=TID),
    ConfigRecord(resource_type=2, resource_name="t", name="min.insync.replicas", value="1"),
    PartitionRecord(partition_id=0, topic_id=TID, replicas=(1,), isr=(1,), leader=1),
    PartitionChangeRecord(partition_id=0, topic_id=TID, isr=(1,), leader=-2),
    NoOpRecord(),
    RemoveTopicRecord(topic_id=TID),
    UnregisterBrokerRecord(broker_id=1, broker_epoch=2),
]


def _snake(key: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_every_record_type_round_trips_through_the_flat_schema(tmp_path, fmt):
    assert {r.TYPE for r in EVERY_TYPE} == set(RECORD_TYPES)
    w = OffsetRangeWriter(str(tmp_path), fmt)
    for i, r in enumerate(EVERY_TYPE):
        w.add(i, 1000 + i, 1, r, batch_offset=i - i % 2)
    w.flush()
    (f,) = export_files(str(tmp_path))
    if fmt == "parquet":
        rows = pq.read_table(f.path).to_pylist()
    else:
        rows = [orjson.loads(line) for line in open(f.path, "rb")]
    assert [list(row) for row in rows] == [COLUMN_NAMES] * len(EVERY_TYPE)
    for i, (row, record) in enumerate(zip(rows, EVERY_TYPE, strict=True)):
        assert (row["offset"], row["timestamp_ms"], row["type"]) == (i, 1000 + i, record.TYPE)
        assert row["batch_offset"] == i - i % 2
        for key, value in record_data(record).items():
            spec = next(s for s in record.FIELDS if s.key == key)
            column = RENAMED.get((record.TYPE, spec.attr), _snake(key))
            if key in ("endPoints", "features", "voters", "entity"):
                value = [{_snake(k): v for k, v in item.items()} for item in value]
            if spec.kind is Kind.BYTES and fmt == "parquet":  # jsonl: base64, as the codec
                value = getattr(record, spec.attr)
            assert row[column] == (list(value) if isinstance(value, tuple) else value), column


@pytest.mark.slow
def test_a_data_dir_export_has_the_offsets_the_service_serves(voter, tmp_path):
    alive = asyncio.run(broker_scenario(voter.url(0), voter.cluster_id))
    r = voter.get(0, "/v1/log", params={"fromOffset": 0, "maxRecords": 10_000})
    served = r.json()["records"]
    assert len(served) > 20

    by_url = tmp_path / "by-url"
    result = run_export(str(by_url), url=voter.url(0), fmt="jsonl", records_per_file=7, quiet=True)
    assert (result.first_offset, result.next_offset) == (0, len(served))
    assert len(result.files) == -(-len(served) // 7)  # ceil: one file per 7 records

    by_dir = tmp_path / "by-dir"
    run_export(str(by_dir), data_dir=str(voter.data_dir(0)), include_uncommitted=True, quiet=True)

    url_rows = list(read_rows(str(by_url)))
    dir_rows = list(read_rows(str(by_dir)))
    # The lone voter's journal is all committed; it may hold a barrier more, never less.
    assert dir_rows[: len(url_rows)] == url_rows
    assert [row[0] for row in url_rows] == [rec["offset"] for rec in served]
    assert [row[1:4] for row in url_rows] == [
        (rec["timestampMs"], rec["controllerEpoch"], rec["type"]) for rec in served
    ]
    assert replay_audit(str(by_url))[0] == []
    # Who asked for each record: what the node serves, by URL and from the data dir alike.
    whos = [tuple(r[c] for c in WHO_COLUMNS) for r in read_records(str(by_url))]
    assert whos == [who_row(rec.get("who")) for rec in served]
    dir_whos = [tuple(r[c] for c in WHO_COLUMNS) for r in read_records(str(by_dir))]
    assert dir_whos[: len(whos)] == whos
    registered = [w for w, rec in zip(whos, served, strict=True) if rec["type"] == REGISTER]
    assert registered and all(w[1] == "RegisterBroker" and w[0] and w[3] for w in registered)

    # More records, then the same command again: only the new ones are appended.
    asyncio.run(broker_scenario(voter.url(0), voter.cluster_id, "more", (11, 12, 13), alive))
    again = run_export(str(by_url), url=voter.url(0), fmt="jsonl", quiet=True)
    assert again.first_offset == len(served)
    offsets = [row[0] for row in read_rows(str(by_url))]
    assert offsets == list(range(len(offsets))) and len(offsets) > len(served)
    # --from behind the end skips what is there; --from past it would leave a gap.
    behind = run_export(str(by_url), url=voter.url(0), fmt="jsonl", from_offset=3, quiet=True)
    assert behind.records == 0 and "continuing from" in behind.note
    with pytest.raises(ExportError, match=f"--from {len(offsets) + 5} would leave a gap"):
        run_export(str(by_url), url=voter.url(0), fmt="jsonl", from_offset=len(offsets) + 5)
    with pytest.raises(ExportError, match="already holds jsonl files"):
        run_export(str(by_url), url=voter.url(0), fmt="parquet")

    # A corrupt journal entry: the export names the Raft entry and the offset,
    # and leaves no file behind.
    broken = tmp_path / "broken-dir"
    shutil.copytree(voter.data_dir(0), broken)
    journal = broken / "raft.journal"
    data = bytearray(journal.read_bytes())
    at = data.index(b'"TOPIC_RECORD"')
    data[at + 1 : at + 6] = b"TOPIX"
    journal.write_bytes(bytes(data))
    out = tmp_path / "from-broken"
    with pytest.raises(ExportError, match=r"Raft entry \d+ \(at metadata offset \d+\).*TOPIX"):
        run_export(str(out), data_dir=str(broken), include_uncommitted=True, quiet=True)
    assert os.listdir(out) == []

    # A truncated journal: the error says where the good records end.
    data = bytearray((voter.data_dir(0) / "raft.journal").read_bytes())
    (end,) = struct.unpack_from("<I", data, 36)
    journal.write_bytes(bytes(data[: end - 10]))
    with pytest.raises(ExportError, match=r"truncated.*last good record is at offset \d+"):
        run_export(str(tmp_path / "from-cut"), data_dir=str(broken), include_uncommitted=True)


@pytest.mark.slow
def test_exports_start_from_the_snapshot_once_the_log_is_compacted(tmp_path):
    (tmp_path / "c").mkdir()
    # A history window of 1 record: offset 0 is in neither the log nor the history.
    c = Cluster(
        tmp_path / "c",
        voters=1,
        extra=["--compaction-entries", "5", "--history-retention-records", "1"],
    )
    by_dir, by_url = tmp_path / "by-dir", tmp_path / "by-url"
    try:
        c.start()
        c.wait_ready()
        c.leader()
        asyncio.run(broker_scenario(c.url(0), c.cluster_id))
        pads = iter(range(1000))  # broker ids 100 on

        def snapshot_holds_the_partitions() -> bool:
            # A snapshot taken early holds the brokers only; one more write
            # each try moves the log on, so a later compaction comes.
            shutil.rmtree(by_dir, ignore_errors=True)
            if (c.data_dir(0) / "raft.snapshot").exists():
                run_export(
                    str(by_dir), data_dir=str(c.data_dir(0)), include_uncommitted=True, quiet=True
                )
                kinds = {r[3] for r in read_rows(str(by_dir)) if r[4]}
                if "PARTITION_RECORD" in kinds:
                    return True
            register(c, 0, 100 + next(pads))  # a registration always writes a record
            return False

        c.wait(snapshot_holds_the_partitions, 60, "a snapshot holding the topic's partitions")
        # Restarted, the node holds only the log after its snapshot: 410 from offset 0.
        assert c.stop(0) == 0
        c.start(0)
        c.wait_ready()
        c.leader()
        assert c.get(0, "/v1/log", params={"fromOffset": 0}).status_code == 410
        run_export(str(by_url), url=c.url(0), quiet=True)
    finally:
        c.close()
    for d in (by_dir, by_url):
        rows = list(read_rows(str(d)))
        snapshot = [r for r in rows if r[4]]
        log = [r for r in rows if not r[4]]
        assert snapshot and {r[0] for r in snapshot} == {snapshot[0][0]}, d
        assert {r[3] for r in snapshot} >= {"REGISTER_BROKER_RECORD", "PARTITION_RECORD"}
        start = snapshot[0][0] + 1
        assert [r[0] for r in log] == list(range(start, start + len(log))), d
        assert replay_audit(str(d))[0] == []


def test_a_corrupt_or_truncated_page_names_the_offset():
    good = [
        orjson.dumps(log_record_to_obj(5 + i, 1, 1, r, 5))
        for i, r in enumerate([NoOpRecord(), NoOpRecord()])
    ]
    assert [off for off, *_ in _records(b"\n".join(good), 5, "log")] == [5, 6]
    with pytest.raises(ExportError, match="the record at offset 6 is not JSON"):
        list(_records(good[0] + b"\n" + good[1][:-7], 5, "log"))
    with pytest.raises(ExportError, match="expected offset 6, got 5"):
        list(_records(good[0] + b"\n" + good[0], 5, "log"))
    for wrong in (7, -1, "5", True):  # after its own offset, negative, not an integer
        bad = orjson.dumps({**orjson.loads(good[1]), "batchOffset": wrong})
        with pytest.raises(ExportError, match="offset 6 has batchOffset .* not an offset at"):
            list(_records(good[0] + b"\n" + bad, 5, "log"))
    older = orjson.loads(good[1])
    del older["batchOffset"]  # a server from before batchOffset: kept as unknown
    read = list(_records(good[0] + b"\n" + orjson.dumps(older), 5, "log"))
    assert [r[4] for r in read] == [5, None]
    bad = orjson.dumps({**orjson.loads(good[1]), "type": "NO_SUCH_RECORD"})
    with pytest.raises(ExportError, match="offset 6: unknown record type 'NO_SUCH_RECORD'"):
        list(_records(good[0] + b"\n" + bad, 5, "log"))


WHO = {
    "principal": "broker:cert/CN=kafka-3",
    "api": "AlterPartition",
    "address": "10.0.0.3:51234",
    "requestId": "req-1",
}
FENCING = {"principal": "controller", "api": "FenceExpiredSessions", "rule": "session expired"}


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_records_with_a_who_are_exported_with_the_who_columns(tmp_path, fmt):
    """GET /v1/log's "who" (issue 43's contract) read by the export's own
    parsing into the five who columns; a record without one (a server or a
    batch from before it) has them null, as a file written before they existed
    reads back; a who of the wrong shape stops the export at its offset."""
    lines = [
        {**log_record_to_obj(0, 1, 1, NoOpRecord(), 0), "who": WHO},
        {**log_record_to_obj(1, 1, 1, NoOpRecord(), 0), "who": WHO},
        {**log_record_to_obj(2, 2, 1, NoOpRecord(), 2), "who": FENCING},
        log_record_to_obj(3, 3, 1, NoOpRecord(), 3),
    ]
    body = b"\n".join(orjson.dumps(obj) for obj in lines)
    old = tmp_path / "old"  # as written before the who columns: files without them
    writer = OffsetRangeWriter(str(old), fmt, records_per_file=2)
    for off, ts, epoch, record, batch, who in _records(body, 0, "log"):
        writer.add(off, ts, epoch, record, batch_offset=batch, who=who)
    writer.flush()
    first = export_files(str(old))[0].path
    if fmt == "parquet":
        pq.write_table(pq.read_table(first).drop_columns(list(WHO_COLUMNS)), first)
    else:
        rows = [orjson.loads(line) for line in Path(first).read_bytes().splitlines()]
        Path(first).write_bytes(
            b"".join(
                orjson.dumps({k: v for k, v in r.items() if k not in WHO_COLUMNS}) + b"\n"
                for r in rows
            )
        )
    got = [tuple(r[c] for c in WHO_COLUMNS) for r in read_records(str(old))]
    assert got == [
        (None,) * 5,  # the old file's two
        (None,) * 5,
        ("controller", "FenceExpiredSessions", None, None, "session expired"),
        (None,) * 5,
    ]
    new = tmp_path / "new"
    writer = OffsetRangeWriter(str(new), fmt)
    for off, ts, epoch, record, batch, who in _records(body, 0, "log"):
        writer.add(off, ts, epoch, record, batch_offset=batch, who=who)
    writer.flush()
    rows = list(read_records(str(new)))
    assert [tuple(r[c] for c in WHO_COLUMNS) for r in rows][:2] == [
        ("broker:cert/CN=kafka-3", "AlterPartition", "10.0.0.3:51234", "req-1", None)
    ] * 2
    if fmt == "parquet":  # the columns are in the file, as strings
        schema = pq.read_schema(export_files(str(new))[0].path)
        assert all(str(schema.field(c).type) == "string" for c in WHO_COLUMNS)
    # The replay reads the who of a record by offset, old files and new alike.
    assert who_at(str(old), {0, 2})[2][:5] == (*got[2],)[:5]
    assert who_at(str(old), {0})[0] == (None,) * 5 + (0,)
    for wrong in ("alice", {"api": "AlterPartition"}, {**WHO, "address": 7}, {**WHO, "api": ""}):
        bad = orjson.dumps({**lines[1], "who": wrong})
        with pytest.raises(ExportError, match="offset 1 has who .* not an object of strings"):
            list(_records(orjson.dumps(lines[0]) + b"\n" + bad, 0, "log"))


def test_export_refuses_what_it_cannot_read(tmp_path, capsys):
    assert main(["export", "--data-dir", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["export", "--data-dir", str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "holds neither raft.journal nor raft.snapshot" in capsys.readouterr().err
    assert main(["export", "--url", "http://127.0.0.1:9", "--out", str(tmp_path / "o")]) == 2
    assert "is the node up?" in capsys.readouterr().err
    assert main(["audit", "--input", str(empty)]) == 2
    assert "holds no exported records" in capsys.readouterr().err
    assert main(["audit", "--input", str(empty), "--shuffle-partitions", "0"]) == 2
    assert "--shuffle-partitions must be at least 1, not 0" in capsys.readouterr().err


# ---------------------------------------------------------------- an output named by a URL

BUCKET = "metaquorum"


@pytest.fixture
def s3(monkeypatch):
    """A local S3 API on loopback (moto's server), named by AWS_ENDPOINT_URL
    as for MinIO or Ceph, with a bucket; yields pyarrow's client of it."""
    import pyarrow.fs as pafs
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        for key, value in (("AWS_ENDPOINT_URL", f"http://{host}:{port}"),
                           ("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                           ("AWS_DEFAULT_REGION", "us-east-1")):  # fmt: skip
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
        fs = pafs.S3FileSystem(
            endpoint_override=f"{host}:{port}", scheme="http", allow_bucket_creation=True
        )
        fs.create_dir(BUCKET)
        yield fs
    finally:
        server.stop()


def _s3_names(fs, path: str) -> list[str]:
    import pyarrow.fs as pafs

    return sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(path)))


def test_synth_log_writes_the_same_files_to_a_file_url_and_to_s3_as_to_a_directory(tmp_path, s3):
    """One writer for every URL (pyarrow's file systems): ``file://`` on a
    shared mount and ``s3a://`` (Spark's name for S3) hold what a path holds."""
    args = dict(plant_kinds=["gap"], records_per_file=1_000, quiet=True)
    by_path = run_synth_log(2_500, str(tmp_path / "path"), **args)
    by_file_url = run_synth_log(2_500, f"file://{tmp_path}/url", **args)
    by_s3 = run_synth_log(2_500, f"s3a://{BUCKET}/logs/synth/", **args)
    names = sorted(os.listdir(tmp_path / "path"))
    assert len(names) == 4 and "PLANTED.json" in names  # 3 files of records, and the plant
    assert sorted(os.listdir(tmp_path / "url")) == names
    assert _s3_names(s3, f"{BUCKET}/logs/synth") == names
    records = [n for n in names if n.startswith("records-")]
    assert by_file_url["files"] == [f"file://{tmp_path}/url/{n}" for n in records]
    assert by_s3["files"] == [f"s3a://{BUCKET}/logs/synth/{n}" for n in records]
    for name in names:
        path = tmp_path / "path" / name
        if name.endswith(".parquet"):
            table = pq.read_table(path)
            assert pq.read_table(tmp_path / "url" / name).equals(table)
            assert pq.read_table(f"{BUCKET}/logs/synth/{name}", filesystem=s3).equals(table)
        else:
            with s3.open_input_stream(f"{BUCKET}/logs/synth/{name}") as f:
                assert f.read() == path.read_bytes()
    assert by_s3["planted"] == by_file_url["planted"] == by_path["planted"]
    # An export directory's files only: a new log refuses one that holds a log.
    with pytest.raises(Exception, match="already holds an exported log"):
        run_synth_log(100, f"s3a://{BUCKET}/logs/synth", quiet=True)


def test_an_export_to_s3_continues_after_its_last_file_and_leaves_no_partial_file(
    voter, tmp_path, s3, capsys
):
    asyncio.run(broker_scenario(voter.url(0), voter.cluster_id, "s3", (21, 22, 23)))
    url = f"s3a://{BUCKET}/export"
    # What a crashed export left: a hidden temporary object, never a complete file.
    with s3.open_output_stream(f"{BUCKET}/export/.tmp-records-00000000000000000000-x.parquet") as f:
        f.write(b"half a file")
    first = run_export(url, url=voter.url(0), records_per_file=9, quiet=True)
    local = run_export(str(tmp_path / "local"), url=voter.url(0), records_per_file=9, quiet=True)
    assert (first.first_offset, first.records) == (0, local.records) and local.records > 20
    names = _s3_names(s3, f"{BUCKET}/export")
    assert names == sorted(os.listdir(tmp_path / "local"))
    assert [f"{url}/{n}" for n in names] == first.files
    rows = pq.read_table([f"{BUCKET}/export/{n}" for n in names][0], filesystem=s3)
    assert rows.equals(pq.read_table(tmp_path / "local" / names[0]))
    # Run again: nothing new; after more records, only those, after the last file.
    assert run_export(url, url=voter.url(0), quiet=True).records == 0
    asyncio.run(broker_scenario(voter.url(0), voter.cluster_id, "s3-more", (24, 25, 26)))
    more = run_export(url, url=voter.url(0), quiet=True)
    assert more.first_offset == first.next_offset and more.records > 0
    with pytest.raises(ExportError, match="already holds parquet files"):
        run_export(url, url=voter.url(0), fmt="jsonl", quiet=True)
    # Storage that cannot take it: named, with nothing written.
    capsys.readouterr()
    code = main(["export", "--url", voter.url(0), "--out", "s3a://no-such-bucket/export"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert "cannot write to s3a://no-such-bucket/export" in err and "create it first" in err, err


def test_an_output_url_pyarrow_cannot_open_is_named(tmp_path, capsys):
    for out, says in (
        ("hdfs://127.0.0.1:9/log", "pyarrow writes to HDFS through Hadoop's libhdfs"),
        ("nosuch://bucket/log", "cannot open nosuch://bucket/log"),
        ("s3a:///log", "no bucket named"),
    ):
        assert main(["synth-log", "--records", "10", "--out", out]) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err, err
        assert len(err.splitlines()) <= 3, err  # no page of JVM search paths


# ---------------------------------------------------------------- synth-log


def test_a_synthetic_log_audits_clean_and_covers_broker_life(tmp_path):
    summary = run_synth_log(30_000, str(tmp_path), quiet=True, records_per_file=10_000)
    assert summary["records"] >= 30_000 and len(summary["files"]) == 4
    rows = list(read_rows(str(tmp_path)))
    assert [r[0] for r in rows] == list(range(len(rows)))
    types = {r[3] for r in rows}
    assert {"REGISTER_BROKER_RECORD", "PARTITION_CHANGE_RECORD", "LEADER_CHANGE"} <= types
    changes = [r for r in rows if r[3] == "BROKER_REGISTRATION_CHANGE_RECORD"]
    assert {r[9] for r in changes} >= {1, -1}  # fenced and unfenced
    assert any(r[10] == 1 for r in changes)  # a controlled shutdown
    assert replay_audit(str(tmp_path)) == ([], len(rows))


def test_export_files_are_in_row_groups_spark_can_split_and_local_spark_gets_few_partitions(
    tmp_path, monkeypatch
):
    import pipeline.export_files as files
    from pipeline.spark import local_cores, session_defaults

    # Spark splits a Parquet file into tasks between row groups only.
    monkeypatch.setattr(files, "ROW_GROUP_ROWS", 1_000)
    summary = run_synth_log(2_500, str(tmp_path), quiet=True, records_per_file=2_000)
    groups = [pq.ParquetFile(f).metadata.num_row_groups for f in summary["files"]]
    assert summary["records"] < 3_000 and groups == [2, 1]  # 2,000 records, then the rest
    # The session's defaults: 2 shuffle partitions a core on local[N], Spark's own elsewhere.
    assert [local_cores(m) for m in ("local", "local[3]", "local[2, 4]", "yarn")] == [1, 3, 2, None]
    assert local_cores("local[*]") == os.cpu_count()
    local = session_defaults("local[2]")
    assert local["spark.sql.shuffle.partitions"] == "4" and local["spark.driver.memory"] == "2g"
    cluster = session_defaults("spark://127.0.0.1:7077")
    assert "spark.sql.shuffle.partitions" not in cluster and "spark.driver.memory" not in cluster
    assert local["spark.sql.adaptive.enabled"] == cluster["spark.sql.adaptive.enabled"] == "true"
    # C1 alone for a local audit of a log known to be short; C2 too for a long or unknown one.
    jit = "spark.driver.extraJavaOptions"
    assert "-XX:TieredStopAtLevel=1" in session_defaults("local[2]", 1_000_000)[jit]
    assert jit not in local and jit not in session_defaults("local[2]", 10_000_000)
    assert jit not in session_defaults("spark://127.0.0.1:7077", 1_000)


@pytest.mark.parametrize("kind", PLANT_KINDS)
def test_each_planted_violation_is_found_once_at_its_offset(tmp_path, kind):
    summary = run_synth_log(8_000, str(tmp_path), plant_kinds=[kind], quiet=True)
    (planted,) = summary["planted"]
    assert orjson.loads((tmp_path / "PLANTED.json").read_bytes()) == [planted]
    violations, _ = replay_audit(str(tmp_path), with_who=True)
    assert planted["rule"] == PLANT_RULES[kind] and planted["rule"] in INVARIANTS
    assert [(v[0], v[2]) for v in violations] == [(planted["offset"], planted["rule"])], violations
    # The replay names who synth-log wrote on the planted batch (a batch of its own).
    (v,) = violations
    assert {k: w for k, w in zip(WHO_KEYS, v[5:10], strict=True) if w} == planted["who"]
    assert v[10] == planted["offset"]


def test_plant_takes_the_invariant_id_as_well_as_its_word(tmp_path, capsys):
    out = tmp_path / "log"
    args = ["synth-log", "--records", "8000", "--out", str(out), "--format", "jsonl"]
    assert main([*args, "--plant", "kip-841.isr-adds-only-active", "--plant", "gap"]) == 0
    printed = capsys.readouterr().out
    assert "planted kip841 (kip-841.isr-adds-only-active) at offset" in printed
    assert "planted gap (log.offsets-dense) at offset" in printed
    planted = orjson.loads((out / "PLANTED.json").read_bytes())
    assert [(p["kind"], p["rule"]) for p in planted] == [
        ("kip841", "kip-841.isr-adds-only-active"),
        ("gap", "log.offsets-dense"),
    ]
    with pytest.raises(SystemExit):
        main([*args, "--plant", "kip-841"])  # the old id is neither a word nor an id
    assert "invalid choice: 'kip-841'" in capsys.readouterr().err


def test_synth_log_refuses_bad_input(tmp_path, capsys):
    assert main(["synth-log", "--records", "0", "--out", str(tmp_path / "a")]) == 2
    assert "--records must be at least 1" in capsys.readouterr().err
    run_synth_log(100, str(tmp_path / "b"), quiet=True)
    assert main(["synth-log", "--records", "100", "--out", str(tmp_path / "b")]) == 2
    assert "already holds an exported log" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
@pytest.mark.parametrize("log", CORPUS + [legacy(log) for log in CORPUS], ids=lambda log: log.name)
def test_the_replay_audit_finds_the_planted_corpus(tmp_path, fmt, log):
    violations, rows = replay_audit(write_export(log, str(tmp_path), fmt))
    assert [(v[0], v[2]) for v in violations] == log.expected
    assert rows == len(log.records)


def test_an_export_from_before_batch_offset_reads_as_runs_of_one_time_and_epoch(tmp_path):
    # A Parquet file written without the column at all, as older exports are.
    log = next(log for log in CORPUS if log.name == "leader-fenced-in-its-batch")
    write_export(log, str(tmp_path))
    (f,) = export_files(str(tmp_path))
    table = pq.read_table(f.path)
    pq.write_table(table.drop(["batch_offset"]), f.path)
    checker = replay_checker(str(tmp_path))
    assert [(v.offset, v.rule) for v in checker.finish()] == log.expected
    assert checker.legacy_records == len(log.records)


SENSITIVE_TOKENS = "admin-token admin\nbroker-token broker\nread-token read\n"


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_export_writes_sensitive_values_only_when_an_admin_asks(tmp_path, capsys, workers):
    """Issue 40: by URL, the export writes (redacted) for a sensitive config
    whatever its token; --include-sensitive writes the value with an admin's
    token and stops with a clear refusal with any other. In both HTTP layouts:
    with workers, the log is served by a worker's copy of it."""
    tokens = tmp_path / "tokens"
    tokens.write_text(SENSITIVE_TOKENS)
    (tmp_path / "c").mkdir()
    c = Cluster(tmp_path / "c", voters=1, extra=["--tokens-file", str(tokens),
                                                 "--http-workers", workers])  # fmt: skip
    c.client.headers["Authorization"] = "Bearer admin-token"
    secret = "hunter2-keystore"
    with running(c):
        body = {"resources": [{"resourceType": 4, "resourceName": "1", "configs": [
            {"name": "ssl.keystore.password", "configOperation": 0, "value": secret}]}]}  # fmt: skip
        assert c.post(0, "/v1/configs", body).json()["responses"][0]["errorName"] == "NONE"
        c.wait(lambda: secret in c.get(0, "/v1/log").text, 10, "the config in the log")
        seen = {
            token: c.get(0, "/v1/log", headers={"Authorization": f"Bearer {token}"}).text
            for token in ("admin-token", "broker-token", "read-token")
        }
        assert [secret in seen[t] for t in seen] == [True, True, False]
        assert "(redacted)" in seen["read-token"]

        def exported(name, token, **kw):
            out = tmp_path / name
            run_export(str(out), url=c.url(0), token=token, fmt="jsonl", quiet=True, **kw)
            return "".join(p.read_text() for p in out.rglob("*.jsonl"))

        for token in ("admin-token", "broker-token", "read-token"):
            text = exported(f"plain-{token}", token)
            assert secret not in text and "(redacted)" in text, token
        assert secret in exported("full", "admin-token", include_sensitive=True)
        for token in ("broker-token", "read-token"):
            with pytest.raises(ExportError, match="--include-sensitive needs an admin token"):
                exported(f"refused-{token}", token, include_sensitive=True)
            assert not list((tmp_path / f"refused-{token}").rglob("*.jsonl"))
        out = str(tmp_path / "cli")
        args = ["export", "--url", c.url(0), "--out", out, "--token", "read-token"]
        assert main([*args, "--include-sensitive"]) == 2
        assert "needs an admin token or certificate" in capsys.readouterr().err
