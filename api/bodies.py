"""Request bodies -> the controller's requests.

A body is refused whole (400 naming the first bad field, or a repeated key)
before anything is submitted. The three hot broker bodies go through the quick
parsers of api/models_fast.py first, which either vouch for a body or leave it
to pydantic; so both paths answer the same for every body
(tests/test_api_models_fast.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from controller import messages as m

from . import models as M
from . import models_fast as MF
from .edge import BODY_KEY
from .errors import bad_request, validation_problem

T = TypeVar("T", bound=BaseModel)

# Past this size an admin body is parsed and turned into the controller's
# request in a thread: a 10,000-binding CreateAcls is 1.2 MB and about 130 ms
# of parsing, which on the event loop would hold every broker's heartbeat
# (decisions.md 139). pydantic's own validation still holds the GIL (about a
# third of it); the Python around it interleaves with the loop.
LARGE_BODY = 64 << 10


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


async def parse_message(
    model: type[T], request: Request, build: Callable[..., Any], *args: Any
) -> Any:
    """The controller's request ``build(the body as model, *args)`` makes:
    off the event loop for a body past LARGE_BODY. A 400 as ``parse_body``."""
    body = await request.body()

    def parse() -> Any:
        return build(parse_body(model, body), *args)

    return await asyncio.to_thread(parse) if len(body) > LARGE_BODY else parse()


async def body_of(request: Request) -> bytes:
    """The request's body as the edge read it, without Starlette's stream of
    the replayed message (``Request.body`` costs about 2 us more, on the three
    hot broker routes); ``request.body()`` where the edge read none."""
    body = request.scope.get(BODY_KEY)
    return body if body is not None else await request.body()


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
