"""DescribeDelegationToken: the tokens a caller may see, with their HMACs,
from the serving node's image. (Create, Renew and Expire are rows of the
admin-write table, api/routes/__init__.py.)

As Kafka's ``KafkaApis.handleDescribeTokensRequest``: an unauthenticated
caller is refused DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, a node without the
secret DELEGATION_TOKEN_AUTH_DISABLED; otherwise each token is shown as
``DelegationTokenManager.filterToken`` decides: only tokens whose owner or a
renewer is one of the ``owner`` filters (when any is given), and of those,
the caller's own (as owner or renewer) and, for an admin, every one (an
admin may do anything, as Kafka's super users, who hold DESCRIBE on every
token). A read or broker role sees only the tokens it owns or renews.

The HMAC is derived here from the token id and the secret
(metadata_records/delegation_tokens.py): the image holds none.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Annotated, Any

from fastapi import FastAPI, Query
from starlette.responses import Response

from metadata_records import limits
from metadata_records.delegation_tokens import DelegationToken, split_principal, token_hmac
from metadata_records.errors import Errors
from metadata_records.image import MetadataImage

from .. import models as M
from ..auth import Principal, Role
from ..errors import ApiProblem
from ..models.delegation_tokens import requester_of
from ..openapi_doc import READ_RESPONSES
from .context import RouteContext, with_offset
from .params import Consistency, ReadCaller


def _refused(error: Errors, message: str, rule: str) -> dict[str, Any]:
    return {
        "errorCode": int(error),
        "errorName": error.name,
        "errorMessage": message,
        "rule": rule,
        "throttleTimeMs": 0,
        "tokens": [],
    }


def _principal_obj(principal: str) -> dict[str, str]:
    kind, _, name = principal.partition(":")
    return {"principalType": kind, "principalName": name}


# The most HMACs a node keeps computed (about 150 bytes each): past it the
# cache starts again. 10,000 HMACs cost about 35 ms (bench/delegation_tokens.py).
MAX_CACHED_HMACS = 100_000
# Past this many tokens a describe is built off the event loop (10,000 tokens
# cost 17 ms with their HMACs cached, 110 ms without, at load 12).
LARGE_DESCRIBE = 1_000


def _hmac(cache: dict[str, bytes], secret: str, token_id: str) -> bytes:
    found = cache.get(token_id)
    if found is None:
        if len(cache) >= MAX_CACHED_HMACS:
            cache.clear()
        found = cache[token_id] = token_hmac(secret, token_id)
    return found


def _token_obj(token_id: str, t: DelegationToken, hmac: bytes) -> dict[str, Any]:
    owner, requester = _principal_obj(t.owner), _principal_obj(t.requester)
    return {
        "principalType": owner["principalType"],
        "principalName": owner["principalName"],
        "tokenRequesterPrincipalType": requester["principalType"],
        "tokenRequesterPrincipalName": requester["principalName"],
        "issueTimestamp": t.issue_timestamp,
        "expiryTimestamp": t.expiration_timestamp,
        "maxTimestamp": t.max_timestamp,
        "tokenId": token_id,
        "hmac": base64.b64encode(hmac).decode(),
        "renewers": [_principal_obj(r) for r in t.renewers],
    }


def described(
    image: MetadataImage,
    caller: Principal,
    secret: str | None,
    owners: list[str] | None,
    cache: dict[str, bytes] | None = None,
) -> dict[str, Any]:
    """Kafka's describe, as the module says."""
    requester = requester_of(caller)
    if requester is None:
        return _refused(
            Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
            "Describing delegation tokens needs an authenticated caller: this node runs "
            "without --tokens-file or client certificates",
            "delegation-token.request-not-allowed",
        )
    if secret is None:
        return _refused(
            Errors.DELEGATION_TOKEN_AUTH_DISABLED,
            "Delegation tokens are disabled: this node runs without --delegation-token-secret-file",
            "delegation-token.auth-disabled",
        )
    sees_all = caller.role is Role.ADMIN
    cache = {} if cache is None else cache
    tokens = []
    for token_id, t in sorted(image.delegation_tokens.items()):
        if owners is not None and not any(t.owner_or_renewer(o) for o in owners):
            continue
        if sees_all or t.owner_or_renewer(requester):
            tokens.append(_token_obj(token_id, t, _hmac(cache, secret, token_id)))
    return {
        "errorCode": 0,
        "errorName": "NONE",
        "errorMessage": None,
        "rule": None,
        "throttleTimeMs": 0,
        "tokens": tokens,
    }


def reads(app: FastAPI, ctx: RouteContext) -> None:
    @app.get(
        "/v1/delegation-tokens",
        operation_id="describeDelegationToken",
        tags=["reads"],
        summary="DescribeDelegationToken",
        response_model=M.DescribeDelegationTokenOut,
        responses=READ_RESPONSES,
    )
    async def describe_delegation_token(
        caller: ReadCaller,
        consistency: Consistency = None,
        owner: Annotated[
            list[str] | None,
            Query(
                description='an owner or renewer to match, "type:name" (repeat for several); '
                "none: every token the caller may see"
            ),
        ] = None,
    ) -> Response:
        """The tokens the caller may see (its own as owner or renewer; an
        admin, every one), each with its HMAC, from the serving node's image."""
        if owner is not None:
            if len(owner) > limits.MAX_DELEGATION_TOKEN_DESCRIBE_OWNERS:
                raise ApiProblem(
                    400,
                    Errors.INVALID_REQUEST,
                    f"{len(owner)} owners, more than "
                    f"{limits.MAX_DELEGATION_TOKEN_DESCRIBE_OWNERS} in one read (docs/limits.md)",
                )
            for o in owner:
                if split_principal(o) is None:
                    raise ApiProblem(
                        400,
                        Errors.INVALID_REQUEST,
                        f"owner {o[:100]!r} is not a principal: write it type:name (User:alice)",
                    )
        image = await ctx.read_image(consistency)
        args = (image, caller, ctx.delegation_token_secret, owner, ctx.token_hmacs)
        if len(image.delegation_tokens) > LARGE_DESCRIBE:
            answer = await asyncio.to_thread(described, *args)
        else:
            answer = described(*args)
        return with_offset(answer, image)
