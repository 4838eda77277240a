"""A leadership handover that does not move leadership holds no write back
(issue 42): the old leader that leads again in a newer term takes writes at
once, and one whose target never stood takes them again after the handover
window, not after the 5 s wait; either way the caller hears the outcome
(TransferNotWon: who leads, in which term).

Three real voters in this process on loopback (pysyncobj and all). Two
things are arranged, never faked away: the TimeoutNow is lost (the leader's
send is replaced by "sent"), and, for the newer term, the followers do not
stand (their election deadline is pushed on at every tick of their own), so
that the old leader is the one the next election elects.
"""

from __future__ import annotations

import asyncio

import pytest
from pysyncobj import FAIL_REASON

from metadata_records.errors import Errors
from quorum.node_errors import TransferNotWon

from .nodes import wait_until
from .test_node import register, start_and_lead, three_voters


def lose_timeout_now(leader, then=lambda: None) -> None:
    """The leader's TimeoutNow never reaches its target; ``then`` runs on the
    tick thread where it would have been sent."""

    def sent_but_lost(address=None):
        then()
        return FAIL_REASON.SUCCESS

    leader.raft.transfer_leadership = sent_but_lost


def never_stand(node) -> None:
    """``node`` does not stand for election: its deadline is pushed on at the
    end of each of its ticks (a heartbeat moves it back to 0.4-0.8 s away,
    still far beyond the next tick)."""
    node.raft.add_tick_callback(lambda: node.raft.stand_no_sooner_than(10.0))


def test_an_old_leader_elected_again_during_a_handover_takes_writes_at_once(tmp_path):
    nodes = three_voters(tmp_path, fsync=False)

    async def main():
        leader = await start_and_lead(nodes)
        try:
            term = leader.raft.term
            for n in nodes:
                if n is not leader:
                    never_stand(n)
            lose_timeout_now(leader, then=leader.raft.step_down)
            seen: dict[str, object] = {}

            async def first_write_of_the_new_term():
                await wait_until(
                    lambda: leader.active and leader.orderer.term > term,
                    timeout_s=30,
                    what="the old leader active again in a newer term",
                )
                seen["transferring"] = leader.orderer.transferring
                seen["answer"] = await register(leader, 7)

            writer = asyncio.ensure_future(first_write_of_the_new_term())
            with pytest.raises(TransferNotWon) as lost:
                await leader.transfer_leadership(None, timeout_s=30)
            assert lost.value.leader_id == leader.node_id and lost.value.term > term
            assert f"leads again in term {lost.value.term}" in str(lost.value)
            await asyncio.wait_for(writer, 30)
            # Active in the new term with nothing held back: the handover of
            # the old term ended when the new term began, not when it timed out.
            assert seen["transferring"] is False
            assert seen["answer"].error is Errors.NONE
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    asyncio.run(main())


def test_a_handover_whose_target_never_stands_ends_within_the_window(tmp_path):
    nodes = three_voters(tmp_path, fsync=False)

    async def main():
        leader = await start_and_lead(nodes)
        try:
            term = leader.raft.term
            lose_timeout_now(leader)
            held_back = asyncio.ensure_future(register(leader, 8))  # queued meanwhile
            with pytest.raises(TransferNotWon) as lost:
                await leader.transfer_leadership(None, timeout_s=30)
            assert (lost.value.leader_id, lost.value.term) == (leader.node_id, term)
            assert "did not stand for election" in str(lost.value)
            assert not leader.orderer.transferring and leader.raft.term == term
            assert (await asyncio.wait_for(held_back, 10)).error is Errors.NONE
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    asyncio.run(main())


def test_the_cli_reports_a_handover_that_did_not_move_and_removes_nothing(tmp_path, capsys):
    """transfer-leadership and remove-voter of the leader, through the real
    app: each handover answers 409 PREFERRED_LEADER_NOT_AVAILABLE naming who
    leads; remove-voter tries HANDOVER_ATTEMPTS times, saying so, then stops
    with exit 1 and removes nothing; writes went on all along."""
    import argparse

    import httpx

    from api.app import create_app
    from brokers.client import MetaquorumClient
    from metaquorum import ops

    nodes = three_voters(tmp_path, fsync=False)

    async def main():
        leader = await start_and_lead(nodes)
        try:
            term = leader.raft.term
            lose_timeout_now(leader)
            http = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=create_app(leader)),
                base_url="http://metaquorum.test",
            )
            console = ops.make_console()
            async with MetaquorumClient(["http://metaquorum.test"], http=http) as client:
                moved = argparse.Namespace(target=None, json=False)
                assert await ops._transfer_leadership(client, moved, console, None) == 1
                removal = argparse.Namespace(node_id=leader.node_id, json=False)
                assert await ops._remove_voter(client, removal, console, None) == 1
            await http.aclose()
            assert (await register(leader, 9)).error is Errors.NONE
            assert {v.voter_id for v in leader.image.voters} == {0, 1, 2}
            assert leader.raft.term == term
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    asyncio.run(main())
    err = capsys.readouterr().err
    assert "PREFERRED_LEADER_NOT_AVAILABLE: the target did not stand for election" in err
    for attempt in range(1, ops.HANDOVER_ATTEMPTS + 1):
        assert f"handover {attempt} of {ops.HANDOVER_ATTEMPTS}: the target did not stand" in err
    assert f"in {ops.HANDOVER_ATTEMPTS} handovers; it still leads and takes writes" in err
    assert "nothing was removed" in err


def test_an_orderer_processs_batches_wait_out_a_handover_and_never_follow_timeout_now(tmp_path):
    """A batch the orderer process proposes while a handover runs (it hears
    of the handover over its link, after such batches) is held: appended if
    this voter still leads the same term afterwards, else answered "not
    proposed". Appended after TimeoutNow it left the target's log behind the
    leader's, and the target lost (bench/leader_removal.py --http-workers 1)."""
    from metadata_records.codec import encode_batch
    from metadata_records.records import Batch

    nodes = three_voters(tmp_path, fsync=False)

    def empty_batch(node) -> bytes:
        return encode_batch(Batch(node.image.controller_epoch, 0, ()))

    async def main():
        leader = await start_and_lead(nodes)
        try:
            lose_timeout_now(leader)  # it still leads once the handover is over
            handover = asyncio.ensure_future(leader.transfer_leadership(None, timeout_s=30))
            await asyncio.sleep(0)  # the handover has begun: it holds
            held = leader.propose_payload(empty_batch(leader))
            with pytest.raises(TransferNotWon):
                await handover
            result, error = await asyncio.wait_for(held, 10)
            assert error == FAIL_REASON.SUCCESS and result is not None and result >= 0

            target = next(n for n in nodes if n is not leader)
            del leader.raft.transfer_leadership  # TimeoutNow is sent again
            handover = asyncio.ensure_future(leader.transfer_leadership(target.node_id))
            await asyncio.sleep(0)
            held = leader.propose_payload(empty_batch(leader))
            assert await handover == target.node_id
            assert await asyncio.wait_for(held, 10) == (None, FAIL_REASON.DISCARDED)
        finally:
            for n in nodes:
                await n.stop(transfer=False)

    asyncio.run(main())
