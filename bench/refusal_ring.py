"""What noting refusals (controller/refusals.py) costs the orderer per answer
(figures, not asserts).

The orderer hands every answer it settles to ``RefusalRing.note``. For an
accepted answer that is a type test and an attribute read (and a walk of the
entries of an answer that has them); this prints that cost beside what the
controller spends deciding the same request, for a heartbeat and for an
AlterPartition of 100 partitions, and what a refused one costs to keep.

    python bench/refusal_ring.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.messages import (  # noqa: E402 - after the path is set
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
)
from controller.refusals import RefusalRing  # noqa: E402
from metadata_records.errors import Errors  # noqa: E402
from tests.harness import ControllerHarness  # noqa: E402


def per_call_us(stmt, number: int, repeat: int) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    ring = RefusalRing()

    def clock() -> int:
        return 0

    hb_req = BrokerHeartbeatRequest(1, 7, 0)
    hb_ok = BrokerHeartbeatResponse(Errors.NONE, None, True, False, False)
    hb_refused = BrokerHeartbeatResponse(
        Errors.STALE_BROKER_EPOCH, "stale", rule="kip-380.broker-epoch-mismatch"
    )
    parts = tuple(AlterPartitionPartitionResult(p, leader_id=1, isr=(1, 2)) for p in range(100))
    ap_req = AlterPartitionRequest(1, 7, ())
    ap_ok = AlterPartitionResponse(
        Errors.NONE, None, (AlterPartitionTopicResult(parts, topic_id="T"),)
    )

    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    decide_hb = BrokerHeartbeatRequest(1, h.epochs[1], h.image.next_offset)
    n = 20_000
    print(f"{'what':<52} {'us/call':>8}")
    rows = [
        ("(the bench's own call, to subtract)", lambda: None, n),
        ("note: accepted heartbeat", lambda: ring.note(hb_req, hb_ok, clock), n),
        (
            "note: accepted AlterPartition, 100 partitions",
            lambda: ring.note(ap_req, ap_ok, clock),
            2_000,
        ),
        ("note: refused heartbeat (kept)", lambda: ring.note(hb_req, hb_refused, clock), n),
        ("controller: decide a heartbeat", lambda: h.controller.handle(decide_hb, h.now_ms), n),
    ]
    for name, stmt, number in rows:
        print(f"{name:<52} {per_call_us(stmt, number, args.repeat):>8.3f}")


if __name__ == "__main__":
    main()
