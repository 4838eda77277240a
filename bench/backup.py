"""Backup and restore at scale: how long ``metaquorum backup`` and
``metaquorum restore`` take, how large the file is, and the peak memory of
the serving voter and of each command (figures, not asserts;
metadata_records/backup_file.py, docs/durability.md "Backup and restore").

For each size (``--partitions``, default 100,000 and 1,000,000): an image of
that many partitions (topics of ``--per-topic`` partitions, RF 3 over 30
brokers) is built in this process and seeded into a lone voter's data dir
(quorum/seeded_data_dir.py: loading a million partitions through
CreatePartitions takes minutes and measures something else); the voter runs
as a real ``metaquorum serve`` process. Then:

* ``backup``: ``metaquorum backup --url --out`` as a subprocess, wall time
  (a Python start included), file size, and its peak RSS (VmHWM, sampled);
  the voter's RSS is sampled every 20 ms meanwhile: before, and its peak;
* ``verify``: ``metaquorum backup --verify`` (it decodes the image);
* ``restore``: ``metaquorum restore`` into a new dir, wall time and peak RSS.

    python bench/backup.py [--partitions 100000,1000000] [--per-topic 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from metadata_records.delta import apply_records  # noqa: E402
from metadata_records.image import (  # noqa: E402
    EMPTY_IMAGE,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from metadata_records.partition_map import PartitionMap  # noqa: E402
from metadata_records.records import (  # noqa: E402
    Endpoint,
    FeatureLevelRecord,
    FeatureRange,
    LeaderChangeRecord,
    RegisterBrokerRecord,
    Voter,
)
from metadata_records.snapshot import decode_image, encode_image  # noqa: E402
from metadata_records.uuids import uuid_from_bytes  # noqa: E402
from quorum.seeded_data_dir import seeded_raft_index, write_seeded_data_dir  # noqa: E402
from tests.cluster import Cluster  # noqa: E402

BROKERS = 30
MV = (FeatureRange("metadata.version", 6, 12),)


def progress(text: str) -> None:
    print(f"[backup bench] {text}", file=sys.stderr, flush=True)


def big_image(partitions: int, per_topic: int) -> MetadataImage:
    """``partitions`` partitions, RF 3, striped over BROKERS unfenced brokers."""
    records = [
        LeaderChangeRecord(controller_epoch=3, leader_id=0, leader_url="http://old-0"),
        FeatureLevelRecord(name="metadata.version", feature_level=12),
    ]
    for b in range(BROKERS):
        records.append(
            RegisterBrokerRecord(
                broker_id=b,
                incarnation_id=uuid_from_bytes(b.to_bytes(16, "big")),
                broker_epoch=len(records),
                end_points=(Endpoint("PLAINTEXT", f"broker-{b}", 9092, 0),),
                features=MV,
                fenced=False,
            )
        )
    base = apply_records(EMPTY_IMAGE, records)
    topics: dict[str, TopicImage] = {}
    topic_ids: dict[str, str] = {}
    made = 0
    t = 0
    while made < partitions:
        count = min(per_topic, partitions - made)
        topic_id = uuid_from_bytes((t + 1).to_bytes(16, "big"))
        rows = {}
        for p in range(count):
            first = (made + p) % BROKERS
            replicas = (first, (first + 1) % BROKERS, (first + 2) % BROKERS)
            rows[p] = PartitionRegistration(replicas, replicas, (), (), first, 0, 0, 0)
        name = f"topic-{t:05d}"
        topics[topic_id] = TopicImage(name, topic_id, PartitionMap(rows), {"retention.ms": "1"})
        topic_ids[name] = topic_id
        made += count
        t += 1
    image = base._replace(
        topics=topics,
        topic_ids=topic_ids,
        partition_count=made,
        next_offset=base.next_offset + len(topics) + made,
    )
    return decode_image(encode_image(image))  # as a voter holds it (shared ISRs)


class RssSampler:
    """A process's resident set, every 20 ms, from /proc; its peak."""

    def __init__(self, pid: int, field: str = "VmRSS") -> None:
        """``field``: VmRSS (now), or VmHWM (the peak of the running program)."""
        self.pid = pid
        self.field = field
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss(self, field: str = "VmRSS") -> int:
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith(f"{field}:"):
                        return int(line.split()[1]) * 1024
        except (FileNotFoundError, ProcessLookupError):
            pass  # it ended
        return 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss(self.field))
            time.sleep(0.02)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()


def timed(args: list[str]) -> tuple[float, int, str]:
    """Wall time, peak RSS (bytes) and stdout of ``metaquorum ARGS``. The
    peak is the child's VmHWM, sampled until it ends: wait4's ru_maxrss
    would count this process's own pages, which a forked child holds until
    it execs (the kernel keeps that maximum across exec)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "metaquorum.cli", *args], stdout=out, stderr=err, env=env
        )
        with RssSampler(proc.pid, "VmHWM") as child:
            proc.wait()
        took = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"metaquorum {' '.join(args)} failed:\n{err.read()}")
        return took, child.peak, out.read()


def one_size(partitions: int, per_topic: int, root: Path) -> dict:
    progress(f"building an image of {partitions:,} partitions")
    t0 = time.monotonic()
    image = big_image(partitions, per_topic)
    progress(f"built in {time.monotonic() - t0:.1f} s; seeding a voter's data dir")
    (root / "source").mkdir()
    c = Cluster(root / "source", voters=1)
    c.cluster_id = "bench-source"
    write_seeded_data_dir(
        str(c.data_dir(0)),
        node_id=0,
        cluster_id=c.cluster_id,
        image=image,
        voters=(Voter(0, None, "127.0.0.1", c.raft[0]),),
        raft_index=seeded_raft_index(),
    )
    del image
    try:
        c.start()
        c.wait_ready(timeout_s=600)
        pid = c.procs[0].pid
        out = root / "bench.backup"
        with RssSampler(pid) as server:
            before = server.rss()
            backup_s, backup_rss, run = timed(["backup", "--url", c.url(0), "--out", str(out)])
        size = out.stat().st_size
        progress(run.strip().replace("\n", "; "))
        verify_s, verify_rss, _ = timed(["backup", "--verify", str(out)])
        restore_s, restore_rss, _ = timed([
            "restore", "--from", str(out), "--data-dir", str(root / "restored"),
            "--node-id", "0", "--voters", "0@127.0.0.1:9093",
        ])  # fmt: skip
    finally:
        c.close()
    return {
        "partitions": partitions,
        "fileBytes": size,
        "backupSeconds": round(backup_s, 2),
        "backupMiBPerSecond": round(size / 2**20 / backup_s, 1),
        "serverRssBeforeMiB": round(before / 2**20),
        "serverRssPeakDuringBackupMiB": round(server.peak / 2**20),
        "backupClientPeakRssMiB": round(backup_rss / 2**20),
        "verifySeconds": round(verify_s, 2),
        "verifyPeakRssMiB": round(verify_rss / 2**20),
        "restoreSeconds": round(restore_s, 2),
        "restorePeakRssMiB": round(restore_rss / 2**20),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="100000,1000000")
    parser.add_argument("--per-topic", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = []
    for n in (int(x) for x in args.partitions.split(",")):
        with tempfile.TemporaryDirectory(prefix="bench-backup-") as d:
            results.append(one_size(n, args.per_topic, Path(d)))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"{'partitions':>11} {'file MiB':>9} {'backup s':>9} {'MiB/s':>7} {'server RSS':>11} "
        f"{'peak':>6} {'client':>7} {'verify s':>9} {'RSS':>6} {'restore s':>10} {'RSS':>6}"
    )
    for r in results:
        print(
            f"{r['partitions']:>11,} {r['fileBytes'] / 2**20:>9.1f} {r['backupSeconds']:>9} "
            f"{r['backupMiBPerSecond']:>7} {r['serverRssBeforeMiB']:>11} "
            f"{r['serverRssPeakDuringBackupMiB']:>6} {r['backupClientPeakRssMiB']:>7} "
            f"{r['verifySeconds']:>9} {r['verifyPeakRssMiB']:>6} {r['restoreSeconds']:>10} "
            f"{r['restorePeakRssMiB']:>6}"
        )
    print("(RSS in MiB, sampled every 20 ms: the commands' VmHWM, the server's VmRSS)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
