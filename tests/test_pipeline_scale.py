"""The audit at scale, as a user runs it (a fresh `metaquorum audit` process on
local[2], its default 2 GB driver): a log of 2,000,000 records with every
planted kind audits within the driver's heap, and finds what the
single-process replay finds, word for word. The corpus tests
(tests/test_pipeline.py) prove each rule on small logs; this one proves the
as-of joins, buckets, window sorts and the driver's memory at a size where
they spill and span many buckets. Timings are in bench/pipeline.py."""

import os
import signal
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from metaquorum.synth_log import PLANT_KINDS, run_synth_log
from pipeline.replay_audit import replay_audit

RECORDS = 2_000_000


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_two_million_records_with_every_planted_kind_audit_as_the_replay_in_the_driver_heap(
    tmp_path,
):
    log = tmp_path / "log"
    summary = run_synth_log(RECORDS, str(log), plant_kinds=list(PLANT_KINDS), quiet=True)
    expected = sorted((p["offset"], p["rule"]) for p in summary["planted"])
    assert len(expected) >= len(PLANT_KINDS)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaquorum.cli", "audit", "--input", str(log),
         "--output", str(out), "--master", "local[2]"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "COLUMNS": "200"},
        start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=1200)
    finally:  # the driver JVM is in the command's process group
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 1, output[-4000:]  # 1: violations found, as planted
    assert "OutOfMemoryError" not in output and "spark.driver.memory" not in output
    assert f"{len(expected)} violation(s)" in output, output[-4000:]
    found = pq.read_table(out / "violations").to_pylist()
    assert sorted((v["offset"], v["check"]) for v in found) == expected
    replayed, rows = replay_audit(str(log), with_who=True)
    assert rows >= RECORDS
    assert [tuple(v.values()) for v in found] == replayed
