"""The reads of topics and their partitions, and what the admin writes of
topics need beyond the generic parse -> submit -> answer (api/routes/__init__.py).

The whole topic list streams in pieces; a page (``?limit=``, ``?after=``) is
built off the event loop for a large image (``context.build``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Query
from starlette.responses import Response, StreamingResponse

from controller import messages as m
from metadata_records.errors import Errors
from metadata_records.records import TOPIC_NAME_MAX_LENGTH

from .. import models as M
from ..errors import bad_request
from ..list_pages import MAX_PAGE, topics_page, topics_stream
from ..openapi_doc import READ_RESPONSES, not_found
from ..reads import topic_obj
from .context import RouteContext, build, topic_or_404, with_offset
from .params import Consistency, PageLimit, ReadCaller, TopicName

AfterName = Annotated[
    str | None,
    Query(
        max_length=TOPIC_NAME_MAX_LENGTH,
        description="the page starts after this topic name (the last page's `nextAfter`); "
        "it need not exist",
    ),
]


def create_partitions_message(
    req: M.CreatePartitionsRequest, name: str
) -> m.CreatePartitionsRequest:
    # Kafka's validateOnly would need a dry run the controller does not have:
    # refused, rather than answered as if it had been checked.
    if req.validate_only:
        raise bad_request("validateOnly: true is not supported (nothing was created)")
    return req.to_message(name)


def reads(app: FastAPI, ctx: RouteContext) -> None:
    @app.get(
        "/v1/topics",
        operation_id="listTopics",
        tags=["reads"],
        summary="Topics with their partitions",
        response_model=M.TopicsOut,
        responses=READ_RESPONSES,
    )
    async def list_topics(
        caller: ReadCaller,
        consistency: Consistency = None,
        limit: PageLimit = None,
        after: AfterName = None,
    ) -> Response:
        image = await ctx.read_image(consistency)
        if limit is None and after is None:
            # The whole list, a piece at a time (api/list_pages.py).
            return StreamingResponse(
                topics_stream(image),
                media_type="application/json",
                headers={"X-Metadata-Offset": str(image.last_offset)},
            )
        page = limit or MAX_PAGE
        return with_offset(await build(lambda i: topics_page(i, after, page), image), image)

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
        image = await ctx.read_image(consistency)
        return with_offset(topic_obj(topic_or_404(image, name)), image)
