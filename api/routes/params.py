"""What the routes declare of a request besides its body: the caller's role
and the path and query parameters shared by several routes.

Declared once so that every route says a parameter the same way in the
OpenAPI document (its alias, bounds and description); the routes' own
parameters stay with their route.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import Depends, Path, Query, Request
from fastapi.security import HTTPBearer
from pydantic import BaseModel

from metadata_records import limits

from ..auth import Authenticator, Principal, Role

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1

_bearer = HTTPBearer(
    auto_error=False,
    description="A token from the tokens file (roles broker, admin, read)",
)


def _needs(role: Role) -> Callable[..., Awaitable[Principal]]:
    async def authenticate(
        request: Request, _: Annotated[Any, Depends(_bearer)] = None
    ) -> Principal:
        authenticator: Authenticator = request.app.state.auth
        return authenticator.authenticate(request.headers.get("authorization"), role, request.scope)

    authenticate.__name__ = f"needs_{role.value}_role"
    return authenticate


BrokerCaller = Annotated[Principal, Depends(_needs(Role.BROKER))]
AdminCaller = Annotated[Principal, Depends(_needs(Role.ADMIN))]
ReadCaller = Annotated[Principal, Depends(_needs(Role.READ))]
TopicName = Annotated[str, Path(description="the topic's name")]
BrokerIdPath = Annotated[int, Path(ge=INT32_MIN, le=INT32_MAX, description="the broker id")]
IncludeSynonyms = Annotated[
    bool,
    Query(alias="includeSynonyms", description="list every level that sets each config"),
]
ConfigurationKeys = Annotated[
    list[str] | None,
    Query(
        alias="configurationKeys",
        max_length=limits.MAX_TOPIC_CONFIGS,
        description="only these configs (repeat the parameter); all when absent",
    ),
]

Consistency = Annotated[
    Literal["linearizable"] | None,
    Query(description="`linearizable`: commit a read barrier through the log first"),
]
IncludeSensitive = Annotated[
    bool | None,
    Query(
        alias="includeSensitive",
        description="the values of sensitive configs (PASSWORDs, configs of unknown type) in "
        "CONFIG_RECORDs: absent, as the caller's role allows (admin and broker: the values; "
        "read: `(redacted)`); `false`: `(redacted)`; `true`: the values, for the admin role "
        "only (403 for any other)",
    ),
]


def body_doc(model: type[BaseModel], required: bool = True) -> dict[str, Any]:
    """The OpenAPI requestBody of a route that parses its body itself
    (api/bodies.py), so that FastAPI does not."""
    return {
        "requestBody": {
            "required": required,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
            },
        }
    }


PageLimit = Annotated[
    int | None,
    Query(
        ge=1,
        le=10_000,
        description="at most this many entries, after `after`: a page, whose `nextAfter` "
        "names the next (absent: the whole list, streamed)",
    ),
]
