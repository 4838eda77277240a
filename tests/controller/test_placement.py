from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.placement import PlacementError, place, rack_alternated


def test_rack_alternated_interleaves_racks():
    brokers = [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c")]
    assert rack_alternated(brokers) == [1, 3, 5, 2, 4]


def test_errors_name_the_shortfall():
    with pytest.raises(PlacementError, match="All brokers are currently fenced"):
        place([], 3, 1, 3, 0)
    with pytest.raises(
        PlacementError, match="replication factor of 3 cannot be reached because only 2"
    ):
        place([(1, None), (2, None)], 3, 1, 3, 0)


def test_leaders_spread_evenly():
    usable = [(b, None) for b in range(1, 7)]
    out = place(usable, 6, 60, 3, 0)
    assert Counter(r[0] for r in out) == {b: 10 for b in range(1, 7)}


@given(
    n=st.integers(1, 12),
    rf=st.integers(1, 12),
    count=st.integers(1, 50),
    start=st.integers(0, 1000),
    first=st.integers(0, 100),
)
def test_every_assignment_is_valid(n, rf, count, start, first):
    usable = [(b * 10, f"r{b % 3}") for b in range(n)]
    if rf > n:
        with pytest.raises(PlacementError):
            place(usable, n, count, rf, start, first)
        return
    out = place(usable, n, count, rf, start, first)
    assert len(out) == count
    ids = {b for b, _ in usable}
    for replicas in out:
        assert len(replicas) == rf == len(set(replicas))
        assert set(replicas) <= ids
    assert out == place(usable, n, count, rf, start, first)  # deterministic
