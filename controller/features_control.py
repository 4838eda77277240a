"""UpdateFeatures for ``metadata.version`` (Kafka's ``FeatureControlManager``):
upgrades only, and only to a level every registered broker supports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from metadata_records.errors import Errors
from metadata_records.features import (
    BOOTSTRAP_METADATA_VERSION,
    MAX_METADATA_VERSION,
    METADATA_VERSION,
    MIN_METADATA_VERSION,
)
from metadata_records.records import FeatureLevelRecord, Record

from .messages import ControllerResult, UpdateFeaturesRequest, UpdateFeaturesResponse

if TYPE_CHECKING:
    from metadata_records.delta import ImageDelta

    from .controller import Controller


def bootstrap_records(
    view: ImageDelta, metadata_version: int = BOOTSTRAP_METADATA_VERSION
) -> list[Record]:
    """What the first active controller writes into an empty log."""
    if view.feature(METADATA_VERSION, 0) != 0:
        return []
    return [FeatureLevelRecord(name=METADATA_VERSION, feature_level=metadata_version)]


class FeatureControlManager:
    def __init__(self, controller: Controller) -> None:
        self.c = controller

    def update_features(self, req: UpdateFeaturesRequest, now_ms: int) -> ControllerResult:
        view = self.c.view

        def fail(message: str) -> ControllerResult:
            return ControllerResult(
                (),
                UpdateFeaturesResponse(
                    Errors.INVALID_UPDATE_VERSION,
                    f"Invalid update version {req.level} for feature {req.name}. {message}",
                ),
            )

        if req.name != METADATA_VERSION:
            return fail(
                f"The controller does not support the feature; only {METADATA_VERSION} is known."
            )
        if not MIN_METADATA_VERSION <= req.level <= MAX_METADATA_VERSION:
            return fail(
                f"The controller only supports versions {MIN_METADATA_VERSION}-{MAX_METADATA_VERSION}."
            )
        current = view.metadata_version
        if req.level < current:
            return fail(f"Can't downgrade from {current}; metadata.version can only be upgraded.")
        if req.level == current:
            return ControllerResult((), UpdateFeaturesResponse(Errors.NONE))
        for reg in view.brokers():
            ranges = [f for f in reg.features if f.name == METADATA_VERSION]
            low, high = (
                (ranges[0].min_supported_version, ranges[0].max_supported_version)
                if ranges
                else (1, 1)
            )
            if not low <= req.level <= high:
                return fail(f"Broker {reg.broker_id} only supports versions {low}-{high}.")
        record = FeatureLevelRecord(name=METADATA_VERSION, feature_level=req.level)
        return ControllerResult((record,), UpdateFeaturesResponse(Errors.NONE))
