"""GET /v1/refusals: the active controller's ring of recent refusals
(controller/refusals.py), read-only, for ``explain``.

The ring lives with the orderer, so the read travels as a write does
(``RefusalsQuery`` through ``submit``) and the orderer answers it at once:
it reaches the active controller in its own process or in an orderer
process, from the core or from an HTTP worker, and a follower answers 307 to
the leader (503 while none is known), as it would a write.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Query
from starlette.responses import Response

from controller.refusals import CAPACITY, RefusalsQuery
from metadata_records.errors import Errors

from .. import models as M
from ..errors import ApiProblem, JsonResponse
from ..models.refusals import refusal_obj
from ..openapi_doc import ERR_307, ERR_400, ERR_429, ERR_503_READ, ERR_AUTH, ERR_SERVER
from .context import RouteContext
from .params import ReadCaller


def reads(app: FastAPI, ctx: RouteContext) -> None:
    @app.get(
        "/v1/refusals",
        operation_id="listRefusals",
        tags=["reads"],
        summary="What the active controller refused lately, and by which rule",
        response_model=M.RefusalsOut,
        # No X-Metadata-Offset: the ring is the controller's memory, not the image's.
        responses={**ERR_307, **ERR_400, **ERR_AUTH, **ERR_429, **ERR_503_READ, **ERR_SERVER},
    )
    async def list_refusals(
        caller: ReadCaller,
        broker_id: Annotated[
            int | None,
            Query(alias="brokerId", ge=0, le=2**31 - 1, description="only this broker's"),
        ] = None,
        topic: Annotated[str | None, Query(max_length=249, description="only this topic's")] = None,
        partition: Annotated[
            int | None,
            Query(ge=0, le=2**31 - 1, description="only this partition's (needs topic)"),
        ] = None,
        limit: Annotated[
            int, Query(ge=1, le=CAPACITY, description="at most this many, newest first")
        ] = 100,
    ) -> Response:
        """Each refused request or entry: when, the api, the rule, the error and
        the broker, topic-partition or resource it names (docs/rules.md)."""
        if partition is not None and topic is None:
            raise ApiProblem(400, Errors.INVALID_REQUEST, "partition needs topic: add topic=<name>")
        answer = await ctx.submit(RefusalsQuery(broker_id, topic, partition, limit), None)
        return JsonResponse(
            {"noted": answer.noted, "refusals": [refusal_obj(r) for r in answer.refusals]}
        )
