"""Who asked, in the batches the orderer writes (quorum/orderer.py,
quorum/callers.py): pure, against test_orderer's fake RaftSide, no sockets."""

from __future__ import annotations

import asyncio

from controller.messages import (
    BrokerHeartbeatRequest,
    CreatableTopic,
    CreateTopicsRequest,
)
from metadata_records.records import Batch, NoOpRecord, Who
from quorum import callers
from quorum import orderer as orderer_module
from quorum.callers import Caller, WhoRuns, asked_by
from quorum.orderer import _FENCE, _NOOP

from .harness import ControllerHarness
from .test_orderer import active_orderer, until

OPS = asked_by("admin:token/ops", "10.0.0.7:41000", "req-ops-1")
BROKER_2 = asked_by("broker:cert/CN=kafka-2", "10.0.0.2:39000", "b2-0001")


def submit(orderer, request, caller: Caller | None) -> asyncio.Future:
    future = asyncio.get_running_loop().create_future()
    orderer.submit_to(request, future, caller=caller)
    return future


def create(name: str, partitions: int) -> CreateTopicsRequest:
    return CreateTopicsRequest((CreatableTopic(name, partitions, 2),))


def check_covers(batch: Batch) -> None:
    assert sum(w.records for w in batch.who) == len(batch.records)
    assert all(w.records >= 1 for w in batch.who)


def test_a_batch_of_several_requests_says_who_asked_for_each_run_of_its_records() -> None:
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)

    async def scenario() -> None:
        orderer, raft = active_orderer(h)
        first = submit(orderer, create("first", 1), OPS)
        await until(lambda: raft.in_flight)  # in flight: what follows queues
        queued = [
            submit(orderer, create("orders", 3), OPS),
            # Fences broker 2 (a heartbeat that writes is the broker's).
            submit(
                orderer,
                BrokerHeartbeatRequest(2, h.epochs[2], h.image.next_offset, want_fence=True),
                BROKER_2,
            ),
            submit(orderer, create("orders", 3), OPS),  # refused: writes nothing, no Who
            submit(orderer, create("audit", 2), None),  # in-process, no caller
        ]
        orderer.enqueue(_NOOP, None, callers.NOOP)
        raft.commit_one()
        await until(lambda: raft.in_flight)
        batch = raft.in_flight[0][0]
        check_covers(batch)
        principals = [(w.principal, w.api) for w in batch.who]
        assert principals == [
            ("admin:token/ops", "CreateTopics"),
            ("broker:cert/CN=kafka-2", "BrokerHeartbeat"),
            ("internal", "CreateTopics"),
            ("controller", "WriteNoOp"),
        ]
        ops, broker, internal, noop = batch.who
        assert (ops.records, ops.address, ops.request_id) == (4, "10.0.0.7:41000", "req-ops-1")
        assert broker.records >= 1 and broker.request_id == "b2-0001"
        assert internal.records == 3 and (internal.address, internal.request_id) == ("", "")
        assert noop == Who(1, "controller", "WriteNoOp", rule="metadata.max.idle.interval.noop")
        assert batch.records[-1] == NoOpRecord()
        # The runs line up with the records: each starts where its request's do.
        starts = [sum(w.records for w in batch.who[:i]) for i in range(len(batch.who))]
        assert type(batch.records[starts[0]]).__name__ == "TopicRecord"
        fenced = batch.records[starts[1] : starts[2]]
        assert {type(r).__name__ for r in fenced} <= {
            "BrokerRegistrationChangeRecord",
            "PartitionChangeRecord",
        }
        assert any(getattr(r, "fenced", 0) == 1 and r.broker_id == 2 for r in fenced)
        assert batch.records[starts[2]].name == "audit"
        raft.commit_one()
        await until(lambda: all(f.done() for f in queued) and first.done())
        assert raft.in_flight == [] or all(b.who for b, _ in raft.in_flight)

    asyncio.run(scenario())


def test_controller_work_carries_the_controller_and_its_rule(monkeypatch) -> None:
    h = ControllerHarness(session_timeout_ms=9000)
    h.start_brokers(1, 2)

    async def scenario() -> None:
        orderer, raft = active_orderer(h)
        # The sessions run out: the fencer is the controller's work.
        monkeypatch.setattr(orderer_module, "session_clock_ms", lambda: h.now_ms + 60_000)
        orderer.enqueue(_FENCE, None, callers.FENCE)
        await until(lambda: raft.in_flight)
        batch = raft.in_flight[0][0]
        check_covers(batch)
        assert {(w.principal, w.api, w.rule) for w in batch.who} == {
            ("controller", "FenceExpiredSessions", "kip-631.session-expired")
        }
        assert len(batch.who) == 1  # the sweep's records are one run

    asyncio.run(scenario())


def test_consecutive_requests_of_one_caller_share_a_run_and_nothing_writes_no_who() -> None:
    runs = WhoRuns()
    runs.add(OPS, create("a", 1), 0)
    assert runs.who() == ()
    runs.add(callers.FENCE, None, 2)
    runs.add(callers.FENCE, None, 3)
    runs.add(OPS, create("a", 1), 2)
    runs.add(BROKER_2, BrokerHeartbeatRequest(2, 5, 9), 1)
    assert runs.who() == (
        Who(5, "controller", "FenceExpiredSessions", rule="kip-631.session-expired"),
        Who(2, "admin:token/ops", "CreateTopics", "10.0.0.7:41000", "req-ops-1"),
        Who(1, "broker:cert/CN=kafka-2", "BrokerHeartbeat", "10.0.0.2:39000", "b2-0001"),
    )
    assert callers.controller_who(callers.LEADER_CHANGE, 1) == (
        Who(1, "controller", "LeaderChange", rule="raft.leader-elected"),
    )
