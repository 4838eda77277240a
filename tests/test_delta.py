"""metadata_records.delta: ``apply``, ``apply_records``, ``batch_applies`` and ``ImageDelta``."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata_records.delta import ImageDelta, apply, apply_records, batch_applies
from metadata_records.image import EMPTY_IMAGE, BrokerRegistration, MetadataImage
from metadata_records.records import (
    AccessControlEntryRecord,
    Batch,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    Endpoint,
    EntityData,
    FeatureLevelRecord,
    FeatureRange,
    LeaderChangeRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from metadata_records.snapshot import encode_image
from metadata_records.uuids import uuid_from_bytes

T1 = uuid_from_bytes(b"\x01" * 16)
T2 = uuid_from_bytes(b"\x02" * 16)
T3 = uuid_from_bytes(b"\x03" * 16)
INC_A = uuid_from_bytes(b"\xaa" * 16)
INC_B = uuid_from_bytes(b"\xbb" * 16)
EP = (Endpoint("PLAINTEXT", "localhost", 9092, 0),)
MV = (FeatureRange("metadata.version", 6, 12),)


_INTEGRAL_MAX = {"SHORT": 2**15 - 1, "INT": 2**31 - 1, "LONG": 2**63 - 1}


def reg(broker_id, epoch, *, inc=INC_A, fenced=True, ics=False, version=1, rack=None):
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=inc,
        broker_epoch=epoch,
        end_points=EP,
        features=MV,
        rack=rack,
        fenced=fenced,
        in_controlled_shutdown=ics,
        version=version,
    )


def change(broker_id, epoch, fenced=0, ics=0, version=1):
    return BrokerRegistrationChangeRecord(
        broker_id=broker_id,
        broker_epoch=epoch,
        fenced=fenced,
        in_controlled_shutdown=ics,
        version=version,
    )


def topic_with_partitions(name="t", topic_id=T1, n=2, replicas=(1, 2, 3)):
    return [TopicRecord(name=name, topic_id=topic_id)] + [
        PartitionRecord(
            partition_id=p,
            topic_id=topic_id,
            replicas=replicas,
            isr=replicas,
            leader=replicas[0],
        )
        for p in range(n)
    ]


def leader_change(epoch, leader_id=0, url="http://n0:8080"):
    return LeaderChangeRecord(controller_epoch=epoch, leader_id=leader_id, leader_url=url)


# ------------------------------------------------------------------ brokers


def test_broker_epoch_and_registration_offset_are_the_record_offset():
    img = apply_records(EMPTY_IMAGE, [NoOpRecord()] * 5)
    # The controller writes epoch = the offset the RegisterBrokerRecord will get.
    img = apply_records(img, [reg(1, 5), reg(2, 6)])
    assert img.brokers[1].epoch == 5 and img.brokers[1].registration_offset == 5
    assert img.brokers[2].epoch == 6 and img.brokers[2].registration_offset == 6
    assert img.next_offset == 7
    assert img.last_offset == 6


def test_registration_offset_is_where_the_record_sits_even_if_epoch_is_kept():
    # Same-incarnation re-registration keeps the epoch; the offset still moves.
    img = apply_records(EMPTY_IMAGE, [reg(1, 0), NoOpRecord(), NoOpRecord(), reg(1, 0)])
    b = img.brokers[1]
    assert b.epoch == 0
    assert b.registration_offset == 3


def test_register_broker_copies_fields():
    img = apply_records(EMPTY_IMAGE, [reg(7, 0, inc=INC_B, fenced=False, rack="r1")])
    assert img.brokers[7] == BrokerRegistration(
        broker_id=7,
        incarnation_id=INC_B,
        epoch=0,
        listeners=EP,
        features=MV,
        rack="r1",
        fenced=False,
        in_controlled_shutdown=False,
        registration_offset=0,
    )


def test_register_broker_v0_never_sets_controlled_shutdown():
    # inControlledShutdown is not on the wire in v0, so a v0 record cannot set it.
    img = apply_records(EMPTY_IMAGE, [reg(1, 0, ics=True, version=0)])
    assert img.brokers[1].in_controlled_shutdown is False
    img = apply_records(EMPTY_IMAGE, [reg(1, 0, ics=True, version=1)])
    assert img.brokers[1].in_controlled_shutdown is True


@pytest.mark.parametrize(
    ("start_fenced", "flag", "expect_fenced"),
    [
        (True, 1, True),
        (True, -1, False),
        (True, 0, True),
        (False, 1, True),
        (False, -1, False),
        (False, 0, False),
    ],
)
def test_change_record_fence_unfence_no_change(start_fenced, flag, expect_fenced):
    img = apply_records(EMPTY_IMAGE, [reg(1, 0, fenced=start_fenced), change(1, 0, fenced=flag)])
    assert img.brokers[1].fenced is expect_fenced
    assert img.ignored_records == 0
    assert img.next_offset == 2


def test_controlled_shutdown_is_sticky():
    records = [reg(1, 0, fenced=True), change(1, 0, fenced=-1)]
    img = apply_records(EMPTY_IMAGE, records)
    assert img.brokers[1].active
    img = apply_records(img, [change(1, 0, ics=1)])
    assert img.brokers[1].in_controlled_shutdown and not img.brokers[1].active
    assert not img.brokers[1].fenced
    # Fence, then unfence: still in controlled shutdown.
    img = apply_records(img, [change(1, 0, fenced=1), change(1, 0, fenced=-1), change(1, 0)])
    b = img.brokers[1]
    assert not b.fenced and b.in_controlled_shutdown and not b.active
    # ics=0 means "no change", never "leave".
    img = apply_records(img, [change(1, 0, fenced=-1, ics=0)])
    assert img.brokers[1].in_controlled_shutdown
    # Only a new RegisterBrokerRecord leaves it.
    img = apply_records(img, [reg(1, img.next_offset, inc=INC_B)])
    b = img.brokers[1]
    assert not b.in_controlled_shutdown and b.fenced
    assert img.ignored_records == 0


def test_v0_change_record_ignores_in_controlled_shutdown():
    # The field is not on the wire in v0; a v0 record carrying it must not set it.
    img = apply_records(EMPTY_IMAGE, [reg(1, 0), change(1, 0, fenced=-1, ics=1, version=0)])
    b = img.brokers[1]
    assert not b.fenced
    assert not b.in_controlled_shutdown
    assert img.ignored_records == 0


@pytest.mark.parametrize(
    "bad",
    [
        change(1, 1, fenced=-1),  # stale (wrong) broker epoch
        change(1, -1, fenced=-1),
        change(2, 0, fenced=-1),  # unknown broker
        change(1, 0, fenced=2),  # out-of-range fenced flag
        change(1, 0, fenced=-2),
        change(1, 0, ics=-1),  # there is no value to leave controlled shutdown
        change(1, 0, ics=2),
    ],
)
def test_bad_change_record_is_ignored_but_takes_its_offset(bad):
    base = apply_records(EMPTY_IMAGE, [reg(1, 0)])
    img = apply_records(base, [bad, NoOpRecord()])
    assert img.brokers == base.brokers
    assert img.brokers[1] is base.brokers[1]
    assert img.next_offset == base.next_offset + 2
    assert img.ignored_records == base.ignored_records + 1


def unregister(broker_id, epoch):
    return UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch)


def test_unregister_removes_the_registration():
    # Kafka's ClusterControlManagerTest.testUnregister: the registration (and
    # its RegisterBrokerRecord offset) is gone; the other brokers are shared.
    base = apply_records(EMPTY_IMAGE, [reg(1, 0, fenced=False), reg(2, 1)])
    img = apply_records(base, [unregister(1, 0)])
    assert 1 not in img.brokers and img.brokers[2] is base.brokers[2]
    assert img.ignored_records == 0 and img.next_offset == 3
    # A later registration of the id is a new incarnation like any other.
    img = apply_records(img, [reg(1, 3, inc=INC_B)])
    assert img.brokers[1].epoch == 3 and img.brokers[1].incarnation_id == INC_B


def test_unregister_and_register_again_in_one_delta():
    delta = ImageDelta(apply_records(EMPTY_IMAGE, [reg(1, 0)]))
    delta.replay(unregister(1, 0))
    assert delta.broker(1) is None and delta.broker_ids() == [] and not delta.is_active(1)
    delta.replay(reg(1, 2, inc=INC_B))
    assert delta.broker_ids() == [1] and delta.apply().brokers[1].epoch == 2
    delta.replay(unregister(1, 2))
    assert delta.apply().brokers == {}


@pytest.mark.parametrize("bad", [unregister(1, 1), unregister(2, 0), unregister(1, -1)])
def test_unregister_of_an_unknown_broker_or_another_epoch_is_ignored(bad):
    # Kafka's replay throws: "no broker registration found for that id" /
    # "no broker registration with that epoch found".
    base = apply_records(EMPTY_IMAGE, [reg(1, 0)])
    img = apply_records(base, [bad])
    assert img.brokers == base.brokers and img.ignored_records == 1


def test_change_record_after_reregistration_needs_the_new_epoch():
    img = apply_records(EMPTY_IMAGE, [reg(1, 0), reg(1, 1, inc=INC_B)])
    img = apply_records(img, [change(1, 0, fenced=-1)])
    assert img.brokers[1].fenced and img.ignored_records == 1
    img = apply_records(img, [change(1, 1, fenced=-1)])
    assert not img.brokers[1].fenced and img.ignored_records == 1


# ------------------------------------------------------------------ partitions


def _one_partition(**kw):
    fields = dict(
        partition_id=0, topic_id=T1, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=4
    )
    fields.update(kw)
    img = apply_records(
        EMPTY_IMAGE, [TopicRecord(name="t", topic_id=T1), PartitionRecord(**fields)]
    )
    return img


def test_partition_record_creates_partition():
    img = _one_partition(partition_epoch=7, leader_recovery_state=1)
    p = img.partition(T1, 0)
    assert p.replicas == (1, 2, 3) and p.isr == (1, 2, 3)
    assert p.leader == 1 and p.leader_epoch == 4 and p.partition_epoch == 7
    assert p.leader_recovery_state == 1
    assert img.partition_count == 1


def test_partition_record_for_unknown_topic_is_ignored():
    img = apply_records(
        EMPTY_IMAGE, [PartitionRecord(partition_id=0, topic_id=T2, replicas=(1,), isr=(1,))]
    )
    assert img.topics == {} and img.partition_count == 0
    assert img.ignored_records == 1 and img.next_offset == 1


def test_partition_record_replaces_an_existing_partition_without_recounting():
    img = _one_partition()
    img = apply_records(
        img, [PartitionRecord(partition_id=0, topic_id=T1, replicas=(4,), isr=(4,), leader=4)]
    )
    assert img.partition(T1, 0).replicas == (4,)
    assert img.partition_count == 1


def pcr(**kw):
    kw.setdefault("partition_id", 0)
    kw.setdefault("topic_id", T1)
    return PartitionChangeRecord(**kw)


@pytest.mark.parametrize(
    ("record", "leader", "leader_epoch"),
    [
        (pcr(), 1, 4),  # leader -2: unchanged
        (pcr(isr=(1, 2)), 1, 4),  # ISR shrink alone: no leader bump
        (pcr(leader=1), 1, 5),  # same leader still bumps
        (pcr(leader=2), 2, 5),
        (pcr(leader=-1), -1, 5),  # no leader also bumps
        (pcr(leader=3, isr=(3,)), 3, 5),
    ],
)
def test_partition_change_epochs(record, leader, leader_epoch):
    img = apply_records(_one_partition(partition_epoch=9), [record])
    p = img.partition(T1, 0)
    assert p.leader == leader
    assert p.leader_epoch == leader_epoch
    assert p.partition_epoch == 10  # every change record bumps it by exactly 1


def test_partition_change_null_fields_are_unchanged():
    img = _one_partition(removing_replicas=(3,), adding_replicas=(4,), leader_recovery_state=1)
    before = img.partition(T1, 0)
    after = apply_records(img, [pcr()]).partition(T1, 0)
    assert after._replace(partition_epoch=before.partition_epoch) == before
    assert after.partition_epoch == before.partition_epoch + 1
    assert after.leader_recovery_state == 1  # -1 = unchanged


def test_partition_change_sets_every_given_field():
    img = _one_partition(removing_replicas=(3,), adding_replicas=(4,))
    after = apply_records(
        img,
        [
            pcr(
                isr=(2,),
                leader=2,
                replicas=(2, 4),
                removing_replicas=(),
                adding_replicas=(),
                leader_recovery_state=1,
            )
        ],
    ).partition(T1, 0)
    assert after.isr == (2,)
    assert after.replicas == (2, 4)
    assert after.removing_replicas == () and after.adding_replicas == ()
    assert after.leader_recovery_state == 1
    assert after.leader == 2


@pytest.mark.parametrize(
    "bad",
    [
        pcr(leader_recovery_state=5),
        pcr(leader_recovery_state=-2),
        PartitionRecord(
            partition_id=0, topic_id=T1, replicas=(1,), isr=(1,), leader_recovery_state=2
        ),
    ],
)
def test_out_of_range_leader_recovery_state_is_ignored(bad):
    img = _one_partition()
    out = apply_records(img, [bad])
    assert out.partition(T1, 0) == img.partition(T1, 0)
    assert out.ignored_records == img.ignored_records + 1


def test_successive_changes_accumulate():
    img = _one_partition()
    img = apply_records(img, [pcr(isr=(1, 2)), pcr(leader=2), pcr(leader=-2), pcr(leader=-1)])
    p = img.partition(T1, 0)
    assert p.partition_epoch == 4
    assert p.leader_epoch == 4 + 2
    assert p.leader == -1 and p.isr == (1, 2)


def test_partition_change_for_unknown_partition_or_topic_is_ignored():
    img = _one_partition()
    out = apply_records(img, [pcr(partition_id=5, leader=1), pcr(topic_id=T2, leader=1)])
    assert out.topics == img.topics
    assert out.ignored_records == 2
    assert out.next_offset == img.next_offset + 2


# ------------------------------------------------------------------ topics


def test_topic_record_creates_topic_and_name_mapping():
    img = apply_records(EMPTY_IMAGE, [TopicRecord(name="orders", topic_id=T1)])
    assert img.topic_ids == {"orders": T1}
    assert img.topics[T1].name == "orders"
    assert img.topics[T1].partitions == {} and img.topics[T1].configs == {}
    assert img.topic_by_name("orders") is img.topics[T1]


@pytest.mark.parametrize(
    "dup",
    [TopicRecord(name="orders", topic_id=T2), TopicRecord(name="other", topic_id=T1)],
)
def test_duplicate_topic_name_or_id_is_ignored(dup):
    img = apply_records(EMPTY_IMAGE, [TopicRecord(name="orders", topic_id=T1), dup])
    assert img.topic_ids == {"orders": T1}
    assert set(img.topics) == {T1}
    assert img.ignored_records == 1


def test_remove_topic_removes_topic_name_partitions_and_count():
    img = apply_records(
        EMPTY_IMAGE,
        topic_with_partitions("a", T1, 3) + topic_with_partitions("b", T2, 2),
    )
    assert img.partition_count == 5
    img = apply_records(img, [RemoveTopicRecord(topic_id=T1)])
    assert set(img.topics) == {T2}
    assert img.topic_ids == {"b": T2}
    assert img.topic_by_name("a") is None
    assert img.partition(T1, 0) is None
    assert img.partition_count == 2
    assert img.ignored_records == 0


def test_remove_topic_counts_partitions_added_in_the_same_delta():
    records = topic_with_partitions("a", T1, 2)
    records += [
        PartitionRecord(partition_id=9, topic_id=T1, replicas=(1,), isr=(1,)),
        pcr(leader=2),
        RemoveTopicRecord(topic_id=T1),
    ]
    img = apply_records(EMPTY_IMAGE, records)
    assert img.topics == {} and img.topic_ids == {} and img.partition_count == 0
    # The same in two steps.
    base = apply_records(EMPTY_IMAGE, records[:3])
    img2 = apply_records(base, records[3:])
    assert img2 == img


def test_remove_unknown_topic_is_ignored():
    img = apply_records(EMPTY_IMAGE, [RemoveTopicRecord(topic_id=T3)])
    assert img.ignored_records == 1 and img.next_offset == 1


def test_topic_can_be_recreated_after_removal():
    records = topic_with_partitions("a", T1, 2) + [RemoveTopicRecord(topic_id=T1)]
    records += [TopicRecord(name="a", topic_id=T2), pcr(topic_id=T1, leader=1)]
    img = apply_records(EMPTY_IMAGE, records)
    assert img.topic_ids == {"a": T2}
    assert img.topics[T2].partitions == {}
    assert img.partition_count == 0
    assert img.ignored_records == 1  # the change record for the removed topic
    # The same id may come back too, with no partitions.
    img = apply_records(img, [TopicRecord(name="z", topic_id=T1)])
    assert img.topics[T1].partitions == {} and img.partition(T1, 0) is None


# ------------------------------------------------------------------ configs


def cfg(name, value, topic="t", resource_type=2):
    return ConfigRecord(resource_type=resource_type, resource_name=topic, name=name, value=value)


def test_config_set_overwrite_delete():
    img = apply_records(EMPTY_IMAGE, [TopicRecord(name="t", topic_id=T1)])
    img = apply_records(img, [cfg("retention.ms", "1000"), cfg("cleanup.policy", "compact")])
    assert img.topics[T1].configs == {"retention.ms": "1000", "cleanup.policy": "compact"}
    img = apply_records(img, [cfg("retention.ms", "2000")])
    assert img.topics[T1].configs["retention.ms"] == "2000"
    img = apply_records(img, [cfg("retention.ms", None)])
    assert img.topics[T1].configs == {"cleanup.policy": "compact"}
    # Deleting what is not set is a (successful) no-op.
    img = apply_records(img, [cfg("retention.ms", None)])
    assert img.topics[T1].configs == {"cleanup.policy": "compact"}
    assert img.ignored_records == 0


def test_config_for_unknown_topic_or_other_resource_is_ignored():
    img = apply_records(EMPTY_IMAGE, [TopicRecord(name="t", topic_id=T1)])
    img = apply_records(
        img,
        [
            cfg("a", "1", topic="nope"),
            cfg("a", "1", resource_type=4),
            cfg("a", "1", resource_type=0),
        ],
    )
    assert img.topics[T1].configs == {}
    assert img.ignored_records == 3


def test_broker_configs_by_id_and_the_cluster_default():
    img = apply_records(
        EMPTY_IMAGE,
        [
            cfg("num.io.threads", "4", topic="", resource_type=4),
            cfg("num.io.threads", "8", topic="1", resource_type=4),
            cfg("log.retention.ms", "5", topic="", resource_type=4),
        ],
    )
    assert img.broker_configs == {
        "": {"num.io.threads": "4", "log.retention.ms": "5"},
        "1": {"num.io.threads": "8"},
    }
    # Deleting a broker's last config removes the resource; the others stay shared.
    before = img.broker_configs[""]
    img = apply_records(img, [cfg("num.io.threads", None, topic="1", resource_type=4)])
    assert img.broker_configs == {"": before} and img.broker_configs[""] is before
    # Names that are no broker id take an offset and change nothing.
    img = apply_records(img, [cfg("a", "1", topic=n, resource_type=4) for n in ("x", "-1", "1.5")])
    assert img.ignored_records == 3 and set(img.broker_configs) == {""}


def test_config_keeps_partitions():
    img = apply_records(EMPTY_IMAGE, topic_with_partitions("t", T1, 2))
    out = apply_records(img, [pcr(leader=2), cfg("a", "1")])
    assert out.topics[T1].configs == {"a": "1"}
    assert out.partition(T1, 0).leader == 2
    assert out.partition(T1, 1) == img.partition(T1, 1)
    assert list(out.topics[T1].partitions.differing(img.topics[T1].partitions)) == [0]


# ------------------------------------------------------------------ features


def test_feature_level_set_and_zero_removes():
    img = apply_records(EMPTY_IMAGE, [FeatureLevelRecord(name="metadata.version", feature_level=2)])
    assert img.features == {"metadata.version": 2}
    assert img.metadata_version == 2
    img = apply_records(img, [FeatureLevelRecord(name="x", feature_level=3)])
    assert img.features == {"metadata.version": 2, "x": 3}
    img = apply_records(img, [FeatureLevelRecord(name="metadata.version", feature_level=0)])
    assert img.features == {"x": 3}
    assert img.metadata_version == 1  # the default when unset
    assert img.ignored_records == 0


# ------------------------------------------------------------------ leader change


def test_leader_change_only_when_newer():
    img = apply_records(EMPTY_IMAGE, [leader_change(3, 1, "http://n1")])
    assert (img.controller_epoch, img.leader_id, img.leader_url) == (3, 1, "http://n1")
    for stale in (leader_change(3, 2, "http://n2"), leader_change(2, 0, "http://n0")):
        out = apply_records(img, [stale])
        assert (out.controller_epoch, out.leader_id, out.leader_url) == (3, 1, "http://n1")
        assert out.ignored_records == 1 and out.next_offset == img.next_offset + 1
    out = apply_records(img, [leader_change(4, 2, "http://n2")])
    assert (out.controller_epoch, out.leader_id, out.leader_url) == (4, 2, "http://n2")
    assert out.ignored_records == 0


def test_empty_image_defaults():
    assert EMPTY_IMAGE.controller_epoch == 0
    assert EMPTY_IMAGE.leader_id == -1
    assert EMPTY_IMAGE.leader_url is None
    assert EMPTY_IMAGE.next_offset == 0


# ------------------------------------------------------------------ batches and epochs


def _at_epoch(epoch):
    return apply_records(EMPTY_IMAGE, [leader_change(epoch)])


def test_batch_applies_rules():
    noop = (NoOpRecord(),)
    assert batch_applies(3, Batch(3, 0, noop))
    assert not batch_applies(3, Batch(2, 0, noop))
    assert not batch_applies(3, Batch(4, 0, noop))
    assert batch_applies(3, Batch(3, 0, ()))  # empty batch of the current epoch
    assert not batch_applies(3, Batch(4, 0, ()))
    assert batch_applies(3, Batch(4, 0, (leader_change(4), NoOpRecord())))
    assert batch_applies(3, Batch(9, 0, (leader_change(9),)))
    assert not batch_applies(3, Batch(3, 0, (leader_change(3),)))  # not newer
    assert not batch_applies(3, Batch(2, 0, (leader_change(2),)))
    assert not batch_applies(3, Batch(4, 0, (leader_change(5),)))  # epochs disagree
    assert not batch_applies(3, Batch(5, 0, (leader_change(4),)))
    # A LEADER_CHANGE that does not open the batch does not make it a new-epoch batch.
    assert not batch_applies(3, Batch(4, 0, (NoOpRecord(), leader_change(4))))


@pytest.mark.parametrize("batch_epoch", [0, 2, 4, 100])
def test_batch_of_another_epoch_is_a_no_op_taking_no_offsets(batch_epoch):
    img = apply_records(_at_epoch(3), [reg(1, 1)])
    batch = Batch(batch_epoch, 123, (change(1, 1, fenced=-1), TopicRecord(name="x", topic_id=T2)))
    out = apply(img, batch)
    assert out is img
    assert out.next_offset == img.next_offset
    assert out.brokers[1].fenced


def test_batch_of_current_epoch_applies():
    img = apply_records(_at_epoch(3), [reg(1, 1)])
    out = apply(img, Batch(3, 123, (change(1, 1, fenced=-1), NoOpRecord())))
    assert not out.brokers[1].fenced
    assert out.next_offset == img.next_offset + 2


def test_leader_change_batch_with_larger_epoch_applies():
    img = _at_epoch(3)
    out = apply(
        img, Batch(5, 0, (leader_change(5, 2, "http://n2"), TopicRecord(name="x", topic_id=T2)))
    )
    assert out.controller_epoch == 5 and out.leader_id == 2 and out.leader_url == "http://n2"
    assert out.topic_ids == {"x": T2}
    assert out.next_offset == img.next_offset + 2
    # The old epoch's batches no longer apply; the new one's do.
    assert apply(out, Batch(3, 0, (NoOpRecord(),))) is out
    assert apply(out, Batch(5, 0, (NoOpRecord(),))).next_offset == out.next_offset + 1


@pytest.mark.parametrize("epoch", [2, 3])
def test_leader_change_batch_with_older_or_equal_epoch_is_a_no_op(epoch):
    img = _at_epoch(3)
    assert apply(img, Batch(epoch, 0, (leader_change(epoch, 9, "http://x"), NoOpRecord()))) is img


def test_image_delta_replay_batch_reports_whether_it_applied():
    img = _at_epoch(3)
    delta = ImageDelta(img)
    assert not delta.replay_batch(Batch(2, 0, (NoOpRecord(),)))
    assert delta.next_offset == img.next_offset
    assert delta.replay_batch(Batch(3, 0, (NoOpRecord(),)))
    assert delta.next_offset == img.next_offset + 1
    assert delta.replay_batch(Batch(4, 0, (leader_change(4), NoOpRecord())))
    assert delta.controller_epoch == 4
    assert not delta.replay_batch(Batch(3, 0, (NoOpRecord(),)))
    assert delta.apply().next_offset == img.next_offset + 3


def test_replay_known_change_is_replay_when_before_is_current_and_refuses_otherwise():
    base = apply_records(EMPTY_IMAGE, topic_with_partitions("t", T1, 1))
    change = PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1, 2))
    by_replay, known = ImageDelta(base), ImageDelta(base)
    by_replay.replay(change)
    before = known.partition(T1, 0)
    assert known.replay_known_change(change, before, before.merge(change))
    assert known.apply() == by_replay.apply()
    # A second change to the same partition: ``before`` is no longer current.
    again = PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1,))
    assert not known.replay_known_change(again, before, before.merge(again))
    assert not known.replay_known_change(again, None, None)
    assert known.next_offset == by_replay.next_offset  # nothing done
    known.replay(again)
    by_replay.replay(again)
    assert known.apply() == by_replay.apply()


def test_replay_merged_puts_in_what_is_current_and_replays_the_rest():
    base = apply_records(EMPTY_IMAGE, topic_with_partitions("t", T1, 2))
    first = PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1, 2))
    stale = PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1,))  # merged on the old one
    other = PartitionChangeRecord(partition_id=1, topic_id=T1, isr=(1, 2))  # not merged
    records = (first, stale, other, NoOpRecord())
    before = base.topics[T1].partitions[0]
    after = before.merge(first)
    merged = {id(first): (before, after), id(stale): (before, before.merge(stale))}
    told, replayed = [], []
    delta = ImageDelta(base)

    def replay(record):
        replayed.append(record)
        return delta.replay(record)

    delta.replay_merged(records, merged, lambda *change: told.append(change), replay)
    assert told == [(T1, 0, before, after)]
    assert replayed == [stale, other, records[3]]
    assert delta.partition(T1, 1) is not base.topics[T1].partitions[1]
    for how in (None, {}):  # nothing merged: every record through replay
        plain = ImageDelta(base)
        plain.replay_merged(records, how)
        assert plain.apply() == delta.apply() == apply_records(base, records)


def test_unknown_record_type_is_ignored_not_raised():
    delta = ImageDelta(EMPTY_IMAGE)
    delta.replay(object())  # type: ignore[arg-type]
    out = delta.apply()
    assert out.next_offset == 1 and out.ignored_records == 1


# ------------------------------------------------------------------ ImageDelta reads


def test_image_delta_reads_see_pending_changes_and_leave_the_base_alone():
    base = apply_records(
        EMPTY_IMAGE,
        [reg(1, 0), reg(2, 1)]
        + topic_with_partitions("a", T1, 2)
        + [FeatureLevelRecord(name="metadata.version", feature_level=2)],
    )
    snapshot = encode_image(base)
    delta = ImageDelta(base)
    for r in [
        change(1, 0, fenced=-1),
        reg(3, 99),
        TopicRecord(name="b", topic_id=T2),
        PartitionRecord(partition_id=0, topic_id=T2, replicas=(3,), isr=(3,), leader=3),
        pcr(leader=2),
        cfg("k", "v", topic="a"),
        RemoveTopicRecord(topic_id=T1),
        FeatureLevelRecord(name="metadata.version", feature_level=0),
        FeatureLevelRecord(name="y", feature_level=5),
    ]:
        delta.replay(r)
    assert delta.broker_ids() == [1, 2, 3]
    assert [b.broker_id for b in delta.brokers()] == [1, 2, 3]
    assert delta.is_active(1) and not delta.is_active(2) and not delta.is_active(42)
    assert (
        delta.broker(3).epoch == 99 and delta.broker(3).registration_offset == base.next_offset + 1
    )
    assert delta.broker(42) is None
    assert not delta.has_topic(T1) and delta.has_topic(T2)
    assert delta.topic_ids() == [T2]
    assert set(delta.topic_names()) == {"b"}
    assert delta.topic_id("a") is None and delta.topic_id("b") == T2
    assert delta.topic_name(T1) is None and delta.topic_name(T2) == "b"
    assert delta.topic_configs(T1) == {}
    assert delta.partition(T1, 0) is None and delta.partition_ids(T1) == []
    assert delta.partition_ids(T2) == [0]
    assert delta.partition(T2, 0).leader == 3
    assert delta.feature("metadata.version") == 0
    assert delta.feature("metadata.version", 7) == 7
    assert delta.metadata_version == 1
    assert delta.feature("y") == 5
    assert delta.partition_count == 1
    # The base image did not move.
    assert encode_image(base) == snapshot
    assert base.brokers[1].fenced and base.topic_by_name("a") is not None
    out = delta.apply()
    assert sorted(out.topic_ids) == ["b"] and out.partition_count == 1
    assert out.features == {"y": 5}


# ------------------------------------------------------------------ random sequences

BROKER_IDS = st.integers(0, 3) | st.integers(-(2**31), 2**31 - 1)
TOPIC_IDS = st.sampled_from([T1, T2, T3])
ACL_IDS = st.sampled_from(
    ["AAAAAAAAAAAAAAAAAAAAEA", "AAAAAAAAAAAAAAAAAAAAEQ", "AAAAAAAAAAAAAAAAAAAAEg"]
)
NAMES = st.sampled_from(["a", "b", "c"])
EPOCHS = st.integers(0, 12) | st.integers(-(2**63), 2**63 - 1)
PIDS = st.integers(0, 2) | st.integers(-(2**31), 2**31 - 1)
SMALL_LISTS = st.lists(st.integers(-1, 4), max_size=4).map(tuple)
NULLABLE_LISTS = st.none() | SMALL_LISTS
INT8 = st.integers(-128, 127)


@st.composite
def _register(draw):
    version = draw(st.integers(0, 1))
    return RegisterBrokerRecord(
        broker_id=draw(BROKER_IDS),
        incarnation_id=draw(st.sampled_from([INC_A, INC_B])),
        broker_epoch=draw(EPOCHS),
        end_points=draw(st.sampled_from([(), EP])),
        features=draw(st.sampled_from([(), MV])),
        rack=draw(st.none() | st.sampled_from(["r1", "r2"])),
        fenced=draw(st.booleans()),
        in_controlled_shutdown=draw(st.booleans()) if version else False,
        version=version,
    )


@st.composite
def _change(draw):
    version = draw(st.integers(0, 1))
    return BrokerRegistrationChangeRecord(
        broker_id=draw(BROKER_IDS),
        broker_epoch=draw(EPOCHS),
        fenced=draw(st.sampled_from([-1, 0, 1]) | INT8),
        in_controlled_shutdown=draw(st.sampled_from([0, 1]) | INT8) if version else 0,
        version=version,
    )


records = st.one_of(
    _register(),
    _change(),
    st.builds(UnregisterBrokerRecord, broker_id=BROKER_IDS, broker_epoch=EPOCHS),
    st.builds(TopicRecord, name=NAMES, topic_id=TOPIC_IDS),
    st.builds(
        PartitionRecord,
        partition_id=PIDS,
        topic_id=TOPIC_IDS,
        replicas=SMALL_LISTS,
        isr=SMALL_LISTS,
        removing_replicas=SMALL_LISTS,
        adding_replicas=SMALL_LISTS,
        leader=st.integers(-1, 4),
        leader_recovery_state=st.integers(0, 1),
        leader_epoch=st.integers(0, 5),
        partition_epoch=st.integers(0, 5),
    ),
    st.builds(
        PartitionChangeRecord,
        partition_id=PIDS,
        topic_id=TOPIC_IDS,
        isr=NULLABLE_LISTS,
        leader=st.integers(-2, 4),
        replicas=NULLABLE_LISTS,
        removing_replicas=NULLABLE_LISTS,
        adding_replicas=NULLABLE_LISTS,
        leader_recovery_state=st.integers(-1, 1),
    ),
    st.builds(
        ConfigRecord,
        resource_type=st.sampled_from([2, 4]) | INT8,
        resource_name=NAMES | st.sampled_from(["", "1", "007", "-1"]),
        name=st.sampled_from(["retention.ms", "cleanup.policy"]),
        value=st.none() | st.sampled_from(["1", "2"]),
    ),
    st.builds(RemoveTopicRecord, topic_id=TOPIC_IDS),
    st.builds(
        ClientQuotaRecord,
        entity=st.lists(
            st.builds(
                EntityData,
                st.sampled_from(["user", "client-id", "ip", "group"]),
                st.sampled_from([None, "a", "", "10.0.0.1"]),
            ),
            max_size=3,
        ).map(tuple),
        key=st.sampled_from(
            ["producer_byte_rate", "request_percentage", "connection_creation_rate", "x"]
        ),
        value=st.sampled_from([1.0, 2.0, 0.0, -1.0, 1.5, 2.0**40]),
        remove=st.booleans(),
    ),
    st.builds(
        ProducerIdsRecord,
        broker_id=st.integers(-1, 3),
        broker_epoch=st.integers(-1, 9),
        next_producer_id=st.sampled_from([0, 1000, 2000, 3000]),
    ),
    st.builds(
        AccessControlEntryRecord,
        id=ACL_IDS,
        resource_type=st.sampled_from([0, 1, 2, 3, 4, 9]),
        resource_name=st.sampled_from(["t", "*", "kafka-cluster", ""]),
        pattern_type=st.sampled_from([2, 3, 4]),
        principal=st.sampled_from(["User:a", "User:*", "a"]),
        host=st.sampled_from(["*", "h"]),
        operation=st.sampled_from([1, 2, 3]),
        permission_type=st.sampled_from([2, 3]),
    ),
    st.builds(RemoveAccessControlEntryRecord, id=ACL_IDS),
    st.builds(
        FeatureLevelRecord,
        name=st.sampled_from(["metadata.version", "x"]),
        feature_level=st.integers(0, 3) | st.integers(-(2**15), 2**15 - 1),
    ),
    st.just(NoOpRecord()),
    st.builds(
        LeaderChangeRecord,
        controller_epoch=st.integers(0, 6),
        leader_id=st.integers(-1, 3),
        leader_url=st.sampled_from(["http://n0", "http://n1"]),
    ),
)
record_lists = st.lists(records, max_size=30)


def _acl_valid(r) -> bool:
    """An ACL that could have been created (the model's own reading of
    validateNewAcl, AclApis' checks and a Type:name principal)."""
    return (
        r.resource_type in range(2, 8)
        and r.pattern_type in (3, 4)
        and r.operation in range(2, 15)
        and r.permission_type in (2, 3)
        and r.resource_name != ""
        and (r.resource_type != 4 or r.resource_name == "kafka-cluster")
        and ":" in r.principal
        and not r.principal.startswith(":")
        and r.host != ""
    )


def model_replay(recs) -> dict:
    """An independent, mutable reference replay of docs/kafka-rules.md and docs/api.md rules, for comparison."""
    brokers: dict[int, dict] = {}
    topics: dict[str, dict] = {}  # id -> {"name", "partitions": {pid: dict}, "configs"}
    features: dict[str, int] = {}
    ctrl = {"epoch": 0, "leader": -1, "url": None}
    ignored = 0
    broker_configs: dict[str, dict[str, str]] = {}
    next_producer_id = 0
    client_quotas: dict[frozenset, dict[str, float]] = {}
    acls: dict[str, tuple] = {}
    for offset, r in enumerate(recs):
        ok = True
        if isinstance(r, RegisterBrokerRecord):
            brokers[r.broker_id] = dict(
                inc=r.incarnation_id,
                epoch=r.broker_epoch,
                listeners=r.end_points,
                features=r.features,
                rack=r.rack,
                fenced=r.fenced,
                ics=r.in_controlled_shutdown and r.version >= 1,
                offset=offset,
            )
        elif isinstance(r, BrokerRegistrationChangeRecord):
            b = brokers.get(r.broker_id)
            ics = r.in_controlled_shutdown if r.version >= 1 else 0
            if b is None or b["epoch"] != r.broker_epoch or r.fenced not in (-1, 0, 1):
                ok = False
            elif ics not in (0, 1):
                ok = False
            else:
                if r.fenced:
                    b["fenced"] = r.fenced == 1
                if ics == 1:
                    b["ics"] = True
        elif isinstance(r, UnregisterBrokerRecord):
            b = brokers.get(r.broker_id)
            if b is None or b["epoch"] != r.broker_epoch:
                ok = False
            else:
                del brokers[r.broker_id]
        elif isinstance(r, TopicRecord):
            if r.topic_id in topics or any(t["name"] == r.name for t in topics.values()):
                ok = False
            else:
                topics[r.topic_id] = {"name": r.name, "partitions": {}, "configs": {}}
        elif isinstance(r, PartitionRecord):
            if r.topic_id not in topics:
                ok = False
            else:
                topics[r.topic_id]["partitions"][r.partition_id] = dict(
                    replicas=r.replicas,
                    isr=r.isr,
                    removing=r.removing_replicas,
                    adding=r.adding_replicas,
                    leader=r.leader,
                    lrs=r.leader_recovery_state,
                    le=r.leader_epoch,
                    pe=r.partition_epoch,
                )
        elif isinstance(r, PartitionChangeRecord):
            p = topics.get(r.topic_id, {"partitions": {}})["partitions"].get(r.partition_id)
            if p is None:
                ok = False
            else:
                for attr, key in [
                    ("isr", "isr"),
                    ("replicas", "replicas"),
                    ("removing_replicas", "removing"),
                    ("adding_replicas", "adding"),
                ]:
                    if getattr(r, attr) is not None:
                        p[key] = getattr(r, attr)
                if r.leader != -2:
                    p["leader"] = r.leader
                    p["le"] += 1
                if r.leader_recovery_state != -1:
                    p["lrs"] = r.leader_recovery_state
                p["pe"] += 1
        elif isinstance(r, ConfigRecord) and r.resource_type == 4:
            name = r.resource_name
            if name != "" and not (name.isdigit() and int(name) < 2**31):
                ok = False
            else:
                configs = broker_configs.setdefault(name, {})
                if r.value is None:
                    configs.pop(r.name, None)
                else:
                    configs[r.name] = r.value
                if not configs:
                    del broker_configs[name]
        elif isinstance(r, ConfigRecord):
            tid = next((i for i, t in topics.items() if t["name"] == r.resource_name), None)
            if r.resource_type != 2 or tid is None:
                ok = False
            elif r.value is None:
                topics[tid]["configs"].pop(r.name, None)
            else:
                topics[tid]["configs"][r.name] = r.value
        elif isinstance(r, RemoveTopicRecord):
            ok = topics.pop(r.topic_id, None) is not None
        elif isinstance(r, ClientQuotaRecord):
            types = [e.entity_type for e in r.entity]
            kinds = set(types)
            ip = kinds == {"ip"}
            allowed = (
                {"connection_creation_rate": "INT"}
                if ip
                else {"producer_byte_rate": "LONG", "request_percentage": "DOUBLE"}
            )
            ok = (
                bool(types)
                and len(kinds) == len(types)
                and kinds <= {"user", "client-id", "ip"}
                and (ip or "ip" not in kinds)
                and all(e.entity_name != "" for e in r.entity)
                and r.key in allowed
                and (
                    r.remove
                    or (
                        r.value > 0
                        and (
                            allowed[r.key] == "DOUBLE"
                            # an integral key's value fits its type (Kafka's range check)
                            or r.value == int(r.value)
                            and r.value <= _INTEGRAL_MAX[allowed[r.key]]
                        )
                    )
                )
            )
            if ok:
                quotas = client_quotas.setdefault(frozenset(r.entity), {})
                if r.remove:
                    quotas.pop(r.key, None)
                else:
                    quotas[r.key] = r.value
                if not quotas:
                    del client_quotas[frozenset(r.entity)]
        elif isinstance(r, ProducerIdsRecord):
            ok = r.next_producer_id > next_producer_id
            next_producer_id = max(next_producer_id, r.next_producer_id)
        elif isinstance(r, AccessControlEntryRecord):
            binding = (r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host,
                       r.operation, r.permission_type)  # fmt: skip
            ok = _acl_valid(r) and r.id not in acls and binding not in acls.values()
            if ok:
                acls[r.id] = binding
        elif isinstance(r, RemoveAccessControlEntryRecord):
            ok = acls.pop(r.id, None) is not None
        elif isinstance(r, FeatureLevelRecord):
            if r.feature_level < 0:  # not a level: ignored
                ignored += 1
            elif r.feature_level == 0:
                features.pop(r.name, None)
            else:
                features[r.name] = r.feature_level
        elif isinstance(r, LeaderChangeRecord):
            if r.controller_epoch > ctrl["epoch"]:
                ctrl = {"epoch": r.controller_epoch, "leader": r.leader_id, "url": r.leader_url}
            else:
                ok = False
        if not ok:
            ignored += 1
    return dict(
        brokers=brokers,
        topics=topics,
        broker_configs=broker_configs,
        next_producer_id=next_producer_id,
        client_quotas=client_quotas,
        acls=acls,
        features=features,
        ctrl=ctrl,
        ignored=ignored,
        next_offset=len(recs),
    )


def image_as_model(img: MetadataImage) -> dict:
    return dict(
        brokers={
            i: dict(
                inc=b.incarnation_id,
                epoch=b.epoch,
                listeners=b.listeners,
                features=b.features,
                rack=b.rack,
                fenced=b.fenced,
                ics=b.in_controlled_shutdown,
                offset=b.registration_offset,
            )
            for i, b in img.brokers.items()
        },
        topics={
            i: {
                "name": t.name,
                "partitions": {
                    pid: dict(
                        replicas=p.replicas,
                        isr=p.isr,
                        removing=p.removing_replicas,
                        adding=p.adding_replicas,
                        leader=p.leader,
                        lrs=p.leader_recovery_state,
                        le=p.leader_epoch,
                        pe=p.partition_epoch,
                    )
                    for pid, p in t.partitions.items()
                },
                "configs": t.configs,
            }
            for i, t in img.topics.items()
        },
        broker_configs=img.broker_configs,
        next_producer_id=img.next_producer_id,
        client_quotas={
            frozenset(EntityData(*c) for c in entity): quotas
            for entity, quotas in img.client_quotas.items()
        },
        acls={i: tuple(acl) for i, acl in img.acls.items()},
        features=img.features,
        ctrl={"epoch": img.controller_epoch, "leader": img.leader_id, "url": img.leader_url},
        ignored=img.ignored_records,
        next_offset=img.next_offset,
    )


def check_invariants(img: MetadataImage) -> None:
    assert img.partition_count == sum(len(t.partitions) for t in img.topics.values())
    assert {t.name: i for i, t in img.topics.items()} == img.topic_ids
    assert all(t.topic_id == i for i, t in img.topics.items())
    assert all(b.broker_id == i for i, b in img.brokers.items())
    assert 0 <= img.ignored_records <= img.next_offset


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists)
def test_apply_records_matches_reference_model(recs):
    img = apply_records(EMPTY_IMAGE, recs)
    assert image_as_model(img) == model_replay(recs)
    check_invariants(img)


def _chunks(draw, recs):
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(recs) - 1)), max_size=6)))
    bounds = [0, *[c for c in cuts if c < len(recs)], len(recs)]
    return [recs[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if a < b]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists, st.data())
def test_one_batch_at_a_time_equals_all_at_once(recs, data):
    whole = apply_records(EMPTY_IMAGE, recs)
    stepped = EMPTY_IMAGE
    for chunk in _chunks(data.draw, recs):
        stepped = apply_records(stepped, chunk)
    assert stepped == whole
    assert encode_image(stepped) == encode_image(whole)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists, st.data())
def test_apply_batches_of_the_current_epoch_equals_apply_records(recs, data):
    # A chunk opened by a LEADER_CHANGE would be judged as a new-epoch batch: put a
    # NO_OP first so every batch is an ordinary batch of the epoch it is applied at.
    recs = [NoOpRecord(), *recs]
    chunks = _chunks(data.draw, recs)
    fixed = []
    for chunk in chunks:
        if isinstance(chunk[0], LeaderChangeRecord):
            fixed[-1] = fixed[-1] + chunk
        else:
            fixed.append(chunk)
    img = EMPTY_IMAGE
    for chunk in fixed:
        out = apply(img, Batch(img.controller_epoch, 0, tuple(chunk)))
        assert out.next_offset == img.next_offset + len(chunk)
        img = out
    assert img == apply_records(EMPTY_IMAGE, recs)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists, record_lists, st.integers(-3, 10))
def test_apply_never_raises_and_never_mutates_its_input(first, second, batch_epoch):
    base = apply_records(EMPTY_IMAGE, first)
    frozen = copy.deepcopy(base)
    encoded = encode_image(base)
    out = apply(base, Batch(batch_epoch, 0, tuple(second)))
    out2 = apply_records(base, second)
    check_invariants(out)
    check_invariants(out2)
    assert base == frozen
    assert encode_image(base) == encoded
    if out is not base:
        assert out.next_offset == base.next_offset + len(second)
    else:
        assert not batch_applies(base.controller_epoch, Batch(batch_epoch, 0, tuple(second)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists, record_lists)
def test_image_delta_reads_agree_with_the_applied_image(first, second):
    base = apply_records(EMPTY_IMAGE, first)
    delta = ImageDelta(base)
    for r in second:
        delta.replay(r)
    img = delta.apply()
    assert delta.broker_ids() == sorted(img.brokers)
    assert all(delta.broker(i) == img.brokers[i] for i in img.brokers)
    assert all(delta.is_active(i) == img.brokers[i].active for i in img.brokers)
    assert delta.topic_ids() == sorted(img.topics)
    assert set(delta.topic_names()) == set(img.topic_ids)
    for name, tid in img.topic_ids.items():
        assert delta.topic_id(name) == tid
        assert delta.topic_name(tid) == name
    for tid, topic in img.topics.items():
        assert delta.has_topic(tid)
        assert delta.topic_configs(tid) == topic.configs
        assert delta.partition_ids(tid) == sorted(topic.partitions)
        for pid, part in topic.partitions.items():
            assert delta.partition(tid, pid) == part
    for tid in (T1, T2, T3):
        if tid not in img.topics:
            assert not delta.has_topic(tid) and delta.partition_ids(tid) == []
            assert delta.partition(tid, 0) is None
    for name in ("metadata.version", "x"):
        assert delta.feature(name, -99) == img.features.get(name, -99)
    assert delta.metadata_version == img.metadata_version
    assert delta.partition_count == img.partition_count


def test_a_batch_lands_only_at_the_offset_it_was_decided_for():
    base = apply_records(EMPTY_IMAGE, [NoOpRecord(), NoOpRecord()])
    assert base.next_offset == 2
    assert apply(base, Batch(0, 0, (NoOpRecord(),), base_offset=2)).next_offset == 3
    assert apply(base, Batch(0, 0, (NoOpRecord(),), base_offset=1)) is base
    assert apply(base, Batch(0, 0, (NoOpRecord(),), base_offset=3)) is base
    assert apply(base, Batch(0, 0, (NoOpRecord(),))).next_offset == 3  # -1: anywhere
    assert batch_applies(0, Batch(0, 0, (), base_offset=7))  # no offset given: epoch only
    assert not batch_applies(0, Batch(0, 0, (), base_offset=7), next_offset=2)


def test_replay_returns_why_it_ignored_a_record_and_the_image_keeps_the_last_16():
    from metadata_records.image import IGNORED_REASONS_KEPT
    from metadata_records.records import RemoveAccessControlEntryRecord
    from metadata_records.snapshot import decode_image, image_digest

    delta = ImageDelta(EMPTY_IMAGE)
    assert delta.replay(NoOpRecord()) is None
    reason = delta.replay(RemoveAccessControlEntryRecord(id="AAAAAAAAAAAAAAAAAAAAAA"))
    assert reason == "RemoveAccessControlEntryRecord for unknown ACL id AAAAAAAAAAAAAAAAAAAAAA"
    assert delta.ignored_records == 1 and delta.ignored_reasons == (reason,)
    ghosts = [RemoveTopicRecord(topic_id=uuid_from_bytes(bytes([i]) * 16)) for i in range(20)]
    img = apply_records(delta.apply(), ghosts)
    assert img.ignored_records == 21 and len(img.ignored_reasons) == IGNORED_REASONS_KEPT == 16
    assert (
        img.ignored_reasons[-1] == f"RemoveTopicRecord for unknown topic id {ghosts[-1].topic_id}"
    )
    # Not replicated state: neither the snapshot nor the digest holds it, and
    # an image restored from the snapshot (no reasons) equals the replayed one.
    back = decode_image(encode_image(img))
    assert back.ignored_reasons == () and back.ignored_records == 21
    assert back == img and image_digest(back) == image_digest(img)
    assert encode_image(img._replace(ignored_reasons=())) == encode_image(img)
