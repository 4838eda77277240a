"""The OpenAPI document beyond what FastAPI derives from the routes.

A broker team in another language starts from ``/openapi.json`` and a client
generator, so the document states what docs/api.md states: each status a route can
answer, with the error body's schema, an example of each kind of answer and the
headers that come with it (``Retry-After``, ``Location``, ...). Descriptions and
examples only: the schemas' types are the models' (schemathesis checks real
answers against them, tests/test_api_fuzz.py).

``finish`` completes FastAPI's document: the request bodies (the app parses
them itself, so FastAPI does not see them), no 422 (validation errors are 400
here), and the examples of nested schemas, taken from their parents' examples
so that every schema has one and all tell of the same cluster.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from metadata_records.errors import Errors

from . import models as M
from .errors import error_body

HEADERS: dict[str, dict[str, Any]] = {
    "Retry-After": {
        "description": "whole seconds to wait before retrying (retryAfterMs in the body is exact)",
        "required": True,
        "schema": {"type": "integer", "minimum": 1},
        "example": 1,
    },
    "Location": {
        "description": "the same path and query on the active controller's URL",
        "required": True,
        "schema": {"type": "string", "format": "uri"},
        "example": "http://metaquorum-1.metaquorum:8080/v1/brokers/heartbeat",
    },
    "WWW-Authenticate": {
        "description": "the scheme to authenticate with (absent when the server asks for a "
        "client certificate instead)",
        "schema": {"type": "string"},
        "example": 'Bearer realm="metaquorum"',
    },
    "X-Metadata-Offset": {
        "description": "the serving node's last applied offset: how fresh the answer is",
        "required": True,
        "schema": {"type": "integer", "minimum": -1},
        "example": 41,
    },
}


def answer(
    model: type[BaseModel],
    description: str,
    examples: dict[str, tuple[str, dict[str, Any]]],
    headers: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A documented answer: its schema, named examples (name: (summary, body)), headers."""
    doc: dict[str, Any] = {
        "model": model,
        "description": description,
        "content": {
            "application/json": {
                "examples": {
                    name: {"summary": summary, "value": value}
                    for name, (summary, value) in examples.items()
                }
            }
        },
    }
    if headers:
        doc["headers"] = {name: HEADERS[name] for name in headers}
    return doc


def _retry(error: Errors, message: str, retry_after_ms: int = 1000) -> dict[str, Any]:
    return error_body(error, message, retryAfterMs=retry_after_ms)


ERR_400 = {
    400: answer(
        M.ErrorResponse,
        "INVALID_REQUEST (42): not JSON, a wrong type, a missing field, an int out of its "
        "Kafka range, a field of another AlterPartition version, an unknown query value; "
        "errorMessage names the field. Nothing was written.",
        {
            "wrongType": (
                "a string where an int64 belongs",
                error_body(
                    Errors.INVALID_REQUEST, 'brokerEpoch: expected an integer, got string "17"'
                ),
            ),
            "otherVersion": (
                "a field of another AlterPartition version",
                error_body(
                    Errors.INVALID_REQUEST,
                    "topics[0].partitions[0].newIsr: not in AlterPartition version 3 "
                    "(only in versions 0-2)",
                ),
            ),
        },
    )
}
ERR_AUTH = {
    401: answer(
        M.ErrorResponse,
        "CLUSTER_AUTHORIZATION_FAILED (31): the bearer token is missing or unknown",
        {
            "missingToken": (
                "no Authorization header",
                error_body(
                    Errors.CLUSTER_AUTHORIZATION_FAILED,
                    "missing bearer token (Authorization: Bearer <token>)",
                ),
            ),
            "unknownToken": (
                "a token the tokens file does not hold",
                error_body(
                    Errors.CLUSTER_AUTHORIZATION_FAILED,
                    "unknown bearer token; use a token from the tokens file",
                ),
            ),
        },
        headers=("WWW-Authenticate",),
    ),
    403: answer(
        M.ErrorResponse,
        "CLUSTER_AUTHORIZATION_FAILED (31): the token lacks the role, or a broker token "
        "acts for another broker",
        {
            "role": (
                "a read token on a write",
                error_body(
                    Errors.CLUSTER_AUTHORIZATION_FAILED,
                    "the read token may not call this endpoint (it needs the admin role); "
                    "use a token with that role",
                ),
            ),
            "otherBroker": (
                "broker 1's token acting for broker 2",
                error_body(
                    Errors.CLUSTER_AUTHORIZATION_FAILED,
                    "the broker token for broker 1 may not act for broker 2",
                ),
            ),
        },
    ),
}
ERR_429 = {
    429: answer(
        M.RetryResponse,
        "THROTTLING_QUOTA_EXCEEDED (89), admission control: too much is queued here or "
        "for this caller. Nothing was written; retry after Retry-After.",
        {
            "queued": (
                "too many writes in progress",
                _retry(
                    Errors.THROTTLING_QUOTA_EXCEEDED,
                    "256 writes are in progress; nothing was written: retry after Retry-After",
                ),
            )
        },
        headers=("Retry-After",),
    )
}
_NO_LEADER = (
    "no leader known (an election is under way)",
    _retry(
        Errors.NOT_CONTROLLER,
        "no active controller is known yet (an election is under way)",
        250,
    ),
)
_REPLAYING = (
    "the node is still replaying its log",
    _retry(Errors.NOT_CONTROLLER, "this node is still replaying its log"),
)
ERR_503_WRITE = {
    503: answer(
        M.RetryResponse,
        "Retry after Retry-After: no leader known, the node is replaying, not ready or "
        "shutting down (NOT_CONTROLLER, 41; nothing was decided), or the write's outcome is "
        "unknown (REQUEST_TIMED_OUT, 7; it may still commit: a retry is safe, the "
        "protocol's epochs see to it)",
        {
            "noLeader": _NO_LEADER,
            "replaying": _REPLAYING,
            "outcomeUnknown": (
                "the write timed out; it may still commit",
                _retry(
                    Errors.REQUEST_TIMED_OUT,
                    "the write was not committed within 10 s; the write may still commit "
                    "(retry: the protocol's epochs make a retry safe)",
                ),
            ),
        },
        headers=("Retry-After",),
    )
}
ERR_503_READ = {
    503: answer(
        M.RetryResponse,
        "NOT_CONTROLLER (41): the node is replaying or refuses to serve; a linearizable "
        "read whose barrier did not commit in time answers REQUEST_TIMED_OUT (7). Retry "
        "after Retry-After, or ask another node.",
        {"replaying": _REPLAYING},
        headers=("Retry-After",),
    )
}
ERR_307 = {
    307: answer(
        M.NotControllerResponse,
        "NOT_CONTROLLER (41): this node is not the active controller; repeat the request "
        "at Location (nothing was decided here)",
        {
            "notController": (
                "node 1 leads",
                error_body(
                    Errors.NOT_CONTROLLER,
                    "node 0 is not the active controller; node 1 is",
                    leaderId=1,
                    leaderUrl="http://metaquorum-1.metaquorum:8080",
                ),
            )
        },
        headers=("Location",),
    )
}
ERR_BODY = {
    413: answer(
        M.ErrorResponse,
        "INVALID_REQUEST (42): the body is over the limit (16 MiB by default); the "
        "connection is closed",
        {
            "tooLarge": (
                "a 20 MB body",
                error_body(
                    Errors.INVALID_REQUEST,
                    "request body too large: Content-Length is 20000000 bytes; the limit is "
                    "16777216 bytes (see docs/limits.md)",
                ),
            )
        },
    ),
    415: answer(
        M.ErrorResponse,
        "INVALID_REQUEST (42): a body without Content-Type: application/json (UTF-8)",
        {
            "notJson": (
                "a form body",
                error_body(
                    Errors.INVALID_REQUEST,
                    "Content-Type 'application/x-www-form-urlencoded' is not supported: send "
                    "the body as JSON with 'Content-Type: application/json'",
                ),
            )
        },
    ),
}
ERR_409 = {
    409: answer(
        M.ErrorResponse,
        "the voter change is refused as things stand; nothing was changed "
        "(DUPLICATE_VOTER 126, VOTER_NOT_FOUND 127, REQUEST_TIMED_OUT 7: another change in "
        "flight or the node not caught up, INVALID_REQUEST 42: the last voter, the leader "
        "itself, no majority left)",
        {
            "duplicate": (
                "the node already votes",
                error_body(Errors.DUPLICATE_VOTER, "node 2 is already a voter"),
            ),
            "notFound": (
                "no such voter",
                error_body(Errors.VOTER_NOT_FOUND, "node 7 is not a voter"),
            ),
        },
    )
}

ERR_409_TRANSFER = {
    409: answer(
        M.TransferLeadershipResponse,
        "PREFERRED_LEADER_NOT_AVAILABLE (80): the handover was sent but leadership did not "
        "move: the target lost its election (or did not stand) and leaderId leads term, "
        "taking writes; nothing is held back: retry the transfer",
        {
            "notWon": (
                "the target lost; the old leader won the next term",
                error_body(
                    Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                    "the target did not win its election; node 1 leads again in term 7 and "
                    "takes writes (retry the transfer)",
                    leaderId=1,
                    term=7,
                ),
            ),
        },
    )
}


def not_found(error: Errors, message: str, what: str) -> dict[int | str, dict[str, Any]]:
    return {
        404: answer(
            M.ErrorResponse,
            f"{error.name} ({int(error)}): {what}",
            {"notFound": (what, error_body(error, message))},
            headers=("X-Metadata-Offset",),
        )
    }


OFFSET_TOO_OLD = {
    410: answer(
        M.OffsetTooOldResponse,
        "OFFSET_OUT_OF_RANGE (1): fromOffset is no longer retained: load /v1/snapshot, then "
        "follow the log from its nextOffset",
        {
            "tooOld": (
                "offset 12 was compacted away",
                error_body(
                    Errors.OFFSET_OUT_OF_RANGE,
                    "offset 12 is older than the oldest retained offset 50000; load "
                    "/v1/snapshot, then follow the log from its nextOffset",
                    oldestOffset=50000,
                ),
            )
        },
    )
}
NOT_READY = {
    503: answer(
        M.ErrorResponse,
        "not ready (NOT_CONTROLLER, 41); the body also carries status and reason",
        {
            "replaying": (
                "still replaying",
                {
                    "status": "not ready",
                    "reason": "this node is still replaying its log",
                    **error_body(Errors.NOT_CONTROLLER, "this node is still replaying its log"),
                },
            )
        },
        headers=("Retry-After",),
    )
}

# Answered by the HTTP server itself (api/connections.py), to any request,
# before a route sees it; the connection is then closed.
ERR_SERVER = {
    408: answer(
        M.ErrorResponse,
        "INVALID_REQUEST (42): the request head or body arrived too slowly "
        "(docs/limits.md); nothing was done; the connection is closed",
        {
            "slowBody": (
                "a body sent a few bytes a second",
                error_body(
                    Errors.INVALID_REQUEST,
                    "the request body arrived too slowly (1200 bytes in 10 s; it must arrive "
                    "within 10 s plus 1 s per 65536 bytes, at most 120 s); nothing was done: "
                    "send it again, faster",
                ),
            )
        },
    ),
    414: answer(
        M.ErrorResponse,
        "INVALID_REQUEST (42): the URL is over 8 KiB; the connection is closed",
        {
            "longUrl": (
                "a 9 KB query string",
                error_body(
                    Errors.INVALID_REQUEST,
                    "the URL is over 8192 bytes; see docs/limits.md",
                ),
            )
        },
    ),
    431: answer(
        M.ErrorResponse,
        "INVALID_REQUEST (42): over 100 headers, or over 64 KiB of them; the connection is closed",
        {
            "manyHeaders": (
                "101 headers",
                error_body(
                    Errors.INVALID_REQUEST,
                    "more than 100 headers; see docs/limits.md",
                ),
            )
        },
    ),
}
WRITE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERR_307,
    **ERR_400,
    **ERR_AUTH,
    **ERR_BODY,
    **ERR_429,
    **ERR_503_WRITE,
    **ERR_SERVER,
}
READ_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"headers": {"X-Metadata-Offset": HEADERS["X-Metadata-Offset"]}},
    **ERR_400,
    **ERR_AUTH,
    **ERR_429,
    **ERR_503_READ,
    **ERR_SERVER,
}


# ---------------------------------------------------------------- finishing the document


def finish(schema: dict[str, Any], request_models: tuple[type[BaseModel], ...]) -> None:
    """Adds the request bodies' schemas, drops FastAPI's 422 and gives every
    nested schema an example taken from its parent's."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    _, defs = models_json_schema(
        [(model, "validation") for model in request_models],
        ref_template="#/components/schemas/{model}",
    )
    for name, definition in defs.get("$defs", {}).items():
        components.setdefault(name, definition)
    # Validation errors are 400 here, never FastAPI's 422.
    for item in schema.get("paths", {}).values():
        for operation in item.values():
            if isinstance(operation, dict):
                operation.get("responses", {}).pop("422", None)
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    # FastAPI drops every null from the document (exclude_none), the nulls of
    # examples too ("errorMessage": null): the models' examples go back in whole.
    for name, definition in components.items():
        model = getattr(M, name, None)
        extra = model.model_config.get("json_schema_extra") if model is not None else None
        if isinstance(extra, dict) and "examples" in extra:
            definition["examples"] = copy.deepcopy(extra["examples"])
    _nested_examples(components)


def _nested_examples(components: dict[str, Any]) -> None:
    own = {name for name, definition in components.items() if "examples" in definition}
    changed = True
    while changed:
        changed = False
        for definition in list(components.values()):
            for example in definition.get("examples", ()):
                for name, prop in definition.get("properties", {}).items():
                    if not isinstance(example, dict) or name not in example:
                        continue
                    for ref, value in _refs_with_values(prop, example[name]):
                        if ref in own or ref not in components:
                            continue
                        examples = components[ref].setdefault("examples", [])
                        if value not in examples:
                            examples.append(value)
                            changed = True


def _refs_with_values(prop: dict[str, Any], value: Any) -> Iterator[tuple[str, Any]]:
    """(schema name, the part of ``value`` it describes) for each named schema in ``prop``."""
    ref = prop.get("$ref")
    if isinstance(ref, str) and isinstance(value, dict):
        yield ref.rsplit("/", 1)[1], value
    items = prop.get("items")
    if isinstance(items, dict) and isinstance(value, list) and value:
        yield from _refs_with_values(items, value[0])
    for option in prop.get("anyOf", ()):
        yield from _refs_with_values(option, value)
