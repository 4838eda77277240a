"""pysyncobj's ticks on the event loop (quorum/raft/loop_tick.py, LOOP_TICK)
against its own tick thread: the poller dispatches as pysyncobj's does, and
three voters commit and answer alike either way, each durable on a majority
before its answer."""

import asyncio
import os
import threading

import pytest
from pysyncobj.poller import POLL_EVENT_TYPE, PollPoller

from metadata_records.errors import Errors
from quorum.raft import internals, loop_tick
from quorum.raft.durability import MetaquorumJournal

from .nodes import wait_until
from .test_node import register, three_voters

READ, WRITE, ERROR = POLL_EVENT_TYPE.READ, POLL_EVENT_TYPE.WRITE, POLL_EVENT_TYPE.ERROR


def test_the_epoll_poller_dispatches_as_pysyncobjs_poll_poller():
    """The same subscriptions on pipes give the same (descriptor, events)
    from both pollers: nothing before a byte, READ after it, WRITE on a
    writable end, nothing once unsubscribed, ERROR once the other end is
    closed; a subscription over a descriptor closed and reused still works."""
    plain, epoll = PollPoller(), loop_tick.EpollPoller()
    r, w = os.pipe()
    try:
        got = {}
        for name, poller in (("plain", plain), ("epoll", epoll)):
            seen = got[name] = []
            poller.subscribe(r, lambda d, m, seen=seen: seen.append(("r", m)), READ | ERROR)
            poller.subscribe(w, lambda d, m, seen=seen: seen.append(("w", m)), WRITE | ERROR)
        for poller in (plain, epoll):
            poller.poll(0)
        assert got["plain"] == got["epoll"] == [("w", WRITE)]
        for name, poller in (("plain", plain), ("epoll", epoll)):
            got[name].clear()
            poller.unsubscribe(w)
            poller.poll(0)
        assert got["plain"] == got["epoll"] == []
        os.write(w, b"x")
        for poller in (plain, epoll):
            poller.poll(0)
        assert got["plain"] == got["epoll"] == [("r", READ)]
        os.read(r, 1)
        os.close(w)
        w = -1
        for name, poller in (("plain", plain), ("epoll", epoll)):
            got[name].clear()
            poller.poll(0)
        assert got["plain"] == got["epoll"] == [("r", ERROR)]
        # Closed without unsubscribing, its number reused: subscribing again works.
        os.close(r)
        r2, w2 = os.pipe()
        seen = []
        epoll.subscribe(r2, lambda d, m: seen.append(m), READ)
        os.write(w2, b"y")
        epoll.poll(0)
        assert seen == [READ]
        os.close(r2)
        os.close(w2)
        r = -1
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)
        epoll.close()


def test_a_poll_on_the_loop_dispatches_nothing_and_keeps_its_wait():
    """Not blocking (the ticks on the loop), a tick's poll only says how
    long the tick would have slept; the loop dispatches once the epoll
    descriptor is readable."""
    poller = loop_tick.EpollPoller()
    r, w = os.pipe()
    try:
        seen = []
        poller.subscribe(r, lambda d, m: seen.append(m), READ)
        os.write(w, b"x")
        poller.blocking = False
        poller.poll(0.03)
        assert seen == [] and poller.wait_s == 0.03
        poller.dispatch(0)
        assert seen == [READ] and poller.dispatched == 1
    finally:
        os.close(r)
        os.close(w)
        poller.close()


@pytest.mark.parametrize("on_loop", [False, True], ids=["tick-thread", "loop"])
def test_three_voters_commit_and_answer_alike_with_ticks_on_the_loop_or_a_thread(
    tmp_path, monkeypatch, on_loop
):
    """The same writes on three voters with fsync, the ticks on pysyncobj's
    thread (LOOP_TICK off) or on the event loop: every write answered alike,
    every voter at the same image, and no write answered before a majority
    of the journals synced it. On the loop, the ticks did move there and
    the writes settled on the loop's own thread."""
    monkeypatch.setattr(loop_tick, "LOOP_TICK", on_loop)
    nodes = three_voters(tmp_path, fsync=True)
    journals = [n.raft.journal for n in nodes]
    assert all(isinstance(j, MetaquorumJournal) for j in journals)
    unsynced_answers = []

    async def main():
        for n in nodes:
            await n.start(raft_on_loop=True)
        try:
            await wait_until(
                lambda: any(n.active and n.image.metadata_version == 12 for n in nodes),
                what="an active controller",
            )
            leader = next(n for n in nodes if n.active)
            await wait_until(
                lambda: all(n.raft_leader_id == leader.node_id for n in nodes),
                what="every voter following the leader",
            )
            answers = []
            for wave in range(5):  # one alone, then waves of concurrent writes
                wave_writes = [register(leader, 1 + 10 * wave + i) for i in range(1 + 3 * wave)]
                for response in await asyncio.gather(*wave_writes):
                    # Answered: its batch is synced on a majority of the journals.
                    end = leader.raft.commit_index
                    if sorted(j.durable_index for j in journals)[1] < end:
                        unsynced_answers.append(end)
                    answers.append(response.error)
            await wait_until(
                lambda: len({n.image_digest() for n in nodes}) == 1,
                what="every voter at the same image",
            )
            tickers = [n.raft.loop_ticker for n in nodes]
            if on_loop:
                assert all(t is not None and t.alive and t.runs > 0 for t in tickers)
                assert all(t.thread_id == threading.get_ident() for t in tickers)
                assert all(n.raft.alive for n in nodes)
            else:
                assert tickers == [None, None, None]
            return answers, nodes[0].image_digest()[0]
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    answers, last_offset = asyncio.run(main())
    assert answers == [Errors.NONE] * sum(1 + 3 * wave for wave in range(5))
    assert last_offset > 0
    assert unsynced_answers == []
    assert not any(n.raft.alive for n in nodes)  # stopped, thread or loop


def test_the_ticks_stay_on_their_thread_until_the_hand_over_may_happen(tmp_path, monkeypatch):
    """``tick_on(loop, when)``: while ``when()`` is False (a replay under
    way) the ticks go on on the tick thread; once it holds they move to
    the loop, and the thread ends."""
    monkeypatch.setattr(loop_tick, "LOOP_TICK", True)
    from .nodes import build_node, single_voter_config

    node = build_node(single_voter_config(tmp_path))
    ready = threading.Event()

    async def main():
        await node.start()
        try:
            node.raft.tick_on(asyncio.get_running_loop(), ready.is_set)
            await wait_until(lambda: node.active, what="a leader with its ticks on the thread")
            assert node.raft.loop_ticker is None
            ready.set()
            internals.wake(node.raft._syncobj)
            await wait_until(lambda: node.raft.loop_ticker is not None, what="the hand-over")
            response = await register(node, 1)
            assert response.error is Errors.NONE
            assert node.raft.loop_ticker.runs > 0
        finally:
            await node.stop(transfer=False)

    asyncio.run(main())
    assert not node.raft.alive


def test_a_tick_due_at_once_then_a_later_wake_keeps_the_sooner_tick_on_uvloop():
    """uvloop's call_at of a time already past gives a plain Handle (no
    ``when()``): asking for a later tick after one due at once keeps the
    one due at once, and it runs (a flapping link found the AttributeError)."""
    import uvloop

    poller = loop_tick.EpollPoller()
    ticks = []

    async def main():
        loop = asyncio.get_running_loop()
        ticker = loop_tick.LoopTicker(loop, ticks.append, lambda: 0.05, poller)
        ticker.start()  # one tick now, the next in 0.05 s (the poll keeps no shorter wait)
        ticker._arm(0.0)
        ticker._arm(0.01)  # later: the tick due at once stays
        await wait_until(lambda: len(ticks) >= 2, timeout_s=5, what="the tick due at once")
        ticker.stop()

    try:
        uvloop.run(main())
    finally:
        poller.close()
    assert ticks[:2] == [0.05, 0.05]
