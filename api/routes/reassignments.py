"""``GET /v1/reassignments`` (Kafka's ListPartitionReassignments) and
``GET /v1/features`` (DescribeFeatures): reads of the image, from any voter
or observer, like the other reads (X-Metadata-Offset says which image)."""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Query
from starlette.responses import Response

from metadata_records.errors import Errors

from .. import models as M
from ..openapi_doc import READ_RESPONSES, answer, error_body
from ..reads import features_obj, reassignments_obj
from .context import RouteContext, build, problem_at, with_offset
from .params import Consistency, ReadCaller

# What a URL holds: more topics are asked for by listing them all (no `topic`).
MAX_TOPICS_ASKED = 100

BAD_TOPIC = {
    400: answer(
        M.ErrorResponse,
        "INVALID_REQUEST (42): a `topic` that is not `NAME` or `NAME:PARTITION,PARTITION`",
        {
            "syntax": (
                "a partition that is not a number",
                error_body(
                    Errors.INVALID_REQUEST,
                    "bad topic 'orders:x': write NAME, or NAME:PARTITION,PARTITION "
                    "(partitions are numbers from 0)",
                ),
            )
        },
    )
}


def parse_topics(values: list[str]) -> list[tuple[str, tuple[int, ...] | None]]:
    """``orders`` (every partition) or ``orders:0,3`` (those): Kafka's topic
    names have no ``:``, so the first one separates. ValueError names the bad one."""
    wanted = []
    for value in values:
        name, sep, rest = value.partition(":")
        try:
            partitions = tuple(int(p) for p in rest.split(",")) if sep else None
        except ValueError:
            partitions = ()
        if not name or partitions == () or any(p < 0 for p in partitions or ()):
            raise ValueError(
                f"bad topic {value!r}: write NAME, or NAME:PARTITION,PARTITION "
                "(partitions are numbers from 0)"
            )
        wanted.append((name, partitions))
    return wanted


def reads(app: FastAPI, ctx: RouteContext) -> None:
    @app.get(
        "/v1/reassignments",
        operation_id="listPartitionReassignments",
        tags=["reads"],
        summary="The partition reassignments in progress",
        response_model=M.ReassignmentsOut,
        responses={**READ_RESPONSES, **BAD_TOPIC},
    )
    async def list_reassignments(
        caller: ReadCaller,
        topic: Annotated[
            list[str] | None,
            Query(
                max_length=MAX_TOPICS_ASKED,
                description="`orders` (all its partitions) or `orders:0,3`; repeat it for "
                f"several topics (at most {MAX_TOPICS_ASKED}); none: every topic",
                examples=["orders:0,3"],
            ),
        ] = None,
        consistency: Consistency = None,
    ) -> Response:
        """Kafka's ListPartitionReassignments: each partition with replicas
        being added or removed, with its replicas, addingReplicas and
        removingReplicas. Like Kafka, a topic or partition that does not
        exist or is not being reassigned is left out; `notFound` names the
        ones that do not exist."""
        image = await ctx.read_image(consistency)
        try:
            wanted = None if topic is None else parse_topics(topic)
        except ValueError as e:
            raise problem_at(image, 400, Errors.INVALID_REQUEST, str(e)) from None
        return with_offset(await build(lambda i: reassignments_obj(i, wanted), image), image)

    @app.get(
        "/v1/features",
        operation_id="describeFeatures",
        tags=["reads"],
        summary="The features: supported ranges and finalized levels",
        response_model=M.FeaturesOut,
        responses=READ_RESPONSES,
    )
    async def describe_features(caller: ReadCaller, consistency: Consistency = None) -> Response:
        """What `kafka-features describe` prints: each feature's supported
        range on this controller and its finalized level, by number and by
        Kafka's name (metadata.version by release, as "3.6-IV0")."""
        image = await ctx.read_image(consistency)
        return with_offset(features_obj(image), image)
