"""Delegation tokens (KIP-48): CreateDelegationToken, RenewDelegationToken,
ExpireDelegationToken and DescribeDelegationToken, with Kafka's fields.

Principals are Kafka's (``principalType``, ``principalName``) pairs; the
caller's own is ``User:<identity>``, the identity the log's who shows
(``token/<id>``, ``token/line-<N>``, ``cert/<name>``: docs/security.md), so
a token created without an owner belongs to the caller that created it.
HMACs travel as base64 (standard alphabet, with padding), as Kafka's JSON
converters write bytes. An HMAC is shown only in the answer to the Create
that made it and to a Describe by a caller Kafka would show it to; no
record, snapshot or export holds one.
"""

from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from controller import messages as m
from metadata_records import limits

from .common import (
    ACCEPTED,
    NONE,
    Int64,
    RefusalFields,
    RequestModel,
    ResponseModel,
    ThrottleTimeMs,
    bounded_list,
    bounded_str,
    decode_base64,
    example,
    refusal_fields,
)

if TYPE_CHECKING:  # api.auth imports the models: a run-time import would be a circle
    from ..auth import Principal

PrincipalPart = bounded_str(limits.MAX_PRINCIPAL_PART_LENGTH)
# A type is what precedes the first colon of "type:name" (Kafka's
# SecurityUtils.parseKafkaPrincipal), so it holds none, and is not empty.
PrincipalType = Annotated[
    str,
    Field(
        strict=True, min_length=1, max_length=limits.MAX_PRINCIPAL_PART_LENGTH, pattern=r"^[^:]+$"
    ),
]
HMAC_EXAMPLE = base64.b64encode(bytes(range(64))).decode()
TOKEN_ID_EXAMPLE = "4Bd5Jm3uQNC8bn4r8KFeyA"


def requester_of(principal: Principal) -> str | None:
    """The caller as a Kafka principal, ``User:<identity>``; None for the
    anonymous caller of a node without auth (Kafka's PLAINTEXT listener,
    whose callers may not use delegation tokens)."""
    identity = principal.name.partition(":")[2]
    return None if identity == "anonymous" else f"User:{identity}"


def wall_clock_ms() -> int:
    """Token times are absolute (controller/delegation_token_control.py)."""
    return int(time.time() * 1000)


def _hmac(value: str) -> bytes:
    decoded = decode_base64(value)
    if not decoded:
        raise PydanticCustomError("base64", "an empty HMAC")
    return decoded


Hmac = Annotated[
    str,
    Field(strict=True, max_length=4 * limits.MAX_DELEGATION_TOKEN_HMAC_BYTES // 3 + 4),
    AfterValidator(_hmac),
]


class PrincipalIn(RequestModel):
    """A Kafka principal (Kafka's CreatableRenewers)."""

    principal_type: PrincipalType = Field(description='the principal\'s type, "User"')
    principal_name: PrincipalPart = Field(description="the principal's name")


class PrincipalOut(ResponseModel):
    """A Kafka principal (a token's renewer)."""

    principal_type: str = Field(description="the principal's type")
    principal_name: str = Field(description="the principal's name")


class CreateDelegationTokenRequest(RequestModel):
    """POST /v1/delegation-tokens (Kafka's CreateDelegationTokenRequest)."""

    model_config = example(
        {
            "ownerPrincipalType": "User",
            "ownerPrincipalName": "alice",
            "renewers": [{"principalType": "User", "principalName": "token/ops"}],
            "maxLifetimeMs": 86400000,
        }
    )

    owner_principal_type: PrincipalType | None = Field(
        None, description="the owner's type (with ownerPrincipalName; default User)"
    )
    owner_principal_name: PrincipalPart | None = Field(
        None, description="the owner's name; none or empty: the caller owns the token"
    )
    renewers: bounded_list(PrincipalIn, limits.MAX_DELEGATION_TOKEN_RENEWERS) = Field(
        [], description="principals that may renew or expire it besides its owner (User only)"
    )
    max_lifetime_ms: Int64 = Field(
        -1,
        description="its max lifetime; <= 0 or above the cluster's "
        "delegation.token.max.lifetime.ms (7 days): that",
    )

    def to_message(self, caller: Principal) -> m.CreateDelegationTokenRequest:
        return m.CreateDelegationTokenRequest(
            requester=requester_of(caller),
            now_wall_ms=wall_clock_ms(),
            renewers=tuple((r.principal_type, r.principal_name) for r in self.renewers),
            max_lifetime_ms=self.max_lifetime_ms,
            owner_principal_type=self.owner_principal_type,
            owner_principal_name=self.owner_principal_name,
        )


class CreateDelegationTokenResponse(RefusalFields):
    """The new token, with its HMAC: the one answer that carries it unasked."""

    model_config = example(
        {
            **ACCEPTED,
            "throttleTimeMs": 0,
            "principalType": "User",
            "principalName": "alice",
            "tokenRequesterPrincipalType": "User",
            "tokenRequesterPrincipalName": "token/ops",
            "issueTimestampMs": 1764871200000,
            "expiryTimestampMs": 1764957600000,
            "maxTimestampMs": 1764957600000,
            "tokenId": TOKEN_ID_EXAMPLE,
            "hmac": HMAC_EXAMPLE,
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    principal_type: str = Field(description="the owner's type")
    principal_name: str = Field(description="the owner's name")
    token_requester_principal_type: str = Field(description="the caller's type")
    token_requester_principal_name: str = Field(description="the caller's name")
    issue_timestamp_ms: int = Field(
        description="when it was issued (wall clock, ms); -1 if refused"
    )
    expiry_timestamp_ms: int = Field(description="when it expires unless renewed; -1 if refused")
    max_timestamp_ms: int = Field(description="no renewal goes past this; -1 if refused")
    token_id: str = Field(description="its id; empty if refused")
    hmac: str = Field(description="its HMAC (the token's password), base64; empty if refused")

    @classmethod
    def from_message(cls, r: m.CreateDelegationTokenResponse) -> CreateDelegationTokenResponse:
        return cls(
            **refusal_fields(r),
            principal_type=r.principal_type,
            principal_name=r.principal_name,
            token_requester_principal_type=r.token_requester_principal_type,
            token_requester_principal_name=r.token_requester_principal_name,
            issue_timestamp_ms=r.issue_timestamp_ms,
            expiry_timestamp_ms=r.expiry_timestamp_ms,
            max_timestamp_ms=r.max_timestamp_ms,
            token_id=r.token_id,
            hmac=base64.b64encode(r.hmac).decode(),
        )


class RenewDelegationTokenRequest(RequestModel):
    """POST /v1/delegation-tokens/renew (Kafka's RenewDelegationTokenRequest)."""

    model_config = example({"hmac": HMAC_EXAMPLE, "renewPeriodMs": 3600000})

    hmac: Hmac = Field(description="the token's HMAC, base64")
    renew_period_ms: Int64 = Field(
        -1,
        description="how long from now; <= 0 or above delegation.token.expiry.time.ms "
        "(1 day): that; never past the token's max time",
    )

    def to_message(self, caller: Principal) -> m.RenewDelegationTokenRequest:
        return m.RenewDelegationTokenRequest(
            requester_of(caller), wall_clock_ms(), self.hmac, self.renew_period_ms
        )


class ExpireDelegationTokenRequest(RequestModel):
    """POST /v1/delegation-tokens/expire (Kafka's ExpireDelegationTokenRequest)."""

    model_config = example({"hmac": HMAC_EXAMPLE, "expiryTimePeriodMs": -1})

    hmac: Hmac = Field(description="the token's HMAC, base64")
    expiry_time_period_ms: Int64 = Field(
        -1,
        description="negative: expire it now (it is removed); else it expires this long "
        "from now, never past its max time",
    )

    def to_message(self, caller: Principal) -> m.ExpireDelegationTokenRequest:
        return m.ExpireDelegationTokenRequest(
            requester_of(caller), wall_clock_ms(), self.hmac, self.expiry_time_period_ms
        )


class DelegationTokenExpiryResponse(RefusalFields):
    """Kafka's RenewDelegationTokenResponse and ExpireDelegationTokenResponse."""

    model_config = example(
        {**ACCEPTED, "throttleTimeMs": 0, "expiryTimestampMs": 1764875100000},
        {
            "errorCode": 63,
            "errorName": "DELEGATION_TOKEN_OWNER_MISMATCH",
            "errorMessage": "User:token/ci is neither the owner of delegation token "
            f"{TOKEN_ID_EXAMPLE} nor a renewer",
            "rule": "delegation-token.owner-mismatch",
            "throttleTimeMs": 0,
            "expiryTimestampMs": -1,
        },
    )

    throttle_time_ms: ThrottleTimeMs = 0
    expiry_timestamp_ms: int = Field(
        description="its new expiry (wall clock, ms); the period itself when expired at once"
    )

    @classmethod
    def from_message(cls, r: m.DelegationTokenExpiryResponse) -> DelegationTokenExpiryResponse:
        return cls(**refusal_fields(r), expiry_timestamp_ms=r.expiry_timestamp_ms)


class DescribedTokenOut(ResponseModel):
    """One token (Kafka's DescribedDelegationToken)."""

    principal_type: str = Field(description="the owner's type")
    principal_name: str = Field(description="the owner's name")
    token_requester_principal_type: str = Field(description="who created it: type")
    token_requester_principal_name: str = Field(description="who created it: name")
    issue_timestamp: int = Field(description="when it was issued (wall clock, ms)")
    expiry_timestamp: int = Field(description="when it expires unless renewed")
    max_timestamp: int = Field(description="no renewal goes past this")
    token_id: str = Field(description="its id")
    hmac: str = Field(description="its HMAC, base64")
    renewers: list[PrincipalOut] = Field(description="who may renew it besides its owner")


class DescribeDelegationTokenOut(RefusalFields):
    """GET /v1/delegation-tokens (Kafka's DescribeDelegationTokenResponse)."""

    model_config = example(
        {
            **NONE,
            "rule": None,
            "throttleTimeMs": 0,
            "tokens": [
                {
                    "principalType": "User",
                    "principalName": "alice",
                    "tokenRequesterPrincipalType": "User",
                    "tokenRequesterPrincipalName": "token/ops",
                    "issueTimestamp": 1764871200000,
                    "expiryTimestamp": 1764957600000,
                    "maxTimestamp": 1764957600000,
                    "tokenId": TOKEN_ID_EXAMPLE,
                    "hmac": HMAC_EXAMPLE,
                    "renewers": [{"principalType": "User", "principalName": "token/ops"}],
                }
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    tokens: list[DescribedTokenOut] = Field(description="the tokens the caller may see")
