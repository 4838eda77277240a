"""The metadata as records: the decoded log from an offset (long-poll) and
the image as a snapshot, in JSON or NDJSON.

The log's records say who asked for them (``who``), and a read may filter
them by who, broker, topic and time (api/log_filter.py). What these show
never runs ahead of the image their X-Metadata-Offset names, and a sensitive config's value is `(redacted)` unless the caller's
role sees it; a SCRAM credential's salt and keys are empty for every role
(docs/security.md "Who sees what"). (api/reads.py builds the
other reads' answers; these two are built here, from the log and the image.)
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import orjson
from fastapi import FastAPI, Header, Query
from starlette.responses import Response, StreamingResponse

from metadata_records.codec import log_record_to_obj, who_obj
from metadata_records.errors import Errors
from metadata_records.records import Who
from metadata_records.redaction import redacted
from quorum.history_images import log_reader
from quorum.record_log import OffsetTooOld

from .. import models as M
from ..errors import JsonResponse, bad_request
from ..log_filter import FilterError, LogFilter, scan
from ..openapi_doc import HEADERS, OFFSET_TOO_OLD, READ_RESPONSES
from ..reads import snapshot_pieces, snapshot_timestamp
from .context import RouteContext, stream_pieces, with_offset
from .params import INT32_MAX, INT64_MAX, Consistency, IncludeSensitive, ReadCaller

PrincipalFilter = Annotated[
    str | None,
    Query(
        description="only records asked for by this principal (their `who.principal`): "
        "`<role>:<identity>` or `controller`",
        examples=["broker:cert/CN=kafka-7", "admin:token/ops", "controller"],
    ),
]
ApiFilter = Annotated[
    str | None,
    Query(
        description="only records written by this API (their `who.api`): Kafka's API name, "
        "or the controller's sweep",
        examples=["AlterPartition", "FenceExpiredSessions"],
    ),
]
BrokerFilter = Annotated[
    int | None,
    Query(
        alias="brokerId",
        ge=0,
        le=INT32_MAX,
        description="only records that name this broker: its registration, fencing, "
        "shutdown and producer ids, and partition records and changes that move it in or "
        "out of a partition's leader, ISR, ELR or replicas (docs/api-additions.md)",
        examples=[7],
    ),
]
TopicFilter = Annotated[
    str | None,
    Query(
        description="only records of this topic: by name, and by the topic id it had",
        examples=["orders"],
    ),
]
SinceFilter = Annotated[
    str | None,
    Query(
        description="only records of batches built at or after this time (ISO-8601; UTC "
        "if no zone) or epoch milliseconds",
        examples=["2026-12-04T03:00:00Z"],
    ),
]
UntilFilter = Annotated[
    str | None,
    Query(
        description="only records of batches built before this time (ISO-8601 or epoch ms)",
        examples=["2026-12-04T03:15:00Z"],
    ),
]

MAX_LOG_RECORDS = 10_000
DEFAULT_LOG_RECORDS = 1_000
MAX_WAIT_MS = 60_000
NDJSON = "application/x-ndjson"


def wants_ndjson(accept: str | None) -> bool:
    if not accept:
        return False
    for part in accept.split(","):
        media, *params = (x.strip() for x in part.split(";"))
        if media.lower() == NDJSON:
            return not any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00") for p in params)
    return False


def _ndjson(objs: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def reads(app: FastAPI, ctx: RouteContext) -> None:
    node, auth = ctx.node, ctx.auth

    @app.get(
        "/v1/log",
        operation_id="readLog",
        tags=["reads"],
        summary="The decoded metadata log (long-poll)",
        response_model=M.LogOut,
        responses={
            **READ_RESPONSES,
            200: {
                "description": "the records (JSON, or one record per line with "
                "`Accept: application/x-ndjson`; then X-Next-Offset and "
                "X-High-Watermark carry the page's offsets)",
                "content": {NDJSON: {"schema": {"$ref": "#/components/schemas/RecordOut"}}},
                "headers": {"X-Metadata-Offset": HEADERS["X-Metadata-Offset"]},
            },
            **OFFSET_TOO_OLD,
        },
    )
    async def read_log(
        caller: ReadCaller,
        from_offset: Annotated[
            int,
            Query(alias="fromOffset", ge=0, le=INT64_MAX, description="the first offset to read"),
        ] = 0,
        max_records: Annotated[
            int,
            Query(
                alias="maxRecords", ge=1, le=MAX_LOG_RECORDS, description="the most records to send"
            ),
        ] = DEFAULT_LOG_RECORDS,
        wait_ms: Annotated[
            int,
            Query(
                alias="waitMs",
                ge=0,
                le=MAX_WAIT_MS,
                description="how long to wait for a record at fromOffset when there is none yet",
            ),
        ] = 0,
        consistency: Consistency = None,
        accept: Annotated[str | None, Header()] = None,
        include_sensitive: IncludeSensitive = None,
        principal: PrincipalFilter = None,
        api: ApiFilter = None,
        broker_id: BrokerFilter = None,
        topic: TopicFilter = None,
        since: SinceFilter = None,
        until: UntilFilter = None,
    ) -> Response:
        """The records from ``fromOffset`` on, each with who asked for it
        (``who``); a sensitive config's value is `(redacted)` unless the
        caller's role sees it, a SCRAM credential's salt and keys are empty
        for every role (docs/security.md "Who sees what").

        With any of ``principal``, ``api``, ``brokerId``, ``topic``, ``since``,
        ``until``, only the records every one of them matches
        (docs/api-additions.md "Who changed what"), scanning at most
        100,000 records from ``fromOffset``; ``nextOffset`` is where the scan
        stopped: ask again from there for more."""
        sensitive = auth.shows_sensitive(caller, include_sensitive)
        image = await ctx.read_image(consistency)
        try:
            log_filter = LogFilter.parse(image, principal, api, broker_id, topic, since, until)
        except FilterError as e:
            raise bad_request(str(e)) from None
        if from_offset >= image.next_offset and wait_ms > 0:
            await node.wait_for_offset(from_offset, wait_ms / 1000)
        record_log = node.sm.log
        history = getattr(node, "history", None)
        read = log_reader(record_log, history)
        try:
            if log_filter.asked:
                below = node.image.next_offset
                entries, next_offset = await asyncio.to_thread(
                    scan, read, log_filter, from_offset, max_records, below
                )
            elif history is not None and from_offset < record_log.oldest_offset:
                entries = await asyncio.to_thread(read, from_offset, max_records)
            else:
                entries = read(from_offset, max_records)
        except OffsetTooOld as e:
            return JsonResponse(
                {
                    "errorCode": Errors.OFFSET_OUT_OF_RANGE.value,
                    "errorName": Errors.OFFSET_OUT_OF_RANGE.name,
                    "errorMessage": f"{e}; load /v1/snapshot, then follow the log from its "
                    "nextOffset",
                    "oldestOffset": e.oldest,
                },
                status_code=410,
                headers={"X-Metadata-Offset": str(node.image.last_offset)},
            )
        # The log is appended just before the image is published: never show
        # records beyond the image the headers describe.
        image = node.image
        if not log_filter.asked:
            entries = [e for e in entries if e.offset < image.next_offset]
            next_offset = entries[-1].offset + 1 if entries else from_offset
        shown: dict[int, dict] = {}  # each Who rendered once: its records share it

        def who_of(who: Who | None) -> dict | None:
            if who is None:
                return None
            obj = shown.get(id(who))
            if obj is None:
                obj = shown[id(who)] = who_obj(who, with_records=False)
            return obj

        records = [
            log_record_to_obj(
                e.offset,
                e.timestamp_ms,
                e.controller_epoch,
                redacted(e.record, sensitive),
                e.batch_offset,
                who_of(e.who),
            )
            for e in entries
        ]
        oldest = record_log.oldest_offset
        if wants_ndjson(accept):
            return Response(
                _ndjson(records),
                media_type=NDJSON,
                headers={
                    "X-Metadata-Offset": str(image.last_offset),
                    "X-Next-Offset": str(next_offset),
                    "X-High-Watermark": str(image.next_offset),
                    "X-Oldest-Offset": str(oldest),
                },
            )
        return with_offset(
            {
                "records": records,
                "nextOffset": next_offset,
                "highWatermark": image.next_offset,
                "oldestOffset": oldest,
            },
            image,
        )

    @app.get(
        "/v1/snapshot",
        operation_id="readSnapshot",
        tags=["reads"],
        summary="The image at an offset, as records",
        response_model=M.SnapshotOut,
        responses={
            **READ_RESPONSES,
            200: {
                "description": "the snapshot (JSON, or one record per line with "
                "`Accept: application/x-ndjson`; then X-Metadata-Offset and "
                "X-Next-Offset give its offsets)",
                "content": {NDJSON: {"schema": {"$ref": "#/components/schemas/RecordOut"}}},
                "headers": {"X-Metadata-Offset": HEADERS["X-Metadata-Offset"]},
            },
        },
    )
    async def read_snapshot(
        caller: ReadCaller,
        consistency: Consistency = None,
        accept: Annotated[str | None, Header()] = None,
        include_sensitive: IncludeSensitive = None,
    ) -> Response:
        """Records that recreate the image (LEADER_CHANGE, FEATURE_LEVEL_RECORD,
        REGISTER_BROKER_RECORD, TOPIC_RECORD, CONFIG_RECORD, PARTITION_RECORD,
        ...); each carries ``offset`` = the image's last offset. A sensitive
        config's value is `(redacted)` unless the caller's role sees it; a
        SCRAM credential's salt and keys are empty for every role."""
        sensitive = auth.shows_sensitive(caller, include_sensitive)
        image = await ctx.read_image(consistency)
        timestamp = snapshot_timestamp(node, image)
        ndjson = wants_ndjson(accept)
        headers = {"X-Metadata-Offset": str(image.last_offset)}
        if ndjson:
            headers["X-Next-Offset"] = str(image.next_offset)
        return StreamingResponse(
            stream_pieces(snapshot_pieces(image, timestamp, sensitive, ndjson), image),
            media_type=NDJSON if ndjson else "application/json",
            headers=headers,
        )
