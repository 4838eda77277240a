"""Does each controller operation cost what it changes, or what is stored?

    .venv/bin/python bench/op_costs.py               # stores of 100, 1,000 and 10,000 of each kind
    .venv/bin/python bench/op_costs.py --base 1000   # 1,000, 10,000 and 100,000 (minutes)
    .venv/bin/python bench/op_costs.py --base 1000 --per-topic 20 --brokers 100   # to 2,000,000 partitions
    .venv/bin/python bench/op_costs.py --image-file   # partitions read from an image file
    .venv/bin/python bench/op_costs.py --json

One image per size, built through the pure controller (no Raft, no HTTP, one
core) with N of every kind of object: topics (one partition each, RF 3), one
config on each topic, ACLs, client-quota entities, SCRAM users, and N/10
brokers (at least 3). ``--per-topic P`` gives each topic P partitions, and
``--brokers B`` fixes the brokers at B. Then each operation is timed on that
image, one small change or read at a time (decide, apply as one batch, tell
the controller it committed, as the quorum does; reads as the HTTP routes
build their answers), and its median is printed beside the smallest size's:
the ratio is the operation's growth with the store (the goal is flat within
1.5x; an answer that lists everything stored grows by design, and says so).

Only figures are printed: nothing here asserts on timing.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from api.list_pages import brokers_page, topics_page, topics_stream
from api.reads import acls_obj, brokers_obj, client_quotas_obj, topic_obj
from controller.messages import (
    AlterableConfig,
    AlterClientQuotasRequest,
    AlterConfigsResource,
    AlterPartitionPartition,
    AlterPartitionRequest,
    AlterPartitionTopic,
    AlterUserScramCredentialsRequest,
    BrokerHeartbeatRequest,
    BrokerState,
    ClientQuotaAlteration,
    ClientQuotaOp,
    CreatableTopic,
    CreateAclsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
    ScramCredentialUpsertion,
)
from metadata_records.acls import AclBindingFilter, StandardAcl
from metadata_records.client_quotas import FilterComponent
from metadata_records.delta import apply
from metadata_records.image_file import ImageFile, rebased, write_image_file
from metadata_records.records import Batch
from tests.harness import ControllerHarness

TOPIC, SET = 2, 0
READ, ALLOW, LITERAL = 3, 3, 3
CHUNK = 1000  # objects per building request (under Kafka's 10,000-record cap)
MAX_BUILD_RECORDS = 4000  # a building CreateTopics' records, well under the cap


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def acl(i: int) -> StandardAcl:
    return StandardAcl(TOPIC, f"t{i}", LITERAL, f"User:u{i}", "*", READ, ALLOW)


def scram(name: str) -> ScramCredentialUpsertion:
    return ScramCredentialUpsertion(name, 1, 4096, b"s" * 16, b"p" * 32)


def quota(name: str, value: float) -> ClientQuotaAlteration:
    return ClientQuotaAlteration((("user", name),), (ClientQuotaOp("producer_byte_rate", value),))


def broker_count(n: int, fixed: int | None) -> int:
    return fixed if fixed is not None else max(3, n // 10)


def build(n: int, per_topic: int = 1, brokers: int | None = None) -> ControllerHarness:
    """A committed image with n of every kind (n/10 brokers, at least 3,
    unless ``brokers`` says how many), each topic of ``per_topic`` partitions."""
    h = ControllerHarness(session_timeout_ms=10**9)
    h.start_brokers(*range(broker_count(n, brokers)))
    per_request = max(1, min(CHUNK, MAX_BUILD_RECORDS // (per_topic + 1)))
    for lo in range(0, n, per_request):
        ids = range(lo, min(n, lo + per_request))
        h.run(CreateTopicsRequest(tuple(CreatableTopic(f"t{i}", per_topic, 3) for i in ids)))
    for lo in range(0, n, CHUNK):
        ids = range(lo, min(n, lo + CHUNK))
        h.run(
            IncrementalAlterConfigsRequest(
                tuple(
                    AlterConfigsResource(
                        TOPIC, f"t{i}", (AlterableConfig("retention.ms", SET, "1"),)
                    )
                    for i in ids
                )
            )
        )
        h.run(CreateAclsRequest(tuple(acl(i) for i in ids)))
        h.run(AlterClientQuotasRequest(tuple(quota(f"u{i}", 1.0) for i in ids)))
        h.run(AlterUserScramCredentialsRequest(upsertions=tuple(scram(f"u{i}") for i in ids)))
    return h


class Committer:
    """Decide, apply as one batch, and tell the controller, as a quorum voter
    does: the harness's own commit also compares whole maps, which would time
    the check instead of the operation."""

    def __init__(self, h: ControllerHarness) -> None:
        self.h = h

    def __call__(self, request: object) -> object:
        h = self.h
        result = h.controller.handle(request, h.now_ms)
        batch = Batch(
            h.image.controller_epoch, h.wall_ms, tuple(result.records), h.image.next_offset
        )
        h.image = apply(h.image, batch)
        h.controller.committed(h.image)
        return result.response


def operations(h: ControllerHarness, n: int, brokers: int) -> dict[str, Callable[[int], object]]:
    """Each operation as a function of its repetition number: a small change
    (undone by the next repetition where it adds, so the store keeps its size)
    or a read."""
    run = Committer(h)

    def acl_create_then_delete(k: int) -> object:
        binding = StandardAcl(TOPIC, f"new{k}", LITERAL, "User:bench", "*", READ, ALLOW)
        run(CreateAclsRequest((binding,)))
        return run(DeleteAclsRequest((AclBindingFilter(TOPIC, f"new{k}", LITERAL),)))

    def topic_create_then_delete(k: int) -> object:
        run(CreateTopicsRequest((CreatableTopic(f"new{k}", 1, 3),)))
        return run(DeleteTopicsRequest((f"new{k}",)))

    def alter_partition(k: int) -> object:
        topic_id = h.image.topic_ids[f"t{k % n}"]
        part = h.image.partition(topic_id, 0)
        isr = part.replicas if len(part.isr) < len(part.replicas) else part.replicas[:-1]
        states = tuple(BrokerState(b, h.epochs[b]) for b in isr)
        request = AlterPartitionRequest(
            part.leader,
            h.epochs[part.leader],
            (
                AlterPartitionTopic(
                    (
                        AlterPartitionPartition(
                            0, part.leader_epoch, part.partition_epoch, new_isr_with_epochs=states
                        ),
                    ),
                    topic_id=topic_id,
                ),
            ),
        )
        return run(request)

    def heartbeat(k: int) -> object:
        b = k % brokers
        request = BrokerHeartbeatRequest(b, h.epochs[b], h.image.next_offset)
        quiet = h.controller.quiet_heartbeat(request, h.now_ms, h.image)
        return quiet if quiet is not None else run(request)

    return {
        "CreateAcls + DeleteAcls (one binding)": acl_create_then_delete,
        "DescribeAcls (one topic's bindings)": lambda k: acls_obj(
            h.image, AclBindingFilter(TOPIC, f"t{k % n}", LITERAL)
        ),
        "IncrementalAlterConfigs (one topic)": lambda k: run(
            IncrementalAlterConfigsRequest(
                (
                    AlterConfigsResource(
                        TOPIC, f"t{k % n}", (AlterableConfig("retention.ms", SET, str(k)),)
                    ),
                )
            )
        ),
        "AlterClientQuotas (one entity)": lambda k: run(
            AlterClientQuotasRequest((quota(f"u{k % n}", float(k + 2)),))
        ),
        "DescribeClientQuotas (one entity)": lambda k: client_quotas_obj(
            h.image, [FilterComponent("user", 0, f"u{k % n}")], True
        ),
        "AlterUserScramCredentials (one user)": lambda k: run(
            AlterUserScramCredentialsRequest(upsertions=(scram(f"u{k % n}"),))
        ),
        "CreateTopics + DeleteTopics (one partition)": topic_create_then_delete,
        "AlterPartition (one partition)": alter_partition,
        "BrokerHeartbeat (one broker, nothing changes)": heartbeat,
        "session sweep (no broker due)": lambda k: (
            h.controller.next_fence_check_ms(),
            h.controller.maybe_fence_stale_broker(h.now_ms),
        ),
        "GET one topic": lambda k: topic_obj(h.image.topics[h.image.topic_ids[f"t{k % n}"]]),
        "GET /v1/topics?limit=100 (the first page)": lambda k: topics_page(h.image, None, 100),
        "GET /v1/brokers?limit=10 (the first page)": lambda k: brokers_page(h.image, None, 10),
        "GET /v1/topics (every topic, streamed: grows by design)": lambda k: b"".join(
            topics_stream(h.image)
        ),
        "GET /v1/brokers (every broker: grows by design)": lambda k: brokers_obj(h.image),
    }


def timed(op: Callable[[int], object], reps: int, budget_s: float) -> float:
    """The median µs of op over reps repetitions (fewer if past budget_s)."""
    samples = []
    stop = time.monotonic() + budget_s
    for k in range(reps):
        started = time.perf_counter()
        op(k)
        samples.append(time.perf_counter() - started)
        if time.monotonic() > stop and len(samples) >= 5:
            break
    return statistics.median(samples) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=int, default=100, help="the smallest store (default 100)")
    parser.add_argument("--reps", type=int, default=300, help="repetitions per operation")
    parser.add_argument("--per-topic", type=int, default=1, help="partitions per topic (default 1)")
    parser.add_argument(
        "--brokers",
        type=int,
        help="this many brokers at every size (default: a tenth of the store, at least 3); "
        "a topic's placement walks every broker, as Kafka's does",
    )
    parser.add_argument(
        "--image-file",
        action="store_true",
        help="read the partitions from an image file, as a voter with HTTP workers does "
        "(voter/shared_image.py): the image is written to one and rebased on it before timing",
    )
    parser.add_argument("--json", action="store_true", help="the figures as one JSON object")
    args = parser.parse_args()
    sizes = [args.base, args.base * 10, args.base * 100]
    figures: dict[str, dict[int, float]] = {}
    for n in sizes:
        started = time.monotonic()
        progress(f"building a store of {n:,} of each kind ({n * args.per_topic:,} partitions) ...")
        h = build(n, args.per_topic, args.brokers)
        progress(f"  built in {time.monotonic() - started:.1f} s; timing each operation")
        if args.image_file:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "image")
                write_image_file(path, h.image)
                h.image = rebased(h.image, ImageFile(path))  # mapped: readable once unlinked
            h.controller.committed(h.image)
        gc.collect()
        gc.freeze()  # the store is long-lived: keep the collector off its objects, as voters do
        for name, op in operations(h, n, broker_count(n, args.brokers)).items():
            figures.setdefault(name, {})[n] = timed(op, args.reps, budget_s=20.0)
        gc.unfreeze()
        del h
        gc.collect()
    if args.json:
        print(json.dumps({"sizes": sizes, "median_us": figures, "load": os.getloadavg()[0]}))
        return 0
    head = "".join(f"{n:>12,}" for n in sizes)
    print(
        f"median µs per operation by objects of each kind stored, topics of {args.per_topic} "
        f"partition(s) (load {os.getloadavg()[0]:.1f})"
    )
    print(f"{'operation':50}{head}   x10   x100")
    for name, by_size in figures.items():
        row = "".join(f"{by_size[n]:>12.1f}" for n in sizes)
        first = by_size[sizes[0]]
        print(f"{name:50}{row}{by_size[sizes[1]] / first:>6.2f}{by_size[sizes[2]] / first:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
