"""AlterPartitionReassignments and ElectLeaders (docs/kafka-rules.md 5.2, 5.4)."""

import pytest

from controller.messages import (
    PREFERRED,
    UNCLEAN,
    AlterPartitionPartition,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerState,
    ElectLeadersRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from controller.partition_admin import ReassignmentReplicas, reassignment_replicas
from metadata_records.errors import Errors
from metadata_records.records import PartitionChangeRecord
from tests.harness import ControllerHarness


@pytest.fixture
def h():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3, 4)
    h.create_topic("t", assignments=((0, (1, 2, 3)), (1, (2, 3, 1))))
    return h


def reassign(h, name, pid, replicas):
    resp = h.run(
        AlterPartitionReassignmentsRequest(
            (ReassignableTopic(name, (ReassignablePartition(pid, replicas),)),)
        )
    )
    return resp.topics[0].partitions[0]


def elect(h, kind, tps=None):
    return h.run(ElectLeadersRequest(kind, tps))


def test_reassignment_adds_then_completes_when_the_isr_catches_up(h):
    res = reassign(h, "t", 0, (2, 3, 4))
    assert res.error is Errors.NONE
    part = h.partition("t", 0)
    assert part.replicas == (2, 3, 4, 1) and part.adding_replicas == (4,)
    assert part.removing_replicas == (1,) and part.leader == 1 and part.leader_epoch == 0
    # The leader reports 4 in sync: the reassignment completes and 1 is removed.
    resp = h.alter_isr("t", 0, [1, 2, 3, 4])
    assert resp.topics[0].partitions[0].error is Errors.NEW_LEADER_ELECTED
    part = h.partition("t", 0)
    assert part.replicas == (2, 3, 4) and part.isr == (2, 3, 4)
    assert part.adding_replicas == () and part.removing_replicas == ()
    assert part.leader == 2 and part.leader_epoch == 1
    assert h.replayed() == h.image


def test_reassignment_that_only_removes_completes_at_once_and_bumps_the_leader_epoch(h):
    res = reassign(h, "t", 1, (2, 3))
    assert res.error is Errors.NONE
    part = h.partition("t", 1)
    assert part.replicas == (2, 3) and part.isr == (2, 3) and not part.is_reassigning
    assert part.leader == 2 and part.leader_epoch == 1


# ---------------------------------------------------------------- reassignment replica lists


@pytest.mark.parametrize(
    "current,target,expected",
    [
        # Kafka's PartitionReassignmentReplicasTest, case by case.
        ((3, 2, 1), (3, 2, 1), ((3, 2, 1), (), ())),  # testNoneAddedOrRemoved
        ((3, 2, 1), (3, 6, 2, 1, 5), ((3, 6, 2, 1, 5), (), (5, 6))),  # testAdditions
        ((3, 2, 1, 0), (3, 1), ((3, 1, 0, 2), (0, 2), ())),  # testRemovals
        ((3, 2, 1, 0), (7, 3, 1, 9), ((7, 3, 1, 9, 0, 2), (0, 2), (7, 9))),  # ...AndRemovals
        ((3, 2, 1, 0), (0, 1, 3, 2), ((0, 1, 3, 2), (), ())),  # testRearrangement
        ((4, 3, 2), (1, 2, 3, 4, 0), ((1, 2, 3, 4, 0), (), (0, 1))),  # testCancelReassign...
    ],
)
def test_reassignment_replicas_as_kafka(current, target, expected):
    assert reassignment_replicas(current, target) == ReassignmentReplicas(*expected)


def test_reassignment_lists_are_sorted_whatever_the_request_order():
    h = ControllerHarness()
    h.start_brokers(0, 1, 2, 3, 7, 9)
    h.create_topic("t", assignments=((0, (3, 2, 1, 0)),))
    assert reassign(h, "t", 0, (7, 3, 1, 9)).error is Errors.NONE
    part = h.partition("t")
    assert part.replicas == (7, 3, 1, 9, 0, 2)
    assert (part.removing_replicas, part.adding_replicas) == ((0, 2), (7, 9))


def test_a_leader_elected_during_a_reassignment_follows_the_sorted_removing_replicas():
    """Elections walk the replica list: with the removing replicas in request
    order, fencing the leader below would elect 2; in Kafka's order, 0."""
    h = ControllerHarness()
    h.start_brokers(0, 1, 2, 3, 7, 9)
    h.create_topic("t", assignments=((0, (3, 2, 1, 0)),))
    reassign(h, "t", 0, (7, 9))
    assert h.partition("t").replicas == (7, 9, 0, 1, 2, 3)
    h.heartbeat(3, want_fence=True)
    part = h.partition("t")
    assert (part.leader, part.isr) == (0, (2, 1, 0))


def test_cancel_reassign_partitions_as_kafka():
    """Kafka's ``ReplicationControlManagerTest.testCancelReassignPartitions``."""
    h = ControllerHarness()
    h.start_brokers(0, 1, 2, 3, 4)
    h.create_topic(
        "foo",
        assignments=((0, (1, 2, 3, 4)), (1, (0, 1, 2, 3)), (2, (4, 3, 1, 0)), (3, (2, 3, 4, 1))),
    )
    h.create_topic("bar", assignments=((0, (4, 3, 2)),))
    h.heartbeat(3, want_fence=True)
    foo0 = h.partition("foo", 0)
    assert (foo0.replicas, foo0.isr, foo0.leader) == ((1, 2, 3, 4), (1, 2, 4), 1)
    assert (foo0.leader_epoch, foo0.partition_epoch) == (0, 1)

    resp = h.run(
        AlterPartitionReassignmentsRequest(
            (
                ReassignableTopic(
                    "foo",
                    (
                        ReassignablePartition(0, (1, 2, 4)),
                        ReassignablePartition(1, (1, 2, 3, 0)),
                        ReassignablePartition(2, (5, 6, 7)),
                        ReassignablePartition(3, ()),
                    ),
                ),
                ReassignableTopic("bar", (ReassignablePartition(0, (1, 2, 3, 4, 0)),)),
            )
        )
    )
    foo, bar = resp.topics
    assert [(p.error, p.error_message) for p in foo.partitions] == [
        (Errors.NONE, None),
        (Errors.NONE, None),
        (
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 5, but no such broker is registered.",
        ),
        (
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        ),
    ]
    assert bar.partitions[0].error is Errors.NONE

    def state(name, pid):
        p = h.partition(name, pid)
        return (
            p.replicas,
            p.isr,
            p.leader,
            p.leader_epoch,
            p.partition_epoch,
            p.adding_replicas,
            p.removing_replicas,
        )

    assert state("foo", 0) == ((1, 2, 4), (1, 2, 4), 1, 1, 2, (), ())
    assert state("foo", 1) == ((1, 2, 3, 0), (0, 1, 2), 0, 0, 2, (), ())
    assert state("bar", 0) == ((1, 2, 3, 4, 0), (4, 2), 4, 0, 2, (0, 1), ())

    # Kafka's test answers an AlterPartition from 4 without replaying its
    # record; here too the view goes back to the committed image after it.
    answer = (
        h.decide(
            AlterPartitionRequest(
                4,
                h.epochs[4],
                (
                    AlterPartitionTopic(
                        (
                            AlterPartitionPartition(
                                0,
                                0,
                                2,
                                new_isr_with_epochs=tuple(BrokerState(b, -1) for b in (4, 1, 2, 0)),
                            ),
                        ),
                        topic_id=h.topic_id("bar"),
                    ),
                ),
            )
        )
        .response.topics[0]
        .partitions[0]
    )
    assert (answer.error, answer.leader_id, answer.leader_epoch, answer.isr) == (
        Errors.NONE,
        4,
        0,
        (4, 1, 2, 0),
    )
    assert answer.partition_epoch == 3
    h.controller.committed(h.image)

    resp = h.run(
        AlterPartitionReassignmentsRequest(
            (
                ReassignableTopic("foo", (ReassignablePartition(0, None),)),
                ReassignableTopic("bar", (ReassignablePartition(0, None),)),
            )
        )
    )
    assert [t.partitions[0].error for t in resp.topics] == [
        Errors.NO_REASSIGNMENT_IN_PROGRESS,
        Errors.NONE,
    ]
    assert h.last.records == (
        PartitionChangeRecord(
            partition_id=0,
            topic_id=h.topic_id("bar"),
            leader=4,
            replicas=(2, 3, 4),
            adding_replicas=(),
        ),
    )
    assert state("bar", 0) == ((2, 3, 4), (4, 2), 4, 1, 3, (), ())
    assert h.replayed() == h.image


def test_a_new_reassignment_replaces_the_one_in_progress_lists_included(h):
    """decisions.md 55: [1, 2, 3] -> [1, 2, 4] marks 3 removing; a second
    request for [1, 2, 3, 4] keeps 3, so its empty removing list is written.
    Kafka keeps the earlier removing [3] and drops 3 once 4 is in sync."""
    h.create_topic("k", assignments=((0, (1, 2, 3)),))
    reassign(h, "k", 0, (1, 2, 4))
    part = h.partition("k")
    assert (part.replicas, part.removing_replicas, part.adding_replicas) == (
        (1, 2, 4, 3),
        (3,),
        (4,),
    )
    reassign(h, "k", 0, (1, 2, 3, 4))
    part = h.partition("k")
    assert (part.replicas, part.removing_replicas, part.adding_replicas) == (
        (1, 2, 3, 4),
        (),
        (),
    )
    h.alter_isr("k", 0, [1, 2, 3, 4])
    part = h.partition("k")
    assert (part.replicas, part.isr) == ((1, 2, 3, 4), (1, 2, 3, 4))
    assert h.replayed() == h.image


UNCLEAN_TOPIC = (("unclean.leader.election.enable", "true"),)


def test_changing_a_reassignment_never_elects_uncleanly(h):
    """Kafka's ``changePartitionReassignment`` runs an ONLINE election even on
    a topic that allows unclean ones: u-0 has lost its only replica, and a
    move to [2] leaves it leaderless rather than trusting 2's empty log."""
    h.create_topic("u", assignments=((0, (1,)),), configs=UNCLEAN_TOPIC)
    h.heartbeat(1, want_fence=True)
    assert (h.partition("u").leader, h.partition("u").isr) == (-1, (1,))
    assert reassign(h, "u", 0, (2,)).error is Errors.NONE
    assert h.last.records == (
        PartitionChangeRecord(
            partition_id=0,
            topic_id=h.topic_id("u"),
            replicas=(2, 1),
            removing_replicas=(1,),
            adding_replicas=(2,),
        ),
    )
    part = h.partition("u")
    assert (part.leader, part.isr, part.leader_recovery_state) == (-1, (1,), 0)


def test_cancelling_a_reassignment_elects_as_the_topic_allows(h):
    """Kafka's ``cancelPartitionReassignment`` takes the topic's setting: here
    only an added replica is in sync, so the revert needs an unclean election,
    and the unclean topic gets one (2, the live original replica)."""
    h.create_topic("u", assignments=((0, (1, 2)),), configs=UNCLEAN_TOPIC)
    h.alter_isr("u", 0, [1])
    reassign(h, "u", 0, (3, 4))
    h.alter_isr("u", 0, [1, 3])
    h.heartbeat(1, want_fence=True)
    part = h.partition("u")
    assert (part.replicas, part.isr, part.leader) == ((3, 4, 1, 2), (3,), 3)
    assert reassign(h, "u", 0, None).error is Errors.NONE
    part = h.partition("u")
    assert (part.replicas, part.leader, part.isr, part.leader_recovery_state) == (
        (1, 2),
        2,
        (2,),
        1,
    )
    assert not part.is_reassigning
    assert h.replayed() == h.image


def test_cancel_reverts_to_the_original_replicas(h):
    reassign(h, "t", 0, (2, 3, 4))
    res = reassign(h, "t", 0, None)
    assert res.error is Errors.NONE
    part = h.partition("t", 0)
    # Kafka's revert keeps the reassignment's order (target first, then the
    # replicas it was removing) minus what it was adding.
    assert part.replicas == (2, 3, 1) and not part.is_reassigning and part.isr == (1, 2, 3)
    assert part.leader == 1
    res = reassign(h, "t", 0, None)
    assert res.error is Errors.NO_REASSIGNMENT_IN_PROGRESS


def test_reassignment_rejections(h):
    before = h.image.next_offset
    assert reassign(h, "t", 0, ()).error is Errors.INVALID_REPLICA_ASSIGNMENT
    assert reassign(h, "t", 0, (1, 1)).error is Errors.INVALID_REPLICA_ASSIGNMENT
    res = reassign(h, "t", 0, (1, 9))
    assert res.error is Errors.INVALID_REPLICA_ASSIGNMENT and "broker 9" in res.error_message
    assert reassign(h, "t", 7, (1,)).error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert reassign(h, "nope", 0, (1,)).error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert h.image.next_offset == before
    assert reassign(h, "t", 0, (1, 2, 3)).error is Errors.NONE and h.last.records == ()


def test_preferred_election(h):
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)  # back, but partition 0 is led by 2 now and 1 is out of the ISR
    assert h.partition("t", 0).leader == 2
    res = elect(h, PREFERRED, (("t", (0, 1)),)).topics[0].partitions
    assert res[0].error is Errors.PREFERRED_LEADER_NOT_AVAILABLE  # 1 is not in the ISR
    assert res[1].error is Errors.ELECTION_NOT_NEEDED
    isr = list(h.partition("t", 0).isr)
    h.alter_isr("t", 0, isr + [1])
    res = elect(h, PREFERRED, (("t", (0,)),)).topics[0].partitions
    assert res[0].error is Errors.NONE and h.partition("t", 0).leader == 1
    assert h.partition("t", 0).leader_epoch == 2


def test_unclean_election(h):
    h.create_topic("u", assignments=((0, (1, 2)),))
    h.alter_isr("u", 0, [1])
    h.heartbeat(1, want_fence=True)
    assert h.partition("u", 0).leader == -1
    res = elect(h, UNCLEAN, (("u", (0,)), ("t", (0, 5)), ("zz", (0,)))).topics
    assert res[0].partitions[0].error is Errors.NONE
    part = h.partition("u", 0)
    assert part.leader == 2 and part.isr == (2,) and part.leader_recovery_state == 1
    assert res[1].partitions[0].error is Errors.ELECTION_NOT_NEEDED
    assert res[1].partitions[1].error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert res[2].partitions[0].error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    h.heartbeat(2, want_fence=True)
    (p,) = elect(h, UNCLEAN, (("u", (0,)),)).topics[0].partitions
    assert p.error is Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_election_over_every_partition_lists_every_topic_as_kafka_does(h):
    """Kafka's electLeaders with null topicPartitions: one entry per topic, its
    partitions that needed an election (ELECTION_NOT_NEEDED left out), an empty
    list where none did."""
    h.create_topic("a", assignments=((0, (2, 3)),))
    resp = elect(h, PREFERRED)
    assert resp.error is Errors.NONE and h.last.records == ()
    assert [(t.name, t.partitions) for t in resp.topics] == [("a", ()), ("t", ())]
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)
    isr = list(h.partition("t", 0).isr)
    h.alter_isr("t", 0, isr + [1])
    resp = elect(h, PREFERRED)
    assert [t.name for t in resp.topics] == ["a", "t"]
    assert resp.topics[0].partitions == ()
    # Partition 1 (replicas 2, 3, 1) is led by 2 again: not needed, left out.
    assert [(p.partition_index, p.error) for p in resp.topics[1].partitions] == [(0, Errors.NONE)]
    assert h.partition("t", 0).leader == 1


def test_every_partition_keeps_the_errors_other_than_not_needed(h):
    h.heartbeat(1, want_fence=True)
    (topic,) = elect(h, PREFERRED).topics
    # 1 is fenced: partition 0 cannot get its preferred leader back.
    assert [(p.partition_index, p.error) for p in topic.partitions] == [
        (0, Errors.PREFERRED_LEADER_NOT_AVAILABLE)
    ]


def test_an_unknown_election_type_fails_the_whole_request_on_every_partition(h):
    resp = elect(h, 7, (("t", (0, 1)), ("ghost", (3,))))
    assert resp.error is Errors.INVALID_REQUEST
    assert resp.error_message.startswith("Unknown election type 7")
    assert [
        (t.name, [(p.partition_index, p.error) for p in t.partitions]) for t in resp.topics
    ] == [
        ("t", [(0, Errors.INVALID_REQUEST), (1, Errors.INVALID_REQUEST)]),
        ("ghost", [(3, Errors.INVALID_REQUEST)]),
    ]
    assert h.last.records == ()
    resp = elect(h, 7)  # no partitions named: the top-level error alone
    assert resp.error is Errors.INVALID_REQUEST and resp.topics == ()


# ---------------------------------------------------------------- the record cap (issue 18 item 7)


def _big_topics_led_by_their_second_replica(h, sizes):
    """Topics whose every partition has replicas (1, 2), led by 2 with 1 back in
    the ISR: a preferred election would write one record per partition."""
    for i, size in enumerate(sizes):
        assignments = tuple((p, (1, 2)) for p in range(size))
        assert h.create_topic(f"big{i}", assignments=assignments).error is Errors.NONE
    h.heartbeat(1, want_fence=True)  # broker-driven: no cap
    h.heartbeat(1)
    topics = tuple(
        AlterPartitionTopic(
            tuple(
                AlterPartitionPartition(
                    p, 1, 1, new_isr_with_epochs=(BrokerState(2), BrokerState(1))
                )
                for p in range(size)
            ),
            topic_id=h.topic_id(f"big{i}"),
        )
        for i, size in enumerate(sizes)
    )
    resp = h.run(AlterPartitionRequest(2, h.epochs[2], topics))
    assert all(p.error is Errors.NONE for t in resp.topics for p in t.partitions)


def test_elections_past_ten_thousand_records_fail_whole_and_write_nothing(h):
    _big_topics_led_by_their_second_replica(h, (5_001, 5_000))
    before = h.image.next_offset
    resp = elect(h, PREFERRED)  # 10,001 elections
    assert resp.error is Errors.POLICY_VIOLATION
    assert resp.error_message.startswith("Unable to perform excessively large batch operation")
    assert resp.topics == () and h.image.next_offset == before
    listed = (("big0", tuple(range(5_001))), ("big1", tuple(range(5_000))))
    resp = elect(h, PREFERRED, listed)
    assert resp.error is Errors.POLICY_VIOLATION and h.image.next_offset == before
    assert [len(t.partitions) for t in resp.topics] == [5_001, 5_000]
    assert {p.error for t in resp.topics for p in t.partitions} == {Errors.POLICY_VIOLATION}
    # Exactly the cap is one operation.
    resp = elect(h, PREFERRED, (("big0", tuple(range(5_000))), ("big1", tuple(range(5_000)))))
    assert resp.error is Errors.NONE and len(h.last.records) == 10_000
    assert h.partition("big0", 0).leader == 1 and h.partition("big0", 5_000).leader == 2


def test_reassignments_past_ten_thousand_records_fail_whole_and_write_nothing(h):
    h.create_topic("big0", assignments=tuple((p, (1, 2)) for p in range(5_001)))
    h.create_topic("big1", assignments=tuple((p, (1, 2)) for p in range(5_000)))
    before = h.image.next_offset

    def request(sizes):
        return AlterPartitionReassignmentsRequest(
            tuple(
                ReassignableTopic(
                    f"big{i}", tuple(ReassignablePartition(p, (1, 2, 3)) for p in range(size))
                )
                for i, size in enumerate(sizes)
            )
            + (ReassignableTopic("ghost", (ReassignablePartition(0, (1,)),)),)
        )

    resp = h.run(request((5_001, 5_000)))
    assert resp.error is Errors.POLICY_VIOLATION
    assert resp.error_message.startswith("Unable to perform excessively large batch operation")
    assert [(t.name, len(t.partitions)) for t in resp.topics] == [
        ("big0", 5_001),
        ("big1", 5_000),
        ("ghost", 1),
    ]
    assert {p.error for t in resp.topics for p in t.partitions} == {Errors.POLICY_VIOLATION}
    assert h.image.next_offset == before
    resp = h.run(request((5_000, 5_000)))
    assert resp.error is Errors.NONE and len(h.last.records) == 10_000
    assert resp.topics[2].partitions[0].error is Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_cancel_when_only_added_replicas_are_in_sync_needs_an_unclean_topic(h):
    for name, configs in (("clean", ()), ("dirty", (("unclean.leader.election.enable", "true"),))):
        h.create_topic(name, assignments=((0, (1,)),), configs=configs)
        reassign(h, name, 0, (2,))
    # Make the added replica the only one in sync: 1 shuts down, 2 is elected uncleanly.
    h.heartbeat(1, want_fence=True)
    elect(h, UNCLEAN, (("clean", (0,)), ("dirty", (0,))))
    assert h.partition("clean").isr == (2,) and h.partition("clean").adding_replicas == (2,)
    res = reassign(h, "clean", 0, None)
    assert res.error is Errors.INVALID_REPLICA_ASSIGNMENT
    assert "would require an unclean leader election" in res.error_message
    res = reassign(h, "dirty", 0, None)
    assert res.error is Errors.NONE
    part = h.partition("dirty")
    assert part.replicas == (1,) and part.isr == (1,) and part.leader == -1  # 1 is fenced
    assert h.replayed() == h.image
