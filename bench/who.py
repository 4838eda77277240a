"""What recording who asked costs the leader, per partition change (figures,
not asserts; issue 43's budget: at most 1 us per partition change).

    .venv/bin/python bench/who.py [--json] [--rounds N]

A leader pays for the who of an AlterPartition in these steps, each timed
alone and then summed per partition change:

* edge: the request's Caller from its principal, address and request id
  (api/edge.py), a request id made by the voter when the caller sent none,
  and the answer's X-Request-Id (in the HTTP worker, with workers);
* link: the Caller pickled into the worker's SUBMIT frame and out again in
  the orderer process (voter/link.py; with HTTP workers only);
* orderer: ``WhoRuns.add`` per decided request and the batch's who tuple
  (quorum/callers.py, quorum/orderer.py's ``_pump``);
* codec: ``encode_batch`` with the who against the same batch without it
  (metadata_records/codec.py, its msgspec encoder).

Batches: single-partition AlterPartition batches (one request, one change),
100 single-partition requests in one batch (100 Whos: the most a change
costs), and one 100-partition request (one Who for 100 changes). A
follower's decode (not the leader's) is shown too. The HTTP throughput
before and after is bench/api.py's, run back to back on both branches.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from api.auth import Principal, Role  # noqa: E402
from api.edge import client_address, new_request_id  # noqa: E402
from controller.messages import AlterPartitionRequest  # noqa: E402
from metadata_records.codec import decode_batch, encode_batch  # noqa: E402
from metadata_records.records import Batch, PartitionChangeRecord  # noqa: E402
from quorum.callers import Caller, WhoRuns  # noqa: E402

TOPIC = "zBTExEswSU63HSkHIAXA_A"
PRINCIPAL = Principal(Role.BROKER, 7, 3, "CN=broker-7")
SCOPE = {"client": ("10.0.3.7", 51234)}
REQUEST = AlterPartitionRequest(7, 42, ())


def changes(n: int) -> tuple[PartitionChangeRecord, ...]:
    return tuple(
        PartitionChangeRecord(partition_id=p, topic_id=TOPIC, isr=(7, 8, 9), leader=-2)
        for p in range(n)
    )


def ns_per(fn, per: int, number: int) -> float:
    """The best of 5 runs of ``number`` calls, in ns per ``per`` changes."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter_ns() - start) / number)
    return best / per


def caller() -> Caller:
    # As EdgeMiddleware._admit builds it (asked_by's tuple, spelled out).
    return (PRINCIPAL.name, client_address(SCOPE), new_request_id().decode("ascii"), "", "")


def measure(requests: int, changes_per_request: int) -> dict[str, float]:
    n = requests * changes_per_request
    records = changes(n)
    callers = [caller() for _ in range(requests)]
    runs = WhoRuns()
    for c in callers:
        runs.add(c, REQUEST, changes_per_request)
    who = runs.who()
    plain = Batch(5, 1795000000000, records, 1000)
    with_who = Batch(5, 1795000000000, records, 1000, who)
    payload, payload_who = encode_batch(plain), encode_batch(with_who)
    number = max(50, 20_000 // n)

    def build_runs() -> tuple:
        r = WhoRuns()
        for c in callers:
            r.add(c, REQUEST, changes_per_request)
        return r.who()

    start = {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-length", b"80"), (b"content-type", b"application/json")],
    }

    def edge() -> None:
        for _ in range(requests):
            caller()
            # EdgeMiddleware's answer: X-Request-Id added to a new list of its headers.
            start["headers"] = [*start["headers"][:2], (b"x-request-id", b"3f9a1c2e4b01-1a")]

    # One frame of the loop turn's SUBMIT items, with the caller and without.
    items = [("submit", i, REQUEST, c) for i, c in enumerate(callers)]
    bare = [item[:3] for item in items]

    def frame(of: list) -> None:
        pickle.loads(pickle.dumps(of, pickle.HIGHEST_PROTOCOL))

    figures = {
        "edge": ns_per(edge, n, number),
        "link": ns_per(lambda: frame(items), n, number) - ns_per(lambda: frame(bare), n, number),
        "orderer": ns_per(build_runs, n, number),
        "encode without who": ns_per(lambda: encode_batch(plain), n, number),
        "encode with who": ns_per(lambda: encode_batch(with_who), n, number),
        "decode without who (follower)": ns_per(lambda: decode_batch(payload), n, number),
        "decode with who (follower)": ns_per(lambda: decode_batch(payload_who), n, number),
    }
    figures["codec"] = figures["encode with who"] - figures["encode without who"]
    figures["leader total"] = figures["edge"] + figures["link"] + figures["orderer"]
    figures["leader total"] += figures["codec"]
    figures["bytes per change"] = (len(payload_who) - len(payload)) / n
    figures["frame bytes per request"] = (
        len(pickle.dumps(items, pickle.HIGHEST_PROTOCOL))
        - len(pickle.dumps(bare, pickle.HIGHEST_PROTOCOL))
    ) / requests
    return figures


CASES = {
    "1 request x 1 partition": (1, 1),
    "100 requests x 1 partition": (100, 1),
    "1 request x 100 partitions": (1, 100),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="the figures as one JSON object")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median is shown")
    args = parser.parse_args()
    out: dict[str, dict[str, float]] = {}
    for name, (requests, per) in CASES.items():
        rounds = [measure(requests, per) for _ in range(args.rounds)]
        out[name] = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    keys = list(next(iter(out.values())))
    print(f"{'ns per partition change':<32}" + "".join(f"{name:>28}" for name in out))
    for key in keys:
        print(f"{key:<32}" + "".join(f"{out[name][key]:>28.1f}" for name in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
