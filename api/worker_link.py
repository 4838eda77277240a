"""The link between an HTTP worker and its voter's core: frames on one
socket pair, inherited by the worker when the core starts it.

A frame is a 4-byte big-endian length and a pickled list of items; each side
gathers what one turn of its event loop produced into one frame (unbatched,
the link alone would cost about 10 us per request; batched, 1-2 us). Pickle is
safe here: the socket pair is created by the core and inherited by its own
child, never reachable from another process.

Items, worker -> core:

* ``(SUBMIT, id, request)``: a controller request, as ``QuorumNode.submit``;
* ``(BARRIER, id)``: a linearizable read's barrier, as ``QuorumNode.barrier``;
* ``(FORWARD, id, head, body)``: an HTTP request for the core's own app
  (status, metrics, probes, voter changes: what needs the core's state);
* ``(STATS, {"connections": ..., "requests": ...})``: the worker's
  connection counters and request counts (totals), every second.

core -> worker:

* ``(IMAGE, image_bytes, retained)``: the image to start from, and the
  retained log below it (``RecordLog.export``), on connect and after a gap;
* ``(BATCHES, [(first_offset, count, payload), ...])``: committed batches in
  order, always sent before the answers that depend on them;
* ``(STATE, state)``: what the core says of itself (readiness, leader, ...);
* ``(ANSWER, id, value)`` / ``(REFUSED, id, error)``: an answer, or a
  NodeError as ``encode_error`` spells it;
* ``(ORDERER_LOST, why)``: the orderer process died; writes sent to it may
  still commit.

With an orderer process (metaquorum/orderer_process.py), the workers' writes
go to it through the core as *relayed* frames: the length word's top bit is
set and the body starts with a worker's index (two bytes), then the pickled
items. The core copies them between the links without unpickling them.
A worker relays ``(SUBMIT, id, request)`` items; the orderer relays back
``(ANSWER, id, value, offset)`` (the worker answers once its image reaches
``offset``) and ``(REFUSED, id, error)``.

orderer -> core, on the orderer's own link (besides relayed frames, and the
items a worker sends):

* ``(PROPOSE, id, payload)``: an encoded batch to propose; answered with
  ``(ANSWER, id, (result, error))`` once it applied or failed, after the
  batches it streams before (so the orderer's image holds it by then);
* ``(ORDERER, status)``: what the status and metrics read of the orderer.

core -> orderer: ``(SUBMIT, id, request)`` (the core's own writes: voter
sets), ``(STEP_DOWN, why)`` and ``(TRANSFERRING, bool)``.
"""

from __future__ import annotations

import asyncio
import copyreg
import dataclasses
import io
import operator
import pickle
import struct
from collections.abc import Callable

from controller import messages
from metadata_records import errors
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
ORDERER_LOST = "orderer_lost"
PROPOSE, ORDERER, STEP_DOWN, TRANSFERRING = "propose", "orderer", "step_down", "transferring"

_LENGTH = struct.Struct(">I")
_INDEX = struct.Struct(">H")
MAX_FRAME = 1 << 30  # an image of a very large cluster; anything past it is a bug
RELAYED = 1 << 31  # the length word's flag of a relayed frame


class LinkBroken(ConnectionError):
    """The other side of the link closed or sent something unreadable."""


def _reducer(cls: type, names: tuple[str, ...]):
    get = operator.attrgetter(*names)
    if len(names) == 1:
        return lambda obj: (cls, (get(obj),))
    return lambda obj: (cls, get(obj))


def _fast_reducers() -> dict:
    """The controller's messages by constructor: pickle's default for a
    dataclass with slots calls ``dataclasses.fields`` twice per object (its
    ``__getstate__`` and ``__setstate__``), a quarter of the core's time on
    the link. Every field of these is an ``__init__`` argument, so
    ``cls(*fields)`` rebuilds the same object (tests/test_worker_link.py
    checks both ways agree)."""
    table = dict(copyreg.dispatch_table)
    for module in (messages, errors):
        for cls in vars(module).values():
            if isinstance(cls, type) and dataclasses.is_dataclass(cls):
                fields = dataclasses.fields(cls)
                if all(f.init for f in fields) and fields:
                    table[cls] = _reducer(cls, tuple(f.name for f in fields))
    return table


FAST_REDUCERS = _fast_reducers()


def encode_frame(items: list, fast: bool = True) -> bytes:
    """``fast`` False: pickle's own way for every object (the plain twin)."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    if fast:
        pickler.dispatch_table = FAST_REDUCERS
    pickler.dump(items)
    frame = buffer.getbuffer()
    _LENGTH.pack_into(frame, 0, len(frame) - 4)
    return bytes(frame)


def encode_relayed(index: int, items: list) -> bytes:
    """A relayed frame for (or from) worker ``index``."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0\0\0")
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = FAST_REDUCERS
    pickler.dump(items)
    frame = buffer.getbuffer()
    _LENGTH.pack_into(frame, 0, (len(frame) - 4) | RELAYED)
    _INDEX.pack_into(frame, 4, index)
    return bytes(frame)


def readdress(body: bytes, index: int) -> bytes:
    """A relayed frame's body (index and items) as a relayed frame for ``index``."""
    return _LENGTH.pack(len(body) | RELAYED) + _INDEX.pack(index) + body[2:]


def unwrap(body: bytes) -> bytes:
    """A relayed frame's body as a plain frame of its items."""
    return _LENGTH.pack(len(body) - 2) + body[2:]


def relayed_items(body: bytes) -> tuple[int, list]:
    """A relayed frame's body read: (worker index, items)."""
    return _INDEX.unpack_from(body)[0], pickle.loads(body[2:])


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

    def __init__(
        self,
        on_items: Callable[[list], None],
        on_lost: Callable[[str], None],
        on_relayed: Callable[[bytes], None] | None = None,
    ) -> None:
        self.on_items = on_items
        self.on_lost = on_lost
        # A relayed frame's body (index and pickled items), not unpickled;
        # None: this end takes none.
        self.on_relayed = on_relayed
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
            relayed = size & RELAYED
            size &= ~RELAYED
            if size > MAX_FRAME:
                self._lose(f"a frame of {size} bytes")
                return
            if relayed and (self.on_relayed is None or size < 2):
                self._lose("a relayed frame this end does not take")
                return
            if len(buffer) - start - 4 < size:
                break
            body = bytes(buffer[start + 4 : start + 4 + size])
            start += 4 + size
            if relayed:
                self.on_relayed(body)
                continue
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

    def send_bytes(self, frame: bytes) -> None:
        """A frame already encoded (a relayed one)."""
        if self.closed or self.transport is None or self.transport.is_closing():
            return
        self.transport.write(frame)

    def _lose(self, why: str) -> None:
        if self.transport is not None:
            self.transport.close()
        self.connection_lost(LinkBroken(why))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closed:
            return
        self.closed = True
        self.on_lost("the link closed" if exc is None else str(exc))
