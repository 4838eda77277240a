"""UpdateFeatures (Kafka's ``FeatureControlManager.updateFeatures`` and
``updateFeature``), for the features metaquorum finalizes: ``metadata.version``
and ``eligible.leader.replicas.version`` (KIP-966, 0 or 1; 1 needs the
metadata.version features.ELR_MIN_METADATA_VERSION, and that level cannot be
left while ELR is on, as Kafka's feature dependencies).

Kafka's checks, in its order, each answering INVALID_UPDATE_VERSION:
the upgrade type is known; the level is not negative; this controller and
every registered broker support it; a lower level needs a downgrade type and
a higher one the upgrade type; and for ``metadata.version`` a downgrade across
a level that changed the metadata format is refused (an unsafe one too: Kafka
does not implement it yet). Any other feature is unknown to this controller:
a level above 0 is not supported, and level 0 (Kafka's "remove the feature")
finds no such feature. An update to the current level passes every check and
writes its record, as Kafka's does. ``validateOnly`` runs the checks and
writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from metadata_records.delta import ImageDelta
from metadata_records.errors import Errors
from metadata_records.features import (
    BOOTSTRAP_METADATA_VERSION,
    ELR_VERSION,
    LEGACY_LEVELS,
    METADATA_VERSION,
    SUPPORTED_FEATURES,
    feature_dependency_problem,
    metadata_changed,
)
from metadata_records.records import FeatureLevelRecord, Record

from .messages import (
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    ControllerResult,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from .rejected import Rejected

# Kafka's QuorumFeatures.DISABLED: what a feature nobody names supports.
_DISABLED = (0, 0)


def bootstrap_records(
    view: ImageDelta, metadata_version: int = BOOTSTRAP_METADATA_VERSION
) -> list[Record]:
    """What the first active controller writes into an empty log; over a log
    of metaquorum's pre-Kafka levels (``LEGACY_LEVELS``), the Kafka level that
    follows its rules, so the cluster keeps serving the brokers it had."""
    level = view.feature(METADATA_VERSION, 0)
    if level in LEGACY_LEVELS:
        return [FeatureLevelRecord(name=METADATA_VERSION, feature_level=LEGACY_LEVELS[level])]
    if level != 0:
        return []
    return [FeatureLevelRecord(name=METADATA_VERSION, feature_level=metadata_version)]


def _version_range(low: int, high: int) -> str:
    """Kafka's VersionRange.toString: "6-12", or "6" when both ends meet."""
    return str(low) if low == high else f"{low}-{high}"


def _not_supported(what: str, level: int, supported: tuple[int, int]) -> str | None:
    """Kafka's QuorumFeatures.reasonNotSupported."""
    low, high = supported
    if low <= level <= high:
        return None
    if high == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {_version_range(low, high)}"


class FeatureControlManager:
    def __init__(self, view: Callable[[], ImageDelta]) -> None:
        self._view = view  # the controller's view (committed image + pending records)

    def update_features(self, req: UpdateFeaturesRequest, now_ms: int) -> ControllerResult:
        try:
            self._check(req)
        except Rejected as r:
            # QuorumController.updateFeatures puts the one failing feature's
            # reason under a sentence that says every update failed.
            return ControllerResult(
                (),
                UpdateFeaturesResponse(
                    r.code,
                    "The update failed for all features since the following feature had an "
                    f"error: {r.message}",
                    r.rule,
                ),
            )
        if req.validate_only:
            return ControllerResult((), UpdateFeaturesResponse(Errors.NONE))
        record = FeatureLevelRecord(name=req.name, feature_level=req.level)
        return ControllerResult((record,), UpdateFeaturesResponse(Errors.NONE))

    def _check(self, req: UpdateFeaturesRequest) -> None:
        """Kafka's updateFeature: Rejected (INVALID_UPDATE_VERSION) if the
        update is refused."""
        name, level = req.name, req.level
        view = self._view()

        def invalid(reason: str, rule: str) -> Rejected:
            return Rejected(
                Errors.INVALID_UPDATE_VERSION,
                f"Invalid update version {level} for feature {name}. {reason}",
                rule,
            )

        if req.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            raise invalid(
                "The controller does not support the given upgrade type.",
                "feature.upgrade-type-unknown",
            )
        current = view.feature(name, 0)
        if name == METADATA_VERSION:
            current = view.metadata_version
        if level < 0:
            raise invalid("A feature version cannot be less than 0.", "feature.level-negative")
        reason = self._not_supported_anywhere(name, level)
        if reason is not None:
            raise invalid(reason, "feature.level-unsupported")
        if level < current and req.upgrade_type == UPGRADE:
            raise invalid(
                "Can't downgrade the version of this feature without setting the upgrade type "
                "to either safe or unsafe downgrade.",
                "feature.downgrade-without-type",
            )
        if level > current and req.upgrade_type != UPGRADE:
            raise invalid("Can't downgrade to a newer version.", "feature.downgrade-to-newer")
        if name == ELR_VERSION:
            problem = feature_dependency_problem(name, level, view.metadata_version)
            if problem is not None:
                raise invalid(problem, "kip-966.feature-dependency")
            return
        if name != METADATA_VERSION:
            # Only level 0 of an unknown feature gets here (the feature is
            # supported nowhere above it); Kafka's Features.featureFromName.
            raise invalid(f"Feature {name} not found.", "feature.unknown")
        elr = view.feature(ELR_VERSION, 0)
        problem = feature_dependency_problem(ELR_VERSION, elr, level)
        if problem is not None:
            raise invalid(
                f"{ELR_VERSION} is at level {elr}: {problem}.", "kip-966.feature-dependency"
            )
        self._check_metadata_version(current, level, req.upgrade_type)

    def _not_supported_anywhere(self, name: str, level: int) -> str | None:
        """Kafka's reasonNotSupported: this controller first, then every
        registered broker (fenced ones too), a feature it does not name
        counting as [0, 0]."""
        reason = _not_supported("The controller", level, SUPPORTED_FEATURES.get(name, _DISABLED))
        if reason is not None:
            return reason
        for reg in self._view().brokers():
            supported = next(
                (
                    (f.min_supported_version, f.max_supported_version)
                    for f in reg.features
                    if f.name == name
                ),
                _DISABLED,
            )
            reason = _not_supported(f"Broker {reg.broker_id}", level, supported)
            if reason is not None:
                return reason
        return None

    @staticmethod
    def _check_metadata_version(current: int, level: int, upgrade_type: int) -> None:
        """Kafka's updateMetadataVersion: a downgrade that crosses a level
        which changed the metadata format may lose data, and is Rejected."""
        if level >= current or not metadata_changed(current, level):
            return
        if upgrade_type == UNSAFE_DOWNGRADE:
            reason = "Unsafe metadata downgrade is not supported in this version."
        else:
            reason = (
                "Refusing to perform the requested downgrade because it might delete metadata "
                "information."
            )
        raise Rejected(
            Errors.INVALID_UPDATE_VERSION,
            f"Invalid metadata.version {level}. {reason}",
            "metadata-version.downgrade-lossy",
        )
