"""controller/what_if.py: hand-built clusters with known answers, and for
random clusters the answer equals fencing the lost brokers through expired
sessions in the controller (``maybe_fence_stale_broker``) and reading the
image that commits."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.messages import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    UpdateFeaturesRequest,
)
from controller.what_if import (
    ISR_SHRUNK,
    LEADER_MOVED,
    OFFLINE,
    UNDER_MIN_ISR,
    UnknownLoss,
    parse_loss,
    resolve_loss,
    what_if,
)
from metadata_records.errors import Errors
from metadata_records.records import NO_LEADER
from tests.harness import ELR_FEATURES, ControllerHarness

ELR = "eligible.leader.replicas.version"
RACKS = {1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: "r3", 6: "r3"}


def cluster(*, elr=False, unclean=False) -> ControllerHarness:
    """Six brokers on three racks; topic t (min ISR 2): p0 [1,3,5], p1 [3,5,1],
    p2 [1,2,3] (both of r1's brokers, not rack-aware)."""
    h = ControllerHarness(broker_features=ELR_FEATURES)
    for b, rack in RACKS.items():
        assert h.register(b, rack=rack).error is Errors.NONE
    for b in RACKS:
        assert not h.heartbeat(b).is_fenced
    if elr:
        assert h.run(UpdateFeaturesRequest(ELR, 1)).error is Errors.NONE
    configs = [("min.insync.replicas", "2")]
    if unclean:
        configs.append(("unclean.leader.election.enable", "true"))
    result = h.create_topic(
        "t", assignments=((0, (1, 3, 5)), (1, (3, 5, 1)), (2, (1, 2, 3))), configs=tuple(configs)
    )
    assert result.error is Errors.NONE
    return h


def by_partition(answer):
    return {p.partition: p for p in answer.partitions}


def test_losing_a_rack_moves_leaders_and_takes_a_non_rack_aware_partition_under_min_isr():
    h = cluster()
    answer = what_if(h.image, resolve_loss(h.image, (), {"r1"}), h.now_ms)
    assert answer.lost == (1, 2)
    parts = by_partition(answer)
    assert parts[0].outcome == LEADER_MOVED and parts[0].after.leader == 3
    assert parts[0].after.isr == (3, 5)
    assert parts[1].outcome == ISR_SHRUNK and parts[1].after.leader == 3
    assert parts[2].outcome == UNDER_MIN_ISR and parts[2].after.isr == (3,)
    assert answer.counts == {
        OFFLINE: 0, UNDER_MIN_ISR: 1, LEADER_MOVED: 1, ISR_SHRUNK: 1, "untouched": 0,
    }  # fmt: skip
    assert h.image == h.image  # the image is untouched: what-if is pure
    assert h.partition("t", 0).leader == 1


def test_losing_every_replica_takes_partitions_offline_worst_first():
    h = cluster()
    answer = what_if(h.image, [1, 3, 5], h.now_ms)
    assert [(p.partition, p.outcome) for p in answer.partitions] == [
        (0, OFFLINE), (1, OFFLINE), (2, UNDER_MIN_ISR),
    ]  # fmt: skip
    parts = by_partition(answer)
    assert parts[0].after.leader == NO_LEADER and parts[0].after.isr == (5,)  # ELR off: last stays
    assert parts[2].after.leader == 2


def test_with_elr_on_the_isr_empties_into_the_elr():
    h = cluster(elr=True)
    parts = by_partition(what_if(h.image, [1, 3, 5], h.now_ms))
    assert parts[0].outcome == OFFLINE
    assert parts[0].after.isr == () and parts[0].after.elr == (3, 5)
    # Off, the same loss leaves no ELR.
    assert by_partition(what_if(cluster().image, [1, 3, 5], 0))[0].after.elr == ()


def test_an_unclean_topic_elects_an_out_of_sync_replica_instead_of_going_offline():
    for unclean, outcome, leader in ((False, OFFLINE, NO_LEADER), (True, LEADER_MOVED, 2)):
        h = cluster(unclean=unclean)
        assert h.alter_isr("t", 2, [1]).topics[0].partitions[0].error is Errors.NONE
        part = by_partition(what_if(h.image, [1], h.now_ms))[2]
        assert (part.outcome, part.after.leader) == (outcome, leader)


def test_an_already_fenced_broker_changes_nothing():
    h = cluster()
    h.advance(h.session_timeout_ms + 1)
    for b in (2, 3, 4, 5, 6):
        h.heartbeat(b)
    result = h.controller.maybe_fence_stale_broker(h.now_ms)
    h.commit(result.records)
    answer = what_if(h.image, [1], h.now_ms)
    assert answer.lost == () and answer.already_fenced == (1,) and answer.partitions == ()


def test_the_cluster_default_min_isr_counts_when_the_topic_sets_none():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    default = AlterConfigsResource(4, "", (AlterableConfig("min.insync.replicas", 0, "3"),))
    assert h.run(IncrementalAlterConfigsRequest((default,))).responses[0].error is Errors.NONE
    h.create_topic("u", assignments=((0, (1, 2, 3)),))
    part = what_if(h.image, [3], h.now_ms).partitions[0]
    assert (part.outcome, part.min_isr) == (UNDER_MIN_ISR, 3)


def test_the_loss_spec_is_parsed_and_every_unknown_name_is_named():
    assert parse_loss(["brokers:3, 4", "racks:r1"]) == ({3, 4}, {"r1"})
    for bad in (["brokers"], ["hosts:1"], ["brokers:"], ["brokers:x"]):
        with pytest.raises(ValueError):
            parse_loss(bad)
    with pytest.raises(ValueError, match="nothing to lose"):
        parse_loss([])
    h = cluster()
    with pytest.raises(
        UnknownLoss, match=r"not registered: 9, 12; racks .*: r9 \(known racks: r1, r2, r3\)"
    ):
        resolve_loss(h.image, {12, 9, 1}, {"r9", "r2"})
    assert resolve_loss(h.image, {6}, {"r2"}) == [3, 4, 6]


# ---------------------------------------------------------------- the property


@st.composite
def clusters(draw):
    """A cluster built through the controller: 3-6 brokers on 1-3 racks, ELR on
    or off, topics with random assignments, min ISR and unclean settings, and
    some brokers fenced already (their sessions expired), so ISRs, leaders and
    ELRs vary."""
    h = ControllerHarness(broker_features=ELR_FEATURES)
    brokers = list(range(1, draw(st.integers(3, 6)) + 1))
    for b in brokers:
        h.register(b, rack=draw(st.sampled_from([None, "r1", "r2", "r3"])))
    for b in brokers:
        h.heartbeat(b)
    if draw(st.booleans()):
        assert h.run(UpdateFeaturesRequest(ELR, 1)).error is Errors.NONE
    for n in range(draw(st.integers(1, 3))):
        rf = draw(st.integers(1, 3))
        assignments = tuple(
            (pid, tuple(draw(st.permutations(brokers))[:rf]))
            for pid in range(draw(st.integers(1, 4)))
        )
        configs = [("min.insync.replicas", str(draw(st.integers(1, 3))))]
        if draw(st.booleans()):
            configs.append(("unclean.leader.election.enable", "true"))
        assert h.create_topic(f"t{n}", assignments=assignments, configs=tuple(configs)).error == 0
    fence_first = draw(st.lists(st.sampled_from(brokers), unique=True, max_size=2))
    if fence_first:
        expire(h, fence_first)
    return h, brokers


def expire(h: ControllerHarness, lost: list[int]) -> None:
    """The brokers of ``lost`` stop heartbeating, in ascending id, the others
    keep on; the controller fences each as its session expires."""
    t0 = h.now_ms
    registered = sorted(h.image.brokers)
    lost = sorted(lost)
    for i, b in enumerate(lost):
        h.controller.heartbeats.touch(b, t0 + 1 + i, h.image.last_offset)
    for b in registered:
        if b not in lost:
            h.controller.heartbeats.touch(b, t0 + len(lost) + 1, h.image.last_offset)
    h.advance(len(lost) + h.session_timeout_ms + 1)
    while (result := h.controller.maybe_fence_stale_broker(h.now_ms)) is not None:
        h.commit(result.records)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_what_if_equals_fencing_the_lost_brokers_in_the_controller(data):
    h, brokers = data.draw(clusters())
    lost = data.draw(st.lists(st.sampled_from(brokers), unique=True, min_size=1))
    before = h.image
    answer = what_if(before, lost, h.now_ms)

    h.new_leader()  # a controller with fresh sessions, as after a failover
    expire(h, lost)
    after = h.image

    assert set(answer.lost) == {b for b in lost if not before.brokers[b].fenced}
    assert all(after.brokers[b].fenced for b in lost)
    predicted = {(p.topic_id, p.partition): p.after for p in answer.partitions}
    for topic_id, topic in before.topics.items():
        for pid, part in topic.partitions.items():
            assert after.partition(topic_id, pid) == predicted.get((topic_id, pid), part)
            if (topic_id, pid) not in predicted:
                continue
            outcome = next(
                p.outcome
                for p in answer.partitions
                if p.partition == pid and p.topic_id == topic_id
            )
            assert (outcome == OFFLINE) == (
                part.leader != NO_LEADER == after.partition(topic_id, pid).leader
            )
