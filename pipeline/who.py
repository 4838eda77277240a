"""Who changed what: the export's who columns (``schema.WHO_COLUMNS``) read
back for the audit report.

Three small results, each from one scan of a few narrow columns (no shuffle
of the log): writes per principal and API per time bucket, the who of each
violation (the record at the violation's offset, joined to the violations
already written, which are few, so Spark broadcasts them), and the who of
the batches the report's timeline events link to. A record without a who (a
batch from before it, a snapshot row) counts under no principal.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .schema import WHO_COLUMNS

MINUTE_MS = 60_000
# The columns with_who adds to a violation, in order.
VIOLATION_WHO = (*WHO_COLUMNS, "batch_offset")
MAX_BUCKETS = 200  # time buckets of the chart: its resolution, and what reaches the driver


def bucket_ms(first_ms: int, last_ms: int) -> int:
    """A whole number of minutes, so a log of any span has at most MAX_BUCKETS."""
    minutes = -(-(last_ms - first_ms + 1) // (MAX_BUCKETS * MINUTE_MS))
    return max(minutes, 1) * MINUTE_MS


def writes(df: DataFrame, first_ms: int, bucket: int) -> list[tuple]:
    """(bucket start ms, principal, api, records, requests), sorted: the log's
    records per principal and API per bucket. ``requests``: distinct request
    ids (approximate, as Spark counts them)."""
    log = df.filter(~F.col("from_snapshot") & F.col("who_principal").isNotNull())
    start = F.lit(first_ms) + F.floor((F.col("timestamp_ms") - F.lit(first_ms)) / bucket) * bucket
    rows = (
        log.groupBy(start.cast("long").alias("bucket"), "who_principal", "who_api")
        .agg(
            F.count("*").alias("n"),
            F.approx_count_distinct("who_request_id").alias("requests"),
        )
        .collect()
    )
    return sorted(tuple(r) for r in rows)


def _who_at(df: DataFrame) -> DataFrame:
    """Log rows: offset, time, its batch (the offset itself where the export
    has no batch_offset) and who."""
    return df.filter(~F.col("from_snapshot")).select(
        "offset",
        "timestamp_ms",
        F.coalesce("batch_offset", "offset").alias("batch"),
        *WHO_COLUMNS,
    )


def with_who(violations: DataFrame, df: DataFrame) -> DataFrame:
    """The violations with the who of the record at each one's offset (null
    where no log record is there), then its batch's offset (VIOLATION_WHO). Where several log records
    share an offset (a corrupt log), the least who of theirs, as the replay
    takes it."""
    keys = ["offset", "timestamp_ms", "check", "entity", "explanation"]
    who = F.struct(*(F.col(c) for c in WHO_COLUMNS), F.col("batch"))
    # The log's side is only scanned: the violations' offsets are broadcast
    # to it, and what matches (as few rows) broadcast back.
    offsets = F.broadcast(violations.select("offset").distinct())
    found = _who_at(df).drop("timestamp_ms").join(offsets, "offset")
    joined = violations.join(F.broadcast(found), "offset", "left")
    return (
        joined.groupBy(*keys)
        .agg(F.min(who).alias("w"))
        .select(
            *keys,
            *(F.col(f"w.{c}").alias(c) for c in WHO_COLUMNS),
            F.col("w.batch").alias("batch_offset"),
        )
    )


def batch_whos(df: DataFrame, batches: list[int]) -> dict[int, dict]:
    """Per batch offset: its time, records, and each distinct who in it with
    its records (``runs``: (first offset, records, who tuple)). One scan,
    filtered to those batches."""
    if not batches:
        return {}
    rows = (
        _who_at(df)
        .filter(F.col("batch").isin(batches))
        .groupBy("batch", *WHO_COLUMNS)
        .agg(
            F.min("offset").alias("first"),
            F.count("*").alias("n"),
            F.min("timestamp_ms").alias("ts"),
        )
        .collect()
    )
    out: dict[int, dict] = {}
    for r in sorted(rows, key=lambda r: (r["batch"], r["first"])):
        entry = out.setdefault(r["batch"], {"records": 0, "runs": [], "timestamp_ms": r["ts"]})
        entry["records"] += r["n"]
        entry["runs"].append((r["first"], r["n"], tuple(r[c] for c in WHO_COLUMNS)))
    return out
