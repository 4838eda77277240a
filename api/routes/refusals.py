"""GET /v1/refusals: the active controller's ring of recent refusals
(controller/refusals.py), read-only, for ``explain``.

The ring lives with the orderer, so only the active controller has one: a
follower answers 307 to the leader (or 503 while none is known), as a write
would. With HTTP workers the request is forwarded to the core
(voter/worker_node.py FORWARDED); with an orderer process of its own the ring
is in that process and this answers 503 saying so.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Query
from starlette.responses import Response

from controller.refusals import CAPACITY
from metadata_records.errors import Errors
from quorum.node_errors import UnavailableError

from .. import models as M
from ..errors import ApiProblem, JsonResponse
from ..models.refusals import refusal_obj
from ..openapi_doc import ERR_307, READ_RESPONSES
from .context import RouteContext
from .params import ReadCaller


def reads(app: FastAPI, ctx: RouteContext) -> None:
    node = ctx.node

    @app.get(
        "/v1/refusals",
        operation_id="listRefusals",
        tags=["reads"],
        summary="What the active controller refused lately, and by which rule",
        response_model=M.RefusalsOut,
        responses={**READ_RESPONSES, **ERR_307},
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
        orderer = getattr(node, "orderer", None)
        refusal = node.refusal() if hasattr(node, "refusal") else None
        if refusal is not None:
            raise refusal
        if orderer is None or not orderer.active:
            raise node.not_controller("the refusals are kept by the active controller")
        ring = getattr(orderer, "refusals", None)
        if ring is None:
            raise UnavailableError(
                "the refusals are kept in this voter's orderer process, which does not serve "
                "them yet; run the voter without --http-workers to read GET /v1/refusals",
                60.0,
            )
        kept = ring.recent(broker_id, topic, partition, limit)
        return JsonResponse({"noted": ring.noted, "refusals": [refusal_obj(r) for r in kept]})
