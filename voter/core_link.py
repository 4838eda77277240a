"""The core's end of its HTTP workers' links (voter/link.py says what
crosses them; voter/worker_pool.py starts the workers).

The core keeps the QuorumNode (Raft) and, with an orderer process
(voter/orderer_process.py), links it as it links a worker: the orderer
follows the committed batches, proposes its batches (PROPOSE) and reports
its status; each worker sends its writes to the orderer over a link of its
own, whose socket pair the core makes and hands to both (decision 122), so
the core never reads a write or its answer (``RemoteOrderer`` is the node's
orderer then). Without one, the core orders writes itself: each
worker's frame of requests is queued as one group and decided in one pump;
the answers go back in one frame per loop turn, after the committed batches
they depend on, so a worker's image already holds a write when its client
hears that it committed. Requests that need the core's own state (status,
metrics, probes, voter changes) arrive as HTTP and are answered by the
core's own app, in process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import socket
import time
from typing import Any

from api.connections import ConnectionStats
from api.metrics import add_request_totals
from api.reads import not_ready_reason
from metadata_records.snapshot import encode_image
from quorum.callers import Caller
from quorum.node import QuorumNode
from quorum.node_errors import OutcomeUnknownError, UnavailableError
from quorum.orderer import BatchStats, Reply, fail, settle
from quorum.record_log import OffsetTooOld
from quorum.runtime_tuning import trim_malloc

from .batch_ring import BatchRing
from .link import (
    ANSWER,
    BARRIER,
    BATCHES,
    CATCH_UP,
    FORWARD,
    IDLE,
    IMAGE,
    IMAGE_FILE,
    NO_FILE,
    NOTHING_TO_PROPOSE,
    ORDERER,
    PROPOSE,
    REBASE,
    REFUSED,
    STATE,
    STATS,
    STEP_DOWN,
    SUBMIT,
    TRANSFERRING,
    WAKE,
    FrameProtocol,
    decode_error,
    encode_error,
)
from .shared_image import SharedFile, SharedImage, enabled

log = logging.getLogger(__name__)

TRIM_AGAIN_S = 60.0  # after a rebase, malloc trimmed again: a scrape interval or more
FILES_MISSED = 3  # image files a process could not read before it is sent images encoded
STATE_EVERY_S = 0.1  # how often the core's state is looked at (sent when it changed)
STATE_AT_LEAST_S = 1.0  # and sent this often anyway: workers tell a frozen core by its silence
# Committed batches that no answer waits for (a follower's, or a leader's
# between answers) are gathered this long: one frame for many small batches.
# A worker's local reads are that much staler; its linearizable reads wait for
# the barrier's batch, which comes with the barrier's answer.
BATCHES_GATHERED_S = 0.005


def core_state(node: QuorumNode) -> dict[str, Any]:
    """What a worker needs to know of the core to answer reads and probes,
    and an orderer process to order writes (voter/orderer_process.RemoteRaft)."""
    raft = node.status()
    leading = raft.leading
    return {
        "ready": node.ready,
        "reason": not_ready_reason(node),
        "fatal": node.sm.fatal,
        "replaying": node.replaying,
        "raftAlive": node.raft_alive,
        "leaderId": node.raft_leader_id,
        "leaderUrl": node.leader_url,
        "active": node.active,
        "leading": leading,
        "term": raft.term,
        "stopping": node.stopping,
        "disk": node.disk_refusal(),
        "wantedVoters": node.wanted_voters() if leading else None,
    }


class SummedConnections:
    """The workers' connection counters, summed: the ConnectionStats that
    /metrics reads (api/metrics.py), for the whole voter."""

    def __init__(self) -> None:
        self.by_worker: dict[int, dict[str, Any]] = {}
        self.gone: dict[str, Any] = _zero()  # counters of workers that were replaced

    def update(self, index: int, counters: dict[str, Any]) -> None:
        self.by_worker[index] = counters

    def retire(self, index: int) -> None:
        last = self.by_worker.pop(index, None)
        if last is not None:
            self.gone = _add(self.gone, {**last, "open": 0})

    def _total(self) -> dict[str, Any]:
        total = self.gone
        for counters in self.by_worker.values():
            total = _add(total, counters)
        return total

    def __getattr__(self, name: str) -> Any:  # open, refused, evicted, ...
        if name in _COUNTERS:
            return self._total()[name]
        raise AttributeError(name)


class SummedRequests:
    """The workers' request counts (api/metrics.RequestCounts), summed: what
    /metrics shows of HTTP requests on a voter with workers. Each worker
    reports its totals every second; a replaced worker's last report is
    kept, so the counters never go back (what it answered in its last
    second before it died is not counted)."""

    def __init__(self) -> None:
        self.by_worker: dict[int, dict[str, Any]] = {}
        self.gone: dict[str, Any] = {"responses": {}, "latency": {}}
        # Each child's collector (quorum/runtime_tuning.gc_report), by
        # process name ("orderer", "worker-0", ...): /metrics shows them
        # beside the core's. A restarted child counts from 0 again.
        self.gc: dict[str, dict[str, Any]] = {}

    def update(self, index: int, totals: dict[str, Any]) -> None:
        self.by_worker[index] = totals

    def retire(self, index: int) -> None:
        self.gc.pop(f"worker-{index}", None)
        last = self.by_worker.pop(index, None)
        if last is not None:
            self.gone = add_request_totals(self.gone, last)

    def totals(self) -> dict[str, Any]:
        total = self.gone
        for totals in self.by_worker.values():
            total = add_request_totals(total, totals)
        return total


_COUNTERS = ("open", "refused", "evicted", "timed_out", "head_too_large", "invalid")


def _zero() -> dict[str, Any]:
    return {
        "open": 0,
        "refused": {"total": 0, "per_address": 0},
        "evicted": {"total": 0, "per_address": 0},
        "timed_out": {"head": 0, "body": 0, "write": 0},
        "head_too_large": 0,
        "invalid": 0,
    }


def _add(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in a.items():
        other = b.get(key, 0 if not isinstance(value, dict) else {})
        if isinstance(value, dict):
            out[key] = {k: v + other.get(k, 0) for k, v in value.items()}
        else:
            out[key] = value + other
    return out


def connection_counters(stats: ConnectionStats) -> dict[str, Any]:
    """A worker's ConnectionStats as the plain values it sends."""
    return {
        "open": stats.open,
        "refused": {k: stats.refused[k] for k in ("total", "per_address")},
        "evicted": {k: stats.evicted[k] for k in ("total", "per_address")},
        "timed_out": {k: stats.timed_out[k] for k in ("head", "body", "write")},
        "head_too_large": stats.head_too_large,
        "invalid": stats.invalid,
    }


class CoreLinks:
    """Every worker's link, the stream of committed batches to them, and the
    core's state as they see it."""

    def __init__(
        self,
        node: QuorumNode,
        app: Any,
        connections: SummedConnections,
        requests: SummedRequests,
        ring: BatchRing | None = None,
        workers: int = 0,
    ) -> None:
        self.node = node
        # The workers that have listened on the API port (their first STATS
        # comes after it), until all of them have once: the voter is not ready
        # before, or the first ones to listen take every early connection,
        # more than their part of the connection limits (decision 136).
        self.workers = workers
        self.serving: set[int] | None = set() if workers else None
        if workers:
            node.http_starting = self.starting
        self.app = app  # the core's own app: forwarded requests
        self.connections = connections
        self.requests = requests
        # Where the committed batches go for the workers and the orderer
        # (decision 125); None: down each link (BATCHES).
        self.ring = ring
        if ring is not None:
            node.sm.log.ring = ring
        self.links: dict[int, WorkerLink] = {}
        self.orderer: OrdererLink | None = None  # with an orderer process, its link
        self._state: dict[str, Any] | None = None
        self._state_task: asyncio.Task | None = None
        node.apply_watchers.append(self)
        node.leader_watchers.append(self.push_state)
        # The image file every link reads its partitions from (None: each is
        # sent the image encoded and keeps its own).
        self.shared: SharedImage | None = None
        self._rebases_trimmed = 0
        self._trim_again_at: float | None = None
        if enabled():
            self.shared = SharedImage(lambda: node.image, lambda: node.sm.log.oldest_offset)
            self.shared.on_written.append(self._new_file)

    def _new_file(self, shared: SharedFile) -> None:
        self.node.sm.newer_file = shared.file  # the core's own image too, at its next batch
        for link in self._all_links():
            if link.imaged and not link.no_files:
                link.post((REBASE, shared.path, shared.next_offset))

    def start(self) -> None:
        self._state_task = asyncio.ensure_future(self._watch_state())

    async def attach(self, index: int, sock: socket.socket) -> WorkerLink:
        """Takes the core's end of worker ``index``'s socket pair."""
        link = WorkerLink(self, index)
        loop = asyncio.get_running_loop()
        await loop.create_unix_connection(lambda: link.protocol, sock=sock)
        self.links[index] = link
        link.send_state(self.state())
        await link.send_image()
        return link

    def detach(self, index: int) -> None:
        link = self.links.pop(index, None)
        if link is not None:
            link.close()
        self.connections.retire(index)
        self.requests.retire(index)

    async def attach_orderer(self, sock: socket.socket) -> OrdererLink:
        """Takes the core's end of the orderer process's socket pair."""
        link = OrdererLink(self)
        loop = asyncio.get_running_loop()
        await loop.create_unix_connection(lambda: link.protocol, sock=sock)
        self.orderer = link
        link.send_state(self.state())
        await link.send_image()
        return link

    def detach_orderer(self, why: str) -> None:
        """The orderer process is gone: the node's orderer stops (the
        workers see their own links to it close)."""
        link, self.orderer = self.orderer, None
        if link is None:
            return
        link.close()
        remote = self.node.orderer
        if isinstance(remote, RemoteOrderer):
            remote.lost(why)

    def push_state(self) -> None:
        """The state now, to every link (a leadership change: not at the next look)."""
        now = self.state()
        for link in self._all_links():
            link.send_state(now)

    def _all_links(self) -> list[WorkerLink]:
        links = list(self.links.values())
        if self.orderer is not None:
            links.append(self.orderer)
        return links

    def state(self) -> dict[str, Any]:
        self._state = core_state(self.node)
        return self._state

    def starting(self) -> str | None:
        """Why the voter is not ready while its HTTP workers start, or None."""
        if self.serving is None:
            return None
        return (
            f"this voter's HTTP workers are starting: {len(self.serving)} of {self.workers} "
            "listening"
        )

    def now_serving(self, index: int) -> None:
        """Worker ``index`` listens on the API port (its first STATS)."""
        if self.serving is None or index in self.serving:
            return
        self.serving.add(index)
        log.info("HTTP worker %d listens (%d of %d)", index, len(self.serving), self.workers)
        if len(self.serving) >= self.workers:
            self.serving = None  # once: a worker started again later leaves readiness be
            self.push_state()

    def needs_wakeup(self) -> bool:  # the Raft thread, after the image moved (ApplyWatcher)
        # Only links streamed to need the loop (with a ring: one catching up,
        # or one whose reader went idle). A link with a flush scheduled reads
        # the image when it runs (it clears its flags before it reads): no
        # wakeup needed for it.
        return any(
            link.idle
            or (link.cursor is not None and link._later is None and not link._flush_pending)
            for link in self._all_links()
        )

    def on_applied(self) -> None:
        for link in self._all_links():
            if link.idle:
                link.idle = False
                link.post((WAKE,))
            elif link.cursor is not None:
                link.wake_later()

    async def _watch_state(self) -> None:
        sent_at = 0.0
        while True:
            await asyncio.sleep(STATE_EVERY_S)
            if self.ring is not None and self.node.sm.log.ring is None:
                self._ring_failed()
            if self.shared is not None:
                self.shared.tick()
                self._trim_after_rebase(time.monotonic())
            before = self._state
            now = self.state()
            if now != before or time.monotonic() - sent_at >= STATE_AT_LEAST_S:
                sent_at = time.monotonic()
                for link in self._all_links():
                    link.send_state(now)

    def _trim_after_rebase(self, now: float) -> None:
        """The apply thread took a file: its own copy is freed, so malloc is
        trimmed; what still held a part of it (the image /metrics last
        counted, until its next scrape) lets go later: trimmed again then."""
        if self.node.sm.file_rebases != self._rebases_trimmed:
            self._rebases_trimmed = self.node.sm.file_rebases
            trim_malloc()
            self._trim_again_at = now + TRIM_AGAIN_S
        elif self._trim_again_at is not None and now >= self._trim_again_at:
            self._trim_again_at = None
            trim_malloc()

    def _ring_failed(self) -> None:
        """The ring stopped taking batches (RecordLog.append logged why):
        every link starts over from an image and is streamed to from then on."""
        self.ring = None
        for link in self._all_links():
            link.start_over()

    def stop(self) -> None:
        self.node.sm.log.ring = None  # the readers' processes stop with this one
        if self._state_task is not None:
            self._state_task.cancel()
        for index in list(self.links):
            self.detach(index)
        self.detach_orderer("the voter is stopping")
        if self.shared is not None:
            self.shared.stop()
        if self in self.node.apply_watchers:
            self.node.apply_watchers.remove(self)
        if self.push_state in self.node.leader_watchers:
            self.node.leader_watchers.remove(self.push_state)


class _LinkReply:
    """Where the core's answer to one of a worker's writes goes: straight into
    the link's outbox (QuorumNode.submit_to's ``reply``), without a Future and
    a scheduled callback per write. Done once answered, or once the worker is
    gone: a write queued by a dead worker is then not decided at all (its
    client was told nothing, and hears of no outcome)."""

    __slots__ = ("link", "request_id", "answered")

    def __init__(self, link: WorkerLink, request_id: int) -> None:
        self.link = link
        self.request_id = request_id
        self.answered = False

    def done(self) -> bool:
        return self.answered or self.link.lost is not None

    def set_result(self, value: object) -> None:
        self.answered = True
        self.link._answer(self.request_id, value)

    def set_exception(self, error: BaseException) -> None:
        self.answered = True
        self.link._refuse(self.request_id, error)


class WorkerLink:
    """One worker's link, on the core."""

    follows_log = True  # it serves GET /v1/log: its image comes with the retained log

    def __init__(self, links: CoreLinks, index: int) -> None:
        self.links = links
        self.node = links.node
        self.index = index
        self.protocol = FrameProtocol(self._on_items, self._on_lost)
        self.imaged = False  # an image went: answers may follow (they name its offsets)
        # The next offset to send down the link: always once imaged without a
        # ring; with one, only to answer a CATCH_UP (then None again).
        self.cursor: int | None = None
        self._catching_up = False
        self.idle = False  # its ring reader sleeps until WAKE (with the next batch)
        self._outbox: list = []
        self._flush_pending = False
        self._later: asyncio.TimerHandle | None = None
        self._sending_image = False
        self.no_files = False  # its process could not read an image file: encoded images
        self.files_missed = 0  # image files its process could not read
        self.rebases = 0  # newer image files its process took (its last STATS)
        self.requests = 0
        self.lost: str | None = None
        # Its last frame (a worker reports every second, the orderer every
        # half second); None since an image was sent to it: loading a large
        # one keeps it busy, and silent, for as long as it takes.
        self.heard_at: float | None = None

    # ---------------------------------------------------------------- in

    def _on_items(self, items: list) -> None:
        self.heard_at = time.monotonic()
        node = self.node
        queued = False
        for item in items:
            kind = item[0]
            if kind == SUBMIT:
                _, request_id, request, caller = item
                self.requests += 1
                try:
                    node.submit_to(request, _LinkReply(self, request_id), False, caller)
                except Exception as e:  # noqa: BLE001 - a NodeError, answered as such
                    self._refuse(request_id, e)
                    continue
                queued = True
            elif kind == BARRIER:
                self.requests += 1
                self._join_barrier(item[1])
            elif kind == FORWARD:
                self.requests += 1
                asyncio.ensure_future(self._forward(item[1], item[2], item[3]))
            elif kind == STATS:
                self.links.now_serving(self.index)
                self.links.connections.update(self.index, item[1]["connections"])
                self.links.requests.update(self.index, item[1]["requests"])
                if "gc" in item[1]:
                    self.links.requests.gc[f"worker-{self.index}"] = item[1]["gc"]
                self.rebases = item[1].get("imageRebases", 0)
            elif kind == CATCH_UP:
                self.catch_up(item[1])
            elif kind == IDLE:
                self.went_idle(item[1])
            elif kind == NO_FILE:
                self.no_file(item[1])
        if queued:
            node.pump()

    def _settled(self, request_id: int, future: asyncio.Future) -> None:
        if future.cancelled():
            self._refuse(request_id, RuntimeError("the write was cancelled"))
        elif future.exception() is not None:
            self._refuse(request_id, future.exception())
        else:
            self._answer(request_id, future.result())

    def _join_barrier(self, request_id: int) -> None:
        """Each read its own wait: QuorumNode.barrier shares the proposals,
        but never one proposed before the read arrived."""
        barrier = asyncio.ensure_future(self.node.barrier())
        barrier.add_done_callback(lambda f, i=request_id: self._settled(i, f))

    async def _forward(self, request_id: int, head: dict[str, Any], body: bytes) -> None:
        try:
            self._answer(request_id, await run_asgi(self.links.app, head, body))
        except Exception as e:  # noqa: BLE001 - answered as the bug it is
            log.exception("a request forwarded by HTTP worker %d failed", self.index)
            self._refuse(request_id, e)

    def catch_up(self, offset: int) -> None:
        """The ring could not give this link's process the batch at ``offset``:
        the batches from there go down the link, once."""
        if self.imaged:
            self.cursor = offset
            self._catching_up = True
            self.wake()

    def went_idle(self, offset: int) -> None:
        """Its reader stopped looking at ``offset``: WAKE it with the next
        batch. Flagged before the image is read (the Raft thread moves the
        image, then asks needs_wakeup), so no batch slips between the two."""
        self.idle = True
        if self.node.image.next_offset > offset:
            self.idle = False
            self.post((WAKE,))

    def no_file(self, why: str) -> None:
        """Its process could not read the image file: the newest again (it
        may have been closed meanwhile), and after FILES_MISSED misses an
        encoded image instead, from then on."""
        self.files_missed += 1
        if self.files_missed < FILES_MISSED:
            log.info("%s could not read the image file (%s): named the newest", self.name, why)
        else:
            log.warning(
                "%s could not read the voter's image file %d times (%s): it is "
                "sent the image encoded instead, and keeps a copy of its own. Check that "
                "the voter's processes may read /proc/<serve pid>/fd (same user, no "
                "restricting security profile).",
                self.name,
                self.files_missed,
                why,
            )
            self.no_files = True
        self.start_over()

    @property
    def name(self) -> str:
        return "the orderer" if self.index < 0 else f"HTTP worker {self.index}"

    def start_over(self) -> None:
        """An image again, then the stream (the ring failed)."""
        self.imaged = False
        self.cursor = None
        asyncio.ensure_future(self.send_image())

    def _on_lost(self, why: str) -> None:
        self.lost = why
        if self.links.links.get(self.index) is self:
            log.info("HTTP worker %d's link closed: %s", self.index, why)

    # ---------------------------------------------------------------- out

    def post(self, item: tuple) -> None:
        """One item for the other side, sent at the end of this loop turn
        (after the committed batches it may depend on)."""
        self._outbox.append(item)
        self.wake()

    def _answer(self, request_id: int, value: Any) -> None:
        self.post((ANSWER, request_id, value))

    def _refuse(self, request_id: int, error: BaseException) -> None:
        self.post((REFUSED, request_id, encode_error(error)))

    def send_state(self, state: dict[str, Any]) -> None:
        self.post((STATE, state))

    def wake(self) -> None:
        """Something waits to be sent: at the end of this turn of the loop."""
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def wake_later(self) -> None:
        """Only committed batches wait: within BATCHES_GATHERED_S."""
        if not self._flush_pending and self._later is None:
            self._later = asyncio.get_running_loop().call_later(BATCHES_GATHERED_S, self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if self._later is not None:
            self._later.cancel()
            self._later = None
        items: list = []
        if self.cursor is not None:
            image = self.node.image
            if self.cursor < image.next_offset or self._catching_up:
                try:
                    batches = self.node.sm.log.stored_from(self.cursor, image.next_offset)
                except OffsetTooOld:  # this core loaded a snapshot: start the worker over
                    batches = None
                if batches is None or (batches and batches[0][0] != self.cursor):
                    self.start_over()
                elif batches or self._catching_up:  # a catch-up is answered, if only with []
                    items.append((BATCHES, batches))
                    if batches:
                        last = batches[-1]
                        self.cursor = last[0] + last[1]
                    if self.links.ring is not None:
                        self.cursor = None  # the ring again from there
                self._catching_up = False
        if not self.imaged:
            # Answers wait for the image: they may name offsets only it holds.
            return
        if self._outbox:
            items.extend(self._outbox)
            self._outbox = []
        if items:
            self.protocol.send(items)

    async def send_image(self) -> None:
        """The image to start from, with the retained log below it: the
        voter's image file when there is one (the process replays on from
        its offset), else the image encoded."""
        if self._sending_image:
            return
        self._sending_image = True
        try:
            shared = self.links.shared
            found = None
            if shared is not None and not self.no_files:
                found = await shared.for_start()
            if found is not None:
                offset = found.next_offset
                item = (IMAGE_FILE, found.path)
            else:
                image = self.node.image
                offset = image.next_offset
                item = (IMAGE, await asyncio.to_thread(encode_image, image))
            if self.follows_log:
                base, retained = self.node.sm.log.export(offset)
            else:
                base, retained = offset, []
            self.protocol.send([(*item, (base, retained, offset))])
            self.heard_at = None
            self.imaged = True
            self.cursor = None if self.links.ring is not None else offset
            self._catching_up = False
        finally:
            self._sending_image = False
        self.wake()

    def close(self) -> None:
        transport = self.protocol.transport
        if transport is not None:
            transport.close()


class OrdererLink(WorkerLink):
    """The orderer process's link, on the core: a worker's (the image, the
    committed batches, the state), and the orderer's own items."""

    follows_log = False  # it serves no reads: the image alone

    def __init__(self, links: CoreLinks) -> None:
        super().__init__(links, -1)

    def _on_items(self, items: list) -> None:
        self.heard_at = time.monotonic()
        node = self.node
        for item in items:
            kind = item[0]
            if kind == PROPOSE:
                future = node.propose_payload(item[2])
                future.add_done_callback(functools.partial(self._proposed, item[1]))
            elif kind == NOTHING_TO_PROPOSE:
                node.nothing_to_propose()
            elif kind == ORDERER:
                remote = node.orderer
                if isinstance(remote, RemoteOrderer):
                    remote.report(item[1])
            elif kind == ANSWER or kind == REFUSED:
                remote = node.orderer
                if isinstance(remote, RemoteOrderer):
                    remote.answered(item[1], kind == ANSWER, item[2])
            elif kind == CATCH_UP:
                self.catch_up(item[1])
            elif kind == IDLE:
                self.went_idle(item[1])
            elif kind == NO_FILE:
                self.no_file(item[1])

    def _proposed(self, request_id: int, future: asyncio.Future) -> None:
        if future.cancelled():
            self._refuse(request_id, RuntimeError("the proposal was cancelled"))
            return
        self._answer(request_id, future.result())
        if self.links.ring is not None:
            return  # the batch is in the ring: a worker reads it with the answer
        # The orderer answers its writers once it hears: their workers get the
        # batch now, not within BATCHES_GATHERED_S, so that no answer waits
        # for it there (a worker shows an answer once its image holds it).
        for worker in self.links.links.values():
            worker.wake()

    def _on_lost(self, why: str) -> None:
        self.lost = why
        if self.links.orderer is self:
            log.info("the orderer process's link closed: %s", why)


def added(earlier: BatchStats, now: BatchStats) -> BatchStats:
    """An orderer's batch counters on top of those its predecessors counted;
    the recent sizes and latencies are the running one's."""
    return dataclasses.replace(
        now,
        batches=earlier.batches + now.batches,
        records=earlier.records + now.records,
        noop_records=earlier.noop_records + now.noop_records,
        balance_elections=earlier.balance_elections + now.balance_elections,
        quiet_heartbeats=earlier.quiet_heartbeats + now.quiet_heartbeats,
        most_in_flight=max(earlier.most_in_flight, now.most_in_flight),
    )


class RemoteOrderer:
    """The node's orderer when it runs in a process of its own: what the
    core's app and QuorumNode read of it (as the orderer last reported), and
    what they ask of it (leadership, transfers, voter sets), over its link."""

    def __init__(self, links: CoreLinks) -> None:
        self.links = links
        self.loop: asyncio.AbstractEventLoop | None = None
        self.active = False
        self.controller = None  # in the orderer process
        self.term = 0
        self.queue_depth = 0
        self.throttled = 0
        self.voters_change_pending = False
        self.stats = BatchStats()
        # What the orderers before the running one counted: the voter's
        # counters go on across an orderer's restart (a Prometheus counter
        # that went back would read as the voter restarting).
        self._earlier: tuple[int, BatchStats] = (0, BatchStats())
        # Writes each worker sent to the orderer (over its restarts).
        self.submitted: dict[int, int] = {}
        self._reported: dict[int, int] = {}  # as the running orderer last counted them
        self._transferring = False
        self._ids = 0
        self._waiting: dict[int, Reply] = {}

    # ---------------------------------------------------------------- from the orderer

    def report(self, status: dict[str, Any]) -> None:
        was = self.active
        self.active = status["active"]
        self.term = status["term"]
        self.queue_depth = status["queueDepth"]
        self.voters_change_pending = status["votersChangePending"]
        throttled, earlier = self._earlier
        self.throttled = throttled + status["throttled"]
        self.stats = added(earlier, status["stats"])
        if "gc" in status:
            self.links.requests.gc["orderer"] = status["gc"]
        self.image_rebases = status.get("imageRebases", 0)
        for worker, count in status["submitted"].items():
            last = self._reported.get(worker, 0)
            self.submitted[worker] = self.submitted.get(worker, 0) + max(count - last, 0)
            self._reported[worker] = count
        if was and not self.active:
            self.links.node.stepped_down()

    def answered(self, request_id: int, ok: bool, value: Any) -> None:
        reply = self._waiting.pop(request_id, None)
        if reply is None:
            return
        if ok:
            settle(reply, value)
        else:
            fail(reply, decode_error(value))

    def lost(self, why: str) -> None:
        if self.active:
            self.links.node.stepped_down()
        self.active = False
        self.queue_depth = 0
        self._reported = {}  # the next orderer counts from 0
        self._earlier = (self.throttled, self.stats)
        waiting, self._waiting = self._waiting, {}
        for reply in waiting.values():
            fail(
                reply,
                OutcomeUnknownError(
                    f"the orderer process stopped ({why}); the write may still commit"
                ),
            )

    # ---------------------------------------------------------------- from QuorumNode

    async def become_active(self, term: int) -> None:
        self.links.push_state()  # the orderer starts the term when it hears

    def step_down(self, why: str) -> None:
        if self.active:
            self.links.node.stepped_down()
        self.active = False
        self._send((STEP_DOWN, why))
        self.links.push_state()

    @property
    def transferring(self) -> bool:
        return self._transferring

    @transferring.setter
    def transferring(self, value: bool) -> None:
        self._transferring = value
        self._send((TRANSFERRING, value))

    def submit_to(
        self, request: object, reply: Reply, pump: bool = True, caller: Caller | None = None
    ) -> None:
        node = self.links.node
        if (refusal := node.refusal()) is not None:
            raise refusal
        if not self.active:
            raise node.not_controller("this node is not the active controller")
        self.enqueue(request, reply, caller)

    def enqueue(self, request: object, reply: Reply | None, caller: Caller | None = None) -> None:
        """The core's own writes (voter sets): to the orderer, answered on its link."""
        orderer = self.links.orderer
        if orderer is None or orderer.lost is not None:
            fail(
                reply,
                UnavailableError(
                    "this voter's orderer is starting again; nothing was written: retry", 1.0
                ),
            )
            return
        self._ids += 1
        if reply is not None:
            self._waiting[self._ids] = reply
        orderer.post((SUBMIT, self._ids, request, caller))

    def pump(self) -> None:
        pass  # the orderer pumps what it is sent

    def _send(self, item: tuple) -> None:
        orderer = self.links.orderer
        if orderer is not None and orderer.lost is None:
            orderer.post(item)


async def run_asgi(app: Any, head: dict[str, Any], body: bytes) -> tuple[int, list, bytes]:
    """One HTTP request through ``app`` in process: (status, headers, body)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": head["method"],
        "scheme": head["scheme"],
        "path": head["path"],
        "raw_path": head["raw_path"],
        "root_path": "",
        "query_string": head["query_string"],
        "headers": head["headers"],
        "client": head["client"],
        "server": head["server"],
        "extensions": head.get("extensions") or {},
        "state": {},
    }
    sent = False
    status = 500
    headers: list = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # never: the whole body was given
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = list(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, headers, b"".join(chunks)
