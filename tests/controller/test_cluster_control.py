"""Broker registration (docs/kafka-rules.md 3): epochs, validation order, amendments."""

import pytest

from controller.messages import BrokerHeartbeatRequest, BrokerRegistrationRequest
from metadata_records.errors import Errors
from metadata_records.records import Endpoint, FeatureRange, RegisterBrokerRecord
from tests.harness import CLUSTER_ID, ControllerHarness, incarnation


def test_new_incarnation_gets_the_offset_of_its_record_as_epoch_and_starts_fenced():
    h = ControllerHarness()
    offset = h.image.next_offset
    resp = h.register(1)
    assert resp.error is Errors.NONE and resp.broker_epoch == offset
    (record,) = h.last.records
    assert isinstance(record, RegisterBrokerRecord)
    assert record.broker_epoch == offset and record.fenced and not record.in_controlled_shutdown
    reg = h.image.brokers[1]
    assert reg.epoch == reg.registration_offset == offset and reg.fenced
    assert h.register(2).broker_epoch == offset + 1


def test_epochs_follow_offsets_inside_one_batch():
    h = ControllerHarness()
    base = h.image.next_offset
    results = [
        h.decide(
            BrokerRegistrationRequest(
                b, CLUSTER_ID, incarnation(b), features=(FeatureRange("metadata.version", 6, 12),)
            )
        )
        for b in (1, 2, 3)
    ]
    assert [r.response.broker_epoch for r in results] == [base, base + 1, base + 2]
    h.commit([rec for r in results for rec in r.records])
    assert [h.image.brokers[b].epoch for b in (1, 2, 3)] == [base, base + 1, base + 2]


def test_cluster_id_is_checked_first_and_nothing_is_written():
    h = ControllerHarness()
    before = h.image.next_offset
    resp = h.register(1, cluster_id="other", is_migrating_zk_broker=True, features=())
    assert resp.error is Errors.INCONSISTENT_CLUSTER_ID and resp.broker_epoch == -1
    assert "Expected cluster ID test-cluster, but got cluster ID other" == resp.error_message
    assert h.image.next_offset == before


def test_duplicate_registration_while_the_session_is_valid():
    h = ControllerHarness(session_timeout_ms=9000)
    h.start_brokers(1)
    resp = h.register(1, generation=1)
    assert resp.error is Errors.DUPLICATE_BROKER_REGISTRATION
    assert "session is still valid" in resp.error_message
    h.advance(9001)  # the session expired, although nobody fenced the broker yet
    resp = h.register(1, generation=1)
    assert resp.error is Errors.NONE and resp.broker_epoch > h.epochs.get(1, 0) - 1


def test_a_fenced_broker_can_always_be_replaced():
    h = ControllerHarness()
    h.start_brokers(1)
    h.heartbeat(1, want_fence=True)
    assert h.image.brokers[1].fenced
    resp = h.register(1, generation=1)
    assert resp.error is Errors.NONE


def test_a_broker_in_controlled_shutdown_still_has_a_session():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic("t", 2, 2)
    assert not h.heartbeat(1, want_shut_down=True).is_fenced
    assert h.image.brokers[1].in_controlled_shutdown
    assert h.register(1, generation=1).error is Errors.DUPLICATE_BROKER_REGISTRATION


def test_zk_migrating_brokers_are_refused():
    h = ControllerHarness()
    resp = h.register(1, is_migrating_zk_broker=True)
    assert resp.error is Errors.BROKER_ID_NOT_REGISTERED
    assert resp.error_message == "Controller does not support registering ZK brokers."


# ---------------------------------------------------------------- listeners (issue 18 item 6)


def test_an_unknown_security_protocol_is_an_invalid_request_and_nothing_is_written():
    h = ControllerHarness()
    before = h.image.next_offset
    listeners = (Endpoint("PLAINTEXT", "h", 9092, 0), Endpoint("EXTERNAL", "h", 9093, 7))
    resp = h.register(1, listeners=listeners)
    assert resp.error is Errors.INVALID_REQUEST and resp.broker_epoch == -1
    assert resp.error_message.startswith("Unknown security protocol 7 in listener EXTERNAL")
    assert "3 SASL_SSL" in resp.error_message
    assert h.image.next_offset == before and 1 not in h.image.brokers


def test_every_kafka_security_protocol_is_accepted():
    h = ControllerHarness()
    listeners = tuple(Endpoint(f"L{p}", "h", 9092 + p, p) for p in range(4))
    assert h.register(1, listeners=listeners).error is Errors.NONE
    assert h.image.brokers[1].listeners == listeners


def test_duplicate_listener_names_are_an_invalid_request():
    h = ControllerHarness()
    listeners = (Endpoint("PLAINTEXT", "a", 9092, 0), Endpoint("PLAINTEXT", "b", 9093, 0))
    resp = h.register(1, listeners=listeners)
    assert resp.error is Errors.INVALID_REQUEST
    assert resp.error_message.startswith("Duplicate listener name PLAINTEXT")
    # Names are compared exactly, as Kafka's keys are.
    listeners = (Endpoint("PLAINTEXT", "a", 9092, 0), Endpoint("plaintext", "b", 9093, 0))
    assert h.register(1, listeners=listeners).error is Errors.NONE


def test_listeners_are_checked_after_the_zk_flag_and_before_the_features():
    h = ControllerHarness()
    bad = (Endpoint("X", "h", 1, 9),)
    resp = h.register(1, listeners=bad, is_migrating_zk_broker=True)
    assert resp.error is Errors.BROKER_ID_NOT_REGISTERED
    resp = h.register(1, listeners=bad, features=())  # no metadata.version range as well
    assert resp.error is Errors.INVALID_REQUEST


def test_feature_ranges_must_contain_the_finalized_level():
    h = ControllerHarness(metadata_version=12)
    resp = h.register(1, features=())  # no metadata.version: treated as [1, 1]
    assert resp.error is Errors.UNSUPPORTED_VERSION
    assert resp.error_message == (
        "Unable to register because the broker does not support finalized version 12 of "
        "metadata.version. The broker wants a version between 1 and 1, inclusive."
    )
    assert (
        h.register(1, features=(FeatureRange("metadata.version", 3, 5),)).error
        is Errors.UNSUPPORTED_VERSION
    )
    # A feature that is not finalized is at level 0.
    unknown = (FeatureRange("metadata.version", 6, 12), FeatureRange("group.version", 1, 3))
    assert h.register(1, features=unknown).error is Errors.UNSUPPORTED_VERSION
    fine = (FeatureRange("metadata.version", 6, 12), FeatureRange("group.version", 0, 3))
    assert h.register(1, features=fine).error is Errors.NONE


@pytest.mark.parametrize(
    ("level", "version"),
    [(6, 0), (7, 1), (8, 2), (11, 2), (12, 2)],
    ids=["3.3-IV2", "3.3-IV3", "3.4-IV0", "3.5-IV2", "3.6-IV0"],
)
def test_register_broker_record_version_is_kafkas_for_the_metadata_version(level, version):
    """MetadataVersion.registerBrokerRecordVersion: v1 from 3.3-IV3 (KIP-841),
    v2 from 3.4-IV0 (isMigratingZkBroker, false)."""
    h = ControllerHarness(metadata_version=level)
    assert h.register(1).error is Errors.NONE
    (record,) = h.last.records
    assert record.version == version and not record.is_migrating_zk_broker
    assert h.replayed() == h.image


def test_a_broker_naming_no_metadata_version_is_refused_at_every_supported_level():
    """Kafka takes it as [1, 1] (3.0-IV1), below every level metaquorum writes."""
    h = ControllerHarness(metadata_version=6)
    resp = h.register(1, features=())
    assert resp.error is Errors.UNSUPPORTED_VERSION and "version 6 of" in resp.error_message


def test_same_incarnation_keeps_epoch_and_state_but_moves_the_registration_offset():
    h = ControllerHarness()
    h.start_brokers(1)
    epoch = h.epochs[1]
    old_offset = h.image.brokers[1].registration_offset
    resp = h.register(1)
    assert resp.error is Errors.NONE and resp.broker_epoch == epoch
    reg = h.image.brokers[1]
    assert reg.epoch == epoch and not reg.fenced
    assert reg.registration_offset > old_offset
    # Not caught up with its new registration record until it reports that offset.
    assert not h.heartbeat(1, offset=old_offset).is_caught_up


def test_only_a_new_incarnation_leaves_controlled_shutdown():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic("t", 2, 2)
    h.heartbeat(1, want_shut_down=True)
    assert h.image.brokers[1].in_controlled_shutdown
    h.register(1)  # same incarnation: state kept
    assert h.image.brokers[1].in_controlled_shutdown
    h.heartbeat(2)
    h.heartbeat(1, want_shut_down=True)  # -> SHUTDOWN_NOW, fenced
    assert h.image.brokers[1].fenced and h.image.brokers[1].in_controlled_shutdown
    resp = h.register(1, generation=1)
    reg = h.image.brokers[1]
    assert resp.broker_epoch == reg.registration_offset
    assert reg.fenced and not reg.in_controlled_shutdown
    assert h.replayed() == h.image


def test_a_new_incarnation_of_an_expired_but_unfenced_broker_fences_the_old_one_first():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic("t", assignments=((0, (1, 2)),))
    h.create_topic("solo", assignments=((0, (1,)),))
    h.advance(9001)
    h.heartbeat(2)
    resp = h.register(1, generation=1)
    assert resp.error is Errors.NONE
    *fencing, record = h.last.records
    assert record.broker_epoch == resp.broker_epoch == h.image.brokers[1].registration_offset
    assert fencing[-1].fenced == 1 and fencing[-1].broker_epoch < resp.broker_epoch
    assert h.partition("t", 0).leader == 2 and h.partition("t", 0).isr == (2,)
    assert h.partition("solo").leader == -1 and h.partition("solo").isr == (1,)
    # Back and caught up: it leads its partition again, at a new leader epoch.
    h.heartbeat(1)
    assert h.partition("solo").leader == 1 and h.partition("solo").leader_epoch == 2
    assert h.replayed() == h.image


# ---------------------------------------------------------------- sessions (issue 18)
# Kafka's scenarios: ClusterControlManagerTest.testRegistrationWithIncorrectClusterId /
# testDuplicateBrokerRegistration (a valid session refuses a new incarnation, an
# expired or fenced one does not) and BrokerHeartbeatManagerTest.testHasValidSession.


def test_a_gone_broker_in_controlled_shutdown_does_not_block_its_new_incarnation_after_failover():
    """The wedge of issue 18: a broker stopped heartbeating while in controlled
    shutdown, the controller failed over (or the whole cluster restarted), and
    its new incarnation was refused as a duplicate of a session nobody heard."""
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 3, 3)
    assert not h.heartbeat(1, want_shut_down=True).is_fenced
    assert h.image.brokers[1].in_controlled_shutdown and not h.image.brokers[1].fenced
    h.advance(2_000)  # broker 1's process is gone; the quorum restarts
    h.new_leader()
    resp = h.register(1, generation=1)
    assert resp.error is Errors.NONE, resp.error_message
    reg = h.image.brokers[1]
    assert reg.incarnation_id == incarnation(1, 1) and reg.fenced
    assert not reg.in_controlled_shutdown  # only a new incarnation leaves that state
    assert h.replayed() == h.image


def test_after_failover_a_live_old_incarnation_still_refuses_a_duplicate_once_heard():
    h = ControllerHarness()
    h.start_brokers(1)
    h.new_leader()
    h.advance(1_000)
    assert h.heartbeat(1).error is Errors.NONE  # the old incarnation reaches the new leader
    assert h.register(1, generation=1).error is Errors.DUPLICATE_BROKER_REGISTRATION
    h.advance(9_001)
    assert h.register(1, generation=1).error is Errors.NONE


def test_the_session_a_new_leader_grants_on_trust_still_spares_live_brokers():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.advance(20_000)
    h.new_leader()
    h.advance(8_000)
    assert h.controller.maybe_fence_stale_broker(h.now_ms) is None
    h.heartbeat(1)
    h.advance(1_001)  # broker 2 never reached the new leader: a whole timeout since failover
    result = h.controller.maybe_fence_stale_broker(h.now_ms)
    assert result is not None and result.response == 2


def test_a_heartbeat_with_a_stale_epoch_never_keeps_the_old_session_alive():
    h = ControllerHarness()
    h.start_brokers(1)
    old_epoch = h.epochs[1]
    h.advance(5_000)
    for _ in range(5):  # the old incarnation keeps beating with an epoch that is not current
        h.advance(1_000)
        assert h.heartbeat(1, epoch=old_epoch + 1).error is Errors.STALE_BROKER_EPOCH
        stale = h.controller.expire_heartbeat(BrokerHeartbeatRequest(1, old_epoch + 1, 0), h.now_ms)
        assert stale.response.error is Errors.STALE_BROKER_EPOCH
    assert h.register(1, generation=1).error is Errors.NONE  # 10 s after its last real beat


def test_a_stale_epoch_from_a_replaced_incarnation_does_not_keep_the_new_one_alive():
    h = ControllerHarness()
    h.start_brokers(1)
    old_epoch = h.epochs[1]
    h.advance(9_001)
    assert h.register(1, generation=1).error is Errors.NONE
    assert h.heartbeat(1).error is Errors.NONE
    h.advance(9_001)
    assert h.heartbeat(1, epoch=old_epoch).error is Errors.STALE_BROKER_EPOCH
    result = h.controller.maybe_fence_stale_broker(h.now_ms)
    assert result is not None and result.response == 1


def test_a_same_incarnation_re_registration_is_contact():
    """Kafka's registerBroker touches the session: a broker that re-registers
    (an answer lost, so it asks again) is not fenced a timeout after its last beat."""
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.advance(7_000)
    h.heartbeat(2)
    resp = h.register(1)  # the same incarnation again
    assert resp.error is Errors.NONE and resp.broker_epoch == h.epochs[1]
    h.advance(2_001)  # 9 001 ms after broker 1's last heartbeat
    assert h.controller.maybe_fence_stale_broker(h.now_ms) is None
    assert not h.image.brokers[1].fenced
    # ... and it counts for the duplicate check too.
    assert h.register(1, generation=1).error is Errors.DUPLICATE_BROKER_REGISTRATION
