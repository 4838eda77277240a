"""Benchmarks of the pure controller: no Raft, no HTTP, one core.

    .venv/bin/python bench/controller.py            # full sizes (about 13 minutes here: the 1M-partition image)
    .venv/bin/python bench/controller.py --quick    # reduced sizes (a smoke run)
    .venv/bin/python bench/controller.py --json     # the figures as one JSON object

Stages (progress goes to stderr, the table or the JSON to stdout):

1. AlterPartition (version 3, newIsrWithEpochs) throughput: requests of 1 and
   of 100 partitions, each alternately shrinking the ISR by one follower and
   expanding it back, with the current leader and partition epochs; every
   request's records are committed as a batch (``delta.apply`` then
   ``controller.committed``). Decide-only and decide+apply rates are separate.
2. Controlled shutdown of a broker leading 10,000 partitions: the one
   ``controller.handle`` of its heartbeat (wantShutDown), applying its records,
   and, on its own, building the brokers-to-ISR index for that image.
3. ``delta.apply`` throughput for batches of 100 PartitionChangeRecords on a
   large image.
4. Image memory (RSS growth, and tracemalloc in a separate run), build time and
   ``snapshot.encode_image`` time, each size in a fresh subprocess.

Only figures are printed: nothing here asserts on timing. The setup mirrors
tests/harness.py (LEADER_CHANGE and metadata.version bootstrap, brokers
registered and unfenced through the controller) without importing it.
"""

from __future__ import annotations

import argparse
import base64
import gc
import itertools
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.config import ControllerConfig  # noqa: E402
from controller.controller import Controller  # noqa: E402
from controller.messages import (  # noqa: E402
    AlterPartitionPartition,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    BrokerState,
    CreatableTopic,
    CreateTopicsRequest,
)
from controller.placement import UsableBroker, place  # noqa: E402
from metadata_records import partition_states  # noqa: E402
from metadata_records.delta import apply  # noqa: E402
from metadata_records.errors import Errors  # noqa: E402
from metadata_records.image import EMPTY_IMAGE, MetadataImage  # noqa: E402
from metadata_records.records import (  # noqa: E402
    NO_LEADER_CHANGE,
    Batch,
    Endpoint,
    FeatureLevelRecord,
    FeatureRange,
    LeaderChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)
from metadata_records.snapshot import encode_image  # noqa: E402

CLUSTER_ID = "bench-cluster"
MV_RANGE = (FeatureRange("metadata.version", 6, 12),)
NOW_MS = 1_000_000

TARGET_CHANGES_PER_S = 50_000
TARGET_SHUTDOWN_MS = 200.0
TARGET_1M_IMAGE_MIB = 1536.0

pc = time.perf_counter
cpu = time.process_time  # only around whole loops: a call costs ~0.5 us


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- setup (cf. tests/harness.py)


def _uuid(prefix: bytes, i: int) -> str:
    raw = prefix + i.to_bytes(16 - len(prefix), "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def incarnation(broker_id: int) -> str:
    return _uuid(b"B", broker_id)


def topic_ids() -> Iterator[str]:
    for i in itertools.count(1):
        yield _uuid(b"T", i)


class Cluster:
    """A controller over an image, committing each decision as one batch."""

    def __init__(self) -> None:
        ids = topic_ids()
        self.ids = ids
        self.config = ControllerConfig(CLUSTER_ID)
        self.image: MetadataImage = EMPTY_IMAGE
        self.controller = Controller(self.image, self.config, NOW_MS, lambda: next(ids))
        self.epochs: dict[int, int] = {}
        self.commit(
            [
                LeaderChangeRecord(controller_epoch=1, leader_id=0, leader_url="http://c0"),
                FeatureLevelRecord(name="metadata.version", feature_level=12),
            ],
            epoch=1,
        )

    def commit(self, records: Sequence[Record], epoch: int | None = None) -> None:
        epoch = self.image.controller_epoch if epoch is None else epoch
        self.image = apply(self.image, Batch(epoch, NOW_MS, tuple(records)))
        self.controller.committed(self.image)

    def run(self, request: object) -> Any:
        result = self.controller.handle(request, NOW_MS)
        self.commit(result.records)
        return result.response

    def start_brokers(self, broker_ids: Sequence[int]) -> None:
        """Registered and unfenced, through the controller."""
        for b in broker_ids:
            resp = self.run(
                BrokerRegistrationRequest(
                    b,
                    CLUSTER_ID,
                    incarnation(b),
                    listeners=(Endpoint("PLAINTEXT", "localhost", 9092 + b, 0),),
                    features=MV_RANGE,
                )
            )
            if resp.error != Errors.NONE:
                raise RuntimeError(f"registering broker {b}: {resp}")
            self.epochs[b] = resp.broker_epoch
        for b in broker_ids:
            resp = self.run(BrokerHeartbeatRequest(b, self.epochs[b], self.image.next_offset))
            if resp.error != Errors.NONE or resp.is_fenced:
                raise RuntimeError(f"unfencing broker {b}: {resp}")

    def add_topics(
        self, layout: Iterator[tuple[str, list[tuple[int, ...]]]], ids: Iterator[str]
    ) -> None:
        """One batch per topic (TopicRecord + its PartitionRecords), as records;
        ``layout`` yields (name, replica lists), ISR = replicas, leader = first."""
        self.image = build_topics(self.image, layout, ids)
        self.controller.committed(self.image)


def build_topics(
    image: MetadataImage,
    layout: Iterator[tuple[str, list[tuple[int, ...]]]],
    ids: Iterator[str],
) -> MetadataImage:
    epoch = image.controller_epoch
    for name, assignment in layout:
        topic_id = next(ids)
        records: list[Record] = [TopicRecord(name=name, topic_id=topic_id)]
        records += [
            PartitionRecord(
                partition_id=pid,
                topic_id=topic_id,
                replicas=replicas,
                isr=replicas,
                leader=replicas[0],
            )
            for pid, replicas in enumerate(assignment)
        ]
        image = apply(image, Batch(epoch, NOW_MS, tuple(records)))
    if image.ignored_records:
        raise RuntimeError(f"{image.ignored_records} records did not apply")
    return image


def placed_layout(
    brokers: int, topics: int, per_topic: int, prefix: str
) -> Iterator[tuple[str, list[tuple[int, ...]]]]:
    """Kafka's striped placement (controller.placement), RF 3, as CreateTopics
    would on unfenced brokers (seeded with the partitions before it)."""
    usable = [UsableBroker(b, None, False) for b in range(brokers)]
    for t in range(topics):
        yield f"{prefix}-{t}", place(usable, per_topic, 3, random.Random(t * per_topic))


def base_image_records(brokers: int) -> list[Record]:
    """A bootstrap and ``brokers`` registered, unfenced brokers, as records."""
    records: list[Record] = [
        LeaderChangeRecord(controller_epoch=1, leader_id=0, leader_url="http://c0"),
        FeatureLevelRecord(name="metadata.version", feature_level=12),
    ]
    for b in range(brokers):
        records.append(
            RegisterBrokerRecord(
                broker_id=b,
                incarnation_id=incarnation(b),
                broker_epoch=len(records),
                end_points=(Endpoint("PLAINTEXT", "localhost", 9092 + b, 0),),
                features=MV_RANGE,
                fenced=False,
            )
        )
    return records


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


# ---------------------------------------------------------------- 1. AlterPartition


def _alter_groups(image: MetadataImage, size: int) -> list[tuple[str, int, tuple[int, ...]]]:
    """(topic id, leader, partition ids): ``size`` partitions of one topic led by one broker."""
    groups = []
    for topic_id, topic in sorted(image.topics.items()):
        by_leader: dict[int, list[int]] = {}
        for pid, part in sorted(topic.partitions.items()):
            by_leader.setdefault(part.leader, []).append(pid)
        for leader, pids in sorted(by_leader.items()):
            for i in range(0, len(pids) - size + 1, size):
                groups.append((topic_id, leader, tuple(pids[i : i + size])))
    return groups


def _alter_request(
    image: MetadataImage,
    group: tuple[str, int, tuple[int, ...]],
    epochs: dict[int, int],
    states: dict[int, BrokerState],
) -> AlterPartitionRequest:
    """Shrinks a full ISR by its last follower, or expands a shrunk one back."""
    topic_id, leader, pids = group
    partitions = image.topics[topic_id].partitions
    data = []
    for pid in pids:
        part = partitions[pid]
        new_isr = part.replicas[:-1] if len(part.isr) == len(part.replicas) else part.replicas
        data.append(
            AlterPartitionPartition(
                pid,
                part.leader_epoch,
                part.partition_epoch,
                new_isr_with_epochs=tuple(states[b] for b in new_isr),
            )
        )
    return AlterPartitionRequest(
        leader, epochs[leader], (AlterPartitionTopic(tuple(data), topic_id=topic_id),), 3
    )


def _check_alter(result: Any, expected: int) -> None:
    resp = result.response
    if resp.error != Errors.NONE or len(result.records) != expected:
        raise RuntimeError(f"AlterPartition did not change {expected} partitions: {resp}")
    for topic in resp.topics:
        for p in topic.partitions:
            if p.error != Errors.NONE:
                raise RuntimeError(f"AlterPartition failed: {p}")


def run_alter_case(
    cl: Cluster, size: int, per_batch: int, rounds: int, label: str, topics: int | None = None
) -> dict[str, Any]:
    """Every partition (of the first ``topics`` topics) once per round, shrink
    rounds and expand rounds alternating; ``per_batch`` requests are decided,
    then committed together. Rates are the median (and best) over rounds."""
    controller = cl.controller
    controller.index  # noqa: B018 -- a leader has it (built at the first heartbeat)
    groups = _alter_groups(cl.image, size)
    if topics is not None:
        keep = set(sorted(cl.image.topics)[:topics])
        groups = [g for g in groups if g[0] in keep]
    states = {b: BrokerState(b, e) for b, e in cl.epochs.items()}
    epoch = cl.image.controller_epoch
    handle = controller.handle
    committed = controller.committed
    per_round: list[tuple[float, float, int]] = []  # (decide s, apply+committed s, changes)
    contention: list[float] = []  # wall time / CPU time of each round
    for rnd in range(rounds + 1):  # round 0 warms up
        image = cl.image
        reqs = [_alter_request(image, g, cl.epochs, states) for g in groups]
        results = []
        d = c = 0.0
        gc.collect()
        w0, cpu0 = pc(), cpu()
        for i in range(0, len(reqs), per_batch):
            chunk = reqs[i : i + per_batch]
            t0 = pc()
            out = [handle(req, NOW_MS) for req in chunk]
            t1 = pc()
            if per_batch == 1:
                records = out[0].records
            else:
                records = tuple(r for res in out for r in res.records)
            image = apply(image, Batch(epoch, NOW_MS, records))
            committed(image)
            t2 = pc()
            d += t1 - t0
            c += t2 - t1
            results += out
        contention.append((pc() - w0) / max(cpu() - cpu0, 1e-9))
        cl.image = image
        for res in results:
            _check_alter(res, size)
        if rnd:
            per_round.append((d, c, len(reqs) * size))
    decide = [rate(n, d) for d, _, n in per_round]
    total = [rate(n, d + c) for d, c, n in per_round]
    changes = sum(n for _, _, n in per_round)
    requests = changes // size
    out = {
        "label": label,
        "image_partitions": cl.image.partition_count,
        "image_topics": len(cl.image.topics),
        "partitions_per_request": size,
        "requests_per_batch": per_batch,
        "rounds": rounds,
        "partition_changes": changes,
        "requests": requests,
        "decide_changes_per_s": statistics.median(decide),
        "decide_changes_per_s_best": max(decide),
        "decide_apply_changes_per_s": statistics.median(total),
        "decide_apply_changes_per_s_best": max(total),
        "us_per_request_decide": 1e6 * sum(d for d, _, _ in per_round) / requests,
        "us_per_request_apply": 1e6 * sum(c for _, c, _ in per_round) / requests,
        "wall_over_cpu": statistics.median(contention[1:]),
    }
    progress(
        f"  {label}: decide {out['decide_changes_per_s']:,.0f}/s, "
        f"decide+apply {out['decide_apply_changes_per_s']:,.0f}/s (medians over {rounds} rounds)"
    )
    return out


def bench_alter_partition(quick: bool) -> dict[str, Any]:
    brokers, topics, per_topic = 6, (2 if quick else 10), 600
    big_topics = 100 if quick else 1_000
    rounds = 2 if quick else 10
    progress(
        f"1/4 AlterPartition: {brokers} brokers, {topics} topics x {per_topic} partitions "
        f"(RF 3), {rounds} rounds each"
    )
    cl = Cluster()
    cl.start_brokers(range(brokers))
    for t in range(topics):
        resp = cl.run(CreateTopicsRequest((CreatableTopic(f"alter-{t}", per_topic, 3),)))
        if resp.topics[0].error != Errors.NONE:
            raise RuntimeError(f"CreateTopics: {resp}")
    cases = [
        run_alter_case(cl, 1, 1, rounds, "1 partition/request, 1 request/batch"),
        run_alter_case(cl, 100, 1, rounds, "100 partitions/request, 1 request/batch"),
        run_alter_case(cl, 1, 100, rounds, "1 partition/request, 100 requests/batch"),
    ]
    # The same 1-partition requests over as many partitions, in a larger image:
    # committing a batch copies the image's topic table.
    progress(f"  a larger image: {big_topics:,} topics x 100 partitions")
    big = Cluster()
    big.start_brokers(range(brokers))
    big.add_topics(placed_layout(brokers, big_topics, 100, "big"), big.ids)
    cases.append(
        run_alter_case(
            big,
            1,
            1,
            rounds,
            f"1 partition/request, 1 request/batch, {big_topics * 100:,}-partition image",
            topics=topics * per_topic // 100,
        )
    )
    return {
        "brokers": brokers,
        "partitions": topics * per_topic,
        "topics": topics,
        "cases": cases,
    }


# ---------------------------------------------------------------- 2. controlled shutdown


def shutdown_layout(
    topics: int, per_topic: int, brokers: int
) -> Iterator[tuple[str, list[tuple[int, ...]]]]:
    """Brokers 0, 1 and 2 lead a third of the partitions each; the two
    followers rotate over the other five brokers, so broker 0 is also a
    follower of about 2/5 of the partitions it does not lead."""
    i = 0
    for t in range(topics):
        assignment = []
        for _ in range(per_topic):
            leader = i % 3
            others = [b for b in range(brokers) if b != leader]
            k = i // 3
            assignment.append((leader, others[k % len(others)], others[(k + 1) % len(others)]))
            i += 1
        yield f"shutdown-{t}", assignment


def bench_shutdown(quick: bool) -> dict[str, Any]:
    brokers, per_topic = 6, 100
    total = 3_000 if quick else 30_000
    repeats = 2 if quick else 5
    topics = total // per_topic
    progress(
        f"2/4 controlled shutdown: {brokers} brokers, {total:,} partitions "
        f"({topics} topics), {repeats} repeats"
    )
    cl = Cluster()
    cl.start_brokers(range(brokers))
    cl.add_topics(shutdown_layout(topics, per_topic, brokers), cl.ids)
    image = cl.image
    led = sum(1 for t in image.topics.values() for p in t.partitions.values() if p.leader == 0)
    in_isr = sum(1 for t in image.topics.values() for p in t.partitions.values() if 0 in p.isr)
    index_s, decide_s, apply_s, contention = [], [], [], []
    records = 0
    for _ in range(repeats):
        controller = Controller(image, cl.config, NOW_MS, lambda: next(cl.ids))
        gc.collect()
        t0 = pc()
        controller.index  # noqa: B018 -- built lazily; force it outside the decision
        t1 = pc()
        req = BrokerHeartbeatRequest(0, cl.epochs[0], image.next_offset, want_shut_down=True)
        gc.collect()
        cpu0 = cpu()
        t2 = pc()
        result = controller.handle(req, NOW_MS)
        t3 = pc()
        contention.append((t3 - t2) / max(cpu() - cpu0, 1e-9))
        after = apply(image, Batch(image.controller_epoch, NOW_MS, result.records))
        controller.committed(after)
        t4 = pc()
        resp = result.response
        if resp.error != Errors.NONE or resp.is_fenced or resp.should_shut_down:
            raise RuntimeError(f"expected CONTROLLED_SHUTDOWN: {resp}")
        still = [
            (tid, pid)
            for tid, t in after.topics.items()
            for pid, p in t.partitions.items()
            if p.leader == 0 or 0 in p.isr
        ]
        if still or not after.brokers[0].in_controlled_shutdown:
            raise RuntimeError(f"broker 0 still leads or is in the ISR of {len(still)} partitions")
        records = len(result.records)
        index_s.append(t1 - t0)
        decide_s.append(t3 - t2)
        apply_s.append(t4 - t3)
    out = {
        "brokers": brokers,
        "partitions": total,
        "partitions_led_by_broker": led,
        "partitions_with_broker_in_isr": in_isr,
        "records": records,
        "repeats": repeats,
        "index_build_ms_median": 1e3 * statistics.median(index_s),
        "index_build_ms_min": 1e3 * min(index_s),
        "decide_ms_median": 1e3 * statistics.median(decide_s),
        "decide_ms_min": 1e3 * min(decide_s),
        "decide_us_per_record": 1e6 * statistics.median(decide_s) / records,
        "apply_ms_median": 1e3 * statistics.median(apply_s),
        "apply_ms_min": 1e3 * min(apply_s),
        "wall_over_cpu": statistics.median(contention),
    }
    progress(
        f"  index {out['index_build_ms_median']:.1f} ms, decide {out['decide_ms_median']:.1f} ms "
        f"({records:,} records), apply {out['apply_ms_median']:.1f} ms"
    )
    return out


# ---------------------------------------------------------------- 2b. heartbeats


def bench_heartbeats(quick: bool) -> dict[str, Any]:
    """Steady-state heartbeats of unfenced brokers: what a leader pays per beat
    in the controller, and whether it grows with the number of brokers."""
    progress("2b heartbeats: 500 and 5,000 unfenced brokers, 4 rounds each")
    cases = []
    for brokers in (500, 5_000) if not quick else (100, 500):
        cl = Cluster()
        cl.start_brokers(range(brokers))
        requests = [
            BrokerHeartbeatRequest(b, cl.epochs[b], cl.image.next_offset) for b in range(brokers)
        ]
        controller = cl.controller
        gc.collect()
        cpu0, t0 = cpu(), pc()
        for _ in range(4):
            for req in requests:
                result = controller.handle(req, NOW_MS)
                if result.records or result.response.is_fenced:
                    raise RuntimeError(f"a steady heartbeat wrote or fenced: {result}")
        wall = pc() - t0
        cases.append(
            {
                "brokers": brokers,
                "heartbeats_per_s": rate(4 * brokers, wall),
                "us_per_heartbeat": 1e6 * wall / (4 * brokers),
                "wall_over_cpu": wall / max(cpu() - cpu0, 1e-9),
            }
        )
        progress(f"  {brokers:,} brokers: {cases[-1]['heartbeats_per_s']:,.0f} heartbeats/s")
    return {"cases": cases}


# ---------------------------------------------------------------- 3. apply throughput


def _change_batches(image: MetadataImage, groups: list[list[tuple[str, int]]]) -> list[Batch]:
    """One batch per group: shrink a full ISR by its last follower, or expand it back."""
    batches = []
    epoch = image.controller_epoch
    for group in groups:
        records = []
        for topic_id, pid in group:
            part = image.topics[topic_id].partitions[pid]
            isr = part.replicas[:-1] if len(part.isr) == len(part.replicas) else part.replicas
            records.append(
                PartitionChangeRecord(
                    partition_id=pid, topic_id=topic_id, isr=isr, leader=NO_LEADER_CHANGE
                )
            )
        batches.append(Batch(epoch, NOW_MS, tuple(records)))
    return batches


def _apply_case(
    label: str,
    image: MetadataImage,
    groups: list[list[tuple[str, int]]],
    rounds: int,
    batch_size: int,
) -> dict[str, Any]:
    elapsed = 0.0
    records = 0
    contention: list[float] = []
    for rnd in range(rounds + 1):  # round 0 warms up
        batches = _change_batches(image, groups)
        gc.collect()
        cpu0 = cpu()
        t0 = pc()
        for batch in batches:
            image = apply(image, batch)
        t1 = pc()
        if rnd:
            contention.append((t1 - t0) / max(cpu() - cpu0, 1e-9))
            elapsed += t1 - t0
            records += sum(len(b.records) for b in batches)
    if image.ignored_records:
        raise RuntimeError(f"{image.ignored_records} records did not apply")
    case = {
        "label": label,
        "records": records,
        "seconds": elapsed,
        "records_per_s": rate(records, elapsed),
        "us_per_batch": 1e6 * elapsed / (records / batch_size),
        "wall_over_cpu": statistics.median(contention),
    }
    progress(f"  {label}: {case['records_per_s']:,.0f} records/s")
    return case


def bench_apply(quick: bool) -> dict[str, Any]:
    brokers, per_topic, batch_size = 10, 100, 100
    topics = 100 if quick else 1_000
    rounds = 2 if quick else 4
    total = topics * per_topic
    progress(
        f"3/4 apply: {total:,} partitions ({topics} topics x {per_topic}), batches of "
        f"{batch_size} PartitionChangeRecords, {rounds} rounds"
    )
    image = apply(EMPTY_IMAGE, Batch(1, NOW_MS, tuple(base_image_records(brokers))))
    image = build_topics(image, placed_layout(brokers, topics, per_topic, "apply"), topic_ids())
    ids = sorted(image.topics)
    patterns: dict[str, list[list[tuple[str, int]]]] = {
        # a batch = 100 partitions of one topic (one topic touched)
        "one topic per batch": [[(t, p) for p in range(per_topic)] for t in ids],
        # a batch = one partition of each of 100 topics (100 topics touched)
        "100 topics per batch": [
            [(t, p) for t in ids[g : g + batch_size]]
            for g in range(0, len(ids), batch_size)
            for p in range(per_topic)
        ],
    }
    # A batch = 100 partitions of one large topic: what a batch costs must not
    # grow with the topic (metadata_records/partition_map.py).
    big = 10_000 if quick else 100_000
    big_image = apply(EMPTY_IMAGE, Batch(1, NOW_MS, tuple(base_image_records(brokers))))
    big_image = build_topics(big_image, placed_layout(brokers, 1, big, "big"), topic_ids())
    (big_id,) = big_image.topics
    big_groups = [
        [(big_id, p) for p in range(g, g + batch_size)] for g in range(0, big, batch_size)
    ]
    # A batch = the 10 partitions of one topic among many: the topic table is
    # still copied whole per batch (docs/performance.md).
    many = 10_000 if quick else 100_000
    many_image = apply(EMPTY_IMAGE, Batch(1, NOW_MS, tuple(base_image_records(brokers))))
    many_image = build_topics(many_image, placed_layout(brokers, many, 10, "many"), topic_ids())
    many_ids = sorted(many_image.topics)[:1_000]
    many_groups = [[(t, p) for p in range(10)] for t in many_ids]
    cases = []
    for label, start, groups, size in (
        *((label, image, groups, batch_size) for label, groups in patterns.items()),
        (f"one topic of {big:,} partitions, 100 of them per batch", big_image, big_groups, 100),
        (f"one topic of 10 among {many:,} topics, per batch", many_image, many_groups, 10),
    ):
        cases.append(_apply_case(label, start, groups, rounds, size))
    return {"partitions": total, "topics": topics, "batch_size": batch_size, "cases": cases}


# ---------------------------------------------------------------- 4. image memory (subprocess)


def _vm(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def memory_child(partitions: int, use_tracemalloc: bool) -> dict[str, Any]:
    """Runs in a fresh interpreter: builds the image and measures it."""
    import tracemalloc

    brokers, per_topic = 10, 100
    topics = partitions // per_topic
    base = apply(EMPTY_IMAGE, Batch(1, NOW_MS, tuple(base_image_records(brokers))))
    layout = placed_layout(brokers, topics, per_topic, "topic")
    gc.collect()
    rss0 = _vm("VmRSS")
    if use_tracemalloc:
        tracemalloc.start()
    traced0 = tracemalloc.get_traced_memory()[0] if use_tracemalloc else 0
    t0 = pc()
    image = build_topics(base, layout, topic_ids())
    t1 = pc()
    gc.collect()
    out: dict[str, Any] = {
        "partitions": image.partition_count,
        "topics": len(image.topics),
        "brokers": brokers,
        "tracemalloc": use_tracemalloc,
        "build_s": t1 - t0,
    }
    if use_tracemalloc:
        traced1, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out["traced_bytes"] = traced1 - traced0
        out["traced_peak_bytes"] = peak - traced0
        return out
    rss1 = _vm("VmRSS")
    out["rss_before_bytes"] = rss0
    out["rss_after_bytes"] = rss1
    out["rss_growth_bytes"] = rss1 - rss0
    out["vm_hwm_bytes"] = _vm("VmHWM")
    t2 = pc()
    data = encode_image(image)
    t3 = pc()
    out["encode_s"] = t3 - t2
    out["encoded_bytes"] = len(data)
    return out


def run_memory_child(partitions: int, use_tracemalloc: bool) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--memory-child", str(partitions)]
    if use_tracemalloc:
        cmd.append("--tracemalloc")
    if not partition_states.COMPACT_PARTITIONS:
        cmd.append("--plain-partitions")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, check=True, text=True)
    return json.loads(proc.stdout)


def bench_memory(quick: bool) -> dict[str, Any]:
    sizes = [10_000, 100_000] if quick else [100_000, 1_000_000]
    progress(f"4/4 image memory: {', '.join(f'{n:,}' for n in sizes)} partitions (subprocesses)")
    runs = []
    for n in sizes:
        rss = run_memory_child(n, False)
        progress(
            f"  {n:,}: RSS +{rss['rss_growth_bytes'] / 2**20:,.1f} MiB, build "
            f"{rss['build_s']:.2f} s, encode {rss['encode_s']:.2f} s"
        )
        traced = run_memory_child(n, True)
        progress(f"  {n:,}: tracemalloc {traced['traced_bytes'] / 2**20:,.1f} MiB")
        runs.append(
            {
                "partitions": rss["partitions"],
                "topics": rss["topics"],
                "brokers": rss["brokers"],
                "rss_growth_mib": rss["rss_growth_bytes"] / 2**20,
                "rss_bytes_per_partition": rss["rss_growth_bytes"] / rss["partitions"],
                "rss_after_mib": rss["rss_after_bytes"] / 2**20,
                "vm_hwm_mib": rss["vm_hwm_bytes"] / 2**20,
                "traced_mib": traced["traced_bytes"] / 2**20,
                "traced_bytes_per_partition": traced["traced_bytes"] / traced["partitions"],
                "traced_peak_mib": traced["traced_peak_bytes"] / 2**20,
                "build_s": rss["build_s"],
                "build_s_with_tracemalloc": traced["build_s"],
                "encode_s": rss["encode_s"],
                "encoded_mib": rss["encoded_bytes"] / 2**20,
            }
        )
    return {"runs": runs}


# ---------------------------------------------------------------- report


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def pin_one_core() -> int | None:
    try:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return cpu
    except (AttributeError, OSError):
        return None


def targets(figures: dict[str, Any]) -> list[dict[str, Any]]:
    quick = figures["meta"]["quick"]
    rows = []
    alter = figures.get("alter_partition")
    if alter:
        # The target is for the pure controller (deciding); committing
        # the records (apply) is the quorum's cost per batch, shown above and
        # judged here only as information.
        for case in alter["cases"]:
            if case["requests_per_batch"] != 1:
                continue
            for key, what in (
                ("decide_changes_per_s", "pure controller, decide"),
                ("decide_apply_changes_per_s", "decide+apply, 1 request/batch"),
            ):
                value = case[key]
                rows.append(
                    {
                        "target": f">= {TARGET_CHANGES_PER_S:,} changes/s ({what}), "
                        f"{case['partitions_per_request']}/request, "
                        f"{case['image_partitions']:,}-partition image",
                        "value": round(value),
                        "met": value >= TARGET_CHANGES_PER_S,
                    }
                )
    shutdown = figures.get("controlled_shutdown")
    if shutdown:
        value = shutdown["decide_ms_median"]
        rows.append(
            {
                "target": f"<= {TARGET_SHUTDOWN_MS:.0f} ms to decide a controlled shutdown "
                f"({shutdown['partitions_led_by_broker']:,} led)",
                "value": round(value, 1),
                # The target is for 10,000 led partitions; a quick run has fewer.
                "met": None if quick else value <= TARGET_SHUTDOWN_MS,
            }
        )
    memory = figures.get("memory")
    if memory:
        for run in memory["runs"]:
            if run["partitions"] == 1_000_000:
                value = max(run["rss_growth_mib"], run["traced_mib"])
                rows.append(
                    {
                        "target": f"<= {TARGET_1M_IMAGE_MIB:,.0f} MiB for a 1,000,000-partition "
                        "image (MiB)",
                        "value": round(value, 1),
                        "met": value <= TARGET_1M_IMAGE_MIB,
                    }
                )
    return rows


def table(figures: dict[str, Any]) -> str:
    rows: list[tuple[str, str]] = []

    def section(title: str) -> None:
        rows.append((f"-- {title}", ""))

    meta = figures["meta"]
    section(
        f"metaquorum pure controller: Python {meta['python']}, "
        f"{'quick' if meta['quick'] else 'full'} run, pinned to cpu {meta['cpu']}, "
        f"load average {meta['loadavg_start']} at start, {meta['total_s']:.0f} s"
    )
    section(
        "wall/CPU: wall time over this process's CPU time in the timed loops; well above "
        "1.00 means another process took the core and the rates are understated"
    )
    alter = figures["alter_partition"]
    section(
        f"1. AlterPartition v3 (ISR shrink/expand alternating), {alter['brokers']} brokers, RF 3; "
        "rates: median round (best round)"
    )
    for c in alter["cases"]:
        rows.append(
            (
                f"{c['label']}",
                f"{c['partition_changes']:,} changes, image {c['image_partitions']:,} partitions "
                f"/ {c['image_topics']:,} topics; wall/CPU {c['wall_over_cpu']:.2f}",
            )
        )
        rows.append(
            (
                "    decide only (controller.handle)",
                f"{c['decide_changes_per_s']:>9,.0f} changes/s "
                f"({c['decide_changes_per_s_best']:,.0f}); {c['us_per_request_decide']:,.1f} "
                "us/request",
            )
        )
        rows.append(
            (
                "    decide + apply + committed",
                f"{c['decide_apply_changes_per_s']:>9,.0f} changes/s "
                f"({c['decide_apply_changes_per_s_best']:,.0f}); "
                f"+{c['us_per_request_apply']:,.1f} us/request to commit",
            )
        )
    s = figures["controlled_shutdown"]
    section(
        f"2. Controlled shutdown: {s['brokers']} brokers, {s['partitions']:,} partitions; broker 0 "
        f"leads {s['partitions_led_by_broker']:,} and is in {s['partitions_with_broker_in_isr']:,} "
        f"ISRs; median (min) of {s['repeats']}"
    )
    rows.append(
        (
            "index build (controller.index)",
            f"{s['index_build_ms_median']:>9.1f} ms ({s['index_build_ms_min']:.1f})",
        )
    )
    rows.append(
        (
            "decide (controller.handle)",
            f"{s['decide_ms_median']:>9.1f} ms ({s['decide_ms_min']:.1f}); "
            f"wall/CPU {s['wall_over_cpu']:.2f}",
        )
    )
    rows.append(
        (
            "    records produced",
            f"{s['records']:>9,} ({s['decide_us_per_record']:.2f} us/record)",
        )
    )
    rows.append(("apply + committed", f"{s['apply_ms_median']:>9.1f} ms ({s['apply_ms_min']:.1f})"))
    section("2b. Steady heartbeats of unfenced brokers (no records), through Controller.handle")
    for c in figures["heartbeats"]["cases"]:
        rows.append(
            (
                f"{c['brokers']:,} brokers",
                f"{c['heartbeats_per_s']:>9,.0f} heartbeats/s ({c['us_per_heartbeat']:.1f} us "
                f"each); wall/CPU {c['wall_over_cpu']:.2f}",
            )
        )
    a = figures["apply"]
    section(
        f"3. delta.apply: {a['partitions']:,}-partition image ({a['topics']:,} topics), "
        f"batches of {a['batch_size']} PartitionChangeRecords"
    )
    for c in a["cases"]:
        rows.append(
            (
                c["label"],
                f"{c['records_per_s']:>9,.0f} records/s ({c['us_per_batch']:,.0f} us/batch); "
                f"wall/CPU {c['wall_over_cpu']:.2f}",
            )
        )
    section("4. Image memory, fresh subprocess each (10 brokers, topics of 100 partitions, RF 3)")
    for r in figures["memory"]["runs"]:
        rows.append(
            (
                f"{r['partitions']:,} partitions: RSS growth",
                f"{r['rss_growth_mib']:>9,.1f} MiB ({r['rss_bytes_per_partition']:,.0f} "
                f"B/partition; VmHWM {r['vm_hwm_mib']:,.0f} MiB)",
            )
        )
        rows.append(
            (
                "    tracemalloc, live after build",
                f"{r['traced_mib']:>9,.1f} MiB ({r['traced_bytes_per_partition']:,.0f} "
                f"B/partition; peak {r['traced_peak_mib']:,.1f} MiB)",
            )
        )
        rows.append(("    build (a batch per topic)", f"{r['build_s']:>9.2f} s"))
        rows.append(
            (
                "    snapshot.encode_image",
                f"{r['encode_s']:>9.2f} s ({r['encoded_mib']:,.1f} MiB)",
            )
        )
    section("Targets")
    for t in figures["targets"]:
        verdict = {True: "met", False: "MISSED", None: "n/a (quick run: reduced size)"}[t["met"]]
        rows.append((t["target"], f"{t['value']:>9,} {verdict}"))
    lines: list[str] = []
    width = 0
    for i, (k, v) in enumerate(rows):
        if not v:  # a section title: align the rows up to the next one
            rest = itertools.takewhile(lambda row: row[1], rows[i + 1 :])
            width = max((len(key) for key, _ in rest), default=0)
            lines.append(k)
        else:
            lines.append(f"  {k:<{width}}  {v}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced sizes, a smoke run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--tracemalloc", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--plain-partitions",
        action="store_true",
        help="images keep partitions as objects (COMPACT_PARTITIONS off), for comparison",
    )
    args = parser.parse_args(argv)
    if args.plain_partitions:
        partition_states.COMPACT_PARTITIONS = False
    cpu = pin_one_core()
    if args.memory_child is not None:
        print(json.dumps(memory_child(args.memory_child, args.tracemalloc)))
        return
    started = pc()
    figures: dict[str, Any] = {
        "meta": {
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "machine": platform.machine(),
            "cpu": cpu,
            "quick": args.quick,
            "loadavg_start": _loadavg(),
            "compact_partitions": partition_states.COMPACT_PARTITIONS,
        }
    }
    stages: list[tuple[str, Callable[[bool], dict[str, Any]]]] = [
        ("alter_partition", bench_alter_partition),
        ("controlled_shutdown", bench_shutdown),
        ("heartbeats", bench_heartbeats),
        ("apply", bench_apply),
        ("memory", bench_memory),
    ]
    for key, stage in stages:
        figures[key] = stage(args.quick)
        gc.collect()
    figures["targets"] = targets(figures)
    figures["meta"]["total_s"] = pc() - started
    figures["meta"]["loadavg_end"] = _loadavg()
    progress(f"done in {figures['meta']['total_s']:.1f} s")
    print(json.dumps(figures, indent=2) if args.json else table(figures))


if __name__ == "__main__":
    main()
