"""The seam between ImageDelta._replay_quick (the common PartitionChangeRecord
merged in one loop) and ``replay``, record by record: the same records give
the same image, offsets and ignored count either way (QUICK_REPLAY)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata_records import delta as delta_module
from metadata_records.delta import ImageDelta, apply_records
from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import (
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from metadata_records.snapshot import encode_image

T1, T2, T3 = "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw", "AAAAAAAAAAAAAAAAAAAABA"
TOPICS = st.sampled_from([T1, T2, T3])  # T3 is never created
PIDS = st.integers(0, 4)  # 4 is never created
LISTS = st.lists(st.integers(0, 4), max_size=4).map(tuple)
NULLABLE = st.none() | LISTS


def _base():
    records = [TopicRecord(name="a", topic_id=T1), TopicRecord(name="b", topic_id=T2)]
    for topic_id in (T1, T2):
        for pid in range(4):
            records.append(
                PartitionRecord(
                    partition_id=pid,
                    topic_id=topic_id,
                    replicas=(1, 2, 3),
                    isr=(1, 2, 3) if pid % 2 else (1, 2),
                    leader=1 + pid % 3,
                    eligible_leader_replicas=(3,) if pid == 3 else None,
                    last_known_elr=(2,) if pid == 3 else None,
                    version=2 if pid == 3 else 0,
                )
            )
    return apply_records(EMPTY_IMAGE, records)


BASE = _base()

# Mostly what the quick loop takes (only the ISR and the leader), with every
# other field now and then, out-of-range recovery states included.
quick_changes = st.builds(
    PartitionChangeRecord,
    partition_id=PIDS,
    topic_id=TOPICS,
    isr=NULLABLE,
    leader=st.sampled_from([-2, -1, 1, 2, 3]),
)
other_changes = st.builds(
    PartitionChangeRecord,
    partition_id=PIDS,
    topic_id=TOPICS,
    isr=NULLABLE,
    leader=st.integers(-2, 4),
    replicas=NULLABLE,
    removing_replicas=NULLABLE,
    adding_replicas=NULLABLE,
    leader_recovery_state=st.integers(-2, 2),
    eligible_leader_replicas=NULLABLE,
    last_known_elr=NULLABLE,
    version=st.just(2),
)
records = st.one_of(
    quick_changes,
    quick_changes,
    quick_changes,
    other_changes,
    st.builds(
        PartitionRecord,
        partition_id=PIDS,
        topic_id=TOPICS,
        replicas=LISTS,
        isr=LISTS,
        leader=st.integers(-1, 3),
    ),
    st.builds(TopicRecord, name=st.sampled_from(["a", "b", "c"]), topic_id=TOPICS),
    st.builds(RemoveTopicRecord, topic_id=TOPICS),
    st.just(NoOpRecord()),
)


def _replayed(image, recs, quick: bool, monkeypatch) -> ImageDelta:
    monkeypatch.setattr(delta_module, "QUICK_REPLAY", quick)
    delta = ImageDelta(image)
    delta.replay_records(recs)
    return delta


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(records, max_size=40), st.lists(records, max_size=40))
def test_the_quick_loop_replays_what_replay_does(monkeypatch, first, second):
    for image in (BASE, apply_records(BASE, first)):
        quick = _replayed(image, second, True, monkeypatch)
        plain = _replayed(image, second, False, monkeypatch)
        assert quick.next_offset == plain.next_offset == image.next_offset + len(second)
        assert quick.ignored_records == plain.ignored_records
        for topic_id in (T1, T2, T3):
            for pid in range(5):
                assert quick.partition(topic_id, pid) == plain.partition(topic_id, pid)
        got, want = quick.apply(), plain.apply()
        assert got == want
        assert encode_image(got) == encode_image(want)


@pytest.mark.parametrize("quick", [True, False])
def test_replay_records_is_what_a_batch_and_record_by_record_replay_give(quick, monkeypatch):
    recs = [
        PartitionChangeRecord(0, T1, isr=(1, 2)),
        PartitionChangeRecord(0, T1, leader=2),
        PartitionChangeRecord(1, T2, isr=(1, 2, 3), leader=-1),
        PartitionChangeRecord(9, T1, isr=(1,)),  # no such partition: ignored
        PartitionChangeRecord(0, T3, isr=(1,)),  # no such topic: ignored
        RemoveTopicRecord(T2),
        PartitionChangeRecord(1, T2, isr=(1,)),  # its topic is gone: ignored
    ]
    delta = _replayed(BASE, recs, quick, monkeypatch)
    assert delta.ignored_records == 3
    one_by_one = ImageDelta(BASE)
    for r in recs:
        one_by_one.replay(r)
    assert delta.apply() == one_by_one.apply()
    part = delta.partition(T1, 0)
    assert (part.isr, part.leader, part.leader_epoch, part.partition_epoch) == ((1, 2), 2, 1, 2)
    part = BASE.partition(T2, 1)
    assert part.isr is part.replicas  # a full ISR shares the replicas' tuple


def test_the_quick_loop_takes_the_common_changes(monkeypatch):
    """Only what it does not take reaches ``replay``."""
    calls = []
    plain = ImageDelta.replay
    monkeypatch.setattr(ImageDelta, "replay", lambda self, r: (calls.append(r), plain(self, r)))
    recs = [PartitionChangeRecord(pid, T1, isr=(1, 2, 3)) for pid in range(4)]
    odd = PartitionChangeRecord(0, T1, replicas=(1, 2, 3, 4))
    delta = _replayed(BASE, [*recs, odd], True, monkeypatch)
    assert calls == [odd]
    # A full ISR shares the replicas' tuple, as PartitionRegistration.merge does.
    assert all(
        delta.partition(T1, pid).isr is delta.partition(T1, pid).replicas for pid in (1, 2, 3)
    )
