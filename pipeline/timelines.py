"""Timelines from the audit's rebuilt states: broker state intervals, each
partition's ISR over time, shrink and expand rates, under-replicated and
offline intervals, controller failovers.

Large results stay DataFrames (written as Parquet); what the report draws is
aggregated per minute first, so only small tables reach the driver.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window as W

MINUTE_MS = 60_000


def broker_intervals(b: DataFrame) -> DataFrame:
    """One row per stretch of time a broker spent fenced, active, in
    controlled shutdown or unregistered (UnregisterBrokerRecord); the last one
    of each broker is open (end null)."""
    # A broker that finished its controlled shutdown is fenced (and keeps the
    # sticky flag until it registers again): it shows as fenced.
    state = (
        F.when(F.col("registered_epoch").isNull(), F.lit("unregistered"))
        .when(F.col("fenced_after"), F.lit("fenced"))
        .when(F.col("shutdown_after"), F.lit("controlled shutdown"))
        .otherwise(F.lit("active"))
    )
    order = W.partitionBy("broker_id").orderBy("offset", "seq")
    starts = (
        b.withColumn("state", state)
        .withColumn("prev_state", F.lag("state").over(order))
        .filter(F.col("prev_state").isNull() | (F.col("state") != F.col("prev_state")))
    )
    return starts.select(
        "broker_id",
        "state",
        F.col("offset").alias("start_offset"),
        F.col("timestamp_ms").alias("start_ms"),
        F.lead("offset").over(order).alias("end_offset"),
        F.lead("timestamp_ms").over(order).alias("end_ms"),
    )


def partition_timeline(p: DataFrame) -> DataFrame:
    """Every partition record with the partition's ISR size, replica count,
    leader, and whether the record shrank or expanded the ISR."""
    size, prev = F.size("isr_state"), F.col("prev_isr_size")
    has_prev = F.col("prev_leader_epoch").isNotNull()
    ur = size < F.col("replicas_size")
    prev_ur = has_prev & (prev < F.col("prev_replicas_size"))
    offline = F.col("leader_state") == -1
    prev_offline = has_prev & (F.col("prev_leader") == -1)
    return p.select(
        "offset", "timestamp_ms", "topic_id", "partition_id",
        size.alias("isr_size"),
        F.col("replicas_size").alias("replicas"),
        F.col("leader_state").alias("leader"),
        (has_prev & (size < prev)).alias("shrink"),
        (has_prev & (size > prev)).alias("expand"),
        ur.alias("under_replicated"),
        prev_ur.alias("was_under_replicated"),
        offline.alias("offline"),
        prev_offline.alias("was_offline"),
    )  # fmt: skip


def per_minute(t: DataFrame) -> DataFrame:
    """Shrinks, expands, and the change in under-replicated and offline
    partitions, per minute (small: one row per minute of the log)."""
    minute = F.floor(F.col("timestamp_ms") / MINUTE_MS).cast("long")
    delta = lambda now, was: F.col(now).cast("int") - F.col(was).cast("int")  # noqa: E731
    return t.groupBy(minute.alias("minute")).agg(
        F.sum(F.col("shrink").cast("int")).alias("shrinks"),
        F.sum(F.col("expand").cast("int")).alias("expands"),
        F.sum(delta("under_replicated", "was_under_replicated")).alias("urp_delta"),
        F.sum(delta("offline", "was_offline")).alias("offline_delta"),
    )


def intervals(t: DataFrame, flag: str, end_ms: int) -> DataFrame:
    """Stretches during which ``flag`` held for a partition, with durations;
    one still open at the end of the log ends at ``end_ms`` (open = true)."""
    was = "was_" + flag
    order = W.partitionBy("topic_id", "partition_id").orderBy("offset")
    edges = t.filter(F.col(flag) != F.col(was)).select(
        "topic_id", "partition_id", flag, "offset", "timestamp_ms",
        F.lead("timestamp_ms").over(order).alias("next_ms"),
        F.lead("offset").over(order).alias("next_offset"),
    )  # fmt: skip
    return edges.filter(F.col(flag)).select(
        "topic_id",
        "partition_id",
        F.col("offset").alias("start_offset"),
        F.col("timestamp_ms").alias("start_ms"),
        F.col("next_offset").alias("end_offset"),
        F.coalesce("next_ms", F.lit(end_ms)).alias("end_ms"),
        F.col("next_ms").isNull().alias("open"),
        (F.coalesce("next_ms", F.lit(end_ms)) - F.col("timestamp_ms")).alias("duration_ms"),
    )


def duration_summaries(spells: DataFrame) -> dict[str, dict]:
    """Count, open, p50, p99, max and total duration per ``kind`` of spell."""
    rows = (
        spells.groupBy("kind")
        .agg(
            F.count("*").alias("count"),
            F.sum(F.col("open").cast("int")).alias("open"),
            F.expr("percentile_approx(duration_ms, 0.5)").alias("p50_ms"),
            F.expr("percentile_approx(duration_ms, 0.99)").alias("p99_ms"),
            F.max("duration_ms").alias("max_ms"),
            F.sum("duration_ms").alias("total_ms"),
        )
        .collect()
    )
    empty = dict.fromkeys(("count", "open", "p50_ms", "p99_ms", "max_ms", "total_ms"), 0)
    out = {"urp": dict(empty), "offline": dict(empty)}
    for row in rows:
        out[row["kind"]] = {k: v or 0 for k, v in row.asDict().items() if k != "kind"}
    return out


def controller_changes(df: DataFrame) -> DataFrame:
    """LEADER_CHANGE records: the controller's elections (the first is not a
    failover), each with its batch (the report links to it)."""
    return df.filter(F.col("type") == "LEADER_CHANGE").select(
        "offset", "timestamp_ms", "controller_epoch", "leader_id", "leader_url",
        F.coalesce("batch_offset", "offset").alias("batch_offset"),
    )  # fmt: skip
