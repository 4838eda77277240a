"""The audit on ``local[2]`` and on a two-worker standalone Spark cluster, on the
same log, as a user runs it: ``metaquorum audit`` as its own process.

    .venv/bin/python bench/audit_cluster.py                              # 10M records
    .venv/bin/python bench/audit_cluster.py --records 200000             # a quick look
    .venv/bin/python bench/audit_cluster.py --dir /tmp/mq-bench-cluster  # keep the log

The cluster is tests/spark_cluster.py's: a master and two workers from the
pyspark installation on 127.0.0.1, ``--worker-cores`` (1) and
``--worker-memory`` (4g) each, one executor per worker. ``local[2]`` gets the
same two cores and the executors' memory together as its driver's heap.
The log is written by ``synth-log`` (the real controller, simulated brokers)
unless ``--dir`` already holds it. Figures, not asserts: for each run the
command's wall time (JVM and executors started included), the audit's own time
(its "done in" line: reading, checks and timelines) and records per second of
the latter; the findings must be the same on both.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from metaquorum.synth_log import run_synth_log  # noqa: E402
from tests.spark_cluster import SparkCluster  # noqa: E402


def size_on_disk(directory: Path) -> tuple[int, int]:
    files = list(directory.glob("records-*"))
    return len(files), sum(f.stat().st_size for f in files)


def run_audit(log: Path, out: Path, master: str, extra: list[str]) -> dict:
    argv = [sys.executable, "-m", "metaquorum.cli", "audit", "--input", str(log),
            "--output", str(out), "--master", master, *extra]  # fmt: skip
    # Unbuffered: the progress lines as they come.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    env["PYTHONUNBUFFERED"] = "1"
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    lines = []
    for line in proc.stdout:  # the audit's progress lines, as they come
        lines.append(line)
        if line.startswith(("[", "done", "starting")) or "executor(s) registered" in line:
            print(f"    {line.rstrip()}", flush=True)
    code = proc.wait()
    wall = time.perf_counter() - start
    text = "".join(lines)
    done = re.search(r"^done in ([\d.]+) s", text, re.M)
    records = re.search(r"auditing ([\d,]+) records", text)
    if code not in (0, 1) or not done or not records:
        raise SystemExit(f"the audit on {master} failed (exit {code}):\n{text[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {
        "master": master,
        "wall": wall,
        "audit": float(done[1]),
        "records": int(records[1].replace(",", "")),
        "summary": summary,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--dir", help="keep the log here, and reuse one already there")
    ap.add_argument("--worker-cores", type=int, default=1)
    ap.add_argument("--worker-memory", default="4g")
    ap.add_argument("--executor-memory", default="3g", help="at most --worker-memory")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="mq-bench-cluster-"))
    root.mkdir(parents=True, exist_ok=True)
    log = root / f"log-{args.records}"
    print(f"{os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.1f}; in {root}")
    try:
        if not log.is_dir():
            print(f"writing {args.records:,} records with synth-log ...", flush=True)
            t = time.perf_counter()
            summary = run_synth_log(args.records, str(log))
            print(f"  synth-log wrote {summary['records']:,} records in "
                  f"{time.perf_counter() - t:.0f} s", flush=True)  # fmt: skip
        else:
            print(f"reusing the log in {log} (written by synth-log before)")
        files, size = size_on_disk(log)
        print(f"input: {files} Parquet files (zstd), {size / 1e6:.1f} MB on disk", flush=True)
        heap = f"{2 * int(args.executor_memory.rstrip('g'))}g"
        common = ["--shuffle-partitions", str(args.shuffle_partitions)]
        runs = []
        print(f"local[2] (driver heap {heap}):", flush=True)
        runs.append(run_audit(log, root / "out-local", "local[2]",
                              [*common, "--conf", f"spark.driver.memory={heap}"]))  # fmt: skip
        cluster_root = root / "spark-cluster"
        shutil.rmtree(cluster_root, ignore_errors=True)
        cluster_root.mkdir()
        cluster = SparkCluster(cluster_root, workers=2, cores=args.worker_cores,
                               memory=args.worker_memory)  # fmt: skip
        try:
            print(f"starting the cluster (2 workers, {args.worker_cores} core(s) and "
                  f"{args.worker_memory} each) ...", flush=True)  # fmt: skip
            cluster.start()
            print(f"{cluster.master_url} (executors {args.executor_memory}):", flush=True)
            extra = [*common, "--conf", f"spark.executor.memory={args.executor_memory}"]
            runs.append(run_audit(log, root / "out-cluster", cluster.master_url, extra))
        finally:
            cluster.close()
        if runs[0]["summary"] != runs[1]["summary"]:
            raise SystemExit("the cluster's summary.json differs from local[2]'s")
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}; same findings on both\n")
    print("| master | records | command wall s | audit s | audit records/s |")
    print("|---|---:|---:|---:|---:|")
    for r in runs:
        name = "local[2]" if r["master"] == "local[2]" else "2 workers x 1 core"
        print(f"| {name} | {r['records']:,} | {r['wall']:.1f} | {r['audit']:.1f} | "
              f"{r['records'] / r['audit']:,.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
