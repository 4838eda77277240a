"""The HTTP edge: what every request passes before any route sees it.

``EdgeMiddleware`` identifies the caller, holds a body to its limits (size,
media type, the caller's budget of bytes in hand) and only then lets a write
take an admission slot (api/admission.py): a request refused here has cost
nothing but its head, and nothing of it was parsed or written. Every request
is timed for /metrics here, so that refusals are counted too.

It also says who asks, for the log's who (quorum/callers.py): the request id
(the caller's ``X-Request-Id``, checked, else one made here, and answered in
``X-Request-Id`` on every response) and, for a write, the ``Caller`` a route
submits with (``caller_of``): the principal the credential maps to and the
client address the connection came from, never anything the request claims
(an ``X-Forwarded-For`` is the caller's word, not the voter's).
"""

from __future__ import annotations

import itertools
import os
import secrets
import time
from collections.abc import Hashable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from metadata_records.errors import Errors
from metadata_records.limits import MAX_REQUEST_ID_LENGTH
from quorum.callers import Caller

from . import console_session
from .admission import Admission, BodyBytes
from .auth import Authenticator, Principal
from .errors import ApiProblem, bad_request, retry_response
from .metrics import ApiMetrics
from .tls import peer_certificate

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Where EdgeMiddleware leaves the body it read whole (an extension key of the scope).
BODY_KEY = "metaquorum.body"

# Where EdgeMiddleware leaves the request id and, for a write, its Caller.
REQUEST_ID_KEY = "metaquorum.request_id"
CALLER_KEY = "metaquorum.caller"

OPEN_PATHS = frozenset({"/livez", "/readyz", "/metrics"})
DOC_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})


class EdgeMiddleware:
    """Every request, in this order, before anything is reserved for it:

    1. the caller is identified from its headers (401 for a missing or unknown
       token; the role is checked later, by the route: 403); a browser
       navigating to a console page without a credential is sent to sign in
       (303 to /ui/login), whose page and assets need none;
    2. a body must say ``Content-Type: application/json`` (415) and stay under
       the limit (413, by Content-Length and by counting what arrives);
    3. the body is read whole, under the connection's deadlines
       (api/connections.py) and its caller's budget of body bytes in hand
       (429 past it); a client that goes away gets nothing;
    4. only then a write takes an admission slot (api/admission.py), per pool
       and per principal, or is refused with 429 and Retry-After before it is
       parsed.

    Every request is timed for /metrics."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        limit: int,
        metrics: ApiMetrics,
        auth: Authenticator,
        admission: Admission,
        public_docs: bool,
        body_budget: int,
        require_certificate: bool = False,
    ) -> None:
        self.app = app
        self.require_certificate = require_certificate
        self.limit = limit
        self.metrics = metrics
        self.auth = auth
        self.admission = admission
        self.bodies = BodyBytes(body_budget)
        self.open_paths = OPEN_PATHS | DOC_PATHS if public_docs else OPEN_PATHS

    @property
    def pending_writes(self) -> int:
        return self.admission.pending

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_and_watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                request_id = scope.get(REQUEST_ID_KEY)
                if request_id is not None:
                    # The message is the sender's, made for this send; its list may be
                    # a response's own: a new one.
                    message["headers"] = [
                        *message.get("headers", ()),
                        (b"x-request-id", request_id),
                    ]
            await send(message)

        try:
            await self._handle(scope, receive, send_and_watch)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.observe_request(
                scope.get("method", "?"), route, status, time.perf_counter() - started
            )

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.require_certificate and peer_certificate(scope) is None:
            await _certificate_required().response()(scope, receive, send)
            return
        authorization = content_type = length = request_id = None
        chunked = False
        for key, value in scope.get("headers", ()):
            if key == b"authorization":
                authorization = value
            elif key == b"content-type":
                content_type = value
            elif key == b"content-length":
                length = value
            elif key == b"transfer-encoding":
                chunked = True
            elif key == b"x-request-id":
                request_id = value
        if request_id is None:
            request_id = new_request_id()
        else:
            problem = request_id_problem(request_id)
            if problem is not None:
                await _before_body(bad_request(problem), length, chunked).response()(
                    scope, receive, send
                )
                return
        scope[REQUEST_ID_KEY] = request_id
        principal = None
        if scope["path"] not in self.open_paths and not _console_open(scope):
            header = None if authorization is None else authorization.decode("latin-1")
            try:
                # A hashed token's first check, in a thread; limited per address.
                await self.auth.prepare(header, (scope.get("client") or ("?",))[0])
                principal = self.auth.identify(header, scope)
            except ApiProblem as e:
                if e.status == 401 and _console_page(scope):
                    e = _sign_in_first()
                await _before_body(e, length, chunked).response()(scope, receive, send)
                return
        problem = self._check_body_head(length, chunked, content_type)
        if problem is not None:
            await _before_body(problem, length, chunked).response()(scope, receive, send)
            return
        if length is None and not chunked:
            await self._admit(scope, receive, send, principal)
            return
        # The body's bytes count against its caller's budget until it is answered.
        holder = principal if self.auth.enabled else (scope.get("client") or ("?",))[0]
        held = 0
        try:
            problem, whole_body, held = await self._buffer_body(scope, receive, holder)
            if problem is not None:
                await problem.response()(scope, receive, send)
            if whole_body is not None:  # else answered, or the client went away mid-body
                await self._admit(scope, whole_body, send, principal)
        finally:
            self.bodies.give_back(holder, held)

    async def _admit(
        self, scope: Scope, receive: Receive, send: Send, principal: Principal | None
    ) -> None:
        if scope.get("method") not in WRITE_METHODS:
            await self.app(scope, receive, send)
            return
        if principal is not None:
            # quorum/callers.asked_by's tuple, spelled out: every write builds one.
            scope[CALLER_KEY] = (
                principal.name,
                client_address(scope),
                scope[REQUEST_ID_KEY].decode("ascii"),
                "",
                "",
            )
        pool = self.admission.pool(scope["path"])
        key = principal  # None for the open paths (no writes there)
        share = self.admission.share(
            pool, principal is not None and principal.broker_id is not None
        )
        refusal = pool.take(key, share)
        if refusal is not None:
            await retry_response(
                429,
                Errors.THROTTLING_QUOTA_EXCEEDED,
                f"{refusal}; nothing was written: retry after Retry-After",
                1.0,
            )(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            pool.give_back(key)

    def _check_body_head(
        self, length: bytes | None, chunked: bool, content_type: bytes | None
    ) -> ApiProblem | None:
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                return bad_request(f"Content-Length: {length[:40]!r} is not a number")
            if declared > self.limit:
                return self._too_large(f"Content-Length is {declared} bytes")
            if declared == 0 and not chunked:
                return None
        elif not chunked:
            return None
        if content_type is None:
            return _unsupported("the request has a body but no Content-Type")
        media, _, params = content_type.decode("latin-1").partition(";")
        if media.strip().lower() != "application/json":
            return _unsupported(f"Content-Type {media.strip()[:60]!r} is not supported")
        charset = params.strip().lower().removeprefix("charset=").strip('"')
        if params.strip() and charset not in ("utf-8", "utf8"):
            return _unsupported(f"Content-Type parameters {params.strip()[:60]!r}: only UTF-8")
        return None

    async def _buffer_body(
        self, scope: Scope, receive: Receive, holder: Hashable
    ) -> tuple[ApiProblem | None, Receive | None, int]:
        """The whole body replayed as one message (and kept in the scope for
        ``body_of``), and the bytes charged to ``holder``; (problem, None, n)
        if it is too large or over the holder's budget, (None, None, n) if the
        client went away before it all arrived."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None, None, size  # disconnected: nobody to answer, nothing to do
            chunk = message.get("body", b"")
            if size + len(chunk) > self.limit:
                return self._too_large(f"more than {self.limit} bytes arrived"), None, size
            refusal = self.bodies.take(holder, len(chunk))
            if refusal is not None:
                return (
                    ApiProblem(
                        429,
                        Errors.THROTTLING_QUOTA_EXCEEDED,
                        f"{refusal}; nothing was written: retry after Retry-After",
                        headers={"Retry-After": "1", "Connection": "close"},
                        extra={"retryAfterMs": 1000},
                    ),
                    None,
                    size,
                )
            size += len(chunk)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        scope[BODY_KEY] = body
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return None, replay, size

    def _too_large(self, what: str) -> ApiProblem:
        return ApiProblem(
            413,
            Errors.INVALID_REQUEST,
            f"request body too large: {what}; the limit is {self.limit} bytes (see docs/limits.md)",
            headers={"Connection": "close"},
        )


def caller_of(scope: Scope) -> Caller | None:
    """Who asked for this write, as the edge saw it (None off the edge: a
    test's app without it)."""
    return scope.get(CALLER_KEY)


def client_address(scope: Scope) -> str:
    """``host:port`` of the connection as the voter saw it ("" for a Unix socket)."""
    client = scope.get("client")
    if not client:
        return ""
    address = _ADDRESSES.get(client)
    if address is None:
        host, port = client[0], client[1]
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if len(_ADDRESSES) >= ADDRESSES_KEPT:
            _ADDRESSES.clear()
        _ADDRESSES[client] = address
    return address


# Client addresses as the who spells them, by the scope's (host, port): a
# connection's requests share it. Bounded: cleared when full.
_ADDRESSES: dict[tuple, str] = {}
ADDRESSES_KEPT = 4096


def request_id_problem(value: bytes) -> str | None:
    """Why an X-Request-Id cannot be taken, or None: 1 to 64 printable ASCII
    characters (docs/limits.md)."""
    if not value:
        return "X-Request-Id is empty: send 1 to 64 printable ASCII characters, or none"
    if len(value) > MAX_REQUEST_ID_LENGTH:
        return (
            f"X-Request-Id is {len(value)} bytes, more than {MAX_REQUEST_ID_LENGTH}: send "
            "a shorter one, or none (the voter then makes one)"
        )
    if not all(32 <= c < 127 for c in value):
        return (
            "X-Request-Id holds a character that is not printable ASCII: send 1 to "
            f"{MAX_REQUEST_ID_LENGTH} of ' ' to '~', or none"
        )
    return None


class _RequestIds:
    """Request ids made by this process: a random prefix and a counter
    (cheap: no uuid4 per request); a new prefix in a forked child."""

    def __init__(self) -> None:
        self.renew()

    def renew(self) -> None:
        self.prefix = secrets.token_hex(6).encode("ascii") + b"-"
        self.counter = itertools.count(1)

    def next(self) -> bytes:
        return b"%b%x" % (self.prefix, next(self.counter))


_IDS = _RequestIds()
os.register_at_fork(after_in_child=_IDS.renew)


def new_request_id() -> bytes:
    return _IDS.next()


def _before_body(problem: ApiProblem, length: bytes | None, chunked: bool) -> ApiProblem:
    """An answer sent before the request's body is read closes the connection
    (api/connections.py drops the rest of the body): the body left unread
    cannot be skipped to reach the next request."""
    if chunked or length not in (None, b"0"):
        problem.headers.setdefault("Connection", "close")
    return problem


def _console_open(scope: Scope) -> bool:
    """The web console's sign-in page and its assets (api/console_session.py)."""
    return scope.get("method") in ("GET", "HEAD") and scope["path"] in console_session.OPEN_PATHS


def _console_page(scope: Scope) -> bool:
    """A browser navigating to a console page (it accepts HTML): sent to sign
    in, where any other client is answered 401 as by every endpoint."""
    path = scope["path"]
    if scope.get("method") not in ("GET", "HEAD") or not (path == "/ui" or path.startswith("/ui/")):
        return False
    if path.startswith(("/ui/assets/", "/ui/data/")):
        return False
    return any(k == b"accept" and b"text/html" in v for k, v in scope.get("headers", ()))


def _sign_in_first() -> ApiProblem:
    """A console page asked for without a credential: the browser is sent to
    the sign-in page (a 303 that says nothing about the cluster)."""
    return ApiProblem(
        303,
        Errors.CLUSTER_AUTHORIZATION_FAILED,
        "sign in first: " + console_session.LOGIN_PAGE,
        headers={"Location": console_session.LOGIN_PAGE},
    )


def _certificate_required() -> ApiProblem:
    return ApiProblem(
        401,
        Errors.CLUSTER_AUTHORIZATION_FAILED,
        "this server requires a TLS client certificate on every connection "
        "(--tls-client-auth required): connect with --cert and --key",
        headers={"Connection": "close"},
    )


def _unsupported(what: str) -> ApiProblem:
    return ApiProblem(
        415,
        Errors.INVALID_REQUEST,
        f"{what}: send the body as JSON with 'Content-Type: application/json'",
        headers={"Connection": "close"},
    )
