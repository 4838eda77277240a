"""The linearizability checker (tests/linearizability.py) against histories
made to pass and made to fail: a checker that finds nothing proves nothing."""

from hypothesis import given, settings
from hypothesis import strategies as st

from .linearizability import INF, Op, check


def w(start, end, version, key="k"):
    return Op(key, "write", start, end, version)


def r(start, end, version, key="k"):
    return Op(key, "read", start, end, version)


def rules(history, initial=None):
    return sorted({v.rule for v in check(history, initial)})


def test_a_sequential_history_passes():
    assert check([w(0, 1, 10), r(2, 3, 10), w(4, 5, 12), r(6, 7, 12)]) == []


def test_overlapping_operations_may_go_either_way():
    # The read overlaps the write: it may see the old version or the new one.
    assert check([w(0, 1, 10), w(2, 5, 12), r(3, 4, 10)]) == []
    assert check([w(0, 1, 10), w(2, 5, 12), r(3, 4, 12)]) == []


def test_a_stale_read_is_found():
    assert rules([w(0, 1, 10), w(2, 3, 12), r(4, 5, 10)]) == ["stale read"]


def test_a_read_from_the_future_is_found():
    assert "read from the future" in rules([r(0, 1, 10), w(2, 3, 10)])


def test_a_version_nobody_wrote_is_found_unless_an_unknown_write_may_have():
    assert rules([r(0, 1, 99)]) == ["read of a version no write made"]
    assert check([w(0, INF, None), r(1, 2, 99)]) == []
    assert rules([r(0, 1, 99), w(2, INF, None)]) == ["read of a version no write made"]


def test_reads_going_back_in_time_are_found():
    history = [w(0, 10, 12), w(0, 1, 10), r(2, 3, 12), r(4, 5, 10)]
    assert "a later read saw an older version" in rules(history)


def test_writes_out_of_order_are_found():
    assert "a later write installed an older version" in rules([w(0, 1, 12), w(2, 3, 10)])


def test_absent_is_older_than_any_version():
    assert check([r(0, 1, None), w(2, 3, 10), r(4, 5, 10)]) == []
    assert "stale read" in rules([w(0, 1, 10), r(2, 3, None)])
    assert check([r(0, 1, 5)], initial=5) == []


@st.composite
def sequential_histories(draw):
    """Operations that took effect one after another at points 0, 10, 20...,
    each seen by the client over an interval around its point."""
    ops, version = [], None
    for point in range(0, 10 * draw(st.integers(1, 25)), 10):
        start = point - draw(st.integers(0, 15))
        end = point + draw(st.integers(0, 15))
        if draw(st.booleans()):
            version = point + 1
            unknown = draw(st.integers(0, 5)) == 0
            ops.append(w(start, INF if unknown else end, None if unknown else version))
        else:
            ops.append(r(start, end, version))
    return ops


@settings(max_examples=300, deadline=None)
@given(sequential_histories())
def test_every_history_with_a_linearization_passes(history):
    assert check(history) == []


@settings(max_examples=300, deadline=None)
@given(sequential_histories(), st.data())
def test_a_read_made_stale_is_found(history, data):
    """Moves a read well after a later acknowledged write, keeping its old answer."""
    acked = [o for o in history if o.kind == "write" and o.end != INF]
    reads = [o for o in history if o.kind == "read"]
    stale = [
        (x, y)
        for x in reads
        for y in acked
        if y.version is not None and (x.version is None or y.version > x.version)
    ]
    if not stale:
        return
    read, write = data.draw(st.sampled_from(stale))
    moved = Op(read.key, "read", write.end + 1, write.end + 2, read.version)
    assert "stale read" in rules([o for o in history if o is not read] + [moved])
