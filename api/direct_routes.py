"""The hot broker endpoints served straight from the ASGI scope: the fast twin
of FastAPI's routing of the same endpoints (api/routes/brokers.py).

Heartbeats, AlterPartition and registrations are nearly all of a cluster's
write traffic. FastAPI spends more CPU routing such a request and solving its
dependencies than the endpoint spends on it (docs/decisions.md 14; in-process,
about 330 -> 245 us per heartbeat through httpx), so ``DirectRoutes`` answers
these three POSTs itself: it authenticates, parses the query, and calls the
very endpoint functions FastAPI has registered (so the OpenAPI document and
every behaviour stay one), in FastAPI's order: authentication (401/403), then
query parameters (400), then the endpoint (body, broker binding, the write).
Errors become the answers the app's exception handlers give. Anything else,
and any other method on these paths, goes on to FastAPI.

The switch is ``create_app(direct_routes=False)``: FastAPI routes everything.
Agreement tests: ``tests/test_api_direct_routes.py`` sends the same requests
(listed edge cases and Hypothesis-drawn ones) to the app with the switch on
and off and compares status, body and headers. Not a module-level switch:
``metaquorum/speed_switches.py`` names it among the speed paths without one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from quorum import stage_trace
from quorum.node_errors import NodeError

from .auth import Authenticator, Principal, Role
from .errors import ApiProblem, node_error_response, validation_problem

log = logging.getLogger(__name__)

Endpoint = Callable[[Request, Principal], Awaitable[Response]]


@dataclass(frozen=True)
class DirectRoute:
    route: Any  # FastAPI's APIRoute for the path: the metrics label (EdgeMiddleware)
    role: Role
    endpoint: Endpoint


# Query strings whose parameter validated, and its value: a broker sends the
# same one or two (``version=3``) on every request, and parsing and validating
# one costs about 7 us of a worker's ~100 per request. Bounded: past it, new
# strings are parsed each time, so unique ones from a client cannot grow it.
_VALID_QUERIES: dict[tuple[bytes, str, TypeAdapter], Any] = {}
VALID_QUERIES_KEPT = 64


def query_param(request: Request, name: str, adapter: TypeAdapter, default: Any) -> Any:
    """A query parameter validated as FastAPI would (its last value wins), or
    the same 400 FastAPI's validation error gives."""
    key = (request.scope.get("query_string", b""), name, adapter)
    value = _VALID_QUERIES.get(key, _UNSEEN)
    if value is not _UNSEEN:
        return value
    raw = request.query_params.get(name)
    if raw is None:
        value = default
    else:
        try:
            value = adapter.validate_python(raw)
        except ValidationError as e:
            errors = [{**err, "loc": ("query", name, *err["loc"])} for err in e.errors()]
            raise validation_problem(errors) from None
    if len(_VALID_QUERIES) < VALID_QUERIES_KEPT:
        _VALID_QUERIES[key] = value
    return value


_UNSEEN = object()


class DirectRoutes:
    """ASGI middleware: POSTs to ``routes`` are answered here."""

    def __init__(
        self, app: ASGIApp, *, auth: Authenticator, routes: Mapping[str, DirectRoute]
    ) -> None:
        self.app = app
        self.auth = auth
        self.routes = routes  # filled by create_app once its endpoints exist

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        direct = None
        if scope["type"] == "http" and scope["method"] == "POST":
            direct = self.routes.get(scope["path"])
        if direct is None:
            await self.app(scope, receive, send)
            return
        if stage_trace.TRACE is not None:
            stage_trace.TRACE.mark("route")
        scope["route"] = direct.route
        request = Request(scope, receive)
        try:
            caller = self.auth.authenticate(
                request.headers.get("authorization"), direct.role, scope
            )
            response = await direct.endpoint(request, caller)
        except ApiProblem as e:
            response = e.response()
        except NodeError as e:
            response = node_error_response(e, request)
        except Exception as e:  # a bug: answered as the app's handlers would (500)
            response = node_error_response(e, request)
        if stage_trace.TRACE is not None:
            stage_trace.TRACE.mark("answer")
        await response(scope, receive, send)
