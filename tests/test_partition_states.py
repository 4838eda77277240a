"""PartitionStates (metadata_records/partition_states.py), partitions kept
encoded, against a dict updated as ``{**partitions, **changed}``: the same
contents, lookups and views after any sequence of updates, the order by
chunk and by id within one, and every earlier map left as it was. And the
switch (COMPACT_PARTITIONS) against its plain twin, PartitionMap: a log
replayed either way gives equal images with equal encodings."""

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata_records import partition_states as states_module
from metadata_records.delta import apply_records
from metadata_records.image import EMPTY_IMAGE, PartitionRegistration
from metadata_records.partition_map import PartitionMap
from metadata_records.partition_states import (
    CHUNK,
    CHUNK_BITS,
    EMPTY_STATES,
    PartitionStates,
    partitions_with,
)
from metadata_records.records import (
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from metadata_records.snapshot import decode_image, encode_image, image_digest

# Ids around chunk edges, far apart, negative (a log may hold any int32),
# and dense from 0 as real topics are.
IDS = st.one_of(
    st.integers(0, 3 * CHUNK),
    st.sampled_from([CHUNK - 1, CHUNK, 2 * CHUNK - 1, 100_000, (1 << 31) - 1, -1, -CHUNK - 3]),
)
BROKERS = st.lists(st.integers(0, 1 << 31), max_size=5).map(tuple)


@st.composite
def registrations(draw):
    replicas = draw(BROKERS)
    isr = replicas if draw(st.booleans()) else draw(BROKERS)  # shared, as apply keeps it
    return PartitionRegistration(
        replicas,
        isr,
        draw(BROKERS),
        draw(BROKERS),
        draw(st.integers(-2, 1 << 31)),
        draw(st.integers(0, 2)),
        draw(st.integers(0, (1 << 31) - 1)),
        draw(st.integers(0, (1 << 31) - 1)),
        draw(BROKERS),
        draw(BROKERS),
    )


CHANGES = st.dictionaries(IDS, registrations(), max_size=40)


def same(ps: PartitionStates, plain: dict) -> None:
    assert len(ps) == len(plain)
    order: dict[int, list[int]] = {}
    for pid in plain:
        order.setdefault(pid >> CHUNK_BITS, []).append(pid)
    expected = [pid for chunk in order.values() for pid in sorted(chunk)]
    assert list(ps) == list(ps.keys()) == expected
    assert list(ps.items()) == [(pid, plain[pid]) for pid in expected]
    assert list(ps.values()) == [plain[pid] for pid in expected]
    if list(plain) == sorted(plain) and min(plain, default=0) >= 0:
        assert list(ps) == list(plain)  # every topic Kafka makes
    assert ps == plain and plain == ps and dict(ps) == plain
    for pid, part in plain.items():
        got = ps[pid]
        assert got == part and ps.get(pid) == part and pid in ps
        assert type(got) is PartitionRegistration and got._fields == part._fields
        assert (got.isr is got.replicas) == (part.isr is part.replicas)


@settings(max_examples=200, deadline=None)
@given(st.lists(CHANGES, max_size=10), st.lists(IDS, max_size=10))
def test_updates_agree_with_a_dict_copied_and_updated(updates, probes):
    ps, plain = EMPTY_STATES, {}
    history = [(ps, dict(plain))]
    for changed in updates:
        ps, plain = ps.updated(changed), {**plain, **changed}
        history.append((ps, dict(plain)))
        same(ps, plain)
    for old, contents in history:  # images share them: every earlier map unchanged
        same(old, contents)
    for pid in probes:
        assert (pid in ps) == (pid in plain)
        assert ps.get(pid, "none") == plain.get(pid, "none")
        if pid not in plain:
            with pytest.raises(KeyError) as e:
                ps[pid]
            assert e.value.args == (pid,)
    same(PartitionStates(plain), plain)
    assert PartitionStates(plain) == ps == PartitionMap(plain)
    assert ps.keys() | {1, 2} == plain.keys() | {1, 2}  # as ImageDelta.partition_ids uses it
    same(pickle.loads(pickle.dumps(ps)), plain)


@settings(max_examples=200, deadline=None)
@given(st.lists(CHANGES, min_size=2, max_size=6))
def test_differing_is_the_ids_whose_registration_changed(updates):
    maps = [EMPTY_STATES]
    for changed in updates:
        maps.append(maps[-1].updated(changed))
    a, b = maps[1], maps[-1]
    expected = {pid for pid in a.keys() | b.keys() if a.get(pid) != b.get(pid)}
    assert set(a.differing(b)) == expected == set(b.differing(a))
    assert set(a.differing(dict(b))) == expected  # against a plain map too
    # An equal registration written again (a new encoding) is no change.
    assert not set(b.updated({pid: b[pid] for pid in b}).differing(b))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(IDS, st.none() | registrations(), max_size=30), max_size=8))
def test_with_none_removing_it_agrees_with_a_dict_updated_then_pruned(updates):
    ps, plain = EMPTY_STATES, {}
    for changed in updates:
        ps = ps.updated(changed, none_removes=True)
        plain = {k: v for k, v in {**plain, **changed}.items() if v is not None}
        assert all(chunk and chunk[-1] is not None for chunk in ps._chunks.values())
        assert len(ps) == len(plain) and dict(ps) == plain


def test_keys_that_are_not_partition_ids_are_absent_as_in_a_dict():
    part = PartitionRegistration((1, 2), (1, 2), (), (), 1, 0, 0, 0)
    ps = PartitionStates({0: part, 1: part})
    for key in ("0", None, 1.5, (1,), 2, CHUNK, -1):
        assert key not in ps and ps.get(key) is None and ps.get(key, 5) == 5
        with pytest.raises(KeyError):
            ps[key]
    assert ps != {0: part} and ps != [0, 1]
    assert ps.updated({}) is ps
    assert repr(ps).startswith("PartitionStates({0: PartitionRegistration(")


def test_an_update_copies_only_the_chunks_it_touches_and_small_topics_stay_small():
    part = PartitionRegistration((1, 2, 3), (1, 2, 3), (), (), 1, 0, 0, 0)
    ps = PartitionStates(dict.fromkeys(range(10 * CHUNK), part))
    after = ps.updated({3: part._replace(leader=2), 5 * CHUNK + 1: part._replace(leader=3)})
    shared = [k for k in ps._chunks if after._chunks[k] is ps._chunks[k]]
    assert sorted(set(ps._chunks) - set(shared)) == [0, 5]
    assert after[3].leader == 2 and ps[3].leader == 1
    # The slots of a partition no batch touched are the very same bytes.
    assert after._chunks[0][4] is ps._chunks[0][4]
    small = PartitionStates(dict.fromkeys(range(10), part))
    assert [len(chunk) for chunk in small._chunks.values()] == [10]


def test_partitions_with_keeps_them_as_the_switch_says(monkeypatch):
    part = PartitionRegistration((1,), (1,), (), (), 1, 0, 0, 0)
    assert type(partitions_with({0: part}, {1: part})) is PartitionStates
    monkeypatch.setattr(states_module, "COMPACT_PARTITIONS", False)
    plain = partitions_with(PartitionStates({0: part}), {1: part})
    assert type(plain) is PartitionMap and dict(plain) == {0: part, 1: part}


T1, T2 = "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw"
LISTS = st.lists(st.integers(0, 4), max_size=4).map(tuple)
records = st.one_of(
    st.builds(
        PartitionRecord,
        partition_id=st.integers(-1, 3),
        topic_id=st.sampled_from([T1, T2]),
        replicas=LISTS,
        isr=LISTS,
        leader=st.integers(-1, 4),
    ),
    st.builds(
        PartitionChangeRecord,
        partition_id=st.integers(-1, 3),
        topic_id=st.sampled_from([T1, T2]),
        isr=st.none() | LISTS,
        leader=st.sampled_from([-2, -1, 1, 2]),
        replicas=st.none() | LISTS,
    ),
    st.builds(RemoveTopicRecord, topic_id=st.sampled_from([T1, T2])),
    st.builds(TopicRecord, name=st.sampled_from(["a", "b"]), topic_id=st.sampled_from([T1, T2])),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(records, max_size=40))
def test_a_log_replayed_with_and_without_the_switch_gives_the_same_image(log):
    """The agreement test of COMPACT_PARTITIONS: equal images, equal
    snapshots and digests, the same ignored records; and a snapshot of one
    decodes to an image equal to the other."""
    start = [TopicRecord(name="a", topic_id=T1), TopicRecord(name="b", topic_id=T2)]
    compact = apply_records(EMPTY_IMAGE, start + log)
    states_module.COMPACT_PARTITIONS = False
    try:
        plain = apply_records(EMPTY_IMAGE, start + log)
        decoded_plain = decode_image(encode_image(compact))
    finally:
        states_module.COMPACT_PARTITIONS = True
    assert compact == plain
    assert compact.ignored_reasons == plain.ignored_reasons
    assert encode_image(compact) == encode_image(plain)
    assert image_digest(compact) == image_digest(plain)
    for topic in plain.topics.values():
        assert type(topic.partitions) is PartitionMap
        assert type(compact.topics[topic.topic_id].partitions) is PartitionStates
    assert decoded_plain == compact and decode_image(encode_image(plain)) == plain
