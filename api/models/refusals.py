"""GET /v1/refusals: what the active controller refused lately, by rule
(controller/refusals.py keeps them; controller/rules.py names the rules)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from controller.refusals import Refusal

from .common import ResponseModel, example

_FENCED = {
    "timeMs": 1796359920000,
    "api": "AlterPartition",
    "rule": "kip-841.replica-fenced",
    "errorCode": 107,
    "errorName": "INELIGIBLE_REPLICA",
    "errorMessage": "broker 3 is fenced",
    "brokerId": 1,
    "topic": "orders",
    "partition": 0,
    "resource": None,
}


class RefusalOut(ResponseModel):
    """One refused request, or one refused entry of a request."""

    model_config = example(_FENCED)

    time_ms: int = Field(description="when the answer was given (wall clock, epoch ms)")
    api: str = Field(description='Kafka\'s request name, e.g. "AlterPartition"')
    rule: str | None = Field(description="the check that refused (docs/rules.md)")
    error_code: int = Field(description="Kafka's error code")
    error_name: str = Field(description="Kafka's error name")
    error_message: str | None = Field(description="what went wrong, for people")
    broker_id: int | None = Field(description="the broker that sent the request, if a broker did")
    topic: str | None = Field(description="the topic the refused entry names")
    partition: int | None = Field(description="the partition the refused entry names")
    resource: str | None = Field(
        description='what else the entry names: a config resource ("2:orders", type:name), a '
        'quota entity ("user=alice"), an ACL entry ("#0", its index in the request)'
    )


class RefusalsOut(ResponseModel):
    """The newest refusals first, as the active controller keeps them (the last
    10,000, and the last 16 of each broker, topic and partition)."""

    model_config = example({"noted": 42, "refusals": [_FENCED]})

    noted: int = Field(description="refusals this controller noted since it became active")
    refusals: list[RefusalOut] = Field(description="newest first")


def refusal_obj(r: Refusal) -> dict[str, Any]:
    """``RefusalOut`` as JSON, built without a model per entry."""
    return {
        "timeMs": r.time_ms,
        "api": r.api,
        "rule": r.rule,
        "errorCode": int(r.error),
        "errorName": r.error.name,
        "errorMessage": r.message,
        "brokerId": r.broker_id,
        "topic": r.topic,
        "partition": r.partition,
        "resource": r.resource,
    }
