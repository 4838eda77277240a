from controller.messages import UpdateFeaturesRequest
from metadata_records.errors import Errors
from metadata_records.records import FeatureLevelRecord, FeatureRange
from tests.harness import ControllerHarness


def test_new_clusters_start_at_3_6_iv0():
    assert ControllerHarness().image.metadata_version == 12


def test_upgrade_from_3_3_iv2_to_3_6_iv0_then_brokers_must_support_it():
    h = ControllerHarness(metadata_version=6)
    h.register(1, features=(FeatureRange("metadata.version", 6, 12),))
    h.register(2, features=(FeatureRange("metadata.version", 6, 6),))
    resp = h.run(UpdateFeaturesRequest("metadata.version", 12))
    assert resp.error is Errors.INVALID_UPDATE_VERSION
    assert "Broker 2 only supports versions 6-6" in resp.error_message
    h.register(2, generation=1, features=(FeatureRange("metadata.version", 6, 12),))
    resp = h.run(UpdateFeaturesRequest("metadata.version", 12))
    assert resp.error is Errors.NONE
    assert h.last.records == (FeatureLevelRecord(name="metadata.version", feature_level=12),)
    assert h.image.metadata_version == 12
    # Now the controller writes KIP-841 records, at 3.4-IV0's record version.
    h.register(3)
    assert h.last.records[0].version == 2


def test_rejections():
    h = ControllerHarness()
    for req, text in [
        (UpdateFeaturesRequest("metadata.version", 11), "Can't downgrade from 12"),
        (UpdateFeaturesRequest("metadata.version", 13), "only supports versions 6-12"),
        (UpdateFeaturesRequest("group.version", 1), "only metadata.version is known"),
    ]:
        resp = h.run(req)
        assert resp.error is Errors.INVALID_UPDATE_VERSION and text in resp.error_message
    resp = h.run(UpdateFeaturesRequest("metadata.version", 12))
    assert resp.error is Errors.NONE and h.last.records == ()
