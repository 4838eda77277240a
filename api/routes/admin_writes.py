"""One admin write, as a row of data, and the one handler every row runs:
parse the body -> build the controller's request -> submit -> answer.

The admin writes differ only in their path, their models and how the
controller's request is built, so each is a row (``AdminWrite``) of the
table in api/routes/__init__.py rather than a function of its own. A write
that does more than that (the broker writes check the caller's broker id;
the quorum's go to the node, not the controller) keeps its own function in
its domain module.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import FastAPI, Request
from pydantic import BaseModel
from starlette.responses import Response

from .. import models as M
from ..bodies import parse_message
from ..edge import caller_of
from ..openapi_doc import WRITE_RESPONSES
from .context import RouteContext, answer, answer_large
from .params import AdminCaller, BrokerIdPath, TopicName, body_doc

# The path parameters an admin write's path may name, as every route declares them.
PATH_PARAMETERS = {"name": TopicName, "id": BrokerIdPath}


@dataclass(frozen=True)
class AdminWrite:
    """A row of the table: one admin write's route, as the document shows
    it, and how its controller request is built and its answer shaped."""

    method: Literal["POST", "DELETE"]
    path: str
    operation_id: str
    summary: str
    # The body's model; None: the path parameter names everything (a DELETE).
    request: type[BaseModel] | None
    response: type[M.ResponseModel]
    # The controller's request from (the body, the path parameter if any), or
    # from the path parameter alone; default: the body's ``to_message``.
    message: Callable[..., Any] | None = None
    # Set for a write whose answer may be large (the ACL writes): its body's
    # message is (the request, the entries refused before submitting), and
    # this counts the answer's entries, built in a thread past LARGE_ANSWER.
    entries: Callable[[Any, list], int] | None = None
    doc: str = ""  # the operation's description in the OpenAPI document
    # The caller (its api.auth.Principal) is the message's last argument: a
    # write whose request names who asks (the delegation tokens').
    with_caller: bool = False

    def __call__(self, app: FastAPI, ctx: RouteContext) -> None:
        """Registers the write on ``app`` as a route of its own: its operation in
        the document is what a hand-written function would make."""
        param = re.search(r"\{(\w+)\}", self.path)
        path_name = None if param is None else param.group(1)

        async def endpoint(**values: Any) -> Response:
            args = () if path_name is None else (values[path_name],)
            if self.with_caller:
                args = (*args, values["caller"])
            return await self.handle(ctx, values["request"], args)

        # FastAPI reads the parameters off the signature: the path's, the
        # request (its body parsed by hand, so not in the document; its scope
        # says who asked) and the caller's role.
        parameters = []
        if path_name is not None:
            parameters.append(_keyword(path_name, PATH_PARAMETERS[path_name]))
        parameters.append(_keyword("request", Request))
        parameters.append(_keyword("caller", AdminCaller))
        endpoint.__signature__ = inspect.Signature(parameters, return_annotation=Response)  # type: ignore[attr-defined]
        endpoint.__doc__ = self.doc
        app.add_api_route(
            self.path,
            endpoint,
            methods=[self.method],
            name=re.sub(r"(?<!^)([A-Z])", r"_\1", self.operation_id).lower(),
            operation_id=self.operation_id,
            tags=["admin"],
            summary=self.summary,
            response_model=self.response,
            responses=WRITE_RESPONSES,
            openapi_extra=None if self.request is None else body_doc(self.request),
        )

    async def handle(self, ctx: RouteContext, request: Request, args: tuple) -> Response:
        if self.request is None:
            message = self.message(*args)
        else:
            build = self.message or self.request.to_message
            message = await parse_message(self.request, request, build, *args)
        caller = caller_of(request.scope)
        if self.entries is None:
            return answer(self.response.from_message(await ctx.submit(message, caller)))
        message, problems = message
        response = await ctx.submit(message, caller)
        return await answer_large(
            self.response.obj_from_message,
            response,
            problems,
            entries=self.entries(response, problems),
        )


def _keyword(name: str, annotation: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
