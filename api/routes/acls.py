"""DescribeAcls: the bindings a filter matches, from the serving node's image.
(The ACL writes are rows of the admin-write table, api/routes/__init__.py.)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Query
from starlette.responses import Response

from metadata_records.errors import Errors

from .. import models as M
from ..errors import ApiProblem
from ..openapi_doc import READ_RESPONSES
from ..reads import acl_filter_from_query, acls_obj
from .context import RouteContext, with_offset
from .params import Consistency, ReadCaller


def reads(app: FastAPI, ctx: RouteContext) -> None:
    @app.get(
        "/v1/acls",
        operation_id="describeAcls",
        tags=["reads"],
        summary="DescribeAcls",
        response_model=M.DescribeAclsOut,
        responses=READ_RESPONSES,
    )
    async def describe_acls(
        caller: ReadCaller,
        consistency: Consistency = None,
        resource_type: Annotated[
            str | None, Query(alias="resourceType", description="ANY (default), TOPIC, ...")
        ] = None,
        resource_name: Annotated[
            str | None, Query(alias="resourceName", description="absent: any")
        ] = None,
        pattern_type: Annotated[
            str | None,
            Query(alias="patternType", description="ANY (default), MATCH, LITERAL, PREFIXED"),
        ] = None,
        principal: Annotated[str | None, Query(description='e.g. "User:alice"')] = None,
        host: Annotated[str | None, Query(description="absent: any")] = None,
        operation: Annotated[str | None, Query(description="ANY (default), READ, ...")] = None,
        permission_type: Annotated[
            str | None, Query(alias="permissionType", description="ANY (default), ALLOW, DENY")
        ] = None,
    ) -> Response:
        """The bindings the filter matches, from the serving node's image."""
        try:
            acl_filter = acl_filter_from_query(
                resource_type, resource_name, pattern_type, principal, host, operation,
                permission_type,
            )  # fmt: skip
        except ValueError as e:
            raise ApiProblem(400, Errors.INVALID_REQUEST, str(e)) from None
        image = await ctx.read_image(consistency)
        return with_offset(acls_obj(image, acl_filter), image)
