from controller.messages import UpdateFeaturesRequest
from metadata_records.errors import Errors
from metadata_records.records import FeatureLevelRecord, FeatureRange
from tests.harness import ControllerHarness


def test_new_clusters_start_at_level_2():
    assert ControllerHarness().image.metadata_version == 2


def test_upgrade_from_1_to_2_then_brokers_must_support_it():
    h = ControllerHarness(metadata_version=1)
    h.register(1, features=(FeatureRange("metadata.version", 1, 2),))
    h.register(2, features=())
    resp = h.run(UpdateFeaturesRequest("metadata.version", 2))
    assert resp.error is Errors.INVALID_UPDATE_VERSION
    assert "Broker 2 only supports versions 1-1" in resp.error_message
    h.register(2, generation=1, features=(FeatureRange("metadata.version", 1, 2),))
    resp = h.run(UpdateFeaturesRequest("metadata.version", 2))
    assert resp.error is Errors.NONE
    assert h.last.records == (FeatureLevelRecord(name="metadata.version", feature_level=2),)
    assert h.image.metadata_version == 2
    # Now the controller writes KIP-841 records.
    h.register(3)
    assert h.last.records[0].version == 1


def test_rejections():
    h = ControllerHarness()
    for req, text in [
        (UpdateFeaturesRequest("metadata.version", 1), "Can't downgrade from 2"),
        (UpdateFeaturesRequest("metadata.version", 3), "only supports versions 1-2"),
        (UpdateFeaturesRequest("group.version", 1), "only metadata.version is known"),
    ]:
        resp = h.run(req)
        assert resp.error is Errors.INVALID_UPDATE_VERSION and text in resp.error_message
    resp = h.run(UpdateFeaturesRequest("metadata.version", 2))
    assert resp.error is Errors.NONE and h.last.records == ()
