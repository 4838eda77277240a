"""An HTTP worker's view of its voter (the worker's end of voter/link.py).

The worker's app (``create_app``) takes a ``WorkerNode`` where a single
process gives it the ``QuorumNode``: writes and linearizable barriers go to
the core over the link, reads come from the image this worker follows (the
committed batches the core streams to it, as an observer follows a leader),
and what needs the core's own state (status, metrics, probes, voter changes)
is forwarded to the core's app whole (``FORWARDED``), by ``ForwardToCore``:
the innermost middleware of the worker's app (``create_app``'s
``inner_middleware``, voter/worker_pool.py), so that api/ knows nothing of
workers. The image is followed by voter/log_follower.py.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from api.edge import REQUEST_ID_KEY
from api.errors import JsonResponse, node_error_response, retry_after
from api.tls import PEER_CERT, peer_certificate
from quorum.callers import Caller
from quorum.history_images import HistoryReader
from quorum.node_errors import NodeError, OutcomeUnknownError, UnavailableError
from quorum.offset_waiters import OffsetWaiters

from .batch_ring import RingFollower
from .link import (
    ANSWER,
    BARRIER,
    FORWARD,
    REFUSED,
    STATE,
    STATS,
    SUBMIT,
    FrameProtocol,
    LinkInbox,
    decode_error,
)
from .log_follower import LogFollower

log = logging.getLogger(__name__)

# Answered by the core's own app: they read the core's state (Raft, the
# controller, the voter set, every worker's counters).
FORWARDED = frozenset(
    {
        "/livez",
        "/readyz",
        "/metrics",
        "/v1/quorum/status",
        "/v1/quorum/transfer-leadership",
        "/v1/quorum/add-voter",
        "/v1/quorum/remove-voter",
        "/v1/quorum/update-voter",
    }
)
# A write the core has not answered within this long may still commit; the
# core's own deadline (QuorumNode.submit's 10 s) comes first.
SUBMIT_TIMEOUT_S = 11.0
FORWARD_TIMEOUT_S = 120.0  # a voter change streams a whole log first
PROBE_TIMEOUT_S = 5.0  # probes, status and metrics: a frozen core must not hold them
QUICK_PATHS = frozenset({"/livez", "/readyz", "/metrics", "/v1/quorum/status"})
# The core says something at least every second (core_link.STATE_AT_LEAST_S):
# silent this long, it is frozen or overloaded, and this worker's image may
# be behind without knowing it. Reads are refused, as a stopped single
# process would not answer them either.
CORE_SILENT_S = 3.0
# Calls past their deadline are failed by one sweep this often, not by a
# timer per call (asyncio.wait_for cost a worker ~6% of its time under load).
DEADLINE_SWEEP_S = 0.25


class WorkerNode:
    """Quacks like QuorumNode where the app reads it: ``image``, ``sm``
    (the followed image's state machine and log), ``submit``, ``barrier``,
    ``wait_for_offset``, ``replaying``, ``raft_alive``, ``node_id``."""

    def __init__(
        self, node_id: int, index: int, log_retention: int = 200_000, cluster_id: str = ""
    ) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.index = index
        # With an fd channel (``connect``), writes go to the voter's orderer
        # process over a link of their own, instead of to the core.
        self._inbox: LinkInbox | None = None
        self.orderer_link: FrameProtocol | None = None  # None: none yet, or it closed
        # The image this worker's reads come from: the committed log, followed.
        self.follower = LogFollower(
            log_retention,
            "this worker",
            f"HTTP worker {index}",
            self._send_core,
            self._on_lost,
            applied=self._applied,
            loaded=self._loaded,
        )
        self.sm = self.follower.sm
        # The voter's history store, read from its files (GET /v1/image?atOffset=).
        self.history: HistoryReader | None = None
        self.protocol = FrameProtocol(self._on_items, self._on_lost)
        self.state: dict[str, Any] = {
            "ready": False,
            "reason": "this HTTP worker has not heard from its voter's core yet",
            "fatal": None,
            "replaying": True,
            "raftAlive": True,
            "leaderId": None,
            "leaderUrl": None,
            "active": False,
        }
        self.lost: str | None = None
        self.heard_at = time.monotonic()  # the core's last frame
        self.on_lost: Callable[[str], None] | None = None
        self._ids = itertools.count()
        # request id -> (its future, "submit", "write" (forwarded) or "read", its deadline,
        # the error then)
        self._waiting: dict[int, tuple[asyncio.Future, str, float, Callable[[], Exception]]] = {}
        self._sweeper: asyncio.TimerHandle | None = None
        self._outbox: list = []
        self._to_orderer: list = []  # SUBMIT items for the orderer process
        self._flush_pending = False
        # Answers whose write ends past this image: (offset, future, value,
        # deadline), answered as the image reaches them.
        self._early: list[tuple[int, asyncio.Future, object, float]] = []
        self._waiters = OffsetWaiters()

    async def connect(
        self,
        sock: socket.socket,
        channel: socket.socket | None = None,
        ring_fd: int | None = None,
    ) -> None:
        """``sock``: this worker's end of its link to the core; ``channel``:
        its fd channel, with an orderer process (its links to it come there);
        ``ring_fd``: the core's batch ring (voter/batch_ring.py), if it has one."""
        loop = asyncio.get_running_loop()
        if ring_fd is not None:
            self.follower.follow_ring(ring_fd)
        await loop.create_unix_connection(lambda: self.protocol, sock=sock)
        self._sweeper = loop.call_later(DEADLINE_SWEEP_S, self._sweep_deadlines)
        if channel is not None:
            self._inbox = LinkInbox(channel, self._on_orderer_link)
            self._inbox.start()

    async def wait_for_image(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self.follower.has_image.wait(), timeout_s)
            return True
        except TimeoutError:
            return False

    # ---------------------------------------------------------------- what the app reads

    @property
    def image(self):
        return self.sm.image

    @property
    def ring(self) -> RingFollower | None:
        return self.follower.ring

    @property
    def replaying(self) -> bool:
        return not self.follower.has_image.is_set() or bool(self.state["replaying"])

    @property
    def raft_alive(self) -> bool:
        return self.lost is None and bool(self.state["raftAlive"]) and not self._core_silent()

    def _core_silent(self) -> float | None:
        silent = time.monotonic() - self.heard_at
        return silent if silent > CORE_SILENT_S else None

    @property
    def ready(self) -> bool:
        return self.explain_not_ready() is None

    def explain_not_ready(self) -> str | None:
        """reads.not_ready_reason for a worker: the core's reason, or this
        worker's own (its link, its image)."""
        if self.lost is not None:
            return f"this HTTP worker lost its link to the voter's core: {self.lost}"
        if not self.follower.has_image.is_set():
            return "this HTTP worker is still loading the image from its voter's core"
        if (silent := self._core_silent()) is not None:
            return (
                f"this voter's core has not answered its HTTP worker for {silent:.1f} s "
                "(frozen or overloaded): its reads could be behind without knowing it"
            )
        return self.state["reason"]

    # ---------------------------------------------------------------- calls to the core

    def _call(
        self,
        item_kind: str,
        *args: Any,
        what: str,
        timeout_s: float,
        late: Callable[[], Exception],
    ) -> asyncio.Future:
        """Sends one item; its future is failed with ``late()`` if the core has
        not answered within ``timeout_s`` (give or take DEADLINE_SWEEP_S)."""
        if self.lost is not None:
            raise UnavailableError(
                f"this HTTP worker lost its link to the voter's core ({self.lost}); "
                "it is being restarted: retry",
                1.0,
            )
        to_orderer = item_kind == SUBMIT and self._inbox is not None
        if to_orderer and self.orderer_link is None:
            raise UnavailableError(
                "this voter's orderer process is starting again; nothing was written: retry",
                1.0,
            )
        request_id = next(self._ids)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._waiting[request_id] = (future, what, loop.time() + timeout_s, late)
        if to_orderer:
            self._to_orderer.append((item_kind, request_id, *args))
        else:
            self._outbox.append((item_kind, request_id, *args))
        if not self._flush_pending:
            self._flush_pending = True
            loop.call_soon(self._flush)
        return future

    def _sweep_deadlines(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        late = [
            (request_id, entry)
            for request_id, entry in self._waiting.items()
            if entry[0].done() or entry[2] <= now
        ]
        for request_id, (future, _, _, error) in late:
            del self._waiting[request_id]
            if not future.done():
                future.set_exception(error())
        if self._early and any(entry[3] <= now for entry in self._early):
            for entry in self._early:
                if entry[3] <= now and not entry[1].done():
                    entry[1].set_exception(
                        OutcomeUnknownError(
                            "the write committed, but this HTTP worker's image did not reach "
                            "it in time"
                        )
                    )
            self._early = [entry for entry in self._early if entry[3] > now]
        self._sweeper = loop.call_later(DEADLINE_SWEEP_S, self._sweep_deadlines)

    def _flush(self) -> None:
        self._flush_pending = False
        if self._outbox:
            items, self._outbox = self._outbox, []
            self.protocol.send(items)
        if self._to_orderer:
            items, self._to_orderer = self._to_orderer, []
            self.orderer_link.send(items)  # not None: losing it cleared the list

    async def submit(
        self, request: object, timeout_s: float = SUBMIT_TIMEOUT_S, caller: Caller | None = None
    ) -> object:
        if (silent := self._core_silent()) is not None:  # refused before it is sent
            raise UnavailableError(
                f"this voter's core has not answered for {silent:.1f} s (frozen or "
                "overloaded); nothing was written: retry, another voter may lead by then",
                1.0,
            )
        return await self._call(
            SUBMIT,
            request,
            caller,
            what="submit",
            timeout_s=timeout_s,
            late=lambda: OutcomeUnknownError(
                f"no answer from the voter's core within {timeout_s:.1f} s; the write may "
                "still commit"
            ),
        )

    async def barrier(self, timeout_s: float = 5.0) -> int:
        """The core's barrier offset, once this worker's image holds it."""
        deadline = time.monotonic() + timeout_s
        offset = await self._call(
            BARRIER,
            what="read",
            timeout_s=timeout_s,
            late=lambda: UnavailableError("the read barrier did not commit in time", 0.5),
        )
        if not await self.wait_for_offset(offset, max(0.0, deadline - time.monotonic())):
            raise UnavailableError(
                "this HTTP worker's image did not reach the read barrier in time", 0.5
            )
        return offset

    async def forward(self, head: dict[str, Any], body: bytes) -> tuple[int, list, bytes]:
        what = "read" if head["method"] in ("GET", "HEAD") else "write"
        timeout_s = PROBE_TIMEOUT_S if head["path"] in QUICK_PATHS else FORWARD_TIMEOUT_S

        def late() -> Exception:
            if what == "write":
                return OutcomeUnknownError(
                    f"this voter's core did not answer within {timeout_s:.0f} s; the change "
                    "may still be made"
                )
            return UnavailableError(
                f"this voter's core did not answer within {timeout_s:.0f} s (frozen or overloaded)",
                1.0,
            )

        return await self._call(FORWARD, head, body, what=what, timeout_s=timeout_s, late=late)

    def send_stats(self, counters: dict[str, Any]) -> None:
        if self.lost is None:
            self.protocol.send([(STATS, counters)])

    # ---------------------------------------------------------------- the followed image

    async def wait_for_offset(self, offset: int, timeout_s: float) -> bool:
        """Waits until this worker's image reaches ``offset`` (exclusive end)."""
        if offset > self.sm.image.next_offset:
            self.follower.poll()  # a barrier's answer: its batch is in the ring already
        return await self._waiters.wait(
            offset, timeout_s, lambda: self.sm.image.next_offset, lambda: self.lost is not None
        )

    def _loaded(self) -> None:
        self._waiters.wake()
        if self._early:  # answers whose writes an image sent again now holds
            self._answer_reached()

    def _send_core(self, item: tuple) -> None:
        if self.lost is None:
            self.protocol.send([item])

    def _applied(self) -> None:
        self._waiters.wake()
        if self._early:
            self._answer_reached()

    def _answer_reached(self) -> None:
        """The orderer's answers whose writes this image now holds: a client
        that reads here after its write sees it."""
        reached = self.sm.image.next_offset
        early = []
        for entry in self._early:
            if entry[0] > reached:
                early.append(entry)
            elif not entry[1].done():
                entry[1].set_result(entry[2])
        self._early = early

    # ---------------------------------------------------------------- in

    def _on_items(self, items: list) -> None:
        self.heard_at = time.monotonic()
        for item in items:
            kind = item[0]
            if kind == ANSWER or kind == REFUSED:
                self._settle(item)
            elif kind == STATE:
                self.state = item[1]
                self.sm.fatal = item[1]["fatal"]
            else:
                self.follower.take(item)

    def _settle(self, item: tuple) -> None:
        """An answer from the core, or from the orderer (with the offset its
        write ends at: shown once this image holds it)."""
        waiting = self._waiting.pop(item[1], None)
        if waiting is None or waiting[0].done():
            return
        if item[0] == REFUSED:
            waiting[0].set_exception(decode_error(item[2]))
        elif len(item) > 3 and item[3] > self.sm.image.next_offset:
            self.follower.poll()  # the orderer answers once its batch is in the ring
            if item[3] <= self.sm.image.next_offset:
                waiting[0].set_result(item[2])
                return
            self._early.append((item[3], waiting[0], item[2], waiting[2]))
        else:
            waiting[0].set_result(item[2])

    # ---------------------------------------------------------------- the orderer's link

    def _on_orderer_link(self, _tag: int, sock: socket.socket) -> None:
        """A new link to the orderer process, from the core (it started, or
        this worker did)."""
        if self.lost is not None:
            sock.close()
            return
        asyncio.ensure_future(self._adopt_orderer_link(sock))

    async def _adopt_orderer_link(self, sock: socket.socket) -> None:
        def lost(why: str) -> None:
            self._orderer_link_lost(protocol, why)

        protocol = FrameProtocol(self._on_orderer_items, lost)
        await asyncio.get_running_loop().create_unix_connection(lambda: protocol, sock=sock)
        if self.lost is not None or protocol.closed:
            protocol.transport.close()
            return
        old = self.orderer_link
        if old is not None:  # its process is gone: the core started the next one
            self._orderer_link_lost(old, "it was started again")
            old.transport.close()
        self.orderer_link = protocol

    def _on_orderer_items(self, items: list) -> None:
        for item in items:
            if item[0] == ANSWER or item[0] == REFUSED:
                self._settle(item)

    def _orderer_link_lost(self, protocol: FrameProtocol, why: str) -> None:
        if protocol is not self.orderer_link:
            return  # replaced already: its writes were failed then
        self.orderer_link = None
        self._to_orderer = []
        self._fail_writes(
            OutcomeUnknownError(
                f"this voter's orderer process stopped ({why}); the write may still commit"
            )
        )

    def _fail_writes(self, error: Exception) -> None:
        """Every write sent to the orderer process and not answered yet."""
        for request_id, (future, what, _, _) in list(self._waiting.items()):
            if what == "submit":
                del self._waiting[request_id]
                if not future.done():
                    future.set_exception(error)
        # Answers already in self._early committed: the core streams their batches.

    def _on_lost(self, why: str) -> None:
        if self.lost is not None:
            return
        self.lost = why
        log.error("HTTP worker %d lost its link to the voter's core: %s", self.index, why)
        for future, what, _, _ in self._waiting.values():
            if future.done():
                continue
            if what in ("write", "submit"):
                future.set_exception(
                    OutcomeUnknownError(
                        "this HTTP worker lost its link to the voter's core; the write may "
                        "still commit"
                    )
                )
            else:
                future.set_exception(
                    UnavailableError("this HTTP worker lost its link to the voter's core", 1.0)
                )
        self._waiting.clear()
        for _, future, _, _ in self._early:  # committed, but never shown here
            if not future.done():
                future.set_exception(
                    OutcomeUnknownError(
                        "this HTTP worker lost its link to the voter's core before its image "
                        "held the write"
                    )
                )
        self._early = []
        if self._sweeper is not None:
            self._sweeper.cancel()
        self.follower.stop()
        self._waiters.wake()
        if self.protocol.transport is not None:
            self.protocol.transport.close()
        if self._inbox is not None:
            self._inbox.close()
        if self.orderer_link is not None and self.orderer_link.transport is not None:
            self.orderer_link.transport.close()
        self.orderer_link = None
        self._to_orderer = []
        if self.on_lost is not None:
            self.on_lost(why)


class ForwardToCore:
    """ASGI middleware of an HTTP worker: the paths that read the core's own
    state (FORWARDED) are answered by the core's app, with the
    request as it arrived (its token, its certificate's subject, its body,
    already read and limited by the edge)."""

    def __init__(self, app: ASGIApp, *, node: WorkerNode, routes: list) -> None:
        self.app = app
        self.node = node
        self.routes = routes  # the app's (filled once its endpoints exist)
        self._by_path: dict[str, Any] | None = None  # the metrics' route label, by path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path")
        if scope["type"] != "http" or path not in FORWARDED:
            await self.app(scope, receive, send)
            return
        if self._by_path is None:
            self._by_path = {getattr(r, "path", None): r for r in self.routes}
        scope["route"] = self._by_path.get(path)
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        certificate = peer_certificate(scope)
        head = {
            "method": scope["method"],
            "scheme": scope.get("scheme", "http"),
            "path": path,
            "raw_path": scope.get("raw_path") or path.encode(),
            "query_string": scope.get("query_string", b""),
            "headers": _with_request_id(scope),
            "client": scope.get("client"),
            "server": scope.get("server"),
            "extensions": {"tls": {PEER_CERT: certificate}} if certificate else {},
        }
        try:
            status, headers, body = await self.node.forward(head, b"".join(chunks))
        except NodeError as e:
            if path in ("/livez", "/readyz"):
                response: Response = JsonResponse(
                    {"status": "dead" if path == "/livez" else "not ready", "reason": str(e)},
                    status_code=503,
                    headers=retry_after(1.0),
                )
            else:
                response = node_error_response(e, Request(scope))
            await response(scope, receive, send)
            return
        # The core's app answered with this request's id too: the edge adds it once.
        headers = [h for h in headers if h[0] != b"x-request-id"]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _with_request_id(scope: Scope) -> list:
    """The request's headers for the core's app, ``X-Request-Id`` the one the
    edge took or made: the core's app sees the id the caller is answered with."""
    request_id = scope.get(REQUEST_ID_KEY)
    headers = list(scope.get("headers", ()))
    if request_id is None:
        return headers
    return [h for h in headers if h[0] != b"x-request-id"] + [(b"x-request-id", request_id)]
