"""quorum/orderer.py against a fake RaftSide (no pysyncobj): a batch stays in
flight until the test commits it, so what waits for it and what does not is
seen directly."""

from __future__ import annotations

import asyncio
import threading
import time

from pysyncobj import FAIL_REASON

from controller.controller import Controller
from controller.messages import BrokerHeartbeatRequest, CreateAclsRequest
from metadata_records.acls import StandardAcl
from metadata_records.delta import apply
from metadata_records.records import Batch
from quorum.node_errors import NodeError
from quorum.orderer import OFF_LOOP_ENTRIES, Orderer, OrderingConfig, decided_off_loop

from .harness import ControllerHarness


class FakeRaft:
    """RaftSide with a log that commits only when the test says so."""

    node_id = 0

    def __init__(self, harness: ControllerHarness) -> None:
        self.harness = harness
        self.controller_config = harness.config
        self.in_flight: list[tuple[Batch, asyncio.Future]] = []

    @property
    def image(self):
        return self.harness.image

    def propose(self, batch, known=None, view=None) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self.in_flight.append((batch, future))
        return future

    def commit_one(self) -> None:
        batch, future = self.in_flight.pop(0)
        self.harness.image = apply(self.harness.image, batch)
        future.set_result((batch.base_offset, FAIL_REASON.SUCCESS))

    def leads(self, term: int) -> bool:
        return True

    def nothing_to_propose(self) -> None:
        pass

    def refusal(self) -> NodeError | None:
        return None

    def not_controller(self, why: str) -> NodeError:
        return NodeError(why)

    def wanted_voters(self):
        return None

    def stepped_down(self) -> None:
        pass


def active_orderer(h: ControllerHarness) -> tuple[Orderer, FakeRaft]:
    raft = FakeRaft(h)
    orderer = Orderer(
        raft,
        OrderingConfig(
            advertised_url="http://c0",
            max_queued_requests=1000,
            max_batch_records=20_000,
            max_batches_in_flight=1,
            heartbeat_deadline_s=5.0,
            metadata_max_idle_interval_ms=0,
        ),
    )
    orderer.loop = asyncio.get_running_loop()
    orderer.term = h.image.controller_epoch
    orderer.controller = Controller(h.image, h.config, h.now_ms)
    orderer.active = True
    return orderer, raft


async def until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        await asyncio.sleep(0.001)


def held_controller(orderer: Orderer) -> threading.Event:
    """Makes the controller's decisions wait for the returned event (they run
    in a thread for a large admin write: the loop goes on meanwhile)."""
    release = threading.Event()
    handle = orderer.controller.handle

    def held(request, now_ms):
        if decided_off_loop(request, orderer.controller.view):
            assert release.wait(10), "the test never released the decision"
        return handle(request, now_ms)

    orderer.controller.handle = held
    return release


def submit(orderer: Orderer, request) -> asyncio.Future:
    future = asyncio.get_running_loop().create_future()
    orderer.submit_to(request, future)
    return future


ACLS = tuple(StandardAcl(2, "orders", 3, f"User:u{i}", "*", 3, 3) for i in range(2000))


def test_a_heartbeat_that_changes_nothing_does_not_wait_for_the_batch_in_flight() -> None:
    h = ControllerHarness()
    h.start_brokers(1, 2)

    async def scenario() -> None:
        orderer, raft = active_orderer(h)
        big = submit(orderer, CreateAclsRequest(ACLS))
        await until(lambda: raft.in_flight)  # decided in a thread (OFF_LOOP_ENTRIES)
        assert len(raft.in_flight) == 1 and not big.done()
        beat = submit(orderer, BrokerHeartbeatRequest(1, h.epochs[1], h.image.next_offset))
        assert beat.done(), "a quiet heartbeat waited for the admin write's batch"
        assert (beat.result().error, beat.result().is_fenced) == (0, False)
        # One that fences its broker is a write: it waits its turn.
        fence = submit(
            orderer, BrokerHeartbeatRequest(2, h.epochs[2], h.image.next_offset, want_fence=True)
        )
        assert not fence.done() and orderer.queue_depth == 1
        raft.commit_one()
        await asyncio.sleep(0)
        assert big.done() and len(raft.in_flight) == 1  # the fence's batch
        # While broker 2's fence is in flight, its heartbeats wait for it too.
        again = submit(orderer, BrokerHeartbeatRequest(2, h.epochs[2], h.image.next_offset))
        assert not again.done()
        raft.commit_one()
        await asyncio.sleep(0)
        assert fence.result().is_fenced and not again.done()  # decided in the next batch
        while raft.in_flight:
            raft.commit_one()
            await asyncio.sleep(0)
        assert again.done() and again.result().error == 0
        assert orderer.stats.quiet_heartbeats >= 1

    asyncio.run(scenario())


def test_a_large_admin_write_is_decided_off_the_loop_alone_in_its_batch() -> None:
    h = ControllerHarness()
    h.start_brokers(1, 2)
    assert len(ACLS) >= OFF_LOOP_ENTRIES

    async def scenario() -> None:
        orderer, raft = active_orderer(h)
        release = held_controller(orderer)
        big = submit(orderer, CreateAclsRequest(ACLS))
        # Deciding: a quiet heartbeat is answered, a write waits its turn.
        beat = submit(orderer, BrokerHeartbeatRequest(1, h.epochs[1], h.image.next_offset))
        assert beat.done() and beat.result().error == 0
        small = submit(orderer, CreateAclsRequest(ACLS[:1]))
        await asyncio.sleep(0.05)
        assert not raft.in_flight and not small.done() and orderer.queue_depth == 1
        release.set()
        await until(lambda: raft.in_flight)
        assert [len(b.records) for b, _ in raft.in_flight] == [len(ACLS)]  # alone
        raft.commit_one()
        await until(small.done)  # decided next: it exists already, so no batch
        assert big.done() and big.result().results[0].error == 0
        assert small.result().results[0].error == 0 and not raft.in_flight
        assert len(h.image.acls) == len(ACLS)  # the small one existed already

    asyncio.run(scenario())


def test_a_decision_off_the_loop_is_dropped_when_the_orderer_steps_down() -> None:
    h = ControllerHarness()
    h.start_brokers(1)

    async def scenario() -> None:
        orderer, raft = active_orderer(h)
        release = held_controller(orderer)
        big = submit(orderer, CreateAclsRequest(ACLS))
        await asyncio.sleep(0.01)
        orderer.step_down("a new term started")
        assert big.done() and isinstance(big.exception(), NodeError)
        release.set()
        await asyncio.sleep(0.1)
        assert not raft.in_flight  # nothing proposed for it

    asyncio.run(scenario())


def test_a_decision_off_the_loop_that_fails_is_answered_and_the_view_rebuilt() -> None:
    h = ControllerHarness()
    h.start_brokers(1)

    async def scenario() -> None:
        orderer, raft = active_orderer(h)
        broken = orderer.controller

        def fail(request, now_ms):
            raise RuntimeError("a bug")

        broken.handle = fail
        big = submit(orderer, CreateAclsRequest(ACLS))
        await until(big.done)
        assert isinstance(big.exception(), RuntimeError)
        fine = submit(orderer, CreateAclsRequest(ACLS[:3]))
        await until(lambda: raft.in_flight)
        assert orderer.controller is not broken  # rebuilt from the image
        raft.commit_one()
        await until(fine.done)
        assert fine.result().results[0].error == 0 and len(h.image.acls) == 3

    asyncio.run(scenario())


def test_a_decision_off_the_loop_done_during_a_leadership_transfer_is_not_proposed() -> None:
    h = ControllerHarness()
    h.start_brokers(1)

    async def scenario() -> None:
        orderer, raft = active_orderer(h)
        release = held_controller(orderer)
        big = submit(orderer, CreateAclsRequest(ACLS))
        await asyncio.sleep(0.01)
        orderer.transferring = True
        release.set()
        await until(big.done)
        assert isinstance(big.exception(), NodeError) and not raft.in_flight
        orderer.transferring = False  # the transfer failed: this voter goes on
        again = submit(orderer, CreateAclsRequest(ACLS[:2]))
        await until(lambda: raft.in_flight)
        raft.commit_one()
        await until(again.done)
        assert len(h.image.acls) == 2  # the dropped decision left nothing behind

    asyncio.run(scenario())
