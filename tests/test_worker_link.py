"""The link's frames (voter/link.py): real requests and responses
survive the crossing whole, errors too, and frames split anywhere are read
back whole."""

import asyncio
import pickle
import socket
import time

import pytest

from api.served_node import ForwardingNode, ServedNode
from controller.messages import BrokerHeartbeatRequest
from metadata_records.errors import ApiError, Errors
from quorum.node import QuorumNode
from quorum.node_errors import (
    MembershipRefused,
    NotControllerError,
    OutcomeUnknownError,
    ThrottledError,
    UnavailableError,
)
from voter.link import (
    FrameProtocol,
    decode_error,
    encode_error,
    encode_frame,
    send_link,
)
from voter.worker_node import DEADLINE_SWEEP_S, WorkerNode

from .harness import ControllerHarness


def traffic() -> list:
    """Real requests and responses: a controller's, through a broker's life."""
    h = ControllerHarness()
    seen = []
    handle = h.controller.handle

    def recording(request, now_ms):
        result = handle(request, now_ms)
        seen.extend((request, result.response))
        return result

    h.controller.handle = recording
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 3, 3)
    h.alter_isr("t", 0, [h.partition("t", 0).leader, 2])
    h.alter_isr("t", 1, [1], partition_epoch=99)  # refused: an error in the answer
    h.heartbeat(1, want_shut_down=True)
    h.unregister(3)
    return seen


def decode(frame: bytes) -> list:
    got = []
    protocol = FrameProtocol(got.extend, lambda why: got.append(("lost", why)))
    protocol.data_received(frame)
    return got


def test_real_requests_and_responses_cross_whole():
    items = [("answer", i, obj) for i, obj in enumerate(traffic())]
    assert len(items) > 20
    got = decode(encode_frame(items))
    assert got == items
    assert [type(x[2]) for x in got] == [type(x[2]) for x in items]
    # Nested messages too (an AlterPartition answer's topics and partitions).
    for (_, _, sent), (_, _, back) in zip(items, got, strict=True):
        for name in sent.__struct_fields__:
            assert getattr(back, name) == getattr(sent, name)


def test_frames_split_anywhere_are_read_whole():
    items = [("answer", i, obj) for i, obj in enumerate(traffic())]
    stream = encode_frame(items[:10]) + encode_frame(items[10:])
    got, lost = [], []
    protocol = FrameProtocol(got.extend, lost.append)
    for cut in range(0, len(stream), 7):
        protocol.data_received(stream[cut : cut + 7])
    assert got == items and not lost


def test_an_unreadable_frame_ends_the_link():
    lost = []
    protocol = FrameProtocol(lambda items: None, lost.append)
    protocol.data_received(b"\0\0\0\3abc")
    assert lost and "unreadable frame" in lost[0]


def test_a_workers_writes_go_to_the_orderer_over_the_link_the_core_hands_it():
    """With an fd channel, a worker's writes go on the link to the orderer
    the core hands it (send_link), not to the core; that link closing fails
    what was sent on it as an unknown outcome and refuses new writes until
    the core hands the next one; an answer on a replaced link is ignored."""

    async def main():
        core, worker_end = socket.socketpair()
        core.setblocking(False)
        channel, worker_channel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        node = WorkerNode(node_id=0, index=3)
        await node.connect(worker_end, worker_channel)
        node.heard_at = time.monotonic() + 60  # not silent: calls are sent
        request = BrokerHeartbeatRequest(1, 5, 0)
        try:
            with pytest.raises(UnavailableError, match="nothing was written"):
                await node.submit(request)  # no link to the orderer yet

            async def hand_link() -> socket.socket:
                ours, theirs = socket.socketpair()
                send_link(channel, 0, theirs)
                theirs.close()
                ours.setblocking(False)
                await wait_for(lambda: node.orderer_link is not None, "the link adopted")
                return ours

            async def read_items(sock: socket.socket) -> list:
                loop = asyncio.get_running_loop()
                return decode(await loop.sock_recv(sock, 1 << 16))

            orderer = await hand_link()
            write = asyncio.ensure_future(node.submit(request))
            (item,) = await read_items(orderer)
            assert item[0] == "submit" and item[2] == request
            orderer.send(encode_frame([("answer", item[1], "committed")]))
            assert await asyncio.wait_for(write, 5) == "committed"

            # The orderer dies with a write on its link: an unknown outcome.
            write = asyncio.ensure_future(node.submit(request))
            (item,) = await read_items(orderer)
            orderer.close()
            with pytest.raises(OutcomeUnknownError, match="orderer process stopped"):
                await asyncio.wait_for(write, 5)
            with pytest.raises(UnavailableError, match="starting again"):
                await node.submit(request)

            # The next orderer's link: writes go on; the core's link saw none.
            orderer = await hand_link()
            write = asyncio.ensure_future(node.submit(request))
            (item,) = await read_items(orderer)
            orderer.send(
                encode_frame([("refused", item[1], encode_error(ThrottledError("busy", 1.0)))])
            )
            with pytest.raises(ThrottledError, match="busy"):
                await asyncio.wait_for(write, 5)
            try:
                sent_to_core = core.recv(1 << 16)
            except BlockingIOError:
                sent_to_core = b""
            assert all(item[0] != "submit" for item in decode(sent_to_core))
        finally:
            node._on_lost("the test is over")
            core.close()
            channel.close()

    asyncio.run(main())


async def wait_for(condition, what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def test_node_errors_cross_as_what_they_were():
    for error in (
        NotControllerError(2, "http://n2:8080", "not the leader"),
        UnavailableError("no leader", 0.25),
        ThrottledError("queue full", 0.5),
        OutcomeUnknownError("may still commit"),
        MembershipRefused(ApiError(Errors.DUPLICATE_VOTER, "already a voter")),
    ):
        back = decode_error(pickle.loads(pickle.dumps(encode_error(error))))
        assert type(back) is type(error) and str(back) == str(error)
        for attr in ("leader_id", "leader_url", "retry_after_s", "error"):
            assert getattr(back, attr, None) == getattr(error, attr, None)
    bug = decode_error(encode_error(KeyError("x")))
    assert isinstance(bug, RuntimeError) and "KeyError" in str(bug)


def test_a_core_that_never_answers_fails_each_call_at_its_deadline():
    """A worker's calls end at their deadline (one sweep, not a timer each):
    a write as an unknown outcome (it may still commit), a read barrier as
    unavailable; an answer after the deadline is ignored; frames did leave."""

    async def main():
        core, worker = socket.socketpair()
        core.setblocking(False)
        node = WorkerNode(node_id=0, index=0)
        await node.connect(worker)
        try:
            node.heard_at = time.monotonic() + 60  # not silent: calls are sent
            request = BrokerHeartbeatRequest(1, 5, 0)
            started = time.monotonic()
            write = asyncio.ensure_future(node.submit(request, timeout_s=0.3))
            read = asyncio.ensure_future(node.barrier(timeout_s=0.3))
            done, _ = await asyncio.wait({write, read}, timeout=10)
            took = time.monotonic() - started
            assert done == {write, read}
            assert isinstance(write.exception(), OutcomeUnknownError)
            assert "may still commit" in str(write.exception())
            assert isinstance(read.exception(), UnavailableError)
            assert 0.3 <= took < 0.3 + 4 * DEADLINE_SWEEP_S + 2  # the sweep, on a loaded machine
            assert not node._waiting
            sent = core.recv(1 << 16)
            assert [item[0] for item in decode(sent)] == ["submit", "barrier"]
        finally:
            node._on_lost("the test is over")
            core.close()

    asyncio.run(main())


def test_the_app_serves_a_quorum_node_and_a_workers_node_alike():
    """What api/served_node.py names, both nodes have; only the worker's
    forwards (its app forwards the core's paths and renders no metrics)."""
    names = set(ServedNode.__annotations__) | {n for n in vars(ServedNode) if n[0] != "_"}
    assert {"image", "submit", "barrier", "wait_for_offset", "sm"} <= names
    worker = WorkerNode(node_id=0, index=0)
    assert [n for n in sorted(names) if not hasattr(worker, n)] == []
    instance_attrs = {"node_id", "cluster_id", "sm", "history"}  # set by QuorumNode.__init__
    assert [n for n in sorted(names - instance_attrs) if not hasattr(QuorumNode, n)] == []
    assert isinstance(worker, ForwardingNode) and not hasattr(QuorumNode, "forward")
