"""The PySpark audit, timelines and report, on a real local Spark (one shared
session): a clean log passes, every planted violation is found once at its
offset and nothing else, a log exported from a real 3-voter cluster audits
clean, and the report renders with its charts."""

import asyncio
import base64
import html
import re
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import orjson
import pyarrow.parquet as pq
import pytest

import pipeline.audit
from metaquorum.cli import main
from metaquorum.export import run_export
from metaquorum.synth_log import PLANT_KINDS, run_synth_log
from pipeline.audit import run_audit
from pipeline.cluster import spark_failure
from pipeline.export_files import ExportDirError, export_files
from pipeline.replay_audit import read_records, read_rows, replay_audit
from pipeline.run import audit_export
from pipeline.schema import WHO_COLUMNS, WHO_KEYS
from pipeline.spark import read_export

from .cluster import Cluster
from .invariant_corpus import PlantedLog, corpus, legacy, write_export
from .pipeline_scenario import broker_scenario

pytestmark = pytest.mark.slow

CORPUS = corpus()
LEGACY_TOO = ("leader-fenced-in-its-batch",)


def test_a_clean_log_passes(spark, tmp_path):
    log = tmp_path / "clean"
    run_synth_log(20_000, str(log), quiet=True)
    result = audit_export(spark, str(log), str(tmp_path / "out"), echo=lambda _: None)
    assert result.violations == 0 and result.counts == {}
    assert result.summary["fencings"] > 0 and result.summary["controlled shutdowns"] > 0
    assert result.summary["ISR shrinks"] > 0 and result.summary["ISR expands"] > 0
    states = pq.read_table(tmp_path / "out" / "broker_states").to_pylist()
    assert {s["state"] for s in states} == {"active", "fenced", "controlled shutdown"}


def test_every_planted_violation_is_found_once_at_its_offset_and_the_report_renders(
    spark, tmp_path, capsys, monkeypatch
):
    log = tmp_path / "planted"
    summary = run_synth_log(8_000, str(log), plant_kinds=list(PLANT_KINDS), quiet=True)
    expected = sorted((p["offset"], p["rule"]) for p in summary["planted"])
    report = tmp_path / "report.html"
    lines = []
    result = audit_export(spark, str(log), str(tmp_path / "out"), str(report), lines.append)
    assert result.violations == len(expected) and result.report == str(report)
    assert [line.split(" (")[0] for line in lines[:4]] == [
        f"[1/4] reading {log}",
        f"[2/4] auditing {summary['records']:,} records",
        "[3/4] building timelines",
        f"[4/4] writing the report {report}",
    ]
    found = pq.read_table(tmp_path / "out" / "violations").to_pylist()
    assert sorted((v["offset"], v["check"]) for v in found) == expected
    # The single-process replay of the same checks says exactly the same, word
    # for word, who included.
    replayed, _ = replay_audit(str(log), with_who=True)
    assert [tuple(v.values()) for v in found] == replayed
    # Each violation names the who synth-log wrote on the planted batch.
    planted_who = {p["offset"]: p["who"] for p in summary["planted"]}
    for v in found:
        who = {k: v[c] for k, c in zip(WHO_KEYS, WHO_COLUMNS, strict=True) if v[c]}
        assert who == planted_who[v["offset"]] and v["batch_offset"] == v["offset"], v

    page = report.read_text()
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert len(images) == 4  # the three timelines and the writes by principal
    for b64 in images:
        png = base64.b64decode(b64)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", png[16:24])
        assert width > 600 and height > 200
    for v in found:  # each links to its batch, whose row names who asked for it
        assert f"<a href='#batch-{v['offset']}'>{v['offset']}</a>" in page
        assert f"id='batch-{v['offset']}'" in page
        assert f"<td>{html.escape(v['who_principal'])}" in page
    assert f"{len(expected)} violation(s) found" in page
    who_section = page.split("<h2 id='who'>Who changed what</h2>")[1].split("<h2>")[0]
    for principal, api in (
        ("broker:cert/CN=kafka-1", "AlterPartition"),
        ("admin:token/ops-alice", "CreateTopics"),
        ("admin:cert/CN=ops-bob", "IncrementalAlterConfigs"),
        ("controller", "FenceExpiredSessions"),
    ):
        assert f"<tr><td>{html.escape(principal)}</td><td>{api}</td>" in who_section
    assert "Behind the violations" in who_section
    figures = orjson.loads((tmp_path / "out" / "summary.json").read_bytes())
    writes = figures["writesByPrincipal"]
    assert sum(w["records"] for w in writes) == summary["records"]  # every record has a who
    assert figures["summary"]["records with a who"] == summary["records"]

    # The command: a table on the terminal (wide enough not to fold), and exit code 1.
    monkeypatch.setenv("COLUMNS", "300")
    code = main(["audit", "--input", str(log), "--output", str(tmp_path / "cli")])
    out = capsys.readouterr().out
    assert code == 1
    assert (
        f"{len(expected)} violation(s)" in out
        and "by check: kip-380.change-at-current-epoch 1," in out
    )
    assert "controller WriteNoOp" in out


def test_a_log_exported_from_a_real_three_voter_cluster_audits_clean(spark, tmp_path):
    (tmp_path / "cluster").mkdir()
    c = Cluster(tmp_path / "cluster")
    try:
        c.start()
        c.wait_ready()
        leader = c.leader()
        follower = next(i for i in range(c.n) if i != leader)
        alive = asyncio.run(broker_scenario(c.url(follower), c.cluster_id))
        # A controller failover, then more broker life under the new controller.
        c.post(leader, "/v1/quorum/transfer-leadership", {})
        new = c.leader(among=[i for i in range(c.n) if i != leader])
        asyncio.run(broker_scenario(c.url(new), c.cluster_id, "after", (4, 5, 6), alive))
        exported = tmp_path / "export"
        run_export(str(exported), url=c.url(follower), fmt="jsonl", quiet=True)
    finally:
        c.close()
    rows = list(read_rows(str(exported)))
    assert [r[0] for r in rows] == list(range(len(rows)))
    assert sum(r[3] == "LEADER_CHANGE" for r in rows) >= 2
    result = audit_export(spark, str(exported), str(tmp_path / "out"), echo=lambda _: None)
    assert result.violations == 0, result.first_rows
    assert result.summary["controller failovers"] >= 1
    assert result.summary["controlled shutdowns"] == 2
    # The voters' who, counted by the audit: every record that carries one.
    with_who = sum(1 for r in read_records(str(exported)) if r["who_principal"])
    assert with_who > 0 and result.summary["records with a who"] == with_who
    summary = orjson.loads((tmp_path / "out" / "summary.json").read_bytes())
    assert summary["summary"]["records"] == len(rows)


# Every log of the corpus, and one as an export from before batch_offset.
AUDITED = CORPUS + [legacy(log) for log in CORPUS if log.name in LEGACY_TOO]
# A tiny audit is a dozen short Spark jobs (about 30 stages): their
# scheduling, not their work, is most of its time, so four audits at once on
# the shared session take less than half the time of one after another (213 s
# against 467 s for the corpus on this 2-core machine under load, measured
# with adaptive execution on).
CONCURRENT_AUDITS = 4


@dataclass
class CorpusAudit:
    found: list[tuple] | None = None
    replayed: list[tuple] | None = None
    legacy_records: int | None = None
    error: BaseException | None = None


@pytest.fixture(scope="module")
def corpus_audits(spark, tmp_path_factory) -> dict[str, CorpusAudit]:
    """The Spark audit and the replay of every corpus log, audited together
    once; each log's test reads its own outcome (and its error, if any)."""
    root = tmp_path_factory.mktemp("corpus")

    def audit(numbered: tuple[int, PlantedLog]) -> CorpusAudit:
        i, log = numbered
        try:
            export = write_export(log, str(root / f"log-{i}"))
            frames = run_audit(read_export(spark, export), 0, str(root / f"work-{i}"))
            found = sorted(tuple(r) for r in frames.violations.collect())
            replayed, _ = replay_audit(export)
            return CorpusAudit(found, replayed, frames.legacy_records)
        except Exception as e:  # noqa: BLE001 - reported by that log's own test
            return CorpusAudit(error=e)

    # Buckets of about one broker record each (the default is 8): the broker
    # spans of these short logs then cross bucket boundaries, as a long log's do.
    with (
        pytest.MonkeyPatch.context() as patch,
        ThreadPoolExecutor(CONCURRENT_AUDITS, thread_name_prefix="corpus-audit") as pool,
    ):
        patch.setattr(pipeline.audit, "SPANS_PER_BUCKET", 1)
        outcomes = list(pool.map(audit, enumerate(AUDITED)))
    return {log.name: outcome for log, outcome in zip(AUDITED, outcomes, strict=True)}


@pytest.mark.timeout(900)  # the first of them waits for the whole corpus
@pytest.mark.parametrize(
    "log", AUDITED, ids=[re.sub(r"[^\w-]+", "-", log.name).strip("-") for log in AUDITED]
)
def test_spark_and_the_replay_find_the_planted_corpus_alike(corpus_audits, log):
    """The Spark audit reports exactly the replay's violations, word for
    word, and those are the planted ones."""
    outcome = corpus_audits[log.name]
    if outcome.error is not None:
        raise outcome.error
    assert outcome.found == outcome.replayed, log.name
    assert [(v[0], v[2]) for v in outcome.found] == log.expected, log.name
    assert outcome.legacy_records == (len(log.records) if "legacy" in log.name else 0)


def test_an_export_given_as_a_url_is_listed_read_and_written_through_hadoop(spark, tmp_path):
    """``hdfs://`` and ``s3a://`` exports take the path ``file://`` takes here:
    Hadoop's FileSystem lists the input and writes summary.json, Spark the rest."""
    log = tmp_path / "log"
    summary = run_synth_log(3_000, str(log), plant_kinds=["gap"], quiet=True)
    url = f"file://{log}"
    result = audit_export(spark, url, echo=lambda _: None)
    assert result.output_dir == f"{url}-audit"
    figures = orjson.loads((tmp_path / "log-audit" / "summary.json").read_bytes())
    assert figures["summary"]["records"] == result.records == summary["records"]
    found = pq.read_table(tmp_path / "log-audit" / "violations").to_pylist()
    assert [(v["offset"], v["check"]) for v in found] == [
        (summary["planted"][0]["offset"], "log.offsets-dense")
    ]
    with pytest.raises(ExportDirError, match="is not a directory"):
        audit_export(spark, f"file://{tmp_path}/nowhere", echo=lambda _: None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ExportDirError, match="holds no exported records"):
        audit_export(spark, f"file://{tmp_path}/empty", echo=lambda _: None)
    # pyspark ships no S3 file system (hadoop-aws): said, with the setting that adds it.
    with pytest.raises(
        ExportDirError,
        match=r"no file system for s3a:// .*spark\.jars\.packages=org\.apache\.hadoop:hadoop-aws",
    ):
        audit_export(spark, "s3a://metaquorum/log", echo=lambda _: None)


def test_a_failed_spark_job_is_one_line_that_says_what_failed(spark):
    """Not a page of JVM stack, and the CLI's exit code 2, not 1 ("violations")."""
    with pytest.raises(Exception) as failed:
        spark.range(1).selectExpr("raise_error('the executor ran out of something')").collect()
    error = spark_failure(failed.value)
    assert error is not None and str(error).startswith("the audit failed in Spark: ")
    assert "the executor ran out of something" in str(error) and "\n" not in str(error)
    assert "spark.driver.memory" not in str(error)  # said only when memory ran out
    assert spark_failure(ValueError("not Spark's")) is None


def test_an_unregistered_broker_has_an_unregistered_span_and_the_report_renders(spark, tmp_path):
    """UnregisterBrokerRecord ends the broker's registration in the broker
    states (until it registers again), and the report draws the span."""
    log = next(log for log in CORPUS if log.name == "unregistered-and-back")
    export = write_export(log, str(tmp_path / "log"))
    # As an export from before the who columns: files without them.
    for f in export_files(export):
        pq.write_table(pq.read_table(f.path).drop_columns(list(WHO_COLUMNS)), f.path)
    assert not set(WHO_COLUMNS) & set(pq.read_schema(export_files(export)[0].path).names)
    report = tmp_path / "report.html"
    result = audit_export(spark, export, str(tmp_path / "out"), str(report), echo=lambda _: None)
    assert result.violations == 0
    assert result.summary["records with a who"] == 0
    assert "No record of this export carries a who" in report.read_text()
    unregistered = [r for r in log.records if r["type"] == "UNREGISTER_BROKER_RECORD"]
    gone = unregistered[0]["data"]["brokerId"]
    states = pq.read_table(tmp_path / "out" / "broker_states").to_pylist()
    spans = sorted((s["start_offset"], s["state"]) for s in states if s["broker_id"] == gone)
    assert (unregistered[0]["offset"], "unregistered") in spans
    assert [state for _, state in spans][-1] == "active"  # registered again, and unfenced
    # Drawn with the state's colour (an unknown state would fail the chart).
    assert report.read_text().count("data:image/png;base64,") == 3
    # Its elections link to their batches, listed without a who.
    page = report.read_text()
    elections = [r for r in log.records if r["type"] == "LEADER_CHANGE"]
    assert elections and all(f"<a href='#batch-{r['batchOffset']}'>" in page for r in elections)
    assert all(f"id='batch-{r['batchOffset']}'" in page for r in elections)
    assert "(no who)" in page
