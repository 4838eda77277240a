"""The link between an HTTP worker and its voter's core: frames on one
socket pair, inherited by the worker when the core starts it.

A frame is a 4-byte big-endian length and a pickled list of items; each side
gathers what one turn of its event loop produced into one frame (unbatched,
the link alone would cost about 10 us per request; batched, 1-2 us). Pickle is
safe here: every link's socket pair is created by the core and held only
by it and its own children (inherited at start, or handed over an fd channel
they inherited), never reachable from another process.

Items, worker -> core:

* ``(SUBMIT, id, request, caller)``: a controller request and who asked
  (quorum/callers.py's ``Caller``), as ``QuorumNode.submit``;
* ``(BARRIER, id)``: a linearizable read's barrier, as ``QuorumNode.barrier``;
* ``(FORWARD, id, head, body)``: an HTTP request for the core's own app
  (status, metrics, probes, voter changes: what needs the core's state);
* ``(STATS, {"connections": ..., "requests": ...})``: the worker's
  connection counters and request counts (totals), every second;
* ``(CATCH_UP, offset)``: with a batch ring, the ring no longer (or never)
  held the batch at ``offset``: send the batches from there once;
* ``(IDLE, offset)``: with a batch ring, nothing past ``offset`` came for a
  while: the worker stops looking until the core's WAKE;
* ``(NO_FILE, why)``: an IMAGE_FILE could not be read: send IMAGE instead.

core -> worker:

* ``(IMAGE, image_bytes, retained)``: the image to start from, and the
  retained log below it (``RecordLog.export``), on connect and after a gap;
* ``(IMAGE_FILE, path, retained)``: as IMAGE, the image read from the
  core's image file at ``path`` (voter/shared_image.py), at the offset
  ``retained`` ends at; the process replays the log on from there;
* ``(REBASE, path, offset)``: a newer image file, at ``offset``: read the
  partitions the process has not changed since from it once its image
  reaches that offset;
* ``(BATCHES, [(first_offset, count, payload), ...])``: committed batches in
  order, always sent before the answers that depend on them. With a batch
  ring (voter/batch_ring.py, decision 125: the serve process's layout with
  workers) the batches are read from shared memory instead, and BATCHES
  only answers a CATCH_UP;
* ``(WAKE,)``: a batch past the offset an IDLE named is in the ring;
* ``(STATE, state)``: what the core says of itself (readiness, leader, ...);
* ``(ANSWER, id, value)`` / ``(REFUSED, id, error)``: an answer, or a
  NodeError as ``encode_error`` spells it.

With an orderer process (voter/orderer_process.py), each worker also
has a link of its own to the orderer, frames as above (decision 122): the
core makes the socket pair and hands one end to each process over its *fd
channel* (a datagram socket pair inherited at start, ``send_link`` and
``LinkInbox``), again whenever either of them is started again. A worker
sends ``(SUBMIT, id, request, caller)`` on it; the orderer answers ``(ANSWER, id,
value, offset)`` (the worker answers once its image, which the ring feeds,
reaches ``offset``) or ``(REFUSED, id, error)``. So the core never touches
a write's request or its answer. A worker whose orderer link closes fails
the writes it sent there with an unknown outcome (they may still commit)
and refuses new ones until the core hands it the next link.

orderer -> core, on the orderer's own link (besides the items a worker
sends):

* ``(PROPOSE, id, payload)``: an encoded batch to propose; answered with
  ``(ANSWER, id, (result, error))`` once it applied or failed, after the
  batch went into the ring (or, without one, after the batches streamed
  before it), so the orderer's image can hold it by then;
* ``(ORDERER, status)``: what the status and metrics read of the orderer;
* ``(NOTHING_TO_PROPOSE,)``: a batch was done and no other followed it
  (``RaftSide.nothing_to_propose``).

core -> orderer: ``(SUBMIT, id, request, caller)`` (the core's own writes:
voter sets), ``(STEP_DOWN, why)`` and ``(TRANSFERRING, bool)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import pickle
import socket
import struct
from collections.abc import Callable

from metadata_records.errors import ApiError
from quorum.node_errors import (
    MembershipRefused,
    NodeError,
    NotControllerError,
    OutcomeUnknownError,
    ThrottledError,
    UnavailableError,
)

SUBMIT, BARRIER, FORWARD, STATS = "submit", "barrier", "forward", "stats"
IMAGE, BATCHES, STATE, ANSWER, REFUSED = "image", "batches", "state", "answer", "refused"
PROPOSE, ORDERER, STEP_DOWN, TRANSFERRING = "propose", "orderer", "step_down", "transferring"
CATCH_UP, IDLE, WAKE = "catch_up", "idle", "wake"
NOTHING_TO_PROPOSE = "nothing_to_propose"
IMAGE_FILE, REBASE, NO_FILE = "image_file", "rebase", "no_file"

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">I")
_TAG = struct.Struct(">H")
MAX_FRAME = 1 << 30  # an image of a very large cluster; anything past it is a bug


class LinkBroken(ConnectionError):
    """The other side of the link closed or sent something unreadable."""


def encode_frame(items: list) -> bytes:
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(items)
    frame = buffer.getbuffer()
    _LENGTH.pack_into(frame, 0, len(frame) - 4)
    return bytes(frame)


def encode_error(error: BaseException) -> tuple:
    """A NodeError (or a bug) as plain values: exceptions with extra
    constructor arguments do not survive pickle."""
    if isinstance(error, NotControllerError):
        return ("not_controller", str(error), error.leader_id, error.leader_url)
    if isinstance(error, ThrottledError):
        return ("throttled", str(error), error.retry_after_s)
    if isinstance(error, UnavailableError):
        return ("unavailable", str(error), error.retry_after_s)
    if isinstance(error, OutcomeUnknownError):
        return ("unknown", str(error))
    if isinstance(error, MembershipRefused):
        return ("membership", str(error), error.error)
    if isinstance(error, NodeError):
        return ("node", str(error))
    return ("bug", f"{type(error).__name__}: {error}")


def decode_error(spelled: tuple) -> Exception:
    kind, message, *rest = spelled
    if kind == "not_controller":
        return NotControllerError(rest[0], rest[1], message)
    if kind == "throttled":
        return ThrottledError(message, rest[0])
    if kind == "unavailable":
        return UnavailableError(message, rest[0])
    if kind == "unknown":
        return OutcomeUnknownError(message)
    if kind == "membership":
        return MembershipRefused(ApiError(rest[0], message))
    if kind == "node":
        return NodeError(message)
    return RuntimeError(f"the voter's core failed: {message}")


class FrameProtocol(asyncio.Protocol):
    """Reads frames, hands each item list to ``on_items``; writes frames.
    Either side's end of the link."""

    def __init__(self, on_items: Callable[[list], None], on_lost: Callable[[str], None]) -> None:
        self.on_items = on_items
        self.on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        start = 0
        while len(buffer) - start >= 4:
            (size,) = _LENGTH.unpack_from(buffer, start)
            if size > MAX_FRAME:
                self._lose(f"a frame of {size} bytes")
                return
            if len(buffer) - start - 4 < size:
                break
            body = bytes(buffer[start + 4 : start + 4 + size])
            start += 4 + size
            try:
                items = pickle.loads(body)
            except Exception as e:  # noqa: BLE001 - an unreadable frame ends the link
                self._lose(f"an unreadable frame ({e})")
                return
            self.on_items(items)
        if start:
            del buffer[:start]

    def send(self, items: list) -> None:
        if self.closed or self.transport is None or self.transport.is_closing():
            return
        self.transport.write(encode_frame(items))

    def _lose(self, why: str) -> None:
        if self.transport is not None:
            self.transport.close()
        self.connection_lost(LinkBroken(why))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closed:
            return
        self.closed = True
        self.on_lost("the link closed" if exc is None else str(exc))


# ---------------------------------------------------------------- fd channels


def send_link(channel: socket.socket, tag: int, end: socket.socket) -> None:
    """Hands ``end`` (one end of a link's socket pair) to the child process
    at the other end of ``channel``, with ``tag`` (for the orderer: whose
    link it is). The datagram is queued whole or not at all."""
    socket.send_fds(channel, [_TAG.pack(tag)], [end.fileno()])


class LinkInbox:
    """A child's end of its fd channel: each datagram brings one socket (a
    link's end) and its tag, handed to ``on_link`` on the event loop."""

    def __init__(self, channel: socket.socket, on_link: Callable[[int, socket.socket], None]):
        self.channel = channel
        self.on_link = on_link
        channel.setblocking(False)

    def start(self) -> None:
        asyncio.get_running_loop().add_reader(self.channel.fileno(), self._read)

    def _read(self) -> None:
        while True:
            try:
                data, fds, flags, _ = socket.recv_fds(self.channel, 16, 4)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                log.error("the fd channel from the voter's core failed: %s", e)
                self.close()
                return
            if not data and not fds:  # the core closed it: the main link says why
                self.close()
                return
            socks = [socket.socket(fileno=fd) for fd in fds]
            if len(data) != _TAG.size or len(socks) != 1 or flags & socket.MSG_CTRUNC:
                log.error("an unreadable datagram on the fd channel from the voter's core: ignored")
                for sock in socks:
                    sock.close()
                continue
            self.on_link(_TAG.unpack(data)[0], socks[0])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(self.channel.fileno())
        self.channel.close()
