"""AlterPartition through the controller (docs/kafka-rules.md 2.1-2.4, docs/api.md
"POST /v1/alter-partition"): request-level checks, every partition-level check
in Kafka's order, version substitutions, the records written and the response."""

import pytest

from controller.messages import (
    AlterPartitionPartition,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    BrokerState,
    ReassignablePartition,
    ReassignableTopic,
    UnregisterBrokerRequest,
)
from metadata_records.errors import Errors
from metadata_records.records import (
    LRS_RECOVERED,
    LRS_RECOVERING,
    NO_LEADER,
    NO_LEADER_CHANGE,
    TOPIC_RESOURCE,
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from metadata_records.uuids import ZERO_UUID, uuid_from_bytes
from tests.harness import ControllerHarness

VERSIONS = (0, 1, 2, 3)
UNKNOWN_TOPIC_ID = uuid_from_bytes(b"no-such-topic-id")

# ---------------------------------------------------------------- helpers


def cluster(*brokers: int) -> ControllerHarness:
    h = ControllerHarness()
    h.start_brokers(*(brokers or (1, 2, 3, 4)))
    return h


def make_topic(h: ControllerHarness, name: str, *assignments, configs=()) -> str:
    """A topic with one partition per replica list given (manual assignment)."""
    result = h.create_topic(
        name,
        -1,
        assignments=tuple((pid, tuple(replicas)) for pid, replicas in enumerate(assignments)),
        configs=configs,
    )
    assert result.error is Errors.NONE, result
    return result.topic_id


def craft_topic(h: ControllerHarness, name: str, *partitions: dict) -> str:
    """A topic written straight into the log, for states the API cannot reach
    (a replica that is not a registered broker, chosen epochs)."""
    topic_id = uuid_from_bytes(name.encode().ljust(16, b"-")[:16])
    records = [TopicRecord(name=name, topic_id=topic_id)]
    for pid, fields in enumerate(partitions):
        records.append(PartitionRecord(partition_id=pid, topic_id=topic_id, **fields))
    h.commit(records)
    return topic_id


def bump_epochs(h: ControllerHarness, name: str, pid: int = 0, *, leader: int, partition: int):
    """Commits change records that only move the epochs: ``leader`` records that
    name the current leader (+1 leader and partition epoch each), then records
    that change nothing (+1 partition epoch each)."""
    topic_id = h.topic_id(name)
    current = h.partition(name, pid).leader
    h.commit(
        [PartitionChangeRecord(partition_id=pid, topic_id=topic_id, leader=current)] * leader
        + [PartitionChangeRecord(partition_id=pid, topic_id=topic_id)] * partition
    )


def pdata(
    h: ControllerHarness,
    name: str,
    pid: int,
    isr,
    *,
    version: int = 3,
    epochs: dict[int, int] | None = None,
    leader_epoch: int | None = None,
    partition_epoch: int | None = None,
    lrs: int = LRS_RECOVERED,
) -> AlterPartitionPartition:
    """One partition of an AlterPartition request; epochs default to the
    partition's current ones, ISR broker epochs (v3) to the registered ones."""
    topic_id = h.image.topic_ids.get(name)
    part = h.image.partition(topic_id, pid) if topic_id is not None else None
    epochs = epochs or {}
    return AlterPartitionPartition(
        pid,
        leader_epoch if leader_epoch is not None else (part.leader_epoch if part else 0),
        partition_epoch if partition_epoch is not None else (part.partition_epoch if part else 0),
        new_isr=tuple(isr) if version < 3 else (),
        new_isr_with_epochs=tuple(BrokerState(b, epochs.get(b, h.epochs.get(b, -1))) for b in isr)
        if version >= 3
        else (),
        leader_recovery_state=lrs,
    )


def tentry(h: ControllerHarness, name: str, *parts, version: int = 3) -> AlterPartitionTopic:
    if version > 1:
        return AlterPartitionTopic(tuple(parts), topic_id=h.topic_id(name))
    return AlterPartitionTopic(tuple(parts), topic_name=name)


def request(
    h: ControllerHarness, broker_id: int, *topics, version: int = 3, broker_epoch: int | None = None
) -> AlterPartitionRequest:
    epoch = h.epochs.get(broker_id, -1) if broker_epoch is None else broker_epoch
    return AlterPartitionRequest(broker_id, epoch, tuple(topics), version)


def alter_one(h: ControllerHarness, name: str, isr, *, broker_id=None, version=3, pid=0, **kw):
    """Runs a one-partition request and returns its single partition entry."""
    part = h.partition(name, pid)
    requester = part.leader if broker_id is None else broker_id
    resp = h.run(
        request(
            h,
            requester,
            tentry(h, name, pdata(h, name, pid, isr, version=version, **kw), version=version),
            version=version,
        )
    )
    assert resp.error is Errors.NONE, resp
    (topic,) = resp.topics
    if version > 1:
        assert (topic.topic_id, topic.topic_name) == (h.topic_id(name), None)
    else:
        assert (topic.topic_name, topic.topic_id) == (name, None)
    (entry,) = topic.partitions
    assert entry.partition_index == pid
    return entry


def assert_error_entry(entry, error: Errors, pid: int = 0) -> None:
    """Error entries carry only the index and code (docs/kafka-rules.md 0: no schema defaults)."""
    assert entry.partition_index == pid
    assert entry.error is error, entry
    assert entry.leader_id == 0
    assert entry.leader_epoch == 0
    assert entry.isr == ()
    assert entry.leader_recovery_state == 0
    assert entry.partition_epoch == 0


def rejected(h: ControllerHarness, name: str, isr, error: Errors, **kw):
    """The request is refused for this partition and nothing is written."""
    before = h.image
    entry = alter_one(h, name, isr, **kw)
    assert_error_entry(entry, error, kw.get("pid", 0))
    assert h.last.records == ()
    assert h.image == before
    assert_consistent(h)
    return entry


def assert_consistent(h: ControllerHarness) -> None:
    assert h.image.ignored_records == 0
    assert h.replayed() == h.image


def validation_cluster() -> ControllerHarness:
    """Brokers 1-4; topic t: replicas [1, 2, 3], ISR [1, 2, 3], leader 1,
    leader epoch 2, partition epoch 5 (distinct, so every epoch check shows)."""
    h = cluster(1, 2, 3, 4)
    make_topic(h, "t", (1, 2, 3))
    bump_epochs(h, "t", leader=2, partition=3)
    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, (1, 2, 3), 2, 5)
    return h


# ---------------------------------------------------------------- 2.1 request level


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_topics_answers_none_without_the_broker_epoch_check(version):
    h = cluster(1)
    before = h.image
    for broker_id, epoch in [(1, h.epochs[1]), (1, h.epochs[1] + 7), (42, -1)]:
        resp = h.run(AlterPartitionRequest(broker_id, epoch, (), version))
        assert resp.error is Errors.NONE
        assert resp.topics == ()
        assert h.last.records == ()
    assert h.image == before
    assert_consistent(h)


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_requester_gets_top_level_stale_broker_epoch(version):
    h = validation_cluster()
    before = h.image
    req = AlterPartitionRequest(
        9, 3, (tentry(h, "t", pdata(h, "t", 0, [1, 2], version=version), version=version),), version
    )
    resp = h.run(req)
    assert resp.error is Errors.STALE_BROKER_EPOCH
    assert resp.topics == ()
    assert h.last.records == ()
    assert h.image == before
    assert_consistent(h)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("delta", [-1, 1])
def test_stale_broker_epoch_fails_the_whole_request(version, delta):
    h = validation_cluster()
    before = h.image
    resp = h.run(
        request(
            h,
            1,
            tentry(h, "t", pdata(h, "t", 0, [1, 2], version=version), version=version),
            version=version,
            broker_epoch=h.epochs[1] + delta,
        )
    )
    assert resp.error is Errors.STALE_BROKER_EPOCH
    assert resp.topics == ()
    assert h.last.records == ()
    assert h.image == before
    assert_consistent(h)


def test_broker_epoch_check_ignores_the_requesters_fenced_state():
    h = validation_cluster()
    assert h.heartbeat(4, want_fence=True).is_fenced
    assert h.image.brokers[4].fenced
    # A fenced broker with its current epoch passes the request-level check and
    # is refused per partition (it is not the leader).
    rejected(h, "t", [1, 2], Errors.INVALID_REQUEST, broker_id=4)


@pytest.mark.parametrize("version", [0, 1])
def test_unknown_topic_name_v0_v1_fails_every_partition(version):
    h = validation_cluster()
    before = h.image
    unknown = AlterPartitionTopic(
        (
            AlterPartitionPartition(0, 2, 5, new_isr=(1, 2)),
            AlterPartitionPartition(3, 2, 5, new_isr=(1,)),
        ),
        topic_name="nope",
    )
    resp = h.run(request(h, 1, unknown, version=version))
    assert resp.error is Errors.NONE
    (topic,) = resp.topics
    assert (topic.topic_name, topic.topic_id) == ("nope", None)
    assert [p.partition_index for p in topic.partitions] == [0, 3]
    for entry in topic.partitions:
        assert_error_entry(entry, Errors.UNKNOWN_TOPIC_OR_PARTITION, entry.partition_index)
    assert h.last.records == ()
    assert h.image == before
    assert_consistent(h)


@pytest.mark.parametrize("version", [0, 1])
def test_v0_v1_look_topics_up_by_name_only(version):
    h = validation_cluster()
    # A correct topic id without a name is not enough below v2.
    by_id = AlterPartitionTopic(
        (pdata(h, "t", 0, [1, 2], version=version),), topic_id=h.topic_id("t")
    )
    resp = h.run(request(h, 1, by_id, version=version))
    assert_error_entry(resp.topics[0].partitions[0], Errors.UNKNOWN_TOPIC_OR_PARTITION)
    assert h.last.records == ()
    assert_consistent(h)


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("topic_id", [UNKNOWN_TOPIC_ID, ZERO_UUID, None])
def test_unknown_topic_id_v2_plus_fails_every_partition(version, topic_id):
    h = validation_cluster()
    before = h.image
    unknown = AlterPartitionTopic(
        (
            pdata(h, "t", 0, [1, 2], version=version),
            pdata(h, "t", 1, [1], version=version),
        ),
        topic_name="t",  # a known name does not help from v2 on
        topic_id=topic_id,
    )
    resp = h.run(request(h, 1, unknown, version=version))
    assert resp.error is Errors.NONE
    (topic,) = resp.topics
    assert (topic.topic_id, topic.topic_name) == (topic_id, None)
    assert [p.partition_index for p in topic.partitions] == [0, 1]
    for entry in topic.partitions:
        assert_error_entry(entry, Errors.UNKNOWN_TOPIC_ID, entry.partition_index)
    assert h.last.records == ()
    assert h.image == before
    assert_consistent(h)


@pytest.mark.parametrize("version", [2, 3])
def test_zero_uuid_is_unknown_even_if_the_log_holds_a_topic_with_it(version):
    h = cluster(1, 2)
    h.commit(
        [
            TopicRecord(name="z", topic_id=ZERO_UUID),
            PartitionRecord(
                partition_id=0, topic_id=ZERO_UUID, replicas=(1, 2), isr=(1, 2), leader=1
            ),
        ]
    )
    assert h.partition("z") is not None
    entry = alter_one(h, "z", [1], version=version)
    assert_error_entry(entry, Errors.UNKNOWN_TOPIC_ID)
    assert h.last.records == ()
    assert_consistent(h)


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_partition_index(version):
    h = validation_cluster()
    before = h.image
    resp = h.run(
        request(
            h,
            1,
            tentry(h, "t", pdata(h, "t", 1, [1, 2], version=version), version=version),
            version=version,
        )
    )
    assert_error_entry(resp.topics[0].partitions[0], Errors.UNKNOWN_TOPIC_OR_PARTITION, pid=1)
    assert h.last.records == ()
    assert h.image == before
    assert_consistent(h)


# ---------------------------------------------------------------- 2.2 epochs and requester


@pytest.mark.parametrize("version", VERSIONS)
def test_newer_leader_epoch_is_not_controller(version):
    h = validation_cluster()
    rejected(h, "t", [1, 2], Errors.NOT_CONTROLLER, version=version, leader_epoch=3)
    # Check 2 precedes 5 and 6: from a non-leader, with an older partition epoch.
    rejected(h, "t", [1, 2], Errors.NOT_CONTROLLER, version=version, leader_epoch=3, broker_id=2)
    rejected(
        h, "t", [1, 2], Errors.NOT_CONTROLLER, version=version, leader_epoch=3, partition_epoch=4
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_newer_partition_epoch_is_not_controller_even_from_a_non_leader(version):
    h = validation_cluster()
    rejected(h, "t", [1, 2], Errors.NOT_CONTROLLER, version=version, partition_epoch=6)
    rejected(h, "t", [1, 2], Errors.NOT_CONTROLLER, version=version, partition_epoch=6, broker_id=3)
    # Check 3 precedes check 4: an older leader epoch does not matter.
    rejected(
        h,
        "t",
        [1, 2],
        Errors.NOT_CONTROLLER,
        version=version,
        partition_epoch=6,
        leader_epoch=1,
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_older_leader_epoch_is_fenced_leader_epoch_even_from_a_non_leader(version):
    h = validation_cluster()
    rejected(h, "t", [1, 2], Errors.FENCED_LEADER_EPOCH, version=version, leader_epoch=1)
    # Check 4 precedes check 5.
    rejected(
        h, "t", [1, 2], Errors.FENCED_LEADER_EPOCH, version=version, leader_epoch=1, broker_id=2
    )
    # ... and 6 (an older partition epoch too).
    rejected(
        h,
        "t",
        [1, 2],
        Errors.FENCED_LEADER_EPOCH,
        version=version,
        leader_epoch=1,
        partition_epoch=4,
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_requester_that_is_not_the_leader_is_invalid_request(version):
    h = validation_cluster()
    rejected(h, "t", [1, 2, 3], Errors.INVALID_REQUEST, version=version, broker_id=2)
    rejected(h, "t", [2, 3], Errors.INVALID_REQUEST, version=version, broker_id=2)
    # Check 5 precedes check 6.
    rejected(
        h, "t", [1, 2], Errors.INVALID_REQUEST, version=version, broker_id=3, partition_epoch=4
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_older_partition_epoch_is_invalid_update_version(version):
    h = validation_cluster()
    rejected(h, "t", [1, 2], Errors.INVALID_UPDATE_VERSION, version=version, partition_epoch=4)
    # Check 6 precedes the ISR checks.
    rejected(h, "t", [2, 3], Errors.INVALID_UPDATE_VERSION, version=version, partition_epoch=0)


# ---------------------------------------------------------------- 2.2 ISR checks


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "isr",
    [
        pytest.param([1, 4], id="not-a-replica"),
        pytest.param([1, 9], id="unregistered-non-replica"),
        pytest.param([1, 2, 2], id="duplicate"),
        pytest.param([1, 1], id="duplicate-leader"),
        pytest.param([1, -1], id="negative"),
        pytest.param([], id="empty"),
        pytest.param([2, 3], id="without-leader"),
        pytest.param([2], id="without-leader-single"),
    ],
)
def test_invalid_isr_is_invalid_request(version, isr):
    h = validation_cluster()
    rejected(h, "t", isr, Errors.INVALID_REQUEST, version=version)


@pytest.mark.parametrize("version", VERSIONS)
def test_isr_checks_precede_the_eligibility_check(version):
    h = validation_cluster()
    assert h.heartbeat(4, want_fence=True).is_fenced
    assert h.heartbeat(2, want_fence=True).is_fenced  # 2 leaves the ISR
    # 4 is not a replica (and fenced): INVALID_REQUEST, not ineligible.
    rejected(h, "t", [1, 4], Errors.INVALID_REQUEST, version=version)
    # Leader missing, 2 fenced: INVALID_REQUEST.
    rejected(h, "t", [3, 2], Errors.INVALID_REQUEST, version=version)


# ---------------------------------------------------------------- 2.2 leader recovery state


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("lrs", [2, -1, 127, -128])
def test_invalid_leader_recovery_state_fails_the_whole_request(version, lrs):
    h = validation_cluster()
    make_topic(h, "u", (1, 2, 3))
    before = h.image
    req = request(
        h,
        1,
        # A valid change that precedes the bad partition is not written either.
        tentry(h, "u", pdata(h, "u", 0, [1, 2], version=version), version=version),
        tentry(h, "t", pdata(h, "t", 0, [1, 2], version=version, lrs=lrs), version=version),
        version=version,
    )
    resp = h.run(req)
    assert resp.error is Errors.INVALID_REQUEST
    assert resp.topics == ()
    assert str(lrs) in resp.error_message
    assert h.last.records == ()
    assert h.image == before
    assert_consistent(h)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_invalid_leader_recovery_state_is_checked_only_after_checks_1_to_8(version):
    h = validation_cluster()
    make_topic(h, "u", (1, 2, 3))
    req = request(
        h,
        1,
        tentry(
            h,
            "t",
            pdata(h, "t", 0, [1, 2], version=version, lrs=5, leader_epoch=1),  # check 4
            pdata(h, "t", 0, [1, 2], version=version, lrs=5, partition_epoch=4),  # check 6
            pdata(h, "t", 0, [1, 4], version=version, lrs=5),  # check 7
            pdata(h, "t", 0, [2, 3], version=version, lrs=5),  # check 8
            version=version,
        ),
        tentry(h, "u", pdata(h, "u", 0, [1, 3], version=version), version=version),
        version=version,
    )
    resp = h.run(req)
    assert resp.error is Errors.NONE
    t, u = resp.topics
    errors = [p.error for p in t.partitions]
    assert errors == [
        Errors.FENCED_LEADER_EPOCH,
        Errors.INVALID_UPDATE_VERSION,
        Errors.INVALID_REQUEST,
        Errors.INVALID_REQUEST,
    ]
    assert u.partitions[0].error is Errors.NONE
    (record,) = h.last.records
    assert record.topic_id == h.topic_id("u") and record.isr == (1, 3)
    assert_consistent(h)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_recovering_with_more_than_one_isr_member_is_invalid_request(version):
    h = cluster(1, 2, 3)
    craft_topic(
        h, "r", dict(replicas=(1, 2, 3), isr=(1,), leader=1, leader_recovery_state=LRS_RECOVERING)
    )
    rejected(h, "r", [1, 2], Errors.INVALID_REQUEST, version=version, lrs=LRS_RECOVERING)
    # And from a RECOVERED partition (check 10 fires first; 11 would too).
    make_topic(h, "t", (1, 2, 3))
    rejected(h, "t", [1, 2], Errors.INVALID_REQUEST, version=version, lrs=LRS_RECOVERING)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_recovered_to_recovering_is_invalid_request(version):
    h = validation_cluster()
    rejected(h, "t", [1], Errors.INVALID_REQUEST, version=version, lrs=LRS_RECOVERING)
    assert h.partition("t").leader_recovery_state == LRS_RECOVERED


@pytest.mark.parametrize("version", [1, 2, 3])
def test_recovery_state_checks_precede_the_eligibility_check(version):
    h = ineligible_cluster()
    # Check 10 before 12: 3 is fenced, but the ISR size is what is refused.
    rejected(h, "t", [1, 3], Errors.INVALID_REQUEST, version=version, lrs=LRS_RECOVERING)
    rejected(h, "t", [1, 9, 2], Errors.INVALID_REQUEST, version=version, lrs=LRS_RECOVERING)


def test_recovered_to_recovering_precedes_the_epoch_check():
    h = ineligible_cluster()
    wrong = {1: h.epochs[1] + 50}
    rejected(h, "t", [1], Errors.INELIGIBLE_REPLICA, version=3, epochs=wrong)
    # Check 11 before 12.
    rejected(h, "t", [1], Errors.INVALID_REQUEST, version=3, epochs=wrong, lrs=LRS_RECOVERING)


# ---------------------------------------------------------------- 2.2 eligibility (KIP-841, KIP-903)


def ineligible_cluster() -> ControllerHarness:
    """Brokers 1-5: 2 in controlled shutdown, 3 fenced, 9 never registered.
    Topic t (written to the log): replicas [1, 2, 3, 4, 9], ISR [1], leader 1."""
    h = cluster(1, 2, 3, 4, 5)
    make_topic(h, "lead2", (2, 1))  # 2 leads something, so it shuts down in a controlled way
    resp = h.heartbeat(2, want_shut_down=True)
    assert (resp.is_fenced, resp.should_shut_down) == (False, False)
    assert h.heartbeat(3, want_fence=True).is_fenced
    craft_topic(h, "t", dict(replicas=(1, 2, 3, 4, 9), isr=(1,), leader=1))
    regs = h.image.brokers
    assert regs[2].in_controlled_shutdown and not regs[2].fenced
    assert regs[3].fenced and not regs[3].in_controlled_shutdown
    assert 9 not in regs
    assert h.epochs[4] != 12
    return h


def test_ineligible_replicas_v3_reasons_in_request_order():
    h = ineligible_cluster()
    expected_4 = h.epochs[4]
    entry = rejected(h, "t", [1, 9, 2, 3, 4], Errors.INELIGIBLE_REPLICA, version=3, epochs={4: 12})
    reasons = [
        "broker 9 is not registered",
        "broker 2 is in controlled shutdown",
        "broker 3 is fenced",
        f"broker 4 epoch mismatch: requested=12 expected={expected_4}",
    ]
    message = entry.error_message
    positions = [message.find(reason) for reason in reasons]
    assert all(pos >= 0 for pos in positions), message
    assert positions == sorted(positions), message
    assert "broker 1 " not in message  # the eligible leader is not listed
    # Reversed ISR order, reversed reasons.
    entry = rejected(h, "t", [1, 4, 3, 2, 9], Errors.INELIGIBLE_REPLICA, version=3, epochs={4: 12})
    positions = [entry.error_message.find(reason) for reason in reasons]
    assert all(pos >= 0 for pos in positions)
    assert positions == sorted(positions, reverse=True)


@pytest.mark.parametrize(
    ("version", "error"),
    [
        (0, Errors.OPERATION_NOT_ATTEMPTED),
        (1, Errors.OPERATION_NOT_ATTEMPTED),
        (2, Errors.INELIGIBLE_REPLICA),
        (3, Errors.INELIGIBLE_REPLICA),
    ],
)
@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (9, "broker 9 is not registered"),
        (2, "broker 2 is in controlled shutdown"),
        (3, "broker 3 is fenced"),
    ],
)
def test_ineligible_replica_error_by_version(version, error, member, reason):
    h = ineligible_cluster()
    entry = rejected(h, "t", [1, member], error, version=version)
    assert reason in entry.error_message


@pytest.mark.parametrize(
    ("version", "error"),
    [(0, Errors.OPERATION_NOT_ATTEMPTED), (2, Errors.INELIGIBLE_REPLICA)],
)
def test_v0_to_v2_still_report_every_state_reason(version, error):
    h = ineligible_cluster()
    entry = rejected(h, "t", [1, 9, 2, 3], error, version=version)
    for reason in (
        "broker 9 is not registered",
        "broker 2 is in controlled shutdown",
        "broker 3 is fenced",
    ):
        assert reason in entry.error_message


def test_epoch_mismatch_is_ineligible_at_v3():
    h = ineligible_cluster()
    entry = rejected(h, "t", [1, 4], Errors.INELIGIBLE_REPLICA, version=3, epochs={4: 12})
    assert f"broker 4 epoch mismatch: requested=12 expected={h.epochs[4]}" in entry.error_message
    assert "broker 1" not in entry.error_message


def test_epoch_minus_one_skips_the_epoch_check_at_v3():
    h = ineligible_cluster()
    entry = alter_one(h, "t", [1, 4], version=3, epochs={1: -1, 4: -1})
    assert entry.error is Errors.NONE
    assert entry.isr == (1, 4)
    assert_consistent(h)


def test_leaders_own_epoch_is_checked_at_v3():
    h = ineligible_cluster()
    wrong = h.epochs[1] + 100
    entry = rejected(h, "t", [1, 4], Errors.INELIGIBLE_REPLICA, version=3, epochs={1: wrong})
    assert f"broker 1 epoch mismatch: requested={wrong} expected={h.epochs[1]}" in (
        entry.error_message
    )
    assert "broker 4" not in entry.error_message


@pytest.mark.parametrize("version", [0, 1, 2])
def test_epoch_check_skipped_before_v3(version):
    h = ineligible_cluster()
    # The v3-only field carries wrong epochs, but v0-2 read only newIsr.
    part = h.partition("t")
    data = AlterPartitionPartition(
        0,
        part.leader_epoch,
        part.partition_epoch,
        new_isr=(1, 4),
        new_isr_with_epochs=(BrokerState(1, 999), BrokerState(4, 12)),
    )
    resp = h.run(request(h, 1, tentry(h, "t", data, version=version), version=version))
    (entry,) = resp.topics[0].partitions
    assert entry.error is Errors.NONE
    assert entry.isr == (1, 4)
    assert h.partition("t").isr == (1, 4)
    assert_consistent(h)


def test_eligibility_is_checked_even_when_the_isr_does_not_change():
    h = ineligible_cluster()
    craft_topic(h, "u", dict(replicas=(1, 9), isr=(1, 9), leader=1))
    entry = rejected(h, "u", [1, 9], Errors.INELIGIBLE_REPLICA, version=3)
    assert "broker 9 is not registered" in entry.error_message
    rejected(h, "u", [1, 9], Errors.OPERATION_NOT_ATTEMPTED, version=1)
    # A current ISR member with a wrong epoch (v3).
    make_topic(h, "w", (1, 4, 5))
    entry = rejected(h, "w", [1, 4, 5], Errors.INELIGIBLE_REPLICA, version=3, epochs={5: 12})
    assert f"broker 5 epoch mismatch: requested=12 expected={h.epochs[5]}" in entry.error_message


def test_a_broker_in_controlled_shutdown_cannot_rejoin_after_being_removed():
    h = cluster(1, 2, 3)
    make_topic(h, "t", (2, 1, 3))
    assert h.heartbeat(2, want_shut_down=True).error is Errors.NONE
    p = h.partition("t")
    assert (p.leader, p.isr) == (1, (1, 3))
    entry = rejected(h, "t", [1, 3, 2], Errors.INELIGIBLE_REPLICA, version=2)
    assert "broker 2 is in controlled shutdown" in entry.error_message


# ---------------------------------------------------------------- success


@pytest.mark.parametrize("version", VERSIONS)
def test_shrink_expand_and_reorder_respond_with_the_post_change_state(version):
    h = validation_cluster()
    topic_id = h.topic_id("t")

    entry = alter_one(h, "t", [1, 3], version=version)
    assert entry.error is Errors.NONE and entry.error_message is None
    assert (entry.leader_id, entry.leader_epoch, entry.isr) == (1, 2, (1, 3))
    assert (entry.leader_recovery_state, entry.partition_epoch) == (LRS_RECOVERED, 6)
    assert h.last.records == (PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=(1, 3)),)
    p = h.partition("t")
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch) == (
        (1, 2, 3),
        (1, 3),
        1,
        2,
        6,
    )

    entry = alter_one(h, "t", [1, 3, 2], version=version)  # expand, in the order sent
    assert (entry.leader_id, entry.leader_epoch, entry.isr, entry.partition_epoch) == (
        1,
        2,
        (1, 3, 2),
        7,
    )
    (record,) = h.last.records
    assert record.isr == (1, 3, 2) and record.leader == NO_LEADER_CHANGE

    entry = alter_one(h, "t", [1, 2, 3], version=version)  # reorder alone is a change
    assert (entry.leader_epoch, entry.isr, entry.partition_epoch) == (2, (1, 2, 3), 8)
    (record,) = h.last.records
    assert record == PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=(1, 2, 3))

    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, (1, 2, 3), 2, 8)
    assert_consistent(h)


@pytest.mark.parametrize("version", VERSIONS)
def test_shrink_to_the_leader_alone(version):
    h = validation_cluster()
    entry = alter_one(h, "t", [1], version=version)
    assert (entry.error, entry.leader_id, entry.leader_epoch, entry.isr) == (
        Errors.NONE,
        1,
        2,
        (1,),
    )
    assert entry.partition_epoch == 6
    assert_consistent(h)


def test_before_3_6_iv0_a_shrink_answers_the_bumped_leader_epoch():
    """metadata.version 3.5-IV2 (11): Kafka's KAFKA-15021 rule, the leader
    epoch moves on a shrink (the record names the same leader), not on an
    expansion."""
    h = ControllerHarness(metadata_version=11)
    h.start_brokers(1, 2, 3)
    topic_id = make_topic(h, "t", (1, 2, 3))
    entry = alter_one(h, "t", [1, 3])
    assert (entry.error, entry.leader_id, entry.leader_epoch, entry.partition_epoch) == (
        Errors.NONE,
        1,
        1,
        1,
    )
    assert h.last.records == (
        PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=(1, 3), leader=1),
    )
    entry = alter_one(h, "t", [1, 3, 2])
    assert (entry.leader_epoch, entry.partition_epoch) == (1, 2)
    # Fencing a follower shrinks its ISRs: a bump too.
    h.heartbeat(3, want_fence=True)
    assert (h.partition("t").isr, h.partition("t").leader_epoch) == ((1, 2), 2)
    assert_consistent(h)


@pytest.mark.parametrize("version", VERSIONS)
def test_no_op_request_writes_nothing_and_returns_the_unchanged_state(version):
    h = validation_cluster()
    before = h.image
    entry = alter_one(h, "t", [1, 2, 3], version=version)
    assert entry.error is Errors.NONE
    assert (entry.leader_id, entry.leader_epoch, entry.isr) == (1, 2, (1, 2, 3))
    assert (entry.leader_recovery_state, entry.partition_epoch) == (LRS_RECOVERED, 5)
    assert h.last.records == ()
    assert h.image == before
    assert_consistent(h)


def test_requester_epoch_and_isr_epochs_correct_at_v3():
    h = validation_cluster()
    entry = alter_one(h, "t", [1, 2], version=3, epochs={1: h.epochs[1], 2: h.epochs[2]})
    assert entry.error is Errors.NONE and entry.isr == (1, 2)
    assert_consistent(h)


# ---------------------------------------------------------------- recovery state transitions


def unclean_cluster(unclean: bool) -> ControllerHarness:
    """t: replicas [1, 2, 3]; leader 1 shrinks the ISR to [1]; then 1 is fenced."""
    h = cluster(1, 2, 3)
    configs = (("unclean.leader.election.enable", "true" if unclean else "false"),)
    topic_id = make_topic(h, "t", (1, 2, 3), configs=configs)
    assert h.image.topics[topic_id].configs == {
        "unclean.leader.election.enable": "true" if unclean else "false"
    }
    # An ordinary AlterPartition is unaffected by the config.
    entry = alter_one(h, "t", [1])
    assert (entry.error, entry.isr, entry.leader_recovery_state) == (Errors.NONE, (1,), 0)
    assert h.last.records == (PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=(1,)),)
    assert h.heartbeat(1, want_fence=True).is_fenced
    return h


def test_unclean_topic_fencing_the_last_isr_member_elects_a_recovering_leader():
    h = unclean_cluster(True)
    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), LRS_RECOVERING)
    assert (p.leader_epoch, p.partition_epoch) == (1, 2)
    assert_consistent(h)


def test_clean_topic_fencing_the_last_isr_member_leaves_it_leaderless():
    h = unclean_cluster(False)
    p = h.partition("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (NO_LEADER, (1,), LRS_RECOVERED)
    assert (p.leader_epoch, p.partition_epoch) == (1, 2)
    # Nobody leads: every requester fails check 5 (cur.leader = -1).
    for broker in (1, 2, 3):
        rejected(h, "t", [2], Errors.INVALID_REQUEST, broker_id=broker)
        rejected(h, "t", [1], Errors.INVALID_REQUEST, broker_id=broker)
    assert_consistent(h)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_recovering_partition_transitions(version):
    h = unclean_cluster(True)
    # RECOVERING with an ISR of two: refused.
    rejected(h, "t", [2, 3], Errors.INVALID_REQUEST, version=version, lrs=LRS_RECOVERING)
    # RECOVERING -> RECOVERING with one member: allowed, and here a no-op.
    entry = alter_one(h, "t", [2], version=version, lrs=LRS_RECOVERING)
    assert (entry.error, entry.isr, entry.leader_recovery_state) == (
        Errors.NONE,
        (2,),
        LRS_RECOVERING,
    )
    assert entry.partition_epoch == 2 and h.last.records == ()
    # RECOVERING -> RECOVERED with a larger ISR in the same request: allowed.
    entry = alter_one(h, "t", [2, 3], version=version, lrs=LRS_RECOVERED)
    assert entry.error is Errors.NONE
    assert (entry.leader_id, entry.leader_epoch, entry.isr) == (2, 1, (2, 3))
    assert (entry.leader_recovery_state, entry.partition_epoch) == (LRS_RECOVERED, 3)
    (record,) = h.last.records
    assert record == PartitionChangeRecord(
        partition_id=0, topic_id=h.topic_id("t"), isr=(2, 3), leader_recovery_state=LRS_RECOVERED
    )
    # RECOVERED -> RECOVERING: refused; RECOVERED -> RECOVERED: fine.
    rejected(h, "t", [2], Errors.INVALID_REQUEST, version=version, lrs=LRS_RECOVERING)
    entry = alter_one(h, "t", [2], version=version, lrs=LRS_RECOVERED)
    assert (entry.error, entry.isr, entry.partition_epoch) == (Errors.NONE, (2,), 4)
    assert_consistent(h)


def test_recovering_to_recovered_without_isr_change_writes_only_the_state():
    h = unclean_cluster(True)
    entry = alter_one(h, "t", [2], lrs=LRS_RECOVERED)
    assert (entry.error, entry.leader_recovery_state, entry.partition_epoch) == (
        Errors.NONE,
        LRS_RECOVERED,
        3,
    )
    assert h.last.records == (
        PartitionChangeRecord(
            partition_id=0, topic_id=h.topic_id("t"), leader_recovery_state=LRS_RECOVERED
        ),
    )
    assert_consistent(h)


# ---------------------------------------------------------------- the unclean-election sweep


@pytest.mark.parametrize("unclean_config", ["none", "static", "dynamic_topic"])
def test_maybe_trigger_unclean_leader_election_for_leaderless_partitions_as_kafka(
    unclean_config,
):
    """Kafka's ``testMaybeTriggerUncleanLeaderElectionForLeaderlessPartitions``;
    "static" is a topic created with unclean.leader.election.enable=true,
    "dynamic_topic" the same config written later as a ConfigRecord (Kafka's
    cluster- and node-level configs do not exist here)."""
    h = ControllerHarness()
    h.start_brokers(0, 1, 2, 3, 4)
    configs = (("unclean.leader.election.enable", "true"),) if unclean_config == "static" else ()
    topic_id = make_topic(h, "foo", (1, 2, 4), (1, 3, 4), (0, 2, 4), configs=configs)
    replication = h.controller.replication
    assert not h.controller.index.any_without_leader()
    for b in (0, 1, 2, 3, 4):
        h.heartbeat(b, want_fence=True)
    assert h.controller.index.any_without_leader()
    for pid in (0, 1, 2):
        assert (h.partition("foo", pid).isr, h.partition("foo", pid).leader) == ((4,), NO_LEADER)

    # 2 comes back: it may lead partitions 0 and 2, after an unclean election.
    h.heartbeat(2)
    if unclean_config == "static":
        # The unfencing already elected it.
        assert [(h.partition("foo", p).isr, h.partition("foo", p).leader) for p in (0, 1, 2)] == [
            ((2,), 2),
            ((4,), NO_LEADER),
            ((2,), 2),
        ]
    else:
        for pid in (0, 1, 2):
            assert (h.partition("foo", pid).isr, h.partition("foo", pid).leader) == ((4,), -1)
    if unclean_config == "dynamic_topic":
        h.commit(
            [
                ConfigRecord(
                    resource_type=TOPIC_RESOURCE,
                    resource_name="foo",
                    name="unclean.leader.election.enable",
                    value="true",
                )
            ]
        )

    result = replication.maybe_elect_unclean_leaders()
    assert result.response is False  # not stopped at the bound
    if unclean_config in ("none", "static"):
        assert result.records == ()
        return
    assert result.records == (
        PartitionChangeRecord(
            partition_id=0, topic_id=topic_id, isr=(2,), leader=2, leader_recovery_state=1
        ),
        PartitionChangeRecord(
            partition_id=2, topic_id=topic_id, isr=(2,), leader=2, leader_recovery_state=1
        ),
    )
    h.commit(result.records)
    assert [(h.partition("foo", p).isr, h.partition("foo", p).leader) for p in (0, 1, 2)] == [
        ((2,), 2),
        ((4,), NO_LEADER),
        ((2,), 2),
    ]
    assert_consistent(h)


def test_unclean_sweep_writes_at_most_max_elections_per_imbalance_records():
    """Kafka's ``maybeElectUncleanLeaders`` stops at ``maxElectionsPerImbalance``
    records and says so; clean topics' partitions are passed over."""
    h = ControllerHarness(config_options={"max_elections_per_imbalance": 2})
    h.start_brokers(1, 2)
    unclean = (("unclean.leader.election.enable", "true"),)
    make_topic(h, "clean", (1,), configs=())
    make_topic(h, "dirty", (1,), (1,), (1,), configs=unclean)
    h.heartbeat(1, want_fence=True)
    for name, count in (("clean", 1), ("dirty", 3)):
        for pid in range(count):
            resp = h.run(
                AlterPartitionReassignmentsRequest(
                    (ReassignableTopic(name, (ReassignablePartition(pid, (2,)),)),)
                )
            )
            assert resp.topics[0].partitions[0].error is Errors.NONE
    replication = h.controller.replication
    first = replication.maybe_elect_unclean_leaders()
    assert first.response is True and len(first.records) == 2
    h.commit(first.records)
    second = replication.maybe_elect_unclean_leaders()
    assert second.response is False and len(second.records) == 1
    h.commit(second.records)
    for pid in range(3):
        assert (h.partition("dirty", pid).leader, h.partition("dirty", pid).isr) == (2, (2,))
    assert h.partition("clean").leader == NO_LEADER
    assert replication.maybe_elect_unclean_leaders().records == ()
    assert_consistent(h)


# ---------------------------------------------------------------- reassignment


def reassign(h: ControllerHarness, name: str, replicas) -> None:
    resp = h.run(
        AlterPartitionReassignmentsRequest(
            (ReassignableTopic(name, (ReassignablePartition(0, tuple(replicas)),)),)
        )
    )
    assert resp.error is Errors.NONE
    assert resp.topics[0].partitions[0].error is Errors.NONE, resp


@pytest.mark.parametrize(
    ("version", "error"),
    [
        (0, Errors.FENCED_LEADER_EPOCH),
        (1, Errors.FENCED_LEADER_EPOCH),
        (2, Errors.NEW_LEADER_ELECTED),
        (3, Errors.NEW_LEADER_ELECTED),
    ],
)
def test_isr_change_completing_a_reassignment_away_from_the_leader(version, error):
    h = cluster(1, 2, 3, 4)
    topic_id = make_topic(h, "t", (1, 2, 3))
    reassign(h, "t", (2, 3, 4))
    p = h.partition("t")
    assert (p.replicas, p.isr, p.leader) == ((2, 3, 4, 1), (1, 2, 3), 1)
    assert (p.removing_replicas, p.adding_replicas) == ((1,), (4,))
    assert (p.leader_epoch, p.partition_epoch) == (0, 1)

    # The adding replica counts as a replica (check 7); this completes the move.
    entry = alter_one(h, "t", [1, 2, 3, 4], version=version)
    assert_error_entry(entry, error)
    # ... and yet the change is written.
    assert h.last.records == (
        PartitionChangeRecord(
            partition_id=0,
            topic_id=topic_id,
            isr=(2, 3, 4),
            leader=2,
            replicas=(2, 3, 4),
            removing_replicas=(),
            adding_replicas=(),
        ),
    )
    p = h.partition("t")
    assert (p.replicas, p.isr, p.leader) == ((2, 3, 4), (2, 3, 4), 2)
    assert (p.removing_replicas, p.adding_replicas) == ((), ())
    assert (p.leader_epoch, p.partition_epoch) == (1, 2)
    # The old leader is now refused; the new one can alter the ISR.
    rejected(h, "t", [2, 3], Errors.FENCED_LEADER_EPOCH, broker_id=1, leader_epoch=0)
    entry = alter_one(h, "t", [2, 3], version=version)
    assert (entry.error, entry.leader_id, entry.leader_epoch, entry.partition_epoch) == (
        Errors.NONE,
        2,
        1,
        3,
    )
    assert_consistent(h)


@pytest.mark.parametrize("version", VERSIONS)
def test_isr_change_completing_a_reassignment_that_keeps_the_leader(version):
    h = cluster(1, 2, 3, 4)
    topic_id = make_topic(h, "t", (1, 2, 3))
    reassign(h, "t", (1, 2, 4))
    assert h.partition("t").replicas == (1, 2, 4, 3)
    entry = alter_one(h, "t", [1, 2, 3, 4], version=version)
    assert entry.error is Errors.NONE
    # 3 left the assignment: the leader epoch is bumped with the same leader.
    assert (entry.leader_id, entry.leader_epoch, entry.isr, entry.partition_epoch) == (
        1,
        1,
        (1, 2, 4),
        2,
    )
    assert h.last.records == (
        PartitionChangeRecord(
            partition_id=0,
            topic_id=topic_id,
            isr=(1, 2, 4),
            leader=1,
            replicas=(1, 2, 4),
            removing_replicas=(),
            adding_replicas=(),
        ),
    )
    assert_consistent(h)


def test_isr_change_during_a_reassignment_that_does_not_complete_it():
    h = cluster(1, 2, 3, 4)
    make_topic(h, "t", (1, 2, 3))
    reassign(h, "t", (2, 3, 4))
    entry = alter_one(h, "t", [1, 2])
    assert (entry.error, entry.leader_id, entry.leader_epoch, entry.isr) == (
        Errors.NONE,
        1,
        0,
        (1, 2),
    )
    p = h.partition("t")
    assert (p.replicas, p.removing_replicas, p.adding_replicas) == ((2, 3, 4, 1), (1,), (4,))
    # 4 joins but 3 is out of the ISR: still not complete.
    entry = alter_one(h, "t", [1, 2, 4])
    assert entry.error is Errors.NONE and h.partition("t").is_reassigning
    assert_consistent(h)


# ---------------------------------------------------------------- several partitions in one request


def multi_cluster() -> ControllerHarness:
    h = cluster(1, 2, 3, 4)
    make_topic(h, "a", (1, 2, 3), (1, 3, 2))
    make_topic(h, "b", (1, 2, 4))
    make_topic(h, "c", (2, 1, 3))
    return h


@pytest.mark.parametrize("version", VERSIONS)
def test_several_partitions_of_several_topics_in_one_request(version):
    h = multi_cluster()
    req = request(
        h,
        1,
        tentry(
            h,
            "a",
            pdata(h, "a", 1, [1, 2, 3], version=version),  # reorder
            pdata(h, "a", 0, [1, 2], version=version),  # shrink
            version=version,
        ),
        tentry(h, "b", pdata(h, "b", 0, [1, 4], version=version), version=version),
        version=version,
    )
    result = h.decide(req)
    a, b = h.topic_id("a"), h.topic_id("b")
    assert result.records == (
        PartitionChangeRecord(partition_id=1, topic_id=a, isr=(1, 2, 3)),
        PartitionChangeRecord(partition_id=0, topic_id=a, isr=(1, 2)),
        PartitionChangeRecord(partition_id=0, topic_id=b, isr=(1, 4)),
    )
    resp = result.response
    assert resp.error is Errors.NONE
    ta, tb = resp.topics
    assert [(p.partition_index, p.error, p.isr, p.partition_epoch) for p in ta.partitions] == [
        (1, Errors.NONE, (1, 2, 3), 1),
        (0, Errors.NONE, (1, 2), 1),
    ]
    assert [(p.partition_index, p.error, p.isr) for p in tb.partitions] == [
        (0, Errors.NONE, (1, 4))
    ]
    h.commit(result.records)
    assert h.partition("a", 0).isr == (1, 2)
    assert h.partition("a", 1).isr == (1, 2, 3)
    assert h.partition("b", 0).isr == (1, 4)
    assert_consistent(h)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_request_mixing_valid_and_invalid_partitions_writes_only_the_valid_ones(version):
    h = multi_cluster()
    unknown = (
        AlterPartitionTopic((pdata(h, "a", 0, [1], version=version),), topic_id=UNKNOWN_TOPIC_ID)
        if version > 1
        else AlterPartitionTopic((pdata(h, "a", 0, [1], version=version),), topic_name="nope")
    )
    req = request(
        h,
        1,
        tentry(
            h,
            "a",
            pdata(h, "a", 0, [1, 3], version=version),  # valid
            pdata(h, "a", 1, [3, 2], version=version),  # leader missing
            pdata(h, "a", 7, [1], version=version),  # no such partition
            version=version,
        ),
        unknown,
        tentry(h, "c", pdata(h, "c", 0, [1, 2], version=version), version=version),  # 2 leads
        tentry(
            h, "b", pdata(h, "b", 0, [1, 2], version=version, leader_epoch=4), version=version
        ),  # newer leader epoch
        tentry(h, "b", pdata(h, "b", 0, [1, 4], version=version), version=version),  # valid
        version=version,
    )
    resp = h.run(req)
    assert resp.error is Errors.NONE
    ta, tu, tc, tb_bad, tb = resp.topics
    assert ta.partitions[0].error is Errors.NONE and ta.partitions[0].isr == (1, 3)
    assert_error_entry(ta.partitions[1], Errors.INVALID_REQUEST, 1)
    assert_error_entry(ta.partitions[2], Errors.UNKNOWN_TOPIC_OR_PARTITION, 7)
    unknown_error = Errors.UNKNOWN_TOPIC_ID if version > 1 else Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert_error_entry(tu.partitions[0], unknown_error)
    assert_error_entry(tc.partitions[0], Errors.INVALID_REQUEST)
    assert_error_entry(tb_bad.partitions[0], Errors.NOT_CONTROLLER)
    assert tb.partitions[0].error is Errors.NONE and tb.partitions[0].isr == (1, 4)
    assert h.last.records == (
        PartitionChangeRecord(partition_id=0, topic_id=h.topic_id("a"), isr=(1, 3)),
        PartitionChangeRecord(partition_id=0, topic_id=h.topic_id("b"), isr=(1, 4)),
    )
    assert h.partition("a", 1).isr == (1, 3, 2) and h.partition("c").isr == (2, 1, 3)
    assert_consistent(h)


def test_every_partition_is_decided_against_the_pre_request_state():
    h = multi_cluster()
    # Two changes to the same partition, both from partition epoch 0: both pass,
    # both are written, and each answer is the pre-request state plus one.
    req = request(
        h,
        1,
        tentry(h, "a", pdata(h, "a", 0, [1, 2]), pdata(h, "a", 0, [1, 3])),
    )
    result = h.decide(req)
    a = h.topic_id("a")
    assert result.records == (
        PartitionChangeRecord(partition_id=0, topic_id=a, isr=(1, 2)),
        PartitionChangeRecord(partition_id=0, topic_id=a, isr=(1, 3)),
    )
    first, second = result.response.topics[0].partitions
    assert (first.error, first.isr, first.partition_epoch) == (Errors.NONE, (1, 2), 1)
    assert (second.error, second.isr, second.partition_epoch) == (Errors.NONE, (1, 3), 1)
    h.commit(result.records)
    p = h.partition("a", 0)
    assert (p.isr, p.partition_epoch, p.leader_epoch) == ((1, 3), 2, 0)
    assert_consistent(h)


def test_a_later_entry_cannot_build_on_an_earlier_one_in_the_same_request():
    h = multi_cluster()
    # The second entry uses the partition epoch the first would produce: newer
    # than the pre-request state, so NOT_CONTROLLER.
    req = request(
        h,
        1,
        tentry(h, "a", pdata(h, "a", 0, [1, 2]), pdata(h, "a", 0, [1], partition_epoch=1)),
    )
    resp = h.run(req)
    first, second = resp.topics[0].partitions
    assert first.error is Errors.NONE
    assert_error_entry(second, Errors.NOT_CONTROLLER)
    assert h.last.records == (
        PartitionChangeRecord(partition_id=0, topic_id=h.topic_id("a"), isr=(1, 2)),
    )
    assert_consistent(h)


def test_invalid_leader_recovery_state_anywhere_discards_every_change_of_the_request():
    h = multi_cluster()
    before = h.image
    req = request(
        h,
        1,
        tentry(h, "a", pdata(h, "a", 0, [1, 2]), pdata(h, "a", 1, [1, 3])),
        tentry(h, "b", pdata(h, "b", 0, [1, 2], lrs=3)),
    )
    result = h.decide(req)
    assert result.records == ()
    assert result.response.error is Errors.INVALID_REQUEST
    assert result.response.topics == ()
    h.commit(result.records)
    assert h.image == before
    # The controller's view did not keep the discarded changes either.
    entry = alter_one(h, "a", [1, 2])
    assert (entry.error, entry.partition_epoch) == (Errors.NONE, 1)
    assert_consistent(h)


def test_a_steady_heartbeat_does_not_scan_every_session(monkeypatch):
    """lowest_active_offset walks all sessions; only a broker in controlled
    shutdown that leads nothing needs it (5,000 brokers made it 2 ms a beat)."""
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 1, 3)
    scans = []
    heartbeats = h.controller.heartbeats
    original = heartbeats.lowest_active_offset
    monkeypatch.setattr(
        heartbeats, "lowest_active_offset", lambda view: scans.append(1) or original(view)
    )
    for b in (1, 2, 3):
        assert not h.heartbeat(b).is_fenced
    assert scans == []
    leader = h.partition("t").leader
    h.heartbeat(leader, want_shut_down=True)  # leads something: CONTROLLED_SHUTDOWN, no scan
    assert scans == []
    for b in {1, 2, 3} - {leader}:
        h.heartbeat(b)  # the active brokers report the offsets past its records
    assert scans == []
    resp = h.heartbeat(leader, want_shut_down=True)  # leads nothing now: may it stop?
    assert scans == [1] and resp.should_shut_down


# ---------------------------------------------------------------- UnregisterBroker


def test_unregister_broker_as_kafkas_quorum_controller_test():
    """QuorumControllerTest.testUnregisterBroker: a fenced broker cannot take
    a replica, an unfenced one can, and unregistering it leaves its partition
    without a leader."""
    h = ControllerHarness()
    assert h.register(0).error is Errors.NONE
    t = h.create_topic("foo", 1, 1)
    assert t.error is Errors.INVALID_REPLICATION_FACTOR
    assert t.error_message == (
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced."
    )
    assert not h.heartbeat(0).is_fenced
    assert h.create_topic("foo", 1, 1).error is Errors.NONE
    assert h.partition("foo").leader == 0
    assert h.unregister(0).error is Errors.NONE
    assert 0 not in h.image.brokers
    assert h.controller.index.partitions_without_leader() == [(h.topic_id("foo"), 0)]
    p = h.partition("foo")
    # Without ELR the last ISR member stays in the ISR (Kafka's PartitionChangeBuilder).
    assert (p.leader, p.isr) == (NO_LEADER, (0,))
    assert_consistent(h)


def test_unregister_moves_leaderships_and_leaves_every_isr_in_one_batch():
    h = cluster(1, 2, 3)
    make_topic(h, "t", (1, 2, 3))
    make_topic(h, "u", (2, 1, 3), (1, 3, 2))
    epoch = h.epochs[1]
    assert h.unregister(1).error is Errors.NONE
    *moves, last = h.last.records
    assert last == UnregisterBrokerRecord(broker_id=1, broker_epoch=epoch)
    assert len(moves) == 3 and all(isinstance(r, PartitionChangeRecord) for r in moves)
    for name, pid in (("t", 0), ("u", 0), ("u", 1)):
        p = h.partition(name, pid)
        assert 1 not in p.isr and p.leader in (2, 3) and p.leader in p.isr
    assert h.partition("t").leader == 2  # the next active replica in order
    assert_consistent(h)


def test_unregister_an_unknown_broker_is_broker_id_not_registered_and_writes_nothing():
    h = cluster(1)
    before = h.image.next_offset
    resp = h.unregister(9)
    assert resp.error is Errors.BROKER_ID_NOT_REGISTERED
    assert resp.error_message == "Broker ID 9 is not currently registered"
    assert h.last.records == () and h.image.next_offset == before
    # Twice in one batch: the second sees the first's record.
    first = h.decide(UnregisterBrokerRequest(1))
    second = h.decide(UnregisterBrokerRequest(1))
    assert first.response.error is Errors.NONE
    assert second.response.error is Errors.BROKER_ID_NOT_REGISTERED and second.records == ()
    h.commit(first.records)
    assert h.image.brokers == {}


def test_a_live_broker_is_unregistered_as_kafka_does_and_its_heartbeats_are_stale():
    """Kafka refuses no state (ReplicationControlManager.unregisterBroker checks
    registration only); its session ends, so it is never fenced afterwards."""
    h = cluster(1, 2)
    assert h.image.brokers[1].active
    assert h.unregister(1).error is Errors.NONE
    assert 1 not in h.controller.heartbeats.sessions
    resp = h.heartbeat(1, epoch=h.epochs[1])
    assert resp.error is Errors.STALE_BROKER_EPOCH and h.last.records == ()
    h.advance(h.session_timeout_ms + 1)
    h.heartbeat(2)
    assert h.controller.maybe_fence_stale_broker(h.now_ms) is None


def test_an_unregistered_id_registers_again_as_a_new_incarnation():
    h = cluster(1, 2)
    h.unregister(1)
    offset = h.image.next_offset
    resp = h.register(1, generation=1)
    assert resp.error is Errors.NONE and resp.broker_epoch == offset
    assert h.image.brokers[1].fenced
    assert not h.heartbeat(1).is_fenced
    assert_consistent(h)


def test_an_unregistered_broker_no_longer_counts_toward_the_default_replication_factor():
    h = cluster(1, 2, 3)
    h.advance(h.session_timeout_ms + 1)  # broker 3 dies: fenced, still registered
    h.heartbeat(1)
    h.heartbeat(2)
    while (fenced := h.controller.maybe_fence_stale_broker(h.now_ms)) is not None:
        h.commit(fenced.records)
    assert h.image.brokers[3].fenced
    # Kafka counts every registered broker: min(3, 3) = 3 with one fenced.
    assert h.create_topic("before").replication_factor == 3
    assert h.unregister(3).error is Errors.NONE
    t = h.create_topic("after")
    assert t.error is Errors.NONE and t.replication_factor == 2
    assert 3 not in h.partition("after").replicas
    assert_consistent(h)


# ---------------------------------------------------------------- quiet heartbeats


@pytest.mark.parametrize(
    "flags",
    [
        {},
        {"want_fence": True},
        {"want_shut_down": True},
        {"offset": 0},  # not caught up
        {"epoch_delta": 1},  # a stale epoch
    ],
)
@pytest.mark.parametrize("fenced", [False, True])
def test_a_quiet_heartbeat_answers_as_the_queue_would_or_not_at_all(flags, fenced) -> None:
    """Controller.quiet_heartbeat answers only a heartbeat that would write
    nothing, for a broker with nothing uncommitted, and then exactly what
    deciding it in turn answers."""
    h = ControllerHarness()
    h.start_brokers(1, 2)
    if fenced:
        h.heartbeat(1, want_fence=True)
    flags = dict(flags)
    epoch = h.epochs[1] + flags.pop("epoch_delta", 0)
    offset = flags.pop("offset", h.image.next_offset)
    request = BrokerHeartbeatRequest(1, epoch, offset, **flags)
    quiet = h.controller.quiet_heartbeat(request, h.now_ms, h.image)
    decided = h.decide(request)
    if quiet is not None:
        assert decided.records == () and quiet.response == decided.response
        assert quiet.response.error == 0
    if decided.records or decided.response.error:
        assert quiet is None
    if not flags and not fenced and epoch == h.epochs[1] and offset == h.image.next_offset:
        assert quiet is not None  # the steady heartbeat, the common case


def test_a_broker_with_an_uncommitted_change_is_never_answered_quietly() -> None:
    h = ControllerHarness()
    h.start_brokers(1)
    committed = h.image
    fence = h.decide(BrokerHeartbeatRequest(1, h.epochs[1], h.image.next_offset, want_fence=True))
    assert fence.records  # decided into the view, not committed
    steady = BrokerHeartbeatRequest(1, h.epochs[1], h.image.next_offset)
    assert h.controller.quiet_heartbeat(steady, h.now_ms, committed) is None
    h.commit(fence.records)
    answer = h.controller.quiet_heartbeat(
        BrokerHeartbeatRequest(1, h.epochs[1], h.image.next_offset, want_fence=True),
        h.now_ms,
        h.image,
    )
    assert answer is not None and answer.response.is_fenced
