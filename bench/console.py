"""How long the web console's pages take to show their first data, in
headless Chromium, with 1,000 brokers and 100,000 partitions: figures, not
asserts (docs/console.md).

The image: ``--brokers`` (1,000) brokers on 10 racks, every 50th fenced, and
``--partitions`` (100,000) partitions, RF 3 striped over them, in topics of
``--per-topic`` (1,000); a fenced broker is out of its partitions' ISRs
(under-replicated: about 6%), and every 10,000th partition is offline. It is
built in this process and seeded into a lone voter's data dir
(quorum/seeded_data_dir.py, as bench/backup.py does); the voter runs as a
real ``metaquorum serve`` process (auth off). Each page is loaded
``--loads`` times in one Chromium (Debian's, through its chromedriver):
the time is from the start of the navigation to the moment the page drew
its first data (``performance.now()`` when it set ``data-loaded``:
api/console/app.js). The first load of each page is shown apart (cold);
then p50 and p99 of ``--loads`` more (with few loads, p99 is the slowest).
Load average matters: the figures are the machine's, not the console's alone.

    python bench/console.py [--brokers 1000] [--partitions 100000] [--loads 10] [--json]

Needs chromium, chromium-driver and selenium (the dev extras).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from metadata_records.delta import apply_records  # noqa: E402
from metadata_records.image import (  # noqa: E402
    EMPTY_IMAGE,  # noqa: E402
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
from tests.test_console_browser import Browser  # noqa: E402

MV = (FeatureRange("metadata.version", 6, 12),)
RACKS = 10
FENCED_EVERY = 50
OFFLINE_EVERY = 10_000


def progress(text: str) -> None:
    print(f"[console bench] {text}", file=sys.stderr, flush=True)


def console_image(brokers: int, partitions: int, per_topic: int):
    records = [
        LeaderChangeRecord(controller_epoch=3, leader_id=0, leader_url="http://old-0"),
        FeatureLevelRecord(name="metadata.version", feature_level=12),
    ]
    for b in range(brokers):
        records.append(
            RegisterBrokerRecord(
                broker_id=b,
                incarnation_id=uuid_from_bytes(b.to_bytes(16, "big")),
                broker_epoch=len(records),
                end_points=(Endpoint("PLAINTEXT", f"broker-{b}", 9092, 0),),
                features=MV,
                rack=f"r{b % RACKS}",
                fenced=b % FENCED_EVERY == 0,
            )
        )
    base = apply_records(EMPTY_IMAGE, records)
    topics: dict[str, TopicImage] = {}
    topic_ids: dict[str, str] = {}
    made = t = 0
    while made < partitions:
        count = min(per_topic, partitions - made)
        topic_id = uuid_from_bytes((t + 1).to_bytes(16, "big"))
        rows = {}
        for p in range(count):
            n = made + p
            first = n % brokers
            replicas = (first, (first + 1) % brokers, (first + 2) % brokers)
            isr = tuple(b for b in replicas if b % FENCED_EVERY != 0)
            leader = isr[0] if isr and n % OFFLINE_EVERY else -1
            rows[p] = PartitionRegistration(replicas, isr or replicas[:1], (), (), leader, 0, 0, 0)
        name = f"topic-{t:05d}"
        topics[topic_id] = TopicImage(name, topic_id, PartitionMap(rows), {})
        topic_ids[name] = topic_id
        made += count
        t += 1
    image = base._replace(
        topics=topics,
        topic_ids=topic_ids,
        partition_count=made,
        next_offset=base.next_offset + len(topics) + made,
    )
    return decode_image(encode_image(image))  # as a voter holds it


PAGES = [
    ("quorum", "/ui", "quorum"),
    ("brokers", "/ui/brokers", "brokers"),
    ("brokers, fenced", "/ui/brokers?state=fenced", "brokers"),
    ("partitions", "/ui/partitions", "partitions"),
    ("partitions, page 500", "/ui/partitions?from=50000", "partitions"),
    ("partitions, problems", "/ui/partitions?only=problems", "partitions"),
    ("log", "/ui/log", "log"),
    ("broker explain", "/ui/brokers/50", "broker-explain"),
    ("partition explain", "/ui/partitions/topic-00050/7", "partition-explain"),
]


def settle(url: str, at_least_s: float = 60.0, timeout_s: float = 240.0) -> float:
    """Seconds until the voter, up for ``at_least_s``, answers its status in
    under a second five times in a row. A voter seeded with 100,000
    partitions stalls once, about 10 s after it starts (a bare GET
    /v1/quorum/status, no browser, waited 41 s on the loaded VM; its cause is
    the voter's start, not the console's), so it is waited out and its
    length printed."""
    import httpx

    started = time.monotonic()
    quick = 0
    slowest = 0.0
    while (quick < 5 or time.monotonic() - started < at_least_s) and (
        time.monotonic() - started < timeout_s
    ):
        t0 = time.monotonic()
        httpx.get(url + "/v1/quorum/status", timeout=timeout_s)
        took = time.monotonic() - t0
        slowest = max(slowest, took)
        quick = quick + 1 if took < 1.0 else 0
        time.sleep(0.2)
    progress(f"the voter's slowest status answer while it settled: {slowest:.1f} s")
    return time.monotonic() - started


def measure(browser: Browser, url: str, loads: int) -> list[dict]:
    from selenium.common.exceptions import WebDriverException

    results = []
    for name, path, view in PAGES:
        times = []
        first = None
        for _ in range(loads + 1):
            browser.driver.get("about:blank")
            try:
                browser.open(url + path, view)
            except (AssertionError, WebDriverException) as e:
                progress(f"{name}: {str(e).splitlines()[0]}")
                break
            drawn = float(browser.js("return document.body.dataset.drawnMs"))
            if first is None:
                first = drawn  # cold: Chromium's cache and the voter's page index
            else:
                times.append(drawn)
        if not times:
            results.append({"page": name, "path": path, "loads": 0})
            continue
        times.sort()
        p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
        results.append(
            {
                "page": name,
                "path": path,
                "loads": len(times),
                "firstMs": round(first, 1),
                "p50Ms": round(statistics.median(times), 1),
                "p99Ms": round(p99, 1),
            }
        )
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", type=int, default=1_000)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--per-topic", type=int, default=1_000)
    ap.add_argument("--loads", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ["PYTHONPATH"] = str(ROOT)  # the voter runs this checkout's code
    progress(f"building {args.brokers:,} brokers, {args.partitions:,} partitions")
    image = console_image(args.brokers, args.partitions, args.per_topic)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        c = Cluster(root, voters=1)
        write_seeded_data_dir(
            str(c.data_dir(0)),
            node_id=0,
            cluster_id=c.cluster_id,
            image=image,
            voters=(Voter(0, None, "127.0.0.1", c.raft[0]),),
            raft_index=seeded_raft_index(),
        )
        del image
        browser = None
        try:
            c.start()
            c.wait_ready(timeout_s=600)
            progress(f"voter settled after {settle(c.url(0)):.1f} s")
            started = time.monotonic()
            browser = Browser(root)
            progress(f"voter ready, Chromium up in {time.monotonic() - started:.1f} s")
            results = measure(browser, c.url(0), args.loads)
        finally:
            if browser is not None:
                browser.close()
            c.close()
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"console pages, {args.brokers:,} brokers / {args.partitions:,} partitions, "
        f"{args.loads} loads each (ms from navigation to first data drawn); "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"{'page':<24} {'first ms':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for r in results:
        if r["loads"]:
            print(f"{r['page']:<24} {r['firstMs']:>9} {r['p50Ms']:>8} {r['p99Ms']:>8}")
        else:
            print(f"{r['page']:<24} {'n/a':>8} {'n/a':>8}  (did not load)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
