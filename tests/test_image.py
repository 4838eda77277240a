"""metadata_records.image: registrations, merge, MetadataImage helpers and memory sharing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata_records.delta import apply, apply_records
from metadata_records.image import (
    EMPTY_IMAGE,
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from metadata_records.records import (
    Batch,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from metadata_records.uuids import uuid_from_bytes

T1 = uuid_from_bytes(b"\x01" * 16)
T2 = uuid_from_bytes(b"\x02" * 16)
INC = uuid_from_bytes(b"\xaa" * 16)


def part(**kw):
    fields = dict(
        replicas=(1, 2, 3),
        isr=(1, 2, 3),
        removing_replicas=(),
        adding_replicas=(),
        leader=1,
        leader_recovery_state=0,
        leader_epoch=5,
        partition_epoch=8,
    )
    fields.update(kw)
    return PartitionRegistration(**fields)


def pcr(**kw):
    return PartitionChangeRecord(partition_id=0, topic_id=T1, **kw)


def broker(**kw):
    fields = dict(
        broker_id=1,
        incarnation_id=INC,
        epoch=3,
        listeners=(),
        features=(),
        rack=None,
        fenced=False,
        in_controlled_shutdown=False,
        registration_offset=3,
    )
    fields.update(kw)
    return BrokerRegistration(**fields)


# ------------------------------------------------------------------ PartitionRegistration


def test_from_record():
    r = PartitionRecord(
        partition_id=4,
        topic_id=T1,
        replicas=(1, 2),
        isr=(2,),
        removing_replicas=(1,),
        adding_replicas=(3,),
        leader=2,
        leader_recovery_state=1,
        leader_epoch=6,
        partition_epoch=7,
    )
    assert PartitionRegistration.from_record(r) == PartitionRegistration(
        (1, 2), (2,), (1,), (3,), 2, 1, 6, 7
    )


def test_merge_no_fields_bumps_only_partition_epoch():
    p = part()
    m = p.merge(pcr())
    assert m == p._replace(partition_epoch=9)


@pytest.mark.parametrize("leader", [1, 2, 3, -1])
def test_merge_any_named_leader_bumps_leader_epoch(leader):
    m = part().merge(pcr(leader=leader))
    assert m.leader == leader
    assert m.leader_epoch == 6
    assert m.partition_epoch == 9


def test_merge_isr_change_alone_keeps_leader_epoch():
    m = part().merge(pcr(isr=(1,)))
    assert m.isr == (1,) and m.leader == 1 and m.leader_epoch == 5 and m.partition_epoch == 9


def test_merge_sets_lists_and_lrs():
    p = part(removing_replicas=(3,), adding_replicas=(4,), leader_recovery_state=1)
    m = p.merge(
        pcr(
            replicas=(1, 4),
            isr=(4,),
            removing_replicas=(),
            adding_replicas=(),
            leader_recovery_state=0,
        )
    )
    assert m.replicas == (1, 4)
    assert m.isr == (4,)
    assert m.removing_replicas == () and m.adding_replicas == ()
    assert m.leader_recovery_state == 0


def test_merge_lrs_minus_one_is_unchanged():
    p = part(leader_recovery_state=1)
    assert p.merge(pcr(leader_recovery_state=-1)).leader_recovery_state == 1
    assert p.merge(pcr(leader_recovery_state=0)).leader_recovery_state == 0


def test_merge_does_not_mutate():
    p = part()
    before = tuple(p)
    p.merge(pcr(leader=2, isr=(2,), replicas=(2,)))
    assert tuple(p) == before


@settings(max_examples=100)
@given(
    st.none() | st.lists(st.integers(0, 5), max_size=4).map(tuple),
    st.integers(-2, 5),
    st.none() | st.lists(st.integers(0, 5), max_size=4).map(tuple),
    st.integers(-1, 1),
)
def test_merge_property(isr, leader, replicas, lrs):
    p = part()
    m = p.merge(pcr(isr=isr, leader=leader, replicas=replicas, leader_recovery_state=lrs))
    assert m.partition_epoch == p.partition_epoch + 1
    assert m.leader_epoch == p.leader_epoch + (leader != -2)
    assert m.leader == (p.leader if leader == -2 else leader)
    assert m.isr == (p.isr if isr is None else isr)
    assert m.replicas == (p.replicas if replicas is None else replicas)
    assert m.leader_recovery_state == (p.leader_recovery_state if lrs == -1 else lrs)


@pytest.mark.parametrize(
    ("removing", "adding", "expected"),
    [((), (), False), ((1,), (), True), ((), (4,), True), ((1,), (4,), True)],
)
def test_is_reassigning(removing, adding, expected):
    assert part(removing_replicas=removing, adding_replicas=adding).is_reassigning is expected


@pytest.mark.parametrize(("leader", "expected"), [(-1, False), (0, True), (3, True)])
def test_has_leader(leader, expected):
    assert part(leader=leader).has_leader is expected


# ------------------------------------------------------------------ BrokerRegistration


@pytest.mark.parametrize(
    ("fenced", "ics", "active"),
    [(False, False, True), (True, False, False), (False, True, False), (True, True, False)],
)
def test_broker_active(fenced, ics, active):
    assert broker(fenced=fenced, in_controlled_shutdown=ics).active is active


# ------------------------------------------------------------------ MetadataImage


def test_empty_image():
    assert EMPTY_IMAGE == MetadataImage({}, {}, {}, {})
    assert EMPTY_IMAGE.next_offset == 0
    assert EMPTY_IMAGE.last_offset == -1
    assert EMPTY_IMAGE.metadata_version == 1  # Kafka's default without a record
    assert EMPTY_IMAGE.topic_by_name("x") is None
    assert EMPTY_IMAGE.partition(T1, 0) is None
    assert EMPTY_IMAGE.partition_count == 0 and EMPTY_IMAGE.ignored_records == 0


def test_image_is_frozen():
    with pytest.raises(AttributeError):
        EMPTY_IMAGE.next_offset = 5  # type: ignore[misc]


def test_metadata_version_from_features():
    assert EMPTY_IMAGE._replace(features={"metadata.version": 2}).metadata_version == 2
    assert EMPTY_IMAGE._replace(features={"other": 2}).metadata_version == 1


def test_topic_by_name_and_partition():
    p0 = part()
    topic = TopicImage("orders", T1, {0: p0}, {})
    img = EMPTY_IMAGE._replace(topics={T1: topic}, topic_ids={"orders": T1}, partition_count=1)
    assert img.topic_by_name("orders") is topic
    assert img.topic_by_name("Orders") is None
    assert img.partition(T1, 0) is p0
    assert img.partition(T1, 1) is None
    assert img.partition(T2, 0) is None


# ------------------------------------------------------------------ memory sharing


def _two_of_everything():
    records = [
        RegisterBrokerRecord(broker_id=1, incarnation_id=INC, broker_epoch=0),
        RegisterBrokerRecord(broker_id=2, incarnation_id=INC, broker_epoch=1),
        TopicRecord(name="a", topic_id=T1),
        TopicRecord(name="b", topic_id=T2),
    ]
    for tid in (T1, T2):
        for pid in (0, 1):
            records.append(
                PartitionRecord(
                    partition_id=pid, topic_id=tid, replicas=(1, 2), isr=(1, 2), leader=1
                )
            )
    records.append(FeatureLevelRecord(name="metadata.version", feature_level=12))
    return apply_records(EMPTY_IMAGE, records)


def test_untouched_topics_brokers_and_partitions_are_shared():
    base = _two_of_everything()
    out = apply(
        base,
        Batch(
            0,
            0,
            (
                BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, fenced=-1),
                PartitionChangeRecord(partition_id=0, topic_id=T1, leader=2),
            ),
        ),
    )
    assert not out.brokers[1].fenced
    assert out.brokers[2] is base.brokers[2]
    assert out.brokers is not base.brokers
    assert out.topics[T2] is base.topics[T2]
    assert out.topics[T1] is not base.topics[T1]
    # Partitions are shared encoded (partition_states.py): only 0 differs.
    assert list(out.topics[T1].partitions.differing(base.topics[T1].partitions)) == [0]
    assert out.topic_ids is base.topic_ids  # no topic added or removed
    assert out.features is base.features
    # And the base still has the old values.
    assert base.brokers[1].fenced
    assert base.partition(T1, 0).leader == 1


def test_a_batch_touching_nothing_shares_every_map():
    base = _two_of_everything()
    out = apply(base, Batch(0, 0, (NoOpRecord(),)))
    assert out is not base and out.next_offset == base.next_offset + 1
    assert out.brokers is base.brokers
    assert out.topics is base.topics
    assert out.topic_ids is base.topic_ids
    assert out.features is base.features


def test_config_change_shares_the_partitions_dict():
    base = _two_of_everything()
    out = apply_records(
        base, [ConfigRecord(resource_type=2, resource_name="a", name="k", value="v")]
    )
    assert out.topics[T1].configs == {"k": "v"}
    assert base.topics[T1].configs == {}
    assert out.topics[T1].partitions is base.topics[T1].partitions
    assert out.topics[T2] is base.topics[T2]


def test_isr_tuple_is_shared_with_replicas_when_equal():
    replicas = tuple(range(1, 4))
    isr = tuple([1, 2, 3])
    assert isr == replicas and isr is not replicas
    r = PartitionRecord(partition_id=0, topic_id=T1, replicas=replicas, isr=isr)
    p = PartitionRegistration.from_record(r)
    assert p.isr is p.replicas
    # A different ISR keeps its own tuple.
    p2 = PartitionRegistration.from_record(
        PartitionRecord(partition_id=0, topic_id=T1, replicas=replicas, isr=(1, 2))
    )
    assert p2.isr == (1, 2) and p2.isr is not p2.replicas


def test_merge_shares_isr_with_new_or_kept_replicas():
    p = PartitionRegistration.from_record(
        PartitionRecord(partition_id=0, topic_id=T1, replicas=tuple(range(1, 4)), isr=(1,))
    )
    # ISR grows back to the replica list: shared with the kept replicas.
    m = p.merge(pcr(isr=tuple([1, 2, 3])))
    assert m.isr == (1, 2, 3) and m.isr is m.replicas is p.replicas
    # New replicas and an equal ISR in the same record: shared with the new replicas.
    new_replicas = tuple(range(4, 6))
    m2 = p.merge(pcr(replicas=new_replicas, isr=tuple([4, 5])))
    assert m2.isr is m2.replicas is new_replicas


def test_apply_shares_isr_with_replicas():
    img = apply_records(
        EMPTY_IMAGE,
        [
            TopicRecord(name="a", topic_id=T1),
            PartitionRecord(
                partition_id=0, topic_id=T1, replicas=tuple(range(3)), isr=tuple([0, 1, 2])
            ),
        ],
    )
    p = img.partition(T1, 0)
    assert p.isr is p.replicas


def test_a_registration_turns_back_into_the_record_that_makes_it():
    reg = PartitionRegistration((1, 2, 3), (1, 3), (3,), (), 1, 0, 4, 9)
    record = reg.to_record("fPZv1VBsRFmnlRvmGcOW9w", 7)
    assert (record.topic_id, record.partition_id) == ("fPZv1VBsRFmnlRvmGcOW9w", 7)
    assert PartitionRegistration.from_record(record) == reg
