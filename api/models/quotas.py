"""Client quotas: AlterClientQuotas and DescribeClientQuotas, by entity
(user, client-id, ip; a null name is the type's default entity).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from controller import messages as m
from metadata_records import limits

from .common import (
    ACCEPTED,
    NONE,
    ErrorFields,
    Name,
    RefusalFields,
    RequestModel,
    ResponseModel,
    StrictBool,
    ThrottleTimeMs,
    bounded_list,
    bounded_str,
    example,
    refusal_fields,
)

FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]
EntityName = bounded_str(limits.MAX_CONFIG_VALUE_LENGTH)


class QuotaEntityComponent(RequestModel):
    """One component of a quota entity (Kafka's EntityData)."""

    entity_type: Name = Field(description='"user", "client-id" or "ip"')
    entity_name: EntityName | None = Field(
        None, description="the name; null for the type's default entity"
    )


class ClientQuotaOpIn(RequestModel):
    """Set a key, or remove it (Kafka's OpData)."""

    key: Name = Field(description='e.g. "producer_byte_rate"')
    value: FiniteFloat = Field(0.0, description="the value to set (ignored on removal)")
    remove: StrictBool = Field(False, description="true: remove the key")


class ClientQuotaEntryIn(RequestModel):
    """One entity's changes: all of them are written, or none."""

    entity: bounded_list(QuotaEntityComponent, limits.MAX_QUOTA_COMPONENTS) = Field(
        description="user, client-id or both; or ip alone"
    )
    ops: bounded_list(ClientQuotaOpIn, limits.MAX_QUOTA_OPS) = Field(description="the changes")


class AlterClientQuotasRequest(RequestModel):
    """POST /v1/client-quotas (Kafka's AlterClientQuotasRequest)."""

    model_config = example(
        {
            "entries": [
                {
                    "entity": [
                        {"entityType": "user", "entityName": "alice"},
                        {"entityType": "client-id", "entityName": None},
                    ],
                    "ops": [
                        {"key": "producer_byte_rate", "value": 1048576, "remove": False},
                        {"key": "request_percentage", "remove": True},
                    ],
                },
                {
                    "entity": [{"entityType": "ip", "entityName": None}],
                    "ops": [{"key": "connection_creation_rate", "value": 50}],
                },
            ],
            "validateOnly": False,
        }
    )

    entries: bounded_list(ClientQuotaEntryIn, limits.MAX_QUOTA_ENTRIES) = Field(
        description="the entities, each decided on its own"
    )
    validate_only: StrictBool = Field(
        False, description="true: every check of a real request, the same answers, nothing written"
    )

    def to_message(self) -> m.AlterClientQuotasRequest:
        return m.AlterClientQuotasRequest(
            entries=tuple(
                m.ClientQuotaAlteration(
                    tuple((c.entity_type, c.entity_name) for c in e.entity),
                    tuple(m.ClientQuotaOp(o.key, o.value, o.remove) for o in e.ops),
                )
                for e in self.entries
            ),
            validate_only=self.validate_only,
        )


class QuotaEntityComponentOut(ResponseModel):
    """One component of a quota entity."""

    entity_type: str = Field(description='"user", "client-id" or "ip"')
    entity_name: str | None = Field(description="the name; null for the default entity")


def _entity_out(entity: tuple[tuple[str, str | None], ...]) -> list[QuotaEntityComponentOut]:
    return [QuotaEntityComponentOut(entity_type=t, entity_name=n) for t, n in entity]


class AlterClientQuotasEntryResult(RefusalFields):
    """One entity's outcome (INVALID_REQUEST, POLICY_VIOLATION)."""

    entity: list[QuotaEntityComponentOut] = Field(description="the entity, as sent")


class AlterClientQuotasResponse(RefusalFields):
    """Each entity's outcome, in the order each first appears in the request."""

    model_config = example(
        {
            **ACCEPTED,
            "throttleTimeMs": 0,
            "entries": [
                {**ACCEPTED, "entity": [{"entityType": "user", "entityName": "alice"}]},
                {
                    "errorCode": 42,
                    "errorName": "INVALID_REQUEST",
                    "errorMessage": "producer_byte_rate cannot be a fractional value.",
                    "rule": "quota.value-invalid",
                    "entity": [{"entityType": "client-id", "entityName": "app"}],
                },
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    entries: list[AlterClientQuotasEntryResult] = Field(description="by entity")

    @classmethod
    def from_message(cls, r: m.AlterClientQuotasResponse) -> AlterClientQuotasResponse:
        return cls(
            **refusal_fields(r),
            entries=[
                AlterClientQuotasEntryResult(**refusal_fields(e), entity=_entity_out(e.entity))
                for e in r.entries
            ],
        )


class QuotaValueOut(ResponseModel):
    """One quota of an entity."""

    key: str = Field(description="the quota key")
    value: float = Field(description="its value")


class DescribedClientQuotaOut(ResponseModel):
    """One entity the filter matched, with its quotas."""

    entity: list[QuotaEntityComponentOut] = Field(description="user, client-id, ip order")
    values: list[QuotaValueOut] = Field(description="by key")


class DescribeClientQuotasOut(ErrorFields):
    """GET /v1/client-quotas: the matching entities (Kafka's
    DescribeClientQuotasResponse), from the serving node's image."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "entries": [
                {
                    "entity": [
                        {"entityType": "user", "entityName": "alice"},
                        {"entityType": "client-id", "entityName": None},
                    ],
                    "values": [{"key": "producer_byte_rate", "value": 1048576.0}],
                }
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    entries: list[DescribedClientQuotaOut] = Field(description="sorted by entity, defaults first")
