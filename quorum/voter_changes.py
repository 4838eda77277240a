"""The active controller's voter changes: add-voter, remove-voter and
update-voter (quorum/membership.py rules 4-6), one at a time.

A change runs as a task of its own, so a client that gives up does not cut it
in half; a retry (after a lost answer or a leader change) finishes what is
left: it answers at once if the set already is what was asked, and joins the
same add in progress. An added node is streamed the log as a learner until it
holds what was committed, then the new set is written through group commit; a
removed one is streamed to until it holds the set without it, so that it
learns of its removal and stops standing for election. An updated voter's
new address is written at once (the node is already a voter and holds the
log; it catches up at its new address once the record applies).
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
from .log_limiter import RateLimitedLog
from .membership import (
    addresses,
    already_added,
    check_add,
    check_remove,
    check_update,
    describe,
    lagging,
    misspelled,
    parse_address,
    updated,
    with_voter,
    without_voter,
)
from .node_errors import MembershipRefused, NodeError, OutcomeUnknownError, UnavailableError

if TYPE_CHECKING:
    from .node import QuorumNode

log = logging.getLogger(__name__)
# A moved voter asks once a second until it is moved: a refusal is logged a
# few times a minute, not every second.
_asks_log = RateLimitedLog(log, 30.0, burst=2)

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
            verb = {"add": "adding", "remove": "removing", "update": "moving"}[kind]
            return f"{verb} node {node_id} {'to' if kind == 'update' else 'at'} {address}"
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

    async def update(
        self,
        node_id: int,
        directory_id: str | None,
        address: str,
        kraft_versions: tuple[int, int] = (0, 1),
        timeout_s: float = 10.0,
        cluster_id: str | None = None,
    ) -> tuple[tuple[Voter, ...], bool]:
        """Moves voter ``node_id`` (directory ``directory_id``) to Raft
        ``address``, its directory id kept (rule 6, Kafka's UpdateRaftVoter);
        returns the voter set and whether this call changed it. Raises
        MembershipRefused (with the refusal's rule id), having written nothing.
        ``cluster_id``: the asking voter's, when it asks itself (Raft port)."""
        node = self.node
        if node.sm.fatal is not None:
            raise UnavailableError(f"this node refuses to serve: {node.sm.fatal}", 30.0)
        if node.raft_leader_id != node.node_id:
            raise node.not_controller("only the active controller can update a voter")
        try:
            host, port = parse_address(address, "raftAddress")
            address = f"{host}:{port}"
        except ValueError:
            host, port = "", 0  # check_update refuses it, with its rule
        voters = node.image.voters
        for v in voters:
            if (
                v.voter_id == node_id
                and v.voter_directory_id == directory_id
                and (v.host, v.port) == (host, port)
                and 0 <= kraft_versions[0] <= 1 <= kraft_versions[1]
            ):
                return voters, False  # done already: a retry, or a voter that restarted twice
        if self._change == ("update", node_id, address) and self._change_task is not None:
            return await asyncio.shield(self._change_task)  # the same move, asked again
        refused = check_update(
            voters,
            node_id,
            directory_id,
            address,
            committed_in_term=node.active,
            change=None if self._change is None else self._in_flight(),
            set_uncommitted=node.orderer.voters_change_pending,
            kraft_versions=kraft_versions,
            cluster_ids=None if cluster_id is None else (cluster_id, node.cluster_id),
            running_at=None if cluster_id is not None else self._running_at(node_id, directory_id),
        )
        if refused is not None:
            raise MembershipRefused(refused)
        change = ("update", node_id, address)
        return await self._run(change, self._update(node_id, host, port, timeout_s))

    # ---------------------------------------------- a voter's own ask, over the Raft port

    def own_ask(self) -> dict | None:
        """Tick thread: what this voter asks the voters it lists while its Raft
        address is not the one the voter set names (restarted elsewhere with
        its data dir), or None. A leader in that state moves itself."""
        node = self.node
        request = node.guard.update_request()
        if request is not None and node.raft_leader_id == node.node_id:
            node.call_on_loop(self._asked, request)
            return None
        return request

    def answer_ask(self, payload: dict) -> dict:
        """Tick thread: the answer to another voter's ask to be moved. The
        leader takes it and makes the change on its loop; a follower names
        the leader it knows (the asker asks every voter it lists)."""
        leader = self.node.raft_leader_id
        if leader != self.node.node_id:
            return {"errorName": "NOT_LEADER_OR_FOLLOWER", "leaderId": leader}
        self.node.call_on_loop(self._asked, payload)
        return {"errorName": "NONE", "accepted": True, "leaderId": leader}

    def _asked(self, payload: dict) -> None:  # loop thread
        asyncio.ensure_future(self._update_asked(payload))

    async def _update_asked(self, payload: dict) -> None:
        try:
            node_id = int(payload["nodeId"])
            directory_id = str(payload["directoryId"])
            address = str(payload["raftAddress"])
            low, high = (int(x) for x in payload["kraftVersion"])
            cluster_id = str(payload["clusterId"])
        except (KeyError, TypeError, ValueError) as e:
            _asks_log.warning("a voter's update-voter request is malformed (%r): %s", e, payload)
            return
        try:
            voters, changed = await self.update(
                node_id, directory_id, address, (low, high), cluster_id=cluster_id
            )
        except MembershipRefused as e:
            _asks_log.warning(
                "node %d asked to move to %s: refused (%s, rule %s): %s",
                node_id, address, e.error.name, e.rule, e,
            )  # fmt: skip
            return
        except NodeError as e:
            _asks_log.info("node %d asked to move to %s: not now: %s", node_id, address, e)
            return
        if changed:
            log.info(
                "moved node %d to %s at its own ask: voters %s", node_id, address, describe(voters)
            )

    def _running_at(self, node_id: int, directory_id: str | None) -> str | None:
        """The address voter ``node_id`` calls itself while it is connected to
        this leader with ``directory_id`` (its hello; this leader's own), or None."""
        guard = self.node.guard
        if node_id == self.node.node_id:
            return guard.addresses.get(node_id) if directory_id == guard.directory_id else None
        hello = guard.peers.get(node_id)
        if hello is None or hello.directory_id != directory_id:
            return None
        return hello.address

    async def _update(
        self, node_id: int, host: str, port: int, timeout_s: float
    ) -> tuple[tuple[Voter, ...], bool]:
        wanted = updated(self.node.image.voters, node_id, host, port)
        await self._write_voters(wanted, timeout_s, callers.UPDATE_VOTER)
        return wanted, True

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
