"""The committed batches in shared memory: written once by the core, read by
every HTTP worker and the orderer process (decision 125).

Streaming each committed batch down every link cost the core a frame, a
send and a wakeup per worker per batch (bench/fanout.py: 10-35 µs of its CPU
per reader per batch; with the 14 readers of a 16-core voter 0.14 ms per
batch of 30 records, 0.48 ms per batch of 200, on the one process that
cannot use a second core). Here the core copies each batch once into a ring
in a memfd that every
child maps read-only; a reader takes what it has not applied whenever it
looks (when an answer names an offset its image has not reached, and every
``FOLLOW_EVERY_S``). The link still carries a catch-up: a reader that finds
its next batch gone from the ring (lapped, or from before the ring) asks for
the batches from its offset (CATCH_UP), and the core answers over the link
from its retained log, or with an image.

No lock crosses the processes. The writer announces the end of what it is
about to write (``reserved``) before writing and publishes the end of what it
wrote (``published``) after; a reader that copied entries from ``start`` on
keeps them only if ``reserved`` had not lapped ``start`` when it finished,
and checks each copied entry's CRC-32 and the position stamped in it, which
catches what a weaker memory order than x86's could show out of order.

Layout: a 64-byte header (magic, data size, tail, reserved, published: the
last three logical byte positions that only grow), then the data area. An
entry at logical position p sits at data offset p % size and never wraps:
a WRAP entry (or too little room for one) sends readers to the next lap.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import mmap
import os
import struct
import time
import zlib
from collections.abc import Callable

from quorum.log_limiter import RateLimitedLog

log = logging.getLogger(__name__)

RING_BYTES = 64 << 20  # serve --batch-ring-mib; at 100k changes/s (~25 MB/s) 2.5 s of batches
FOLLOW_EVERY_S = 0.005  # a reader's look when no answer prompts one: its reads' staleness
# Nothing new for this long: a reader stops looking and asks the core to wake
# it with the next batch (IDLE / WAKE), so an idle voter's workers do not
# wake 200 times a second each (1.6% of a core per worker, measured).
IDLE_AFTER_S = 0.1

_MAGIC = b"MQRING1\0"
_HEADER = struct.Struct("<8sQQQQ")  # magic, data size, tail, reserved, published
_TAIL_AT, _RESERVED_AT, _PUBLISHED_AT = 16, 24, 32
_DATA = 64
_U64 = struct.Struct("<Q")
# length, record count, first offset, the entry's own position, CRC-32, padding
_ENTRY = struct.Struct("<IIQQII")
_WRAP = 0xFFFFFFFF
_TOO_BIG = 0xFFFFFFFE  # a batch larger than a quarter of the ring: over the link


def _aligned(n: int) -> int:
    return (n + 7) & ~7


def _crc(length: int, count: int, first: int, pos: int, payload) -> int:
    return zlib.crc32(payload, zlib.crc32(_ENTRY.pack(length, count, first, pos, 0, 0)))


class RingMissed(Exception):
    """The ring cannot give a reader its next batch: catch up over the link."""


class BatchRing:
    """The core's side: ``publish`` each committed batch, in offset order.
    One writer (the thread that applies batches)."""

    def __init__(self, size: int = RING_BYTES) -> None:
        if size % 8 or size < 4 * _ENTRY.size:
            raise ValueError(
                f"a batch ring's size must be a multiple of 8 and at least {4 * _ENTRY.size} "
                f"bytes, got {size}"
            )
        self.size = size
        self._fd = os.memfd_create("metaquorum-batches", 0)
        os.ftruncate(self._fd, _DATA + size)
        # Every page allocated and mapped now (MAP_POPULATE, ~35 ms for 64
        # MiB): the ring's memory is claimed at start, where a memory limit
        # too small for it fails at once, and the first lap's publishes cost
        # what later ones do (180 -> 70 us for 170 KB, no page faults).
        self._map = mmap.mmap(self._fd, _DATA + size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
        _HEADER.pack_into(self._map, 0, _MAGIC, size, 0, 0, 0)
        self._end = 0
        self._starts: collections.deque[int] = collections.deque()  # entries in the ring

    def fileno(self) -> int:
        """The memfd a child maps (passed at spawn)."""
        return self._fd

    def publish(self, first_offset: int, count: int, payload: bytes) -> None:
        size = self.size
        length = len(payload)
        if _ENTRY.size + length > size // 4:
            length, payload = _TOO_BIG, b""
        need = _aligned(_ENTRY.size + len(payload))
        pos = self._end
        phys = pos % size
        wrap_at = None
        if size - phys < need:
            wrap_at = pos if size - phys >= _ENTRY.size else None
            pos += size - phys
            phys = 0
        end = pos + need
        starts = self._starts
        while starts and starts[0] < end - size:
            starts.popleft()
        tail = starts[0] if starts else pos
        data = self._map
        _U64.pack_into(data, _RESERVED_AT, end)
        _U64.pack_into(data, _TAIL_AT, tail)
        if wrap_at is not None:
            _ENTRY.pack_into(data, _DATA + wrap_at % size, _WRAP, 0, 0, wrap_at, 0, 0)
        crc = _crc(length, count, first_offset, pos, payload)
        at = _DATA + phys
        _ENTRY.pack_into(data, at, length, count, first_offset, pos, crc, 0)
        data[at + _ENTRY.size : at + _ENTRY.size + len(payload)] = payload
        _U64.pack_into(data, _PUBLISHED_AT, end)
        starts.append(pos)
        self._end = end


class RingReader:
    """A child's side: ``read`` the batches after its image's next offset."""

    def __init__(self, fd: int) -> None:
        # Mapped at once too (the pages exist: the core populated them).
        self._map = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=mmap.PROT_READ)
        os.close(fd)
        magic, self.size, *_ = _HEADER.unpack_from(self._map, 0)
        if magic != _MAGIC or len(self._map) != _DATA + self.size:
            raise ValueError("the batch ring's memfd does not hold a metaquorum batch ring")
        self.pos: int | None = None  # where the next read starts; None: at the tail

    def _load(self, at: int) -> int:
        return _U64.unpack_from(self._map, at)[0]

    def read(self, next_offset: int) -> list[tuple[int, int, bytes]]:
        """The batches from ``next_offset`` on, as far as the ring holds them
        now (offsets below it are skipped); RingMissed if it no longer or
        never held the one that starts there."""
        data, size = self._map, self.size
        published = self._load(_PUBLISHED_AT)
        if self.pos is None:
            self.pos = self._load(_TAIL_AT)
        start = pos = self.pos
        if pos >= published:
            return []
        if published - pos > size:
            self.pos = None
            raise RingMissed(f"the ring lapped this reader (at offset {next_offset})")
        batches = []
        try:
            while pos < published:
                phys = pos % size
                if size - phys < _ENTRY.size:
                    pos += size - phys
                    continue
                length, count, first, stamp, crc, _ = _ENTRY.unpack_from(data, _DATA + phys)
                if stamp != pos:
                    raise RingMissed(f"the entry at ring position {pos} was overwritten")
                if length == _WRAP:
                    pos += size - phys
                    continue
                body = 0 if length == _TOO_BIG else length
                if _ENTRY.size + body > size - phys:
                    raise RingMissed(f"the entry at ring position {pos} is not whole")
                if first + count <= next_offset:
                    pos += _aligned(_ENTRY.size + body)
                    continue
                if first != next_offset:
                    raise RingMissed(
                        f"the ring goes on at offset {first}, this reader at {next_offset}"
                    )
                if length == _TOO_BIG:
                    raise RingMissed(f"the batch at offset {first} is too large for the ring")
                at = _DATA + phys + _ENTRY.size
                payload = data[at : at + length]
                if _crc(length, count, first, pos, payload) != crc:
                    raise RingMissed(f"the entry at ring position {pos} changed while read")
                batches.append((first, count, payload))
                next_offset += count
                pos += _aligned(_ENTRY.size + length)
            if self._load(_RESERVED_AT) - size > start:
                raise RingMissed(f"the ring lapped this reader (at offset {next_offset})")
        except RingMissed:
            self.pos = None
            raise
        self.pos = pos
        return batches

    def close(self) -> None:
        self._map.close()


class RingFollower:
    """Keeps one image up with the ring: ``poll`` applies what is new; when
    the ring cannot serve, asks the core once over the link (``ask(offset)``)
    and reads the ring again once ``caught_up`` says the answer came. After
    IDLE_AFTER_S with nothing new it stops looking (``idle(offset)`` tells the
    core) until ``wake`` (the core's WAKE, sent with the next batch)."""

    def __init__(
        self,
        reader: RingReader,
        next_offset: Callable[[], int],
        apply: Callable[[list], None],
        ask: Callable[[int], None],
        idle: Callable[[int], None],
        who: str,
    ) -> None:
        self.reader = reader
        self._next_offset = next_offset
        self._apply = apply
        self._ask = ask
        self._idle = idle
        self.who = who
        self.asked: int | None = None  # the offset a catch-up was asked from
        self.catch_ups = 0
        self.active = False  # an image is loaded: there is an offset to follow from
        self.sleeping = False  # told the core it is idle: woken by WAKE
        self._empty_since: float | None = None
        self._looking = False  # started and not stopped: a timer looks every FOLLOW_EVERY_S
        self._timer: asyncio.TimerHandle | None = None
        self._said = RateLimitedLog(log, period_s=60.0, burst=3)

    def start(self) -> None:
        self._looking = True
        self._arm()

    def stop(self) -> None:
        self.active = self._looking = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.reader.close()

    def _arm(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(FOLLOW_EVERY_S, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.poll()
        if not self.sleeping:
            self._arm()

    def wake(self) -> None:
        """The core's WAKE: a batch came after this reader went idle."""
        if self.active:
            self._resume()
            self.poll()

    def _resume(self) -> None:
        self.sleeping = False
        self._empty_since = None
        if self._timer is None and self._looking:
            self._arm()

    def poll(self) -> None:
        if not self.active or self.asked is not None:
            return
        offset = self._next_offset()
        try:
            batches = self.reader.read(offset)
        except RingMissed as e:
            self.asked = offset
            self.catch_ups += 1
            self._said.info("%s catches up over its link from offset %d: %s", self.who, offset, e)
            self._ask(offset)
            return
        if batches:
            self._apply(batches)
            if self.sleeping:  # an answer's look found them first
                self._resume()
            self._empty_since = None
            return
        now = time.monotonic()
        if self._empty_since is None:
            self._empty_since = now
        elif not self.sleeping and now - self._empty_since >= IDLE_AFTER_S:
            self.sleeping = True
            self._idle(offset)

    def caught_up(self) -> None:
        """The link brought batches or an image: follow the ring from there."""
        self.active = True
        self.asked = None
        self._resume()
        self.poll()
