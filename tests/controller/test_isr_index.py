from hypothesis import given, settings
from hypothesis import strategies as st

from controller import isr_index
from controller.isr_index import BrokersToIsrs
from metadata_records.delta import ImageDelta
from metadata_records.image import EMPTY_IMAGE, PartitionRegistration
from metadata_records.records import PartitionRecord, TopicRecord

T1 = "VAAAAAAAAAAAAAAAAAAAAQ"
T2 = "VAAAAAAAAAAAAAAAAAAAAg"


def reg(isr, leader):
    return PartitionRegistration((1, 2, 3), tuple(isr), (), (), leader, 0, 0, 0)


def test_tracks_isr_members_leaders_and_leaderless():
    index = BrokersToIsrs()
    index.update(T1, 0, None, reg([1, 2], 1))
    index.update(T1, 1, None, reg([2, 3], 2))
    index.update(T2, 0, None, reg([3], -1))
    assert index.partitions_with_broker_in_isr(2) == [(T1, 0), (T1, 1)]
    assert index.partitions_led_by(1) == [(T1, 0)]
    assert index.partitions_without_leader() == [(T2, 0)]
    assert index.leads_any(2) and not index.leads_any(3)
    index.update(T1, 0, reg([1, 2], 1), reg([2], 2))
    assert index.partitions_with_broker_in_isr(1) == []
    assert not index.leads_any(1)
    assert index.partitions_led_by(2) == [(T1, 0), (T1, 1)]
    index.update(T2, 0, reg([3], -1), None)
    assert index.partitions_without_leader() == []
    assert index.partitions_with_broker_in_isr(3) == [(T1, 1)]


partitions = st.dictionaries(
    st.tuples(st.sampled_from([T1, T2]), st.integers(0, 5)),
    st.tuples(st.lists(st.integers(1, 4), unique=True, max_size=3), st.integers(-1, 4)),
    max_size=12,
)


@settings(max_examples=300)
@given(before=partitions, after=partitions)
def test_incremental_updates_equal_a_fresh_build(before, after):
    incremental_equals_fresh(before, after)


@settings(max_examples=200)
@given(before=partitions, after=partitions)
def test_it_is_the_same_where_a_brokers_partitions_of_a_topic_outgrow_an_array(before, after):
    """Arrays of at most one id, sets past that: every path between the two."""
    small, isr_index.SMALL = isr_index.SMALL, 1
    try:
        incremental_equals_fresh(before, after)
    finally:
        isr_index.SMALL = small


def incremental_equals_fresh(before, after):
    def view_of(parts):
        delta = ImageDelta(EMPTY_IMAGE)
        delta.replay(TopicRecord(name="a", topic_id=T1))
        delta.replay(TopicRecord(name="b", topic_id=T2))
        for (t, p), (isr, leader) in sorted(parts.items()):
            delta.replay(
                PartitionRecord(
                    partition_id=p, topic_id=t, replicas=(1, 2, 3, 4), isr=tuple(isr), leader=leader
                )
            )
        return delta

    index = BrokersToIsrs.build(view_of(before))
    for key in before.keys() | after.keys():
        old = reg(*before[key]) if key in before else None
        new = reg(*after[key]) if key in after else None
        index.update(*key, old, new)
    fresh = BrokersToIsrs.build(view_of(after))
    for broker in range(-1, 5):
        assert index.partitions_with_broker_in_isr(broker) == fresh.partitions_with_broker_in_isr(
            broker
        )
        assert index.partitions_led_by(broker) == fresh.partitions_led_by(broker)
    assert index.imbalanced_partitions() == fresh.imbalanced_partitions()
    assert index.imbalanced_count == fresh.imbalanced_count
