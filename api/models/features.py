"""Finalized feature levels: UpdateFeatures (one feature at a time)."""

from __future__ import annotations

from pydantic import Field

from controller import messages as m

from .common import (
    ACCEPTED,
    Int8,
    Int16,
    RefusalFields,
    RequestModel,
    ResponseModel,
    StrictBool,
    StrictStr,
    ThrottleTimeMs,
    example,
    refusal_fields,
)


class UpdateFeaturesRequest(RequestModel):
    """POST /v1/features: finalize ``name`` at ``level`` (Kafka's UpdateFeatures
    for one feature: ``upgradeType`` and ``validateOnly`` as in its v1+)."""

    model_config = example({"name": "metadata.version", "level": 12, "upgradeType": 1})

    name: StrictStr = Field(examples=["metadata.version"], description="the feature")
    level: Int16 = Field(
        description="Kafka's feature level (metadata.version: 6 = 3.3-IV2 ... 12 = 3.6-IV0; "
        "eligible.leader.replicas.version: 0 off, 1 on, KIP-966); 0 asks to remove the feature"
    )
    upgrade_type: Int8 = Field(
        m.UPGRADE,
        description="1 upgrade (a lower level is refused), 2 safe downgrade, 3 unsafe "
        "downgrade; any other value is refused (INVALID_UPDATE_VERSION)",
    )
    validate_only: StrictBool = Field(
        False, description="true: run every check, answer, write nothing"
    )

    def to_message(self) -> m.UpdateFeaturesRequest:
        return m.UpdateFeaturesRequest(
            name=self.name,
            level=self.level,
            upgrade_type=self.upgrade_type,
            validate_only=self.validate_only,
        )


class UpdateFeaturesResponse(RefusalFields):
    """The update's outcome (INVALID_UPDATE_VERSION for a refused level)."""

    model_config = example({**ACCEPTED, "throttleTimeMs": 0})

    throttle_time_ms: ThrottleTimeMs = 0

    @classmethod
    def from_message(cls, r: m.UpdateFeaturesResponse) -> UpdateFeaturesResponse:
        return cls(**refusal_fields(r))


class FeatureOut(ResponseModel):
    """One feature: what this controller supports and where it is finalized."""

    name: str = Field(description="the feature")
    supported_min_version: int = Field(description="the lowest level this controller supports")
    supported_max_version: int = Field(description="the highest level this controller supports")
    finalized_version_level: int = Field(
        description="the level the cluster runs at (0: never finalized, or off)"
    )
    supported_min_version_name: str = Field(
        description='as kafka-features prints it: metadata.version by release ("3.3-IV2"), '
        "other features by number"
    )
    supported_max_version_name: str = Field(description="likewise")
    finalized_version_level_name: str = Field(description="likewise")


class FeaturesOut(ResponseModel):
    """GET /v1/features (Kafka's DescribeFeatures, what ``kafka-features
    describe`` prints): ``kraft.version`` is 1, a dynamic voter set (KIP-853),
    once the first leader has written the voters into the log."""

    model_config = example(
        {
            "finalizedFeaturesEpoch": 41,
            "features": [
                {
                    "name": "eligible.leader.replicas.version",
                    "supportedMinVersion": 0,
                    "supportedMaxVersion": 1,
                    "finalizedVersionLevel": 0,
                    "supportedMinVersionName": "0",
                    "supportedMaxVersionName": "1",
                    "finalizedVersionLevelName": "0",
                },
                {
                    "name": "kraft.version",
                    "supportedMinVersion": 0,
                    "supportedMaxVersion": 1,
                    "finalizedVersionLevel": 1,
                    "supportedMinVersionName": "0",
                    "supportedMaxVersionName": "1",
                    "finalizedVersionLevelName": "1",
                },
                {
                    "name": "metadata.version",
                    "supportedMinVersion": 6,
                    "supportedMaxVersion": 12,
                    "finalizedVersionLevel": 12,
                    "supportedMinVersionName": "3.3-IV2",
                    "supportedMaxVersionName": "3.6-IV0",
                    "finalizedVersionLevelName": "3.6-IV0",
                },
            ],
        }
    )

    finalized_features_epoch: int = Field(
        description="the offset of the image read (Kafka: the committed offset)"
    )
    features: list[FeatureOut] = Field(description="by name")
