"""The leader hands leadership to another voter (Raft's leadership transfer,
§3.10 of the Raft thesis): ``POST /v1/quorum/transfer-leadership``, a leader
that stops, remove-voter of the leader.

As Raft asks, nothing new is proposed while a handover runs, so that the
target catches up with the batch in flight and wins its election: the orderer
stops forming batches (``orderer.transferring``) and the batches an orderer
process proposed meanwhile are held here (``hold``), since no entry may follow
TimeoutNow in this leader's log. The hold lasts no longer than a handover
takes (the minimum election timeout), and ends at once when this voter leads a
newer term (``leading``): then the target lost, and writes flow again. The
outcome is told, never guessed: the new leader, ``TransferNotWon`` when this
voter leads again or still, or None when an election has no winner yet.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from pysyncobj import FAIL_REASON

from .node_errors import TransferNotWon, UnavailableError
from .orderer import fail, reason, settle

if TYPE_CHECKING:
    from .node import QuorumNode


class Handover:
    def __init__(self, node: QuorumNode) -> None:
        self.node = node
        # The Raft term this voter last began to lead (``leading``): how a
        # handover tells that it leads again in a newer term.
        self.led_term = 0
        # The orderer process's batches held while a handover runs (``hold``).
        self._held: list[tuple[bytes, asyncio.Future]] | None = None

    def leading(self, term: int) -> None:
        """This voter began to lead ``term`` (loop thread)."""
        self.led_term = term
        if self.node.orderer.transferring:
            # A handover of an earlier term is over: this voter leads a newer
            # one (its target lost), so its writes flow at once.
            self.node.orderer.transferring = False

    def hold(self, payload: bytes) -> asyncio.Future | None:
        """Holds an orderer process's batch while a handover runs (its future
        is settled when the hold ends); None when none runs."""
        if self._held is None:
            return None
        future = self.node.loop.create_future()
        self._held.append((payload, future))
        return future

    def _release(self, term: int) -> None:
        """The handover is over: the batches held meanwhile go to the log if
        this voter still leads ``term``; else they were not proposed (the
        answer the orderer process knows for that)."""
        node = self.node
        held, self._held = self._held or [], None
        leads = node.raft.is_leader and node.raft.term == term and self.led_term <= term
        for payload, future in held:
            if not leads:
                if not future.done():
                    future.set_result((None, FAIL_REASON.DISCARDED))
                continue
            node.append(payload).add_done_callback(
                lambda done, future=future: future.done() or future.set_result(done.result())
            )

    async def transfer(self, target: int | None, timeout_s: float) -> int | None:
        """Asks Raft to hand leadership to ``target`` (or the most caught-up
        voter); returns the new leader's id, or None if no leader is known
        ``timeout_s`` after the handover was sent. Raises UnavailableError
        when it was refused (the target is not caught up), and its
        TransferNotWon when leadership did not move: this voter leads again
        (the target lost its election, in a newer term) or still (it did not
        stand), and takes writes at once."""
        node = self.node
        if not node.raft.is_leader:
            raise node.not_controller("only the leader can transfer leadership")
        if target is not None:
            voters = node.voter_addresses()
            if target not in voters or target == node.node_id:
                raise ValueError(f"targetNodeId {target} is not another voter")
            address = voters[target]
        else:
            address = None
        term = node.raft.term
        done = node.loop.create_future()
        state = {"settled": False, "denied": 0, "sent_at": None}

        def on_tick():  # transferLeadership is only safe on the tick thread
            # Runs under pysyncobj's tick-callback lock: removing itself here
            # would deadlock the tick thread, so it settles once and is removed later.
            if state["settled"]:
                return
            try:
                error = node.raft.transfer_leadership(address)
            except Exception as e:
                state["settled"] = True
                node.call_on_loop(fail, done, e)
                return
            if error is None:  # pysyncobj answers every call; none reads as sent
                error = FAIL_REASON.SUCCESS
            if error == FAIL_REASON.SUCCESS:
                state["sent_at"] = time.monotonic()
                node.raft.say_step_down("transfer", state["sent_at"])
            if error == FAIL_REASON.REQUEST_DENIED:
                # Denied while the target is not fully caught up: under steady
                # writes it lags by the batch in flight, so try again next tick.
                state["denied"] += 1
                return
            state["settled"] = True
            node.call_on_loop(settle, done, error)

        node.orderer.transferring = True
        holding = self._held is None  # the first of overlapping handovers holds
        if holding:
            self._held = []
        try:
            return await self._await(done, state, on_tick, term, timeout_s)
        finally:
            if holding:
                self._release(term)
            node.orderer.transferring = False
            node.orderer.pump()  # still leading (the transfer failed): the queue goes on

    async def _await(self, done, state, on_tick, term: int, timeout_s: float) -> int | None:
        # A handover needs the target caught up (one round trip: nothing new
        # is proposed), then TimeoutNow and one election, which the target
        # starts at its next tick: each well within the minimum election
        # timeout. Writes are held back no longer than that while this voter
        # still leads ``term``.
        node = self.node
        window_s = node.config.raft_min_timeout
        node.raft.add_tick_callback(on_tick)
        try:
            error = await asyncio.wait_for(done, window_s)
        except TimeoutError:
            error = None
        finally:
            state["settled"] = True
            node.raft.remove_tick_callback(on_tick)
        sent_at = state["sent_at"]
        if sent_at is None:
            if error is None and state["denied"]:
                error = FAIL_REASON.REQUEST_DENIED
            why = f"no answer within {window_s:.1f} s" if error is None else reason(error, None)
            raise UnavailableError(
                f"the transfer was refused ({why}): the target must be "
                "connected and fully caught up; writes went on (retry the transfer)",
                1.0,
            )
        # Leading again is read from the leadership change (``leading``), never
        # from is_leader and term read one after the other: a vote request
        # raises pysyncobj's term before it makes the leader a follower.
        still_leading = 0
        while True:
            leader = node.raft_leader_id
            if leader is not None and leader != node.node_id:
                return leader
            raft, now = node.raft, time.monotonic()
            if self.led_term > term and raft.is_leader:
                raise TransferNotWon(
                    f"the target did not win its election; node {node.node_id} leads "
                    f"again in term {self.led_term} and takes writes (retry the transfer)",
                    node.node_id,
                    self.led_term,
                )
            # Twice in a row: not a read between those two steps.
            still_leading = still_leading + 1 if raft.is_leader and raft.term == term else 0
            if still_leading >= 2 and now - sent_at > window_s:
                raise TransferNotWon(
                    f"the target did not stand for election within {window_s:.1f} s; node "
                    f"{node.node_id} still leads in term {term} and takes writes (retry the "
                    "transfer)",
                    node.node_id,
                    term,
                )
            if now - sent_at > timeout_s:
                return None  # an election without a winner yet: who leads is unknown
            await asyncio.sleep(0.02)
