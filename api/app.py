"""The FastAPI app: every endpoint of docs/api.md over one node (api/served_node.py: a voter's core or one of its HTTP workers).

``create_app(node)`` builds it; the node must already be started on the event
loop the app runs on (``await node.start()``). The app translates HTTP to the
controller's messages and the node's errors to statuses (see ``errors.py``); it
decides nothing itself. ``create_app`` only assembles: the edge every request
passes first (api/edge.py), the endpoints by domain (api/routes/), the
OpenAPI document (api/routes/document.py) and the answers to errors (here).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from metadata_records import limits
from metadata_records.errors import Errors
from quorum.node_errors import NodeError

from . import routes
from .admission import Admission
from .auth import Authenticator, CertMapper, TokenTable, load_tokens
from .connections import ConnectionStats
from .direct_routes import DirectRoute, DirectRoutes
from .edge import EdgeMiddleware
from .errors import (
    ApiProblem,
    JsonResponse,
    error_body,
    node_error_response,
    validation_problem,
)
from .metrics import ApiMetrics
from .reads import VoterTracker
from .routes.context import RouteContext
from .routes.document import DESCRIPTION, TAGS, serve_document
from .served_node import ServedNode
from .tls import ReloadingContext

log = logging.getLogger(__name__)

DEFAULT_BODY_LIMIT = limits.MAX_BODY_BYTES
# Writes being handled at once by this node, HTTP parsing included. The
# controller's queue (--max-queued-requests) bounds what waits for Raft; this
# bounds what waits for the CPU before it: past it the event loop, not Raft, is
# the bottleneck, and every extra request only adds latency to all the others.
DEFAULT_MAX_PENDING_WRITES = 256


def answer_errors(app: FastAPI) -> None:
    """Every error as the contract's JSON (errorCode, errorName,
    errorMessage): the API's problems, the node's errors, a bad request (400,
    never FastAPI's 422), an unknown route (404) or method (405)."""

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
    delegation_token_secret: str | None = None,
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
    ``delegation_token_secret``: the voters' delegation token secret, from
    which DescribeDelegationToken derives each token's HMAC (None: tokens are
    disabled, and describing them answers DELEGATION_TOKEN_AUTH_DISABLED).
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
    answer_errors(app)
    ctx = RouteContext(
        node,
        auth,
        metrics,
        VoterTracker(),
        direct if direct_routes else None,
        delegation_token_secret,
    )
    routes.register(app, ctx)
    serve_document(app)
    return app
