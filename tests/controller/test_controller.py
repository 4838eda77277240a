"""The Controller facade: dispatch, group commit on the view, moving onto
committed images, and what a new leader rebuilds."""

import pytest

from controller.config import DEFAULT_UNCLEAN_ELECTION_INTERVAL_MS, ControllerConfig
from controller.messages import (
    AlterPartitionReassignmentsRequest,
    BrokerHeartbeatRequest,
    CreatableTopic,
    CreateTopicsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from metadata_records.delta import apply
from metadata_records.errors import Errors
from metadata_records.records import Batch, NoOpRecord, PartitionChangeRecord
from tests.harness import ControllerHarness


def test_unknown_requests_are_a_programming_error():
    h = ControllerHarness()
    with pytest.raises(TypeError, match="no handler for str"):
        h.decide("hello")


def test_requests_of_one_batch_see_each_others_records():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    first = h.decide(CreateTopicsRequest((CreatableTopic("a", 1, 3),)))
    second = h.decide(CreateTopicsRequest((CreatableTopic("a", 1, 3), CreatableTopic("b", 1, 3))))
    # The second request was decided on top of the first, although neither committed.
    assert [t.error.name for t in second.response.topics] == ["TOPIC_ALREADY_EXISTS", "NONE"]
    assert h.image.topic_ids == {}
    h.commit(first.records + second.records)
    assert set(h.image.topic_ids) == {"a", "b"}
    assert h.replayed() == h.image


def test_the_view_counts_offsets_across_the_batch():
    h = ControllerHarness()
    h.start_brokers(1)
    c = h.controller
    start = c.view.next_offset
    r1 = h.decide(CreateTopicsRequest((CreatableTopic("a", 2, 1),)))
    assert c.view.next_offset == start + len(r1.records)
    assert h.image.next_offset == start  # nothing committed yet


def test_an_unexpected_committed_image_rebuilds_leader_side_indexes():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic("t", 2, 2)
    c = h.controller
    assert c.index.leads_any(1)
    # Someone else's batch (not decided by this controller) moves the log on.
    h.image = apply(h.image, Batch(h.image.controller_epoch, 0, (NoOpRecord(),)))
    c.committed(h.image)
    assert c._index is None
    assert c.index.leads_any(1)  # rebuilt from the image on first use


def test_a_controller_built_on_an_image_resumes_from_it():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 3, 3)
    h.new_leader()
    assert h.image.leader_url == "http://c1"
    resp = h.run(BrokerHeartbeatRequest(1, h.epochs[1], h.image.next_offset, want_fence=True))
    assert resp.is_fenced and all(1 not in h.partition("t", p).isr for p in range(3))
    assert h.replayed() == h.image


def test_bootstrap_records_only_for_an_empty_log():
    h = ControllerHarness()
    assert h.controller.bootstrap_records() == []


# ---------------------------------------------------------------- the unclean-election sweep

INTERVAL = DEFAULT_UNCLEAN_ELECTION_INTERVAL_MS


def test_unclean_sweep_defaults_are_kafkas():
    """unclean.leader.election.interval.ms (5 minutes) and
    ReplicationControlManager.MAX_ELECTIONS_PER_IMBALANCE (1000)."""
    config = ControllerConfig("c")
    assert config.unclean_election_interval_ms == 300_000
    assert config.max_elections_per_imbalance == 1_000


def leaderless_by_a_move(h: ControllerHarness, *partitions: int) -> None:
    """Partitions of unclean topic u, each on broker 1 alone, moved to 2 after 1
    was fenced: the move's ONLINE election leaves them leaderless."""
    moves = tuple(ReassignablePartition(pid, (2,)) for pid in partitions)
    resp = h.run(AlterPartitionReassignmentsRequest((ReassignableTopic("u", moves),)))
    assert all(p.error is Errors.NONE for p in resp.topics[0].partitions)
    assert all(h.partition("u", pid).leader == -1 for pid in partitions)


def unclean_cluster(**options) -> ControllerHarness:
    h = ControllerHarness(config_options=options)
    h.start_brokers(1, 2)
    h.create_topic(
        "u",
        assignments=tuple((pid, (1,)) for pid in range(3)),
        configs=(("unclean.leader.election.enable", "true"),),
    )
    h.heartbeat(1, want_fence=True)
    return h


def test_a_new_leader_runs_the_unclean_sweep_once_an_interval_after_it_takes_over():
    """Kafka checks for leaderless partitions when it becomes active; this
    leader, which builds its index lazily, schedules the sweep instead."""
    h = ControllerHarness()
    c = h.controller
    start = h.now_ms
    assert c.next_unclean_election_ms() == start + INTERVAL
    assert c.maybe_elect_unclean_leaders(start + INTERVAL - 1) is None  # not due
    result = c.maybe_elect_unclean_leaders(start + INTERVAL)
    assert result.records == () and result.response is False
    assert c.next_unclean_election_ms() is None  # nothing is leaderless


def test_a_partition_left_leaderless_is_elected_uncleanly_an_interval_later():
    """Kafka's maybeScheduleNextElectUncleanLeaders after a write that leaves
    a partition without a leader: due one interval on, and later writes do
    not push it back; the sweep then elects."""
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic(
        "u", assignments=((0, (1,)),), configs=(("unclean.leader.election.enable", "true"),)
    )
    c = h.controller
    h.advance(INTERVAL)
    assert c.maybe_elect_unclean_leaders(h.now_ms).records == ()  # the takeover check
    assert c.next_unclean_election_ms() is None
    h.advance(1234)
    h.heartbeat(1, want_fence=True)  # u-0 has no leader now
    due = h.now_ms + INTERVAL
    assert c.next_unclean_election_ms() == due
    h.advance(1000)
    leaderless_by_a_move(h, 0)  # 2 could lead it, but the move's election is ONLINE
    assert c.next_unclean_election_ms() == due
    assert c.maybe_elect_unclean_leaders(due - 1) is None
    result = c.maybe_elect_unclean_leaders(due)
    assert result.records == (
        PartitionChangeRecord(
            partition_id=0, topic_id=h.topic_id("u"), isr=(2,), leader=2, leader_recovery_state=1
        ),
    )
    h.commit(result.records)
    assert c.next_unclean_election_ms() is None
    assert h.replayed() == h.image


def test_an_unclean_sweep_stopped_at_its_bound_runs_again_10_ms_later():
    h = unclean_cluster(max_elections_per_imbalance=2)
    leaderless_by_a_move(h, 0, 1, 2)
    c = h.controller
    due = c.next_unclean_election_ms()
    first = c.maybe_elect_unclean_leaders(due)
    assert len(first.records) == 2 and first.response is True
    h.commit(first.records)
    assert c.next_unclean_election_ms() == due + 10
    second = c.maybe_elect_unclean_leaders(due + 10)
    assert len(second.records) == 1 and second.response is False
    h.commit(second.records)
    assert c.next_unclean_election_ms() is None
    assert [h.partition("u", p).leader for p in range(3)] == [2, 2, 2]


def test_leaderless_partitions_no_sweep_can_elect_keep_it_scheduled():
    """While some partition has no leader (here on a clean topic), the sweep
    keeps coming back every interval, as Kafka's write events reschedule it."""
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic("c", assignments=((0, (1,)),))
    h.heartbeat(1, want_fence=True)
    c = h.controller
    due = c.next_unclean_election_ms()
    assert c.maybe_elect_unclean_leaders(due).records == ()
    assert c.next_unclean_election_ms() == due + INTERVAL
