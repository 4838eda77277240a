"""HTTP statuses and error bodies (docs/api.md "Conventions").

Every error body carries ``errorCode``, ``errorName`` and ``errorMessage``.
The node's errors map to statuses here and nowhere else:

==========================  ======  =========================================
``NotControllerError``      307     ``Location`` = same path and query on the
                                    leader; body ``NOT_CONTROLLER`` (41),
                                    ``leaderId``, ``leaderUrl``
``UnavailableError``        503     ``NOT_CONTROLLER`` (41), ``Retry-After``
``ThrottledError``          429     ``THROTTLING_QUOTA_EXCEEDED`` (89),
                                    ``Retry-After``; nothing was written
``MembershipRefused``       409     its Kafka error (``DUPLICATE_VOTER`` 126,
                                    ``VOTER_NOT_FOUND`` 127, ``REQUEST_TIMED_OUT``
                                    7, ``INVALID_REQUEST`` 42) and why; nothing
                                    was changed
``OutcomeUnknownError``     503     ``REQUEST_TIMED_OUT`` (7), ``Retry-After``;
                                    the write may still commit (Raft), so the
                                    client retries and the protocol's epochs
                                    make the retry safe
anything else               500     ``UNKNOWN_SERVER_ERROR`` (-1)
==========================  ======  =========================================
"""

from __future__ import annotations

import logging
import math
import secrets
from typing import Any

import orjson
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

from metadata_records.codec import brief
from metadata_records.config_schema import HIDDEN
from metadata_records.errors import Errors
from quorum.node_errors import (
    MembershipRefused,
    NodeError,
    NotControllerError,
    OutcomeUnknownError,
    ThrottledError,
    UnavailableError,
)

from .models import INT_KINDS

log = logging.getLogger(__name__)


class JsonResponse(JSONResponse):
    """JSON via orjson (a JSONResponse, so OpenAPI documents the response models)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def error_body(error: Errors, message: str | None, **extra: Any) -> dict[str, Any]:
    return {"errorCode": int(error), "errorName": error.name, "errorMessage": message, **extra}


class ApiProblem(Exception):
    """An answer other than 200, raised anywhere in a handler."""

    def __init__(
        self,
        status: int,
        error: Errors,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.headers = headers or {}
        self.extra = extra or {}

    def response(self) -> JsonResponse:
        return JsonResponse(
            error_body(self.error, self.message, **self.extra),
            status_code=self.status,
            headers=self.headers,
        )


def bad_request(message: str) -> ApiProblem:
    return ApiProblem(400, Errors.INVALID_REQUEST, message)


def retry_after(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def retry_response(
    status: int, error: Errors, message: str, seconds: float, **extra: Any
) -> JsonResponse:
    """A 429/503: ``Retry-After`` in whole seconds as HTTP has it, and the exact
    hint in the body (``retryAfterMs``), so a broker need not wait a whole second
    for a leader elected in a fifth of one."""
    return JsonResponse(
        error_body(error, message, retryAfterMs=int(seconds * 1000), **extra),
        status_code=status,
        headers=retry_after(seconds),
    )


# ---------------------------------------------------------------- node errors


def leader_location(leader_url: str, request: Request) -> str:
    """The same path and query on the leader's URL."""
    path = request.scope.get("raw_path") or request.url.path.encode()
    query = request.scope.get("query_string") or b""
    location = leader_url.rstrip("/") + path.decode("latin-1")
    if query:
        location += "?" + query.decode("latin-1")
    return location


def node_error_response(error: BaseException, request: Request) -> JsonResponse:
    if isinstance(error, NotControllerError) and error.leader_url:
        return JsonResponse(
            error_body(
                Errors.NOT_CONTROLLER,
                str(error),
                leaderId=error.leader_id,
                leaderUrl=error.leader_url,
            ),
            status_code=307,
            headers={"Location": leader_location(error.leader_url, request)},
        )
    if isinstance(error, NotControllerError):  # no URL to send the client to
        return retry_response(
            503, Errors.NOT_CONTROLLER, str(error), 1.0, leaderId=error.leader_id, leaderUrl=None
        )
    if isinstance(error, UnavailableError):
        return retry_response(503, Errors.NOT_CONTROLLER, str(error), error.retry_after_s)
    if isinstance(error, ThrottledError):
        return retry_response(
            429, Errors.THROTTLING_QUOTA_EXCEEDED, str(error), error.retry_after_s
        )
    if isinstance(error, MembershipRefused):
        extra = {} if error.rule is None else {"rule": error.rule}
        return JsonResponse(error_body(error.error, str(error), **extra), status_code=409)
    if isinstance(error, OutcomeUnknownError):
        message = str(error)
        if "may still commit" not in message:
            message += "; the write may still commit"
        message += " (retry: the protocol's epochs make a retry safe)"
        return retry_response(503, Errors.REQUEST_TIMED_OUT, message, 1.0)
    if isinstance(error, NodeError):  # a kind this module does not know yet
        return retry_response(503, Errors.NOT_CONTROLLER, str(error), 1.0)
    return JsonResponse(
        error_body(
            Errors.UNKNOWN_SERVER_ERROR,
            internal_error(error, f"answering {request.method} {request.url.path}"),
        ),
        status_code=500,
    )


def internal_error(error: BaseException, doing: str, *, written: bool | None = None) -> str:
    """Logs ``error`` with an incident id and returns the message for the
    caller's 500, which shows no internal detail (exception types and texts
    can carry paths, names and data), only the id to report."""
    incident = secrets.token_hex(4)
    log.error("internal error %s %s", incident, doing, exc_info=error)
    outcome = " nothing of this request was written;" if written is False else ""
    return (
        f"internal error (incident {incident} in this node's log);{outcome} retry, and "
        "report the incident if it persists"
    )


# ---------------------------------------------------------------- validation errors

_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}
_KIND_BY_BOUND = {}
for _kind, (_low, _high) in INT_KINDS.items():
    _KIND_BY_BOUND.setdefault(("le", _high), _kind)
    _KIND_BY_BOUND.setdefault(("ge", _low), _kind)
_KIND_BY_BOUND[("ge", 0)] = "uint16"
_KIND_BY_BOUND[("le", 65535)] = "uint16"
_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
    "string_type": "a string",
    "list_type": "an array",
    "model_type": "an object",
    "dict_type": "an object",
    "model_attributes_type": "an object",
}


def field_path(loc: tuple[Any, ...]) -> str:
    """``("topics", 0, "partitions", 1, "newIsr")`` -> ``topics[0].partitions[1].newIsr``."""
    if loc and loc[0] in ("query", "path", "header"):
        return f"{'.'.join(str(x) for x in loc[1:])} ({loc[0]} parameter)"
    if loc and loc[0] == "body":
        loc = loc[1:]
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


def _config_value(loc: tuple[Any, ...]) -> bool:
    """A config's value in a request body (``resources[0].configs[1].value``):
    it may be a password, so a message names its field, never its content."""
    return len(loc) >= 3 and loc[-1] == "value" and loc[-3] == "configs"


def describe_error(err: dict[str, Any]) -> str:
    loc = tuple(err.get("loc", ()))
    where = field_path(loc)
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    value = err.get("input")
    if _config_value(loc):
        got = _JSON_TYPES.get(type(value), type(value).__name__)
        return f"{where}: {err.get('msg')} (got {got} {HIDDEN})"
    if kind == "missing":
        return f"{where}: required field is missing"
    if kind == "json_invalid":
        return f"body: not valid JSON ({ctx.get('error', err.get('msg'))})"
    if kind in _EXPECTED:
        got = _JSON_TYPES.get(type(value), type(value).__name__)
        return f"{where}: expected {_EXPECTED[kind]}, got {got} {brief(value)}"
    if kind in ("less_than_equal", "greater_than_equal"):
        bound = ("le", ctx.get("le")) if kind == "less_than_equal" else ("ge", ctx.get("ge"))
        int_kind = _KIND_BY_BOUND.get(bound)
        if int_kind is not None and not where.endswith("parameter)"):
            low, high = INT_KINDS[int_kind]
            return f"{where}: {brief(value)} is out of the {int_kind} range [{low}, {high}]"
    return f"{where}: {err.get('msg')} (got {brief(value)})"


def describe_errors(errors: list[dict[str, Any]]) -> str:
    text = describe_error(errors[0])
    if len(errors) > 1:
        text += f" (and {len(errors) - 1} more: " + "; ".join(
            describe_error(e) for e in errors[1:4]
        )
        text += "; ...)" if len(errors) > 4 else ")"
    return text


def validation_problem(error: ValidationError | list[dict[str, Any]]) -> ApiProblem:
    errors = error.errors() if isinstance(error, ValidationError) else list(error)
    if not errors:
        return bad_request("the request is not valid")
    return bad_request(describe_errors(errors))
