from metadata_records.features import (
    BOOTSTRAP_METADATA_VERSION,
    DEFAULT_METADATA_VERSION,
    MAX_METADATA_VERSION,
    MIN_METADATA_VERSION,
    SUPPORTED_FEATURES,
    persists_controlled_shutdown,
    register_broker_record_version,
)


def test_levels():
    assert (MIN_METADATA_VERSION, MAX_METADATA_VERSION) == (1, 2)
    assert BOOTSTRAP_METADATA_VERSION == 2 and DEFAULT_METADATA_VERSION == 1
    assert SUPPORTED_FEATURES == {"metadata.version": (1, 2)}


def test_what_each_level_writes():
    assert register_broker_record_version(1) == 0 and register_broker_record_version(2) == 1
    assert not persists_controlled_shutdown(1) and persists_controlled_shutdown(2)
