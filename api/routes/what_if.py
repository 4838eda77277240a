"""``GET /v1/what-if?lose=brokers:3,4&lose=racks:r1``: what losing those
brokers would do to the partitions, decided by controller/what_if.py over
this node's image (any voter answers; X-Metadata-Offset says which image).
The counts are always whole; the partitions listed are capped by ``limit``
so that a huge cluster's answer stays bounded. Large images are worked out
off the event loop (the image is immutable)."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import FastAPI, Query
from starlette.responses import Response

from controller.what_if import parse_loss, resolve_loss, what_if
from metadata_records.errors import Errors
from metadata_records.image import MetadataImage

from .. import models as M
from ..openapi_doc import READ_RESPONSES, answer, error_body
from .context import OFFLOAD_PARTITIONS, RouteContext, problem_at, with_offset
from .params import Consistency, ReadCaller

DEFAULT_LIMIT = 1_000
MAX_LIMIT = 100_000

BAD_LOSS = {
    400: answer(
        M.ErrorResponse,
        "INVALID_REQUEST (42): a `lose` that does not parse, or names broker ids not "
        "registered or racks no broker is in (errorMessage names them all)",
        {
            "unknown": (
                "an unknown broker and rack",
                error_body(
                    Errors.INVALID_REQUEST,
                    "broker ids not registered: 9; racks no registered broker is in: r9 "
                    "(known racks: r1, r2, r3)",
                ),
            ),
            "syntax": (
                "not brokers: or racks:",
                error_body(
                    Errors.INVALID_REQUEST,
                    "bad loss 'hosts:1': write brokers:ID,ID or racks:RACK,RACK "
                    "(give it twice for both kinds)",
                ),
            ),
        },
    )
}


def _what_if(image: MetadataImage, lost: list[int], limit: int) -> dict:
    answer = what_if(image, lost, int(time.monotonic() * 1000))
    return M.WhatIfOut.of(answer, image.last_offset, limit).to_json_obj()


def reads(app: FastAPI, ctx: RouteContext) -> None:
    @app.get(
        "/v1/what-if",
        operation_id="whatIf",
        tags=["reads"],
        summary="What losing brokers or racks would do to the partitions",
        response_model=M.WhatIfOut,
        responses={**READ_RESPONSES, **BAD_LOSS},
    )
    async def get_what_if(
        caller: ReadCaller,
        lose: Annotated[
            list[str],
            Query(
                max_length=16,
                description="`brokers:3,4` or `racks:r1,r2`; repeat the parameter for both kinds",
                examples=["brokers:3,4", "racks:r1"],
            ),
        ],
        limit: Annotated[
            int,
            Query(
                ge=0,
                le=MAX_LIMIT,
                description="list at most this many changed partitions (the counts are whole)",
            ),
        ] = DEFAULT_LIMIT,
        consistency: Consistency = None,
    ) -> Response:
        """Which partitions would go offline, fall under min ISR or move their
        leader (and to whom) if these brokers stopped at once: their sessions
        expire and the controller fences them, in ascending id, by its own
        rules (ISR shrink, election from the ISR or the ELR, unclean election
        where a topic allows it). Nothing is written (docs/api-additions.md)."""
        image = await ctx.read_image(consistency)
        try:
            brokers, racks = parse_loss(lose)
            lost = resolve_loss(image, brokers, racks)
        except ValueError as e:  # UnknownLoss too
            raise problem_at(image, 400, Errors.INVALID_REQUEST, str(e)) from None
        if image.partition_count > OFFLOAD_PARTITIONS:
            body = await asyncio.to_thread(_what_if, image, lost, limit)
            return await asyncio.to_thread(with_offset, body, image)
        return with_offset(_what_if(image, lost, limit), image)
