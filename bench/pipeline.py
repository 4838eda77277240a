"""Pipeline throughput: the Spark audit on ``local[2]`` against a single-process
Python replay of the same checks, on the same synthetic logs in the same run.

    .venv/bin/python bench/pipeline.py                    # 1M and 10M records
    .venv/bin/python bench/pipeline.py --sizes 200000     # a quick look

Figures, not asserts. For each size: synth-log writes the log (the real
controller, simulated brokers), then
  * cold: `metaquorum audit --master local[2]` as a user runs it, a fresh
    process (JVM start, class loading and JIT included), with the defaults a
    user gets: its wall time, and the "done in" it prints;
and, in this process's session after a warm-up audit:
  * audit: the checks only (state rebuilt, every violation written as Parquet);
  * pipeline: audit + timelines (what `metaquorum audit` does without --report);
  * replay: pipeline/replay_audit.py over the same Parquet files.
Target: 10M records audited in <= 5 minutes, cost per record flat from 1M to 10M.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from metaquorum.synth_log import run_synth_log  # noqa: E402
from pipeline.audit import run_audit  # noqa: E402
from pipeline.replay_audit import replay_audit  # noqa: E402
from pipeline.run import audit_export  # noqa: E402
from pipeline.spark import build_session, read_export  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000,10000000", help="comma-separated record counts")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, help="default: the audit's (2 per core)")
    ap.add_argument("--driver-memory", help="default: the audit's (2g on local)")
    ap.add_argument("--dir", help="keep the logs here (default: a temp dir, removed)")
    args = ap.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="mq-bench-pipeline-")
    conf = {}
    if args.shuffle_partitions:
        conf["spark.sql.shuffle.partitions"] = str(args.shuffle_partitions)
    if args.driver_memory:
        conf["spark.driver.memory"] = args.driver_memory
    spark = build_session(args.master, **conf)
    print(f"Spark {spark.version} on {args.master}, {os.cpu_count()} CPUs, logs in {root}")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    rows = []
    try:
        # Warm the JVM (class loading, JIT, codegen) on a small log first, so
        # the first size is not charged for it.
        warm = os.path.join(root, "warm-up")
        if not os.path.isdir(warm):
            run_synth_log(20_000, warm, quiet=True)
        audit_export(spark, warm, warm + "-out", echo=lambda _: None)
        for n in [int(s) for s in args.sizes.split(",")]:
            log = os.path.join(root, f"log-{n}")
            if not os.path.isdir(log):
                t = time.perf_counter()
                run_synth_log(n, log, quiet=True)
                print(f"{n:>11,} records: synth-log {time.perf_counter() - t:.0f} s", flush=True)
            cold_wall, cold_done, cold_load = cold_audit(log, args.master, conf)
            print(
                f"{n:>11,} records: cold `metaquorum audit` {cold_wall:.1f} s wall, "
                f"done in {cold_done:.1f} s (load {cold_load})",
                flush=True,
            )
            t = time.perf_counter()
            frames = run_audit(read_export(spark, log), 0, log + "-out")
            frames.violations.write.mode("overwrite").parquet(os.path.join(log + "-out", "v"))
            audit_s = time.perf_counter() - t
            frames.brokers.unpersist()
            t = time.perf_counter()
            result = audit_export(spark, log, log + "-out", echo=lambda _: None)
            pipeline_s = time.perf_counter() - t
            t = time.perf_counter()
            violations, replayed = replay_audit(log)
            replay_s = time.perf_counter() - t
            assert result.records == replayed and result.violations == len(violations) == 0
            rows.append((result.records, cold_wall, cold_done, audit_s, pipeline_s, replay_s))
            print(
                f"{result.records:>11,} records: Spark audit {audit_s:6.1f} s "
                f"({result.records / audit_s:>9,.0f} rec/s, {audit_s / result.records * 1e6:5.1f} "
                f"us/rec); audit+timelines {pipeline_s:6.1f} s; Python replay {replay_s:6.1f} s "
                f"({result.records / replay_s:>9,.0f} rec/s, "
                f"{replay_s / result.records * 1e6:5.1f} us/rec); "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    finally:
        spark.stop()
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(
        "| records | cold command wall s | cold done in s | cold us/rec | warm audit s | "
        "warm audit+timelines s | Python replay s | Python us/rec |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for records, cw, cd, a, p, r in rows:
        print(
            f"| {records:,} | {cw:.1f} | {cd:.1f} | {cw / records * 1e6:.1f} | {a:.1f} | {p:.1f} | "
            f"{r:.1f} | {r / records * 1e6:.1f} |"
        )


def cold_audit(log: str, master: str, conf: dict[str, str]) -> tuple[float, float, str]:
    """`metaquorum audit` in a fresh process: (wall s, its "done in" s, load
    averages at start and end)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-c", "import sys; from metaquorum.cli import main; sys.exit(main())",
           "audit", "--input", log, "--output", log + "-cold", "--master", master]  # fmt: skip
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    env = {**os.environ, "PYTHONPATH": root}
    load = f"{os.getloadavg()[0]:.1f}"
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    m = re.search(r"done in ([0-9.]+) s", done.stdout)
    if m is None or done.returncode not in (0, 1):
        raise SystemExit(f"the cold audit failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return wall, float(m[1]), f"{load} -> {os.getloadavg()[0]:.1f}"


if __name__ == "__main__":
    main()
