"""Hardening of pysyncobj's Raft port (docs/pysyncobj.md 0.9, 4.2, 6.1).

pysyncobj's wire format is a signed 32-bit length, then a token encrypted
with a key from the password, holding zlib-compressed pickle. pysyncobj's own
token is Fernet's (AES-CBC, HMAC-SHA256, base64): metaquorum uses AES-256-GCM
instead (``RaftCipher``), which took the bench's one-batch-in-flight
replication from 47.8k to 57.0k records/s (median of eight A/B rounds). Three
holes, closed here:

* **Oversized frames.** pysyncobj buffers a frame until its declared length has
  arrived, however large (up to 2 GiB), by repeated ``bytes +=`` (quadratic).
  Anyone who can reach the port could balloon a voter's memory and stall its
  tick thread. We disconnect as soon as a frame's header declares more than a
  limit: small until the connection has shown it knows the secret (a frame
  decrypted), large enough for our biggest AppendEntries afterwards.
* **Admin ("utility") commands** (``syncobj_admin``: status, add, remove,
  set_version, transfer) are answered for anyone holding the secret, outside
  the HTTP API's auth. metaquorum refuses them all; its own HTTP endpoints do
  the same jobs with tokens.
* **No secret on a lone voter** would leave a pickle port open to anyone
  (remote code execution): a lone voter without ``--raft-secret-file`` gets a
  random secret nobody else knows (no other voter needs to connect to it).

The port also carries voter-set notices (quorum/voter_set_notice.py): a
voter dialled from an address it does not list says which voter set it
applied before pysyncobj drops the connection, and a voter asks the voters it
never dials (pysyncobj dials only from the larger address) on a connection
of its own, so one removed while it was down learns it.

pysyncobj's TcpConnection keeps its buffer in name-mangled attributes, so this
patches them by name; pinned to pysyncobj 0.3.17 (as quorum/raft/durability.py).
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import struct
import threading
import time
import weakref
import zlib
from collections.abc import Callable

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pysyncobj.monotonic import monotonic
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.transport import TCPTransport

from .. import stage_trace
from ..leadership_events import EVENTS_ATTR, LeadershipEvents
from ..log_limiter import RateLimitedLog
from ..voter_guard import HELLO, VoterGuard
from ..voter_set_notice import NOTICE, NOTICE_REQUEST
from .pre_vote import PRE_VOTE_ANSWER, PRE_VOTE_ATTR, TERM_AHEAD

log = logging.getLogger(__name__)
# Anyone who reaches the port can make a connection be dropped: a few lines a minute.
dropped_log = RateLimitedLog(log, period_s=60.0, burst=5)

# Before a connection proved it knows the secret: the first frame of a peer is a
# token of a 32-byte key (under 100 bytes); anything far above is hostile.
MAX_UNTRUSTED_FRAME_BYTES = 64 << 10
# A proven peer: AppendEntries carry up to 4 MiB of entries (node.py), which
# pickle (and zlib, on noise) can grow; snapshots go in 64 KiB chunks.
MAX_FRAME_BYTES = 64 << 20

_TRUSTED = "_metaquorum_trusted"

# How often a voter asks a voter it never dials (pysyncobj's larger address
# dials) for its voter set while that voter is not connected to it, and how
# long one such question may take.
PROBE_INTERVAL_S = 1.0
PROBE_TIMEOUT_S = 5.0
# A voter whose Raft address is not the one the voter set names asks the
# voters it lists this often to move it (UpdateRaftVoter, quorum/membership.py
# rule 6); the leader answers at once and makes the change on its loop.
UPDATE_VOTER_REQUEST = "metaquorum_update_voter"
UPDATE_ASK_INTERVAL_S = 1.0


class InvalidRaftToken(ValueError):
    """A frame that is not a token of this cipher (pysyncobj drops the peer)."""


class RaftCipher:
    """AES-256-GCM for pysyncobj's Raft port, in place of its Fernet; the same
    three methods pysyncobj calls (``encrypt_at_time``, ``extract_timestamp``,
    ``decrypt``). A token is a version byte, pysyncobj's timestamp (8 bytes),
    a 12-byte nonce, then the ciphertext with its 16-byte tag; the version and
    timestamp are authenticated with it (pysyncobj refuses a timestamp older
    than the last one on a connection).

    The key comes from the secret by PBKDF2-HMAC-SHA256 (100,000 rounds, as
    pysyncobj's). A nonce is never reused under the key: 8 random bytes drawn
    per process (and again every 2**32 tokens) followed by a counter, so two
    voters repeat one only if they draw the same 64 random bits.

    Voters with pysyncobj's Fernet (metaquorum before this) and voters with
    this cipher cannot talk: upgrade every voter of a cluster together."""

    VERSION = 1
    _HEAD = struct.Struct(">BQ")
    _NONCE_BYTES = 12
    _TAG_BYTES = 16
    _SALT = b"metaquorum raft port aes-256-gcm v1"
    _ROUNDS = 100_000

    def __init__(self, password: str | bytes) -> None:
        secret = password.encode() if isinstance(password, str) else password
        self._aead = AESGCM(hashlib.pbkdf2_hmac("sha256", secret, self._SALT, self._ROUNDS, 32))
        self._lock = threading.Lock()
        self._prefix = os.urandom(8)
        self._counter = 0

    def _nonce(self) -> bytes:
        with self._lock:
            if self._counter > 0xFFFFFFFF:
                self._prefix, self._counter = os.urandom(8), 0
            n = self._counter
            self._counter += 1
            return self._prefix + n.to_bytes(4, "big")

    def encrypt_at_time(self, data: bytes, current_time: int) -> bytes:  # pysyncobj's names
        head = self._HEAD.pack(self.VERSION, current_time)
        nonce = self._nonce()
        return head + nonce + self._aead.encrypt(nonce, data, head)

    def _check(self, token: bytes) -> None:
        if len(token) < self._HEAD.size + self._NONCE_BYTES + self._TAG_BYTES:
            raise InvalidRaftToken(f"a token of {len(token)} bytes is too short")
        if token[0] != self.VERSION:
            raise InvalidRaftToken(f"token version {token[0]} (this voter speaks {self.VERSION})")

    def extract_timestamp(self, token: bytes) -> int:
        self._check(token)
        return self._HEAD.unpack_from(token)[1]

    def decrypt(self, token: bytes) -> bytes:
        """The plaintext; raises if the token was not made with this key or was
        changed in any byte."""
        self._check(token)
        head, body = self._HEAD.size, self._HEAD.size + self._NONCE_BYTES
        return self._aead.decrypt(token[head:body], token[body:], token[:head])


def cipher(_original) -> type[RaftCipher]:
    """pysyncobj builds its encryptor with a module-level ``getEncryptor``:
    RaftCipher takes its place (quorum/raft/patches.py)."""
    return RaftCipher


# pysyncobj pickles every Raft message and every replicated call with protocol
# 2, which has no opcode for bytes: a batch's payload went through a latin-1
# str and back, 232 µs to pickle and 211 µs to unpickle a 46 KB batch against
# 1.6 and 1.4 µs with protocol 4 (decision 126), once at propose, once per
# follower's AppendEntries, once on every voter's apply and again on each
# follower's receipt. Every Python 3.4+ reads protocol 4, and pickle.loads
# reads either, so voters on both sides of an upgrade understand each other,
# and journals written before it still replay.
PICKLE_PROTOCOL = 4  # for pysyncobj/pickle.py's module global __protocol (0.3.17)


def pickle_protocol(original) -> int:
    """pysyncobj's pickling at PICKLE_PROTOCOL (quorum/raft/patches.py)."""
    if not isinstance(original, int):
        raise RuntimeError(
            "this pysyncobj has no pickle protocol to set: pin the pysyncobj of pyproject.toml"
        )
    return PICKLE_PROTOCOL


# Speed switch: a Raft message under STORED_UNDER_BYTES goes out as a zlib
# stream of stored blocks (level 0) instead of compressed at level 3. For a
# small message deflate's setup is nearly all the cost (500 bytes: 5.7 µs at
# level 3 against 0.8 stored, with the voters' malloc tuning) and it saves a
# few dozen bytes; a lone write sends four such messages (the AppendEntries to
# each follower and their answers), heartbeats one each (issue 46). Every
# peer's zlib.decompress reads either, so voters before and after this talk.
# Plain twin: every message at pysyncobj's level 3.
STORED_SMALL_FRAMES = True
STORED_UNDER_BYTES = 4096


class FrameZlib:
    """What pysyncobj.tcp_connection calls ``zlib`` (its ``compress(data, 3)``
    on send and ``decompress`` on receipt), in place of the module
    (quorum/raft/patches.py)."""

    decompress = staticmethod(zlib.decompress)

    @staticmethod
    def compress(data: bytes, level: int = -1) -> bytes:
        if STORED_SMALL_FRAMES and len(data) < STORED_UNDER_BYTES:
            level = 0
        return zlib.compress(data, level)


def frame_zlib(original) -> type[FrameZlib]:
    """pysyncobj's ``zlib`` for its frames (quorum/raft/patches.py)."""
    if getattr(original, "compress", None) is not zlib.compress:
        raise RuntimeError(
            "pysyncobj.tcp_connection has no zlib module to replace: "
            "pin the pysyncobj of pyproject.toml"
        )
    return FrameZlib


class FrameRejected(Exception):
    """Why a connection was dropped (logged, never raised into pysyncobj)."""


def frame_limit(conn: TcpConnection) -> int:
    return MAX_FRAME_BYTES if getattr(conn, _TRUSTED, False) else MAX_UNTRUSTED_FRAME_BYTES


def check_frame_header(buffer: bytes, limit: int) -> None:
    """Raises FrameRejected if the frame at the start of ``buffer`` declares a
    negative length or more than ``limit`` bytes."""
    if len(buffer) < 4:
        return
    (length,) = struct.unpack_from("i", buffer)  # native, as pysyncobj packs it
    if length < 0 or length > limit:
        raise FrameRejected(f"a frame declares {length} bytes (limit {limit})")


# The frame limits: three wrappers of pysyncobj's TcpConnection (quorum/raft/patches.py).


def guarded_read(read: Callable) -> Callable:
    """A connection whose next frame declares more than its limit is dropped."""

    def guarded_read(self: TcpConnection) -> bool:
        more = read(self)
        try:
            check_frame_header(self._TcpConnection__readBuffer, frame_limit(self))
        except FrameRejected as e:
            dropped_log.warning("Raft port: dropping a connection: %s", e)
            self.disconnect()
            return False
        return more

    return guarded_read


def tracking_parse(parse: Callable) -> Callable:
    """A connection that decrypted a message is trusted."""

    def tracking_parse(self: TcpConnection):
        message = parse(self)
        if message is not None and self.encryptor is not None:
            setattr(self, _TRUSTED, True)  # it decrypted: the peer has the secret
        return message

    return tracking_parse


def resetting_disconnect(disconnect: Callable) -> Callable:
    """A closed connection is untrusted again (pysyncobj reuses the object)."""

    def resetting_disconnect(self: TcpConnection) -> None:
        setattr(self, _TRUSTED, False)
        disconnect(self)

    return resetting_disconnect


# Received, these make pysyncobj store entries, a term or a vote; sent, these
# promise that something is stored (an acknowledgement, a vote, a candidacy),
# or take part in an election (a pre-vote answer).
_WRITES_ON_RECEIPT = frozenset({"append_entries", "request_vote", "timeout_now", TERM_AHEAD})
_PROMISES = frozenset({"next_node_idx", "response_vote", "request_vote", PRE_VOTE_ANSWER})


def _refuse(args, callback):
    raise PermissionError(
        "pysyncobj admin commands are disabled on metaquorum's Raft port; "
        "use the HTTP API (metaquorum status / transfer-leadership)"
    )


def _mark_message(entries_stage: str, answer_stage: str, message) -> None:
    """stage_trace: an AppendEntries with entries (by its last index), or an
    answer to one (by the index it acknowledges)."""
    if not isinstance(message, dict):
        return
    kind = message.get("type")
    if kind == "append_entries" and message.get("entries"):
        stage_trace.TRACE.mark(entries_stage, message["entries"][-1][1])
    elif kind == "next_node_idx" and message.get("success"):
        stage_trace.TRACE.mark(answer_stage, message["next_node_idx"] - 1)


class GuardedTransport(TCPTransport):
    """pysyncobj's TCP transport with every admin command answered by a refusal
    (pysyncobj sends the exception's text back; nothing is changed). Set at
    construction, so there is no moment when the commands are accepted.

    ``before_ack`` (set by the node) runs before every answer to an
    AppendEntries leaves: the journal syncs there, so a follower never tells
    the leader it holds entries that are not on its disk."""

    before_ack: Callable[[], None] | None = None
    # Pre-vote (quorum/raft/pre_vote.py), set by the node: sees each message after
    # the voter guard's filter, and marks a transfer target's vote requests.
    on_pre_vote_message: Callable | None = None
    mark_vote_request: Callable[[dict], dict] | None = None
    on_node_disconnected: Callable | None = None  # pre-vote's rule 5
    # ``disk_writable`` (set by the node): while it answers False, messages
    # that would make this voter write (entries, a term, a vote) are dropped
    # unread, and no acknowledgement or vote leaves, as if this voter were
    # cut off (quorum/disk_health.py).
    disk_writable: Callable[[], bool] | None = None
    # Heartbeat gaps and leader changes (quorum/leadership_events.py), set by the node.
    events: LeadershipEvents | None = None
    # Voter identity (quorum/voter_guard.py): hellos and the filter on votes and
    # acknowledgements. None only in tests that build a bare transport.
    guard: VoterGuard | None = None
    # UpdateRaftVoter over the Raft port (RaftHost.answer_voter_updates): the
    # request this voter sends while its address is not the voter set's (or
    # None), and what it answers to one (set by the node; tick thread).
    update_request: Callable[[], dict | None] | None = None
    on_update_request: Callable[[dict], dict] | None = None

    def __init__(self, *args, **kwargs) -> None:
        # Voter-set questions in flight, by node: (connection, when asked).
        self._probes: dict = {}
        self._probed_at: dict = {}
        # UpdateRaftVoter requests in flight, by node; when last sent.
        self._update_asks: dict = {}
        self._update_asked_at = -1e18
        super().__init__(*args, **kwargs)
        if self.guard is not None:
            self.guard.send_hello = self._send_hellos  # tick thread, like every send

    @classmethod
    def with_guard(cls, guard: VoterGuard) -> type[GuardedTransport]:
        """The class to hand pysyncobj (it builds the transport itself): the
        guard is in place before the first connection."""
        return type(cls.__name__, (cls,), {"guard": guard})

    def _send_hellos(self) -> None:
        if self._selfIsReadonlyNode:
            return  # an observer is nobody's voter: it says no hello
        message = self.guard.hello().to_message()
        for node in list(self._nodes):
            super().send(node, message)

    def _onNodeConnected(self, node):  # noqa: N802 - pysyncobj's name
        guard = self.guard
        if guard is not None and not self._selfIsReadonlyNode:
            super().send(node, guard.hello().to_message())  # the first message, always
        super()._onNodeConnected(node)

    def _onNodeDisconnected(self, node):  # noqa: N802 - pysyncobj's name
        guard = self.guard
        if guard is not None:
            guard.forget(guard.node_id_of(getattr(node, "id", "")))
        if self.on_node_disconnected is not None:
            self.on_node_disconnected(node)
        super()._onNodeDisconnected(node)

    def _onIncomingMessageReceived(self, conn, message):  # noqa: N802 - pysyncobj's name
        guard = self.guard
        if guard is not None and isinstance(message, list) and message[:1] == [NOTICE_REQUEST]:
            # A voter's question (``_probe``), past the key exchange: the answer,
            # then the asker closes; pysyncobj's state is not touched.
            notice = guard.notice()
            if notice is None:
                conn.disconnect()
            else:
                conn.send(notice.to_message())
            return
        if (
            guard is not None
            and isinstance(message, list)
            and message[:1] == [UPDATE_VOTER_REQUEST]
            and (conn.sendRandKey or not self._syncObj.encryptor)  # past the key exchange
        ):
            # A voter at a new address asks to be moved (``_ask_to_move``).
            hook = self.on_update_request
            payload = message[1] if len(message) == 2 else None
            if hook is None or not isinstance(payload, dict):
                conn.disconnect()
            else:
                conn.send(hook(payload))
            return
        if (
            guard is not None
            and isinstance(message, str)
            and message != "readonly"
            and message not in self._nodeAddrToNode
            and (conn.sendRandKey or not self._syncObj.encryptor)  # past the key exchange
        ):
            # A node this voter does not list (pysyncobj drops it next): if it
            # was removed while down, this tells it so (quorum/voter_set_notice.py).
            notice = guard.notice()
            if notice is not None:
                conn.send(notice.to_message())
        super()._onIncomingMessageReceived(conn, message)

    def _connectIfNecessary(self):  # noqa: N802 - pysyncobj's name; tick thread
        super()._connectIfNecessary()
        self._ask_to_move()
        guard = self.guard
        if guard is None or self._selfIsReadonlyNode or not guard.admitted:
            return  # only a node that holds itself a voter can have missed its removal
        now = time.monotonic()
        for node in list(self._nodes):
            if self._shouldConnect(node):
                continue  # it dials: a voter that no longer lists it answers the dial
            conn = self._connections.get(node)
            if conn is not None and conn.state != CONNECTION_STATE.DISCONNECTED:
                continue
            probe = self._probes.get(node)
            if probe is not None and now - probe[1] > PROBE_TIMEOUT_S:
                probe[0].disconnect()
            if (
                node not in self._probes
                and now - self._probed_at.get(node, -1e18) >= PROBE_INTERVAL_S
            ):
                self._probed_at[node] = now
                self._probe(node, now)

    def _ask_to_move(self) -> None:
        """While this voter's Raft address is not the one the voter set names,
        asks every voter it lists, once a second, to move it (Kafka's voter
        sends UpdateRaftVoter to the leader at start when its endpoints differ
        from the voter set's). Its peers do not know its new address yet, so
        pysyncobj's own connections to them are dropped: each ask is a
        connection of its own, as ``_probe``'s; the leader answers."""
        make = self.update_request
        if make is None or self._selfIsReadonlyNode:
            return
        now = time.monotonic()
        if now - self._update_asked_at < UPDATE_ASK_INTERVAL_S:
            return
        self._update_asked_at = now  # looked at once a second, not every tick
        request = make()
        if request is None:
            return
        for node in list(self._nodes):
            ask = self._update_asks.get(node)
            if ask is not None and now - ask[1] > PROBE_TIMEOUT_S:
                ask[0].disconnect()
            if node not in self._update_asks:
                self._one_shot(
                    node,
                    now,
                    [UPDATE_VOTER_REQUEST, request],
                    self._update_asks,
                    _log_update_answer,
                )

    def _probe(self, node, now: float) -> None:
        """Asks a voter this node never dials, and that does not dial it, for
        its voter set (quorum/voter_set_notice.py): a voter that was removed
        while it was down is never dialled again, and pysyncobj only dials a
        smaller address. A connection of its own, under the Raft secret, that
        pysyncobj never sees; closed once answered."""
        sender = self.guard.node_id_of(node.address)

        def answered(message) -> None:
            if isinstance(message, dict) and message.get("type") == NOTICE:
                self.guard.on_notice(sender, message)

        self._one_shot(node, now, [NOTICE_REQUEST], self._probes, answered)

    def _one_shot(self, node, now: float, request: list, pending: dict, answered) -> None:
        """One question on a connection of its own, under the Raft secret, that
        pysyncobj never sees; ``answered(message)`` takes the answer, then the
        connection closes. ``pending[node]`` holds it while it is open."""
        syncobj = self._syncObj
        conn = TcpConnection(
            poller=syncobj._poller,
            timeout=syncobj.conf.connectionTimeout,
            sendBufferSize=syncobj.conf.sendBufferSize,
            recvBufferSize=syncobj.conf.recvBufferSize,
            keepalive=syncobj.conf.tcp_keepalive,
        )
        conn.encryptor = syncobj.encryptor

        def connected() -> None:
            if conn.encryptor:  # pysyncobj's key exchange, as its own dial does
                conn.recvRandKey = os.urandom(32)
                conn.send(conn.recvRandKey)
            else:
                conn.send(request)

        def received(message) -> None:
            if conn.encryptor and not conn.sendRandKey:
                conn.sendRandKey = message
                conn.send(request)
                return
            answered(message)
            conn.disconnect()

        def disconnected() -> None:
            if pending.get(node, (None,))[0] is conn:
                del pending[node]

        conn.setOnConnectedCallback(connected)
        conn.setOnMessageReceivedCallback(received)
        conn.setOnDisconnectedCallback(disconnected)
        pending[node] = (conn, now)
        if not conn.connect(node.ip, node.port):
            disconnected()

    def _onMessageReceived(self, node, message):  # noqa: N802 - pysyncobj's name
        guard = self.guard
        node_id = None
        if guard is not None:
            node_id = guard.node_id_of(getattr(node, "id", ""))
            if isinstance(message, dict) and message.get("type") == NOTICE:
                guard.on_notice(node_id, message)
                return
            if isinstance(message, dict) and message.get("type") == HELLO:
                if not guard.on_hello(node_id, message):
                    conn = self._connections.get(node)
                    if conn is not None:
                        conn.disconnect()
                return
            message = guard.filter(node_id, message)
            if message is None:
                return
        if self._disk_blocks(message, _WRITES_ON_RECEIPT):
            return
        if (
            self.events is not None
            and isinstance(message, dict)
            and message.get("type") == "append_entries"
        ):
            self.events.heard(node, time.monotonic())
        if self.on_pre_vote_message is not None:
            message = self.on_pre_vote_message(node, node_id, message)
            if message is None:
                return
        if stage_trace.TRACE is not None:
            _mark_message("received", "ack_in", message)
        super()._onMessageReceived(node, message)

    def send(self, node, message):
        if self._disk_blocks(message, _PROMISES):
            return None
        if isinstance(message, dict):
            kind = message.get("type")
            if kind == "next_node_idx" and self.before_ack is not None:
                self.before_ack()
            elif kind == "request_vote" and self.mark_vote_request is not None:
                message = self.mark_vote_request(message)
            if stage_trace.TRACE is not None:
                sent = super().send(node, message)
                _mark_message("sent", "acked", message)
                return sent
        return super().send(node, message)

    def _disk_blocks(self, message, types: frozenset[str]) -> bool:
        writable = self.disk_writable
        return (
            writable is not None
            and isinstance(message, dict)
            and message.get("type") in types
            and not writable()
        )

    def destroy(self):
        for conn, _ in [*self._probes.values(), *self._update_asks.values()]:
            conn.disconnect()
        super().destroy()

    def setOnUtilityMessageCallback(self, message, callback):  # noqa: N802 - pysyncobj's name
        super().setOnUtilityMessageCallback(message, _refuse if callback else None)


_update_log = RateLimitedLog(log, 30.0, burst=2)


def _log_update_answer(message) -> None:
    """The leader's answer to this voter's ask to be moved (others say who leads)."""
    if isinstance(message, dict) and message.get("errorName") in ("NONE", None):
        if message.get("accepted"):
            _update_log.info("the leader is moving this voter: %s", message)
    elif isinstance(message, dict) and message.get("errorName") != "NOT_LEADER_OR_FOLLOWER":
        _update_log.warning("the leader refused to move this voter: %s", message)


def raft_password(secret: str | None, voters: int) -> str:
    """The Raft port's password: the configured secret, or for a lone voter
    without one, a random secret (nobody needs to connect to it)."""
    if secret:
        return secret
    if voters > 1:  # NodeConfig refuses this; never fall back to an open port
        raise ValueError("a multi-voter cluster needs a Raft secret")
    return secrets.token_urlsafe(32)


def keep_next_index_forward(original: Callable) -> Callable:
    """A late acknowledgement never moves a follower's next index back.

    pysyncobj's leader sets a follower's next index to what each successful
    answer names. Answers to older messages (an empty heartbeat, a batch sent
    before the last) arrive after newer entries went out, so the next index
    falls back, the entries are sent again, and the follower truncates the
    copies it already had (and had applied: pysyncobj logs "truncating
    already-applied log entries" at CRITICAL) and writes them again. Raft's
    consistency check does not need the index to move back on success; a
    follower that really lacks entries answers with ``reset`` and is reset as
    before. Wraps ``SyncObj.__onMessageReceived`` (quorum/raft/patches.py)."""

    def on_message(self, node, message):
        if (
            isinstance(message, dict)
            and message.get("type") == "next_node_idx"
            and message.get("success")
            and not message.get("reset")
        ):
            next_index = self._SyncObj__raftNextIndex
            before = next_index.get(node)
            original(self, node, message)
            if before is not None and next_index.get(node, before) < before:
                next_index[node] = before
            return
        original(self, node, message)

    return on_message


_HEARD_A_LEADER = "_metaquorum_heard_a_leader"


def listen_before_electing(original: Callable) -> Callable:
    """A follower reads what has arrived before it decides the leader is gone.

    pysyncobj checks the election deadline at the start of a tick and reads
    its sockets at the end. A follower whose thread was held up past its
    deadline (its journal sync stalled on the disk, the process was not
    scheduled on a loaded machine) started an election with the leader's
    heartbeats still unread in its socket, and without pre-vote that election
    deposed a healthy leader (seen under 3x overload). Now an overdue follower
    reads its sockets first; the leader's AppendEntries push the deadline on
    as usual. A leader that is really gone sent nothing, so nothing is delayed.
    Each election this voter starts is logged (pysyncobj is silent about it).
    Wraps ``SyncObj._onTick`` (quorum/raft/patches.py)."""
    from pysyncobj.syncobj import _RAFT_STATE

    def on_tick(self, timeToWait=0.0):  # noqa: N803 - pysyncobj's name
        if (
            self._SyncObj__raftState != _RAFT_STATE.LEADER
            and self._SyncObj__selfNode is not None
            and self._SyncObj__raftElectionDeadline < monotonic()
            and self._SyncObj__transport.ready
        ):
            self._poller.poll(0)
        term = self._SyncObj__raftCurrentTerm
        transfer = self._SyncObj__transferInProgress
        original(self, timeToWait)
        # A new term while candidate or leader: this voter stood for election
        # (a higher term from another voter makes it a follower).
        if self._SyncObj__raftCurrentTerm != term and self._SyncObj__raftState in (
            _RAFT_STATE.CANDIDATE,
            _RAFT_STATE.LEADER,
        ):
            events = getattr(self, EVENTS_ATTR, None)
            if events is not None:
                events.election_started(_election_cause(self, transfer), time.monotonic())
                events.forget_heartbeats()
            if transfer:
                log.info(
                    "the leader hands leadership to this voter: it stands for election at "
                    "Raft term %d",
                    self._SyncObj__raftCurrentTerm,
                )
            elif getattr(self, _HEARD_A_LEADER, False):
                log.warning(
                    "no word from the leader within the election timeout: this "
                    "voter stands for election at Raft term %d",
                    self._SyncObj__raftCurrentTerm,
                )
            else:
                log.info(
                    "no leader known yet: this voter stands for election at Raft term %d",
                    self._SyncObj__raftCurrentTerm,
                )
        if self._SyncObj__raftLeader is not None:
            setattr(self, _HEARD_A_LEADER, True)
        if self._SyncObj__raftState == _RAFT_STATE.LEADER:
            events = getattr(self, EVENTS_ATTR, None)
            if events is not None:
                events.leader_is(self._SyncObj__selfNode)

    return on_tick


def _election_cause(syncobj, transfer: bool) -> str:
    """Why this voter just stood (quorum/leadership_events.py)."""
    if transfer:
        return "transfer"
    pre_vote = getattr(syncobj, PRE_VOTE_ATTR, None)
    if pre_vote is not None and pre_vote.leader_connection_closed:
        return "leader_connection_closed"
    return "leader_silent" if getattr(syncobj, _HEARD_A_LEADER, False) else "no_leader_yet"


def excuse_own_stall(syncobj, seconds: float) -> None:
    """Moves a follower's election deadline on by ``seconds`` its own thread
    spent in a journal sync: it could not hear the leader meanwhile, and a disk
    stall on shared storage holds the leader's sync (and heartbeats) at the
    same time. Only called after acknowledging an AppendEntries, i.e. while
    a leader is talking to this voter, so a dead leader is never excused."""
    syncobj._SyncObj__raftElectionDeadline += seconds


# How long a leader holds back the AppendEntries that only carry a moved commit
# index: the next batch, which carries it too, is normally proposed well within.
COMMIT_PUSH_DELAY_S = 0.002
# How long it holds it back after the orderer's own batch while the orderer
# may still propose another (it says when it will not: commit_push_may_go).
COMMIT_PUSH_HOLD_S = 0.02
_PUSH_DEFERRED = "_metaquorum_push_deferred"  # (delay_s, hold_s, count of held batches)
_PUSH_HELD_UNTIL = "_metaquorum_push_held_until"
_PUSH_MAY_GO = "_metaquorum_push_may_go"  # (how often the orderer said so, when last)
_NOT_SAID = (0, 0.0)
_PUSH_MAY_GO_SEEN = "_metaquorum_push_may_go_seen"  # how often the Raft thread acted on it


def deferred_commit_push(original_apply: Callable) -> Callable:
    """Wraps ``SyncObj.__applyLogEntries`` (quorum/raft/patches.py): on a
    leader that ``defer_commit_push`` set up, the AppendEntries that would
    only carry a moved commit index is due later instead of now. A SyncObj
    without it is unchanged."""
    from pysyncobj.syncobj import _RAFT_STATE

    def apply_log_entries(self):
        deferred = getattr(self, _PUSH_DEFERRED, None)
        if deferred is None:
            return original_apply(self)
        delay, hold, held = deferred
        before = held() if held is not None else 0
        need_send = original_apply(self)
        if need_send and self._SyncObj__raftState == _RAFT_STATE.LEADER:
            holding = held is not None and held() != before
            due = monotonic() + (hold if holding else delay)
            if due < self._SyncObj__newAppendEntriesTime:
                self._SyncObj__newAppendEntriesTime = due
                setattr(self, _PUSH_HELD_UNTIL, due if holding else None)
            return False
        return need_send

    return apply_log_entries


def defer_commit_push(
    syncobj,
    delay_s: float = COMMIT_PUSH_DELAY_S,
    hold_s: float = COMMIT_PUSH_HOLD_S,
    held_batches: Callable[[], int] | None = None,
) -> None:
    """The leader sends a moved commit index with the next batch, not alone.

    With ``appendEntriesUseBatch=False`` pysyncobj's leader sends an
    AppendEntries to every follower as soon as it applied a committed entry,
    only to carry the new commit index; each follower parses it, answers it,
    and the leader parses both answers. With one batch in flight the next
    batch follows a few hundred microseconds later and carries the same
    index, so that exchange doubled the messages per batch and sat on the
    Raft thread between one batch and the next (bench/quorum.py, batches of
    100, A/B in the same hour: 33-38k -> 44-50k records/s). Now the push is due ``delay_s``
    later; a batch sent before then carries the index and cancels it (any
    AppendEntries resets pysyncobj's heartbeat time). Followers learn a
    commit at most that much later when the leader is idle.

    ``held_batches`` counts the applied batches whose orderer decides what
    comes next once it hears of them (its own batches of records). After one
    of those the push waits up to ``hold_s`` instead: the orderer may take
    longer than ``delay_s`` to decide the requests that queued meanwhile (a
    batch of 100-partition requests, a crowded machine), and its next batch
    carries the index. When it proposes nothing it says so
    (``commit_push_may_go``, from one thread only), and the push is due
    ``delay_s`` from then, as after any other entry. Called again on the
    same voter, it only changes the delays.

    The leader's poller is capped to wake when its next AppendEntries is due,
    so the held-back push (and each heartbeat) goes out on time instead of up
    to one ``autoTickPeriod`` late, and, while a push is held, every
    ``delay_s`` to look for the orderer's word (which wakes no one). The leader's side is
    ``deferred_commit_push``, installed with the other patches."""
    from pysyncobj.syncobj import _RAFT_STATE

    if getattr(syncobj, _PUSH_DEFERRED, None) is None:
        poller = syncobj._poller
        original_poll = poller.poll
        voter = weakref.ref(syncobj)  # the poller must not keep its voter alive

        def poll(timeout):
            raft = voter()
            if raft is not None and raft._SyncObj__raftState == _RAFT_STATE.LEADER:
                delay = getattr(raft, _PUSH_DEFERRED)[0]
                said, said_at = getattr(raft, _PUSH_MAY_GO, _NOT_SAID)
                if said != getattr(raft, _PUSH_MAY_GO_SEEN, 0):
                    setattr(raft, _PUSH_MAY_GO_SEEN, said)
                    held_until = getattr(raft, _PUSH_HELD_UNTIL, None)
                    # Only a push still held: anything sent since moved the time on.
                    if held_until is not None and raft._SyncObj__newAppendEntriesTime == held_until:
                        raft._SyncObj__newAppendEntriesTime = min(held_until, said_at + delay)
                    setattr(raft, _PUSH_HELD_UNTIL, None)
                due = raft._SyncObj__newAppendEntriesTime
                timeout = min(timeout, max(0.0, due - monotonic()))
                if getattr(raft, _PUSH_HELD_UNTIL, None) is not None:
                    # Held for the orderer's word, which wakes no one: looked
                    # for again every delay_s until the hold ends.
                    timeout = min(timeout, delay)
            return original_poll(timeout)

        poller.poll = poll
    setattr(syncobj, _PUSH_DEFERRED, (delay_s, hold_s, held_batches))


def commit_push_may_go(syncobj) -> None:
    """The orderer proposes nothing more for now: a commit index held back
    for its next batch goes out ``delay_s`` from now (defer_commit_push).
    Called from the event loop's thread (always the same one); seen by the
    Raft thread when it next polls, at most ``delay_s`` later while a push is
    held. It wakes no one: the word comes as a write is answered, and waking
    the Raft thread then made it take the interpreter lock from the loop
    writing the answer, though in a stream of writes the next one carries the
    commit index anyway (issue 46)."""
    # A count, not a flag: the Raft thread never writes it, so no word is lost;
    # one tuple, so the count and its time are read together.
    said = getattr(syncobj, _PUSH_MAY_GO, _NOT_SAID)[0]
    setattr(syncobj, _PUSH_MAY_GO, (said + 1, monotonic()))
