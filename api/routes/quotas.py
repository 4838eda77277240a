"""DescribeClientQuotas: the quotas of the entities a filter matches, from
the serving node's image. (AlterClientQuotas is a row of the admin-write
table, api/routes/__init__.py.)

The filter arrives as query parameters, three per entity type (its name, its
default, any); Kafka's rule that a type appears once in a filter is checked
here, the matching itself is api/reads.py's.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Query
from starlette.responses import Response

from metadata_records.client_quotas import (
    CLIENT_ID,
    IP,
    MATCH_TYPE_DEFAULT,
    MATCH_TYPE_EXACT,
    MATCH_TYPE_SPECIFIED,
    USER,
    FilterComponent,
)
from metadata_records.errors import ApiError, Errors

from .. import models as M
from ..errors import ApiProblem
from ..openapi_doc import READ_RESPONSES
from ..reads import client_quotas_obj
from .context import RouteContext, problem_at, with_offset
from .params import Consistency, ReadCaller


def _quota_filter(entity_type: str, name: str | None, default: bool, any_: bool) -> list:
    given = [x for x in (name is not None, default, any_) if x]
    if len(given) > 1:
        raise ApiProblem(
            400,
            Errors.INVALID_REQUEST,
            f"Entity type {entity_type} cannot appear more than once in the filter: "
            "give one of its name, its default or any",
        )
    if name is not None:
        return [FilterComponent(entity_type, MATCH_TYPE_EXACT, name)]
    if default:
        return [FilterComponent(entity_type, MATCH_TYPE_DEFAULT)]
    if any_:
        return [FilterComponent(entity_type, MATCH_TYPE_SPECIFIED)]
    return []


def reads(app: FastAPI, ctx: RouteContext) -> None:
    @app.get(
        "/v1/client-quotas",
        operation_id="describeClientQuotas",
        tags=["reads"],
        summary="DescribeClientQuotas",
        response_model=M.DescribeClientQuotasOut,
        responses=READ_RESPONSES,
    )
    async def describe_client_quotas(
        caller: ReadCaller,
        consistency: Consistency = None,
        user: Annotated[str | None, Query(description="the user of this name")] = None,
        user_default: Annotated[
            bool, Query(alias="userDefault", description="the default user")
        ] = False,
        any_user: Annotated[
            bool, Query(alias="anyUser", description="any user, the default too")
        ] = False,
        client_id: Annotated[
            str | None, Query(alias="clientId", description="the client id of this name")
        ] = None,
        client_id_default: Annotated[
            bool, Query(alias="clientIdDefault", description="the default client id")
        ] = False,
        any_client_id: Annotated[
            bool, Query(alias="anyClientId", description="any client id, the default too")
        ] = False,
        ip: Annotated[str | None, Query(description="the ip of this address")] = None,
        ip_default: Annotated[bool, Query(alias="ipDefault", description="the default ip")] = False,
        any_ip: Annotated[
            bool, Query(alias="anyIp", description="any ip, the default too")
        ] = False,
        strict: Annotated[
            bool, Query(description="only entities with no component beyond the filter's")
        ] = False,
    ) -> Response:
        """The quotas of every entity the filter matches (Kafka's filter: each
        component matches a name, the default, or any entity of its type; no
        component matches every entity), from the serving node's image."""
        components = (
            _quota_filter(USER, user, user_default, any_user)
            + _quota_filter(CLIENT_ID, client_id, client_id_default, any_client_id)
            + _quota_filter(IP, ip, ip_default, any_ip)
        )
        image = await ctx.read_image(consistency)
        result = client_quotas_obj(image, components, strict)
        if isinstance(result, ApiError):
            raise problem_at(image, 400, result.error, result.message or "")
        return with_offset(result, image)
