"""Topic, broker and cluster configs: IncrementalAlterConfigs, and the answer of
GET /v1/configs/..., resolved with its synonyms as Kafka describes them.
"""

from __future__ import annotations

from pydantic import Field

from controller import messages as m
from metadata_records import limits

from .common import (
    ACCEPTED,
    Int8,
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

# ---------------------------------------------------------------- IncrementalAlterConfigs


class AlterableConfig(RequestModel):
    """One change to one config."""

    name: Name = Field(description='the config, e.g. "retention.ms"')
    config_operation: Int8 = Field(
        0, description="0 = SET, 1 = DELETE, 2 = APPEND, 3 = SUBTRACT (LIST configs only)"
    )
    value: bounded_str(limits.MAX_CONFIG_VALUE_LENGTH) | None = Field(
        None, description="the value (SET), or the comma-separated elements (APPEND, SUBTRACT)"
    )


class AlterConfigsResource(RequestModel):
    """The changes to one resource's configs: all of them are written, or none."""

    resource_type: Int8 = Field(description="2 = TOPIC, 4 = BROKER")
    resource_name: bounded_str(limits.MAX_NAME_LENGTH) = Field(
        description='a topic; a broker id, or "" for the cluster-wide default'
    )
    configs: bounded_list(AlterableConfig, limits.MAX_TOPIC_CONFIGS) = Field(
        description="the changes"
    )


class IncrementalAlterConfigsRequest(RequestModel):
    """POST /v1/configs (Kafka's IncrementalAlterConfigsRequest)."""

    model_config = example(
        {
            "resources": [
                {
                    "resourceType": 2,
                    "resourceName": "orders",
                    "configs": [
                        {"name": "retention.ms", "configOperation": 0, "value": "86400000"},
                        {"name": "cleanup.policy", "configOperation": 2, "value": "compact"},
                    ],
                },
                {
                    "resourceType": 4,
                    "resourceName": "",
                    "configs": [
                        {
                            "name": "unclean.leader.election.enable",
                            "configOperation": 0,
                            "value": "false",
                        }
                    ],
                },
            ],
            "validateOnly": False,
        }
    )

    resources: bounded_list(AlterConfigsResource, limits.MAX_CONFIG_RESOURCES) = Field(
        description="the resources, each decided on its own"
    )
    validate_only: StrictBool = Field(
        False, description="true: every check of a real request, the same answers, nothing written"
    )

    def to_message(self) -> m.IncrementalAlterConfigsRequest:
        return m.IncrementalAlterConfigsRequest(
            resources=tuple(
                m.AlterConfigsResource(
                    r.resource_type,
                    r.resource_name,
                    tuple(
                        m.AlterableConfig(c.name, c.config_operation, c.value) for c in r.configs
                    ),
                )
                for r in self.resources
            ),
            validate_only=self.validate_only,
        )


class AlterConfigsResourceResult(RefusalFields):
    """One resource's outcome (INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST)."""

    resource_type: int = Field(description="2 = TOPIC, 4 = BROKER")
    resource_name: str = Field(description="the resource")


class IncrementalAlterConfigsResponse(RefusalFields):
    """Each resource's outcome, in the order each first appears in the request."""

    model_config = example(
        {
            **ACCEPTED,
            "throttleTimeMs": 0,
            "responses": [
                {**ACCEPTED, "resourceType": 2, "resourceName": "orders"},
                {
                    "errorCode": 40,
                    "errorName": "INVALID_CONFIG",
                    "errorMessage": "Invalid value yes for configuration "
                    "unclean.leader.election.enable: Expected value to be either true or false",
                    "rule": "config.value-invalid",
                    "resourceType": 4,
                    "resourceName": "",
                },
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    responses: list[AlterConfigsResourceResult] = Field(description="by resource")

    @classmethod
    def from_message(cls, r: m.IncrementalAlterConfigsResponse) -> IncrementalAlterConfigsResponse:
        return cls(
            **refusal_fields(r),
            responses=[
                AlterConfigsResourceResult(
                    **refusal_fields(x),
                    resource_type=x.resource_type,
                    resource_name=x.resource_name,
                )
                for x in r.responses
            ],
        )


# ---------------------------------------------------------------- reads: describe configs


class ConfigSynonymOut(ResponseModel):
    """A level that sets the config, the effective one first."""

    name: str = Field(
        description="the name at that level (a broker synonym, e.g. log.retention.hours)"
    )
    value: str | None = Field(
        description="its value there (hours and minutes in milliseconds); null for a "
        "sensitive config, whoever asks"
    )
    source: int = Field(description="Kafka's ConfigSource id")
    source_name: str = Field(description='e.g. "DYNAMIC_DEFAULT_BROKER_CONFIG"')


class DescribedConfigOut(ResponseModel):
    """One config's effective value (Kafka's DescribeConfigsResourceResult)."""

    name: str = Field(description="the config")
    value: str | None = Field(
        description="its effective value; null for a sensitive config (isSensitive), whoever asks"
    )
    read_only: bool = Field(description="true: not dynamically updatable")
    config_source: int = Field(
        description="where the value comes from: 1 TOPIC_CONFIG, 2 DYNAMIC_BROKER_CONFIG, "
        "3 DYNAMIC_DEFAULT_BROKER_CONFIG, 5 DEFAULT_CONFIG (Kafka's ConfigSource)"
    )
    config_source_name: str = Field(description='e.g. "TOPIC_CONFIG"')
    is_sensitive: bool = Field(
        description="true for a PASSWORD (e.g. ssl.keystore.password, sasl.jaas.config, also "
        "per listener: listener.name.<l>.ssl.keystore.password) and for a config of unknown "
        "type (a custom broker config), as Kafka: its value and its synonyms' are null to "
        "every role, admin too"
    )
    config_type: int = Field(description="Kafka's ConfigType id: 1 BOOLEAN, 2 STRING, 3 INT, ...")
    config_type_name: str = Field(description='e.g. "LONG"; "UNKNOWN" for a custom broker config')
    documentation: str = Field(description="what it does")
    synonyms: list[ConfigSynonymOut] = Field(
        description="with includeSynonyms=true: every level that sets it, the effective first"
    )


class DescribeConfigsOut(ResponseModel):
    """GET /v1/configs/...: a resource's configs, resolved as Kafka does."""

    model_config = example(
        {
            "resourceType": 2,
            "resourceName": "orders",
            "configs": [
                {
                    "name": "retention.ms",
                    "value": "86400000",
                    "readOnly": False,
                    "configSource": 3,
                    "configSourceName": "DYNAMIC_DEFAULT_BROKER_CONFIG",
                    "isSensitive": False,
                    "configType": 5,
                    "configTypeName": "LONG",
                    "documentation": "time a segment is kept (-1: no limit)",
                    "synonyms": [
                        {
                            "name": "log.retention.hours",
                            "value": "86400000",
                            "source": 3,
                            "sourceName": "DYNAMIC_DEFAULT_BROKER_CONFIG",
                        },
                        {
                            "name": "retention.ms",
                            "value": "604800000",
                            "source": 5,
                            "sourceName": "DEFAULT_CONFIG",
                        },
                    ],
                }
            ],
        }
    )

    resource_type: int = Field(description="2 = TOPIC, 4 = BROKER")
    resource_name: str = Field(
        description='the topic; the broker id, or "" for the cluster default'
    )
    configs: list[DescribedConfigOut] = Field(description="by name")
