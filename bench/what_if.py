"""What GET /v1/what-if costs (controller/what_if.py): figures, not asserts.

The image: ``--partitions`` (default 100,000) partitions, RF 3 striped over
30 unfenced brokers (bench/backup.py's image), the brokers put on 3 racks
(broker b on rack r{b % 3}, so each partition has a replica on every rack).
For each loss (one broker; one rack, 10 brokers; two racks, 20 brokers):

* what-if: ``what_if(image, lost, now)`` (a throwaway Controller, the ISR
  index built over every partition, the brokers fenced, the changed
  partitions compared), p50 and max of ``--runs``;
* answer: that plus the response model (at most 1,000 partitions listed)
  and its JSON, what the endpoint does off the event loop.

    python bench/what_if.py [--partitions 100000] [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import orjson  # noqa: E402
from backup import BROKERS, big_image  # noqa: E402

from api.models import WhatIfOut  # noqa: E402
from controller.what_if import what_if  # noqa: E402
from metadata_records.partition_map import PartitionMap  # noqa: E402

RACKS = 3


def racked(image):
    brokers = {b: reg._replace(rack=f"r{b % RACKS}") for b, reg in image.brokers.items()}
    return image._replace(brokers=PartitionMap(brokers))


def measure(image, lost: list[int], runs: int) -> dict:
    core, whole = [], []
    answer = None
    for _ in range(runs):
        started = time.perf_counter()
        answer = what_if(image, lost, 0)
        core.append(time.perf_counter() - started)
        body = orjson.dumps(WhatIfOut.of(answer, image.last_offset, 1_000).to_json_obj())
        whole.append(time.perf_counter() - started)
    return {
        "lost": len(lost),
        "counts": answer.counts,
        "whatIfMsP50": statistics.median(core) * 1000,
        "whatIfMsMax": max(core) * 1000,
        "answerMsP50": statistics.median(whole) * 1000,
        "answerMsMax": max(whole) * 1000,
        "answerBytes": len(body),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    args = parser.parse_args()
    print(f"[what-if bench] building {args.partitions:,} partitions", file=sys.stderr, flush=True)
    image = racked(big_image(args.partitions, 1000))
    losses = {
        "one broker": [0],
        "one rack": [b for b in range(BROKERS) if b % RACKS == 0],
        "two racks": [b for b in range(BROKERS) if b % RACKS != 2],
    }
    figures = {name: measure(image, lost, args.runs) for name, lost in losses.items()}
    if args.json:
        print(json.dumps({"partitions": args.partitions, "losses": figures}, indent=2))
        return 0
    print(f"what-if over {args.partitions:,} partitions, {BROKERS} brokers on {RACKS} racks")
    for name, f in figures.items():
        c = f["counts"]
        print(
            f"  {name:<10} ({f['lost']:>2} brokers)  what-if p50 {f['whatIfMsP50']:,.0f} ms "
            f"(max {f['whatIfMsMax']:,.0f})  answer p50 {f['answerMsP50']:,.0f} ms "
            f"({f['answerBytes']:,} bytes)  offline {c['offline']:,}, under min ISR "
            f"{c['underMinIsr']:,}, leader moved {c['leaderMoved']:,}, ISR shrunk "
            f"{c['isrShrunk']:,}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
