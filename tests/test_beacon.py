"""Liveness beacons (quorum/raft/beacon.py): sealed with the Raft secret, taken
in order, sent only while the leader's Raft thread ticks; and on three real
voters, a leader whose Raft thread is held past the election timeout (as a
journal sync that stalls on the disk holds it) keeps leading, while one held
past the beacons' stall bound is replaced."""

from __future__ import annotations

import asyncio
import threading
import time

from quorum.raft.beacon import (
    SIZE,
    Beacon,
    BeaconBook,
    BeaconPort,
    BeaconThread,
    beacon_key,
    seal,
    unseal,
)

from .nodes import free_port, wait_until
from .test_node import start_and_lead, three_voters

KEY = beacon_key("0123456789abcdef0123")


def test_only_a_beacon_sealed_with_the_clusters_secret_opens():
    b = Beacon(node_id=3, term=7, seq=42)
    sealed = seal(KEY, b)
    assert len(sealed) == SIZE and unseal(KEY, sealed) == b
    assert unseal(beacon_key("another-secret-of-16+"), sealed) is None
    tampered = bytearray(sealed)
    tampered[6] ^= 1  # the node id
    assert unseal(KEY, bytes(tampered)) is None
    assert unseal(KEY, sealed[:-1]) is None and unseal(KEY, b"x" * SIZE) is None


def test_the_book_takes_each_senders_beacons_in_order_and_by_term():
    book = BeaconBook()
    assert book.take(Beacon(1, 5, 1), now=10.0)
    assert book.heard(1, 5) == 10.0 and book.heard(1, 6) is None and book.heard(2, 5) is None
    assert not book.take(Beacon(1, 5, 1), now=11.0)  # replayed
    assert not book.take(Beacon(1, 4, 99), now=11.0)  # an older term
    assert not book.take(None, now=11.0)  # did not open
    assert book.heard(1, 5) == 10.0 and book.dropped == 3
    assert book.take(Beacon(1, 6, 1), now=12.0)  # a new term starts its sequence again
    assert book.heard(1, 6) == 12.0 and book.heard(1, 5) is None
    assert book.heard(None, 6) is None


def test_a_leader_beacons_while_its_raft_thread_ticks_and_stops_when_it_is_stuck():
    ports = [free_port(), free_port()]
    ticked = {"at": time.monotonic()}
    leading = {"term": 3}
    books = [BeaconBook(), BeaconBook()]
    threads = [
        BeaconThread(
            BeaconPort(
                node_id=i,
                bind=("127.0.0.1", ports[i]),
                peers=lambda i=i: [f"127.0.0.1:{ports[1 - i]}"],
                leading_term=(lambda: leading["term"]) if i == 0 else (lambda: None),
                ticked_at=lambda: ticked["at"],
            ),
            KEY,
            period_s=0.01,
            stall_s=0.3,
            book=books[i],
        ).start()
        for i in range(2)
    ]
    try:
        deadline = time.monotonic() + 10
        while books[1].heard(0, 3) is None:
            assert time.monotonic() < deadline, "no beacon arrived"
            ticked["at"] = time.monotonic()
            time.sleep(0.01)
        assert books[0].received == 0  # a follower sends none
        ticked["at"] = time.monotonic() - 1.0  # the Raft thread stuck past stall_s
        # A round that read the clock before the change may still send: count
        # from the first withheld round, then see several more send nothing.
        _wait_for(lambda: threads[0].withheld > 0, "a withheld beacon")
        sent, withheld = threads[0].sent, threads[0].withheld
        _wait_for(lambda: threads[0].withheld >= withheld + 5, "five more withheld rounds")
        assert threads[0].sent == sent
    finally:
        for t in threads:
            t.stop()


def _wait_for(predicate, what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def _hold_the_tick_thread(node, seconds: float) -> threading.Event:
    """Holds ``node``'s Raft thread once for ``seconds`` (a sleep in a tick
    callback, as a journal sync stalled on the disk would); the event is set
    when it lets go."""
    held = {"done": False}
    released = threading.Event()

    def hold() -> None:
        if not held["done"]:
            held["done"] = True
            time.sleep(seconds)
            released.set()

    node.raft.add_tick_callback(hold)
    return released


def test_a_leader_whose_raft_thread_is_held_past_the_timeout_keeps_leading(tmp_path):
    """1.0 s held: twice the 0.4 s election timeout these voters use, under
    the beacons' 1.6 s stall bound. Its beacons keep both followers from
    standing: the same leader at the same term after it lets go."""
    nodes = three_voters(tmp_path, fsync=False)

    async def body():
        leader = await start_and_lead(nodes)
        term = leader.status().term
        rounds = [n.pre_vote.stats.rounds for n in nodes]
        released = _hold_the_tick_thread(leader, 1.0)
        await asyncio.get_running_loop().run_in_executor(None, released.wait, 30)
        await asyncio.sleep(0.5)  # a follower that stood would have by now
        assert leader.active and leader.status().term == term
        assert all(n.raft_leader_id == leader.node_id for n in nodes)
        assert all(n.status().term == term for n in nodes)
        assert [n.pre_vote.stats.rounds for n in nodes] == rounds  # nobody even asked

    _run(nodes, body)


def test_a_leader_whose_raft_thread_is_stuck_past_the_stall_bound_is_replaced(tmp_path):
    """3 s held: past the 1.6 s bound its beacons stop, and a follower stands
    one timeout later; the old leader follows the new one once it lets go."""
    nodes = three_voters(tmp_path, fsync=False)

    async def body():
        leader = await start_and_lead(nodes)
        others = [n for n in nodes if n is not leader]
        started = time.monotonic()
        released = _hold_the_tick_thread(leader, 3.0)
        await wait_until(lambda: any(n.active for n in others), 20, "a new leader")
        assert time.monotonic() - started < 3.0  # elected while the old one was still held
        await asyncio.get_running_loop().run_in_executor(None, released.wait, 30)
        new = next(n for n in others if n.active)
        await wait_until(
            lambda: leader.raft_leader_id == new.node_id, 20, "the old leader following"
        )

    _run(nodes, body)


def _run(nodes, body) -> None:
    async def main():
        try:
            await asyncio.wait_for(body(), 90)
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    asyncio.run(main())
