"""metadata.version levels are Kafka's MetadataVersion feature levels, and each
predicate is Kafka's (server-common MetadataVersion.java)."""

import pytest

from metadata_records.features import (
    BOOTSTRAP_METADATA_VERSION,
    DEFAULT_METADATA_VERSION,
    KAFKA_RELEASES,
    MAX_METADATA_VERSION,
    MIN_METADATA_VERSION,
    SUPPORTED_FEATURES,
    bumps_leader_epoch_on_isr_shrink,
    metadata_changed,
    persists_controlled_shutdown,
    register_broker_record_version,
    release_name,
)


def test_the_supported_levels_are_kafkas_3_3_iv2_to_3_6_iv0():
    assert (MIN_METADATA_VERSION, MAX_METADATA_VERSION) == (6, 12)
    assert (release_name(6), release_name(12)) == ("3.3-IV2", "3.6-IV0")
    assert BOOTSTRAP_METADATA_VERSION == 12
    assert DEFAULT_METADATA_VERSION == 1 and release_name(1) == "3.0-IV1"  # MINIMUM_KRAFT_VERSION
    assert SUPPORTED_FEATURES == {
        "metadata.version": (6, 12),
        "eligible.leader.replicas.version": (0, 1),
    }
    assert release_name(13) == "13"  # past what metaquorum follows


def test_kafkas_table_of_levels_and_metadata_changes():
    assert KAFKA_RELEASES == {
        1: ("3.0-IV1", True),
        2: ("3.1-IV0", False),
        3: ("3.2-IV0", True),
        4: ("3.3-IV0", False),
        5: ("3.3-IV1", True),
        6: ("3.3-IV2", True),
        7: ("3.3-IV3", True),
        8: ("3.4-IV0", True),
        9: ("3.5-IV0", False),
        10: ("3.5-IV1", False),
        11: ("3.5-IV2", True),
        12: ("3.6-IV0", False),
    }


@pytest.mark.parametrize(
    ("level", "record_version", "persists", "bumps"),
    [
        (6, 0, False, True),
        (7, 1, True, True),
        (8, 2, True, True),
        (11, 2, True, True),
        (12, 2, True, False),
    ],
)
def test_what_each_level_writes(level, record_version, persists, bumps):
    assert register_broker_record_version(level) == record_version
    assert persists_controlled_shutdown(level) is persists
    assert bumps_leader_epoch_on_isr_shrink(level) is bumps


@pytest.mark.parametrize(
    ("source", "target", "changed"),
    [
        (12, 12, False),
        (12, 11, False),  # 3.6-IV0 changed nothing in the metadata
        (11, 10, True),  # 3.5-IV2 added SCRAM records
        (10, 8, False),  # neither 3.5-IV1 nor 3.5-IV0 changed it
        (12, 7, True),
        (7, 12, True),  # symmetric, as Kafka's
    ],
)
def test_metadata_changed_is_kafkas_check_if_metadata_changed(source, target, changed):
    assert metadata_changed(source, target) is changed
