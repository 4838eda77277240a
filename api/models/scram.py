"""SCRAM credentials (KIP-554): AlterUserScramCredentials and
DescribeUserScramCredentials, by user.

An upsertion carries what Kafka's client sends: the salt it chose and the
salted password, ``Hi(password, salt, iterations)`` (metadata_records/scram.py),
both base64; never the password. No answer carries a salt or a key: a
credential is described by its mechanism and iterations only.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from controller import messages as m
from metadata_records import limits

from .common import (
    ACCEPTED,
    NONE,
    ErrorFields,
    Int8,
    Int32,
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

ScramUser = bounded_str(limits.MAX_SCRAM_USER_LENGTH)
MECHANISM_DOC = "Kafka's SCRAM mechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512"


def _base64(value: str) -> bytes:
    decoded = decode_base64(value)
    if len(decoded) > limits.MAX_SCRAM_BYTES:
        raise PydanticCustomError(
            "base64",
            "{n} bytes, more than {bound} (docs/limits.md)",
            {"n": len(decoded), "bound": limits.MAX_SCRAM_BYTES},
        )
    return decoded


Base64Bytes = Annotated[
    str,
    Field(strict=True, max_length=4 * limits.MAX_SCRAM_BYTES // 3 + 4),
    AfterValidator(_base64),
]


class ScramDeletionIn(RequestModel):
    """One credential to remove (Kafka's ScramCredentialDeletion)."""

    name: ScramUser = Field(description="the user")
    mechanism: Int8 = Field(description=MECHANISM_DOC)


class ScramUpsertionIn(RequestModel):
    """One credential to set (Kafka's ScramCredentialUpsertion)."""

    name: ScramUser = Field(description="the user")
    mechanism: Int8 = Field(description=MECHANISM_DOC)
    iterations: Int32 = Field(description="the iterations of Hi, in [4096, 16384]")
    salt: Base64Bytes = Field(description="the salt the client chose, base64")
    salted_password: Base64Bytes = Field(
        description="Hi(password, salt, iterations) (PBKDF2-HMAC of the mechanism's hash), "
        "base64; the controller derives the stored and server keys from it and keeps neither "
        "it nor the password"
    )


class AlterUserScramCredentialsRequest(RequestModel):
    """POST /v1/scram-credentials (Kafka's AlterUserScramCredentialsRequest)."""

    model_config = example(
        {
            "deletions": [{"name": "bob", "mechanism": 2}],
            "upsertions": [
                {
                    "name": "alice",
                    "mechanism": 1,
                    "iterations": 8192,
                    "salt": "MWViYWMzcDd2OGZzcWt6M3A5dnBzNGRjbDQ=",
                    "saltedPassword": "oRhmNqz3Kl7GI5T1ZffjMC/YSo+wRdqjypHitsygQv0=",
                }
            ],
        }
    )

    deletions: bounded_list(ScramDeletionIn, limits.MAX_SCRAM_ALTERATIONS) = Field(
        [], description="the credentials to remove"
    )
    upsertions: bounded_list(ScramUpsertionIn, limits.MAX_SCRAM_ALTERATIONS) = Field(
        [], description="the credentials to set"
    )

    def to_message(self) -> m.AlterUserScramCredentialsRequest:
        return m.AlterUserScramCredentialsRequest(
            deletions=tuple(m.ScramCredentialDeletion(d.name, d.mechanism) for d in self.deletions),
            upsertions=tuple(
                m.ScramCredentialUpsertion(
                    u.name, u.mechanism, u.iterations, u.salt, u.salted_password
                )
                for u in self.upsertions
            ),
        )


class AlterUserScramCredentialsResult(RefusalFields):
    """One user's outcome (UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM,
    RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNSUPPORTED_VERSION)."""

    user: str = Field(description="the user")


class AlterUserScramCredentialsResponse(RefusalFields):
    """One result per user: the deleted, then the upserted, then the refused
    (Kafka's order)."""

    model_config = example(
        {
            **ACCEPTED,
            "throttleTimeMs": 0,
            "results": [
                {**ACCEPTED, "user": "bob"},
                {**ACCEPTED, "user": "alice"},
                {
                    "errorCode": 93,
                    "errorName": "UNACCEPTABLE_CREDENTIAL",
                    "errorMessage": "Too few iterations",
                    "rule": "scram.iterations-too-few",
                    "user": "carol",
                },
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    results: list[AlterUserScramCredentialsResult] = Field(description="one per user")

    @classmethod
    def from_message(
        cls, r: m.AlterUserScramCredentialsResponse
    ) -> AlterUserScramCredentialsResponse:
        return cls(
            **refusal_fields(r),
            results=[
                AlterUserScramCredentialsResult(**refusal_fields(e), user=e.user) for e in r.results
            ],
        )


class CredentialInfoOut(ResponseModel):
    """One credential of a user: never its salt or keys."""

    mechanism: int = Field(description=MECHANISM_DOC)
    iterations: int = Field(description="its iterations")


class DescribedScramUserOut(ErrorFields):
    """One user (RESOURCE_NOT_FOUND: no credential; DUPLICATE_RESOURCE: named twice)."""

    user: str = Field(description="the user")
    credential_infos: list[CredentialInfoOut] = Field(description="by mechanism")


class DescribeUserScramCredentialsOut(ErrorFields):
    """GET /v1/scram-credentials (Kafka's DescribeUserScramCredentialsResponse),
    from the serving node's image."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "results": [
                {
                    **NONE,
                    "user": "alice",
                    "credentialInfos": [
                        {"mechanism": 1, "iterations": 4096},
                        {"mechanism": 2, "iterations": 8192},
                    ],
                },
                {
                    "errorCode": 91,
                    "errorName": "RESOURCE_NOT_FOUND",
                    "errorMessage": "Attempt to describe a user credential that does not "
                    "exist: bob",
                    "user": "bob",
                    "credentialInfos": [],
                },
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    results: list[DescribedScramUserOut] = Field(
        description="one per user: every user with a credential (sorted) when none is named, "
        "else the users named, in order"
    )
