"""A lean keep-alive HTTP/1.1 client for the simulator's hot path.

``MetaquorumClient`` talks to its controllers through an ``http`` object; this
module's ``LeanHttp`` is the second kind of that object, beside httpx's
``AsyncClient``. It exists for CPU: httpx spends 2-6 ms of CPU per request in
its pool, its models and its sniffing, which caps one simulator process at a
few hundred heartbeats a second. Here a request is one ``transport.write`` of
bytes built in one f-string, and its answer is parsed by httptools (the C
parser uvicorn uses, already a dependency) inside an ``asyncio.Protocol``.

The contract with ``MetaquorumClient.request`` is the one httpx keeps, so the
client's leader discovery, retries and error mapping are shared, not copied:

* ``request(method, url, json=, params=, headers=)`` returns an object with
  ``status_code``, ``headers`` (lower-case names), ``json()`` and ``text``;
  redirects are not followed here (the client follows 307 itself);
* failures raise httpx's own exception types, with the same meaning:
  ``ConnectError`` / ``ConnectTimeout`` (nothing was sent), ``ReadTimeout``,
  ``PoolTimeout``, ``RemoteProtocolError`` (the server closed before an
  answer), ``ReadError``; an ``ssl`` error is the ``__cause__`` (brokers/tls.py
  reads the chain).

It speaks to metaquorum only: no redirects, no cookies, no compression (it
asks for none), no proxies; one request at a time per connection, several
connections per origin, idle ones reused newest first.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import Any
from urllib.parse import urlencode, urlsplit

import httptools
import httpx
import orjson

# uvicorn closes a connection idle for 5 s; one idle longer than this is closed
# here first, so a request never races the server's close.
IDLE_CLOSE_S = 4.0


class LeanResponse:
    __slots__ = ("status_code", "headers", "content")

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content

    def json(self) -> Any:
        return orjson.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request in flight."""

    def __init__(self, origin: _Origin) -> None:
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future | None = None
        self.closed = False
        self.counted = True  # holds one of its origin's slots
        self.idle_since = 0.0
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._received = False  # any byte of the current answer

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(httpx.RemoteProtocolError(f"a malformed answer: {e}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.origin.forget(self)
        if self.waiter is not None and not self.waiter.done():
            if self._received:
                err: Exception = httpx.ReadError(f"the connection broke mid-answer: {exc!r}")
            else:
                err = httpx.RemoteProtocolError("Server disconnected without sending a response.")
            if exc is not None:
                err.__cause__ = exc
            self.waiter.set_exception(err)

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._headers = {}
        self._body = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        response = LeanResponse(self.parser.get_status_code(), self._headers, b"".join(self._body))
        keep = self.parser.should_keep_alive()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(response)
        if not keep:
            self.close()

    def _fail(self, err: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(err)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.origin.forget(self)
            if self.transport is not None:
                self.transport.close()

    async def exchange(self, data: bytes, timeout_s: float) -> LeanResponse:
        loop = asyncio.get_running_loop()
        self.waiter = waiter = loop.create_future()
        self._received = False
        self.transport.write(data)
        timer = loop.call_later(timeout_s, _expire, waiter, timeout_s)
        try:
            return await waiter
        finally:
            timer.cancel()
            self.waiter = None


def _expire(waiter: asyncio.Future, timeout_s: float) -> None:
    if not waiter.done():
        waiter.set_exception(httpx.ReadTimeout(f"no answer within {timeout_s:g} s"))


class _Origin:
    """The connections to one scheme://host:port, at most ``limit`` of them."""

    def __init__(self, scheme: str, host: str, port: int, lean: LeanHttp) -> None:
        self.scheme, self.host, self.port = scheme, host, port
        self.lean = lean
        self.host_header = f"{host}:{port}"
        self.idle: list[_Connection] = []
        self.open = 0  # connected or connecting
        self.waiters: deque[asyncio.Future] = deque()

    def forget(self, conn: _Connection) -> None:
        """``conn`` closed: its slot is free again (once, however it closed)."""
        if not conn.counted:
            return
        conn.counted = False
        if conn in self.idle:
            self.idle.remove(conn)
        self.open -= 1
        self._wake(None)

    def _wake(self, conn: _Connection | None) -> bool:
        """Hands ``conn`` (None: a free slot) to the longest waiter, if any."""
        while self.waiters:
            w = self.waiters.popleft()
            if not w.done():
                if conn is None:
                    self.open += 1  # the waiter opens a connection in this slot
                w.set_result(conn)
                return True
        return False

    async def acquire(self) -> _Connection:
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self.idle:
            conn = self.idle.pop()  # newest first: the oldest ones go idle and close
            if now - conn.idle_since < IDLE_CLOSE_S and not conn.closed:
                return conn
            conn.close()
        if self.open < self.lean.limit:
            self.open += 1
            return await self._connect()
        waiter = loop.create_future()
        self.waiters.append(waiter)
        t = self.lean.timeout_s
        timer = loop.call_later(t, _expire_pool, waiter, t)
        try:
            conn = await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._hand_back(waiter.result())  # handed over just as we were cancelled
            raise
        finally:
            timer.cancel()
        return conn if conn is not None else await self._connect()

    def _hand_back(self, conn: _Connection | None) -> None:
        if conn is None:
            self._give_back_slot()
        else:
            self.release(conn)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        tls = self.lean.ssl if self.scheme == "https" else None
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(self),
                    self.host,
                    self.port,
                    ssl=tls,
                    server_hostname=self.host if tls else None,
                ),
                self.lean.timeout_s,
            )
        except TimeoutError as e:
            self._give_back_slot()
            raise httpx.ConnectTimeout(f"connecting to {self.host_header}") from e
        except (OSError, ssl.SSLError) as e:
            self._give_back_slot()
            raise httpx.ConnectError(f"connecting to {self.host_header}: {e}") from e
        except BaseException:
            self._give_back_slot()
            raise
        return conn

    def _give_back_slot(self) -> None:
        self.open -= 1
        self._wake(None)

    def release(self, conn: _Connection) -> None:
        if conn.closed:
            return
        if not self._wake(conn):
            conn.idle_since = asyncio.get_running_loop().time()
            self.idle.append(conn)

    def close(self) -> None:
        for conn in list(self.idle):
            conn.close()


def _expire_pool(waiter: asyncio.Future, timeout_s: float) -> None:
    if not waiter.done():
        waiter.set_exception(httpx.PoolTimeout(f"no free connection within {timeout_s:g} s"))


class LeanHttp:
    """The ``http`` of a ``MetaquorumClient``: see the module docstring."""

    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        max_connections: int = 64,
        headers: dict[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``max_connections`` per origin; ``ssl_context`` for https URLs
        (brokers/tls.py ``ClientTls.context``; None: the system's CAs)."""
        self.timeout_s = timeout_s
        self.limit = max_connections
        self.headers: dict[str, str] = dict(headers or {})
        self._ssl = ssl_context
        self._origins: dict[str, _Origin] = {}
        self._split: dict[str, tuple[_Origin, str]] = {}  # url -> (origin, path)

    @property
    def ssl(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    def _target(self, url: str) -> tuple[_Origin, str]:
        hit = self._split.get(url)
        if hit is not None:
            return hit
        parts = urlsplit(url)
        scheme = parts.scheme
        if scheme not in ("http", "https") or not parts.hostname:
            raise httpx.UnsupportedProtocol(f"cannot send to {url!r}")
        port = parts.port or (443 if scheme == "https" else 80)
        key = f"{scheme}://{parts.hostname}:{port}"
        origin = self._origins.get(key)
        if origin is None:
            origin = self._origins[key] = _Origin(scheme, parts.hostname, port, self)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if len(self._split) < 1024:  # the same few endpoints, again and again
            self._split[url] = (origin, path)
        return origin, path

    async def request(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        params: dict | None = None,
        headers: dict | None = None,
    ) -> LeanResponse:
        origin, path = self._target(url)
        if params:
            path += ("&" if "?" in path else "?") + urlencode(params)
        body = b"" if json is None else orjson.dumps(json)
        extra = "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
        if headers:
            extra += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        if json is not None:
            extra += "content-type: application/json\r\n"
        head = (
            f"{method} {path} HTTP/1.1\r\nhost: {origin.host_header}\r\n"
            f"content-length: {len(body)}\r\n{extra}\r\n"
        )
        data = head.encode("latin-1") + body
        conn = await origin.acquire()
        try:
            response = await conn.exchange(data, self.timeout_s)
        except BaseException:
            conn.close()  # its answer may still come: the connection is spent
            raise
        origin.release(conn)
        return response

    async def aclose(self) -> None:
        for origin in self._origins.values():
            origin.close()
        self._origins.clear()
        self._split.clear()
