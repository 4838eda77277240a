"""The audit in Spark: each entity's state rebuilt with window functions in
offset order, and every rule of ``metadata_records.log_invariants.RULES`` as a
DataFrame of violations. Nothing is collected to the driver but a few scalars.

The rules are written once, in that module, as a sequential replay
(``replay_audit.py`` runs it over an export); this is their parallel twin, and
the tests hold the two to the same violations, word for word, on a corpus with
every rule broken. Batch rules look at each batch's end: partition and broker
states are taken at the last record of a batch (``batch_offset``), and a broker
a batch leaves inactive is joined to the leaderships and ISRs it holds then.

Of the records the image refuses, this twin recognises the change records of
an unknown broker or a stale epoch (``kip-380.change-at-current-epoch``) and
changes to partitions that do not exist (``log.record-applies``); the replay
knows every refusal.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window as W

from metadata_records.acls import AclOperation, AclPermissionType, AclResourceType, PatternType

REG = "REGISTER_BROKER_RECORD"
CHANGE = "BROKER_REGISTRATION_CHANGE_RECORD"
UNREG = "UNREGISTER_BROKER_RECORD"
PR = "PARTITION_RECORD"
PCR = "PARTITION_CHANGE_RECORD"
PIDS = "PRODUCER_IDS_RECORD"
QUOTA = "CLIENT_QUOTA_RECORD"
ACE = "ACCESS_CONTROL_ENTRY_RECORD"
RACE = "REMOVE_ACCESS_CONTROL_ENTRY_RECORD"
ELR_VERSION = "eligible.leader.replicas.version"
UNBOUNDED = W.unboundedPreceding


def _batch() -> Column:
    """A row's batch: its first offset (a snapshot's rows: the snapshot's offset)."""
    return F.coalesce(F.col("batch_offset"), F.col("offset"))


@dataclass
class AuditFrames:
    violations: DataFrame
    brokers: DataFrame  # broker records with the broker's state after each
    partitions: DataFrame  # partition records with the partition's state after each
    topics: DataFrame  # topic id -> name
    legacy_records: int = 0  # log records without batch_offset (an export from before it)


def _isr_text(col: Column) -> Column:
    return F.concat(F.lit("["), F.array_join(col, ", "), F.lit("]"))


def _violation(df: DataFrame, check: str, entity: Column, explanation: Column) -> DataFrame:
    return df.select(
        F.col("offset").cast("long").alias("offset"),
        F.col("timestamp_ms").cast("long").alias("timestamp_ms"),
        F.lit(check).alias("check"),
        entity.alias("entity"),
        explanation.alias("explanation"),
    )


def _label(registered: Column, fenced: Column, shutdown: Column) -> Column:
    """broker_label() of violations.py: '' when the broker is active."""
    return F.when(registered.isNull() | ~registered, F.lit("not registered")).otherwise(
        F.concat_ws(
            ", ",
            F.when(fenced, F.lit("fenced")),
            F.when(shutdown, F.lit("in controlled shutdown")),
        )
    )


@dataclass
class Overview:
    """What one pass over the log tells (a few rows per record type and
    controller epoch reach the driver): the figures the report starts from,
    how many log records lack a batch_offset, and whether the offsets look
    dense and the epochs ordered (``_offsets_look_right``)."""

    kinds: dict[str, int]  # records per type
    records: int
    first_offset: int
    last_offset: int
    first_ms: int
    last_ms: int
    snapshot_rows: int
    legacy_records: int  # log records without batch_offset
    offsets_look_right: bool


def log_overview(df: DataFrame) -> Overview | None:
    """The log's Overview from one scan of it; None when it holds no records."""
    o = F.col("offset").cast("decimal(38,0)")
    rows = (
        df.groupBy("type", "controller_epoch", "from_snapshot")
        .agg(
            F.count("*").alias("n"),
            F.min("offset").alias("lo"),
            F.max("offset").alias("hi"),
            F.sum(o).alias("s1"),
            F.sum(o * o).alias("s2"),
            F.min("timestamp_ms").alias("first_ms"),
            F.max("timestamp_ms").alias("last_ms"),
            F.sum(F.col("batch_offset").isNull().cast("int")).alias("no_batch"),
        )
        .collect()
    )
    if not rows:
        return None
    kinds: dict[str, int] = {}
    for r in rows:
        kinds[r["type"]] = kinds.get(r["type"], 0) + r["n"]
    log = [r for r in rows if not r["from_snapshot"]]
    snapshot = [r for r in rows if r["from_snapshot"]]
    return Overview(
        kinds=kinds,
        records=sum(kinds.values()),
        first_offset=min(r["lo"] for r in rows),
        last_offset=max(r["hi"] for r in rows),
        first_ms=min(r["first_ms"] for r in rows),
        last_ms=max(r["last_ms"] for r in rows),
        snapshot_rows=sum(r["n"] for r in snapshot),
        legacy_records=sum(r["no_batch"] for r in log),
        offsets_look_right=_offsets_look_right(log, snapshot),
    )


def _offsets_look_right(log: list, snapshot: list) -> bool:
    """A test that needs no shuffle of the log, from log_overview's rows (per
    type, epoch and from_snapshot): True when the log records' offsets are
    exactly one dense range (count, sum and sum of squares of a dense range
    are fixed by its ends) and each controller epoch occupies an offset range
    after the previous epoch's. When it is False, the exact checks find where."""
    if not log:
        return True
    n, lo, hi = sum(r["n"] for r in log), min(r["lo"] for r in log), max(r["hi"] for r in log)
    if n != hi - lo + 1:
        return False
    squares = lambda k: k * (k + 1) * (2 * k + 1) // 6  # noqa: E731  (sum of i^2, i <= k)
    s1, s2 = sum(r["s1"] for r in log), sum(r["s2"] for r in log)
    if s1 != (lo + hi) * n // 2 or s2 != squares(hi) - squares(lo - 1):
        return False
    if snapshot:
        if max(r["hi"] for r in snapshot) != lo - 1:
            return False
        snap_epoch = max(r["controller_epoch"] for r in snapshot)
    else:
        snap_epoch = None
    epochs: dict[int, tuple[int, int]] = {}
    for r in log:
        was = epochs.get(r["controller_epoch"])
        span = (r["lo"], r["hi"]) if was is None else (min(was[0], r["lo"]), max(was[1], r["hi"]))
        epochs[r["controller_epoch"]] = span
    spans = sorted((e, a, b) for e, (a, b) in epochs.items())
    if snap_epoch is not None and spans[0][0] < snap_epoch:
        return False
    return all(a[2] < b[1] for a, b in zip(spans, spans[1:], strict=False))


def offsets_checks(df: DataFrame, first: int, look_right: bool) -> list[DataFrame]:
    """``first``: the lowest offset of the export (no record precedes it);
    ``look_right``: log_overview's offsets_look_right (when True, nothing to find)."""
    if look_right:
        return []
    log = F.when(~F.col("from_snapshot"), 1).otherwise(0)
    per_offset = df.groupBy("offset").agg(
        F.max("controller_epoch").alias("before_epoch"),
        F.sum(log).alias("n"),
        F.min(F.when(~F.col("from_snapshot"), F.col("timestamp_ms"))).alias("timestamp_ms"),
    )
    before = per_offset.select((F.col("offset") + 1).alias("next"), "before_epoch")
    live = df.filter(~F.col("from_snapshot")).select("offset", "timestamp_ms", "controller_epoch")
    joined = live.join(before, live["offset"] == before["next"], "left")
    gaps = joined.filter(F.col("before_epoch").isNull() & (F.col("offset") > F.lit(first)))
    epochs = joined.filter(F.col("controller_epoch") < F.col("before_epoch"))
    dups = per_offset.filter(F.col("n") > 1)
    o = F.col("offset")
    return [
        _violation(
            gaps,
            "log.offsets-dense",
            F.lit("log"),
            F.format_string("offset %d is missing: no record precedes offset %d", o - 1, o),
        ),
        _violation(
            epochs,
            "log.controller-epoch-never-decreases",
            F.lit("controller"),
            F.format_string(
                "controller epoch %d at offset %d is below %d, the epoch at offset %d",
                F.col("controller_epoch"),
                o,
                F.col("before_epoch"),
                o - 1,
            ),
        ),
        _violation(
            dups,
            "log.offsets-dense",
            F.lit("log"),
            F.format_string("offset %d appears %d times", o, F.col("n")),
        ),
    ]


def broker_states(df: DataFrame) -> DataFrame:
    """Broker records, each with the broker's state after it: registered epoch
    (null once unregistered), fenced, in controlled shutdown (sticky until a
    new registration), and ``cur_epoch``, the epoch before it (null while not
    registered)."""
    b = df.filter(F.col("type").isin(REG, CHANGE, UNREG)).select(
        "offset", "seq", "batch_offset", "timestamp_ms", "from_snapshot", "type", "broker_id",
        "broker_epoch", "incarnation_id", "fenced", "in_controlled_shutdown", "fenced_change",
        "in_controlled_shutdown_change",
    )  # fmt: skip
    order = W.partitionBy("broker_id").orderBy("offset", "seq")
    upto = order.rowsBetween(UNBOUNDED, W.currentRow)
    before = order.rowsBetween(UNBOUNDED, -1)
    is_reg = F.col("type") == REG
    reg_epoch = F.last(F.when(is_reg, F.col("broker_epoch")), ignorenulls=True)
    # An UnregisterBrokerRecord applies when it names the epoch of the last
    # registration and none applied since: the first such one after each
    # registration (each registration starts a group of rows).
    b = b.withColumn("reg_group", F.sum(is_reg.cast("int")).over(upto)).withColumn(
        "named", (F.col("type") == UNREG) & (F.col("broker_epoch") == reg_epoch.over(before))
    )
    in_group = W.partitionBy("broker_id", "reg_group").orderBy("offset", "seq")
    b = b.withColumn(
        "unregistered",
        F.col("named")
        & ~F.coalesce(F.max("named").over(in_group.rowsBetween(UNBOUNDED, -1)), F.lit(False)),
    )
    # Whether the broker is gone after each row: set by an applied unregister,
    # cleared by a registration.
    gone = F.last(
        F.when(is_reg, F.lit(False)).when(F.col("unregistered"), F.lit(True)), ignorenulls=True
    )
    b = b.withColumn(
        "cur_epoch",
        F.when(~F.coalesce(gone.over(before), F.lit(False)), reg_epoch.over(before)),
    ).withColumn(
        "cur_incarnation",
        F.last(F.when(is_reg, F.col("incarnation_id")), ignorenulls=True).over(before),
    )
    cs_code = F.coalesce(F.col("in_controlled_shutdown_change"), F.lit(0))
    applied = (
        is_reg
        | F.col("unregistered")
        | (
            (F.col("type") == CHANGE)
            & F.col("cur_epoch").isNotNull()
            & (F.col("broker_epoch") == F.col("cur_epoch"))
            & F.col("fenced_change").isin(-1, 0, 1)
            & cs_code.isin(0, 1)
        )
    )
    fenced_set = (
        F.when(is_reg, F.coalesce(F.col("fenced"), F.lit(False)))
        .when(applied & (F.col("fenced_change") == 1), F.lit(True))
        .when(applied & (F.col("fenced_change") == -1), F.lit(False))
    )
    # Only a registration clears controlled shutdown, so "last set" is sticky.
    cs_set = F.when(is_reg, F.coalesce(F.col("in_controlled_shutdown"), F.lit(False))).when(
        applied & (cs_code == 1), F.lit(True)
    )
    return (
        b.withColumn("applied", applied)
        .withColumn("fenced_after", F.last(fenced_set, ignorenulls=True).over(upto))
        .withColumn("shutdown_after", F.last(cs_set, ignorenulls=True).over(upto))
        .withColumn("registered_epoch", F.when(~gone.over(upto), reg_epoch.over(upto)))
        .drop("reg_group", "named")
    )  # fmt: skip


def broker_checks(b: DataFrame) -> list[DataFrame]:
    live = b.filter(~F.col("from_snapshot"))
    epoch, off, prev = F.col("broker_epoch"), F.col("offset"), F.col("cur_epoch")
    # The same incarnation amending its registration keeps its epoch.
    amends = (F.col("incarnation_id") == F.col("cur_incarnation")) & (epoch == prev)
    reg = live.filter((F.col("type") == REG) & ~F.coalesce(amends, F.lit(False)))
    problems = F.concat_ws(
        " and ",
        F.when(
            epoch != off,
            F.format_string("which is not the offset of its RegisterBrokerRecord (%d)", off),
        ),
        F.when(
            prev.isNotNull() & (epoch <= prev),
            F.format_string("which does not increase on its previous epoch %d", prev),
        ),
    )
    reg = reg.withColumn("problems", problems).filter(F.col("problems") != "")
    change = live.filter(F.col("type").isin(CHANGE, UNREG) & (prev.isNull() | (epoch != prev)))
    what = F.when(F.col("type") == UNREG, F.lit("unregister")).otherwise(F.lit("change"))
    entity = F.format_string("broker %d", F.col("broker_id"))
    return [
        _violation(
            reg,
            "kip-380.epoch-is-registration-offset",
            entity,
            F.format_string("registered with epoch %d %s", epoch, F.col("problems")),
        ),
        _violation(
            change,
            "kip-380.change-at-current-epoch",
            entity,
            F.when(
                prev.isNull(),
                F.format_string(
                    "%s record for broker %d, which is not registered", what, F.col("broker_id")
                ),
            ).otherwise(
                F.format_string(
                    "%s record carries epoch %d, but the broker's current epoch is %d",
                    what,
                    epoch,
                    prev,
                )
            ),
        ),
    ]


def partition_states(df: DataFrame) -> DataFrame:
    """Partition records of existing partitions, each with the partition's state
    after it (ISR, replica count, leader, leader and partition epochs) and
    before it. Arrays are kept only where a check needs the members.

    One shuffle and one sort by (topic, partition, offset), and two window
    operators over it: the first counts (PartitionRecords so far, leader
    moves, rows), the second takes every state at once, each "after" over
    the rows up to this one and each "before" over the rows before it (not a
    ``lag`` of the "after", which would be a third operator, and Spark copies
    every row into each operator's buffer)."""
    p = df.filter(F.col("type").isin(PR, PCR)).select(
        "offset", "seq", "batch_offset", "timestamp_ms", "from_snapshot", "type", "topic_id",
        "partition_id", "replicas", "isr", "leader", "leader_epoch", "partition_epoch",
        "eligible_leader_replicas",
    )  # fmt: skip
    key = ("topic_id", "partition_id")
    order = W.partitionBy(*key).orderBy("offset", "seq")
    upto = order.rowsBetween(UNBOUNDED, W.currentRow)
    before = order.rowsBetween(UNBOUNDED, -1)
    is_pr = F.col("type") == PR
    # A PartitionRecord starts a partition's history again (its epochs are
    # given); each change after it adds 1 to the partition epoch, and 1 to the
    # leader epoch when it names a leader. Records before the first
    # PartitionRecord change nothing (refused_changes reports them).
    moves = F.sum(F.when(~is_pr & (F.col("leader") != -2), 1).otherwise(0)).over(upto)
    p = p.select(
        "*",
        F.sum(is_pr.cast("int")).over(upto).alias("seg"),
        moves.alias("moves"),
        F.row_number().over(order).alias("n"),
    ).filter(F.col("seg") > 0)
    # KIP-966: a PartitionRecord's null ELR is empty, a change's is "unchanged".
    none = F.array().cast("array<int>")
    elr = F.when(is_pr, F.coalesce("eligible_leader_replicas", none)).otherwise(
        F.col("eligible_leader_replicas")
    )
    leader = F.when(F.col("leader") != -2, F.col("leader"))
    leader_base = F.when(is_pr, F.col("leader_epoch") - F.col("moves"))
    partition_base = F.when(is_pr, F.col("partition_epoch") - F.col("n"))
    last = lambda col, frame: F.last(col, ignorenulls=True).over(frame)  # noqa: E731
    has_prev = F.lag("n").over(order).isNotNull()
    p = p.select(
        "offset", "seq", "batch_offset", "timestamp_ms", "from_snapshot", "type", "topic_id",
        "partition_id", "isr", "leader", "leader_epoch", "partition_epoch",
        last("isr", upto).alias("isr_state"),
        F.size(last("replicas", upto)).alias("replicas_size"),
        last(leader, upto).alias("leader_state"),
        (last(leader_base, upto) + F.col("moves")).alias("leader_epoch_state"),
        (last(partition_base, upto) + F.col("n")).alias("partition_epoch_state"),
        last("isr", before).alias("prev_isr"),
        F.when(has_prev, F.size(last("replicas", before))).alias("prev_replicas_size"),
        last(leader, before).alias("prev_leader"),
        (last(leader_base, before) + F.lag("moves").over(order)).alias("prev_leader_epoch"),
        (last(partition_base, before) + F.lag("n").over(order)).alias("prev_partition_epoch"),
        _batch().alias("batch"),
        F.lead(_batch()).over(order).alias("following"),
        elr.isNotNull().alias("elr_given"),
        elr.alias("elr_set"),
        last(elr, upto).alias("elr_state"),
        F.coalesce(last(elr, before), none).alias("prev_elr"),
    )  # fmt: skip
    # The batch rules read each partition's state at the end of each batch
    # that touched it, and the batch that touches it next: the last row of a
    # batch is the one the next row's batch differs from (batches are runs of
    # offsets), so this sort serves them too.
    batch_end = F.col("following").isNull() | (F.col("following") != F.col("batch"))
    return p.select(
        "offset", "seq", "batch_offset", "timestamp_ms", "from_snapshot", "type", "topic_id",
        "partition_id", "isr", "leader", "leader_epoch", "partition_epoch", "isr_state",
        "replicas_size", "leader_state", "leader_epoch_state", "partition_epoch_state",
        "prev_isr", "prev_replicas_size", "prev_leader", "prev_leader_epoch",
        "prev_partition_epoch",
        # Who the record puts into the ISR: KIP-841 looks at these only.
        F.array_except("isr", F.coalesce("prev_isr", none)).alias("added"),
        F.size("prev_isr").alias("prev_isr_size"),
        "batch",
        batch_end.alias("batch_end"),
        F.when(batch_end, F.col("following")).alias("next_batch"),
        "elr_given", "elr_state", "prev_elr",
        # Who the record puts into the ELR from outside the ISR and the ELR
        # before it; who the ELR and the ISR share after it.
        F.when(
            F.col("elr_set").isNotNull(),
            F.array_except("elr_set", F.array_union(F.coalesce("prev_isr", none), "prev_elr")),
        ).alias("elr_joined"),
        # (An empty ELR, the usual case, shares nothing: no set to build.)
        F.when(F.size("elr_state") > 0, F.array_intersect("elr_state", "isr_state"))
        .otherwise(F.col("elr_state"))
        .alias("elr_shared"),
    )  # fmt: skip


def with_entity(df: DataFrame, topics: DataFrame) -> DataFrame:
    """Adds ``entity`` (``<topic name>-<partition>``) to a few partition rows."""
    name = F.coalesce(F.col("topic_name"), F.col("topic_id"))
    return df.join(F.broadcast(topics), "topic_id", "left").withColumn(
        "entity", F.concat(name, F.lit("-"), F.col("partition_id").cast("string"))
    )


def elr_levels(df: DataFrame) -> DataFrame:
    """(offset, feature_level) of each FeatureLevelRecord of
    eligible.leader.replicas.version (KIP-966): a handful of rows."""
    return df.filter(
        (F.col("type") == "FEATURE_LEVEL_RECORD") & (F.col("name") == ELR_VERSION)
    ).select(F.col("offset").alias("f_offset"), "feature_level")


def _without_elr(rows: DataFrame, levels: DataFrame) -> DataFrame:
    """The ``rows`` (few: empty ISRs) written while ELR was off: the last
    eligible.leader.replicas.version record before each is absent or below 1."""
    latest = (
        rows.select("offset", "seq")
        .join(F.broadcast(levels), F.col("f_offset") < F.col("offset"), "left")
        .groupBy("offset", "seq")
        .agg(F.max_by("feature_level", "f_offset").alias("elr_level"))
    )
    return rows.join(latest, ["offset", "seq"], "left").filter(
        F.coalesce(F.col("elr_level"), F.lit(0)) < 1
    )


@dataclass
class Spans:
    """Each broker's state from each of its records to its next, for the as-of
    joins: "the broker's state at this offset (or at the end of this batch)"
    for a million partition rows is a broadcast hash join on (broker, bucket)
    with the few thousand broker records, not a window per broker over the
    partition rows (a shuffle of them all, and a dozen groups that grow with
    the log). Offsets fall in buckets ``width`` wide; a span is listed in
    every bucket it covers, so a probe finds its span among the few of its
    own bucket."""

    rows: DataFrame  # broker_id, bucket, s_offset, s_seq, s_next_offset, s_next_seq, s_batch, s_next_batch, s_registered, s_fenced, s_shutdown
    width: int

    def bucket(self, col: Column) -> Column:
        return F.floor(col / F.lit(self.width))


# Broker records (all brokers') a bucket holds on average when they are
# spread evenly over the log; and the most buckets (each broker's last span
# is listed in every bucket to the log's end).
SPANS_PER_BUCKET = 8
MAX_BUCKETS = 4096
# Up to this many broker records, the spans are broadcast to the partition rows.
BROADCAST_SPANS = 1_000_000


def broker_spans(b: DataFrame, first_offset: int, last_offset: int, broker_rows: int) -> Spans:
    """``b``: broker_states; ``broker_rows``: how many rows it has (from the
    overview's record types)."""
    span = max(last_offset - first_offset + 1, 1)
    buckets = min(max(broker_rows // SPANS_PER_BUCKET, 1), MAX_BUCKETS)
    width = max(-(-span // buckets), 1)
    order = W.partitionBy("broker_id").orderBy("offset", "seq")
    rows = b.select(
        "broker_id",
        F.col("offset").alias("s_offset"),
        F.col("seq").alias("s_seq"),
        F.lead("offset").over(order).alias("s_next_offset"),
        F.lead("seq").over(order).alias("s_next_seq"),
        _batch().alias("s_batch"),
        F.lead(_batch()).over(order).alias("s_next_batch"),
        F.col("registered_epoch").isNotNull().alias("s_registered"),
        F.col("fenced_after").alias("s_fenced"),
        F.col("shutdown_after").alias("s_shutdown"),
    )
    bucket = lambda col: F.floor(col / F.lit(width))  # noqa: E731  (Spans.bucket)
    # A span covers the offsets from its batch's start to the next record's
    # (a batch ends at or before the next record's offset).
    end = F.coalesce(F.col("s_next_offset"), F.lit(last_offset))
    rows = rows.withColumn("bucket", F.explode(F.sequence(bucket(F.col("s_batch")), bucket(end))))
    return Spans(F.broadcast(rows) if broker_rows <= BROADCAST_SPANS else rows, width)


def _state_label() -> Column:
    """The label of the span a probe found (none found: not registered yet)."""
    return _label(F.col("s_registered"), F.col("s_fenced"), F.col("s_shutdown"))


def state_at_offset(probes: DataFrame, broker: str, spans: Spans) -> DataFrame:
    """``probes`` (offset, seq, ``broker`` columns) with the state the last
    record of that broker before each left: the span with s_offset/s_seq
    before the probe and its next record at or after it."""
    pk = F.struct(F.col("offset"), F.col("seq"))
    after = F.struct(F.col("s_offset"), F.col("s_seq"))
    until = F.struct(F.col("s_next_offset"), F.col("s_next_seq"))
    cond = (
        (F.col(broker) == F.col("broker_id"))
        & (F.col("p_bucket") == F.col("bucket"))
        & (after < pk)
        & (F.col("s_next_offset").isNull() | (pk <= until))
    )
    joined = probes.withColumn("p_bucket", spans.bucket(F.col("offset"))).join(
        spans.rows, cond, "left"
    )
    return joined.withColumn("label", _state_label())


def state_at_batch_end(probes: DataFrame, broker: str, spans: Spans) -> DataFrame:
    """``probes`` (batch, ``broker`` columns) with the broker's state at the end of
    that batch: the span of its last record of that batch or before."""
    cond = (
        (F.col(broker) == F.col("broker_id"))
        & (F.col("p_bucket") == F.col("bucket"))
        & (F.col("s_batch") <= F.col("batch"))
        & (F.col("s_next_batch").isNull() | (F.col("batch") < F.col("s_next_batch")))
    )
    joined = probes.withColumn("p_bucket", spans.bucket(F.col("batch"))).join(
        spans.rows, cond, "left"
    )
    return joined.withColumn("label", _state_label())


def partition_checks(
    p: DataFrame, spans: Spans, topics: DataFrame, features: DataFrame
) -> list[DataFrame]:
    """The record rules of partition records: kip-841.isr-adds-only-active,
    kip-966.isr-empty-only-with-elr (unless ELR is on: ``features`` is
    ``elr_levels``), kip-966.elr-from-isr-or-elr, kip-966.elr-disjoint-from-isr,
    and the epochs of a PartitionRecord that restates a partition
    (partition.epoch-increases-by-one, partition.leader-epoch-never-decreases)."""
    live = p.filter(~F.col("from_snapshot"))
    carry = ["offset", "seq", "timestamp_ms", "topic_id", "partition_id", "isr"]
    probes = live.filter(F.col("isr").isNotNull() & (F.size("added") > 0)).select(
        *carry, F.posexplode("added").alias("pos", "probe_broker")
    )
    timeline = state_at_offset(probes, "probe_broker", spans).filter(F.col("label") != "")
    bad_isr = (
        with_entity(timeline, topics)
        .groupBy("offset", "seq", "timestamp_ms", "entity", "isr")
        .agg(
            F.sort_array(
                F.collect_list(
                    F.struct("pos", F.format_string("broker %d (%s)", "probe_broker", "label"))
                )
            ).alias("items")
        )
    )
    entity = F.col("entity")
    return [
        _violation(
            bad_isr,
            "kip-841.isr-adds-only-active",
            entity,
            F.concat(
                F.lit("ISR "),
                _isr_text(F.col("isr")),
                F.lit(" adds "),
                F.array_join(F.transform("items", lambda s: s.getField("col2")), ", "),
            ),
        ),  # fmt: skip
        _violation(
            with_entity(
                _without_elr(
                    live.filter(F.col("isr").isNotNull() & (F.size("isr") == 0)), features
                ),
                topics,
            ),
            "kip-966.isr-empty-only-with-elr",
            entity,
            F.lit("the ISR is empty"),
        ),
        # The rules that read one row each, in one scan of the states.
        _in_one_pass(
            live,
            topics,
            (
                "kip-966.elr-from-isr-or-elr",
                F.size(F.coalesce("elr_joined", F.array())) > 0,
                F.concat(
                    F.lit("ELR "),
                    _isr_text(F.col("elr_state")),
                    F.lit(" adds "),
                    F.array_join(
                        F.transform("elr_joined", lambda b: F.format_string("broker %d", b)), ", "
                    ),
                    F.lit(", not in the ISR "),
                    _isr_text(F.coalesce("prev_isr", F.array())),
                    F.lit(" or the ELR "),
                    _isr_text(F.col("prev_elr")),
                ),
            ),
            (
                "kip-966.elr-disjoint-from-isr",
                (F.col("elr_given") | F.col("isr").isNotNull()) & (F.size("elr_shared") > 0),
                F.concat(
                    F.lit("ELR "),
                    _isr_text(F.col("elr_state")),
                    F.lit(" and ISR "),
                    _isr_text(F.col("isr_state")),
                    F.lit(" share "),
                    F.array_join(
                        F.transform("elr_shared", lambda b: F.format_string("broker %d", b)), ", "
                    ),
                ),
            ),
            (
                "partition.epoch-increases-by-one",
                (F.col("type") == PR)
                & F.col("prev_partition_epoch").isNotNull()
                & (F.col("partition_epoch") != F.col("prev_partition_epoch") + 1),
                F.format_string(
                    "partition epoch %d follows %d: expected %d",
                    F.col("partition_epoch"),
                    F.col("prev_partition_epoch"),
                    F.col("prev_partition_epoch") + 1,
                ),
            ),
            (
                "partition.leader-epoch-never-decreases",
                (F.col("type") == PR)
                & F.col("prev_partition_epoch").isNotNull()
                & (F.col("leader_epoch") < F.col("prev_leader_epoch")),
                F.format_string(
                    "leader epoch %d is below the previous %d",
                    F.col("leader_epoch"),
                    F.col("prev_leader_epoch"),
                ),
            ),
        ),
    ]


def _in_one_pass(
    rows: DataFrame, topics: DataFrame, *rules: tuple[str, Column, Column]
) -> DataFrame:
    """The violations of several (check, condition, explanation) rules of
    partition rows, from one scan of ``rows`` (a union of one filter per rule
    would scan them once per rule)."""
    found = F.filter(
        F.array(
            *(
                F.when(broken, F.struct(F.lit(check).alias("check"), why.alias("why")))
                for check, broken, why in rules
            )
        ),
        lambda v: v.isNotNull(),
    )
    hits = rows.select(
        "offset", "timestamp_ms", "topic_id", "partition_id", F.explode(found).alias("v")
    )
    return with_entity(hits, topics).select(
        F.col("offset").cast("long").alias("offset"),
        F.col("timestamp_ms").cast("long").alias("timestamp_ms"),
        F.col("v.check").alias("check"),
        F.col("entity"),
        F.col("v.why").alias("explanation"),
    )


def batch_ends(p: DataFrame, b: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(each partition's state at the end of each batch that touched it, with
    the batch that touches it next; each broker's state at the end of each
    batch whose records changed it). Snapshot rows count as one batch."""
    last = lambda *key: W.partitionBy(*key).orderBy(F.desc("offset"), F.desc("seq"))  # noqa: E731
    tp = ("topic_id", "partition_id")
    parts = (
        p.filter(F.col("batch_end")).select(  # partition_states found them in its one sort
            *tp,
            "batch",
            "next_batch",
            "timestamp_ms",
            "from_snapshot",
            "isr_state",
            "leader_state",
        )  # fmt: skip
    )
    registered = F.col("registered_epoch").isNotNull()
    brokers = (
        b.filter(~F.col("from_snapshot") & F.col("applied"))
        .withColumn("batch", _batch())
        .withColumn("n", F.row_number().over(last("broker_id", "batch")))
        .filter(F.col("n") == 1)
        .select(
            "broker_id",
            "batch",
            "timestamp_ms",
            _label(
                F.when(registered, F.lit(True)), F.col("fenced_after"), F.col("shutdown_after")
            ).alias("label"),
        )  # fmt: skip
    )
    return parts, brokers


def batch_checks(
    p: DataFrame, b: DataFrame, spans: Spans, topics: DataFrame, last_offset: int
) -> list[DataFrame]:
    """The batch rules, ``partition.leader-active-in-isr`` and
    ``partition.inactive-leaves-isr``, at each batch's end, for
    what the batch touched (see ``metadata_records.log_invariants``)."""
    parts, ends = batch_ends(p, b)
    # 1. Partitions a batch changed: their leader, against the broker's state
    # at the end of that batch (its records of that batch included).
    probes = parts.filter(~F.col("from_snapshot") & (F.col("leader_state") != -1)).select(
        "topic_id", "partition_id", "batch", "timestamp_ms", "isr_state", "leader_state",
    )  # fmt: skip
    touched = state_at_batch_end(probes, "leader_state", spans).select(
        "topic_id", "partition_id", "batch", "timestamp_ms", "isr_state", "leader_state", "label",
    )  # fmt: skip
    # 2. Brokers a batch left inactive: every leadership and ISR of more than
    # one broker they hold at its end (the partition's state of the last batch
    # that touched it at or before this one). A partition's state holds from
    # its batch until the next: listed in each bucket of offsets it covers, it
    # meets the few inactive brokers of its bucket in a broadcast hash join.
    inactive = ends.filter(F.col("label") != "").select(
        F.col("broker_id").alias("member"), F.col("batch").alias("at"),
        F.col("timestamp_ms").alias("at_ms"), "label",
        spans.bucket(F.col("batch")).alias("bucket"),
    )  # fmt: skip
    until = F.coalesce(F.col("next_batch") - 1, F.lit(last_offset))
    members = parts.select(
        "*",
        F.explode(F.array_union(F.array("leader_state"), "isr_state")).alias("member"),
    ).withColumn("bucket", F.explode(F.sequence(spans.bucket(F.col("batch")), spans.bucket(until))))
    held = (
        members.join(F.broadcast(inactive), ["member", "bucket"])
        .filter(
            (F.col("batch") <= F.col("at"))
            & (F.col("next_batch").isNull() | (F.col("at") < F.col("next_batch")))
        )
        .withColumn("batch", F.col("at"))
        .withColumn("timestamp_ms", F.col("at_ms"))
    )
    left_leading = held.filter(F.col("leader_state") == F.col("member")).select(
        "topic_id", "partition_id", "batch", "timestamp_ms", "isr_state", "leader_state", "label"
    )
    # The problems first, then distinct: of a million rows (every batch end
    # of every partition) only the few with a problem are shuffled.
    leaders = (
        touched.unionByName(left_leading)
        .withColumn(
            "problems",
            F.concat_ws(
                " and ",
                F.when(
                    ~F.array_contains("isr_state", F.col("leader_state")),
                    F.concat(F.lit("not in the ISR "), _isr_text(F.col("isr_state"))),
                ),
                F.when(F.col("label") != "", F.col("label")),
            ),
        )
        .filter(F.col("problems") != "")
        .distinct()
    )
    leaders = with_entity(leaders, topics)
    shared = with_entity(
        held.filter(F.array_contains("isr_state", F.col("member")) & (F.size("isr_state") > 1)),
        topics,
    )
    at = lambda df: df.withColumn("offset", F.col("batch"))  # noqa: E731
    return [
        _violation(
            at(leaders),
            "partition.leader-active-in-isr",
            F.col("entity"),
            F.format_string("leader %d is %s", F.col("leader_state"), F.col("problems")),
        ),
        _violation(
            at(shared),
            "partition.inactive-leaves-isr",
            F.col("entity"),
            F.format_string(
                "broker %d (%s) is in the ISR %s",
                F.col("member"),
                F.col("label"),
                _isr_text(F.col("isr_state")),
            ),
        ),
    ]


def refused_changes(df: DataFrame, topics: DataFrame) -> DataFrame:
    """Live PartitionChangeRecords to a partition no PartitionRecord created before them."""
    tp = ("topic_id", "partition_id")
    created = df.filter(F.col("type") == PR).groupBy(*tp).agg(F.min("offset").alias("created"))
    ghosts = (
        df.filter((F.col("type") == PCR) & ~F.col("from_snapshot"))
        .join(created, list(tp), "left")
        .filter(F.col("created").isNull() | (F.col("offset") < F.col("created")))
    )
    return _violation(
        with_entity(ghosts, topics),
        "log.record-applies",
        F.col("entity"),
        F.lit("a change to a partition that does not exist"),
    )


def producer_id_checks(df: DataFrame) -> DataFrame:
    """producer-ids.blocks-never-overlap: a live ProducerIdsRecord whose
    nextProducerId does not exceed every one before it (a snapshot's
    restatement included) hands out ids of a block already granted. These records are few (one per 1,000
    producer ids), so one ordered window over them is cheap."""
    rows = df.filter(F.col("type") == PIDS)
    before = W.orderBy("offset", "seq").rowsBetween(UNBOUNDED, -1)
    prior = F.coalesce(F.max("next_producer_id").over(before), F.lit(0))
    overlapping = rows.withColumn("prior", prior).filter(
        ~F.col("from_snapshot") & (F.col("next_producer_id") <= F.col("prior"))
    )
    return _violation(
        overlapping,
        "producer-ids.blocks-never-overlap",
        F.format_string("broker %d", F.col("broker_id")),
        F.format_string(
            "nextProducerId %d does not exceed %d: its block overlaps one granted before",
            F.col("next_producer_id"),
            F.col("prior"),
        ),
    )


def client_quota_checks(df: DataFrame) -> DataFrame:
    """quota.record-valid: a live ClientQuotaRecord that replay ignores
    (metadata_records.client_quotas.record_problem, column by column): no
    valid entity (empty, an unknown or repeated type, an empty name, ip with
    another type), a key its entity cannot hold, or a value Kafka's controller
    refuses (not above 0; fractional or out of range for an integer key)."""
    rows = df.filter((F.col("type") == QUOTA) & ~F.col("from_snapshot"))
    types = F.transform(F.col("quota_entity"), lambda e: e["entity_type"])
    n = F.size(F.col("quota_entity"))
    key, value = F.col("quota_key"), F.col("quota_value")
    is_ip = F.array_contains(types, "ip")
    user_keys = ["producer_byte_rate", "consumer_byte_rate", "request_percentage",
                 "controller_mutation_rate"]  # fmt: skip
    integral = key.isin("producer_byte_rate", "consumer_byte_rate", "connection_creation_rate")
    # Above Int.MaxValue (exact as a double); above Long.MaxValue, which is
    # 2**63 as a double: a LONG quota must stay below 2**63.
    too_large = F.when(key == "connection_creation_rate", value > float(2**31 - 1)).otherwise(
        value >= 2.0**63
    )
    unknown = F.array_sort(
        F.array_distinct(F.filter(types, lambda t: ~t.isin("user", "client-id", "ip")))
    )
    problem = (
        F.when(n == 0, F.lit("the record names no entity"))
        .when(
            F.size(unknown) > 0, F.concat(F.lit("unknown entity type "), F.array_join(unknown, ","))
        )
        .when(F.size(F.array_distinct(types)) != n, F.lit("an entity type appears more than once"))
        .when(
            F.exists(F.col("quota_entity"), lambda e: e["entity_name"] == ""),
            F.lit("an entity name is empty"),
        )
        .when(is_ip & (n > 1), F.lit("ip is combined with user or client-id"))
        .when(
            F.when(is_ip, key != "connection_creation_rate").otherwise(~key.isin(*user_keys)),
            F.concat(key, F.lit(" is not a quota of this entity")),
        )
        .when(F.col("quota_remove"), F.lit(None))
        .when(~(value > 0), F.concat(key, F.lit(" must be greater than 0")))
        .when(
            integral & too_large,
            F.concat(
                key,
                F.lit(" is too large for "),
                F.when(key == "connection_creation_rate", F.lit("INT")).otherwise(F.lit("LONG")),
            ),
        )
        .when(
            integral & (F.abs(value % 1.0) > 1e-6),
            F.concat(key, F.lit(" cannot be a fractional value")),
        )
    )
    bad = rows.withColumn("problem", problem).filter(F.col("problem").isNotNull())
    entity = F.concat_ws(
        ",",
        F.transform(
            F.col("quota_entity"),
            lambda e: F.concat(
                e["entity_type"], F.lit("="), F.coalesce(e["entity_name"], F.lit("<default>"))
            ),
        ),
    )
    return _violation(
        bad, "quota.record-valid", F.concat(F.lit("quota "), entity), F.col("problem")
    )


def _enum_name(code: Column, enum: type) -> Column:
    """Kafka's name of an ACL enum code, or "code N" (acls.py's _name)."""
    names = F.create_map(*[F.lit(x) for m in enum for x in (int(m), m.name)])
    return F.coalesce(names[code], F.format_string("code %d", code))


_ACL_ENUM_COLUMNS = (
    ("resource_type", AclResourceType, "resourceType", (2, 3, 4, 5, 6, 7)),
    ("pattern_type", PatternType, "patternType", (3, 4)),
    ("operation", AclOperation, "operation", tuple(range(2, 15))),
    ("permission_type", AclPermissionType, "permissionType", (2, 3)),
)


def acl_checks(df: DataFrame) -> DataFrame:
    """acl.record-valid: a live AccessControlEntryRecord with a resource type,
    pattern type, operation or permission that does not exist or only filters
    hold (ANY, UNKNOWN, MATCH), named as the replay names the first
    (validateNewAcl's order); and a RemoveAccessControlEntryRecord whose id
    was never created, or removed already: the record before it with its id
    (a snapshot's restatement included) is not a creation the image keeps.
    Not seen here: a creation the image refuses for an id or a binding
    already held (the replay reports those under ``log.record-applies``, and
    what follows from them)."""
    problem = F.lit(None).cast("string")
    for column, enum, field, valid in reversed(_ACL_ENUM_COLUMNS):
        problem = F.when(
            ~F.col(column).isin(*valid),
            F.concat(F.lit(f"Invalid {field} "), _enum_name(F.col(column), enum)),
        ).otherwise(problem)
    acls = df.filter(F.col("type") == ACE).withColumn("problem", problem)
    bad = acls.filter(~F.col("from_snapshot") & F.col("problem").isNotNull())
    invalid = _violation(
        bad,
        "acl.record-valid",
        F.concat(F.lit("acl "), F.col("id")),
        F.concat(F.col("problem"), F.lit(": no such ACL can exist")),
    )
    kept = (
        F.col("problem").isNull()
        & (F.col("resource_name") != "")
        & ((F.col("resource_type") != 4) | (F.col("resource_name") == "kafka-cluster"))
        & F.col("principal").contains(":")
        & ~F.col("principal").startswith(":")
        & (F.col("host") != "")
    )
    events = acls.filter(kept).select(
        "offset", "seq", "timestamp_ms", "type", "id", "from_snapshot"
    )
    removals = df.filter(F.col("type") == RACE).select(
        "offset", "seq", "timestamp_ms", "type", "id", "from_snapshot"
    )
    by_id = W.partitionBy("id").orderBy("offset", "seq")
    before = F.lag("type").over(by_id)
    gone = (
        events.unionByName(removals)
        .withColumn("before", before)
        .filter(
            (F.col("type") == RACE)
            & ~F.col("from_snapshot")
            & (F.col("before").isNull() | (F.col("before") == RACE))
        )
    )
    missing = _violation(
        gone,
        "acl.record-valid",
        F.concat(F.lit("acl "), F.col("id")),
        F.format_string("removes ACL %s, which does not exist", F.col("id")),
    )
    return invalid.unionByName(missing)


def with_legacy_batches(df: DataFrame, legacy: int) -> tuple[DataFrame, int]:
    """(``df`` with every log row's ``batch_offset``, ``legacy``: how many log
    rows lack it, as log_overview counts them). An export from before
    batchOffset has none: a run of log records with one (timestamp_ms,
    controller_epoch) is taken as one batch, as the replay does. This orders
    the whole log in one task: slow, and only for such exports."""
    if not legacy:
        return df, 0
    log = df.filter(~F.col("from_snapshot"))
    order = W.orderBy("offset", "seq")
    starts = (
        (F.lag("timestamp_ms").over(order).isNull())
        | (F.lag("timestamp_ms").over(order) != F.col("timestamp_ms"))
        | (F.lag("controller_epoch").over(order) != F.col("controller_epoch"))
    )
    log = (
        log.withColumn("starts", starts)
        .withColumn(
            "batch_offset",
            F.coalesce(
                F.col("batch_offset"),
                F.last(F.when(F.col("starts"), F.col("offset")), ignorenulls=True).over(
                    order.rowsBetween(UNBOUNDED, W.currentRow)
                ),
            ),
        )
        .drop("starts")
    )
    return df.filter(F.col("from_snapshot")).unionByName(log), legacy


def run_audit(
    df: DataFrame, first_offset: int, workdir: str, overview: Overview | None = None
) -> AuditFrames:
    """The violations, and the rebuilt states the timelines start from.

    The partition states (as many rows as the log) are written to
    ``workdir/partition_states`` as Parquet and read back: every later step
    reads only the columns it needs, where Spark's in-memory cache would
    build (slowly) a columnar copy of every array. ``overview``: log_overview(df)
    when the caller has it (else this scans the log for it)."""
    describe = df.sparkSession.sparkContext.setJobDescription
    if overview is None:
        describe("audit: overview")
        overview = log_overview(df)
    legacy_records = overview.legacy_records if overview else 0
    df, legacy = with_legacy_batches(df, legacy_records)
    topics = (
        df.filter(F.col("type") == "TOPIC_RECORD")
        .groupBy("topic_id")
        .agg(F.min_by("name", F.col("offset")).alias("topic_name"))
        .coalesce(1)  # broadcast by each check that names partitions: one task each
        .cache()
    )
    b = broker_states(df).persist(StorageLevel.MEMORY_AND_DISK)  # one row per broker record
    path = os.path.join(workdir, "partition_states")
    describe("audit: partition states")
    partition_states(df).write.mode("overwrite").parquet(path)
    p = df.sparkSession.read.parquet(path)
    describe("audit: offsets dense")
    kinds = overview.kinds if overview else {}
    lowest = overview.first_offset if overview else first_offset
    last_offset = overview.last_offset if overview else first_offset
    broker_rows = sum(kinds.get(t, 0) for t in (REG, CHANGE, UNREG))
    spans = broker_spans(b, lowest, last_offset, broker_rows)
    parts = (
        offsets_checks(df, first_offset, overview is None or overview.offsets_look_right)
        + broker_checks(b)
        + partition_checks(p, spans, topics, elr_levels(df))
        + batch_checks(p, b, spans, topics, last_offset)
        + [refused_changes(df, topics), producer_id_checks(df)]
        + [client_quota_checks(df), acl_checks(df)]
    )
    violations = parts[0]
    for part in parts[1:]:
        violations = violations.unionByName(part)
    return AuditFrames(violations, b, p, topics, legacy)
