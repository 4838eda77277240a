"""What who costs the audit: the three steps ``pipeline/who.py`` adds, alone,
on a synthetic log (issue 43).

    .venv/bin/python bench/pipeline_who.py                      # 1M records
    .venv/bin/python bench/pipeline_who.py --records 200000     # a quick look
    .venv/bin/python bench/pipeline_who.py --log DIR            # an existing export

Figures, not asserts: each step twice (the first pays the JVM's warm-up):
  * writes: records per principal and API per time bucket (every audit);
  * with_who: the who of 1,000 violations spread over the log (every audit
    that finds violations; the report lists the first 1,000);
  * batch_whos: the who of 1,000 batches the report links to (--report).
Compare with the whole audit's time (bench/pipeline.py) on the same machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pyspark.sql import functions as F  # noqa: E402

from metaquorum.synth_log import run_synth_log  # noqa: E402
from pipeline.spark import build_session, read_export  # noqa: E402
from pipeline.who import batch_whos, bucket_ms, with_who, writes  # noqa: E402

SPREAD = 1_000  # violations and batches looked up


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--log", help="an export directory to read (default: synth-log writes one)")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    root = None
    log = args.log
    if log is None:
        root = tempfile.mkdtemp(prefix="mq-bench-who-")
        log = os.path.join(root, "log")
        start = time.perf_counter()
        run_synth_log(args.records, log, quiet=True)
        print(f"synth-log: {args.records:,} records in {time.perf_counter() - start:.1f} s")
    spark = build_session(args.master)
    try:
        df = read_export(spark, log)
        lo, hi, first, last = df.agg(
            F.min("offset"), F.max("offset"), F.min("timestamp_ms"), F.max("timestamp_ms")
        ).first()
        step = max((hi - lo) // SPREAD, 1)
        offsets = list(range(lo, hi + 1, step))[:SPREAD]
        violations = spark.createDataFrame(
            [(o, 0, "check", "entity", "explanation") for o in offsets],
            "offset long, timestamp_ms long, check string, entity string, explanation string",
        )
        print(f"Spark {spark.version} on {args.master}, {hi - lo + 1:,} offsets, "
              f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
        for run in range(2):
            t = time.perf_counter()
            rows = writes(df, first, bucket_ms(first, last))
            a = time.perf_counter() - t
            t = time.perf_counter()
            found = with_who(violations, df).collect()
            b = time.perf_counter() - t
            t = time.perf_counter()
            batches = batch_whos(df, offsets)
            c = time.perf_counter() - t
            print(f"run {run}: writes {a:.1f} s ({len(rows)} rows), with_who {b:.1f} s "
                  f"({len(found)} violations), batch_whos {c:.1f} s ({len(batches)} batches)")  # fmt: skip
    finally:
        spark.stop()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
