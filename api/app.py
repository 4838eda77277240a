"""The FastAPI app: every endpoint of docs/api.md over one ``QuorumNode``.

``create_app(node)`` builds it; the node must already be started on the event
loop the app runs on (``await node.start()``). The app translates HTTP to the
controller's messages and the node's errors to statuses (see ``errors.py``); it
decides nothing itself.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Annotated, Any, Literal, TypeVar

import orjson
from fastapi import Depends, FastAPI, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.security import HTTPBearer
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controller import messages as m
from metadata_records import limits
from metadata_records.client_quotas import (
    CLIENT_ID,
    IP,
    MATCH_TYPE_DEFAULT,
    MATCH_TYPE_EXACT,
    MATCH_TYPE_SPECIFIED,
    USER,
    FilterComponent,
)
from metadata_records.codec import brief, log_record_to_obj
from metadata_records.config_schema import (
    ResourceType,
    describe_broker_configs,
    resolve_topic_configs,
)
from metadata_records.errors import ApiError, Errors
from metadata_records.image import MetadataImage, TopicImage
from metadata_records.redaction import redacted
from quorum.node_errors import NodeError, OutcomeUnknownError, UnavailableError
from quorum.record_log import OffsetTooOld

from . import models as M
from . import models_fast as MF
from .admission import Admission, BodyBytes
from .auth import Authenticator, CertMapper, Principal, Role, TokenTable, load_tokens
from .connections import ConnectionStats
from .direct_routes import DirectRoute, DirectRoutes, query_param
from .errors import (
    ApiProblem,
    JsonResponse,
    bad_request,
    error_body,
    internal_error,
    node_error_response,
    retry_after,
    retry_response,
    validation_problem,
)
from .metrics import CONTENT_TYPE, ApiMetrics
from .openapi_doc import (
    ERR_400,
    ERR_409,
    ERR_429,
    ERR_AUTH,
    HEADERS,
    NOT_READY,
    OFFSET_TOO_OLD,
    READ_RESPONSES,
    WRITE_RESPONSES,
    finish,
    not_found,
)
from .reads import (
    VoterTracker,
    acl_filter_from_query,
    acls_obj,
    broker_obj,
    brokers_obj,
    client_quotas_obj,
    configs_obj,
    not_ready_reason,
    quorum_status_obj,
    snapshot_record_objs,
    snapshot_timestamp,
    topic_obj,
    topics_obj,
)
from .served_node import ServedNode
from .tls import ReloadingContext, peer_certificate

log = logging.getLogger(__name__)

DEFAULT_BODY_LIMIT = limits.MAX_BODY_BYTES
# Writes being handled at once by this node, HTTP parsing included. The
# controller's queue (--max-queued-requests) bounds what waits for Raft; this
# bounds what waits for the CPU before it: past it the event loop, not Raft, is
# the bottleneck, and every extra request only adds latency to all the others.
DEFAULT_MAX_PENDING_WRITES = 256
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1
MAX_LOG_RECORDS = 10_000
DEFAULT_LOG_RECORDS = 1_000
MAX_WAIT_MS = 60_000
# Above this many partitions, building a read's JSON moves off the event loop.
OFFLOAD_PARTITIONS = 20_000
NDJSON = "application/x-ndjson"

# Every request body, for the OpenAPI components (the app parses bodies itself).
REQUEST_MODELS: tuple[type[BaseModel], ...] = (
    M.BrokerRegistrationRequest,
    M.BrokerHeartbeatRequest,
    M.AlterPartitionRequest,
    M.CreateTopicsRequest,
    M.CreatePartitionsRequest,
    M.AlterPartitionReassignmentsRequest,
    M.ElectLeadersRequest,
    M.UpdateFeaturesRequest,
    M.IncrementalAlterConfigsRequest,
    M.AllocateProducerIdsRequest,
    M.AlterClientQuotasRequest,
    M.CreateAclsRequest,
    M.DeleteAclsRequest,
    M.TransferLeadershipRequest,
    M.AddVoterRequest,
    M.RemoveVoterRequest,
)

DESCRIPTION = """\
A Raft-replicated cluster-metadata service in the style of Apache Kafka's KRaft
controller. The contract is docs/api.md.

* JSON in and out; Kafka's camelCase field names; UUIDs in base64url (the
  36-character form is accepted on input). Integers are strict and checked
  against their Kafka type's range. Unknown fields are ignored, except fields
  of another AlterPartition version, which are refused.
* **200** whenever the active controller processed the request; the protocol
  outcome is in `errorCode` / `errorName` / `errorMessage`.
* **400** (`INVALID_REQUEST`, 42): not JSON, wrong type, missing field, out of
  range, unknown query value; `errorMessage` names the field. Nothing is written.
* **401 / 403** (`CLUSTER_AUTHORIZATION_FAILED`, 31): missing/unknown token, or
  a token without the role (a bound broker token acting for another broker).
* **307** (`NOT_CONTROLLER`, 41): a write reached a node that is not the
  active controller; `Location` is the same path and query on the leader.
* **503** + `Retry-After`: no leader known, replaying, not ready or shutting
  down (`NOT_CONTROLLER`, 41); or the write's outcome is unknown
  (`REQUEST_TIMED_OUT`, 7): it may still commit, so retry (epochs make a retry
  safe).
* **413** (42): body over the limit. **415** (42): a body without
  `Content-Type: application/json`. **429** (`THROTTLING_QUOTA_EXCEEDED`, 89)
  + `Retry-After`: too much is queued; nothing was written.
* **408 / 414 / 431 / 503** from the HTTP server, then the connection is
  closed: a request head or body too slow, a URL or head over its limit, too
  many connections. Duplicate keys in a body are refused (400). Every limit:
  docs/limits.md.
* Reads carry `X-Metadata-Offset` (the serving node's last applied offset) and
  take `?consistency=linearizable` (a barrier through the log first).
"""

TAGS = [
    {"name": "brokers", "description": "Broker endpoints (role `broker`)"},
    {"name": "admin", "description": "Admin endpoints (role `admin`)"},
    {"name": "reads", "description": "Reads (role `read`), served by any ready node"},
    {"name": "health", "description": "Probes and metrics (no token)"},
]


T = TypeVar("T", bound=BaseModel)


def _body_doc(model: type[BaseModel], required: bool = True) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": required,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
            },
        }
    }


def parse_body(model: type[T], body: bytes) -> T:
    """The body as ``model``, or a 400 naming the first bad field (or a
    repeated key)."""
    duplicate = M.duplicate_key_problem(body)
    if duplicate is not None:
        raise bad_request(duplicate)
    try:
        return model.model_validate_json(body)
    except ValidationError as e:
        raise validation_problem(e) from None


# Past this size an admin body is parsed and turned into the controller's
# request in a thread: a 10,000-binding CreateAcls is 1.2 MB and about 130 ms
# of parsing, which on the event loop would hold every broker's heartbeat
# (decisions.md 139). pydantic's own validation still holds the GIL (about a
# third of it); the Python around it interleaves with the loop.
LARGE_BODY = 64 << 10
LARGE_ANSWER = 1_000  # entries of an answer built in a thread


async def parse_message(model: type[T], request: Request) -> tuple[T, Any]:
    """(the body as ``model``, its ``to_message()``): off the event loop for
    a body past LARGE_BODY. A 400 as ``parse_body``."""
    body = await request.body()

    def parse() -> tuple[T, Any]:
        req = parse_body(model, body)
        return req, req.to_message()

    return await asyncio.to_thread(parse) if len(body) > LARGE_BODY else parse()


def alter_partition_request(body: bytes, version: int) -> m.AlterPartitionRequest:
    """The controller's AlterPartition request from a body: the quick parser's
    (models_fast.py) when it vouches for the body, else pydantic's, which
    accepts it or raises the 400 naming the problem."""
    message = MF.alter_partition_message(body, version)
    if message is None:
        req = parse_body(M.AlterPartitionRequest, body)
        try:
            message = req.to_message(version)
        except M.VersionMismatch as e:
            raise bad_request(str(e)) from None
    return message


# Where EdgeMiddleware leaves the body it read whole (an extension key of the scope).
BODY_KEY = "metaquorum.body"


async def body_of(request: Request) -> bytes:
    """The request's body as the edge read it, without Starlette's stream of
    the replayed message (``Request.body`` costs about 2 us more, on the three
    hot broker routes); ``request.body()`` where the edge read none."""
    body = request.scope.get(BODY_KEY)
    return body if body is not None else await request.body()


def _quick_or_pydantic(quick: Callable[[bytes], Any], model: type[BaseModel], body: bytes) -> Any:
    """The controller's request from a body: the quick parser's when it
    vouches for the body, else pydantic's ``model`` (as ``alter_partition_request``)."""
    message = quick(body)
    if message is None:
        message = parse_body(model, body).to_message()
    return message


def heartbeat_request(body: bytes) -> m.BrokerHeartbeatRequest:
    return _quick_or_pydantic(MF.heartbeat_message, M.BrokerHeartbeatRequest, body)


def registration_request(body: bytes) -> m.BrokerRegistrationRequest:
    return _quick_or_pydantic(MF.registration_message, M.BrokerRegistrationRequest, body)


def wants_ndjson(accept: str | None) -> bool:
    if not accept:
        return False
    for part in accept.split(","):
        media, *params = (x.strip() for x in part.split(";"))
        if media.lower() == NDJSON:
            return not any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00") for p in params)
    return False


def _ndjson(objs: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


# ---------------------------------------------------------------- auth and query dependencies

_bearer = HTTPBearer(
    auto_error=False,
    description="A token from the tokens file (roles broker, admin, read)",
)


def _needs(role: Role) -> Callable[..., Awaitable[Principal]]:
    async def authenticate(
        request: Request, _: Annotated[Any, Depends(_bearer)] = None
    ) -> Principal:
        authenticator: Authenticator = request.app.state.auth
        return authenticator.authenticate(request.headers.get("authorization"), role, request.scope)

    authenticate.__name__ = f"needs_{role.value}_role"
    return authenticate


BrokerCaller = Annotated[Principal, Depends(_needs(Role.BROKER))]
AdminCaller = Annotated[Principal, Depends(_needs(Role.ADMIN))]
ReadCaller = Annotated[Principal, Depends(_needs(Role.READ))]
TopicName = Annotated[str, Path(description="the topic's name")]
BrokerIdPath = Annotated[int, Path(ge=INT32_MIN, le=INT32_MAX, description="the broker id")]
IncludeSynonyms = Annotated[
    bool,
    Query(alias="includeSynonyms", description="list every level that sets each config"),
]
ConfigurationKeys = Annotated[
    list[str] | None,
    Query(
        alias="configurationKeys",
        max_length=limits.MAX_TOPIC_CONFIGS,
        description="only these configs (repeat the parameter); all when absent",
    ),
]

Consistency = Annotated[
    Literal["linearizable"] | None,
    Query(description="`linearizable`: commit a read barrier through the log first"),
]
IncludeSensitive = Annotated[
    bool | None,
    Query(
        alias="includeSensitive",
        description="the values of sensitive configs (PASSWORDs, configs of unknown type) in "
        "CONFIG_RECORDs: absent, as the caller's role allows (admin and broker: the values; "
        "read: `(redacted)`); `false`: `(redacted)`; `true`: the values, for the admin role "
        "only (403 for any other)",
    ),
]


# ---------------------------------------------------------------- the edge: who, how much, metrics

OPEN_PATHS = frozenset({"/livez", "/readyz", "/metrics"})
DOC_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})


class EdgeMiddleware:
    """Every request, in this order, before anything is reserved for it:

    1. the caller is identified from its headers (401 for a missing or unknown
       token; the role is checked later, by the route: 403);
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
        authorization = content_type = length = None
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
        principal = None
        if scope["path"] not in self.open_paths:
            header = None if authorization is None else authorization.decode("latin-1")
            try:
                # A hashed token's first check, in a thread; limited per address.
                await self.auth.prepare(header, (scope.get("client") or ("?",))[0])
                principal = self.auth.identify(header, scope)
            except ApiProblem as e:
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


def _before_body(problem: ApiProblem, length: bytes | None, chunked: bool) -> ApiProblem:
    """An answer sent before the request's body is read closes the connection
    (api/connections.py drops the rest of the body): the body left unread
    cannot be skipped to reach the next request."""
    if chunked or length not in (None, b"0"):
        problem.headers.setdefault("Connection", "close")
    return problem


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


# ---------------------------------------------------------------- the app


def create_app(
    node: ServedNode,
    *,
    tokens: TokenTable | str | os.PathLike | None = None,
    body_limit_bytes: int = DEFAULT_BODY_LIMIT,
    max_pending_writes: int = DEFAULT_MAX_PENDING_WRITES,
    direct_routes: bool = True,
    public_docs: bool = False,
    connections: ConnectionStats | None = None,
    body_budget_bytes: int = limits.MAX_BODY_BYTES_PER_CALLER,
    certificates: CertMapper | None = None,
    tls: ReloadingContext | None = None,
    require_certificate: bool = False,
    workers: Any = None,
    inner_middleware: Callable[[FastAPI], None] | None = None,
) -> FastAPI:
    """The HTTP API over ``node``. ``tokens``: a TokenTable or the path of a
    tokens file (``auth.load_tokens``); None turns auth off. ``direct_routes``:
    serve the broker endpoints without FastAPI's routing (api/direct_routes.py);
    off, FastAPI serves them (the tests compare the two). ``public_docs``: the
    OpenAPI pages answer without a token. ``connections``: the HTTP server's
    connection counters, for /metrics (api/connections.py). ``certificates``:
    how client certificates map to principals (api/cert_principals.py), when
    the server asks for them; auth is then on even without tokens. ``tls``:
    the server's reloading TLS context, for /metrics (api/tls.py).
    ``require_certificate``: every request, the probes' included, needs a
    verified client certificate (``serve --tls-client-auth required``).
    ``workers``: the core's app of a voter with HTTP workers: their request
    counts, summed (voter/core_link.SummedRequests), for /metrics.
    ``inner_middleware``: adds the innermost middleware to the app: an HTTP
    worker's forwards what needs the core's state to the core
    (voter/worker_node.ForwardToCore)."""
    if isinstance(tokens, str | os.PathLike):
        tokens = load_tokens(tokens)
    if body_limit_bytes < 1:
        raise ValueError(f"body_limit_bytes must be positive, got {body_limit_bytes}")
    metrics = ApiMetrics(node, connections, tls, workers)
    auth = Authenticator(tokens, certificates, on_throttled=metrics.count_auth_throttled)
    admission = Admission(max_pending_writes, fair=auth.enabled)
    if not auth.enabled:
        log.warning("auth is off: no tokens file nor client CA was given; every caller is admin")
    tracker = VoterTracker()

    app = FastAPI(
        title="metaquorum",
        version="1",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        default_response_class=JsonResponse,
        # FastAPI's native OpenTelemetry asks the global providers on every
        # request whether it is on (3% of a worker's time); /metrics is this
        # service's telemetry.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.node = node
    app.state.auth = auth
    app.state.metrics = metrics
    direct: dict[str, DirectRoute] = {}  # filled below, once the endpoints exist
    if inner_middleware is not None:
        inner_middleware(app)
    app.add_middleware(DirectRoutes, auth=auth, routes=direct)  # inside the edge
    app.add_middleware(
        EdgeMiddleware,
        limit=body_limit_bytes,
        metrics=metrics,
        auth=auth,
        admission=admission,
        public_docs=public_docs,
        body_budget=body_budget_bytes,
        require_certificate=require_certificate,
    )

    # ------------------------------------------------------------ errors -> responses

    async def on_problem(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiProblem)
        return exc.response()

    async def on_node_error(request: Request, exc: Exception) -> Response:
        return node_error_response(exc, request)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return validation_problem(list(exc.errors())).response()

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        return JsonResponse(
            error_body(Errors.INVALID_REQUEST, message),
            status_code=exc.status_code,
            headers=dict(exc.headers or {}),
        )

    app.add_exception_handler(ApiProblem, on_problem)
    app.add_exception_handler(NodeError, on_node_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)

    # ------------------------------------------------------------ helpers

    async def submit(message: object) -> Any:
        try:
            return await node.submit(message)
        except NodeError:
            raise
        except Exception as e:  # a controller bug: nothing of this request was written
            raise ApiProblem(
                500,
                Errors.UNKNOWN_SERVER_ERROR,
                internal_error(e, f"in the controller on {brief(message)}", written=False),
            ) from None

    def answer(model: M.ResponseModel) -> JsonResponse:
        return JsonResponse(model.to_json_obj())

    async def answer_large(build: Callable[..., Any], *args: Any, entries: int) -> JsonResponse:
        """The answer ``build(*args)`` makes, built in a thread when it has
        more than LARGE_ANSWER entries (10,000 matched ACLs are about 100 ms
        of the event loop otherwise: decisions.md 139)."""
        if entries <= LARGE_ANSWER:
            return JsonResponse(build(*args))
        obj = await asyncio.to_thread(build, *args)
        return await asyncio.to_thread(JsonResponse, obj)

    async def read_image(consistency: str | None) -> MetadataImage:
        # A local read needs a whole image, not a leader: a voter cut off from
        # the others still answers (X-Metadata-Offset says how fresh); only a
        # replaying or refusing node has nothing trustworthy to show.
        if node.sm.fatal is not None or node.replaying or not node.raft_alive:
            raise UnavailableError(not_ready_reason(node) or "this node cannot serve reads", 1.0)
        if consistency == "linearizable":
            await node.barrier()
        return node.image

    def with_offset(content: Any, image: MetadataImage, **headers: str) -> JsonResponse:
        return JsonResponse(
            content, headers={"X-Metadata-Offset": str(image.last_offset), **headers}
        )

    def topic_or_404(image: MetadataImage, name: str) -> TopicImage:
        topic = image.topic_by_name(name)
        if topic is None:
            raise ApiProblem(
                404,
                Errors.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {name!r} does not exist",
                headers={"X-Metadata-Offset": str(image.last_offset)},
            )
        return topic

    async def build(fn: Callable[[MetadataImage], Any], image: MetadataImage) -> Any:
        if image.partition_count > OFFLOAD_PARTITIONS:
            return await asyncio.to_thread(fn, image)  # the image is immutable
        return fn(image)

    # ------------------------------------------------------------ broker endpoints

    @app.post(
        "/v1/brokers/register",
        operation_id="registerBroker",
        tags=["brokers"],
        summary="BrokerRegistration",
        response_model=M.BrokerRegistrationResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.BrokerRegistrationRequest),
    )
    async def register_broker(request: Request, caller: BrokerCaller) -> Response:
        """Registers a broker incarnation (docs/kafka-rules.md §3): a new incarnation gets
        epoch = the offset of its RegisterBrokerRecord and starts fenced."""
        message = registration_request(await body_of(request))
        auth.check_broker(caller, message.broker_id)
        response = await submit(message)
        return JsonResponse(MF.registration_response_obj(response))

    @app.post(
        "/v1/brokers/heartbeat",
        operation_id="brokerHeartbeat",
        tags=["brokers"],
        summary="BrokerHeartbeat",
        response_model=M.BrokerHeartbeatResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.BrokerHeartbeatRequest),
    )
    async def broker_heartbeat(request: Request, caller: BrokerCaller) -> Response:
        """Keeps the broker's session; fences, unfences and runs controlled
        shutdown (docs/kafka-rules.md §4)."""
        message = heartbeat_request(await body_of(request))
        auth.check_broker(caller, message.broker_id)
        response = await submit(message)
        return JsonResponse(MF.heartbeat_response_obj(response))

    @app.post(
        "/v1/brokers/allocate-producer-ids",
        operation_id="allocateProducerIds",
        tags=["brokers"],
        summary="AllocateProducerIds",
        response_model=M.AllocateProducerIdsResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.AllocateProducerIdsRequest),
    )
    async def allocate_producer_ids(request: Request, caller: BrokerCaller) -> Response:
        """The next block of 1,000 producer ids for the broker's idempotent and
        transactional producers; no id is ever handed out twice."""
        req = parse_body(M.AllocateProducerIdsRequest, await request.body())
        auth.check_broker(caller, req.broker_id)
        response = await submit(req.to_message())
        return answer(M.AllocateProducerIdsResponse.from_message(response))

    @app.post(
        "/v1/alter-partition",
        operation_id="alterPartition",
        tags=["brokers"],
        summary="AlterPartition (v0-3)",
        response_model=M.AlterPartitionResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.AlterPartitionRequest),
    )
    async def alter_partition(
        request: Request,
        caller: BrokerCaller,
        version: Annotated[int, Query(ge=0, le=3, description="AlterPartition version")] = 3,
    ) -> Response:
        """A partition leader's ISR change (docs/kafka-rules.md §2), decided atomically
        against one image."""
        message = alter_partition_request(await body_of(request), version)
        auth.check_broker(caller, message.broker_id)
        response = await submit(message)
        return JsonResponse(MF.alter_partition_response_obj(response))

    routes = {getattr(r, "path", None): r for r in app.routes}
    version_query = TypeAdapter(Annotated[int, Field(ge=0, le=3)])

    async def alter_partition_direct(request: Request, caller: Principal) -> Response:
        version = query_param(request, "version", version_query, 3)
        return await alter_partition(request, caller, version)

    for path, endpoint in (
        ("/v1/brokers/register", register_broker),
        ("/v1/brokers/heartbeat", broker_heartbeat),
        ("/v1/alter-partition", alter_partition_direct),
    ):
        if direct_routes:
            direct[path] = DirectRoute(routes[path], Role.BROKER, endpoint)

    # ------------------------------------------------------------ admin endpoints

    @app.post(
        "/v1/topics",
        operation_id="createTopics",
        tags=["admin"],
        summary="CreateTopics",
        response_model=M.CreateTopicsResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.CreateTopicsRequest),
    )
    async def create_topics(request: Request, caller: AdminCaller) -> Response:
        req, message = await parse_message(M.CreateTopicsRequest, request)
        response = await submit(message)
        return answer(M.CreateTopicsResponse.from_message(response))

    @app.delete(
        "/v1/topics/{name}",
        operation_id="deleteTopic",
        tags=["admin"],
        summary="DeleteTopics (one topic)",
        response_model=M.DeleteTopicsResponse,
        responses=WRITE_RESPONSES,
    )
    async def delete_topic(name: TopicName, caller: AdminCaller) -> Response:
        response = await submit(M.delete_topics_message(name))
        return answer(M.DeleteTopicsResponse.from_message(response))

    @app.delete(
        "/v1/brokers/{id}",
        operation_id="unregisterBroker",
        tags=["admin"],
        summary="UnregisterBroker",
        response_model=M.UnregisterBrokerResponse,
        responses=WRITE_RESPONSES,
    )
    async def unregister_broker(id: BrokerIdPath, caller: AdminCaller) -> Response:
        """Decommissions a broker id (Kafka's UnregisterBroker): its
        registration is removed and it leaves every ISR, with new leaders
        elected, in one batch. Kafka does not refuse a live broker; stop it
        first (docs/api-additions.md)."""
        response = await submit(M.unregister_broker_message(id))
        return answer(M.UnregisterBrokerResponse.from_message(response))

    @app.post(
        "/v1/topics/{name}/partitions",
        operation_id="createPartitions",
        tags=["admin"],
        summary="CreatePartitions",
        response_model=M.CreatePartitionsResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.CreatePartitionsRequest),
    )
    async def create_partitions(name: TopicName, request: Request, caller: AdminCaller) -> Response:
        req = parse_body(M.CreatePartitionsRequest, await request.body())
        if req.validate_only:
            raise bad_request("validateOnly: true is not supported (nothing was created)")
        response = await submit(req.to_message(name))
        return answer(M.CreatePartitionsResponse.from_message(response))

    @app.post(
        "/v1/reassignments",
        operation_id="alterPartitionReassignments",
        tags=["admin"],
        summary="AlterPartitionReassignments",
        response_model=M.AlterPartitionReassignmentsResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.AlterPartitionReassignmentsRequest),
    )
    async def alter_reassignments(request: Request, caller: AdminCaller) -> Response:
        req, message = await parse_message(M.AlterPartitionReassignmentsRequest, request)
        response = await submit(message)
        return answer(M.AlterPartitionReassignmentsResponse.from_message(response))

    @app.post(
        "/v1/elect-leaders",
        operation_id="electLeaders",
        tags=["admin"],
        summary="ElectLeaders",
        response_model=M.ElectLeadersResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.ElectLeadersRequest),
    )
    async def elect_leaders(request: Request, caller: AdminCaller) -> Response:
        req, message = await parse_message(M.ElectLeadersRequest, request)
        response = await submit(message)
        return answer(M.ElectLeadersResponse.from_message(response))

    @app.post(
        "/v1/features",
        operation_id="updateFeatures",
        tags=["admin"],
        summary="UpdateFeatures (metadata.version, eligible.leader.replicas.version)",
        response_model=M.UpdateFeaturesResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.UpdateFeaturesRequest),
    )
    async def update_features(request: Request, caller: AdminCaller) -> Response:
        req = parse_body(M.UpdateFeaturesRequest, await request.body())
        response = await submit(req.to_message())
        return answer(M.UpdateFeaturesResponse.from_message(response))

    @app.post(
        "/v1/configs",
        operation_id="incrementalAlterConfigs",
        tags=["admin"],
        summary="IncrementalAlterConfigs",
        response_model=M.IncrementalAlterConfigsResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.IncrementalAlterConfigsRequest),
    )
    async def incremental_alter_configs(request: Request, caller: AdminCaller) -> Response:
        """Sets, deletes, appends to or subtracts from the configs of topics,
        brokers and the cluster-wide default (resource type 4, name ""). Each
        resource is all or nothing (docs/api-additions.md)."""
        req, message = await parse_message(M.IncrementalAlterConfigsRequest, request)
        response = await submit(message)
        return answer(M.IncrementalAlterConfigsResponse.from_message(response))

    # ------------------------------------------------------------ ACLs (issue 21 item 5)

    @app.post(
        "/v1/acls",
        operation_id="createAcls",
        tags=["admin"],
        summary="CreateAcls",
        response_model=M.CreateAclsResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.CreateAclsRequest),
    )
    async def create_acls(request: Request, caller: AdminCaller) -> Response:
        """Creates ACL bindings; one result per creation, in order. A binding
        that exists already succeeds and writes nothing (docs/api-additions.md)."""
        _, (message, problems) = await parse_message(M.CreateAclsRequest, request)
        response = await submit(message)
        return await answer_large(
            M.CreateAclsResponse.obj_from_message,
            response,
            problems,
            entries=len(problems) + len(response.results),
        )

    @app.post(
        "/v1/acls/delete",
        operation_id="deleteAcls",
        tags=["admin"],
        summary="DeleteAcls",
        response_model=M.DeleteAclsResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.DeleteAclsRequest),
    )
    async def delete_acls(request: Request, caller: AdminCaller) -> Response:
        """Deletes every binding each filter matches; each filter answers
        what it matched (Kafka's filter semantics)."""
        _, (message, problems) = await parse_message(M.DeleteAclsRequest, request)
        response = await submit(message)
        return await answer_large(
            M.DeleteAclsResponse.obj_from_message, response, problems,
            entries=sum(len(r.matching_acls) for r in response.filter_results),
        )  # fmt: skip

    @app.get(
        "/v1/acls",
        operation_id="describeAcls",
        tags=["reads"],
        summary="DescribeAcls",
        response_model=M.DescribeAclsOut,
        responses=READ_RESPONSES,
    )
    async def describe_acls(
        caller: ReadCaller,
        consistency: Consistency = None,
        resource_type: Annotated[
            str | None, Query(alias="resourceType", description="ANY (default), TOPIC, ...")
        ] = None,
        resource_name: Annotated[
            str | None, Query(alias="resourceName", description="absent: any")
        ] = None,
        pattern_type: Annotated[
            str | None,
            Query(alias="patternType", description="ANY (default), MATCH, LITERAL, PREFIXED"),
        ] = None,
        principal: Annotated[str | None, Query(description='e.g. "User:alice"')] = None,
        host: Annotated[str | None, Query(description="absent: any")] = None,
        operation: Annotated[str | None, Query(description="ANY (default), READ, ...")] = None,
        permission_type: Annotated[
            str | None, Query(alias="permissionType", description="ANY (default), ALLOW, DENY")
        ] = None,
    ) -> Response:
        """The bindings the filter matches, from the serving node's image."""
        try:
            acl_filter = acl_filter_from_query(
                resource_type, resource_name, pattern_type, principal, host, operation,
                permission_type,
            )  # fmt: skip
        except ValueError as e:
            raise ApiProblem(400, Errors.INVALID_REQUEST, str(e)) from None
        image = await read_image(consistency)
        return with_offset(acls_obj(image, acl_filter), image)

    @app.post(
        "/v1/quorum/transfer-leadership",
        operation_id="transferLeadership",
        tags=["admin"],
        summary="Transfer Raft leadership",
        response_model=M.TransferLeadershipResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.TransferLeadershipRequest, required=False),
    )
    async def transfer_leadership(request: Request, caller: AdminCaller) -> Response:
        """Hands leadership to ``targetNodeId`` (or the most caught-up voter);
        answers once another voter leads. Used before a planned restart."""
        body = await request.body()
        req = parse_body(M.TransferLeadershipRequest, body if body.strip() else b"{}")
        target = req.target_node_id
        voters = node.voter_addresses()
        others = sorted(v for v in voters if v != node.node_id)
        if target is not None and target not in others:
            raise bad_request(f"targetNodeId: {target} is not another voter (others: {others})")
        if not others:
            raise bad_request("targetNodeId: this cluster has no other voter to lead it")
        try:
            new_leader = await node.transfer_leadership(target)
        except ValueError as e:
            raise bad_request(str(e)) from None
        if new_leader is None:
            raise OutcomeUnknownError(
                "leadership did not move in time; it may still move (check /v1/quorum/status)"
            )
        return answer(
            M.TransferLeadershipResponse(**M.error_fields(Errors.NONE), leader_id=new_leader)
        )

    def voter_change(changed: bool, voters: tuple) -> JsonResponse:
        return answer(
            M.VoterChangeResponse(
                **M.error_fields(Errors.NONE),
                changed=changed,
                voters=[
                    M.VoterKeyOut(
                        node_id=v.voter_id,
                        directory_id=v.voter_directory_id,
                        raft_address=f"{v.host}:{v.port}",
                    )
                    for v in voters
                ],
            )
        )

    @app.post(
        "/v1/quorum/add-voter",
        operation_id="addVoter",
        tags=["admin"],
        summary="Add a voter (AddRaftVoter)",
        response_model=M.VoterChangeResponse,
        responses={**WRITE_RESPONSES, **ERR_409},
        openapi_extra=_body_doc(M.AddVoterRequest),
    )
    async def add_voter(request: Request, caller: AdminCaller) -> Response:
        """Streams the log to the running node at ``address`` and, once it has
        caught up, commits a voter set naming it (with its directory id).
        One change at a time; a retry finishes a change half done."""
        req = parse_body(M.AddVoterRequest, await request.body())
        if req.node_id < 0:
            raise bad_request(f"nodeId: {req.node_id} is not a node id (0 or more)")
        try:
            _, changed = await node.add_voter(req.node_id, req.address, req.timeout_ms / 1000)
        except ValueError as e:
            raise bad_request(str(e)) from None
        return voter_change(changed, node.image.voters)

    @app.post(
        "/v1/quorum/remove-voter",
        operation_id="removeVoter",
        tags=["admin"],
        summary="Remove a voter (RemoveRaftVoter)",
        response_model=M.VoterChangeResponse,
        responses={**WRITE_RESPONSES, **ERR_409},
        openapi_extra=_body_doc(M.RemoveVoterRequest),
    )
    async def remove_voter(request: Request, caller: AdminCaller) -> Response:
        """Commits a voter set without ``nodeId``; the node stops voting and
        standing for election once it has that record. One change at a time."""
        req = parse_body(M.RemoveVoterRequest, await request.body())
        if req.node_id < 0:
            raise bad_request(f"nodeId: {req.node_id} is not a node id (0 or more)")
        voters = await node.remove_voter(req.node_id)
        return voter_change(True, voters)

    # ------------------------------------------------------------ reads

    @app.get(
        "/v1/brokers",
        operation_id="listBrokers",
        tags=["reads"],
        summary="Registered brokers",
        response_model=M.BrokersOut,
        responses=READ_RESPONSES,
    )
    async def list_brokers(caller: ReadCaller, consistency: Consistency = None) -> Response:
        image = await read_image(consistency)
        return with_offset(brokers_obj(image), image)

    @app.get(
        "/v1/brokers/{id}",
        operation_id="getBroker",
        tags=["reads"],
        summary="One broker",
        response_model=M.BrokerOut,
        responses={
            **READ_RESPONSES,
            **not_found(
                Errors.BROKER_ID_NOT_REGISTERED, "broker 4 is not registered", "no such broker"
            ),
        },
    )
    async def get_broker(
        id: BrokerIdPath,
        caller: ReadCaller,
        consistency: Consistency = None,
    ) -> Response:
        image = await read_image(consistency)
        reg = image.brokers.get(id)
        if reg is None:
            raise ApiProblem(
                404,
                Errors.BROKER_ID_NOT_REGISTERED,
                f"broker {id} is not registered",
                headers={"X-Metadata-Offset": str(image.last_offset)},
            )
        return with_offset(broker_obj(reg), image)

    @app.get(
        "/v1/topics",
        operation_id="listTopics",
        tags=["reads"],
        summary="Topics with their partitions",
        response_model=M.TopicsOut,
        responses=READ_RESPONSES,
    )
    async def list_topics(caller: ReadCaller, consistency: Consistency = None) -> Response:
        image = await read_image(consistency)
        return with_offset(await build(topics_obj, image), image)

    @app.get(
        "/v1/topics/{name}",
        operation_id="getTopic",
        tags=["reads"],
        summary="One topic",
        response_model=M.TopicOut,
        responses={
            **READ_RESPONSES,
            **not_found(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, "topic 'orders' does not exist", "no such topic"
            ),
        },
    )
    async def get_topic(
        name: TopicName, caller: ReadCaller, consistency: Consistency = None
    ) -> Response:
        image = await read_image(consistency)
        return with_offset(topic_obj(topic_or_404(image, name)), image)

    @app.get(
        "/v1/configs/topics/{name}",
        operation_id="describeTopicConfigs",
        tags=["reads"],
        summary="DescribeConfigs for a topic",
        response_model=M.DescribeConfigsOut,
        responses={
            **READ_RESPONSES,
            **not_found(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, "topic 'orders' does not exist", "no such topic"
            ),
        },
    )
    async def describe_topic_configs(
        name: TopicName,
        caller: ReadCaller,
        consistency: Consistency = None,
        include_synonyms: IncludeSynonyms = False,
        keys: ConfigurationKeys = None,
    ) -> Response:
        """Every topic config with its effective value: the topic's own, else
        the cluster default's broker synonym, else Kafka's default."""
        image = await read_image(consistency)
        topic = topic_or_404(image, name)
        entries = resolve_topic_configs(topic.configs, image.broker_configs.get("", {}))
        return with_offset(
            configs_obj(ResourceType.TOPIC, name, entries, include_synonyms, keys), image
        )

    @app.get(
        "/v1/configs/brokers/{id}",
        operation_id="describeBrokerConfigs",
        tags=["reads"],
        summary="DescribeConfigs for a broker",
        response_model=M.DescribeConfigsOut,
        responses=READ_RESPONSES,
    )
    async def describe_broker_configs_route(
        id: Annotated[int, Path(ge=0, le=INT32_MAX, description="the broker id")],
        caller: ReadCaller,
        consistency: Consistency = None,
        include_synonyms: IncludeSynonyms = False,
        keys: ConfigurationKeys = None,
    ) -> Response:
        """The broker's dynamic configs, resolved broker -> cluster default ->
        Kafka's default (whether or not the broker is registered: configs may
        be set before it starts)."""
        image = await read_image(consistency)
        entries = describe_broker_configs(
            str(id), image.broker_configs.get(str(id), {}), image.broker_configs.get("", {})
        )
        return with_offset(
            configs_obj(ResourceType.BROKER, str(id), entries, include_synonyms, keys), image
        )

    @app.get(
        "/v1/configs/cluster",
        operation_id="describeClusterConfigs",
        tags=["reads"],
        summary="DescribeConfigs for the cluster-wide default",
        response_model=M.DescribeConfigsOut,
        responses=READ_RESPONSES,
    )
    async def describe_cluster_configs(
        caller: ReadCaller,
        consistency: Consistency = None,
        include_synonyms: IncludeSynonyms = False,
        keys: ConfigurationKeys = None,
    ) -> Response:
        """The configs set for every broker (Kafka's BROKER resource ""): only
        what is set."""
        image = await read_image(consistency)
        entries = describe_broker_configs("", {}, image.broker_configs.get("", {}))
        return with_offset(
            configs_obj(ResourceType.BROKER, "", entries, include_synonyms, keys), image
        )

    # ------------------------------------------------------------ client quotas

    @app.post(
        "/v1/client-quotas",
        operation_id="alterClientQuotas",
        tags=["admin"],
        summary="AlterClientQuotas",
        response_model=M.AlterClientQuotasResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=_body_doc(M.AlterClientQuotasRequest),
    )
    async def alter_client_quotas(request: Request, caller: AdminCaller) -> Response:
        """Sets or removes quotas of users, client ids (and their defaults)
        and ips. Each entity is all or nothing (docs/api-additions.md)."""
        req, message = await parse_message(M.AlterClientQuotasRequest, request)
        response = await submit(message)
        return answer(M.AlterClientQuotasResponse.from_message(response))

    def _quota_filter(entity_type: str, name: str | None, default: bool, any_: bool) -> list:
        given = [x for x in (name is not None, default, any_) if x]
        if len(given) > 1:
            raise ApiProblem(
                400,
                Errors.INVALID_REQUEST,
                f"Entity type {entity_type} cannot appear more than once in the filter: "
                "give one of its name, its default or any",
            )
        if name is not None:
            return [FilterComponent(entity_type, MATCH_TYPE_EXACT, name)]
        if default:
            return [FilterComponent(entity_type, MATCH_TYPE_DEFAULT)]
        if any_:
            return [FilterComponent(entity_type, MATCH_TYPE_SPECIFIED)]
        return []

    @app.get(
        "/v1/client-quotas",
        operation_id="describeClientQuotas",
        tags=["reads"],
        summary="DescribeClientQuotas",
        response_model=M.DescribeClientQuotasOut,
        responses=READ_RESPONSES,
    )
    async def describe_client_quotas(
        caller: ReadCaller,
        consistency: Consistency = None,
        user: Annotated[str | None, Query(description="the user of this name")] = None,
        user_default: Annotated[
            bool, Query(alias="userDefault", description="the default user")
        ] = False,
        any_user: Annotated[
            bool, Query(alias="anyUser", description="any user, the default too")
        ] = False,
        client_id: Annotated[
            str | None, Query(alias="clientId", description="the client id of this name")
        ] = None,
        client_id_default: Annotated[
            bool, Query(alias="clientIdDefault", description="the default client id")
        ] = False,
        any_client_id: Annotated[
            bool, Query(alias="anyClientId", description="any client id, the default too")
        ] = False,
        ip: Annotated[str | None, Query(description="the ip of this address")] = None,
        ip_default: Annotated[bool, Query(alias="ipDefault", description="the default ip")] = False,
        any_ip: Annotated[
            bool, Query(alias="anyIp", description="any ip, the default too")
        ] = False,
        strict: Annotated[
            bool, Query(description="only entities with no component beyond the filter's")
        ] = False,
    ) -> Response:
        """The quotas of every entity the filter matches (Kafka's filter: each
        component matches a name, the default, or any entity of its type; no
        component matches every entity), from the serving node's image."""
        components = (
            _quota_filter(USER, user, user_default, any_user)
            + _quota_filter(CLIENT_ID, client_id, client_id_default, any_client_id)
            + _quota_filter(IP, ip, ip_default, any_ip)
        )
        image = await read_image(consistency)
        result = client_quotas_obj(image, components, strict)
        if isinstance(result, ApiError):
            raise ApiProblem(
                400,
                result.error,
                result.message or "",
                headers={"X-Metadata-Offset": str(image.last_offset)},
            )
        return with_offset(result, image)

    @app.get(
        "/v1/log",
        operation_id="readLog",
        tags=["reads"],
        summary="The decoded metadata log (long-poll)",
        response_model=M.LogOut,
        responses={
            **READ_RESPONSES,
            200: {
                "description": "the records (JSON, or one record per line with "
                "`Accept: application/x-ndjson`; then X-Next-Offset and "
                "X-High-Watermark carry the page's offsets)",
                "content": {NDJSON: {"schema": {"$ref": "#/components/schemas/RecordOut"}}},
                "headers": {"X-Metadata-Offset": HEADERS["X-Metadata-Offset"]},
            },
            **OFFSET_TOO_OLD,
        },
    )
    async def read_log(
        caller: ReadCaller,
        from_offset: Annotated[
            int,
            Query(alias="fromOffset", ge=0, le=INT64_MAX, description="the first offset to read"),
        ] = 0,
        max_records: Annotated[
            int,
            Query(
                alias="maxRecords", ge=1, le=MAX_LOG_RECORDS, description="the most records to send"
            ),
        ] = DEFAULT_LOG_RECORDS,
        wait_ms: Annotated[
            int,
            Query(
                alias="waitMs",
                ge=0,
                le=MAX_WAIT_MS,
                description="how long to wait for a record at fromOffset when there is none yet",
            ),
        ] = 0,
        consistency: Consistency = None,
        accept: Annotated[str | None, Header()] = None,
        include_sensitive: IncludeSensitive = None,
    ) -> Response:
        """The records from ``fromOffset`` on; a sensitive config's value is
        `(redacted)` unless the caller's role sees it (docs/security.md "Who
        sees what")."""
        sensitive = auth.shows_sensitive(caller, include_sensitive)
        image = await read_image(consistency)
        if from_offset >= image.next_offset and wait_ms > 0:
            await node.wait_for_offset(from_offset, wait_ms / 1000)
        record_log = node.sm.log
        try:
            entries = record_log.read(from_offset, max_records)
        except OffsetTooOld as e:
            return JsonResponse(
                {
                    "errorCode": Errors.OFFSET_OUT_OF_RANGE.value,
                    "errorName": Errors.OFFSET_OUT_OF_RANGE.name,
                    "errorMessage": f"{e}; load /v1/snapshot, then follow the log from its "
                    "nextOffset",
                    "oldestOffset": e.oldest,
                },
                status_code=410,
                headers={"X-Metadata-Offset": str(node.image.last_offset)},
            )
        # The log is appended just before the image is published: never show
        # records beyond the image the headers describe.
        image = node.image
        entries = [e for e in entries if e.offset < image.next_offset]
        next_offset = entries[-1].offset + 1 if entries else from_offset
        records = [
            log_record_to_obj(
                e.offset,
                e.timestamp_ms,
                e.controller_epoch,
                e.record if sensitive else redacted(e.record),
                e.batch_offset,
            )
            for e in entries
        ]
        oldest = record_log.oldest_offset
        if wants_ndjson(accept):
            return Response(
                _ndjson(records),
                media_type=NDJSON,
                headers={
                    "X-Metadata-Offset": str(image.last_offset),
                    "X-Next-Offset": str(next_offset),
                    "X-High-Watermark": str(image.next_offset),
                    "X-Oldest-Offset": str(oldest),
                },
            )
        return with_offset(
            {
                "records": records,
                "nextOffset": next_offset,
                "highWatermark": image.next_offset,
                "oldestOffset": oldest,
            },
            image,
        )

    @app.get(
        "/v1/snapshot",
        operation_id="readSnapshot",
        tags=["reads"],
        summary="The image at an offset, as records",
        response_model=M.SnapshotOut,
        responses={
            **READ_RESPONSES,
            200: {
                "description": "the snapshot (JSON, or one record per line with "
                "`Accept: application/x-ndjson`; then X-Metadata-Offset and "
                "X-Next-Offset give its offsets)",
                "content": {NDJSON: {"schema": {"$ref": "#/components/schemas/RecordOut"}}},
                "headers": {"X-Metadata-Offset": HEADERS["X-Metadata-Offset"]},
            },
        },
    )
    async def read_snapshot(
        caller: ReadCaller,
        consistency: Consistency = None,
        accept: Annotated[str | None, Header()] = None,
        include_sensitive: IncludeSensitive = None,
    ) -> Response:
        """Records that recreate the image (LEADER_CHANGE, FEATURE_LEVEL_RECORD,
        REGISTER_BROKER_RECORD, TOPIC_RECORD, CONFIG_RECORD, PARTITION_RECORD);
        each carries ``offset`` = the image's last offset. A sensitive config's
        value is `(redacted)` unless the caller's role sees it."""
        sensitive = auth.shows_sensitive(caller, include_sensitive)
        image = await read_image(consistency)
        timestamp = snapshot_timestamp(node, image)
        records = await build(lambda i: snapshot_record_objs(i, timestamp, sensitive), image)
        if wants_ndjson(accept):
            body = await build(lambda _: _ndjson(records), image)
            return Response(
                body,
                media_type=NDJSON,
                headers={
                    "X-Metadata-Offset": str(image.last_offset),
                    "X-Next-Offset": str(image.next_offset),
                },
            )
        return with_offset(
            {"offset": image.last_offset, "nextOffset": image.next_offset, "records": records},
            image,
        )

    @app.get(
        "/v1/quorum/status",
        operation_id="quorumStatus",
        tags=["reads"],
        summary="Quorum status",
        response_model=M.QuorumStatusOut,
        responses={
            200: READ_RESPONSES[200],
            **ERR_400,
            **ERR_AUTH,
            **ERR_429,
        },
    )
    async def quorum_status(
        caller: ReadCaller,
        digest: Annotated[
            bool, Query(description="also compute imageDigest (costs a full image encoding)")
        ] = False,
    ) -> Response:
        """Served even when the node is not ready (that is when it is needed)."""
        image = node.image
        status = quorum_status_obj(node, tracker, auth.enabled)
        status["imageDigest"] = None
        pool = getattr(app.state, "http_workers", None)  # metaquorum/http_workers.py
        status["httpWorkers"] = [] if pool is None else pool.describe()
        status["ordererProcess"] = None if pool is None else pool.describe_orderer()
        if digest:
            offset, value = await asyncio.to_thread(node.image_digest)
            status["lastAppliedOffset"], status["imageDigest"] = offset, value
        return with_offset(status, image)

    # ------------------------------------------------------------ health and metrics

    @app.get(
        "/livez",
        operation_id="livez",
        tags=["health"],
        summary="Liveness",
        response_model=M.HealthOut,
    )
    async def livez() -> Response:
        """The process and the Raft tick thread are alive."""
        if node.raft_alive:
            return JsonResponse({"status": "alive", "reason": None})
        reason = node.sm.fatal or "the Raft tick thread is not running"
        return JsonResponse({"status": "dead", "reason": reason}, status_code=503)

    @app.get(
        "/readyz",
        operation_id="readyz",
        tags=["health"],
        summary="Readiness",
        response_model=M.HealthOut,
        responses=NOT_READY,
    )
    async def readyz() -> Response:
        """Replay done, a leader known, this node caught up."""
        tracker.sample(node, node.raft_status())
        reason = not_ready_reason(node)
        if reason is None:
            return JsonResponse({"status": "ready", "reason": None})
        return JsonResponse(
            {"status": "not ready", "reason": reason, **error_body(Errors.NOT_CONTROLLER, reason)},
            status_code=503,
            headers=retry_after(1.0),
        )

    @app.get(
        "/metrics",
        operation_id="metrics",
        tags=["health"],
        summary="Prometheus metrics",
        response_class=Response,
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text"}},
    )
    async def prometheus() -> Response:
        tracker.sample(node, node.raft_status())
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    # ------------------------------------------------------------ OpenAPI

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
            tags=TAGS,
        )
        finish(schema, REQUEST_MODELS)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
