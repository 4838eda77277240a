"""Kafka's ``StripedReplicaPlacer`` (StripedReplicaPlacerTest, case by case,
with Kafka's MockRandom), and what the controller's default source adds."""

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.placement import PlacementError, RackList, UsableBroker, _BrokerList, place
from tests.controller.kafka_random import KafkaMockRandom


def brokers(*specs):
    """UsableBrokers from (id, rack, fenced) triples."""
    return [UsableBroker(b, rack, fenced) for b, rack, fenced in specs]


def test_broker_list():
    """testBrokerList."""
    empty = _BrokerList()
    assert empty.next(1) == -1
    brokers_ = _BrokerList()
    brokers_.brokers = [0, 1, 2, 3]
    assert [brokers_.next(0) for _ in range(6)] == [0, 1, 2, 3, -1, -1]
    assert [brokers_.next(1) for _ in range(5)] == [1, 2, 3, 0, -1]


def test_avoid_fenced_replica_if_possible_on_single_rack():
    """testAvoidFencedReplicaIfPossibleOnSingleRack."""
    racks = RackList(
        KafkaMockRandom(),
        brokers(
            (3, None, False), (1, None, True), (0, None, False), (4, None, False), (2, None, False)
        ),
    )
    assert (racks.total, racks.unfenced, racks.rack_names) == (5, 4, [None])
    with pytest.raises(PlacementError):
        racks.place(0)
    with pytest.raises(PlacementError):
        racks.place(-1)
    assert [racks.place(4) for _ in range(5)] == [
        [3, 4, 0, 2],
        [4, 0, 2, 3],
        [0, 2, 3, 4],
        [2, 3, 4, 0],
        [0, 4, 3, 2],
    ]


def test_multi_partition_topic_placement_on_single_unfenced_broker():
    """testMultiPartitionTopicPlacementOnSingleUnfencedBroker."""
    usable = brokers((0, None, False), (1, None, True))
    assert place(usable, 3, 1, KafkaMockRandom()) == [(0,), (0,), (0,)]


def test_placement_on_fenced_replica_on_single_rack():
    """testPlacementOnFencedReplicaOnSingleRack: a fenced broker follows."""
    racks = RackList(
        KafkaMockRandom(), brokers((3, None, False), (1, None, True), (2, None, False))
    )
    assert (racks.total, racks.unfenced) == (3, 2)
    assert [racks.place(3) for _ in range(4)] == [[3, 2, 1], [2, 3, 1], [3, 2, 1], [2, 3, 1]]


def test_rack_list_with_multiple_racks():
    """testRackListWithMultipleRacks."""
    racks = RackList(
        KafkaMockRandom(),
        brokers(
            (11, "1", False),
            (10, "1", False),
            (30, "3", False),
            (31, "3", False),
            (21, "2", False),
            (20, "2", True),
        ),
    )
    assert (racks.total, racks.unfenced, racks.rack_names) == (6, 5, ["1", "2", "3"])
    assert [racks.place(4) for _ in range(3)] == [
        [11, 21, 31, 10],
        [21, 30, 10, 20],
        [31, 11, 21, 30],
    ]


def test_rack_list_with_invalid_racks():
    """testRackListWithInvalidRacks: racks with only fenced brokers."""
    racks = RackList(
        KafkaMockRandom(),
        brokers(
            (11, "1", False),
            (10, "1", False),
            (30, "3", True),
            (31, "3", True),
            (20, "2", True),
            (21, "2", True),
            (41, "4", False),
            (40, "4", True),
        ),
    )
    assert (racks.total, racks.unfenced, racks.rack_names) == (8, 3, ["1", "2", "3", "4"])
    assert [racks.place(4) for _ in range(3)] == [
        [41, 11, 21, 30],
        [10, 20, 31, 41],
        [41, 21, 30, 11],
    ]


@pytest.mark.parametrize(
    "usable,rf,message",
    [
        # testAllBrokersFenced
        (brokers((11, "1", True), (10, "1", True)), 1, "All brokers are currently fenced."),
        # testNotEnoughBrokers
        (
            brokers((11, "1", False), (10, "1", False)),
            3,
            "The target replication factor of 3 cannot be reached because only 2 broker(s) "
            "are registered.",
        ),
        # testNonPositiveReplicationFactor
        (
            brokers((11, "1", False), (10, "1", False)),
            0,
            "Invalid replication factor 0: the replication factor must be positive.",
        ),
        # The placer checks for an unfenced broker before the broker count.
        (brokers((1, None, True)), 3, "All brokers are currently fenced."),
    ],
)
def test_placement_errors(usable, rf, message):
    with pytest.raises(PlacementError) as e:
        place(usable, 1, rf, KafkaMockRandom())
    assert str(e.value) == message


def test_successful_placement():
    """testSuccessfulPlacement."""
    usable = brokers((0, None, False), (3, None, False), (2, None, False), (1, None, False))
    assert place(usable, 5, 3, KafkaMockRandom()) == [
        (2, 3, 0),
        (3, 0, 1),
        (0, 1, 2),
        (1, 2, 3),
        (1, 0, 2),
    ]


def test_even_distribution():
    """testEvenDistribution: 200 partitions, RF 2, over 4 brokers."""
    usable = brokers(*((b, None, False) for b in range(4)))
    counts = Counter(place(usable, 200, 2, KafkaMockRandom()))
    assert counts == {
        (0, 1): 14,
        (0, 2): 22,
        (0, 3): 14,
        (1, 0): 17,
        (1, 2): 17,
        (1, 3): 16,
        (2, 0): 13,
        (2, 1): 17,
        (2, 3): 20,
        (3, 0): 20,
        (3, 1): 19,
        (3, 2): 11,
    }


@pytest.mark.parametrize(
    "usable,rf,message",
    [
        # testRackListAllBrokersFenced: enough brokers, none unfenced.
        (
            brokers((0, None, True), (1, None, True), (2, None, True)),
            3,
            "All brokers are currently fenced.",
        ),
        # testRackListNotEnoughBrokers
        (
            brokers((11, "1", False), (10, "1", False)),
            3,
            "The target replication factor of 3 cannot be reached because only 2 broker(s) "
            "are registered.",
        ),
        # testRackListNonPositiveReplicationFactor
        (
            brokers((11, "1", False), (10, "1", False)),
            -1,
            "Invalid replication factor -1: the replication factor must be positive.",
        ),
    ],
)
def test_rack_list_errors(usable, rf, message):
    with pytest.raises(PlacementError) as e:
        RackList(KafkaMockRandom(), usable).place(rf)
    assert str(e.value) == message


def test_leaders_spread_evenly():
    usable = brokers(*((b, None, False) for b in range(1, 7)))
    out = place(usable, 60, 3, random.Random(0))
    assert Counter(r[0] for r in out) == {b: 10 for b in range(1, 7)}


@given(
    n=st.integers(1, 12),
    fenced=st.sets(st.integers(0, 11)),
    racks=st.integers(1, 4),
    rf=st.integers(1, 12),
    count=st.integers(1, 50),
    seed=st.integers(0, 1000),
)
def test_every_assignment_keeps_the_constraints(n, fenced, racks, rf, count, seed):
    """No broker twice in a partition; the first replica unfenced; fenced
    brokers only where the racks' unfenced ones do not suffice; and the same
    seed gives the same assignment."""
    usable = [UsableBroker(b * 10, f"r{b % racks}", b in fenced) for b in range(n)]
    unfenced = {u.broker_id for u in usable if not u.fenced}
    if not unfenced or rf > n:
        with pytest.raises(PlacementError):
            place(usable, count, rf, random.Random(seed))
        return
    out = place(usable, count, rf, random.Random(seed))
    assert len(out) == count
    ids = {u.broker_id for u in usable}
    for replicas in out:
        assert len(replicas) == rf == len(set(replicas))
        assert set(replicas) <= ids
        assert replicas[0] in unfenced
        if racks == 1 and rf <= len(unfenced):
            assert set(replicas) <= unfenced
    assert out == place(usable, count, rf, random.Random(seed))
