"""The brokers' own writes (register, heartbeat, producer ids, AlterPartition)
and the reads of registered brokers.

A broker token acts only for its own broker id (``auth.check_broker``). The
three hot writes also go around FastAPI's routing (api/direct_routes.py) and
through the quick parsers (api/bodies.py); both ways answer the same, which
tests/test_api_direct_routes.py holds.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from pydantic import Field, TypeAdapter
from starlette.responses import Response

from metadata_records.errors import Errors

from .. import models as M
from .. import models_fast as MF
from ..auth import Principal, Role
from ..bodies import (
    alter_partition_request,
    body_of,
    heartbeat_request,
    parse_body,
    registration_request,
)
from ..direct_routes import DirectRoute, query_param
from ..edge import caller_of
from ..errors import JsonResponse
from ..list_pages import MAX_PAGE, brokers_page
from ..openapi_doc import READ_RESPONSES, WRITE_RESPONSES, not_found
from ..reads import broker_obj, brokers_obj
from .context import RouteContext, answer, problem_at, with_offset
from .params import (
    INT32_MAX,
    INT32_MIN,
    BrokerCaller,
    BrokerIdPath,
    Consistency,
    PageLimit,
    ReadCaller,
    body_doc,
)

# ?version as the direct route parses it: the bounds alter_partition declares to FastAPI.
VERSION_QUERY = TypeAdapter(Annotated[int, Field(ge=0, le=3)])


def writes(app: FastAPI, ctx: RouteContext) -> None:
    auth, submit = ctx.auth, ctx.submit

    async def submit_for(request: Request, caller: Principal, message: Any) -> Any:
        # A broker token acts only for its own broker id: checked before submitting.
        auth.check_broker(caller, message.broker_id)
        return await submit(message, caller_of(request.scope))

    @app.post(
        "/v1/brokers/register",
        operation_id="registerBroker",
        tags=["brokers"],
        summary="BrokerRegistration",
        response_model=M.BrokerRegistrationResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=body_doc(M.BrokerRegistrationRequest),
    )
    async def register_broker(request: Request, caller: BrokerCaller) -> Response:
        """Registers a broker incarnation (docs/kafka-rules.md §3): a new incarnation gets
        epoch = the offset of its RegisterBrokerRecord and starts fenced."""
        response = await submit_for(request, caller, registration_request(await body_of(request)))
        return JsonResponse(MF.registration_response_obj(response))

    @app.post(
        "/v1/brokers/heartbeat",
        operation_id="brokerHeartbeat",
        tags=["brokers"],
        summary="BrokerHeartbeat",
        response_model=M.BrokerHeartbeatResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=body_doc(M.BrokerHeartbeatRequest),
    )
    async def broker_heartbeat(request: Request, caller: BrokerCaller) -> Response:
        """Keeps the broker's session; fences, unfences and runs controlled
        shutdown (docs/kafka-rules.md §4)."""
        response = await submit_for(request, caller, heartbeat_request(await body_of(request)))
        return JsonResponse(MF.heartbeat_response_obj(response))

    @app.post(
        "/v1/brokers/allocate-producer-ids",
        operation_id="allocateProducerIds",
        tags=["brokers"],
        summary="AllocateProducerIds",
        response_model=M.AllocateProducerIdsResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=body_doc(M.AllocateProducerIdsRequest),
    )
    async def allocate_producer_ids(request: Request, caller: BrokerCaller) -> Response:
        """The next block of 1,000 producer ids for the broker's idempotent and
        transactional producers; no id is ever handed out twice."""
        req = parse_body(M.AllocateProducerIdsRequest, await request.body())
        response = await submit_for(request, caller, req.to_message())
        return answer(M.AllocateProducerIdsResponse.from_message(response))

    @app.post(
        "/v1/alter-partition",
        operation_id="alterPartition",
        tags=["brokers"],
        summary="AlterPartition (v0-3)",
        response_model=M.AlterPartitionResponse,
        responses=WRITE_RESPONSES,
        openapi_extra=body_doc(M.AlterPartitionRequest),
    )
    async def alter_partition(
        request: Request,
        caller: BrokerCaller,
        version: Annotated[int, Query(ge=0, le=3, description="AlterPartition version")] = 3,
    ) -> Response:
        """A partition leader's ISR change (docs/kafka-rules.md §2), decided atomically
        against one image."""
        response = await submit_for(
            request, caller, alter_partition_request(await body_of(request), version)
        )
        return JsonResponse(MF.alter_partition_response_obj(response))

    if ctx.direct is None:
        return
    routes = {getattr(r, "path", None): r for r in app.routes}

    async def alter_partition_direct(request: Request, caller: Principal) -> Response:
        version = query_param(request, "version", VERSION_QUERY, 3)
        return await alter_partition(request, caller, version)

    for path, endpoint in (
        ("/v1/brokers/register", register_broker),
        ("/v1/brokers/heartbeat", broker_heartbeat),
        ("/v1/alter-partition", alter_partition_direct),
    ):
        ctx.direct[path] = DirectRoute(routes[path], Role.BROKER, endpoint)


def reads(app: FastAPI, ctx: RouteContext) -> None:
    @app.get(
        "/v1/brokers",
        operation_id="listBrokers",
        tags=["reads"],
        summary="Registered brokers",
        response_model=M.BrokersOut,
        responses=READ_RESPONSES,
    )
    async def list_brokers(
        caller: ReadCaller,
        consistency: Consistency = None,
        limit: PageLimit = None,
        after: Annotated[
            int | None,
            Query(
                ge=INT32_MIN,
                le=INT32_MAX,
                description="the page starts after this broker id (the last page's `nextAfter`)",
            ),
        ] = None,
    ) -> Response:
        image = await ctx.read_image(consistency)
        if limit is None and after is None:
            return with_offset({**brokers_obj(image), "nextAfter": None}, image)
        return with_offset(brokers_page(image, after, limit or MAX_PAGE), image)

    @app.get(
        "/v1/brokers/{id}",
        operation_id="getBroker",
        tags=["reads"],
        summary="One broker",
        response_model=M.BrokerOut,
        responses={
            **READ_RESPONSES,
            **not_found(
                Errors.BROKER_ID_NOT_REGISTERED, "broker 4 is not registered", "no such broker"
            ),
        },
    )
    async def get_broker(
        id: BrokerIdPath,
        caller: ReadCaller,
        consistency: Consistency = None,
    ) -> Response:
        image = await ctx.read_image(consistency)
        reg = image.brokers.get(id)
        if reg is None:
            raise problem_at(
                image, 404, Errors.BROKER_ID_NOT_REGISTERED, f"broker {id} is not registered"
            )
        return with_offset(broker_obj(reg), image)
