"""PartitionMap (metadata_records/partition_map.py) against the plain version
it replaces, a dict updated as ``{**partitions, **changed}``: the same
contents, order, lookups and views after any sequence of updates, and every
map it was updated from left as it was."""

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from metadata_records.partition_map import CHUNK, CHUNK_BITS, EMPTY, PartitionMap, with_changes

# Ids around chunk edges, far apart, and dense from 0 as real topics are.
IDS = st.one_of(
    st.integers(0, 3 * CHUNK),
    st.sampled_from([CHUNK - 1, CHUNK, 2 * CHUNK - 1, 100_000, 1 << 31]),
)
CHANGES = st.dictionaries(IDS, st.integers(), max_size=40)


def same(pm: PartitionMap, plain: dict) -> None:
    assert len(pm) == len(plain)
    # The order: by chunk, in the order chunks were first used, and within a
    # chunk as added; a dict's, whenever ids came in ascending (real topics).
    order = {}
    for pid in plain:
        order.setdefault(pid >> CHUNK_BITS, []).append(pid)
    expected = [pid for chunk in order.values() for pid in chunk]
    assert list(pm) == list(pm.keys()) == expected
    assert list(pm.items()) == [(pid, plain[pid]) for pid in expected]
    assert list(pm.values()) == [plain[pid] for pid in expected]
    if list(plain) == sorted(plain):
        assert list(pm) == list(plain)
    assert pm == plain and plain == pm and dict(pm) == plain
    assert {**pm} == plain
    for pid in plain:
        assert pm[pid] == plain[pid] and pm.get(pid) == plain[pid] and pid in pm
        assert (pid, plain[pid]) in pm.items()


@settings(max_examples=300, deadline=None)
@given(st.lists(CHANGES, max_size=12), st.lists(IDS, max_size=10))
def test_updates_agree_with_a_dict_copied_and_updated(updates, probes):
    """Contents, lookups and views as the dict's; the order as ``same`` says."""
    pm, plain = EMPTY, {}
    history = [(pm, dict(plain))]
    for changed in updates:
        pm, plain = pm.updated(changed), {**plain, **changed}
        history.append((pm, dict(plain)))
        same(pm, plain)
    # Every earlier map is unchanged: images share them.
    for old, contents in history:
        same(old, contents)
    for pid in probes:
        assert (pid in pm) == (pid in plain)
        assert pm.get(pid, "none") == plain.get(pid, "none")
        if pid not in plain:
            try:
                pm[pid]
                raise AssertionError(f"{pid} was found")
            except KeyError as e:
                assert e.args == (pid,)
    # Built at once from a dict, and through with_changes from one.
    same(PartitionMap(plain), plain)
    assert PartitionMap(plain) == pm
    same(with_changes(dict(plain), {7: "x"}), {**plain, 7: "x"})
    # Set operations of the keys view, as ImageDelta.partition_ids uses them.
    assert pm.keys() | {1, 2} == plain.keys() | {1, 2}
    # Pickled (a worker's image crosses processes that way in tests).
    again = pickle.loads(pickle.dumps(pm))
    same(again, plain)


def test_keys_that_are_not_partition_ids_are_absent_as_in_a_dict():
    pm = PartitionMap({0: "a", 1: "b"})
    for key in ("0", None, 1.5, (1,)):
        assert key not in pm and pm.get(key) is None and pm.get(key, 5) == 5
        try:
            pm[key]
            raise AssertionError(f"{key!r} was found")
        except KeyError:
            pass
    assert pm != {0: "a"} and pm != {0: "a", 1: "c"} and pm != [0, 1]
    assert repr(pm) == "PartitionMap({0: 'a', 1: 'b'})"
    assert pm.updated({}) is pm


def test_an_update_copies_only_the_chunks_it_touches():
    """What makes a batch cost what it changes: chunks it does not touch are
    the very dicts of the map it came from."""
    pm = PartitionMap({pid: pid for pid in range(10 * CHUNK)})
    after = pm.updated({3: "x", 5 * CHUNK + 1: "y"})
    assert after[3] == "x" and after[5 * CHUNK + 1] == "y" and pm[3] == 3
    shared = [k for k in pm._chunks if after._chunks[k] is pm._chunks[k]]
    assert sorted(set(pm._chunks) - set(shared)) == [0, 5]


REMOVALS = st.dictionaries(IDS, st.one_of(st.none(), st.integers()), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(REMOVALS, max_size=12), st.lists(IDS, max_size=10))
def test_with_none_removing_it_agrees_with_a_dict_updated_then_pruned(updates, probes):
    """An image's brokers: None unregisters. Contents, lookups and length as
    the plain dict's (whose order consumers never rely on: they sort), no
    chunk left empty, and every earlier map unchanged."""
    pm, plain = EMPTY, {}
    history = [(pm, dict(plain))]
    for changed in updates:
        pm = pm.updated(changed, none_removes=True)
        plain = {k: v for k, v in {**plain, **changed}.items() if v is not None}
        history.append((pm, dict(plain)))
        assert all(pm._chunks.values()), "an empty chunk was kept"
    for old, contents in history:
        assert len(old) == len(contents)
        assert dict(old) == contents and old == contents and contents == old
        assert sorted(old.items()) == sorted(contents.items())
        assert old == PartitionMap(contents)
    for pid in probes:
        assert (pid in pm) == (pid in plain)
        assert pm.get(pid, "none") == plain.get(pid, "none")
    same(PartitionMap(plain), plain)
    # Set operations of the keys view, as ImageDelta.brokers uses them.
    assert pm.keys() | {1, 2} == plain.keys() | {1, 2}
