"""What GET /v1/explain/... costs on one voter (api/explain.py): figures, not asserts.

The image: ``--brokers`` (default 1,000) unfenced brokers and ``--partitions``
(default 100,000) partitions, RF 3 striped over them. The log: a busy one,
the voter's retained log (quorum/record_log.py) holding the last
``--records`` (default 200,000) records as voters keep them (encoded batches,
the newest 64 decoded): batches of 20 ISR shrinks and expansions of random
partitions, with a fence or an unfence of a random broker in every tenth.

Per endpoint, p50/p99 of ``--runs`` explains of random targets (wall clock,
and the p50 of this process's CPU time, the figure a loaded machine does not
inflate), timing what
the route does off the event loop: the look-back (``scan_back``: up to
50,000 records read back from the image's offset, decoding the batches the
log no longer keeps decoded), the answer (``explain_broker`` /
``explain_partition``, the controlled-shutdown walk over every partition
included for a broker shutting down) and its JSON. A broker's look-back
ends early once it has found its 20 newest events; a partition's rarely
does on this log (few of its changes in 50,000 records): the worst case.

    python bench/explain.py [--brokers 1000] [--partitions 100000] [--records 200000]
                            [--runs 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from api import explain as X  # noqa: E402
from metadata_records.codec import encode_batch  # noqa: E402
from metadata_records.delta import apply_records  # noqa: E402
from metadata_records.image import EMPTY_IMAGE, PartitionRegistration, TopicImage  # noqa: E402
from metadata_records.partition_map import PartitionMap  # noqa: E402
from metadata_records.records import (  # noqa: E402
    FENCE,
    UNFENCE,
    Batch,
    BrokerRegistrationChangeRecord,
    Endpoint,
    FeatureLevelRecord,
    FeatureRange,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    Who,
)
from metadata_records.snapshot import decode_image, encode_image  # noqa: E402
from metadata_records.uuids import uuid_from_bytes  # noqa: E402
from quorum.record_log import RecordLog  # noqa: E402

PER_TOPIC = 1_000
BATCH = 20
MV = (FeatureRange("metadata.version", 6, 12),)
FACTS = X.ControllerFacts((), None, "node 0 is the active controller")


def progress(text: str) -> None:
    print(f"[explain bench] {text}", file=sys.stderr, flush=True)


def big_image(brokers: int, partitions: int):
    records = [FeatureLevelRecord(name="metadata.version", feature_level=12)]
    for b in range(brokers):
        records.append(
            RegisterBrokerRecord(
                broker_id=b,
                incarnation_id=uuid_from_bytes((b + 1).to_bytes(16, "big")),
                broker_epoch=len(records),
                end_points=(Endpoint("PLAINTEXT", f"broker-{b}", 9092, 0),),
                features=MV,
                rack=f"r{b % 3}",
                fenced=False,
            )
        )
    base = apply_records(EMPTY_IMAGE, records)
    topics, topic_ids, made, t = {}, {}, 0, 0
    while made < partitions:
        count = min(PER_TOPIC, partitions - made)
        topic_id = uuid_from_bytes((t + 1).to_bytes(16, "big"))
        rows = {}
        for p in range(count):
            first = (made + p) % brokers
            replicas = (first, (first + 1) % brokers, (first + 2) % brokers)
            rows[p] = PartitionRegistration(replicas, replicas, (), (), first, 0, 0, 0)
        name = f"topic-{t:05d}"
        topics[topic_id] = TopicImage(name, topic_id, PartitionMap(rows), {})
        topic_ids[name] = topic_id
        made, t = made + count, t + 1
    image = base._replace(
        topics=topics,
        topic_ids=topic_ids,
        partition_count=made,
        next_offset=base.next_offset + made,
    )
    return decode_image(encode_image(image))


def busy_log(image, records: int, rng: random.Random):
    """The image moved on by ``records`` records, and the log holding them."""
    log = RecordLog(retention=records)
    first = image.next_offset
    log.reset(first)
    topics = list(image.topics.values())
    brokers = list(image.brokers)
    fencer = Who(1, "controller", "FenceExpiredSessions", rule="kip-631.session-expired")
    offset = first
    for n in range(records // BATCH):
        batch_records = []
        for _ in range(BATCH - (n % 10 == 0)):
            topic = rng.choice(topics)
            pid = rng.randrange(len(topic.partitions))
            part = topic.partitions[pid]
            isr = part.replicas[:2] if rng.random() < 0.5 else part.replicas
            batch_records.append(
                PartitionChangeRecord(partition_id=pid, topic_id=topic.topic_id, isr=isr)
            )
        whos = (Who(len(batch_records), "broker:cert/CN=kafka", "AlterPartition"),)
        if n % 10 == 0:
            b = rng.choice(brokers)
            change = FENCE if rng.random() < 0.5 else UNFENCE
            batch_records.append(
                BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=1, fenced=change)
            )
            whos = (*whos, fencer)
        batch = Batch(3, 1_796_359_800_000 + n, tuple(batch_records), offset, whos)
        log.append(batch, offset, encode_batch(batch))
        offset += len(batch_records)
    return image._replace(next_offset=offset), log


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1000


def measure(image, log, runs: int, rng: random.Random) -> dict:
    read, below = log.read, image.next_offset
    brokers = list(image.brokers)
    topics = list(image.topics.values())
    broker_s, partition_s, scanned = [], [], {"broker": [], "partition": []}
    cpu = {"broker": [], "partition": []}
    for _ in range(runs):
        b = rng.choice(brokers)
        started, cpu_started = time.perf_counter(), time.process_time()
        entries, look_back = X.scan_back(read, below, X.BrokerRecords(b), stored=log.stored_from)
        reg = image.brokers[b]
        registration = None
        if reg.registration_offset < look_back.from_offset:
            try:
                registration = read(reg.registration_offset, 1, False)[0]
            except LookupError:  # older than the log kept: the history store's part
                pass
        body = X.explain_broker(image, b, entries, look_back, registration, FACTS, 0)
        orjson.dumps(body)
        broker_s.append(time.perf_counter() - started)
        cpu["broker"].append(time.process_time() - cpu_started)
        scanned["broker"].append(look_back.scanned)

        topic = rng.choice(topics)
        pid = rng.randrange(len(topic.partitions))
        started, cpu_started = time.perf_counter(), time.process_time()
        entries, look_back = X.scan_back(
            read, below, X.PartitionRecords(topic.topic_id, pid), stored=log.stored_from
        )
        body = X.explain_partition(image, topic.name, pid, 2, entries, look_back, FACTS)
        orjson.dumps(body)
        partition_s.append(time.perf_counter() - started)
        cpu["partition"].append(time.process_time() - cpu_started)
        scanned["partition"].append(look_back.scanned)

    # One broker in controlled shutdown: the walk over every partition it may lead.
    b = brokers[0]
    shut = image._replace(
        brokers=PartitionMap(
            {**dict(image.brokers), b: image.brokers[b]._replace(in_controlled_shutdown=True)}
        )
    )
    started = time.perf_counter()
    X.explain_broker(shut, b, [], X.LookBack(0, 1, 1, "oldest"), None, FACTS, 0)
    shutdown_walk = time.perf_counter() - started
    return {
        "brokerMsP50": pct(broker_s, 0.5),
        "brokerMsP99": pct(broker_s, 0.99),
        "brokerCpuMsP50": statistics.median(cpu["broker"]) * 1000,
        "brokerScannedP50": statistics.median(scanned["broker"]),
        "partitionMsP50": pct(partition_s, 0.5),
        "partitionMsP99": pct(partition_s, 0.99),
        "partitionCpuMsP50": statistics.median(cpu["partition"]) * 1000,
        "partitionScannedP50": statistics.median(scanned["partition"]),
        "shutdownWalkMs": shutdown_walk * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--plain", action="store_true", help="decode every batch (PAYLOAD_FILTER off), to compare"
    )
    args = parser.parse_args()
    X.PAYLOAD_FILTER = not args.plain
    rng = random.Random(44)
    progress(f"building {args.brokers:,} brokers, {args.partitions:,} partitions")
    image = big_image(args.brokers, args.partitions)
    progress(f"writing a busy log of {args.records:,} records")
    image, log = busy_log(image, args.records, rng)
    progress(f"{args.runs} explains of each kind")
    figures = {
        "brokers": args.brokers,
        "partitions": args.partitions,
        "logRecords": args.records,
        "runs": args.runs,
        **measure(image, log, args.runs, rng),
    }
    if args.json:
        print(json.dumps(figures))
        return 0
    print(
        f"explain at {args.brokers:,} brokers / {args.partitions:,} partitions, a log of "
        f"{args.records:,} records, {args.runs} runs each:"
    )
    print(
        f"  broker:    p50 {figures['brokerMsP50']:.1f} ms  p99 {figures['brokerMsP99']:.1f} ms  "
        f"CPU p50 {figures['brokerCpuMsP50']:.1f} ms  (records read, p50: "
        f"{figures['brokerScannedP50']:,.0f})"
    )
    print(
        f"  partition: p50 {figures['partitionMsP50']:.1f} ms  p99 {figures['partitionMsP99']:.1f} "
        f"ms  CPU p50 {figures['partitionCpuMsP50']:.1f} ms  (records read, p50: "
        f"{figures['partitionScannedP50']:,.0f})"
    )
    print(f"  a broker in controlled shutdown, its walk over every partition: "
          f"{figures['shutdownWalkMs']:.1f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
