"""``metaquorum audit --master spark://...`` on a real standalone Spark cluster
(a master and two one-core workers from the pyspark installation,
tests/spark_cluster.py): submitted with spark-submit, with executors that
could not start Python if asked to and a worker killed during the audit, the
same findings and timelines as ``local[*]``; and a real
cluster's faults (no master at that address, no worker fits the job, the input
on the driver's disk only, every worker gone) end the command with a message
that says what to do, never a hang."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from metaquorum.synth_log import run_synth_log

from .nodes import free_port
from .spark_cluster import SparkCluster, can_hide_directories, spark_home

# Setup (a Spark cluster, a local audit) and the first audit share the first
# test's budget: about 140 s here, and twice that on a loaded CI machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parent.parent
PLANTS = ["gap", "kip841", "leader", "partition-epoch"]
# Where a Python worker would be started from: nowhere. The audit must not need one.
NO_PYTHON = "/nonexistent/the-executors-run-no-python"
# Every JVM here (master, workers, executors, each audit's driver) lives for
# one small job: its time goes to JIT-compiling Spark's cold code, and C2's
# compiler threads compete with the tests' other processes on two cores. C1
# alone ran this file in 200 s instead of 288 on this machine, with its code
# cache raised (C1's default of 48 MB fills and stops compiling). A real
# audit of a large log wants C2, so this is the tests' setting only.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# The outputs compared: what the audit found, and the timelines it built.
TABLES = ("violations", "broker_states", "partition_timeline", "under_replicated_intervals",
          "offline_intervals", "controller_elections")  # fmt: skip


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark-cluster")
    hidden = root / "driver-only"
    hidden.mkdir()
    c = SparkCluster(
        root,
        workers=2,
        cores=1,
        memory="1g",
        hidden=hidden if can_hide_directories() else None,
        java_options=SHORT_LIVED_JVM,
    )
    try:
        yield c.start()
    finally:
        c.close()
    assert c.pids() == [], f"Spark processes still running after close: {c.pids()}"


@pytest.fixture(scope="module")
def planted_log(tmp_path_factory) -> Path:
    """Written by its URL (``file://``, as to a shared mount every worker
    reads): the code path an export to ``s3a://`` or ``hdfs://`` takes."""
    log = tmp_path_factory.mktemp("planted") / "log"
    run_synth_log(6_000, f"file://{log}", plant_kinds=PLANTS, quiet=True)
    return log


@pytest.fixture(scope="module")
def local_run(planted_log, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local") / "out"
    done = audit(planted_log, out, "local[*]")
    assert done.returncode == 1, done.stdout + done.stderr
    return out


def audit_argv(log: Path, out: Path, master: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "metaquorum.cli", "audit", "--input", str(log),
            "--output", str(out), "--master", master, "--shuffle-partitions", "2", *extra]  # fmt: skip


def cli_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONUNBUFFERED": "1", "JDK_JAVA_OPTIONS": SHORT_LIVED_JVM, **extra}  # fmt: skip


def audit(log: Path, out: Path, master: str, *extra: str, timeout: float = 600, **env: str):
    """``metaquorum audit`` as its own process (a process runs one SparkContext:
    this one's tests may run another)."""
    return subprocess.run(
        audit_argv(log, out, master, *extra),
        env=cli_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def results(out: Path) -> dict:
    """Everything the audit wrote, as plain values in a stable order."""
    found = orjson.loads((out / "summary.json").read_bytes())
    for table in TABLES:
        rows = pq.read_table(out / table).to_pylist()
        found[table] = sorted(rows, key=lambda r: [str(v) for v in r.values()])
    return found


def assert_same(cluster_out: Path, local_out: Path) -> None:
    on_cluster, local = results(cluster_out), results(local_out)
    assert on_cluster.keys() == local.keys()
    for part in on_cluster:  # one by one, so a failure names what differs
        if isinstance(local[part], dict):
            for field in local[part].keys() | on_cluster[part].keys():
                assert on_cluster[part].get(field) == local[part].get(field), (part, field)
        else:
            assert on_cluster[part] == local[part], part


def test_submitted_to_a_two_worker_cluster_it_finds_what_local_finds_a_worker_killed_or_not(
    spark_cluster, planted_log, local_run, tmp_path
):
    """One audit for what were two (each a cluster audit of its own): run by
    spark-submit on the cluster, with executors that could not start Python if
    asked to, and one worker killed while it audits, it writes what local[*]
    wrote (findings, timelines, summary). Input and output are URLs, as on
    HDFS or S3: listed, read and written through Hadoop's FileSystem."""
    out = tmp_path / "out"
    submit = [os.path.join(spark_home(), "bin", "spark-submit"), "--master",
              spark_cluster.master_url, "--conf", "spark.sql.shuffle.partitions=2",
              str(ROOT / "metaquorum" / "submit_audit.py"),
              "--input", f"file://{planted_log}", "--output", f"file://{out}"]  # fmt: skip
    env = cli_env(SPARK_HOME=spark_home(), PYSPARK_DRIVER_PYTHON=sys.executable,
                  PYSPARK_PYTHON=NO_PYTHON)  # fmt: skip
    proc = subprocess.Popen(submit, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[2/3] auditing"):
                assert proc.poll() is None
                spark_cluster.kill_worker(0)
                break
        lines.extend(proc.stdout)
        assert proc.wait(600) == 1, "".join(lines)
    finally:
        proc.kill()
        proc.wait()
        spark_cluster.ensure_workers()
    text = "".join(lines)
    assert f"starting Spark ({spark_cluster.master_url})" in text, text
    assert re.search(r"^[12] executor\(s\) registered$", text, re.M), text
    assert "Lost executor" in text, text  # it died while the audit used it
    assert f"{len(PLANTS)} violation(s)" in text, text
    assert_same(out, local_run)
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["summary"]["violations"] == len(PLANTS)
    assert summary["summary"]["fencings"] > 0 and summary["summary"]["ISR shrinks"] > 0
    # It ran on the cluster: the master lists it, finished.
    apps = spark_cluster.state()["completedapps"]
    assert [a["name"] for a in apps][-1:] == ["metaquorum-audit"], apps


def test_no_master_at_that_address_fails_at_once(planted_log, tmp_path):
    done = audit(planted_log, tmp_path / "out", f"spark://127.0.0.1:{free_port()}", timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cannot reach the Spark master" in done.stderr and "Connection refused" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_job_no_worker_can_take_fails_after_the_executor_wait(
    spark_cluster, planted_log, tmp_path
):
    # Each worker has 1g: an executor of 4g fits nowhere, and Spark would queue it forever.
    done = audit(
        planted_log, tmp_path / "out", spark_cluster.master_url,
        "--conf", "spark.executor.memory=4g", "--executor-wait", "5", timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no executor started within 5 s" in done.stderr
    assert "spark.executor.memory=4g" in done.stderr and "Traceback" not in done.stderr


def test_an_input_only_on_the_drivers_disk_is_named_with_what_to_do(
    spark_cluster, planted_log, tmp_path
):
    if spark_cluster.hidden is None:
        if os.environ.get("METAQUORUM_CI"):
            pytest.fail("hiding a directory from the workers needs root and unshare (CI has both)")
        pytest.skip("hiding a directory from the workers needs root and unshare")
    log = spark_cluster.hidden / "log"  # the driver sees it; the workers see an empty tmpfs
    shutil.copytree(planted_log, log)
    try:
        done = audit(log, tmp_path / "out", spark_cluster.master_url, timeout=300)
    finally:
        shutil.rmtree(log)
    assert done.returncode == 2, done.stdout + done.stderr
    first = sorted(p.name for p in planted_log.glob("records-*"))[0]
    assert f"a Spark executor could not read file://{log}/{first}" in done.stderr, done.stderr
    assert "storage every worker reads at the same path" in done.stderr
    assert "Traceback" not in done.stderr


def test_losing_every_worker_cancels_the_audit_after_the_executor_wait(
    spark_cluster, planted_log, tmp_path
):
    # The same wait bounds the executors' first start: 5 s was too short for two
    # executor JVMs on a loaded 2-core CI machine ("no executor started within 5 s").
    proc = subprocess.Popen(
        audit_argv(
            planted_log, tmp_path / "out", spark_cluster.master_url, "--executor-wait", "20"
        ),
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[2/3] auditing"):
                spark_cluster.kill_worker(0)
                spark_cluster.kill_worker(1)
                break
        lines.extend(proc.stdout)
        assert proc.wait(300) == 2, "".join(lines)
    finally:
        proc.kill()
        proc.wait()
        spark_cluster.ensure_workers()
    out = "".join(lines)
    assert "the audit was cancelled: no executor was left for 20 s" in out, out
    assert "Traceback" not in out
