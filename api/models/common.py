"""What every body of the HTTP contract is built from: duplicate-key refusal,
Kafka's strict range-checked scalar types, the request and response bases, the
error bodies of non-200 answers, and the one example cluster the examples share.

The other modules of ``api.models`` import their types from here, so an
``int32`` or a ``brokerId`` is checked the same way in every body
(``api/models/__init__.py`` states the input rules).
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any

import jiter
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from metadata_records import limits
from metadata_records.errors import Errors
from metadata_records.uuids import InvalidUuid, parse_uuid

# ---------------------------------------------------------------- JSON


def duplicate_key_problem(body: bytes) -> str | None:
    """What is wrong if ``body`` repeats a key in one object (or is not JSON),
    else None. Duplicates are refused, not resolved "last wins": a client that
    sends two values for one field meant one of them, and which one is not ours
    to guess. jiter finds them at about orjson's parsing speed (decisions.md)."""
    try:
        jiter.from_json(body, catch_duplicate_keys=True, cache_mode="keys")
    except ValueError as e:
        text = str(e)
        if text.startswith("Detected duplicate key"):
            return f"body: {text}; send each field once"
    return None  # not JSON: pydantic names the problem


# ---------------------------------------------------------------- Kafka's scalar types

INT_KINDS: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
}


def _kafka_int(kind: str) -> Any:
    low, high = INT_KINDS[kind]
    return Annotated[int, Field(strict=True, ge=low, le=high, json_schema_extra={"format": kind})]


Int8 = _kafka_int("int8")
Int16 = _kafka_int("int16")
Int32 = _kafka_int("int32")
Int64 = _kafka_int("int64")
UInt16 = _kafka_int("uint16")
StrictStr = Annotated[str, Field(strict=True)]
StrictBool = Annotated[bool, Field(strict=True)]


def bounded_str(max_length: int) -> Any:
    """A strict string of at most ``max_length`` characters (a field's type)."""
    return Annotated[str, Field(strict=True, max_length=max_length)]


def bounded_list(item: Any, max_length: int) -> Any:
    """A list of at most ``max_length`` ``item``s (a field's type)."""
    return Annotated[list[item], Field(max_length=max_length)]


Name = bounded_str(limits.MAX_NAME_LENGTH)


def _broker_id(value: int) -> int:
    # Kafka refuses a negative node id (broker.id >= 0); int32 is checked first.
    if value < limits.BROKER_ID_MIN:
        raise PydanticCustomError(
            "broker_id",
            "{value} is not a broker id: broker ids are in [{low}, {high}]",
            {"value": value, "low": limits.BROKER_ID_MIN, "high": limits.BROKER_ID_MAX},
        )
    return value


BrokerId = Annotated[
    int,
    Field(strict=True, ge=-(2**31), le=2**31 - 1, json_schema_extra={"format": "int32"}),
    AfterValidator(_broker_id),
]


def _uuid(value: str) -> str:
    try:
        return parse_uuid(value)
    except InvalidUuid as e:
        raise PydanticCustomError("uuid", "{reason}", {"reason": str(e)}) from None


Uuid = Annotated[
    str,
    Field(
        strict=True,
        json_schema_extra={
            "format": "kafka-uuid",
            # The shape only (the value is checked by parse_uuid): lets schema-driven
            # clients and fuzzers produce acceptable ids.
            "pattern": "^([A-Za-z0-9_-]{21}[AQgw]|[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})$",
            "description": "Kafka UUID: 22 characters of base64url (the standard "
            "36-character form is accepted on input)",
            "examples": ["fPZv1VBsRFmnlRvmGcOW9w"],
        },
    ),
    AfterValidator(_uuid),
]


def example(*values: dict[str, Any]) -> ConfigDict:
    """A model's examples for the OpenAPI document, as they travel (camelCase).
    Nested models without examples of their own get theirs from these
    (``api/openapi_doc.py``), so one realistic cluster runs through them all:
    cluster ``MkU3OEVBNTcwNTJENDM2Qk``, brokers 1 and 2 registered at offsets 17
    and 21 (their epochs), topic ``orders`` replicated on brokers 1-3."""
    return ConfigDict(json_schema_extra={"examples": list(values)})


CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"
ORDERS_ID = "Y2deagDaQ4yIul6RjJr5IA"
NONE = {"errorCode": 0, "errorName": "NONE", "errorMessage": None}
# A controller's answer that refused nothing (RefusalFields).
ACCEPTED = {**NONE, "rule": None}
# Broker 1's listener and features, as its registration example sends them.
LISTENER_EXAMPLE = {
    "name": "PLAINTEXT",
    "host": "broker-1.kafka",
    "port": 9092,
    "securityProtocol": 0,
}
FEATURES_EXAMPLE = {"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}

ThrottleTimeMs = Annotated[
    int,
    Field(description="Kafka's throttle time: always 0 here (an overloaded node answers 429)"),
]


class RequestModel(BaseModel):
    """Input: camelCase names only, unknown fields ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        extra="ignore",
        frozen=True,
    )


class ResponseModel(BaseModel):
    """Output: built from controller responses, serialised with camelCase names."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
        # Every field is in every answer: required in the document, so that
        # generated clients type them as present (decisions.md 84).
        json_schema_serialization_defaults_required=True,
    )

    def to_json_obj(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class ErrorFields(ResponseModel):
    error_code: int = Field(description="Kafka's error code (0 = NONE)")
    error_name: str = Field(description='Kafka\'s error name, e.g. "NONE", "STALE_BROKER_EPOCH"')
    error_message: str | None = Field(None, description="what went wrong, for people")


class RefusalFields(ErrorFields):
    """The error fields of what the controller decides (the whole request, or
    one entry of it), with the check that refused it."""

    rule: str | None = Field(
        None,
        description="the check that refused, a stable id of the rules table (docs/rules.md), "
        'e.g. "kip-841.replica-fenced"; null when nothing was refused',
        examples=[None, "kip-841.replica-fenced", "kip-380.broker-epoch-mismatch"],
    )


def error_fields(error: Errors, message: str | None = None) -> dict[str, Any]:
    return {"error_code": int(error), "error_name": error.name, "error_message": message}


def refusal_fields(r: Any) -> dict[str, Any]:
    """A controller answer's (or entry's) ``error``, ``error_message`` and
    ``rule`` as ``RefusalFields`` takes them."""
    return {
        "error_code": int(r.error),
        "error_name": r.error.name,
        "error_message": r.error_message,
        "rule": r.rule,
    }


def error_obj(error: Errors, message: str | None = None) -> dict[str, Any]:
    """``error_fields`` as an answer's JSON shows them."""
    return {"errorCode": int(error), "errorName": error.name, "errorMessage": message}


class ErrorResponse(ErrorFields):
    """The body of every non-200 answer (400, 401, 403, 404, 413, ...)."""

    model_config = example(
        {
            "errorCode": 42,
            "errorName": "INVALID_REQUEST",
            "errorMessage": 'brokerEpoch: expected an integer, got string "17"',
        }
    )


class RetryResponse(ErrorFields):
    """429 and 503: nothing was decided, or the outcome is unknown; retry later."""

    model_config = example(
        {
            "errorCode": 41,
            "errorName": "NOT_CONTROLLER",
            "errorMessage": "no active controller is known yet (an election is under way)",
            "retryAfterMs": 250,
        }
    )

    retry_after_ms: int = Field(
        description="when to retry, in milliseconds (the Retry-After header says the same "
        "in whole seconds, rounded up, as HTTP has it)",
    )


class NotControllerResponse(ErrorFields):
    """307: this node is not the active controller; repeat the request at ``leaderUrl``."""

    model_config = example(
        {
            "errorCode": 41,
            "errorName": "NOT_CONTROLLER",
            "errorMessage": "node 0 is not the active controller; node 1 is",
            "leaderId": 1,
            "leaderUrl": "http://metaquorum-1.metaquorum:8080",
        }
    )

    leader_id: int | None = Field(None, description="the active controller's node id")
    leader_url: str | None = Field(None, description="the active controller's HTTP URL")


class OffsetTooOldResponse(ErrorFields):
    """410: ``fromOffset`` is below the oldest retained record; load /v1/snapshot first."""

    model_config = example(
        {
            "errorCode": 1,
            "errorName": "OFFSET_OUT_OF_RANGE",
            "errorMessage": "offset 12 is older than the oldest retained offset 50000; load "
            "/v1/snapshot, then follow the log from its nextOffset",
            "oldestOffset": 50000,
        }
    )

    oldest_offset: int = Field(description="the oldest offset this node still serves")


def decode_base64(value: str) -> bytes:
    """A request's base64 field (standard alphabet, with padding) as bytes;
    a pydantic error naming what is wrong otherwise."""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise PydanticCustomError(
            "base64", "not base64 (standard alphabet, with padding)"
        ) from None
