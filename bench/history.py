"""The history store's figures (quorum/history.py, history_images.py):
image-at-offset latency and the disk cost of the retention window
(figures, not asserts; docs/durability.md "History").

For each size (``--partitions``, default 100,000 and 1,000,000; topics of
1,000 partitions, RF 3 over 30 brokers, bench/backup.py's image): the image
is written as a snapshot file and kept as a checkpoint, then ``--records``
records of AlterPartition-like changes (an ISR shrink or expand, in batches
of ``--batch`` records) go through a ``HistoryWriter``, as the apply thread
hands them over. Then:

* append: what ``HistoryWriter.append`` costs the apply thread per batch;
* segments: bytes per record on disk (frame and payload);
* checkpoint: bytes per partition of one checkpoint (the snapshot file);
* the default window (1,000,000 records, at most 9 checkpoints, one per
  eighth of it): its disk cost for this shape, the segments plus the
  checkpoints; the extra cost over what a voter keeps anyway is the
  checkpoints beyond the current snapshot (which they share, hard-linked);
* image after a random offset: cold (a new reader: the checkpoint decoded,
  then the records replayed) and cached (a reader that built images
  before: replayed from the nearest one), p50 and max, with the collector
  tuned as in a voter's processes (quorum/runtime_tuning.py).

    python bench/history.py [--partitions 100000,1000000] [--records 100000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from backup import big_image  # noqa: E402

from metadata_records.codec import encode_batch  # noqa: E402
from metadata_records.records import Batch, PartitionChangeRecord  # noqa: E402
from quorum.history import (  # noqa: E402
    DEFAULT_RETENTION_RECORDS,
    SEGMENTS_PER_WINDOW,
    HistoryWriter,
    Retention,
    list_files,
)
from quorum.history_images import HistoryReader  # noqa: E402
from quorum.runtime_tuning import tune_runtime  # noqa: E402
from quorum.state_machine import write_snapshot_file  # noqa: E402

NO_RAFT = ((b"", 1, 1), (b"", 0, 1), [])


def progress(text: str) -> None:
    print(f"[history bench] {text}", file=sys.stderr, flush=True)


def changes(image, records: int, batch: int, seed: int = 43) -> list[tuple[int, bytes]]:
    """Batches of ISR changes (shrink to the leader, or back to all replicas)."""
    rng = random.Random(seed)
    topics = list(image.topics.values())
    out, now = [], 1_795_000_000_000
    for _ in range(0, records, batch):
        recs = []
        for _ in range(batch):
            topic = rng.choice(topics)
            pid = rng.randrange(len(topic.partitions))
            p = topic.partitions[pid]
            isr = p.replicas if rng.random() < 0.5 else p.replicas[:1]
            recs.append(PartitionChangeRecord(partition_id=pid, topic_id=topic.topic_id, isr=isr))
        now += 10
        out.append((len(recs), encode_batch(Batch(3, now, tuple(recs)))))
    return out


def measure(partitions: int, records: int, batch: int, probes: int) -> dict:
    progress(f"{partitions:,} partitions: building the image")
    image = big_image(partitions, 1000)
    tmp = tempfile.mkdtemp(prefix="history-bench-")
    try:
        path = os.path.join(tmp, "history")
        snapshot = os.path.join(tmp, "raft.snapshot")
        write_snapshot_file(snapshot, image, *NO_RAFT)
        checkpoint_bytes = os.path.getsize(snapshot)
        batches = changes(image, records, batch)
        retention = Retention(records=max(records * 2, 1))
        writer = HistoryWriter(path, retention, clock_ms=lambda: 1_795_000_000_000)
        writer.start()
        writer.checkpoint(snapshot, image.next_offset)
        progress(f"{partitions:,} partitions: {records:,} records through the writer")
        offset, costs = image.next_offset, []
        for count, payload in batches:
            started = time.perf_counter_ns()
            writer.append(offset, count, 1_795_000_000_000, payload)
            costs.append(time.perf_counter_ns() - started)
            offset += count
        writer.close(timeout_s=600)
        segments, _ = list_files(path)
        segment_bytes = sum(os.path.getsize(p) for _, p in segments)
        per_record = segment_bytes / records
        first, end = image.next_offset, offset
        rng = random.Random(7)
        cold = []
        progress(f"{partitions:,} partitions: cold images")
        for _ in range(3):
            reader = HistoryReader(path, retention, clock_ms=lambda: 1_795_000_000_000)
            target = rng.randrange(first, end)
            started = time.perf_counter()
            reader.image_after(target)
            cold.append(time.perf_counter() - started)
        progress(f"{partitions:,} partitions: cached images")
        reader = HistoryReader(path, retention, clock_ms=lambda: 1_795_000_000_000)
        reader.image_after(rng.randrange(first, end))
        cached = []
        for _ in range(probes):
            target = rng.randrange(first, end)
            started = time.perf_counter()
            reader.image_after(target)
            cached.append(time.perf_counter() - started)
        window = DEFAULT_RETENTION_RECORDS
        checkpoints = SEGMENTS_PER_WINDOW + 1
        return {
            "partitions": partitions,
            "records": records,
            "batchRecords": batch,
            "appendUsPerBatchP50": statistics.median(costs) / 1000,
            "appendUsPerBatchMax": max(costs) / 1000,
            "segmentBytesPerRecord": round(per_record, 1),
            "checkpointBytes": checkpoint_bytes,
            "checkpointBytesPerPartition": round(checkpoint_bytes / partitions, 1),
            "defaultWindowSegmentBytes": int(per_record * window),
            "defaultWindowCheckpointBytesMax": checkpoints * checkpoint_bytes,
            "defaultWindowTotalBytesMax": int(per_record * window) + checkpoints * checkpoint_bytes,
            "coldImageMsP50": statistics.median(cold) * 1000,
            "coldImageMsMax": max(cold) * 1000,
            "cachedImageMsP50": statistics.median(cached) * 1000,
            "cachedImageMsMax": max(cached) * 1000,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def mib(n: float) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


def main() -> None:
    tune_runtime()  # the collector's thresholds of a voter's processes
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="100000,1000000")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=100, help="records a batch")
    parser.add_argument("--probes", type=int, default=20, help="cached images measured")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [
        measure(int(n), args.records, args.batch, args.probes) for n in args.partitions.split(",")
    ]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        print(
            f"{r['partitions']:>9,} partitions, {r['records']:,} records in batches of "
            f"{r['batchRecords']}:\n"
            f"  append on the apply thread  p50 {r['appendUsPerBatchP50']:.1f} us/batch, "
            f"max {r['appendUsPerBatchMax']:.0f} us\n"
            f"  segments                    {r['segmentBytesPerRecord']} bytes/record\n"
            f"  a checkpoint                {mib(r['checkpointBytes'])} "
            f"({r['checkpointBytesPerPartition']} bytes/partition)\n"
            f"  default window (1M records) segments {mib(r['defaultWindowSegmentBytes'])} + "
            f"checkpoints <= {mib(r['defaultWindowCheckpointBytesMax'])} = "
            f"<= {mib(r['defaultWindowTotalBytesMax'])}\n"
            f"  image after an offset       cold p50 {r['coldImageMsP50']:,.0f} ms "
            f"max {r['coldImageMsMax']:,.0f} ms; cached p50 {r['cachedImageMsP50']:,.0f} ms "
            f"max {r['cachedImageMsMax']:,.0f} ms"
        )


if __name__ == "__main__":
    main()
