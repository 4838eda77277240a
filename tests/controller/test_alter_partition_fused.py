"""The fused AlterPartition path (replication_control.FUSED_ALTER_PARTITION)
against its plain twin, on requests built to reach it: mostly valid ISR
changes from each partition's leader, with some of every reason to leave it
(a stale or newer epoch, another requester, a non-replica, a duplicate, the
leader left out, RECOVERING, a fenced or shutting-down member, a stale broker
epoch, a reassignment in progress), over many steps of one cluster's life."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller import replication_control
from controller.messages import (
    AlterPartitionPartition,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerState,
    ReassignablePartition,
    ReassignableTopic,
)
from metadata_records.errors import Errors
from tests.harness import ControllerHarness

BROKERS = (1, 2, 3, 4, 5)
PARTITIONS = 12


def decide_both(h: ControllerHarness, request: AlterPartitionRequest) -> list[tuple]:
    """(records, merged registrations, answer) of the plain path, then of the
    fused one, each on ``h``'s view as it is."""
    outcomes = []
    for fused in (False, True):
        replication_control.FUSED_ALTER_PARTITION = fused
        try:
            result = h.controller.replication.alter_partition(request, h.now_ms)
        finally:
            replication_control.FUSED_ALTER_PARTITION = True
        merged = [result.merged.get(id(r)) for r in result.records] if result.merged else []
        outcomes.append((list(result.records), merged, result.response))
    return outcomes


@st.composite
def entry(draw, h: ControllerHarness, topic_id: str, pid: int, version: int):
    part = h.image.partition(topic_id, pid)
    others = [b for b in part.replicas if b != part.leader]
    kind = draw(
        st.sampled_from(
            ["valid"] * 12
            + ["leader-epoch", "partition-epoch", "non-replica", "duplicate", "no-leader"]
            + ["negative", "recovering", "stale-member-epoch"]
        )
    )
    isr = [part.leader, *draw(st.lists(st.sampled_from(others), unique=True))] if others else []
    if kind == "non-replica":
        isr.append(next(b for b in (*BROKERS, 99) if b not in part.replicas))
    elif kind == "duplicate" and isr:
        isr.append(isr[0])
    elif kind == "no-leader":
        isr = [b for b in isr if b != part.leader]
    elif kind == "negative":
        isr.append(-1)
    isr = draw(st.permutations(isr))
    epochs = {b: h.epochs.get(b, -1) for b in isr}
    if kind == "stale-member-epoch" and isr:
        epochs[isr[-1]] += 1
    return AlterPartitionPartition(
        pid,
        part.leader_epoch + (draw(st.sampled_from([-1, 1])) if kind == "leader-epoch" else 0),
        part.partition_epoch + (draw(st.sampled_from([-1, 1])) if kind == "partition-epoch" else 0),
        new_isr=tuple(isr) if version < 3 else (),
        new_isr_with_epochs=tuple(BrokerState(b, epochs[b]) for b in isr) if version >= 3 else (),
        leader_recovery_state=1 if kind == "recovering" else 0,
    )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_the_fused_path_decides_every_request_as_the_plain_one(data):
    h = ControllerHarness()
    h.start_brokers(*BROKERS)
    assert h.create_topic("t", PARTITIONS, 3).error == Errors.NONE
    topic_id = h.topic_id("t")
    fused_changes = 0
    for _ in range(data.draw(st.integers(8, 25), label="steps")):
        action = data.draw(st.sampled_from(["alter"] * 6 + ["fence", "shutdown", "reassign"]))
        if action == "fence":
            broker = data.draw(st.sampled_from(BROKERS))
            h.heartbeat(broker, want_fence=True)
            continue
        if action == "shutdown":
            h.heartbeat(data.draw(st.sampled_from(BROKERS)), want_shut_down=True)
            continue
        if action == "reassign":
            pid = data.draw(st.integers(0, PARTITIONS - 1))
            target = tuple(data.draw(st.permutations(BROKERS))[:3])
            h.run(
                AlterPartitionReassignmentsRequest(
                    (ReassignableTopic("t", (ReassignablePartition(pid, target),)),)
                )
            )
            continue
        version = data.draw(st.integers(0, 3), label="version")
        pids = data.draw(
            st.lists(st.integers(0, PARTITIONS - 1), min_size=1, max_size=8, unique=True)
        )
        leader = h.image.partition(topic_id, pids[0]).leader
        requester = data.draw(st.sampled_from([leader] * 5 + list(BROKERS)))
        entries = tuple(data.draw(entry(h, topic_id, pid, version)) for pid in pids)
        topic = (
            AlterPartitionTopic(entries, topic_id=topic_id)
            if version > 1
            else AlterPartitionTopic(entries, topic_name="t")
        )
        request = AlterPartitionRequest(requester, h.epochs.get(requester, -1), (topic,), version)
        plain, fused = decide_both(h, request)
        assert fused == plain, request
        fused_changes += len(fused[0])
        h.run(request)
    # Not vacuous: some requests changed ISRs (the fused path's own case).
    data.draw(st.just(fused_changes), label="ISR changes decided")


def test_the_fused_path_is_taken_and_agrees_on_a_plain_shrink_and_expand():
    """A request whose every partition is the common case: the fused path
    decides it (every partition a record), as the plain path does."""
    h = ControllerHarness()
    h.start_brokers(*BROKERS)
    h.create_topic("t", PARTITIONS, 3)
    topic_id = h.topic_id("t")
    for shrink in (True, False):
        by_leader: dict[int, list[AlterPartitionPartition]] = {}
        for pid in range(PARTITIONS):
            part = h.image.partition(topic_id, pid)
            isr = part.replicas[:2] if shrink else part.replicas
            if part.leader not in isr:
                continue
            by_leader.setdefault(part.leader, []).append(
                AlterPartitionPartition(
                    pid,
                    part.leader_epoch,
                    part.partition_epoch,
                    new_isr_with_epochs=tuple(BrokerState(b, h.epochs[b]) for b in isr),
                )
            )
        for leader, entries in by_leader.items():
            request = AlterPartitionRequest(
                leader, h.epochs[leader], (AlterPartitionTopic(tuple(entries), topic_id=topic_id),)
            )
            plain, fused = decide_both(h, request)
            assert fused == plain
            assert len(fused[0]) == len(entries)  # every partition changed its ISR
            assert all(p.error is Errors.NONE for p in fused[2].topics[0].partitions)
            h.run(request)
