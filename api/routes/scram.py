"""DescribeUserScramCredentials: the mechanisms and iterations of users'
SCRAM credentials, from the serving node's image. (AlterUserScramCredentials
is a row of the admin-write table, api/routes/__init__.py.)

Kafka answers a describe for a principal with DESCRIBE on the CLUSTER
(``KafkaApis.handleDescribeUserScramCredentialsRequest``); here every read is
of the cluster's metadata, so the read role may describe, as it may describe
ACLs and quotas. What it is shown holds no secret: no salt, no key
(``ScramImage.describe`` shows the same).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query
from starlette.responses import Response

from metadata_records import limits
from metadata_records.errors import Errors
from metadata_records.image import MetadataImage

from .. import models as M
from ..errors import ApiProblem
from ..openapi_doc import READ_RESPONSES
from .context import RouteContext, with_offset
from .params import Consistency, ReadCaller

_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
_MISSING = "Attempt to describe a user credential that does not exist: "


def _error(error: Errors, message: str | None) -> dict[str, Any]:
    return {"errorCode": int(error), "errorName": error.name, "errorMessage": message}


def described(image: MetadataImage, users: list[str] | None) -> dict[str, Any]:
    """Kafka's ``ScramImage.describe``: every user with a credential when
    ``users`` names none, else each user named once (a user named twice is
    DUPLICATE_RESOURCE, one without a credential RESOURCE_NOT_FOUND)."""
    if not users:
        names = {user: False for user in sorted(image.scram)}
    else:
        names = {}
        for user in users:
            names[user] = user in names
    results = []
    for user, twice in names.items():
        credentials = image.scram.get(user)
        if twice:
            result = _error(Errors.DUPLICATE_RESOURCE, _TWICE + user)
            infos = []
        elif not credentials:
            result = _error(Errors.RESOURCE_NOT_FOUND, _MISSING + user)
            infos = []
        else:
            result = _error(Errors.NONE, None)
            infos = [
                {"mechanism": m, "iterations": c.iterations} for m, c in sorted(credentials.items())
            ]
        results.append({**result, "user": user, "credentialInfos": infos})
    return {**_error(Errors.NONE, None), "throttleTimeMs": 0, "results": results}


def reads(app: FastAPI, ctx: RouteContext) -> None:
    @app.get(
        "/v1/scram-credentials",
        operation_id="describeUserScramCredentials",
        tags=["reads"],
        summary="DescribeUserScramCredentials",
        response_model=M.DescribeUserScramCredentialsOut,
        responses=READ_RESPONSES,
    )
    async def describe_user_scram_credentials(
        caller: ReadCaller,
        consistency: Consistency = None,
        user: Annotated[
            list[str] | None,
            Query(description="a user to describe (repeat for several); none: every user"),
        ] = None,
    ) -> Response:
        """Each user's SCRAM mechanisms and iterations (never a salt or a
        key), from the serving node's image."""
        if user is not None and len(user) > limits.MAX_SCRAM_DESCRIBE_USERS:
            raise ApiProblem(
                400,
                Errors.INVALID_REQUEST,
                f"{len(user)} users, more than {limits.MAX_SCRAM_DESCRIBE_USERS} in one read "
                "(docs/limits.md): describe them in several",
            )
        image = await ctx.read_image(consistency)
        return with_offset(described(image, user), image)
