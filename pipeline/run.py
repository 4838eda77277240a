"""``metaquorum audit``: load an export, audit it, build the timelines, write
the report. One progress line per stage; the exit code says whether every
invariant held."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import functions as F

from .audit import log_overview, run_audit
from .cluster import (
    MASTER_HINT,
    ClusterError,
    ExecutorWatch,
    check_master_reachable,
    spark_failure,
    unreadable_input,
    wait_for_executors,
)
from .export_files import export_files, input_format
from .report import ReportData, render, who_totals
from .spark import build_session, is_url, listing, read_export, submitted_master, write_text
from .timelines import (
    broker_intervals,
    controller_changes,
    duration_summaries,
    intervals,
    partition_timeline,
    per_minute,
)
from .who import batch_whos, bucket_ms, with_who, writes

TABLE_ROWS = 50  # violations printed on the terminal
REPORT_ROWS = 1000  # violations listed in the report


@dataclass
class AuditResult:
    records: int
    violations: int
    counts: dict[str, int]
    first_rows: list[tuple]
    output_dir: str
    report: str | None
    summary: dict


def legacy_note(records: int) -> str:
    return (
        f"note: {records:,} records have no batch_offset (exported before it existed): each "
        "run of records with one timestamp and controller epoch is checked as one batch, so "
        "the batch rules (partition.leader-active-in-isr, partition.inactive-leaves-isr) are "
        "checked at fewer boundaries; export again from a current node for exact batches"
    )


def default_output(input_dir: str) -> str:
    return (input_dir if is_url(input_dir) else os.path.abspath(input_dir)).rstrip("/") + "-audit"


def audit_export(
    spark,
    input_dir: str,
    output_dir: str | None = None,
    report_path: str | None = None,
    echo: Callable[[str], None] = print,
) -> AuditResult:
    input_format(input_dir, listing(spark, input_dir))  # a clear error before Spark reads
    output_dir = output_dir or default_output(input_dir)
    stages = 4 if report_path else 3
    clock = time.perf_counter()

    def stage(n: int, text: str) -> None:
        echo(f"[{n}/{stages}] {text} ({time.perf_counter() - clock:.1f} s)")

    stage(1, f"reading {input_dir}")
    df = read_export(spark, input_dir)
    describe = spark.sparkContext.setJobDescription  # names the jobs in Spark's UI and event log
    describe("record types")
    # One pass for every figure the record types give, and what the audit asks first.
    overview = log_overview(df)
    if overview is None:
        raise ValueError(f"{input_dir} holds no records")
    kinds, records = overview.kinds, overview.records
    first_offset, last_offset = overview.first_offset, overview.last_offset
    first_ms, last_ms = overview.first_ms, overview.last_ms

    stage(2, f"auditing {records:,} records")
    describe("audit: offsets and state")
    frames = run_audit(df, first_offset, output_dir, overview)
    if frames.legacy_records:
        echo(legacy_note(frames.legacy_records))
    viol_dir = os.path.join(output_dir, "violations")
    # Kept once computed: with_who reads the violations twice (their offsets, then them).
    found = frames.violations.persist(StorageLevel.MEMORY_AND_DISK)
    describe("audit: violations")
    with_who(found, df).orderBy("offset", "check", "entity").write.mode("overwrite").parquet(
        viol_dir
    )
    found.unpersist()
    describe("audit: violations read back")
    written = spark.read.parquet(viol_dir)
    first_rows = [
        tuple(r) for r in written.orderBy("offset", "check", "entity").limit(REPORT_ROWS).collect()
    ]
    counts: dict[str, int] = {}
    if len(first_rows) < REPORT_ROWS:
        for row in first_rows:
            counts[row[2]] = counts.get(row[2], 0) + 1
    else:
        counts = {
            r["check"]: r["n"]
            for r in written.groupBy("check").agg(F.count("*").alias("n")).collect()
        }
    total = sum(counts.values())

    stage(3, "building timelines")
    describe("timelines: broker states")
    path = lambda name: os.path.join(output_dir, name)  # noqa: E731
    broker_intervals(frames.brokers).write.mode("overwrite").parquet(path("broker_states"))
    describe("timelines: partitions")
    partition_timeline(frames.partitions).write.mode("overwrite").parquet(
        path("partition_timeline")
    )
    pt = spark.read.parquet(path("partition_timeline"))
    describe("timelines: intervals")
    intervals(pt, "under_replicated", last_ms).write.mode("overwrite").parquet(
        path("under_replicated_intervals")
    )
    intervals(pt, "offline", last_ms).write.mode("overwrite").parquet(path("offline_intervals"))
    describe("timelines: per minute")
    minutes = sorted(tuple(r) for r in per_minute(pt).collect())
    describe("timelines: controller")
    controller_changes(df).write.mode("overwrite").parquet(path("controller_elections"))
    changes = sorted(
        (r["offset"], r["timestamp_ms"], r["controller_epoch"], r["leader_id"], r["batch_offset"])
        for r in spark.read.parquet(path("controller_elections")).collect()
    )
    bucket = bucket_ms(first_ms, last_ms)
    describe("who: writes")
    by_who = writes(df, first_ms, bucket)
    describe("timelines: summaries")
    brokers = [
        tuple(r)
        for r in spark.read.parquet(path("broker_states"))
        .select("broker_id", "state", "start_ms", "end_ms")
        .collect()
    ]
    spells = (
        spark.read.parquet(path("under_replicated_intervals"))
        .withColumn("kind", F.lit("urp"))
        .unionByName(
            spark.read.parquet(path("offline_intervals")).withColumn("kind", F.lit("offline"))
        )
    )
    durations = duration_summaries(spells)
    urp_stats, off_stats = durations["urp"], durations["offline"]
    urp_now = peak = 0
    for _m, _s, _e, du, _do in minutes:
        urp_now += du
        peak = max(peak, urp_now)
    summary = {
        "records": records,
        "offsets": f"{first_offset} .. {last_offset}",
        "snapshot records": overview.snapshot_rows,
        "time span (minutes)": round((last_ms - first_ms) / 60_000, 1),
        "brokers": len({b[0] for b in brokers}),
        "topics created": kinds.get("TOPIC_RECORD", 0),
        "partitions created": kinds.get("PARTITION_RECORD", 0),
        "controller elections": len(changes),
        "controller failovers": max(len(changes) - 1, 0),
        "broker registrations": kinds.get("REGISTER_BROKER_RECORD", 0),
        "fencings": sum(1 for b in brokers if b[1] == "fenced"),
        "controlled shutdowns": sum(1 for b in brokers if b[1] == "controlled shutdown"),
        "ISR shrinks": sum(m[1] for m in minutes),
        "ISR expands": sum(m[2] for m in minutes),
        "peak under-replicated partitions (minute ends)": peak,
        "under-replicated spells": urp_stats["count"],
        "under-replicated p50 / p99 / max (s)": _secs(urp_stats),
        "offline spells": off_stats["count"],
        "offline p50 / p99 / max (s)": _secs(off_stats),
        "violations": total,
        "records without batch_offset": frames.legacy_records,
        "records with a who": sum(w[3] for w in by_who),
        "principals": len({w[1] for w in by_who}),
    }
    figures = {
        "summary": summary,
        "violations": counts,
        "recordTypes": kinds,
        "writesByPrincipal": who_totals(by_who),
    }
    write_text(spark, os.path.join(output_dir, "summary.json"), json.dumps(figures, indent=2))
    report = None
    if report_path:
        stage(4, f"writing the report {report_path}")
        # The batches the report's events link to: its violations' and elections'.
        linked = {row[-1] for row in first_rows if row[-1] is not None}
        linked |= {change[-1] for change in changes}
        describe("report: batches")
        data = ReportData(
            input_dir=input_dir,
            summary=summary,
            broker_intervals=brokers,
            minutes=minutes,
            controller_changes=changes,
            violations=first_rows,
            violation_counts=counts,
            total_violations=total,
            first_ms=first_ms,
            last_ms=last_ms,
            writes=by_who,
            bucket_ms=bucket,
            batches=batch_whos(df, sorted(linked)),
        )
        page = render(data)
        tmp = report_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(page)
        os.replace(tmp, report_path)
        report = report_path
    describe(None)  # later jobs of this session are not the audit's
    echo(f"done in {time.perf_counter() - clock:.1f} s; results in {output_dir}")
    return AuditResult(records, total, counts, first_rows[:TABLE_ROWS], output_dir, report, summary)


def _secs(stats: dict) -> str:
    return " / ".join(f"{stats[k] / 1000:.1f}" for k in ("p50_ms", "p99_ms", "max_ms"))


def main_audit(
    input_dir: str,
    report_path: str | None,
    master: str | None = None,
    output_dir: str | None = None,
    shuffle_partitions: int | None = None,
    echo: Callable[[str], None] = print,
    conf: dict[str, str] | None = None,
    executor_wait: float = 120.0,
) -> AuditResult:
    """``master`` None: spark-submit's ``--master`` when run by it, else ``local[*]``.
    On a cluster, waits at most ``executor_wait`` seconds for an executor, and
    cancels the audit when none has been left that long (pipeline/cluster.py)."""
    conf = dict(conf or {})
    if shuffle_partitions:
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    records = None
    if not is_url(input_dir):  # a URL is listed once Spark runs
        input_format(input_dir)
        files = export_files(input_dir)  # named by their offsets: the log's size, unread
        records = files[-1].last - files[0].first + 1
    from pyspark.sql import SparkSession

    # In a process that already runs a session (a notebook, the tests) use it, and leave it be.
    running = SparkSession.getActiveSession()
    if running is not None:
        if master and master != running.sparkContext.master:
            raise ClusterError(
                f"this process already runs a Spark session on {running.sparkContext.master}; "
                f"stop it to audit on {master}"
            )
        echo("using the running Spark session")
        spark = running
    else:
        spark = _start(master or submitted_master() or "local[*]", conf, echo, records)
    try:
        # With dynamic allocation, executors come and go with the work: nothing to wait for.
        on_cluster = not spark.sparkContext.master.startswith("local") and (
            spark.conf.get("spark.dynamicAllocation.enabled", "false") != "true"
        )
        if on_cluster:
            n = wait_for_executors(spark, spark.sparkContext.master, executor_wait)
            echo(f"{n} executor(s) registered")
        watch = ExecutorWatch(spark, executor_wait) if on_cluster else contextlib.nullcontext()
        with watch:
            try:
                return audit_export(spark, input_dir, output_dir, report_path, echo)
            except Exception as e:
                if on_cluster and watch.lost:
                    raise ClusterError(
                        f"the audit was cancelled: no executor was left for {executor_wait:.0f} s "
                        "(the workers died or were stopped); start workers and run it again"
                    ) from e
                unreadable = unreadable_input(e, input_dir)
                if unreadable is not None:
                    raise unreadable from e
                failed = spark_failure(e)
                if failed is not None:
                    raise failed from e
                raise
    finally:
        if running is None:
            spark.stop()


def _start(
    master: str, conf: dict[str, str], echo: Callable[[str], None], records: int | None = None
):
    """A new session on ``master``; ClusterError saying what to check when Spark cannot start."""
    check_master_reachable(master)
    echo(f"starting Spark ({master})")
    try:
        return build_session(master, records=records, **conf)
    except Exception as e:  # a JVM stack trace: what it means, and what to check
        if "stopped SparkContext" in str(e):  # the master never took the application
            raise ClusterError(
                f"{master} did not take the application (Spark gave up after its 3 tries of "
                f"20 s): {MASTER_HINT}"
            ) from e
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        hint = "" if master.startswith("local") else f"; {MASTER_HINT}"
        raise ClusterError(f"Spark could not start on {master}: {first}{hint}") from e
