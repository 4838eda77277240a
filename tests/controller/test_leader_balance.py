"""Automatic leader balancing (Kafka's auto.leader.rebalance.enable,
leader.imbalance.check.interval.seconds): the controller's index of
partitions not led by their preferred replica, the run that elects it back
(``maybeBalancePartitionLeaders``), and when that run is due."""

from controller.config import DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_MS, RUN_AGAIN_MS
from metadata_records.records import PartitionChangeRecord

from ..harness import ControllerHarness
from .test_replication_control import assert_consistent, make_topic

INTERVAL = DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_MS


def leaders(h: ControllerHarness, name: str, count: int) -> list[int]:
    return [h.partition(name, pid).leader for pid in range(count)]


def test_balance_partition_leaders_as_kafka():
    """Kafka's ``testBalancePartitionLeaders``: a preferred replica is elected
    back only once it is unfenced and in the ISR; until then the partition
    stays imbalanced and the run writes nothing."""
    h = ControllerHarness()
    h.start_brokers(0, 1, 2, 3, 4)
    make_topic(h, "foo", (1, 2, 3), (2, 3, 4), (0, 2, 1))
    index = h.controller.index
    assert index.imbalanced_count == 0
    replication = h.controller.replication
    h.heartbeat(2, want_fence=True)
    h.heartbeat(3, want_fence=True)
    assert [
        (p.replicas, p.isr, p.leader) for p in map(lambda i: h.partition("foo", i), range(3))
    ] == [
        ((1, 2, 3), (1,), 1),
        ((2, 3, 4), (4,), 4),
        ((0, 2, 1), (0, 1), 0),
    ]
    assert index.imbalanced_partitions() == [(h.topic_id("foo"), 1)]
    # 2 is fenced: nothing to elect.
    result = replication.maybe_balance_partition_leaders()
    assert result.records == () and result.response is False
    # 2 is back, but not in foo-1's ISR yet.
    h.heartbeat(2)
    assert replication.maybe_balance_partition_leaders().records == ()
    # Its leader takes it back into the ISR: now 2 is elected back.
    h.alter_isr("foo", 1, [4, 2])
    result = replication.maybe_balance_partition_leaders()
    assert result.response is False
    assert len(result.records) == 1
    record = result.records[0]
    assert type(record) is PartitionChangeRecord
    assert (record.topic_id, record.partition_id, record.leader) == (h.topic_id("foo"), 1, 2)
    assert record.isr is None  # the ISR stays as it is
    h.commit(result.records)
    assert leaders(h, "foo", 3) == [1, 2, 0]
    assert h.partition("foo", 1).isr == (4, 2)
    # (The run was called past the Controller, which would have replayed its
    # records; the commit rebuilds the leader's index from the image.)
    index = h.controller.index
    assert index.imbalanced_count == 0 and index.imbalanced_partitions() == []
    assert_consistent(h)


def test_a_leaderless_partition_counts_as_imbalanced_as_kafkas_has_preferred_leader_says():
    h = ControllerHarness()
    h.start_brokers(1)
    make_topic(h, "solo", (1,))
    h.heartbeat(1, want_fence=True)
    assert h.partition("solo").leader == -1
    assert h.controller.index.imbalanced_count == 1
    # Nobody can lead it: the run elects nothing.
    assert h.controller.replication.maybe_balance_partition_leaders().records == ()


def test_balancing_is_due_an_interval_after_a_partition_loses_its_preferred_leader():
    """Kafka's maybeScheduleNextBalancePartitionLeaders after each write: a
    new leader (no index yet) checks an interval after it takes over; a
    write that makes a partition imbalanced makes the run due an interval on,
    and later writes do not push it back."""
    h = ControllerHarness()
    c = h.controller
    start = h.now_ms
    assert c.next_balance_ms() == start + INTERVAL
    assert c.maybe_balance_partition_leaders(start + INTERVAL - 1) is None  # not due
    result = c.maybe_balance_partition_leaders(start + INTERVAL)
    assert result.records == () and result.response is False
    assert c.next_balance_ms() is None  # every partition has its preferred leader

    h.start_brokers(1, 2)
    make_topic(h, "t", (1, 2))
    assert c.next_balance_ms() is None
    h.advance(1234)
    h.heartbeat(1, want_fence=True)  # t-0 is led by 2 now
    due = h.now_ms + INTERVAL
    assert c.next_balance_ms() == due
    h.advance(1000)
    h.heartbeat(1)
    h.alter_isr("t", 0, [2, 1])
    assert c.next_balance_ms() == due
    assert c.maybe_balance_partition_leaders(due - 1) is None
    result = c.maybe_balance_partition_leaders(due)
    assert [r.leader for r in result.records] == [1]
    h.commit(result.records)
    assert h.partition("t").leader == 1
    assert c.next_balance_ms() is None
    assert_consistent(h)


def test_a_balancing_run_stopped_at_its_bound_runs_again_10_ms_later():
    h = ControllerHarness(config_options={"max_elections_per_imbalance": 2})
    h.start_brokers(1, 2)
    make_topic(h, "t", (1, 2), (1, 2), (1, 2))
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)
    for pid in range(3):
        h.alter_isr("t", pid, [2, 1])
    assert leaders(h, "t", 3) == [2, 2, 2]
    c = h.controller
    due = c.next_balance_ms()
    first = c.maybe_balance_partition_leaders(due)
    assert len(first.records) == 2 and first.response is True
    h.commit(first.records)
    assert c.next_balance_ms() == due + RUN_AGAIN_MS
    second = c.maybe_balance_partition_leaders(due + RUN_AGAIN_MS)
    assert len(second.records) == 1 and second.response is False
    h.commit(second.records)
    assert leaders(h, "t", 3) == [1, 1, 1]
    assert c.next_balance_ms() is None
    assert_consistent(h)


def test_balancing_off_never_schedules_a_run():
    """auto.leader.rebalance.enable=false: only ElectLeaders moves leaders back."""
    h = ControllerHarness(config_options={"leader_imbalance_check_interval_ms": None})
    assert h.controller.next_balance_ms() is None
    h.start_brokers(1, 2)
    make_topic(h, "t", (1, 2))
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)
    h.alter_isr("t", 0, [2, 1])
    assert h.partition("t").leader == 2
    assert h.controller.next_balance_ms() is None
    assert h.controller.maybe_balance_partition_leaders(h.now_ms + 10 * INTERVAL) is None


def test_the_index_counts_imbalance_as_a_scan_of_the_image_does():
    """The index kept up by replay agrees with one built from the image."""
    from controller.isr_index import BrokersToIsrs

    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    make_topic(h, "a", (1, 2, 3), (2, 3, 1), (3, 1, 2))
    make_topic(h, "b", (1, 3), (2, 1))
    for broker, fence in ((1, True), (2, True), (1, False), (3, True), (2, False)):
        h.heartbeat(broker, want_fence=fence)
    kept = h.controller.index
    built = BrokersToIsrs.build(h.controller.view)
    assert kept.imbalanced_partitions() == built.imbalanced_partitions()
    assert (
        kept.imbalanced_count
        == built.imbalanced_count
        == sum(
            1
            for t in h.image.topics.values()
            for p in t.partitions.values()
            if p.leader != p.replicas[0]
        )
    )
