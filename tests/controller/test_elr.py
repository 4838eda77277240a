"""ELR (KIP-966) in the pure controller: Kafka's PartitionChangeBuilderTest,
ReplicationControlManagerTest and QuorumControllerTest ELR scenarios, ported;
the feature ``eligible.leader.replicas.version`` through UpdateFeatures; the
unclean-shutdown detection on re-registration; and that with ELR off nothing
is written differently."""

import pytest

from controller.messages import (
    SAFE_DOWNGRADE,
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    UpdateFeaturesRequest,
)
from controller.partition_change import Election, PartitionChangeBuilder
from metadata_records.codec import decode_record, encode_record
from metadata_records.errors import Errors
from metadata_records.image import PartitionRegistration
from metadata_records.records import (
    BROKER_RESOURCE,
    LRS_NO_CHANGE,
    LRS_RECOVERED,
    LRS_RECOVERING,
    NO_LEADER,
    NO_LEADER_CHANGE,
    TOPIC_RESOURCE,
    FeatureRange,
    PartitionChangeRecord,
    PartitionRecord,
)
from metadata_records.snapshot import decode_image, encode_image
from tests.harness import MV_RANGE, ControllerHarness

TOPIC_ID = "FbrrdcfiR-KC2CPSTHaJrg"
ELR = "eligible.leader.replicas.version"
ELR_RANGE = FeatureRange(ELR, 0, 1)
FEATURES = (*MV_RANGE, ELR_RANGE)

# ---------------------------------------------------------------- the builder


def registration(replicas, isr, leader, elr=(), last_known=()) -> PartitionRegistration:
    return PartitionRegistration(
        tuple(replicas), tuple(isr), (), (), leader, LRS_RECOVERED, 100, 200, tuple(elr),
        tuple(last_known),
    )  # fmt: skip


def builder(part, acceptable, *, elr_enabled=True, min_isr=3, election=Election.PREFERRED):
    return PartitionChangeBuilder(
        part, TOPIC_ID, 0, acceptable, election, False, elr_enabled, min_isr
    )


def change(**fields) -> PartitionChangeRecord:
    return PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, **fields)


@pytest.mark.parametrize("elr_enabled", [True, False])
def test_isr_shrink_below_min_isr_puts_the_removed_members_in_the_elr(elr_enabled):
    """Kafka's testEligibleLeaderReplicas_IsrShrinkBelowMinISR."""
    part = registration([1, 2, 3, 4], [1, 2, 3, 4], 1)
    b = builder(part, lambda r: r != 3, elr_enabled=elr_enabled)
    b.target_isr = (1, 2)
    record = b.build()
    if elr_enabled:
        assert record == change(isr=(1, 2), eligible_leader_replicas=(3, 4), version=2)
    else:
        assert record == change(isr=(1, 2))  # v0, no ELR field: as before ELR
    merged = part.merge(record)
    assert merged.elr == ((3, 4) if elr_enabled else ())
    assert merged.last_known_elr == ()


@pytest.mark.parametrize("elr_enabled", [True, False])
def test_isr_expand_to_min_isr_clears_the_elr(elr_enabled):
    """Kafka's testEligibleLeaderReplicas_IsrExpandAboveMinISR: with ELR on the
    ELR is cleared at min ISR; with it off a left-over ELR is cleared too."""
    part = registration([1, 2, 3, 4], [1, 2], 1, elr=[3])
    b = builder(part, lambda r: r != 3, elr_enabled=elr_enabled)
    b.target_isr = (1, 2, 3)
    record = b.build()
    assert record == change(isr=(1, 2, 3), eligible_leader_replicas=(), version=2)
    assert part.merge(record).elr == ()


def test_isr_add_of_a_member_not_in_the_elr_keeps_the_elr():
    """Kafka's testEligibleLeaderReplicas_IsrAddNewMemberNotInELR (4.0's
    last-known-leader mode: LastKnownElr only holds a leaderless partition's
    last leader, so a led partition's is cleared)."""
    part = registration([1, 2, 3, 4], [1], 1, elr=[3], last_known=[2])
    b = builder(part, lambda r: r != 3)
    b.target_isr = (1, 4)
    record = b.build()
    assert record == change(isr=(1, 4), last_known_elr=(), version=2)
    assert part.merge(record).elr == (3,)


def test_unclean_shutdown_replicas_leave_the_elr():
    """Kafka's testEligibleLeaderReplicas_RemoveUncleanShutdownReplicasFromElr."""
    part = registration([1, 2, 3, 4], [1], 1, elr=[2, 3])
    b = builder(part, lambda r: r != 3)
    b.unclean_shutdown_replicas = (3,)
    record = b.build()
    assert record == change(eligible_leader_replicas=(2,), version=2)
    assert part.merge(record).elr == (2,)


def test_an_elr_member_is_elected_when_the_isr_is_empty():
    """Kafka's testEligibleLeaderReplicas_ElrCanBeElected: it becomes the ISR,
    and the old leader goes into the ELR; a clean election."""
    part = registration([1, 2, 3, 4], [1], 1, elr=[3])
    b = builder(part, lambda r: r != 1)
    b.target_isr = ()
    record = b.build()
    assert record == change(isr=(3,), leader=3, eligible_leader_replicas=(1,), version=2)
    merged = part.merge(record)
    assert (merged.isr, merged.elr, merged.leader, merged.last_known_elr) == ((3,), (1,), 3, ())
    assert merged.leader_recovery_state == LRS_RECOVERED


def test_the_isr_can_shrink_to_empty_and_the_last_leader_is_remembered():
    """Kafka's testEligibleLeaderReplicas_IsrCanShrinkToZero."""
    part = registration([1, 2, 3, 4], [1, 2, 3, 4], 1)
    b = builder(part, lambda r: False)
    b.target_isr = ()
    record = b.build()
    assert record == change(
        isr=(),
        leader=NO_LEADER,
        eligible_leader_replicas=(1, 2, 3, 4),
        last_known_elr=(1,),
        version=2,
    )
    merged = part.merge(record)
    assert (merged.isr, merged.elr, merged.last_known_elr) == ((), (1, 2, 3, 4), (1,))
    # An unclean shutdown of an ELR member later leaves LastKnownElr alone.
    b = builder(merged, lambda r: False)
    b.unclean_shutdown_replicas = (2,)
    record = b.build()
    assert record.last_known_elr is None and record.eligible_leader_replicas == (1, 3, 4)


def test_the_last_known_leader_is_elected_only_by_an_unclean_election():
    """Kafka's testEligibleLeaderReplicas_ElectLastKnownLeader elects it in a
    PREFERRED (or ONLINE) election; here only where unclean election is
    allowed (decisions.md 111), as unclean: it becomes the ISR, RECOVERING."""
    part = registration([1, 2, 3, 4], [], NO_LEADER, last_known=[1])
    for election in (Election.PREFERRED, Election.ONLINE):
        assert builder(part, lambda r: True, election=election).build() is None
    record = builder(part, lambda r: r != 2, election=Election.UNCLEAN).build()
    assert record == change(
        isr=(1,),
        leader=1,
        leader_recovery_state=LRS_RECOVERING,
        last_known_elr=(),
        version=2,
    )


def test_a_fenced_last_known_leader_is_not_elected():
    """Kafka 4.0 elects it even when it may not lead (fixed in 4.1,
    KAFKA-19522); here another acceptable replica is, uncleanly."""
    part = registration([1, 2, 3, 4], [], NO_LEADER, last_known=[1])
    record = builder(part, lambda r: r == 2, election=Election.UNCLEAN).build()
    assert record.leader == 2 and record.isr == (2,)
    assert builder(part, lambda r: False, election=Election.UNCLEAN).build() is None


def test_no_last_known_leader_election_while_the_elr_is_not_empty():
    """Kafka's testEligibleLeaderReplicas_ElectLastKnownLeaderShouldFail."""
    part = registration([1, 2, 3, 4], [], NO_LEADER, elr=[3], last_known=[1])
    assert builder(part, lambda r: r != 3).build() is None


def test_an_unclean_election_clears_the_elr_and_the_last_known_elr():
    part = registration([1, 2, 3], [], NO_LEADER, elr=[1], last_known=[1])
    record = builder(part, lambda r: r == 3, election=Election.UNCLEAN).build()
    assert record == change(
        isr=(3,),
        leader=3,
        leader_recovery_state=LRS_RECOVERING,
        eligible_leader_replicas=(),
        last_known_elr=(),
        version=2,
    )


def test_with_elr_off_the_isr_is_never_written_empty():
    part = registration([1, 2], [1], 1)
    b = builder(part, lambda r: False, elr_enabled=False)
    b.target_isr = ()
    assert b.build() == change(leader=NO_LEADER)


def test_elr_and_isr_never_share_a_member_when_a_member_rejoins_below_min_isr():
    part = registration([1, 2, 3, 4], [1], 1, elr=[2, 3])
    b = builder(part, lambda r: True)
    b.target_isr = (1, 2)
    record = b.build()
    assert record == change(isr=(1, 2), eligible_leader_replicas=(3,), version=2)


# ---------------------------------------------------------------- records


def test_records_carry_the_elr_fields_at_v2_and_replay_them():
    v2 = PartitionChangeRecord(
        partition_id=0,
        topic_id=TOPIC_ID,
        isr=(),
        leader=NO_LEADER,
        eligible_leader_replicas=(2,),
        last_known_elr=(1,),
        version=2,
    )
    assert decode_record(encode_record(v2)) == v2
    part = registration([1, 2], [1], 1).merge(v2)
    assert (part.isr, part.elr, part.last_known_elr) == ((), (2,), (1,))
    assert part.to_record(TOPIC_ID, 0).version == 2  # not empty: v2 whatever the level
    assert registration([1, 2], [1], 1).to_record(TOPIC_ID, 0).version == 0
    assert registration([1, 2], [1], 1).to_record(TOPIC_ID, 0, True) == PartitionRecord(
        partition_id=0,
        topic_id=TOPIC_ID,
        replicas=(1, 2),
        isr=(1,),
        leader=1,
        leader_epoch=100,
        partition_epoch=200,
        version=2,
    )
    # v0 has no such fields: a v0 record naming them is refused.
    with pytest.raises(ValueError, match="has no field 'eligibleLeaderReplicas'"):
        decode_record(
            b'{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":0,'
            b'"topicId":"FbrrdcfiR-KC2CPSTHaJrg","eligibleLeaderReplicas":[1]}}'
        )


# ---------------------------------------------------------------- the controller


def elr_cluster(*brokers: int, min_isr: int | None = None, replicas=None) -> ControllerHarness:
    """Brokers that support ELR, registered and unfenced; ELR on; topic foo
    with one partition on ``replicas`` (default: every broker)."""
    h = ControllerHarness()
    for b in brokers:
        assert h.register(b, features=FEATURES).error is Errors.NONE
    for b in brokers:
        assert not h.heartbeat(b).is_fenced
    assert h.run(UpdateFeaturesRequest(ELR, 1)).error is Errors.NONE
    configs = () if min_isr is None else (("min.insync.replicas", str(min_isr)),)
    result = h.create_topic(
        "foo", -1, assignments=((0, tuple(replicas or brokers)),), configs=configs
    )
    assert result.error is Errors.NONE
    return h


def fence(h: ControllerHarness, *brokers: int) -> None:
    for b in brokers:
        if not h.image.brokers[b].fenced:
            assert h.heartbeat(b, want_fence=True).error is Errors.NONE


def unfence(h: ControllerHarness, *brokers: int) -> None:
    for b in brokers:
        assert not h.heartbeat(b).is_fenced


def assert_sound(h: ControllerHarness) -> None:
    """ISR and ELR disjoint; the log replays to the image; the snapshot too."""
    for t in h.image.topics.values():
        for p in t.partitions.values():
            assert not set(p.isr) & set(p.elr), p
    assert h.replayed().topics == h.image.topics
    assert decode_image(encode_image(h.image)).topics == h.image.topics


def test_the_feature_is_off_by_default_and_needs_every_broker():
    h = ControllerHarness()
    h.start_brokers(1)  # supports metadata.version only
    assert h.image.features.get(ELR) is None
    resp = h.run(UpdateFeaturesRequest(ELR, 1))
    assert resp.error is Errors.INVALID_UPDATE_VERSION
    assert "Broker 1 does not support this feature" in resp.error_message
    h.register(1, features=FEATURES)  # the same incarnation amends its features
    assert h.run(UpdateFeaturesRequest(ELR, 1)).error is Errors.NONE
    assert h.image.features[ELR] == 1
    resp = h.run(UpdateFeaturesRequest(ELR, 2))
    assert "The controller only supports versions 0-1" in resp.error_message


def test_level_1_needs_the_highest_metadata_version():
    h = ControllerHarness(metadata_version=11)
    h.register(1, features=FEATURES)
    resp = h.run(UpdateFeaturesRequest(ELR, 1))
    assert resp.error is Errors.INVALID_UPDATE_VERSION
    assert "requires metadata.version 12 (3.6-IV0) or higher, but it is 11" in resp.error_message
    assert h.run(UpdateFeaturesRequest("metadata.version", 12)).error is Errors.NONE
    assert h.run(UpdateFeaturesRequest(ELR, 1)).error is Errors.NONE
    # ... and metadata.version cannot go below it while ELR is on.
    resp = h.run(UpdateFeaturesRequest("metadata.version", 11, SAFE_DOWNGRADE))
    assert resp.error is Errors.INVALID_UPDATE_VERSION
    assert f"{ELR} is at level 1" in resp.error_message
    assert h.run(UpdateFeaturesRequest(ELR, 0, SAFE_DOWNGRADE)).error is Errors.NONE
    assert h.image.features.get(ELR) is None
    assert h.run(UpdateFeaturesRequest("metadata.version", 11, SAFE_DOWNGRADE)).error is Errors.NONE


def test_shrink_and_expand_isr():
    """Kafka's testEligibleLeaderReplicas_ShrinkAndExpandIsr."""
    h = elr_cluster(0, 1, 2, min_isr=2)
    assert h.partition("foo").leader == 0
    h.alter_isr("foo", 0, [0])
    part = h.partition("foo")
    assert (part.elr, part.last_known_elr) == ((1, 2), ())
    assert h.controller.index.partitions_with_broker_in_elr(1) == [(h.topic_id("foo"), 0)]
    h.alter_isr("foo", 0, [0, 1])
    part = h.partition("foo")
    assert (part.elr, part.last_known_elr) == ((), ())
    assert_sound(h)


def test_broker_fence():
    """Kafka's testEligibleLeaderReplicas_BrokerFence."""
    h = elr_cluster(0, 1, 2, 3, min_isr=3)
    fence(h, 2, 3)
    # 2 left first (ISR 0,1,3 is still at min ISR); 3 then went to the ELR.
    assert (h.partition("foo").elr, h.partition("foo").last_known_elr) == ((3,), ())
    fence(h, 1)
    assert h.partition("foo").elr == (1, 3)
    unfence(h, 1, 2, 3)  # they are not in the ISR: the ELR stays
    part = h.partition("foo")
    assert (part.isr, part.elr, part.leader) == ((0,), (1, 3), 0)
    assert_sound(h)


def test_delete_topic_drops_its_elr_from_the_index():
    """Kafka's testEligibleLeaderReplicas_DeleteTopic."""
    from controller.messages import DeleteTopicsRequest

    h = elr_cluster(0, 1, 2, min_isr=2)
    h.alter_isr("foo", 0, [0])
    assert h.controller.index.partitions_with_broker_in_elr(1)
    h.run(DeleteTopicsRequest(names=("foo",)))
    assert h.controller.index.partitions_with_broker_in_elr(1) == []
    assert h.controller.index.partitions_with_broker_in_isr(0) == []


def test_effective_min_isr_is_at_most_the_replication_factor():
    """Kafka's testEligibleLeaderReplicas_EffectiveMinIsr."""
    h = elr_cluster(0, 1, 2, min_isr=5)
    assert h.controller.replication.elr_settings(h.topic_id("foo")) == (True, 3)
    # The cluster default applies where the topic sets none.
    h.create_topic("bar", -1, assignments=((0, (0, 1, 2)),))
    assert h.controller.replication.elr_settings(h.topic_id("bar")) == (True, 1)
    h.run(
        IncrementalAlterConfigsRequest(
            (
                AlterConfigsResource(
                    BROKER_RESOURCE, "", (AlterableConfig("min.insync.replicas", 0, "2"),)
                ),
            )
        )
    )
    assert h.controller.replication.elr_settings(h.topic_id("bar")) == (True, 2)
    h.run(
        IncrementalAlterConfigsRequest(
            (
                AlterConfigsResource(
                    TOPIC_RESOURCE, "bar", (AlterableConfig("min.insync.replicas", 0, "3"),)
                ),
            )
        )
    )
    assert h.controller.replication.elr_settings(h.topic_id("bar")) == (True, 3)


def test_clean_election_from_the_elr():
    """Kafka's testEligibleLeaderReplicas_CleanElection."""
    h = elr_cluster(0, 1, 2, 3, min_isr=3)
    fence(h, 1, 2, 3)
    part = h.partition("foo")
    assert (part.isr, part.elr, part.last_known_elr) == ((0,), (2, 3), ())
    unfence(h, 2)
    fence(h, 0, 1)
    part = h.partition("foo")
    assert (part.isr, part.elr, part.leader, part.last_known_elr) == ((2,), (0, 3), 2, ())
    assert part.leader_recovery_state == LRS_RECOVERED
    assert_sound(h)


def test_unclean_shutdown_leaves_the_elr_and_the_isr():
    """Kafka's testEligibleLeaderReplicas_UncleanShutdown, through a
    re-registration whose previousBrokerEpoch is not the broker's epoch."""
    h = elr_cluster(0, 1, 2, 3, min_isr=3)
    fence(h, 1, 2, 3)
    part = h.partition("foo")
    assert (part.isr, part.elr, part.last_known_elr) == ((0,), (2, 3), ())
    assert h.register(3, generation=1, features=FEATURES, previous_broker_epoch=-1).error == 0
    part = h.partition("foo")
    assert (part.isr, part.elr, part.last_known_elr) == ((0,), (2,), ())
    # The last ISR member, the leader, shut down uncleanly: its session
    # expires first (fenced, clean: into the ELR)...
    h.advance(h.session_timeout_ms + 1)
    while (result := h.controller.maybe_fence_stale_broker(h.now_ms)) is not None:
        h.commit(result.records)
    part = h.partition("foo")
    assert (part.isr, part.elr, part.leader, part.last_known_elr) == ((), (0, 2), NO_LEADER, (0,))
    # ... then its new incarnation says it was unclean: out of the ELR; the
    # last known leader is kept.
    assert h.register(0, generation=1, features=FEATURES).error == 0
    part = h.partition("foo")
    assert (part.isr, part.elr, part.last_known_elr) == ((), (2,), (0,))
    assert_sound(h)


def test_unclean_shutdown_of_the_last_isr_member_while_registered():
    """Kafka's scenario where the last ISR member re-registers uncleanly
    before its session expired: it leaves the ISR (which becomes empty) and
    is remembered as the last known leader, not put in the ELR."""
    h = elr_cluster(0, 1, 2, 3, min_isr=3)
    fence(h, 1, 2, 3)
    h.advance(h.session_timeout_ms + 1)  # 0's session expired, nobody fenced it yet
    assert h.register(0, generation=1, features=FEATURES).error == 0
    part = h.partition("foo")
    assert (part.isr, part.elr, part.leader, part.last_known_elr) == ((), (2, 3), NO_LEADER, (0,))
    assert h.image.brokers[0].fenced
    assert_sound(h)


def test_a_clean_re_registration_keeps_the_elr_and_is_elected():
    """QuorumControllerTest.testUncleanShutdownBroker: the broker that shut
    down uncleanly leaves the ELR, the last known leader stays; the one that
    shut down cleanly keeps its place, is unfenced and elected from the ELR:
    the ISR is it, the ELR and LastKnownElr are cleared."""
    h = elr_cluster(1, 2, 3, min_isr=2)
    fence(h, 3)  # the ISR [1, 2] is still at min ISR: 3 is not kept
    fence(h, 2, 1)
    part = h.partition("foo")
    assert (part.isr, part.elr, part.last_known_elr) == ((), (1, 2), (1,))
    # 1 crashed (previousBrokerEpoch -1); 2 stopped cleanly (its own epoch).
    h.register(1, generation=1, features=FEATURES)
    part = h.partition("foo")
    assert (part.isr, part.elr, part.last_known_elr) == ((), (2,), (1,))
    h.register(2, generation=1, features=FEATURES, previous_broker_epoch=h.epochs[2])
    assert h.partition("foo").elr == (2,)
    unfence(h, 1)  # not in the ISR or the ELR: not elected
    assert h.partition("foo").leader == NO_LEADER
    unfence(h, 2)
    part = h.partition("foo")
    assert (part.isr, part.elr, part.leader, part.last_known_elr) == ((2,), (), 2, ())
    assert part.leader_recovery_state == LRS_RECOVERED
    assert_sound(h)


def test_no_election_outside_isr_and_elr_without_unclean_election():
    h = elr_cluster(1, 2, 3, min_isr=2)
    fence(h, 2, 3, 1)
    for b in (1, 2, 3):  # every one crashed: the ELR empties
        h.register(b, generation=1, features=FEATURES)
    part = h.partition("foo")
    assert (part.isr, part.elr, part.last_known_elr) == ((), (), (1,))
    unfence(h, 1, 2, 3)
    assert h.partition("foo").leader == NO_LEADER
    # Unclean election allowed: the last known leader first, marked unclean.
    h.run(
        IncrementalAlterConfigsRequest(
            (
                AlterConfigsResource(
                    TOPIC_RESOURCE,
                    "foo",
                    (AlterableConfig("unclean.leader.election.enable", 0, "true"),),
                ),
            )
        )
    )
    due = h.controller.next_unclean_election_ms()
    h.advance(max(0, due - h.now_ms))
    result = h.controller.maybe_elect_unclean_leaders(h.now_ms)
    h.commit(result.records)
    part = h.partition("foo")
    assert (part.isr, part.leader, part.leader_recovery_state) == ((1,), 1, LRS_RECOVERING)
    assert (part.elr, part.last_known_elr) == ((), ())
    assert_sound(h)


def test_unregistering_an_elr_member_touches_its_partitions():
    h = elr_cluster(0, 1, 2, min_isr=2)
    h.alter_isr("foo", 0, [0])
    assert h.partition("foo").elr == (1, 2)
    fence(h, 2)
    h.unregister(2)
    part = h.partition("foo")
    # As Kafka: the partition is visited, the ELR kept (2 may not lead).
    assert part.isr == (0,) and 2 not in part.isr
    assert_sound(h)


def test_with_elr_off_re_registration_writes_only_its_record():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic("foo", -1, assignments=((0, (1, 2)),))
    fence(h, 2)
    before = len(h.log)
    h.register(2, generation=1)
    assert len(h.log) == before + 1  # the RegisterBrokerRecord alone
    assert all(
        r.version == 0 for r in h.log if isinstance(r, PartitionChangeRecord | PartitionRecord)
    )


def test_records_are_v2_only_when_they_carry_elr():
    h = elr_cluster(0, 1, 2, min_isr=2)
    start = len(h.log)
    h.alter_isr("foo", 0, [0, 1])  # still at min ISR: no ELR change
    assert [r.version for r in h.log[start:]] == [0]
    h.alter_isr("foo", 0, [0])
    assert [r.version for r in h.log[start + 1 :]] == [2]
    assert h.log[-1].eligible_leader_replicas == (1,)  # 2 left at min ISR
    assert h.log[-1].leader == NO_LEADER_CHANGE and h.log[-1].leader_recovery_state == LRS_NO_CHANGE


def test_cancelling_a_reassignment_keeps_an_empty_isr_empty():
    """Decision 112: Kafka's revert makes the first replica the ISR when
    none of the ISR survives the revert; an ISR already empty (ELR on, every
    replica fenced) would so take a fenced broker. It stays empty here, the
    ELR stays, and no fenced broker joins it."""
    from controller.messages import (
        AlterPartitionReassignmentsRequest,
        ReassignablePartition,
        ReassignableTopic,
    )

    def reassign(replicas):
        return h.run(
            AlterPartitionReassignmentsRequest(
                (ReassignableTopic("foo", (ReassignablePartition(0, replicas),)),)
            )
        )

    h = elr_cluster(1, 2, 3, 4, min_isr=2, replicas=(1, 2, 3))
    h.run(
        IncrementalAlterConfigsRequest(
            (
                AlterConfigsResource(
                    TOPIC_RESOURCE,
                    "foo",
                    (AlterableConfig("unclean.leader.election.enable", 0, "true"),),
                ),
            )
        )
    )
    fence(h, 3, 2, 1)
    assert (h.partition("foo").isr, h.partition("foo").elr) == ((), (1, 2))
    assert reassign((1, 2, 4)).topics[0].partitions[0].error is Errors.NONE
    assert h.partition("foo").adding_replicas == (4,)
    fence(h, 4)
    assert reassign(None).topics[0].partitions[0].error is Errors.NONE
    part = h.partition("foo")
    assert (part.replicas, part.isr, part.elr, part.adding_replicas) == ((1, 2, 3), (), (1, 2), ())
    assert_sound(h)


def test_with_elr_on_a_broker_must_support_it_to_register():
    """Kafka's registerBroker checks every finalized feature: a broker that
    does not name eligible.leader.replicas.version supports only level 0."""
    h = elr_cluster(1, 2)
    resp = h.register(3)  # metadata.version only
    assert resp.error is Errors.UNSUPPORTED_VERSION
    assert resp.error_message == (
        "Unable to register because the broker does not support finalized version 1 of "
        "eligible.leader.replicas.version. The broker wants a version between 0 and 0, inclusive."
    )
    assert h.register(3, features=FEATURES).error is Errors.NONE
