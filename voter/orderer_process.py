"""The orderer in a process of its own (issue 26: Raft off the ordering core).

With HTTP workers, a voter's serve process keeps Raft (pysyncobj, the
journal, the Raft port's cipher, the disk, membership) and this process
keeps what orders writes (quorum/orderer.Orderer: the controller, its
sessions, group commit), so neither pays for the other's work under one
interpreter lock. It is started, watched and restarted by the serve
process like an HTTP worker (voter/worker_pool.py), over one link
(voter/link.py):

* it follows the committed batches into its own image, as a worker does
  (voter/log_follower.py; its partitions read from the voter's image file,
  voter/shared_image.py); the batches it proposed itself it adopts instead
  of decoding them (``MetadataStateMachine.expect``);
* it proposes each batch as its encoded bytes (PROPOSE) and hears whether
  it committed (the serve process answers after the batches it streams
  before the answer, so this image holds a batch once it hears of it);
* the serve process's STATE says whether it leads and in which term, why it
  refuses writes, where the leader is and which voter set it wants written:
  ``RemoteRaft`` answers the orderer from it;
* each worker has a link of its own to it (decision 122: the serve process
  makes the socket pair and hands this process its end over the fd
  channel): the worker's writes come on it, and the answers go back on it,
  each with the offset its write ends at.

Run as ``python -m voter.orderer_process CONFIG_JSON`` by the serve process only.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import socket
import sys
import time
from typing import Any

from pysyncobj import FAIL_REASON

from controller.config import ControllerConfig
from metadata_records.codec import encode_batch
from metadata_records.delta import ImageDelta
from metadata_records.image import MetadataImage
from metadata_records.records import Batch, Voter
from quorum.callers import Caller
from quorum.node_errors import NodeError, UnavailableError, not_controller, refusal
from quorum.orderer import Orderer, OrderingConfig
from quorum.runtime_tuning import gc_report
from quorum.secret_files import read_secret_file

from .batch_ring import RingFollower
from .link import (
    ANSWER,
    NOTHING_TO_PROPOSE,
    ORDERER,
    PROPOSE,
    REFUSED,
    STATE,
    STEP_DOWN,
    SUBMIT,
    TRANSFERRING,
    FrameProtocol,
    LinkInbox,
    encode_error,
)
from .log_follower import LogFollower

log = logging.getLogger("metaquorum.orderer")

EXIT_LINK_LOST = 3
# A proposal the serve process never took (its link is gone): failed, as
# pysyncobj fails an entry it dropped.
NOT_PROPOSED = (None, FAIL_REASON.DISCARDED)
STATUS_EVERY_S = 0.5  # what the status and metrics read of the orderer, at least this often
STATUS_CHECK_S = 0.02
# The orderer serves no reads: its image's log keeps only the last batch (a
# voter's log of 200,000 records would be held a second time for nothing).
ORDERER_LOG_RETENTION = 1


class RemoteRaft:
    """``RaftSide`` for an orderer in its own process: the serve process's
    Raft, as its link says."""

    def __init__(self, process: OrdererProcess, node_id: int, controller: ControllerConfig):
        self.process = process
        self.node_id = node_id
        self.controller_config = controller

    @property
    def image(self) -> MetadataImage:
        return self.process.sm.image

    def propose(
        self, batch: Batch, known: dict | None = None, view: ImageDelta | None = None
    ) -> asyncio.Future:
        payload = encode_batch(batch)
        self.process.sm.expect(payload, batch, known, view)
        return self.process.call(PROPOSE, payload)

    def leads(self, term: int) -> bool:
        state = self.process.state
        return bool(state.get("leading")) and state.get("term") == term

    def nothing_to_propose(self) -> None:
        self.process.to_core((NOTHING_TO_PROPOSE,))

    def refusal(self) -> NodeError | None:
        state = self.process.state
        if self.process.lost is not None:
            return UnavailableError("this voter's orderer lost its link to Raft", 1.0)
        return refusal(state.get("fatal"), bool(state.get("replaying", True)), state.get("disk"))

    def not_controller(self, why: str) -> NodeError:
        state = self.process.state
        return not_controller(
            why,
            bool(state.get("stopping")),
            self.node_id,
            state.get("leaderId"),
            state.get("leaderUrl"),
        )

    def wanted_voters(self) -> tuple[Voter, ...] | None:
        wanted = self.process.state.get("wantedVoters")
        if wanted is not None and tuple(sorted(wanted)) == self.image.voters:
            return None  # written already: the state says so at its next look
        return wanted

    def stepped_down(self) -> None:
        self.process.report_status()  # the serve process stops streaming to learners


class _WorkerReply:
    """A worker's write: its answer goes back on the link it came on (not to
    the worker's index: a worker started again counts its ids from 0), with
    its offset."""

    __slots__ = ("process", "link", "request_id", "answered")

    def __init__(
        self, process: OrdererProcess, link: FrameProtocol | None, request_id: int
    ) -> None:
        self.process = process
        self.link = link
        self.request_id = request_id
        self.answered = False

    def done(self) -> bool:
        # A write whose worker's link closed before it was decided is not
        # decided at all: its worker told its client the outcome is unknown.
        return self.answered or (self.link is not None and self.link.closed)

    def set_result(self, value: object) -> None:
        self.answered = True
        offset = self.process.sm.image.next_offset
        self.process.to_worker(self.link, (ANSWER, self.request_id, value, offset))

    def set_exception(self, error: BaseException) -> None:
        self.answered = True
        self.process.to_worker(self.link, (REFUSED, self.request_id, encode_error(error)))


class _CoreReply(_WorkerReply):
    """The serve process's own write (a voter set): answered on the link."""

    def set_result(self, value: object) -> None:
        self.answered = True
        self.process.to_core((ANSWER, self.request_id, value))

    def set_exception(self, error: BaseException) -> None:
        self.answered = True
        self.process.to_core((REFUSED, self.request_id, encode_error(error)))


class OrdererProcess:
    def __init__(self, config: dict[str, Any]) -> None:
        # Its image: the committed log followed, its own batches adopted.
        self.follower = LogFollower(
            ORDERER_LOG_RETENTION,
            "the orderer",
            "the orderer",
            self.to_core,
            self._on_lost,
            loaded=self._follow_leadership,
        )
        self.sm = self.follower.sm
        self.state: dict[str, Any] = {}
        self.lost: str | None = None
        self.protocol = FrameProtocol(self._on_items, self._on_lost)
        self.worker_links: dict[int, FrameProtocol] = {}  # by worker index
        self._inbox: LinkInbox | None = None
        controller = ControllerConfig(
            config["clusterId"],
            session_timeout_ms=config["sessionTimeoutMs"],
            leader_imbalance_check_interval_ms=config["leaderImbalanceCheckIntervalMs"],
            delegation_token_secret=_token_secret(config.get("delegationTokenSecretFile")),
            delegation_token_max_lifetime_ms=config["delegationTokens"]["maxLifetimeMs"],
            delegation_token_expiry_time_ms=config["delegationTokens"]["expiryTimeMs"],
            delegation_token_expiry_check_interval_ms=config["delegationTokens"][
                "expiryCheckIntervalMs"
            ],
        )
        self.raft = RemoteRaft(self, config["nodeId"], controller)
        self.orderer = Orderer(self.raft, OrderingConfig(**config["ordering"]))
        self._ids = itertools.count()
        self._calls: dict[int, asyncio.Future] = {}
        self._to_core: list = []
        self._to_workers: dict[FrameProtocol, list] = {}
        self._flush_pending = False
        # The last term this orderer started ordering in (or was told to
        # leave): a term is started once, whatever the state says after.
        self._term_seen: int | None = None
        self._leading = False  # the serve process led, as last heard
        self._done = asyncio.Event()
        self._status_sent: tuple | None = None
        self.submitted: dict[int, int] = {}  # writes sent to it, by worker

    async def run(
        self,
        sock: socket.socket,
        channel: socket.socket | None = None,
        ring_fd: int | None = None,
    ) -> int:
        """``sock``: the link to the serve process; ``channel``: the fd channel
        the workers' links come over (none: no worker writes here);
        ``ring_fd``: the serve process's batch ring (voter/batch_ring.py)."""
        loop = asyncio.get_running_loop()
        self.orderer.loop = loop
        if ring_fd is not None:
            self.follower.follow_ring(ring_fd)
        await loop.create_unix_connection(lambda: self.protocol, sock=sock)
        if channel is not None:
            self._inbox = LinkInbox(channel, self._on_worker_link)
            self._inbox.start()
        reporter = asyncio.ensure_future(self._report_status())
        try:
            await self._done.wait()
        finally:
            reporter.cancel()
            self.follower.stop()
            self.orderer.step_down("this voter's orderer is stopping")
        return EXIT_LINK_LOST if self.lost is not None else 0

    def stop(self) -> None:
        self._done.set()

    @property
    def ring(self) -> RingFollower | None:
        return self.follower.ring

    # ---------------------------------------------------------------- out

    def call(self, kind: str, *args: Any) -> asyncio.Future:
        """An item the serve process answers (ANSWER / REFUSED)."""
        future = asyncio.get_running_loop().create_future()
        if self.lost is not None:
            future.set_result(NOT_PROPOSED)
            return future
        request_id = next(self._ids)
        self._calls[request_id] = future
        self.to_core((kind, request_id, *args))
        return future

    def to_core(self, item: tuple) -> None:
        self._to_core.append(item)
        self._wake()

    def to_worker(self, link: FrameProtocol, item: tuple) -> None:
        self._to_workers.setdefault(link, []).append(item)
        self._wake()

    def _wake(self) -> None:
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if self._to_core:
            items, self._to_core = self._to_core, []
            self.protocol.send(items)
        if self._to_workers:
            outboxes, self._to_workers = self._to_workers, {}
            for link, items in outboxes.items():
                link.send(items)  # a link closed meanwhile drops them: its worker
                # failed what it sent there (an unknown outcome), or is gone

    def report_status(self) -> None:
        orderer = self.orderer
        status = {
            "active": orderer.active,
            "term": orderer.term,
            "queueDepth": orderer.queue_depth,
            "throttled": orderer.throttled,
            "votersChangePending": orderer.voters_change_pending,
            "stats": orderer.stats,
            "submitted": dict(self.submitted),
            "gc": gc_report(),
            "imageRebases": self.sm.file_rebases,
        }
        self._status_sent = (self._status_key(), time.monotonic())
        self.to_core((ORDERER, status))

    def _status_key(self) -> tuple:
        orderer = self.orderer
        return (orderer.active, orderer.term, orderer.throttled, orderer.voters_change_pending)

    async def _report_status(self) -> None:
        """On a change of role (within STATUS_CHECK_S), and every STATUS_EVERY_S."""
        while True:
            await asyncio.sleep(STATUS_CHECK_S)
            sent = self._status_sent
            if (
                sent is None
                or sent[0] != self._status_key()
                or time.monotonic() - sent[1] >= STATUS_EVERY_S
            ):
                self.report_status()

    # ---------------------------------------------------------------- in

    def _on_items(self, items: list) -> None:
        submitted = False
        for item in items:
            kind = item[0]
            if self.follower.take(item):
                continue
            if kind == ANSWER or kind == REFUSED:
                self.follower.poll()  # a proposal is answered once its batch is in the ring
                future = self._calls.pop(item[1], None)
                if future is not None and not future.done():
                    # A proposal's (result, error); a refusal means it was not proposed.
                    future.set_result(item[2] if kind == ANSWER else NOT_PROPOSED)
            elif kind == STATE:
                self.state = item[1]
                self.sm.fatal = item[1].get("fatal")
                self._follow_leadership()
            elif kind == SUBMIT:
                self._submit(item[2], _CoreReply(self, None, item[1]), item[3])
                submitted = True
            elif kind == STEP_DOWN:
                self.orderer.step_down(item[1])
            elif kind == TRANSFERRING:
                self.orderer.transferring = item[1]
                if not item[1]:
                    submitted = True
        if submitted:
            self.orderer.pump()

    def _on_worker_link(self, worker: int, sock: socket.socket) -> None:
        """Worker ``worker``'s link, from the serve process (the worker or
        this process started)."""
        if self.lost is not None:
            sock.close()
            return
        asyncio.ensure_future(self._adopt_worker_link(worker, sock))

    async def _adopt_worker_link(self, worker: int, sock: socket.socket) -> None:
        def lost(_why: str) -> None:
            if self.worker_links.get(worker) is protocol:
                del self.worker_links[worker]

        protocol = FrameProtocol(lambda items: self._on_worker_items(worker, protocol, items), lost)
        await asyncio.get_running_loop().create_unix_connection(lambda: protocol, sock=sock)
        if self.lost is not None or protocol.closed:
            protocol.transport.close()
            return
        old = self.worker_links.get(worker)
        self.worker_links[worker] = protocol
        if old is not None and old.transport is not None:  # that worker was started again
            old.transport.close()

    def _on_worker_items(self, worker: int, link: FrameProtocol, items: list) -> None:
        submitted = 0
        for item in items:
            if item[0] == SUBMIT:
                submitted += 1
                self._submit(item[2], _WorkerReply(self, link, item[1]), item[3])
        self.submitted[worker] = self.submitted.get(worker, 0) + submitted
        self.orderer.pump()

    def _submit(self, request: object, reply: _WorkerReply, caller: Caller | None) -> None:
        try:
            self.orderer.submit_to(request, reply, False, caller)
        except Exception as e:  # noqa: BLE001 - a NodeError, answered as such
            reply.set_exception(e)

    def _follow_leadership(self) -> None:
        """Starts ordering when the serve process leads a term this orderer
        has not started yet; stops when it no longer leads."""
        state = self.state
        term = state.get("term")
        leading = bool(state.get("leading")) and not state.get("stopping")
        was, self._leading = self._leading, leading
        if leading:
            if self._term_seen != term and self.follower.has_image.is_set():
                self._term_seen = term
                asyncio.ensure_future(self.orderer.become_active(term))
        elif was:
            self.orderer.step_down(
                "leadership moved to another voter"
                if state.get("leaderId") is not None
                else "this voter stopped leading and no other leader is known yet"
            )

    def _on_lost(self, why: str) -> None:
        if self.lost is not None:
            return
        self.lost = why
        log.error("the orderer lost its link to the voter's serve process: %s", why)
        for future in self._calls.values():
            if not future.done():
                future.set_result(NOT_PROPOSED)
        self._calls.clear()
        if self.protocol.transport is not None:
            self.protocol.transport.close()
        if self._inbox is not None:
            self._inbox.close()
        for link in list(self.worker_links.values()):
            if link.transport is not None:
                link.transport.close()
        self._done.set()


def _token_secret(path: str | None) -> str | None:
    """The delegation tokens' secret, read from the file the core read it
    from (never sent: this process's config is its command line)."""
    return None if path is None else read_secret_file(path, "--delegation-token-secret-file")


def orderer_main(config: dict[str, Any]) -> int:
    from .worker_pool import _die_with_parent  # noqa: PLC0415

    _die_with_parent(config["parentPid"])
    logging.basicConfig(
        level=str(config["logLevel"]).upper(),
        format="%(asctime)s %(levelname)s %(name)s[orderer]: %(message)s",
    )
    import signal  # noqa: PLC0415

    import uvloop  # noqa: PLC0415

    from quorum.runtime_tuning import (
        long_lived_entries,
        manage_collector,
        tune_runtime,
        watch_pauses,
    )  # noqa: PLC0415

    tune_runtime()  # as the serve process: the collector and malloc tuned
    watch_pauses()

    async def serve() -> int:
        process = OrdererProcess(config)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, process.stop)
        loop.add_signal_handler(signal.SIGINT, lambda: None)  # the serve process stops us
        channel = config.get("fdChannelFd")
        collector = asyncio.ensure_future(
            manage_collector(
                process.follower.has_image.is_set, lambda: long_lived_entries(process.sm.image)
            )
        )
        try:
            return await process.run(
                socket.socket(fileno=config["linkFd"]),
                None if channel is None else socket.socket(fileno=channel),
                config.get("ringFd"),
            )
        finally:
            collector.cancel()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(serve())


if __name__ == "__main__":
    sys.exit(orderer_main(json.loads(sys.argv[1])))
