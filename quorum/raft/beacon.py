"""Liveness beacons: the leader's "I still lead", on a path that its Raft
thread's applies, journal syncs and long ticks cannot hold up.

A follower finds a hung leader by its silence (quorum/raft/election_timing.py:
0.5 s by default). pysyncobj sends AppendEntries from the same thread that
applies committed batches and syncs the journal, so under the heaviest load
a healthy leader could fall silent for that long and be deposed (a false
election: writes stall for the failover and every broker's session restarts).
Beacons take that off the election's path:

* **The leader** sends a small datagram (UDP, to each voter's Raft host and
  port) every heartbeat period from a thread of its own, while it leads and
  while its Raft thread keeps ticking: a tick thread stuck for
  ``stall_s`` (a journal sync that never returns) stops the beacons, and its
  followers replace it ``stall_s`` plus one election timeout later.
* **A follower** counts a beacon from the leader it follows, at the term it
  follows it in, as word from that leader: its election deadline and its
  lease (quorum/raft/pre_vote.py) move on as for an AppendEntries.
* A frozen process (SIGSTOP, a stalled VM) or a dropped link sends no beacon
  either, so a hung leader is found as fast as before.

Beacons only ever keep a leader; they never elect one, carry no entries and
change no term, so Raft's safety does not depend on them, and a network that
drops UDP only loses their margin (the voters then go by AppendEntries alone,
as without beacons). Each datagram is authenticated with a key derived from
the Raft secret (HMAC-SHA256), and a follower takes a sender's beacons only in
increasing (term, sequence) order, so a forged or replayed one is dropped.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..log_limiter import RateLimitedLog

log = logging.getLogger(__name__)
refusal_log = RateLimitedLog(log, period_s=60.0, burst=3)

MAGIC = b"MQB1"
_BODY = struct.Struct(">iQQ")  # node id, Raft term, sequence
_MAC_BYTES = 16
SIZE = len(MAGIC) + _BODY.size + _MAC_BYTES
DNS_CACHE_S = 2.0  # as pysyncobj's dnsCacheTime here


@dataclass(frozen=True)
class Beacon:
    node_id: int
    term: int
    seq: int


def beacon_key(raft_secret: str) -> bytes:
    """The beacons' HMAC key: derived from the Raft secret, never the secret itself."""
    return hashlib.sha256(b"metaquorum liveness beacon\0" + raft_secret.encode()).digest()


def seal(key: bytes, beacon: Beacon) -> bytes:
    body = MAGIC + _BODY.pack(beacon.node_id, beacon.term, beacon.seq)
    return body + hmac.new(key, body, hashlib.sha256).digest()[:_MAC_BYTES]


def unseal(key: bytes, data: bytes) -> Beacon | None:
    """The beacon in ``data``, or None for anything not sealed with ``key``."""
    if len(data) != SIZE or not data.startswith(MAGIC):
        return None
    body, mac = data[:-_MAC_BYTES], data[-_MAC_BYTES:]
    if not hmac.compare_digest(mac, hmac.new(key, body, hashlib.sha256).digest()[:_MAC_BYTES]):
        return None
    node_id, term, seq = _BODY.unpack(body[len(MAGIC) :])
    return Beacon(node_id, term, seq)


class BeaconBook:
    """What a voter heard: each sender's latest beacon and when. Pure (the
    clock is an argument); one thread writes, the Raft thread reads single
    dict entries."""

    def __init__(self) -> None:
        self._latest: dict[int, tuple[int, int, float]] = {}  # node id -> (term, seq, at)
        self.received = 0
        self.dropped = 0  # forged, malformed, replayed or out of order

    def take(self, beacon: Beacon | None, now: float) -> bool:
        if beacon is None:
            self.dropped += 1
            return False
        last = self._latest.get(beacon.node_id)
        if last is not None and (beacon.term, beacon.seq) <= last[:2]:
            self.dropped += 1
            return False
        self._latest[beacon.node_id] = (beacon.term, beacon.seq, now)
        self.received += 1
        return True

    def heard(self, node_id: int | None, term: int) -> float | None:
        """When ``node_id`` last said it leads at ``term``, or None."""
        if node_id is None:
            return None
        last = self._latest.get(node_id)
        if last is None or last[0] != term:
            return None
        return last[2]


@dataclass
class BeaconPort:
    """What the beacon thread asks of its voter (each called on that thread)."""

    node_id: int
    bind: tuple[str, int]  # this voter's Raft host and port; UDP on the same port
    peers: Callable[[], list[str]]  # the other voters' Raft "host:port"
    leading_term: Callable[[], int | None]  # the term this voter leads in, else None
    ticked_at: Callable[[], float]  # monotonic time the Raft thread last began a tick


class BeaconThread:
    """Sends this voter's beacons while it leads and takes the others'."""

    def __init__(
        self, port: BeaconPort, key: bytes, period_s: float, stall_s: float, book: BeaconBook
    ) -> None:
        self.port = port
        self.key = key
        self.period_s = period_s
        self.stall_s = stall_s
        self.book = book
        self.sent = 0
        self.withheld = 0  # periods skipped because the Raft thread was stuck
        self._seq = 0
        self._addresses: dict[str, tuple[float, tuple | None]] = {}
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_INET6 if ":" in port.bind[0] else socket.AF_INET,
                                   socket.SOCK_DGRAM)  # fmt: skip
        self._sock.setblocking(False)
        self._sock.bind(port.bind)
        self._thread = threading.Thread(target=self._run, name="mq-beacon", daemon=True)

    def counters(self) -> dict[str, int]:
        """For the status's ``elections.beacons`` (any thread: plain int reads)."""
        return {
            "sent": self.sent,
            "withheld": self.withheld,
            "received": self.book.received,
            "dropped": self.book.dropped,
        }

    def start(self) -> BeaconThread:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def _run(self) -> None:
        next_send = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_send:
                self._send(now)
                next_send = now + self.period_s
            try:
                readable, _, _ = select.select([self._sock], [], [], max(0.0, next_send - now))
            except (OSError, ValueError):
                return  # closed by stop()
            if readable:
                self._receive()

    def _receive(self) -> None:
        for _ in range(64):  # what has arrived, then back to the clock
            try:
                data, source = self._sock.recvfrom(SIZE + 1)
            except BlockingIOError:
                return
            except OSError:
                return
            if not self.book.take(unseal(self.key, data), time.monotonic()):
                refusal_log.info("dropped a liveness beacon from %s: not sealed with "
                                 "this cluster's Raft secret, or replayed", source[0])  # fmt: skip

    def _send(self, now: float) -> None:
        term = self.port.leading_term()
        if term is None:
            return
        if now - self.port.ticked_at() > self.stall_s:
            self.withheld += 1  # the Raft thread is stuck: let the followers see it
            return
        self._seq += 1
        datagram = seal(self.key, Beacon(self.port.node_id, term, self._seq))
        for peer in self.port.peers():
            address = self._resolve(peer, now)
            if address is None:
                continue
            try:
                self._sock.sendto(datagram, address)
                self.sent += 1
            except OSError:
                pass  # unreachable now; the next period tries again

    def _resolve(self, peer: str, now: float) -> tuple | None:
        cached = self._addresses.get(peer)
        if cached is not None and cached[0] > now:
            return cached[1]
        host, _, port = peer.rpartition(":")
        try:
            infos = socket.getaddrinfo(host.strip("[]"), int(port), self._sock.family,
                                       socket.SOCK_DGRAM)  # fmt: skip
            address = infos[0][4] if infos else None
        except (OSError, ValueError):
            address = None
        self._addresses[peer] = (now + DNS_CACHE_S, address)
        return address
