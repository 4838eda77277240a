"""UpdateFeatures as Kafka's FeatureControlManager.updateFeatures / updateFeature
(FeatureControlManagerTest's scenarios), metadata.version at Kafka's levels."""

import pytest

from controller.messages import (
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    UpdateFeaturesRequest,
)
from metadata_records.errors import Errors
from metadata_records.records import FeatureLevelRecord, FeatureRange
from tests.harness import ControllerHarness

PREFIX = "The update failed for all features since the following feature had an error: "


def update(h, name, level, upgrade_type=UPGRADE, validate_only=False):
    return h.run(UpdateFeaturesRequest(name, level, upgrade_type, validate_only))


def refused(h, *args, **kw) -> str:
    """The reason an update was refused; asserts nothing was written."""
    before = h.image.next_offset
    resp = update(h, *args, **kw)
    assert resp.error is Errors.INVALID_UPDATE_VERSION
    assert resp.error_message.startswith(PREFIX)
    assert h.image.next_offset == before
    return resp.error_message.removeprefix(PREFIX)


def at(level: int, *brokers_ranges) -> ControllerHarness:
    h = ControllerHarness(metadata_version=level)
    for broker_id, (low, high) in enumerate(brokers_ranges, start=1):
        resp = h.register(broker_id, features=(FeatureRange("metadata.version", low, high),))
        assert resp.error is Errors.NONE, resp
    return h


def test_new_clusters_start_at_3_6_iv0():
    assert ControllerHarness().image.metadata_version == 12


def test_upgrade_writes_the_level_once_every_broker_supports_it():
    h = at(6, (6, 12), (6, 6))
    assert refused(h, "metadata.version", 12) == (
        "Invalid update version 12 for feature metadata.version. Broker 2 only supports versions 6"
    )
    h.register(2, generation=1, features=(FeatureRange("metadata.version", 6, 12),))
    resp = update(h, "metadata.version", 12)
    assert resp.error is Errors.NONE and resp.error_message is None
    assert h.last.records == (FeatureLevelRecord(name="metadata.version", feature_level=12),)
    assert h.image.metadata_version == 12
    # Now the controller writes 3.4-IV0's RegisterBrokerRecord (v2).
    h.register(3, features=(FeatureRange("metadata.version", 6, 12),))
    assert h.last.records[0].version == 2


def test_fenced_brokers_count_too():
    h = at(6, (6, 12), (6, 7))
    h.heartbeat(2, want_fence=True)
    assert h.image.brokers[2].fenced
    assert "Broker 2 only supports versions 6-7" in refused(h, "metadata.version", 8)


def test_the_current_level_passes_every_check_and_writes_its_record():
    h = at(12, (6, 12))
    resp = update(h, "metadata.version", 12)
    assert resp.error is Errors.NONE
    assert h.last.records == (FeatureLevelRecord(name="metadata.version", feature_level=12),)
    # ... under any upgrade type (it is neither lower nor higher).
    for kind in (SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        assert update(h, "metadata.version", 12, kind).error is Errors.NONE
    assert h.image.metadata_version == 12


def test_validate_only_checks_everything_and_writes_nothing():
    h = at(6, (6, 12))
    before = h.image.next_offset
    assert update(h, "metadata.version", 12, validate_only=True).error is Errors.NONE
    assert h.last.records == () and h.image.next_offset == before
    assert h.image.metadata_version == 6
    assert "only supports versions 6-12" in refused(h, "metadata.version", 13, validate_only=True)


@pytest.mark.parametrize("code", [0, 4, -1, 127])
def test_an_unknown_upgrade_type_is_refused_first(code):
    h = at(12)
    assert refused(h, "metadata.version", -3, code) == (
        "Invalid update version -3 for feature metadata.version. The controller does not "
        "support the given upgrade type."
    )


def test_a_negative_level_is_refused_before_the_support_check():
    h = at(12)
    assert refused(h, "metadata.version", -1, SAFE_DOWNGRADE).endswith(
        "A feature version cannot be less than 0."
    )


@pytest.mark.parametrize("level", [0, 5, 13])
def test_a_level_this_controller_does_not_write_is_not_supported(level):
    h = at(12)
    assert refused(h, "metadata.version", level, SAFE_DOWNGRADE).endswith(
        "The controller only supports versions 6-12"
    )


def test_a_lower_level_needs_a_downgrade_type_and_a_higher_one_the_upgrade_type():
    h = at(11, (6, 12))
    assert refused(h, "metadata.version", 10).endswith(
        "Can't downgrade the version of this feature without setting the upgrade type to "
        "either safe or unsafe downgrade."
    )
    for kind in (SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        assert refused(h, "metadata.version", 12, kind).endswith(
            "Can't downgrade to a newer version."
        )


@pytest.mark.parametrize("kind", [SAFE_DOWNGRADE, UNSAFE_DOWNGRADE])
def test_a_downgrade_across_no_metadata_change_is_written(kind):
    """3.6-IV0 changed nothing in the metadata (didMetadataChange false), so 12 ->
    11 is a downgrade Kafka allows; 10 -> 8 crosses two levels that did not either."""
    h = at(12, (6, 12))
    assert update(h, "metadata.version", 11, kind).error is Errors.NONE
    assert h.last.records == (FeatureLevelRecord(name="metadata.version", feature_level=11),)
    h = at(10, (6, 12))
    assert update(h, "metadata.version", 8, kind).error is Errors.NONE
    assert h.image.metadata_version == 8


def test_a_downgrade_that_might_delete_metadata_is_refused_safe_or_unsafe():
    h = at(12, (6, 12))
    assert refused(h, "metadata.version", 7, SAFE_DOWNGRADE) == (
        "Invalid metadata.version 7. Refusing to perform the requested downgrade because it "
        "might delete metadata information."
    )
    assert refused(h, "metadata.version", 10, UNSAFE_DOWNGRADE) == (
        "Invalid metadata.version 10. Unsafe metadata downgrade is not supported in this version."
    )


def test_another_feature_above_level_0_is_not_supported_here():
    h = at(12, (6, 12))
    assert refused(h, "group.version", 1).endswith("The controller does not support this feature.")


def test_level_0_removes_a_feature_only_where_it_exists():
    """Kafka's level 0 asks to remove a feature. metaquorum finalizes none but
    metadata.version, so there is nothing to remove: Kafka's "not found"."""
    h = at(12, (6, 12))
    assert refused(h, "group.version", 0, SAFE_DOWNGRADE) == (
        "Invalid update version 0 for feature group.version. Feature group.version not found."
    )
    assert refused(h, "group.version", 0).endswith("Feature group.version not found.")
    # A finalized level found in the log (no metaquorum controller writes one):
    # removing it still needs a downgrade type, and is still not found.
    h.commit([FeatureLevelRecord(name="group.version", feature_level=1)])
    assert "without setting the upgrade type" in refused(h, "group.version", 0)
    assert refused(h, "group.version", 0, SAFE_DOWNGRADE).endswith("not found.")


@pytest.mark.parametrize(("legacy", "kafka"), [(1, 6), (2, 12)])
def test_a_log_at_a_pre_kafka_metaquorum_level_is_moved_to_the_kafka_level_of_its_rules(
    legacy, kafka
):
    """Decision 62: metaquorum wrote levels 1 and 2 before it took Kafka's
    numbering. A controller that becomes active over such a log writes the
    Kafka level that follows the same rules (1: controlled shutdown soft, as
    3.3-IV2; 2: persisted and no ISR-shrink bump, as 3.6-IV0), and brokers
    register again at once."""
    h = ControllerHarness(metadata_version=legacy)
    assert h.image.metadata_version == legacy
    boot = h.controller.bootstrap_records()
    assert boot == [FeatureLevelRecord(name="metadata.version", feature_level=kafka)]
    h.commit(boot)
    assert h.image.metadata_version == kafka
    assert h.controller.bootstrap_records() == []  # written once
    resp = h.register(1, features=(FeatureRange("metadata.version", 6, 12),))
    assert resp.error is Errors.NONE, resp


def test_a_new_cluster_and_a_kafka_level_get_no_bootstrap_over_them():
    assert ControllerHarness().controller.bootstrap_records() == []
    assert ControllerHarness(metadata_version=6).controller.bootstrap_records() == []
