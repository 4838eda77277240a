"""The reads of topics and their partitions, and what the admin writes of
topics need beyond the generic parse -> submit -> answer (api/routes/__init__.py).

A large image's topic list is built off the event loop (``context.build``).
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.responses import Response

from controller import messages as m
from metadata_records.errors import Errors

from .. import models as M
from ..errors import bad_request
from ..openapi_doc import READ_RESPONSES, not_found
from ..reads import topic_obj, topics_obj
from .context import RouteContext, build, topic_or_404, with_offset
from .params import Consistency, ReadCaller, TopicName


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
    async def list_topics(caller: ReadCaller, consistency: Consistency = None) -> Response:
        image = await ctx.read_image(consistency)
        return with_offset(await build(topics_obj, image), image)

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
