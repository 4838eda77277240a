"""CreateTopics, DeleteTopics, CreatePartitions."""

import pytest

from controller.messages import (
    CreatableTopic,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from metadata_records.errors import Errors
from metadata_records.records import (
    IN_CONTROLLED_SHUTDOWN,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from tests.controller.kafka_random import KafkaMockRandom
from tests.harness import ControllerHarness


@pytest.fixture
def h():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3, 4)
    return h


def create(h, *topics):
    return h.run(CreateTopicsRequest(tuple(topics))).topics


def test_create_writes_topic_configs_then_partitions(h):
    (res,) = create(h, CreatableTopic("orders", 4, 3, configs=(("min.insync.replicas", "2"),)))
    assert res.error is Errors.NONE and res.num_partitions == 4 and res.replication_factor == 3
    kinds = [type(r) for r in h.last.records]
    assert kinds == [TopicRecord, ConfigRecord] + [PartitionRecord] * 4
    topic = h.image.topic_by_name("orders")
    assert topic.topic_id == res.topic_id and topic.configs == {"min.insync.replicas": "2"}
    for p in range(4):
        part = h.partition("orders", p)
        assert part.isr == part.replicas and part.leader == part.replicas[0]
        assert (part.leader_epoch, part.partition_epoch) == (0, 0)
    assert len({h.partition("orders", p).leader for p in range(4)}) == 4  # leaders spread


def test_defaults(h):
    (res,) = create(h, CreatableTopic("d"))
    assert (res.num_partitions, res.replication_factor) == (1, 3)
    small = ControllerHarness()
    small.start_brokers(1, 2)
    assert small.create_topic("d").replication_factor == 2  # min(3, brokers)


def test_isr_is_the_active_replicas_and_the_leader_the_first_of_them(h):
    h.heartbeat(1, want_fence=True)
    (res,) = create(h, CreatableTopic("m", assignments=((0, (1, 2, 3)), (1, (3, 1, 2)))))
    assert res.error is Errors.NONE and res.replication_factor == 3
    assert h.partition("m", 0).isr == (2, 3) and h.partition("m", 0).leader == 2
    assert h.partition("m", 1).isr == (3, 2) and h.partition("m", 1).leader == 3
    # Placement takes a fenced broker only once the unfenced ones are used up.
    (res,) = create(h, CreatableTopic("placed", 6, 3))
    assert all(1 not in h.partition("placed", p).replicas for p in range(6))


@pytest.mark.parametrize(
    "topic,error,message",
    [
        (CreatableTopic(""), Errors.INVALID_TOPIC_EXCEPTION, "can't be empty"),
        (CreatableTopic(".."), Errors.INVALID_TOPIC_EXCEPTION, '"." or ".."'),
        (CreatableTopic("a/b"), Errors.INVALID_TOPIC_EXCEPTION, "illegal"),
        (CreatableTopic("x" * 250), Errors.INVALID_TOPIC_EXCEPTION, "longer than 249"),
        (CreatableTopic("t", 0), Errors.INVALID_PARTITIONS, "non-positive"),
        (CreatableTopic("t", -2), Errors.INVALID_PARTITIONS, "non-positive"),
        (CreatableTopic("t", 1, 0), Errors.INVALID_REPLICATION_FACTOR, "larger than 0"),
        (CreatableTopic("t", 1, 5), Errors.INVALID_REPLICATION_FACTOR, "only 4 broker(s)"),
        (CreatableTopic("t", 2, -1, ((0, (1,)),)), Errors.INVALID_REQUEST, "numPartitions"),
        (CreatableTopic("t", -1, 1, ((0, (1,)),)), Errors.INVALID_REQUEST, "replication factor"),
        (
            CreatableTopic("t", assignments=((0, ()),)),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "empty replica list",
        ),
        (
            CreatableTopic("t", assignments=((0, (1, 9)),)),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "broker 9, but no such broker",
        ),
        (
            CreatableTopic("t", assignments=((0, (1, 1)),)),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "more than once",
        ),
        (
            CreatableTopic("t", assignments=((0, (1, 2)), (1, (1,)))),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "not consistent",
        ),
        (
            CreatableTopic("t", assignments=((1, (1,)),)),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "consecutive 0-based integer sequence",
        ),
        (
            CreatableTopic("t", assignments=((0, (1,)), (0, (2,)))),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "Found multiple manual partition assignments for partition 0",
        ),
        (
            CreatableTopic("t", configs=(("retention.mss", "1"),)),
            Errors.INVALID_CONFIG,
            "Unknown topic config name: retention.mss",
        ),
        (
            CreatableTopic("t", configs=(("min.insync.replicas", "0"),)),
            Errors.INVALID_CONFIG,
            "at least 1",
        ),
        (
            CreatableTopic("t", configs=(("unclean.leader.election.enable", "yes"),)),
            Errors.INVALID_CONFIG,
            "true or false",
        ),
    ],
)
def test_rejections_name_the_problem_and_write_nothing(h, topic, error, message):
    before = h.image.next_offset
    (res,) = create(h, topic)
    assert res.error is error
    assert message in res.error_message
    assert res.topic_id is None
    assert h.image.next_offset == before


# ---------------------------------------------------------------- validation order


def test_create_topics_checks_the_replication_factor_before_the_partition_count(h):
    """Kafka's ``createTopic``: an automatic placement checks the replication
    factor first; a manual one checks replicationFactor before numPartitions."""
    (res,) = create(h, CreatableTopic("t", 0, 0))
    assert res.error is Errors.INVALID_REPLICATION_FACTOR
    assert res.error_message == (
        "Replication factor must be larger than 0, or -1 to use the default value."
    )
    (res,) = create(h, CreatableTopic("t", -2, -2))
    assert res.error is Errors.INVALID_REPLICATION_FACTOR
    (res,) = create(h, CreatableTopic("t", 0, 1))
    assert res.error is Errors.INVALID_PARTITIONS
    (res,) = create(h, CreatableTopic("t", 2, 2, ((0, (1, 2)),)))
    assert res.error is Errors.INVALID_REQUEST
    assert res.error_message == (
        "A manual partition assignment was specified, but replication factor was not set to -1."
    )


@pytest.mark.parametrize(
    "assignments,message",
    [
        # Each assignment's broker checks come before the index sequence ...
        (((1, (9,)),), "includes broker 9, but no such broker is registered"),
        (((0, (1, 2)), (2, (3,))), "a partition with 1 replica(s), but this is not consistent"),
        (((0, ()), (5, (1,))), "empty replica list"),
        # ... and so does the check that some replica is active.
        (((3, (1,)),), "partition 3 are fenced or in controlled shutdown"),
        # A repeated index is found while walking the assignments, in request order.
        (((2, (2,)), (2, (9,))), "Found multiple manual partition assignments for partition 2"),
        (((2, (9,)), (2, (2,))), "includes broker 9"),
        # The gap is named only once every assignment has passed.
        (((0, (2,)), (2, (3,))), "partitions should be a consecutive 0-based integer sequence"),
    ],
)
def test_create_topics_checks_each_manual_assignment_before_the_index_sequence(
    h, assignments, message
):
    h.heartbeat(1, want_fence=True)
    before = h.image.next_offset
    (res,) = create(h, CreatableTopic("t", assignments=assignments))
    assert res.error is Errors.INVALID_REPLICA_ASSIGNMENT
    assert message in res.error_message
    assert h.image.next_offset == before


def test_manual_assignment_brokers_are_checked_in_id_order(h):
    """Kafka's ``validateManualPartitionAssignment`` sorts the brokers first:
    in [9, 2, 2] the repeated 2 is named, not the unregistered 9."""
    (res,) = create(h, CreatableTopic("t", assignments=((0, (9, 2, 2)),)))
    assert res.error is Errors.INVALID_REPLICA_ASSIGNMENT
    assert res.error_message == (
        "The manual partition assignment includes the broker 2 more than once."
    )


def test_manual_partition_assignment_on_all_fenced_brokers_as_kafka():
    """Kafka's ``testManualPartitionAssignmentOnAllFencedBrokers``."""
    h = ControllerHarness()
    for b in (0, 1, 2, 3):
        h.register(b)
    (res,) = create(h, CreatableTopic("foo", assignments=((0, (0, 1, 2)),)))
    assert res.error is Errors.INVALID_REPLICA_ASSIGNMENT


def test_create_partitions_fails_with_manual_assignment_with_all_fenced_as_kafka():
    """Kafka's ``testCreatePartitionsFailsWithManualAssignmentWithAllFenced``."""
    h = ControllerHarness()
    for b in range(6):
        h.register(b)
    for b in (0, 1, 2):
        assert not h.heartbeat(b).is_fenced
    assert create(h, CreatableTopic("foo", assignments=((0, (0, 1, 2)),)))[0].error is Errors.NONE
    resp = h.run(CreatePartitionsRequest("foo", 2, ((3, 4, 5),)))
    assert resp.error is Errors.INVALID_REPLICA_ASSIGNMENT
    assert "partition 1 are fenced or in controlled shutdown" in resp.error_message
    assert h.run(CreatePartitionsRequest("foo", 2, ((2, 4, 5),))).error is Errors.NONE
    part = h.partition("foo", 1)
    assert (part.replicas, part.isr, part.leader) == ((2, 4, 5), (2,), 2)
    assert (part.leader_epoch, part.partition_epoch) == (0, 0)


# ---------------------------------------------------------------- placement (StripedReplicaPlacer)


def kafka_placed(*broker_ids: int) -> ControllerHarness:
    """Registered brokers, placed with Kafka's MockRandom as Kafka's test context does."""
    h = ControllerHarness(placement_random=lambda _seed: KafkaMockRandom())
    for b in broker_ids:
        h.register(b)
    return h


def in_controlled_shutdown_record(h: ControllerHarness, broker: int) -> None:
    """What Kafka's test context's inControlledShutdownBrokers replays: the
    record alone, from a batch this leader did not decide (so its heartbeat
    session is not shutting down)."""
    h.commit(
        [
            BrokerRegistrationChangeRecord(
                broker_id=broker,
                broker_epoch=h.epochs[broker],
                in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN,
                version=1,
            )
        ]
    )


def test_create_topics_isr_invariants_as_kafka():
    """Kafka's ``testCreateTopicsISRInvariants``: 0 unfenced, 1 unfenced with an
    in-controlled-shutdown registration, 2 fenced. All three are usable (the
    placer reads sessions, and 1's is not shutting down; a fenced broker may
    follow), the ISR only 0 (it reads registrations: not fenced, not in
    controlled shutdown), and 0 leads."""
    h = kafka_placed(0, 1, 2)
    for b in (0, 1):
        assert not h.heartbeat(b).is_fenced
    in_controlled_shutdown_record(h, 1)
    (res,) = create(h, CreatableTopic("foo"))
    assert (res.error, res.error_message, res.num_partitions, res.replication_factor) == (
        Errors.NONE,
        None,
        1,
        3,
    )
    part = h.partition("foo")
    assert (part.replicas, part.isr, part.leader, part.leader_recovery_state) == (
        (1, 0, 2),
        (0,),
        0,
        0,
    )
    assert (part.leader_epoch, part.partition_epoch) == (0, 0)
    assert h.replayed() == h.image


def test_create_topics_as_kafka():
    """Kafka's ``testCreateTopics``, from its second step (its first needs
    Kafka's static default replication factor of 3 with no broker registered;
    here the default is min(3, registered brokers))."""
    h = kafka_placed(0, 1, 2)
    assert not h.heartbeat(0).is_fenced
    in_controlled_shutdown_record(h, 0)
    (res,) = create(h, CreatableTopic("foo"))
    assert (res.error, res.error_message) == (
        Errors.INVALID_REPLICATION_FACTOR,
        "Unable to replicate the partition 3 time(s): All brokers are currently fenced or in "
        "controlled shutdown.",
    )
    # Kafka's context registers them all again (0 leaves controlled shutdown)
    # and unfences them.
    h.advance(h.session_timeout_ms + 1)
    for b in (0, 1, 2):
        assert h.register(b, generation=1).error is Errors.NONE
        assert not h.heartbeat(b).is_fenced
    (res,) = create(h, CreatableTopic("foo"))
    assert (res.error, res.num_partitions, res.replication_factor) == (Errors.NONE, 1, 3)


def test_a_default_topic_is_created_on_three_brokers_with_one_fenced():
    """The default replication factor counts registered brokers, and so does
    the placer: a fenced broker follows, outside the ISR."""
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.heartbeat(3, want_fence=True)
    (res,) = create(h, CreatableTopic("d", 4))
    assert (res.error, res.replication_factor) == (Errors.NONE, 3)
    for p in range(4):
        part = h.partition("d", p)
        assert set(part.replicas) == {1, 2, 3} and part.replicas[0] != 3
        assert part.isr == tuple(b for b in part.replicas if b != 3)
        assert part.leader == part.isr[0]


def test_brokers_in_controlled_shutdown_are_not_placed():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3, 4)
    h.create_topic("led", assignments=((0, (1, 2)),))
    h.heartbeat(1, want_shut_down=True)  # it leads: it waits in controlled shutdown
    (res,) = create(h, CreatableTopic("t", 8, 3))
    assert res.error is Errors.NONE
    assert all(1 not in h.partition("t", p).replicas for p in range(8))
    h.heartbeat(4, want_fence=True)
    (res,) = create(h, CreatableTopic("u", 1, 4))
    assert res.error is Errors.INVALID_REPLICATION_FACTOR
    assert res.error_message == (
        "Unable to replicate the partition 4 time(s): The target replication factor of 4 "
        "cannot be reached because only 3 broker(s) are registered."
    )


def test_a_broker_done_with_its_controlled_shutdown_may_follow_but_not_join_the_isr():
    """Let go, it is fenced with its in-controlled-shutdown flag still set:
    usable as a fenced follower (as in Kafka), never an ISR member."""
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("led", assignments=((0, (3, 1)),))
    assert not h.heartbeat(3, want_shut_down=True).should_shut_down  # it hands over t-0
    for b in (1, 2):
        h.heartbeat(b)
    assert h.heartbeat(3, want_shut_down=True).should_shut_down
    reg = h.image.brokers[3]
    assert reg.fenced and reg.in_controlled_shutdown
    (res,) = create(h, CreatableTopic("t", 3, 3))
    assert res.error is Errors.NONE
    for p in range(3):
        part = h.partition("t", p)
        assert 3 in part.replicas[1:] and 3 not in part.isr


def test_existing_duplicates_and_collisions(h):
    create(h, CreatableTopic("a.b"))
    before = h.image.next_offset
    res = create(
        h, CreatableTopic("a.b"), CreatableTopic("a_b"), CreatableTopic("x"), CreatableTopic("x")
    )
    assert [r.error for r in res] == [
        Errors.TOPIC_ALREADY_EXISTS,
        Errors.INVALID_TOPIC_EXCEPTION,
        Errors.INVALID_REQUEST,
        Errors.INVALID_REQUEST,
    ]
    assert res[1].error_message == "Topic 'a_b' collides with existing topic: a.b"
    assert res[2].error_message == "Duplicate topic name."
    assert h.image.next_offset == before
    # Collisions inside one request are caught too, and good topics still land.
    res = create(h, CreatableTopic("p.q"), CreatableTopic("p_q"), CreatableTopic("ok"))
    assert [r.error for r in res] == [Errors.NONE, Errors.INVALID_TOPIC_EXCEPTION, Errors.NONE]
    assert set(h.image.topic_ids) == {"a.b", "p.q", "ok"}


@pytest.mark.parametrize(
    "stored, asked",
    [
        ("a_b.c", "a.b_c"),  # looked up: two '.'/'_', four candidates
        ("x." * 6 + "y", "x_" * 6 + "y"),  # six
        ("v." * 11 + "w", "v_" * 5 + "v." * 6 + "w"),  # eleven: past the lookup, scanned
    ],
)
def test_a_collision_is_found_however_many_dots_the_name_has(h, stored, asked):
    create(h, CreatableTopic("plain"), CreatableTopic(stored))
    (res,) = create(h, CreatableTopic(asked))
    assert res.error is Errors.INVALID_TOPIC_EXCEPTION
    assert res.error_message == f"Topic '{asked}' collides with existing topic: {stored}"
    (res,) = create(h, CreatableTopic(asked.replace("x", "z").replace("v", "u").replace("a", "e")))
    assert res.error is Errors.NONE  # the same shape under another name collides with nothing


def test_all_replicas_fenced_or_shutting_down(h):
    for b in (1, 2):
        h.heartbeat(b, want_fence=True)
    (res,) = create(h, CreatableTopic("t", assignments=((0, (1, 2)),)))
    assert res.error is Errors.INVALID_REPLICA_ASSIGNMENT
    assert "are fenced or in controlled shutdown" in res.error_message
    for b in (3, 4):
        h.heartbeat(b, want_fence=True)
    (res,) = create(h, CreatableTopic("t", 1, 1))
    assert res.error is Errors.INVALID_REPLICATION_FACTOR
    assert "All brokers are currently fenced" in res.error_message


def test_no_brokers_at_all():
    h = ControllerHarness()
    res = h.create_topic("t")
    assert (
        res.error is Errors.INVALID_REPLICATION_FACTOR
        and "no brokers are registered" in res.error_message
    )


def test_delete_topics(h):
    create(h, CreatableTopic("a", 3, 2), CreatableTopic("b", 1, 1))
    a_id = h.topic_id("a")
    res = h.run(DeleteTopicsRequest(("a", "zzz", "b", "b"))).topics
    assert [r.error for r in res] == [
        Errors.NONE,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.INVALID_REQUEST,
        Errors.INVALID_REQUEST,
    ]
    assert res[0].topic_id == a_id and res[1].error_message == "Topic 'zzz' does not exist."
    assert h.last.records == (RemoveTopicRecord(topic_id=a_id),)
    assert "a" not in h.image.topic_ids and h.image.partition_count == 1
    # The name can be used again, with a new id.
    (res,) = create(h, CreatableTopic("a"))
    assert res.error is Errors.NONE and res.topic_id != a_id
    assert h.replayed() == h.image


def test_create_partitions(h):
    create(h, CreatableTopic("t", 2, 3))
    resp = h.run(CreatePartitionsRequest("t", 5))
    assert resp.error is Errors.NONE
    assert [r.partition_id for r in h.last.records] == [2, 3, 4]
    assert all(len(h.partition("t", p).replicas) == 3 for p in range(5))
    resp = h.run(CreatePartitionsRequest("t", 6, ((4, 3, 2),)))
    assert resp.error is Errors.NONE and h.partition("t", 5).replicas == (4, 3, 2)
    assert h.replayed() == h.image


@pytest.mark.parametrize(
    "req,error,message",
    [
        (CreatePartitionsRequest("nope", 3), Errors.UNKNOWN_TOPIC_OR_PARTITION, "does not exist"),
        (CreatePartitionsRequest("t", 1), Errors.INVALID_PARTITIONS, "would not be an increase"),
        (CreatePartitionsRequest("t", 2), Errors.INVALID_PARTITIONS, "already has 2 partition(s)"),
        (
            CreatePartitionsRequest("t", 4, ((1, 2),)),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "only 1 assignment",
        ),
        (
            CreatePartitionsRequest("t", 3, ((1,),)),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "not consistent",
        ),
        (
            CreatePartitionsRequest("t", 3, ((1, 7),)),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "no such broker",
        ),
    ],
)
def test_create_partitions_rejections(h, req, error, message):
    create(h, CreatableTopic("t", 2, 2))
    before = h.image.next_offset
    resp = h.run(req)
    assert resp.error is error and message in resp.error_message
    assert h.image.next_offset == before


def test_more_than_ten_thousand_partitions_in_one_request_is_a_policy_violation(h):
    """Kafka's cap (MAX_PARTITIONS_PER_BATCH), over all topics of a request and
    checked before anything is built: two billion partitions made the
    controller allocate until it was killed. Nothing is written."""
    from controller.messages import CreatePartitionsRequest
    from controller.topic_control import MAX_PARTITIONS_PER_REQUEST

    before = h.image.next_offset
    results = create(
        h,
        CreatableTopic("a", MAX_PARTITIONS_PER_REQUEST, 1),
        CreatableTopic("b", 1, 1),
    )
    assert [r.error for r in results] == [Errors.POLICY_VIOLATION] * 2
    assert "10001 requested, at most 10000" in results[0].error_message
    (huge,) = create(h, CreatableTopic("c", 2**31 - 1, 1))
    assert huge.error is Errors.POLICY_VIOLATION
    assert h.image.next_offset == before
    (ok,) = create(h, CreatableTopic("d", 2, 1))
    assert ok.error is Errors.NONE
    grown = h.run(CreatePartitionsRequest("d", 2**31 - 1))
    assert grown.error is Errors.POLICY_VIOLATION and "at most 10000" in grown.error_message


def test_the_records_of_one_create_topics_are_capped_at_ten_thousand(h):
    """Kafka's MAX_RECORDS_PER_USER_OP counts records, not partitions: a topic's
    TopicRecord and ConfigRecords count, so one topic of 10,000 partitions is
    over it (Kafka's BoundedList throws; POLICY_VIOLATION on every topic)."""
    before = h.image.next_offset
    (res,) = create(h, CreatableTopic("full", 10_000, 1))  # 10,001 records
    assert res.error is Errors.POLICY_VIOLATION
    # Two topics of 5,000 partitions: 10,002 records, over it on the second topic.
    results = create(h, CreatableTopic("ok", 5_000, 1), CreatableTopic("full", 5_000, 1))
    assert [r.error for r in results] == [Errors.POLICY_VIOLATION] * 2
    assert results[0].error_message.startswith(
        "Unable to perform excessively large batch operation"
    )
    configs = (("min.insync.replicas", "1"),)
    (res,) = create(h, CreatableTopic("c", 9_999, 1, configs=configs))  # 10,001 records
    assert res.error is Errors.POLICY_VIOLATION and h.image.next_offset == before
    (res,) = create(h, CreatableTopic("c", 9_998, 1, configs=configs))  # exactly 10,000
    assert res.error is Errors.NONE and len(h.last.records) == 10_000


def test_a_failed_topic_writes_no_records_so_it_does_not_count(h):
    create(h, CreatableTopic("taken", 1, 1))
    results = create(h, CreatableTopic("taken", 5_000, 1), CreatableTopic("fresh", 5_000, 1))
    assert [r.error for r in results] == [Errors.TOPIC_ALREADY_EXISTS, Errors.NONE]
    assert len(h.last.records) == 5_001


def test_create_partitions_is_capped_by_its_records_before_any_is_built(h):
    create(h, CreatableTopic("grow", 1, 1))
    before = h.image.next_offset
    resp = h.run(CreatePartitionsRequest("grow", 10_002))  # 10,001 new PartitionRecords
    assert resp.error is Errors.POLICY_VIOLATION and h.image.next_offset == before
    resp = h.run(CreatePartitionsRequest("grow", 10_001))
    assert resp.error is Errors.NONE and len(h.last.records) == 10_000


# ---------------------------------------------------------------- validateOnly


def test_validate_only_as_kafkas_tests(h):
    """ReplicationControlManagerTest.testCreateTopicsWithValidateOnlyFlag and
    testInvalidCreateTopicsWithValidateOnlyFlag: no records, Kafka's answer."""
    before = h.image.next_offset
    (ok,) = h.run(CreateTopicsRequest((CreatableTopic("foo", 1, 3),), validate_only=True)).topics
    assert ok.error is Errors.NONE and h.last.records == () and h.image.next_offset == before
    assert "foo" not in h.image.topic_ids
    (bad,) = h.run(CreateTopicsRequest((CreatableTopic("foo", 1, 5),), validate_only=True)).topics
    assert bad.error is Errors.INVALID_REPLICATION_FACTOR and h.last.records == ()
    assert bad.error_message == (
        "Unable to replicate the partition 5 time(s): The target replication factor of 5 "
        "cannot be reached because only 4 broker(s) are registered."
    )


VALIDATED = [
    (CreatableTopic("orders", 3, 2, configs=(("min.insync.replicas", "2"),)),),
    (CreatableTopic("manual", assignments=((0, (1, 2)), (1, (3, 4)))),),
    (CreatableTopic("dup"), CreatableTopic("dup")),
    (CreatableTopic("a.b"), CreatableTopic("a_b")),  # collide with each other
    (CreatableTopic("existing"),),
    (CreatableTopic("bad name!"),),
    (CreatableTopic("cfg", configs=(("retention.ms", "1"),)),),
    (CreatableTopic("rf", 1, 9),),
    (CreatableTopic("gap", assignments=((0, (1,)), (2, (2,)))),),
    (CreatableTopic("huge", 10_001, 1),),
    (CreatableTopic("ok"), CreatableTopic("existing"), CreatableTopic("rf0", 1, 0)),
]


@pytest.mark.parametrize("topics", VALIDATED, ids=lambda t: "+".join(x.name for x in t))
def test_validate_only_answers_exactly_as_the_real_request_and_writes_nothing(topics):
    """Two identical controllers: one validates, one creates. Every answer is
    the same, topic ids included (the same id source); only the records differ."""
    real, dry = ControllerHarness(), ControllerHarness()
    for c in (real, dry):
        c.start_brokers(1, 2, 3, 4)
        assert create(c, CreatableTopic("existing"))[0].error is Errors.NONE
    before = dry.image
    checked = dry.run(CreateTopicsRequest(topics, validate_only=True))
    assert dry.last.records == () and dry.image == before
    done = real.run(CreateTopicsRequest(topics))
    assert checked == done
    # The dry run left nothing behind: creating for real now gives the same answers
    # (but for the topic ids, which come from the next ids of its source).
    again = dry.run(CreateTopicsRequest(topics))
    assert [(t.name, t.error, t.error_message) for t in again.topics] == [
        (t.name, t.error, t.error_message) for t in done.topics
    ]
