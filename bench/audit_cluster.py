"""The audit on ``local[2]`` and on standalone Spark clusters of one and of two
workers, on the same log, as a user runs it: ``metaquorum audit`` as its own
process.

    .venv/bin/python bench/audit_cluster.py                              # 10M records
    .venv/bin/python bench/audit_cluster.py --records 200000             # a quick look
    .venv/bin/python bench/audit_cluster.py --dir /tmp/mq-bench-cluster  # keep the log
    .venv/bin/python bench/audit_cluster.py --workers 2                  # one cluster only

Each cluster is tests/spark_cluster.py's: a master and ``--workers`` (1, then
2) workers from the pyspark installation on 127.0.0.1, ``--worker-cores`` (1)
and ``--worker-memory`` (4g) each, one executor per worker. ``local[2]`` gets
two cores and two executors' memory as its driver's heap. The log is written
by ``synth-log`` (the real controller, simulated brokers) unless ``--dir``
already holds it. Figures, not asserts: for each run the command's wall time
(JVM and executors started included), the audit's own time (its "done in"
line) divided by its progress lines into the record types (reading the log,
up to "[2/3]"), the checks (to "[3/3]") and the timelines (to "done"), and
records per second; the findings must be the same on every run.
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
    records = re.search(r"auditing ([\d,]+) records \(([\d.]+) s\)", text)
    timelines = re.search(r"building timelines \(([\d.]+) s\)", text)
    if code not in (0, 1) or not done or not records or not timelines:
        raise SystemExit(f"the audit on {master} failed (exit {code}):\n{text[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {
        "master": master,
        "wall": wall,
        "audit": float(done[1]),
        "overview": float(records[2]),
        "checks": float(timelines[1]) - float(records[2]),
        "timelines": float(done[1]) - float(timelines[1]),
        "records": int(records[1].replace(",", "")),
        "summary": summary,
        "load": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--dir", help="keep the log here, and reuse one already there")
    ap.add_argument("--workers", default="1,2", help="the clusters' sizes, in workers")
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
        for workers in [int(n) for n in args.workers.split(",")]:
            cluster_root = root / f"spark-cluster-{workers}"
            shutil.rmtree(cluster_root, ignore_errors=True)
            cluster_root.mkdir()
            cluster = SparkCluster(cluster_root, workers=workers, cores=args.worker_cores,
                                   memory=args.worker_memory)  # fmt: skip
            try:
                print(f"starting a cluster of {workers} worker(s), {args.worker_cores} core(s) "
                      f"and {args.worker_memory} each ...", flush=True)  # fmt: skip
                cluster.start()
                print(f"{cluster.master_url} (executors {args.executor_memory}):", flush=True)
                extra = [*common, "--conf", f"spark.executor.memory={args.executor_memory}"]
                run = run_audit(log, root / f"out-cluster-{workers}", cluster.master_url, extra)
                run["name"] = f"{workers} worker(s) x {args.worker_cores} core(s)"
                runs.append(run)
            finally:
                cluster.close()
            if run["summary"] != runs[0]["summary"]:
                raise SystemExit(f"{run['name']}: summary.json differs from local[2]'s")
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}; same findings on every run\n")
    print("| master | records | command wall s | audit s | record types s | checks s "
          "| timelines s | audit records/s | load at its end |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        print(f"| {r.get('name', r['master'])} | {r['records']:,} | {r['wall']:.1f} | "
              f"{r['audit']:.1f} | {r['overview']:.1f} | {r['checks']:.1f} | "
              f"{r['timelines']:.1f} | {r['records'] / r['audit']:,.0f} | {r['load']:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
