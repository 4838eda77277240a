"""Connection-level limits of the HTTP server: deadlines for every phase of a
request, caps on open connections, and limits on the request head.

uvicorn has a keep-alive timeout but no deadline for a request's headers or
body, and no cap on connections: a client that never sends a byte, sends its
headers a byte at a time (slowloris) or its body a byte a second held its
connection, and its file descriptor, for ever. ``guarded_protocol`` returns a
subclass of uvicorn's httptools protocol that enforces, per connection:

* **head deadline**: a request's headers must be complete within
  ``head_timeout_s`` of the connection opening or of the previous response
  (idle and half-sent connections are closed; a half-sent head is answered 408);
* **body deadline**: the body must arrive within ``body_grace_s`` plus one
  second per ``min_body_rate`` bytes received, and within ``max_body_s`` in
  all (408, then closed); a response sent before the body is whole (401, 413,
  415) closes the connection instead of waiting for the rest: the answer says
  ``Connection: close``, and what still arrives is dropped for at most
  ``LINGER_S`` (a close with unread bytes resets the connection, and the
  client loses its answer);
* **write stall**: an answer the client stops reading (its write buffer
  above the high-water mark for ``write_stall_s``) aborts the connection, so a
  client cannot park a snapshot in this process's memory;
* **head limits**: at most ``MAX_HEADERS`` headers, ``MAX_HEADER_BYTES`` of
  them and a ``MAX_URL_BYTES`` URL (431 / 414, then closed);
* **caps**: at most ``max_connections`` open, ``max_per_address`` from one
  client address. A new connection over a cap first closes the connection that
  has waited longest without a request in progress (idle or half-sent, of that
  address for the per-address cap); only when every one has a request in
  progress is the new one answered 503 and closed. Each refusal and eviction is
  counted for /metrics and logged (at most one line per ``LOG_EVERY_S``).

Handling a request (the app's part, long polls included) has no deadline here:
the app bounds its own waits.

Over TLS the server listens for plain TCP and this protocol hands each
connection to the loop's TLS layer itself, once it is counted: a connection
in its handshake holds a descriptor like any other, so it counts against the
caps, may be evicted as an idle one, and has ``head_timeout_s`` to finish the
handshake (when uvicorn's listening socket had the SSL context, the handshake
came before this protocol saw the connection, for up to 60 s, uncounted: a
thousand silent TCP connections held a thousand descriptors). A connection over a cap is closed before any
handshake, without a 503 (there is no TLS yet to send it in). Every
request's scope carries the connection's ASGI TLS extension
(``scope["extensions"]["tls"]``, api/tls.py), read once the handshake is
done: uvicorn's protocol does not fill it, and the app maps the client
certificate in it to a principal.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from asyncio import sslproto
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from metadata_records import limits
from metadata_records.errors import Errors

from .tls import tls_extension

log = logging.getLogger(__name__)

LOG_EVERY_S = 10.0
CAP_ADVICE = (
    "connection limits bite: if these are real clients, raise --max-connections "
    "or --max-connections-per-address"
)
# Descriptors the process needs besides client connections: journal and
# snapshot files, Raft peers, logs, the listening sockets, imports.
RESERVED_FDS = 128
LINGER_S = 1.0
MAX_LINGERING = 32


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 1024 - RESERVED_FDS
    max_per_address: int = 256
    head_timeout_s: float = 10.0
    body_grace_s: float = 10.0
    min_body_rate: int = 64 << 10  # bytes/s once the grace is spent
    max_body_s: float = 120.0
    write_stall_s: float = 30.0  # an answer not read further for this long: aborted

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_per_address"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("head_timeout_s", "body_grace_s", "max_body_s", "write_stall_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


def connection_capacity(soft_nofile: int) -> int:
    """How many client connections a process with ``soft_nofile`` descriptors holds."""
    return max(1, soft_nofile - RESERVED_FDS)


class ConnectionStats:
    """Open connections by address, those waiting for a request (oldest
    first, for eviction), and counters for /metrics."""

    def __init__(self) -> None:
        self.open = 0
        self.by_address: Counter[str] = Counter()
        self.waiting: dict[Any, None] = {}  # insertion order = how long each has waited
        self.waiting_by_address: dict[str, dict[Any, None]] = {}
        self.refused: Counter[str] = Counter()  # "total" / "per_address"
        self.evicted: Counter[str] = Counter()
        self.timed_out: Counter[str] = Counter()  # "head" / "body"
        self.head_too_large = 0
        self.invalid = 0  # not HTTP/1.1 as httptools reads it
        self.lingering = 0  # turned away, closing once the client has read the 503
        self._unlogged: Counter[str] = Counter()
        self._advice: dict[str, None] = {}
        self._logged_at = 0.0

    def add(self, conn: Any, address: str) -> None:
        self.open += 1
        self.by_address[address] += 1

    def remove(self, conn: Any, address: str) -> None:
        self.open -= 1
        left = self.by_address[address] - 1
        if left:
            self.by_address[address] = left
        else:
            del self.by_address[address]
        self.stop_waiting(conn, address)

    def start_waiting(self, conn: Any, address: str) -> None:
        self.stop_waiting(conn, address)  # to the end: it has waited least
        self.waiting[conn] = None
        self.waiting_by_address.setdefault(address, {})[conn] = None

    def stop_waiting(self, conn: Any, address: str) -> None:
        if self.waiting.pop(conn, 0) is None:
            mine = self.waiting_by_address[address]
            del mine[conn]
            if not mine:
                del self.waiting_by_address[address]

    def oldest_waiting(self, address: str | None = None) -> Any | None:
        pool = self.waiting if address is None else self.waiting_by_address.get(address, {})
        return next(iter(pool), None)

    def note(self, what: str, address: str, detail: str, advice: str = CAP_ADVICE) -> None:
        """Logs a refusal, eviction, abort or invalid request, at most one line
        per LOG_EVERY_S with the counts since the previous line."""
        self._unlogged[what] += 1
        self._advice[advice] = None
        now = time.monotonic()
        if self._logged_at and now - self._logged_at < LOG_EVERY_S:
            return
        counts = ", ".join(f"{n} {w}" for w, n in sorted(self._unlogged.items()))
        since = f"the last {now - self._logged_at:.0f} s" if self._logged_at else "start"
        log.warning(
            "http edge: %s since %s; latest from %s: %s (%s)",
            counts,
            since,
            address,
            detail,
            "; ".join(self._advice),
        )
        self._unlogged.clear()
        self._advice.clear()
        self._logged_at = now


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop parsing a head over its limits."""


def _raw_response(status: int, reason: str, error: Errors, message: str, **headers: str) -> bytes:
    body = orjson.dumps({"errorCode": int(error), "errorName": error.name, "errorMessage": message})
    head = [f"HTTP/1.1 {status} {reason}", "content-type: application/json"]
    head += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    head += [f"content-length: {len(body)}", "connection: close", "", ""]
    return "\r\n".join(head).encode("latin-1") + body


_HEAD_BYTES_LIMIT = limits.MAX_HEADER_BYTES + limits.MAX_URL_BYTES + 1024


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with deadlines, head limits and caps (see
    the module docstring). ``guarded_protocol`` sets the class attributes."""

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()
    stats: ClassVar[ConnectionStats] = ConnectionStats()
    # The context to start TLS with on each connection (None: plain HTTP).
    tls_context: ClassVar[ssl.SSLContext | None] = None

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._address = "?"
        self._counted = False
        self._timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._phase: str | None = None  # "head", "body", or None (no deadline)
        self._deadline = 0.0
        self._head_done = True  # no request begun
        self._message_complete = True
        self._head_raw = 0
        self._head_count = 0
        self._head_bytes = 0
        self._refusal: tuple[int, str, str] | None = None
        self._body_started = 0.0
        self._body_bytes = 0
        self._lingering = False
        self._tls: dict[str, Any] | None = None
        self._raw: asyncio.Transport | None = None  # the TCP transport TLS is started on

    # ------------------------------------------------------------ connections

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self.tls_context is not None and self._raw is None:
            self._handshake(transport)
            return
        super().connection_made(transport)
        self._tls = tls_extension(transport)
        if self._raw is not None:  # counted before its handshake
            self._cancel_timer()
            if self._counted:
                self._wait_for_head()
            else:  # evicted or timed out as the handshake finished
                transport.close()
            return
        self._address = self.client[0] if self.client else "?"
        if self._admit(self._turn_away):
            self._wait_for_head()

    def _admit(self, turn_away: Any) -> bool:
        """Counts the connection, evicting the idle one that waited longest if
        a cap is reached; ``turn_away(cap, detail)`` when every one is busy."""
        stats, lim, address = self.stats, self.limits, self._address
        if stats.by_address[address] >= lim.max_per_address:
            detail = f"{stats.by_address[address]} open from it, the limit per address is "
            detail += str(lim.max_per_address)
            if not self._evict(stats.oldest_waiting(address), "per_address", detail):
                turn_away("per_address", detail)
                return False
        elif stats.open >= lim.max_connections:
            detail = f"{stats.open} open, the limit is {lim.max_connections}"
            if not self._evict(stats.oldest_waiting(), "total", detail):
                turn_away("total", detail)
                return False
        stats.add(self, address)
        self._counted = True
        return True

    def _handshake(self, raw: asyncio.Transport) -> None:
        """A TCP connection to a TLS port: counted (and waiting, so evictable,
        like an idle one), then handed to the loop's TLS layer, which calls
        ``connection_made`` again with the TLS transport once the handshake
        is done. The hand-over happens here, before the loop reads a byte
        (``loop.start_tls`` would do it a loop turn later, and the client's
        hello would reach this protocol as HTTP)."""
        self._raw = raw
        peer = raw.get_extra_info("peername")
        self._address = peer[0] if isinstance(peer, tuple) and peer else "?"
        if not self._admit(self._refuse_before_tls):
            return
        self.stats.start_waiting(self, self._address)
        self._timer = self.loop.call_later(self.limits.head_timeout_s, self._handshake_too_slow)
        handshake = self.loop.create_future()
        handshake.add_done_callback(self._handshake_done)
        layer = _tls_layer(self.loop)(
            self.loop,
            self,
            self.tls_context,
            handshake,
            server_side=True,
            call_connection_made=True,
            # A backstop: _handshake_too_slow closes it at the head deadline.
            ssl_handshake_timeout=self.limits.head_timeout_s + 5,
        )
        raw.set_protocol(layer)
        layer.connection_made(raw)

    def _refuse_before_tls(self, cap: str, detail: str) -> None:
        self.stats.refused[cap] += 1
        self.stats.note(f"refused before its TLS handshake ({cap})", self._address, detail)
        assert self._raw is not None
        self._raw.abort()

    def _handshake_too_slow(self) -> None:
        self._timer = None
        if self.transport is None and self._counted:
            self.stats.timed_out["head"] += 1
            self._close()

    def _handshake_done(self, handshake: asyncio.Future) -> None:
        """The handshake's end: on success ``connection_made`` has the TLS
        transport (or will have it); on failure (a refused certificate, a
        reset, an eviction, the deadline) the connection is no longer counted."""
        if handshake.cancelled() or handshake.exception() is not None:
            self._drop_handshake()

    def _drop_handshake(self) -> None:
        """Ends a connection still in (or failed in) its TLS handshake."""
        assert self._raw is not None
        self._cancel_timer()
        if not self._raw.is_closing():
            self._raw.abort()
        self._release()

    def _release(self) -> None:
        if self._counted:
            self._counted = False
            self.stats.remove(self, self._address)

    def _close(self) -> None:
        """Closes the connection, in its handshake or after it."""
        if self.transport is not None:
            self.transport.close()
        elif self._raw is not None:
            self._drop_handshake()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is None:  # lost in its TLS handshake: uvicorn never saw it
            self._cancel_timer()
            self._release()
            return
        self._cancel_timer()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        if self._lingering:
            self._lingering = False
            self.stats.lingering -= 1
        self._release()
        super().connection_lost(exc)

    def _evict(self, victim: GuardedHttpToolsProtocol | None, cap: str, detail: str) -> bool:
        if victim is None:
            return False
        self.stats.stop_waiting(victim, victim._address)
        victim._close()
        self.stats.evicted[cap] += 1
        self.stats.note(f"evicted ({cap})", self._address, detail)
        return True

    def _turn_away(self, cap: str, detail: str) -> None:
        self.stats.refused[cap] += 1
        self.stats.note(f"refused ({cap})", self._address, detail)
        self._answer_and_close(
            _raw_response(
                503,
                "Service Unavailable",
                Errors.THROTTLING_QUOTA_EXCEEDED,
                f"too many connections ({detail}), each with a request in progress; "
                "close idle connections and retry after Retry-After",
                retry_after="1",
            )
        )

    def _answer_and_close(self, answer: bytes) -> None:
        """Writes ``answer`` and closes once the client has had it: closing
        with its request unread would reset the connection and lose the answer.
        Only a few linger at a time: each holds a descriptor, and a flood must
        not spend the reserve that the process itself needs."""
        self.transport.write(answer)
        self._linger()

    def _linger(self) -> None:
        """Half-closes (over TLS it cannot: the answer says ``Connection:
        close`` instead), drops what the client still sends, and closes at its
        EOF or after LINGER_S. Closing at once with the client's bytes unread
        resets the connection, and the client loses the answer it was sent:
        over TLS, 1 request in about 10,000 of the fuzz run (a 401 to a body
        that was still arriving)."""
        if self._lingering or self.transport.is_closing():
            return
        self._cancel_timer()
        if self.stats.lingering >= MAX_LINGERING:
            self.transport.close()
            return
        self._lingering = True
        self.stats.lingering += 1
        if self.transport.can_write_eof():
            self.transport.write_eof()
        # uvicorn stopped reading once 64 KiB of the body waited for the app:
        # read again, or the client, blocked sending, never reads its answer
        # nor closes (over TLS the close then waits 30 s for its close_notify).
        self.flow.resume_reading()
        self._timer = self.loop.call_later(LINGER_S, self.transport.close)

    def _close_after_answer(self) -> None:
        """uvicorn closes the connection after an answer that says
        ``Connection: close``; before the request's body is whole, it lingers."""
        if self._message_complete:
            self.transport.close()
        else:
            self._linger()

    def eof_received(self) -> bool | None:
        if self._lingering:
            self.transport.close()
        return None

    # ------------------------------------------------------------ deadlines

    def _cancel_timer(self) -> None:
        self._phase = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # One timer per connection, re-armed lazily: a phase moves its deadline
    # and the timer, when it fires, looks at the phase it finds. Deadlines only
    # move later, so a pending timer never fires after the current one; most
    # requests start and end no timer at all (bench/edge.py).

    def _arm(self, phase: str, deadline: float) -> None:
        self._phase, self._deadline = phase, deadline
        if self._timer is None:
            self._timer = self.loop.call_at(deadline, self._on_timer)

    def _due(self) -> float:
        if self._phase == "body":
            lim = self.limits
            allowed = lim.body_grace_s + self._body_bytes / lim.min_body_rate
            return self._body_started + min(lim.max_body_s, allowed)
        return self._deadline

    def _on_timer(self) -> None:
        self._timer = None
        if self._phase is None or self.transport.is_closing():
            return
        due = self._due()
        if self.loop.time() < due:
            self._timer = self.loop.call_at(due, self._on_timer)
        elif self._phase == "head":
            self._head_timed_out()
        else:
            self._body_timed_out()

    def _wait_for_head(self) -> None:
        self._head_raw = 0
        self.stats.start_waiting(self, self._address)
        self._arm("head", self.loop.time() + self.limits.head_timeout_s)

    def _head_timed_out(self) -> None:
        self.stats.timed_out["head"] += 1
        if not self._head_raw:  # idle: closed without a word
            self.transport.close()
            return
        self._answer_and_close(  # a half-sent head (slowloris) is told why
            _raw_response(
                408,
                "Request Timeout",
                Errors.INVALID_REQUEST,
                f"the request head did not arrive within {self.limits.head_timeout_s:g} s; "
                "send the whole request promptly",
            )
        )

    def _body_timed_out(self) -> None:
        lim = self.limits
        elapsed = self.loop.time() - self._body_started
        self.stats.timed_out["body"] += 1
        if self.cycle is not None and not self.cycle.response_started:
            self.transport.write(
                _raw_response(
                    408,
                    "Request Timeout",
                    Errors.INVALID_REQUEST,
                    f"the request body arrived too slowly ({self._body_bytes} bytes in "
                    f"{elapsed:.0f} s; it must arrive within {lim.body_grace_s:g} s plus 1 s "
                    f"per {lim.min_body_rate} bytes, at most {lim.max_body_s:g} s); "
                    "nothing was done: send it again, faster",
                )
            )
        self.transport.close()

    # A client that stops reading its answer (a snapshot, a log page) holds
    # the answer in this process's memory: when the write buffer stays above
    # its high-water mark for write_stall_s, the connection is aborted.

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.limits.write_stall_s, self._write_stalled)

    def resume_writing(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        super().resume_writing()

    def _write_stalled(self) -> None:
        self._write_timer = None
        self.stats.timed_out["write"] += 1
        self.stats.note(
            "aborted (answer not read)",
            self._address,
            f"{self.transport.get_write_buffer_size()} bytes of an answer unread for "
            f"{self.limits.write_stall_s:g} s",
            "a client that stopped reading its answers",
        )
        self.transport.abort()

    # ------------------------------------------------------------ parsing

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # read and dropped until the client closes
        self._unset_keepalive_if_required()
        if not self._head_done or self._message_complete:
            self._head_raw += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()
        except httptools.HttpParserError as e:
            if self._refusal is not None:
                self._refuse_head(*self._refusal)
                return
            # As JSON like every other answer, and logged at most once per
            # LOG_EVERY_S (uvicorn logs each one: a cheap way to flood a log).
            self.stats.invalid += 1
            reason = str(e)[:200] or type(e).__name__
            self.stats.note(
                "invalid HTTP (400)",
                self._address,
                reason,
                "a client that does not speak HTTP/1.1: find it by its address",
            )
            self._answer_and_close(
                _raw_response(
                    400,
                    "Bad Request",
                    Errors.INVALID_REQUEST,
                    f"not a valid HTTP/1.1 request ({reason}); send one request per "
                    "message with a Content-Length or chunked body",
                )
            )
            return
        if (not self._head_done or self._message_complete) and self._head_raw > _HEAD_BYTES_LIMIT:
            self._refuse_head(
                431,
                "Request Header Fields Too Large",
                f"the request head is over {_HEAD_BYTES_LIMIT} bytes",
            )

    def _refuse_head(self, status: int, reason: str, message: str) -> None:
        self.stats.head_too_large += 1
        self._answer_and_close(
            _raw_response(status, reason, Errors.INVALID_REQUEST, f"{message}; see docs/limits.md")
        )

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._tls is not None:
            self.scope["extensions"] = {"tls": self._tls}
        self._head_done = False
        self._message_complete = False
        self._head_count = self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > limits.MAX_URL_BYTES:
            self._refusal = (
                414,
                "URI Too Long",
                f"the URL is over {limits.MAX_URL_BYTES} bytes",
            )
            raise _HeadTooLarge

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._head_count += 1
        self._head_bytes += len(name) + len(value)
        if self._head_count > limits.MAX_HEADERS:
            problem = f"more than {limits.MAX_HEADERS} headers"
        elif self._head_bytes > limits.MAX_HEADER_BYTES:
            problem = f"headers over {limits.MAX_HEADER_BYTES} bytes"
        else:
            return
        self._refusal = (431, "Request Header Fields Too Large", problem)
        raise _HeadTooLarge

    def on_headers_complete(self) -> None:
        self._head_done = True
        self._head_raw = 0  # what follows in this chunk is body, or the next head
        self.stats.stop_waiting(self, self._address)
        self._body_started = now = self.loop.time()
        self._body_bytes = 0
        super().on_headers_complete()
        if self.cycle is not None:
            self.cycle.transport = _AnswerTransport(self)
        self._arm("body", now + self.limits.body_grace_s)

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._message_complete = True
        self._phase = None  # handling: the app bounds its own waits
        super().on_message_complete()

    def on_response_complete(self) -> None:
        if not self._message_complete:
            # Answered before the body was whole (401, 413, 415): do not wait
            # for the rest, but let the client read the answer.
            self._linger()
            return
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            self._wait_for_head()


class _AnswerTransport:
    """The transport a request's cycle (uvicorn's) writes its answer through:
    the connection's own, except that

    * the answer's head waits for its body, so that an answer is one send,
      not two (uvicorn writes the head on ``http.response.start``; the body
      follows in the same turn of the loop, or the head goes alone at the
      end of that turn);
    * closing it goes through ``_close_after_answer``.

    The cycle uses only these three."""

    __slots__ = ("_write", "is_closing", "_close", "_held")

    def __init__(self, protocol: GuardedHttpToolsProtocol) -> None:
        self._write = protocol.transport.write
        self.is_closing = protocol.transport.is_closing
        self._close = protocol._close_after_answer
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._held = data
            asyncio.get_running_loop().call_soon(self._flush)
            return
        self._held = None
        self._write(held + data)

    def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._write(held)

    def close(self) -> None:
        self._flush()
        self._close()


def _tls_layer(loop: asyncio.AbstractEventLoop) -> type:
    """The loop's own TLS protocol class (uvloop's, or asyncio's), as its
    ``start_tls`` and ``create_server(ssl=...)`` use."""
    try:
        import uvloop

        if isinstance(loop, uvloop.Loop):
            return uvloop.loop.SSLProtocol
    except ImportError:  # pragma: no cover - uvloop is a dependency
        pass
    return sslproto.SSLProtocol


def guarded_protocol(
    limits_: ConnectionLimits, stats: ConnectionStats, tls_context: ssl.SSLContext | None = None
) -> type[GuardedHttpToolsProtocol]:
    """The protocol class for ``uvicorn.Config(http=...)`` with these limits;
    with ``tls_context`` it starts TLS itself on the plain TCP connections
    uvicorn accepts (give uvicorn no SSL context then)."""
    return type(
        "GuardedHttpToolsProtocol",
        (GuardedHttpToolsProtocol,),
        {"limits": limits_, "stats": stats, "tls_context": tls_context},
    )
