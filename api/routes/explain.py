"""``GET /v1/explain/brokers/{id}`` and
``GET /v1/explain/partitions/{topic}/{partition}``: why a broker or a
partition is as it is, worked out by api/explain.py from this node's image,
a bounded look-back over its log (the retained log, then the history store)
and, from the active controller, its refusals and the broker's session.

Every voter and observer answers (no 307): the refusals and sessions travel
as a ``RefusalsQuery`` through ``submit`` as GET /v1/refusals does; where this
node is not the active controller the answer has them null and
``refusalsFrom`` names the node that has them. The look-back runs off the
event loop (it may decode old batches).
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import FastAPI, Path
from starlette.responses import Response

from controller.refusals import PER_KEY, RefusalsQuery
from controller.what_if import min_insync_replicas
from metadata_records.errors import Errors
from metadata_records.image import MetadataImage
from quorum.history_images import log_reader
from quorum.node_errors import NodeError, NotControllerError
from quorum.record_log import OffsetTooOld

from .. import explain as X
from .. import models as M
from ..openapi_doc import READ_RESPONSES, answer, error_body
from .context import RouteContext, problem_at, with_offset
from .params import INT32_MAX, Consistency, ReadCaller, TopicName

ASK_TIMEOUT_S = 2.0  # an explain without the controller's part beats one that waits

BROKER_NOT_FOUND = {
    404: answer(
        M.ErrorResponse,
        "BROKER_ID_NOT_REGISTERED (102): a broker neither registered nor named by the "
        "look-back's records",
        {
            "unknown": (
                "an unknown broker",
                error_body(
                    Errors.BROKER_ID_NOT_REGISTERED,
                    "broker 9 is not registered, and the last 46 records do not name it: "
                    "check the id (GET /v1/brokers lists the registered ones)",
                ),
            ),
        },
    )
}
PARTITION_NOT_FOUND = {
    404: answer(
        M.ErrorResponse,
        "UNKNOWN_TOPIC_OR_PARTITION (3): no such topic, or no such partition of it",
        {
            "partition": (
                "a partition the topic has not",
                error_body(
                    Errors.UNKNOWN_TOPIC_OR_PARTITION,
                    "topic 'orders' has no partition 5: it has 3, 0-2",
                ),
            ),
        },
    )
}


async def _controller_facts(
    ctx: RouteContext, image: MetadataImage, query: RefusalsQuery
) -> tuple[X.ControllerFacts, bool]:
    """The active controller's refusals (and session), or why not; and
    whether this node is the active controller."""
    me = ctx.node.node_id
    try:
        got = await ctx.node.submit(query, timeout_s=ASK_TIMEOUT_S, caller=None)
    except NotControllerError as e:
        leader = e.leader_id if e.leader_id is not None else image.leader_id
        if leader is not None and leader >= 0:
            url = f" at {e.leader_url}" if e.leader_url else ""
            source = f"node {me} is not the active controller: ask node {leader}{url}"
        else:
            source = f"node {me} is not the active controller, and none is known yet"
        return X.ControllerFacts(None, None, source), False
    except (NodeError, TimeoutError) as e:
        return X.ControllerFacts(None, None, f"the active controller did not answer: {e}"), False
    return X.ControllerFacts(got.refusals, got.session, f"node {me} is the active controller"), True


def _served_by(ctx: RouteContext, image: MetadataImage, active: bool) -> dict:
    leader = image.leader_id if image.leader_id >= 0 else None
    return {"nodeId": ctx.node.node_id, "activeController": active, "leaderId": leader}


def _registration_entry(read, offset: int):
    try:
        entries = read(offset, 1, False)
    except OffsetTooOld:
        return None
    return entries[0] if entries and entries[0].offset == offset else None


def reads(app: FastAPI, ctx: RouteContext) -> None:
    node = ctx.node

    def reader():
        return log_reader(node.sm.log, getattr(node, "history", None))

    @app.get(
        "/v1/explain/brokers/{broker_id}",
        operation_id="explainBroker",
        tags=["reads"],
        summary="Why a broker is fenced, unfenced, shutting down or gone",
        response_model=M.BrokerExplainOut,
        responses={**READ_RESPONSES, **BROKER_NOT_FOUND},
    )
    async def explain_broker(
        caller: ReadCaller,
        broker_id: Annotated[int, Path(ge=0, le=INT32_MAX, description="the broker id")],
        consistency: Consistency = None,
    ) -> Response:
        """Its state and how it got there: its registration (offset, time,
        who), its recent fencing, unfencing and controlled shutdown from the
        log with their causes (session expired, its own heartbeat, an
        operator), the partitions that keep its controlled shutdown from
        finishing, and, from the active controller, its session and its
        requests' last refusals (docs/api-additions.md "Why is it so")."""
        image = await ctx.read_image(consistency)
        query = RefusalsQuery(broker_id=broker_id, limit=PER_KEY, session_of=broker_id)
        facts, active = await _controller_facts(ctx, image, query)
        read, stored = reader(), node.sm.log.stored_from

        def work() -> dict:
            entries, look_back = X.scan_back(
                read, image.next_offset, X.BrokerRecords(broker_id), stored=stored
            )
            reg = image.brokers.get(broker_id)
            registration = None
            if reg is not None and reg.registration_offset < look_back.from_offset:
                registration = _registration_entry(read, reg.registration_offset)
            answer = X.explain_broker(
                image, broker_id, entries, look_back, registration, facts, int(time.time() * 1000)
            )
            return {"offset": image.last_offset, "servedBy": _served_by(ctx, image, active)} | (
                answer
            )

        try:
            body = await asyncio.to_thread(work)
        except X.NotFound as e:
            raise problem_at(image, 404, Errors.BROKER_ID_NOT_REGISTERED, str(e)) from None
        return with_offset(body, image)

    @app.get(
        "/v1/explain/partitions/{topic}/{partition}",
        operation_id="explainPartition",
        tags=["reads"],
        summary="Why a partition is under-replicated, under min ISR or offline",
        response_model=M.PartitionExplainOut,
        responses={**READ_RESPONSES, **PARTITION_NOT_FOUND},
    )
    async def explain_partition(
        caller: ReadCaller,
        topic: TopicName,
        partition: Annotated[int, Path(ge=0, le=INT32_MAX, description="the partition id")],
        consistency: Consistency = None,
    ) -> Response:
        """Its leader, ISR and ELR, its status (online or offline,
        under-replicated, under min ISR, reassigning, not led by its preferred
        replica) with a reason for each, each replica's eligibility and the
        rule that keeps it out (docs/rules.md), its recent changes from the
        log, and, from the active controller, its last refusals."""
        image = await ctx.read_image(consistency)
        try:
            t = X.find_partition(image, topic, partition)
        except X.NotFound as e:
            raise problem_at(image, 404, Errors.UNKNOWN_TOPIC_OR_PARTITION, str(e)) from None
        query = RefusalsQuery(topic=topic, partition=partition, limit=PER_KEY)
        facts, active = await _controller_facts(ctx, image, query)
        read, stored = reader(), node.sm.log.stored_from
        min_isr = min_insync_replicas(image, t.topic_id)

        def work() -> dict:
            entries, look_back = X.scan_back(
                read, image.next_offset, X.PartitionRecords(t.topic_id, partition), stored=stored
            )
            answer = X.explain_partition(
                image, topic, partition, min_isr, entries, look_back, facts
            )
            return {"offset": image.last_offset, "servedBy": _served_by(ctx, image, active)} | (
                answer
            )

        return with_offset(await asyncio.to_thread(work), image)
