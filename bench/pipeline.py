"""Pipeline throughput: the Spark audit on ``local[2]`` against a single-process
Python replay of the same checks, on the same synthetic logs in the same run.

    .venv/bin/python bench/pipeline.py                    # 1M and 10M records
    .venv/bin/python bench/pipeline.py --sizes 200000     # a quick look

Figures, not asserts. For each size: synth-log writes the log (the real
controller, simulated brokers), then
  * audit: the checks only (state rebuilt, every violation written as Parquet);
  * pipeline: audit + timelines (what `metaquorum audit` does without --report);
  * replay: pipeline/replay_audit.py over the same Parquet files.
Target: 10M records audited in <= 5 minutes, cost per record flat from 1M to 10M.
"""

from __future__ import annotations

import argparse
import os
import shutil
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
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--dir", help="keep the logs here (default: a temp dir, removed)")
    args = ap.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="mq-bench-pipeline-")
    spark = build_session(
        args.master,
        **{
            "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
            "spark.driver.memory": args.driver_memory,
        },
    )
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
            rows.append((n, result.records, audit_s, pipeline_s, replay_s))
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
        "| records | Spark audit s | Spark rec/s | audit+timelines s | Python replay s | Python rec/s |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for _n, records, a, p, r in rows:
        print(
            f"| {records:,} | {a:.1f} | {records / a:,.0f} | {p:.1f} | {r:.1f} | {records / r:,.0f} |"
        )


if __name__ == "__main__":
    main()
