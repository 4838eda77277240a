"""The cluster as it was: ``GET /v1/image`` (now, after an offset, or at a
time) and ``GET /v1/image/diff`` (what changed between two offsets).

Served by any voter or observer from its own history store
(quorum/history_images.py), in the process that got the request (an HTTP
worker reads the store's files itself) and off its event loop (a thread
builds the image and writes the answer): these reads never hold a write.
Past the window: 410 with ``oldestOffset``, as GET /v1/log answers; past the
committed log: 404 with ``highWatermark``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import FastAPI, Query
from starlette.responses import Response, StreamingResponse

from metadata_records.errors import Errors
from metadata_records.image import MetadataImage
from quorum.history_images import (
    HistoryReader,
    HistoryUnavailable,
    OffsetBeyondWindow,
    OffsetNotCommitted,
)

from .. import models as M
from ..errors import ApiProblem, JsonResponse
from ..image_view import diff, image_chunks, parse_parts
from ..log_filter import parse_time
from ..openapi_doc import READ_RESPONSES, answer, error_body
from .context import RouteContext
from .params import INT64_MAX, Consistency, IncludeSensitive, ReadCaller

STORE_CATCH_UP_S = 2.0  # a committed offset the store has not written yet: waited for this long
MAX_DIFF_CHANGES = 100_000

BEYOND_WINDOW = {
    410: answer(
        M.OffsetTooOldResponse,
        "OFFSET_OUT_OF_RANGE (1): the offset (or time) is older than this voter's history "
        "window; oldestOffset is the oldest it serves",
        {
            "tooOld": (
                "before the window",
                error_body(
                    Errors.OFFSET_OUT_OF_RANGE,
                    "the image after offset 12 is beyond this voter's history window; the "
                    "oldest it can build is after offset 50000",
                    oldestOffset=50000,
                ),
            )
        },
    )
}
NOT_YET = {
    404: answer(
        M.ImageNotYetResponse,
        "OFFSET_OUT_OF_RANGE (1): the offset is past this voter's committed log "
        "(highWatermark); or no history is kept here",
        {
            "notYet": (
                "past the log's end",
                error_body(
                    Errors.OFFSET_OUT_OF_RANGE,
                    "offset 900 is not committed here yet: the log ends at offset 119 "
                    "(highWatermark 120)",
                    highWatermark=120,
                ),
            )
        },
    )
}


def _bad(message: str, image: MetadataImage) -> ApiProblem:
    return ApiProblem(
        400, Errors.INVALID_REQUEST, message, headers={"X-Metadata-Offset": str(image.last_offset)}
    )


def _beyond(e: OffsetBeyondWindow, image: MetadataImage) -> ApiProblem:
    return ApiProblem(
        410,
        Errors.OFFSET_OUT_OF_RANGE,
        str(e),
        headers={"X-Metadata-Offset": str(image.last_offset)},
        extra={"oldestOffset": e.oldest},
    )


def _not_yet(message: str, current: MetadataImage) -> ApiProblem:
    return ApiProblem(
        404,
        Errors.OFFSET_OUT_OF_RANGE,
        message,
        headers={"X-Metadata-Offset": str(current.last_offset)},
        extra={"highWatermark": current.next_offset},
    )


async def image_at(
    history: HistoryReader | None, offset: int, current: MetadataImage
) -> tuple[MetadataImage, int | None]:
    """The image after ``offset`` and its batch's timestamp: the current image
    itself when it is that one, else built from the history (in a thread)."""
    if offset >= current.next_offset:
        raise _not_yet(
            f"offset {offset} is not committed here yet: the log ends at offset "
            f"{current.last_offset} (highWatermark {current.next_offset})",
            current,
        )
    if history is None:
        if offset == current.last_offset:
            return current, None
        raise _not_yet("this voter keeps no history (serve --history-retention-*)", current)
    deadline = time.monotonic() + STORE_CATCH_UP_S
    if offset == current.last_offset:  # now: nothing to build, only its batch's time
        while True:
            stamp = await asyncio.to_thread(history.timestamp_of, offset)
            if stamp is not None or time.monotonic() >= deadline:
                return current, stamp
            await asyncio.sleep(0.02)
    while True:
        try:
            image, stamp = await asyncio.to_thread(history.image_after, offset)
            return image, stamp
        except OffsetBeyondWindow as e:
            raise _beyond(e, current) from None
        except OffsetNotCommitted as e:
            # Committed here, not yet written by the store's thread: it is close behind.
            if time.monotonic() >= deadline:
                if offset == current.last_offset:
                    return current, None
                raise _not_yet(
                    f"{e} in this voter's history store (it is behind)", current
                ) from None
            await asyncio.sleep(0.02)
        except HistoryUnavailable as e:
            if offset == current.last_offset:
                return current, None
            raise _not_yet(str(e), current) from None


def reads(app: FastAPI, ctx: RouteContext) -> None:
    node, auth = ctx.node, ctx.auth

    def history() -> HistoryReader | None:
        return getattr(node, "history", None)

    @app.get(
        "/v1/image",
        operation_id="readImage",
        tags=["reads"],
        summary="The cluster as it stood after an offset, or at a time",
        response_model=M.ImageOut,
        responses={**READ_RESPONSES, **BEYOND_WINDOW, **NOT_YET},
    )
    async def read_image(
        caller: ReadCaller,
        at_offset: Annotated[
            int | None,
            Query(
                alias="atOffset",
                ge=0,
                le=INT64_MAX,
                description="the image after this offset (every record up to it); absent: now",
            ),
        ] = None,
        at_time: Annotated[
            str | None,
            Query(
                alias="atTime",
                max_length=64,
                description="the image after the last batch stamped at or before this time: "
                "epoch milliseconds or ISO-8601 (2026-12-04T03:12:00Z)",
            ),
        ] = None,
        only: Annotated[
            str | None,
            Query(
                max_length=200,
                description="only these parts, comma-separated: brokers, topics, configs, acls, "
                "clientQuotas, scram, delegationTokens, features, voters (default: all)",
            ),
        ] = None,
        topics: Annotated[
            str | None,
            Query(
                max_length=4_000,  # within the 8 KiB URL (docs/limits.md), encoded
                description="only these topics (comma-separated names) in topics and configs",
            ),
        ] = None,
        consistency: Consistency = None,
        include_sensitive: IncludeSensitive = None,
    ) -> Response:
        """Brokers, topics with their partitions, configs, ACLs, client quotas,
        SCRAM users (mechanisms and iterations only), features and voters as they stood after ``atOffset`` (or at
        ``atTime``), built from this voter's history: the nearest checkpoint
        plus the records up to it. The answer is streamed (a topic at a
        time); ``only=`` and ``topics=`` ask for parts."""
        sensitive = auth.shows_sensitive(caller, include_sensitive)
        current = await ctx.read_image(consistency)
        try:
            parts = parse_parts(only)
        except ValueError as e:
            raise _bad(str(e), current) from None
        if at_offset is not None and at_time is not None:
            raise _bad("give atOffset or atTime, not both", current)
        store = history()
        offset = current.last_offset if at_offset is None else at_offset
        if at_time is not None:
            try:
                time_ms = parse_time(at_time, "atTime")
            except ValueError as e:
                raise _bad(str(e), current) from None
            if store is None:
                raise _not_yet("this voter keeps no history (serve --history-retention-*)", current)
            try:
                offset = await asyncio.to_thread(store.offset_at, time_ms)
            except OffsetBeyondWindow as e:
                raise _beyond(e, current) from None
            except HistoryUnavailable as e:
                raise _not_yet(str(e), current) from None
        if offset < 0:
            image, stamp = current, None  # the empty log
        elif at_offset is None and at_time is None:
            stamp = None if store is None else await asyncio.to_thread(store.timestamp_of, offset)
            image = current
        else:
            image, stamp = await image_at(store, offset, current)
        oldest = None
        if store is not None:
            try:
                oldest = (await asyncio.to_thread(store.window))[0]
            except HistoryUnavailable:
                oldest = None
        head = {
            "offset": image.last_offset,
            "nextOffset": image.next_offset,
            "timestampMs": stamp,
            "oldestOffset": oldest,
            "highWatermark": current.next_offset,
            "controllerEpoch": image.controller_epoch,
            "leaderId": image.leader_id,
        }
        wanted = None if topics is None else {t for t in topics.split(",") if t}
        return StreamingResponse(
            image_chunks(image, head, parts, wanted, sensitive),
            media_type="application/json",
            headers={"X-Metadata-Offset": str(image.last_offset)},
        )

    @app.get(
        "/v1/image/diff",
        operation_id="diffImages",
        tags=["reads"],
        summary="What changed between the images after two offsets",
        response_model=M.ImageDiffOut,
        responses={**READ_RESPONSES, **BEYOND_WINDOW, **NOT_YET},
    )
    async def diff_images(
        caller: ReadCaller,
        from_offset: Annotated[
            int, Query(alias="from", ge=0, le=INT64_MAX, description="the first image's offset")
        ],
        to_offset: Annotated[
            int, Query(alias="to", ge=0, le=INT64_MAX, description="the second image's offset")
        ],
        max_changes: Annotated[
            int,
            Query(
                alias="maxChanges",
                ge=1,
                le=MAX_DIFF_CHANGES,
                description="the most changes listed (total counts them all)",
            ),
        ] = 10_000,
        consistency: Consistency = None,
        include_sensitive: IncludeSensitive = None,
    ) -> Response:
        """Every broker, topic, partition, config, ACL, client quota, feature
        and the voter set that differs between the image after ``from`` and
        the one after ``to``, each with its value in both (null: absent)."""
        sensitive = auth.shows_sensitive(caller, include_sensitive)
        current = await ctx.read_image(consistency)
        store = history()
        before, _ = await image_at(store, from_offset, current)
        after, _ = await image_at(store, to_offset, current)
        changes = await asyncio.to_thread(diff, before, after, sensitive)
        body = {
            "from": from_offset,
            "to": to_offset,
            "changes": changes[:max_changes],
            "total": len(changes),
            "truncated": len(changes) > max_changes,
        }
        return await asyncio.to_thread(
            JsonResponse, body, headers={"X-Metadata-Offset": str(current.last_offset)}
        )
