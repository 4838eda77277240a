"""The orderer's contract with Raft across its link (voter/orderer_process.py
and voter/core_link.py): a real voter (QuorumNode) and an OrdererProcess
joined by a real socket pair, in one event loop so that the test can step
in between. A batch commits and is answered after the orderer's image holds
it; a batch decided on a view the log did not follow comes back stale, its
writers hear an unknown outcome, and the orderer rebuilds and goes on."""

import asyncio
import os
import socket

import pytest

from controller.messages import BrokerRegistrationRequest
from metadata_records.errors import Errors
from metadata_records.records import Batch, Endpoint, NoOpRecord
from quorum.node_errors import OutcomeUnknownError
from quorum.orderer import OrderingConfig
from quorum.state_machine import STALE
from voter.batch_ring import BatchRing
from voter.core_link import CoreLinks, RemoteOrderer, SummedConnections, SummedRequests
from voter.orderer_process import OrdererProcess

from .nodes import build_node, run_with, single_voter_config, wait_until
from .test_node import MV, incarnation


def orderer_config(node) -> dict:
    ordering = OrderingConfig.of(node.config)
    return {
        "nodeId": node.node_id,
        "clusterId": node.cluster_id,
        "sessionTimeoutMs": node.controller_config.session_timeout_ms,
        "leaderImbalanceCheckIntervalMs": node.controller_config.leader_imbalance_check_interval_ms,
        "delegationTokenSecretFile": None,
        "delegationTokens": {
            "maxLifetimeMs": node.controller_config.delegation_token_max_lifetime_ms,
            "expiryTimeMs": node.controller_config.delegation_token_expiry_time_ms,
            "expiryCheckIntervalMs": node.controller_config.delegation_token_expiry_check_interval_ms,
        },
        "ordering": {f: getattr(ordering, f) for f in OrderingConfig.__dataclass_fields__},
        "logLevel": "info",
    }


def registration(node, broker_id: int) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id,
        node.cluster_id,
        incarnation(broker_id),
        (Endpoint("PLAINTEXT", "h", 9092, 0),),
        MV,
    )


def with_orderer(tmp_path, ring: BatchRing | None, scenario) -> None:
    """``await scenario(node, process, links)``: a voter and an orderer
    process joined by a socket pair (and ``ring``, None: batches streamed),
    in one event loop; both stopped afterwards, also on failure."""
    node = build_node(single_voter_config(tmp_path))
    links = CoreLinks(node, None, SummedConnections(), SummedRequests(), ring)
    node.orderer = RemoteOrderer(links)

    async def body(node):
        links.start()
        core_end, orderer_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        await links.attach_orderer(core_end)
        process = OrdererProcess(orderer_config(node))
        ring_fd = None if ring is None else os.dup(ring.fileno())
        running = asyncio.ensure_future(process.run(orderer_end, None, ring_fd))
        try:
            await scenario(node, process, links)
        finally:
            process.stop()
            await running
            links.stop()

    run_with(node, body)


@pytest.mark.parametrize("ring", [False, True], ids=["streamed", "ring"])
def test_batches_commit_and_come_back_stale_across_the_link(tmp_path, ring):
    async def scenario(node, process, links):
        await wait_until(
            lambda: node.active and process.sm.image.metadata_version == 12,
            what="the orderer process ordering",
        )
        # 1. A write through the orderer: answered once committed, and the
        # orderer's image holds it by then (it adopted its own batch).
        first = await node.submit(registration(node, 1))
        assert first.error is Errors.NONE
        assert process.sm.image.brokers[1].epoch == first.broker_epoch
        assert node.image.brokers[1].epoch == first.broker_epoch
        adopted = process.sm.views_adopted
        assert adopted > 0

        # 2. The core commits a batch of its own at the offset the
        # orderer's next batch was decided for: that one comes back stale.
        real_propose = process.raft.propose
        stale_results = []

        def propose_after_another(batch, known=None, view=None):
            ahead = Batch(batch.controller_epoch, 0, (NoOpRecord(),), batch.base_offset)
            node.propose(ahead)  # appended to Raft first
            future = real_propose(batch, known, view)
            future.add_done_callback(lambda f: stale_results.append(f.result()))
            return future

        process.raft.propose = propose_after_another
        try:
            await node.submit(registration(node, 2))
            raise AssertionError("a write whose batch came back stale was acknowledged")
        except OutcomeUnknownError as e:
            assert "did not commit" in str(e)
        finally:
            process.raft.propose = real_propose
        assert stale_results and stale_results[0][0] == STALE
        assert node.sm.stale_batches == 1 and 2 not in node.image.brokers

        # 3. The orderer rebuilt its view from the log and goes on.
        again = await node.submit(registration(node, 2))
        assert again.error is Errors.NONE and node.image.brokers[2].epoch == again.broker_epoch
        assert node.active
        # 4. The orderer's log keeps its last batch only: it serves no reads.
        assert process.sm.log.oldest_offset > node.sm.log.oldest_offset == 0

    with_orderer(tmp_path, BatchRing() if ring else None, scenario)


def test_an_orderer_the_ring_lapped_catches_up_over_its_link(tmp_path):
    """A ring too small for what committed while the orderer did not look
    (and a batch too large for it): the orderer asks for the batches from its
    offset, gets them down the link, and follows the ring again after."""

    async def scenario(node, process, links):
        await wait_until(lambda: node.active, what="the orderer process ordering")
        assert (await node.submit(registration(node, 1))).error is Errors.NONE
        follow = process.ring.poll
        process.ring.poll = lambda: None  # it looks away
        try:
            for _ in range(60):  # ~600 bytes each: the 4 KiB ring laps
                noop = Batch(node.image.controller_epoch, 0, (NoOpRecord(),) * 20)
                await node.propose(noop)
        finally:
            process.ring.poll = follow
        await wait_until(
            lambda: process.sm.image.next_offset == node.image.next_offset,
            what="the orderer's image caught up after the lap",
        )
        assert process.ring.catch_ups == 1
        big = Batch(node.image.controller_epoch, 0, (NoOpRecord(),) * 300)
        await node.propose(big)  # over a quarter of the ring: never in it
        await wait_until(
            lambda: process.sm.image.next_offset == node.image.next_offset,
            what="the orderer's image caught up past the large batch",
        )
        assert process.ring.catch_ups == 2
        # And the ring again: a write answered once its batch is there.
        second = await node.submit(registration(node, 2))
        assert second.error is Errors.NONE
        assert process.sm.image.brokers[2].epoch == second.broker_epoch
        assert process.sm.image.next_offset == node.image.next_offset

    with_orderer(tmp_path, BatchRing(4096), scenario)


def test_a_ring_that_fails_hands_its_readers_back_to_the_link(tmp_path):
    """The ring cannot fail an apply: RecordLog drops it, and the core starts
    each reader over from an image and streams to it from then on."""
    ring = BatchRing()

    async def scenario(node, process, links):
        await wait_until(lambda: node.active, what="the orderer process ordering")
        assert (await node.submit(registration(node, 1))).error is Errors.NONE

        def broken(*_args):
            raise OSError("the ring's memory is gone")

        ring.publish = broken
        await node.propose(Batch(node.image.controller_epoch, 0, (NoOpRecord(),)))
        assert node.sm.log.ring is None  # the apply went on without it
        await wait_until(lambda: links.ring is None, what="the core to drop the ring")
        again = await node.submit(registration(node, 2))
        assert again.error is Errors.NONE
        await wait_until(
            lambda: process.sm.image.next_offset == node.image.next_offset,
            what="the orderer's image streamed to",
        )
        assert process.sm.image.brokers[2].epoch == again.broker_epoch

    with_orderer(tmp_path, ring, scenario)
