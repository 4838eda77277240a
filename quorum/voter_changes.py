"""The active controller's voter changes: add-voter and remove-voter
(quorum/membership.py rules 4-5), one at a time.

A change runs as a task of its own, so a client that gives up does not cut it
in half; a retry (after a lost answer or a leader change) finishes what is
left: it answers at once if the set already is what was asked, and joins the
same add in progress. An added node is streamed the log as a learner until it
holds what was committed, then the new set is written through group commit; a
removed one is streamed to until it holds the set without it, so that it
learns of its removal and stops standing for election.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from metadata_records.errors import ApiError, Errors
from metadata_records.records import Voter, VotersRecord

from . import callers
from .callers import Caller
from .membership import (
    addresses,
    already_added,
    check_add,
    check_remove,
    describe,
    lagging,
    misspelled,
    parse_address,
    with_voter,
    without_voter,
)
from .node_errors import MembershipRefused, OutcomeUnknownError, UnavailableError

if TYPE_CHECKING:
    from .node import QuorumNode

log = logging.getLogger(__name__)

# How long the leader keeps streaming to a removed voter so that it learns of
# its removal (and stops standing for election) before it is dropped.
LEAVE_GRACE_S = 5.0


class VoterChanges:
    def __init__(self, node: QuorumNode) -> None:
        self.node = node
        # The voter change this leader is making ((kind, node id, address), its task).
        self._change: tuple | None = None
        self._change_task: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        return self._change is not None

    def _in_flight(self) -> str | None:
        """The voter change being made, described, or None (one at a time)."""
        if self._change is not None:
            kind, node_id, address = self._change
            return f"{'adding' if kind == 'add' else 'removing'} node {node_id} at {address}"
        if self.node.orderer.voters_change_pending:
            return "the leader is writing the voter set (a voter's new directory)"
        return None

    def _require_active(self, what: str) -> None:
        node = self.node
        if node.sm.fatal is not None:
            raise UnavailableError(f"this node refuses to serve: {node.sm.fatal}", 30.0)
        if not node.active:
            raise node.not_controller(f"only the active controller can {what}")

    async def add(self, node_id: int, address: str, timeout_s: float) -> tuple[Voter, bool]:
        """Adds ``node_id`` at Raft ``address`` to the voter set (rule 4);
        returns the voter and whether this call changed the set. Raises
        MembershipRefused."""
        self._require_active("add a voter")
        host, port = parse_address(address, "address")
        address = f"{host}:{port}"
        voters = self.node.image.voters
        done = already_added(voters, node_id, address)
        if done is not None:
            return done, False
        if self._change == ("add", node_id, address) and self._change_task is not None:
            return await asyncio.shield(self._change_task)
        refused = check_add(voters, node_id, address, self._in_flight())
        if refused is None and not self.node.config.raft_secret:
            refused = ApiError(
                Errors.INVALID_REQUEST,
                "this voter runs without --raft-secret-file, so no other node can reach its "
                "Raft port: restart it with one before adding voters",
            )
        if refused is not None:
            raise MembershipRefused(refused)
        change = ("add", node_id, address)
        return await self._run(change, self._add(node_id, host, port, address, timeout_s))

    async def remove(self, node_id: int) -> tuple[Voter, ...]:
        """Removes ``node_id`` from the voter set (rule 5); returns the new set."""
        self._require_active("remove a voter")
        node = self.node
        voters = node.image.voters
        raft = node.raft_status()
        book = addresses(voters)
        connected = {
            nid
            for nid, addr in book.items()
            if node.guard.counts(nid) and raft.get(f"partner_node_status_server_{addr}") == 2
        }
        refused = check_remove(voters, node_id, node.node_id, connected, self._in_flight())
        if refused is not None:
            raise MembershipRefused(refused)
        change = ("remove", node_id, book[node_id])
        return await self._run(change, self._remove(node_id, book[node_id]))

    async def _run(self, change: tuple, work) -> object:
        """Runs one voter change as a task of its own: a client that gives up
        does not cut it in half, and a retry of the same add joins it."""
        self._change = change
        task = self._change_task = asyncio.ensure_future(work)
        guard = self.node.guard

        def finished(_: asyncio.Task) -> None:
            if self._change_task is task:
                self._change, self._change_task = None, None
            guard.learners = {k: v for k, v in guard.learners.items() if k != change[1]}

        task.add_done_callback(finished)
        return await asyncio.shield(task)

    async def _add(
        self, node_id: int, host: str, port: int, address: str, timeout_s: float
    ) -> tuple[Voter, bool]:
        node = self.node
        guard, raft = node.guard, node.raft
        guard.learners = {**guard.learners, node_id: address}  # the tick thread connects it
        log.info("adding node %d at %s: streaming the log to it", node_id, address)
        deadline = time.monotonic() + timeout_s
        target = raft.commit_index
        while True:
            self._require_active("add a voter")
            hello, held = guard.peers.get(node_id), guard.progress.get(node_id, 0)
            if hello is not None and (wrong := misspelled(node_id, address, hello.address)):
                raise MembershipRefused(wrong)
            if hello is not None and held >= target:
                break  # it holds what was committed a moment ago
            if time.monotonic() > deadline:
                raise MembershipRefused(
                    lagging(node_id, address, hello is not None, held, raft.commit_index)
                )
            target = raft.commit_index
            await asyncio.sleep(0.05)
        voter = Voter(node_id, hello.directory_id, host, port)
        await self._write_voters(with_voter(node.image.voters, voter), timeout_s, callers.ADD_VOTER)
        return voter, True

    async def _remove(self, node_id: int, address: str) -> tuple[Voter, ...]:
        node = self.node
        guard = node.guard
        # Still streamed to once the set without it applies here, until it holds it.
        guard.learners = {**guard.learners, node_id: address}
        wanted = without_voter(node.image.voters, node_id)
        await self._write_voters(wanted, 10.0, callers.REMOVE_VOTER)
        index = node.raft.last_applied  # the record's entry is at or below it
        deadline = time.monotonic() + LEAVE_GRACE_S
        while time.monotonic() < deadline and guard.peers.get(node_id) is not None:
            if guard.progress.get(node_id, 0) >= index:
                # It holds the record; the next heartbeat tells it the record committed.
                await asyncio.sleep(0.3)
                break
            await asyncio.sleep(0.05)
        return wanted

    async def _write_voters(
        self, wanted: tuple[Voter, ...], timeout_s: float, caller: Caller
    ) -> None:
        """Commits a VotersRecord through group commit; returns once it is applied here."""
        log.info("writing the voter set %s", describe(wanted))
        future = self.node.loop.create_future()
        self.node.orderer.enqueue(VotersRecord(voters=wanted), future, caller)
        try:
            await asyncio.wait_for(asyncio.shield(future), max(timeout_s, 5.0))
        except TimeoutError:
            raise OutcomeUnknownError(
                "the voter set did not commit in time; it may still commit (retry: a "
                "retried change finishes what is left)"
            ) from None
