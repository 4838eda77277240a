"""quorum/orderer.py against a fake RaftSide (no pysyncobj): a batch stays in
flight until the test commits it, so what waits for it and what does not is
seen directly."""

from __future__ import annotations

import asyncio

from pysyncobj import FAIL_REASON

from controller.controller import Controller
from controller.messages import BrokerHeartbeatRequest, CreateAclsRequest
from metadata_records.acls import StandardAcl
from metadata_records.delta import apply
from metadata_records.records import Batch
from quorum.node_errors import NodeError
from quorum.orderer import Orderer, OrderingConfig

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
