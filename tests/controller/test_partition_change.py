"""PartitionChangeBuilder on its own (docs/kafka-rules.md 2.3, 2.4 and 5): which
PartitionChangeRecord, if any, takes a partition to its targets."""

import pytest

from controller.partition_change import Election, PartitionChangeBuilder
from metadata_records.features import bumps_leader_epoch_on_isr_shrink
from metadata_records.image import PartitionRegistration
from metadata_records.records import (
    LRS_NO_CHANGE,
    LRS_RECOVERED,
    LRS_RECOVERING,
    NO_LEADER,
    NO_LEADER_CHANGE,
    PartitionChangeRecord,
)

TOPIC_ID = "VAAAAAAAAAAAAAAAAAAAAQ"
PID = 4
LEADER_EPOCH = 3
PARTITION_EPOCH = 7


def part(
    replicas,
    isr=None,
    leader=None,
    *,
    removing=(),
    adding=(),
    lrs=LRS_RECOVERED,
) -> PartitionRegistration:
    replicas = tuple(replicas)
    isr = replicas if isr is None else tuple(isr)
    leader = isr[0] if leader is None else leader
    return PartitionRegistration(
        replicas,
        isr,
        tuple(removing),
        tuple(adding),
        leader,
        lrs,
        LEADER_EPOCH,
        PARTITION_EPOCH,
    )


def everyone(_replica: int) -> bool:
    return True


def only(*ids):
    allowed = set(ids)
    return lambda replica: replica in allowed


def builder(
    p, acceptable=everyone, election=Election.ONLINE, metadata_version=12, **targets
) -> PartitionChangeBuilder:
    b = PartitionChangeBuilder(
        p,
        TOPIC_ID,
        PID,
        acceptable,
        election,
        bump_on_isr_shrink=bumps_leader_epoch_on_isr_shrink(metadata_version),
    )
    for name, value in targets.items():
        setattr(b, f"target_{name}", tuple(value) if isinstance(value, list) else value)
    return b


def change(**fields) -> PartitionChangeRecord:
    return PartitionChangeRecord(partition_id=PID, topic_id=TOPIC_ID, **fields)


# ---------------------------------------------------------------- nothing changes


def test_no_record_when_nothing_changes():
    p = part([1, 2, 3])
    assert builder(p).build() is None
    # Setting every target to what the partition already has is still no change.
    same = builder(
        p,
        isr=[1, 2, 3],
        replicas=[1, 2, 3],
        removing=[],
        adding=[],
        lrs=LRS_RECOVERED,
    )
    assert same.build() is None


def test_no_record_for_each_election_type_when_the_leader_already_fits():
    p = part([1, 2, 3])
    for election in Election:
        assert builder(p, election=election).build() is None, election


# ---------------------------------------------------------------- ISR changes


def test_isr_reorder_alone_writes_an_isr_change_without_a_leader_bump():
    p = part([1, 2, 3])
    record = builder(p, isr=[1, 3, 2]).build()
    assert record == change(isr=(1, 3, 2))
    merged = p.merge(record)
    assert merged.isr == (1, 3, 2)
    assert merged.leader == 1
    assert merged.leader_epoch == LEADER_EPOCH
    assert merged.partition_epoch == PARTITION_EPOCH + 1


def test_isr_shrink_does_not_set_the_leader():
    p = part([1, 2, 3])
    record = builder(p, isr=[1, 3]).build()
    assert record == change(isr=(1, 3))
    assert record.leader == NO_LEADER_CHANGE
    merged = p.merge(record)
    assert (merged.leader, merged.leader_epoch, merged.partition_epoch) == (
        1,
        LEADER_EPOCH,
        PARTITION_EPOCH + 1,
    )


def test_isr_shrink_to_the_leader_alone_does_not_set_the_leader():
    p = part([1, 2, 3])
    assert builder(p, isr=[1]).build() == change(isr=(1,))


def test_isr_expand_does_not_set_the_leader():
    p = part([1, 2, 3], isr=[1])
    record = builder(p, isr=[1, 2, 3]).build()
    assert record == change(isr=(1, 2, 3))
    assert p.merge(record).leader_epoch == LEADER_EPOCH


# Before 3.6-IV0 (levels 6-11) an ISR shrink bumps the leader epoch: Kafka's
# triggerLeaderEpochBumpForIsrShrinkIfNeeded (KAFKA-15021).


@pytest.mark.parametrize("level", [6, 7, 11])
def test_before_3_6_iv0_an_isr_shrink_names_the_same_leader(level):
    p = part([1, 2, 3])
    record = builder(p, metadata_version=level, isr=[1, 3]).build()
    assert record == change(isr=(1, 3), leader=1)
    merged = p.merge(record)
    assert (merged.leader, merged.leader_epoch) == (1, LEADER_EPOCH + 1)


def test_before_3_6_iv0_a_leaderless_isr_shrink_bumps_with_leader_minus_one():
    p = part([1, 2, 3], isr=[2, 3], leader=NO_LEADER)
    record = builder(p, acceptable=only(), metadata_version=6, isr=[3]).build()
    assert record == change(isr=(3,), leader=NO_LEADER)


@pytest.mark.parametrize("level", [6, 12])
def test_an_isr_expansion_or_reorder_never_bumps_the_leader_epoch(level):
    p = part([1, 2, 3], isr=[1, 2])
    assert builder(p, metadata_version=level, isr=[1, 2, 3]).build() == change(isr=(1, 2, 3))
    assert builder(p, metadata_version=level, isr=[2, 1]).build() == change(isr=(2, 1))


def test_before_3_6_iv0_a_shrink_that_changes_the_leader_needs_no_second_bump():
    p = part([1, 2, 3])
    record = builder(p, acceptable=only(2, 3), metadata_version=6, isr=[2, 3]).build()
    assert record == change(isr=(2, 3), leader=2)


def test_isr_stored_in_the_order_given():
    p = part([1, 2, 3], isr=[1])
    assert builder(p, isr=[1, 3, 2]).build().isr == (1, 3, 2)


# ---------------------------------------------------------------- ONLINE election


def test_invalid_leader_is_replaced_by_the_first_valid_replica_in_replica_order():
    # ISR order says 2 first, replica order says 3 first: replica order wins.
    p = part([1, 3, 2], isr=[1, 2, 3], leader=1)
    record = builder(p, only(2, 3)).build()
    assert record == change(leader=3)
    merged = p.merge(record)
    assert merged.leader == 3
    assert merged.leader_epoch == LEADER_EPOCH + 1
    assert merged.partition_epoch == PARTITION_EPOCH + 1


def test_leader_leaving_the_isr_is_replaced_and_the_isr_written():
    p = part([1, 2, 3])
    record = builder(p, isr=[2, 3]).build()
    assert record == change(isr=(2, 3), leader=2)


def test_new_leader_must_be_in_the_target_isr():
    # 2 is acceptable but not in the ISR; 3 is both.
    p = part([1, 2, 3], isr=[1, 3])
    assert builder(p, only(2, 3)).build() == change(leader=3)


def test_no_valid_leader_sets_leader_minus_one_and_keeps_the_last_isr_member():
    p = part([1, 2, 3], isr=[1])
    # The last member is removed from the target ISR (fencing does this) ...
    record = builder(p, only(2, 3), isr=[]).build()
    assert record == change(leader=NO_LEADER)
    assert record.isr is None  # ... but the ISR is not emptied
    merged = p.merge(record)
    assert merged.isr == (1,)
    assert merged.leader == NO_LEADER
    assert merged.leader_epoch == LEADER_EPOCH + 1
    assert merged.partition_epoch == PARTITION_EPOCH + 1


def test_no_valid_leader_with_an_unchanged_isr_sets_leader_minus_one():
    p = part([1, 2, 3], isr=[1, 2])
    record = builder(p, only(3)).build()
    assert record == change(leader=NO_LEADER)


def test_no_valid_leader_with_a_shrunk_isr_writes_both():
    p = part([1, 2, 3], isr=[1, 2])
    record = builder(p, only(3), isr=[2]).build()
    assert record == change(isr=(2,), leader=NO_LEADER)


def test_already_leaderless_and_still_no_leader_writes_no_leader_field():
    p = part([1, 2, 3], isr=[1], leader=NO_LEADER)
    assert builder(p, only(2, 3)).build() is None
    assert builder(p, only(2, 3), isr=[]).build() is None
    # With some other change, the record still carries no leader.
    record = builder(p, only(), lrs=LRS_RECOVERING).build()
    assert record == change(leader_recovery_state=LRS_RECOVERING)
    assert p.merge(record).leader_epoch == LEADER_EPOCH


def test_leaderless_partition_gets_the_returning_isr_member():
    p = part([1, 2, 3], isr=[2], leader=NO_LEADER)
    record = builder(p, only(2)).build()
    assert record == change(leader=2)


# ---------------------------------------------------------------- PREFERRED election


def test_preferred_picks_the_first_replica_when_valid():
    p = part([1, 2, 3], leader=2)
    record = builder(p, election=Election.PREFERRED).build()
    assert record == change(leader=1)
    assert p.merge(record).leader_epoch == LEADER_EPOCH + 1


def test_preferred_keeps_a_valid_current_leader_when_the_first_replica_is_invalid():
    p = part([1, 2, 3], leader=3)
    assert builder(p, only(2, 3), election=Election.PREFERRED).build() is None
    # Not in the ISR counts as invalid too.
    q = part([1, 2, 3], isr=[2, 3], leader=3)
    assert builder(q, election=Election.PREFERRED).build() is None


def test_preferred_falls_back_to_the_first_valid_of_the_rest_in_replica_order():
    p = part([1, 4, 3, 2], leader=2)
    record = builder(p, only(3, 4), election=Election.PREFERRED).build()
    assert record == change(leader=4)
    q = part([1, 2, 3, 4], leader=2)
    assert builder(q, only(3, 4), election=Election.PREFERRED).build() == change(leader=3)


def test_preferred_with_no_valid_replica_gives_no_leader():
    p = part([1, 2, 3], leader=2)
    assert builder(p, only(), election=Election.PREFERRED).build() == change(leader=NO_LEADER)


def test_preferred_never_falls_back_to_unclean():
    p = part([1, 2, 3], isr=[1], leader=1)
    record = builder(p, only(2, 3), election=Election.PREFERRED).build()
    assert record == change(leader=NO_LEADER)


# ---------------------------------------------------------------- UNCLEAN election


def test_unclean_takes_the_first_acceptable_replica_and_forces_the_isr_and_recovering():
    p = part([3, 1, 2], isr=[1], leader=1)
    record = builder(p, only(2, 3), election=Election.UNCLEAN).build()
    assert record == change(isr=(3,), leader=3, leader_recovery_state=LRS_RECOVERING)
    merged = p.merge(record)
    assert merged.isr == (3,)
    assert merged.leader_recovery_state == LRS_RECOVERING
    assert merged.leader_epoch == LEADER_EPOCH + 1


def test_unclean_after_the_last_member_is_removed_from_the_target_isr():
    p = part([1, 2, 3], isr=[1], leader=1)
    record = builder(p, only(2, 3), election=Election.UNCLEAN, isr=[]).build()
    assert record == change(isr=(2,), leader=2, leader_recovery_state=LRS_RECOVERING)


def test_unclean_on_an_already_recovering_partition_leaves_the_state_alone():
    p = part([1, 2, 3], isr=[1], leader=1, lrs=LRS_RECOVERING)
    record = builder(p, only(2, 3), election=Election.UNCLEAN).build()
    assert record == change(isr=(2,), leader=2)
    assert record.leader_recovery_state == LRS_NO_CHANGE
    assert p.merge(record).leader_recovery_state == LRS_RECOVERING


def test_unclean_prefers_a_clean_leader_when_an_isr_member_is_acceptable():
    p = part([1, 2, 3], isr=[1, 3], leader=1)
    record = builder(p, only(2, 3), election=Election.UNCLEAN).build()
    assert record == change(leader=3)
    assert record.isr is None and record.leader_recovery_state == LRS_NO_CHANGE


def test_unclean_with_no_acceptable_replica_gives_no_leader():
    p = part([1, 2, 3], isr=[1], leader=1)
    record = builder(p, only(), election=Election.UNCLEAN).build()
    assert record == change(leader=NO_LEADER)


def test_unclean_on_a_leaderless_partition():
    p = part([1, 2, 3], isr=[1], leader=NO_LEADER)
    record = builder(p, only(3), election=Election.UNCLEAN).build()
    assert record == change(isr=(3,), leader=3, leader_recovery_state=LRS_RECOVERING)


def test_online_never_elects_outside_the_isr():
    p = part([1, 2, 3], isr=[1], leader=1)
    assert builder(p, only(2, 3), election=Election.ONLINE).build() == change(leader=NO_LEADER)


# ---------------------------------------------------------------- reassignment (docs/kafka-rules.md 5.4)


def reassigning_away_from_leader():
    # [1, 2, 3] -> [2, 3, 4]: replicas = target + removing.
    return part([2, 3, 4, 1], isr=[1, 2, 3], leader=1, removing=[1], adding=[4])


def test_reassignment_completes_and_elects_a_new_leader_when_the_leader_is_removed():
    p = reassigning_away_from_leader()
    record = builder(p, isr=[1, 2, 3, 4]).build()
    assert record == change(
        isr=(2, 3, 4),
        leader=2,
        replicas=(2, 3, 4),
        removing_replicas=(),
        adding_replicas=(),
    )
    merged = p.merge(record)
    assert merged.replicas == (2, 3, 4)
    assert merged.isr == (2, 3, 4)
    assert merged.removing_replicas == () and merged.adding_replicas == ()
    assert not merged.is_reassigning
    assert merged.leader == 2
    assert merged.leader_epoch == LEADER_EPOCH + 1
    assert merged.partition_epoch == PARTITION_EPOCH + 1


def test_reassignment_completion_new_leader_follows_replica_order():
    p = part([4, 3, 2, 1], isr=[1, 2, 3], leader=1, removing=[1], adding=[4])
    record = builder(p, isr=[1, 2, 3, 4]).build()
    assert record.isr == (2, 3, 4)
    assert record.replicas == (4, 3, 2)
    assert record.leader == 4  # first of the remaining replicas, not of the ISR


def test_reassignment_completion_keeps_the_isr_order_minus_removed():
    p = reassigning_away_from_leader()
    record = builder(p, isr=[1, 4, 3, 2]).build()
    assert record.isr == (4, 3, 2)
    assert record.leader == 2  # replica order, not ISR order


def test_reassignment_removing_the_leader_with_no_acceptable_replica_left_gives_no_leader():
    p = reassigning_away_from_leader()
    record = builder(p, only(1), isr=[1, 2, 3, 4]).build()
    assert record.leader == NO_LEADER
    assert record.replicas == (2, 3, 4)
    assert record.isr == (2, 3, 4)


def test_reassignment_not_complete_while_an_added_replica_is_out_of_the_isr():
    p = reassigning_away_from_leader()
    assert builder(p, isr=[1, 2, 3]).build() is None
    record = builder(p, isr=[1, 2]).build()
    assert record == change(isr=(1, 2))
    merged = p.merge(record)
    assert merged.removing_replicas == (1,) and merged.adding_replicas == (4,)


def test_reassignment_not_complete_when_the_isr_minus_removing_is_empty():
    # [1] -> [2]: replicas [2, 1], removing [1], adding [2]; only 1 in the ISR.
    p = part([2, 1], isr=[1], leader=1, removing=[1], adding=[2])
    assert builder(p, isr=[1]).build() is None


def test_reassignment_keeping_the_leader_bumps_the_leader_epoch_with_the_same_leader():
    # [1, 2, 3] -> [1, 2, 4]: 3 leaves the assignment.
    p = part([1, 2, 4, 3], isr=[1, 2, 3], leader=1, removing=[3], adding=[4])
    record = builder(p, isr=[1, 2, 3, 4]).build()
    assert record == change(
        isr=(1, 2, 4),
        leader=1,
        replicas=(1, 2, 4),
        removing_replicas=(),
        adding_replicas=(),
    )
    merged = p.merge(record)
    assert merged.leader == 1
    assert merged.leader_epoch == LEADER_EPOCH + 1


def test_reassignment_that_only_adds_completes_without_a_leader_bump():
    # [1, 2] -> [1, 2, 3]: nothing leaves, so no epoch bump.
    p = part([1, 2, 3], isr=[1, 2], leader=1, adding=[3])
    record = builder(p, isr=[1, 2, 3]).build()
    assert record == change(isr=(1, 2, 3), adding_replicas=())
    assert record.leader == NO_LEADER_CHANGE and record.replicas is None
    assert p.merge(record).leader_epoch == LEADER_EPOCH


def test_target_replicas_missing_an_old_replica_bumps_the_leader_epoch():
    p = part([1, 2, 3], isr=[1, 2])
    record = builder(p, replicas=[1, 2]).build()
    assert record == change(leader=1, replicas=(1, 2))
    merged = p.merge(record)
    assert (merged.leader, merged.leader_epoch) == (1, LEADER_EPOCH + 1)


def test_target_replicas_missing_an_old_replica_on_a_leaderless_partition():
    p = part([1, 2, 3], isr=[1], leader=NO_LEADER)
    record = builder(p, only(), replicas=[1, 2]).build()
    assert record == change(leader=NO_LEADER, replicas=(1, 2))
    assert p.merge(record).leader_epoch == LEADER_EPOCH + 1


def test_target_replicas_containing_every_old_replica_does_not_bump():
    # Starting a reassignment: replicas = target + removing keeps every old replica.
    p = part([1, 2, 3])
    record = builder(p, replicas=[2, 3, 4, 1], removing=[1], adding=[4]).build()
    assert record == change(replicas=(2, 3, 4, 1), removing_replicas=(1,), adding_replicas=(4,))
    assert record.leader == NO_LEADER_CHANGE


def test_target_replicas_dropping_the_leader_elects_a_new_one():
    # The election, not the bump rule, decides: the leader is already changing.
    p = part([1, 2, 3], isr=[2, 3], leader=2)
    record = builder(p, replicas=[1, 3], isr=[3]).build()
    assert record == change(isr=(3,), leader=3, replicas=(1, 3))


# ---------------------------------------------------------------- leader recovery state


@pytest.mark.parametrize(
    ("current", "target"),
    [(LRS_RECOVERING, LRS_RECOVERED), (LRS_RECOVERED, LRS_RECOVERING)],
)
def test_target_leader_recovery_state_change_is_written(current, target):
    p = part([1, 2, 3], isr=[1], lrs=current)
    record = builder(p, lrs=target).build()
    assert record == change(leader_recovery_state=target)
    merged = p.merge(record)
    assert merged.leader_recovery_state == target
    assert merged.leader_epoch == LEADER_EPOCH
    assert merged.partition_epoch == PARTITION_EPOCH + 1


def test_recovered_with_a_larger_isr_in_one_record():
    p = part([1, 2, 3], isr=[1], lrs=LRS_RECOVERING)
    record = builder(p, isr=[1, 2, 3], lrs=LRS_RECOVERED).build()
    assert record == change(isr=(1, 2, 3), leader_recovery_state=LRS_RECOVERED)


def test_leader_change_does_not_change_the_recovery_state():
    p = part([1, 2, 3], isr=[1, 2], lrs=LRS_RECOVERING)
    record = builder(p, only(2)).build()
    assert record == change(leader=2)
    assert p.merge(record).leader_recovery_state == LRS_RECOVERING


def test_record_identifies_the_partition():
    record = PartitionChangeBuilder(part([1, 2]), "other-topic-id", 9, everyone).build()
    assert record is None
    record = builder(part([1, 2]), isr=[1]).build()
    assert (record.topic_id, record.partition_id) == (TOPIC_ID, PID)


# ---------------------------------------------------------------- quick_isr_change


from hypothesis import given  # noqa: E402 - the quick path's tests, kept together
from hypothesis import strategies as st  # noqa: E402

from controller.partition_change import NOT_QUICK, quick_isr_change  # noqa: E402

_brokers = st.integers(0, 5)
_small = st.lists(_brokers, max_size=4, unique=True).map(tuple)


@st.composite
def _registrations(draw) -> PartitionRegistration:
    replicas = draw(st.lists(_brokers, min_size=1, max_size=4, unique=True).map(tuple))
    isr = tuple(b for b in replicas if draw(st.booleans())) or replicas[:1]
    leader = draw(st.sampled_from([*isr, NO_LEADER, *replicas]))
    return PartitionRegistration(
        replicas,
        isr,
        draw(st.sampled_from([(), (), replicas[-1:]])),
        draw(st.sampled_from([(), (), replicas[:1]])),
        leader,
        draw(st.sampled_from([LRS_RECOVERED, LRS_RECOVERING])),
        LEADER_EPOCH,
        PARTITION_EPOCH,
        draw(st.sampled_from([(), (), (5,)])),
        draw(st.sampled_from([(), (), (4,)])),
    )


@given(
    _registrations(),
    _small,
    st.sampled_from([LRS_RECOVERED, LRS_RECOVERING]),
    st.frozensets(_brokers),
    st.sampled_from([Election.ONLINE, Election.UNCLEAN]),
)
def test_the_quick_isr_change_is_what_the_builder_builds_wherever_it_vouches(
    p, target_isr, target_lrs, active, election
):
    """AlterPartition's common case without the builder: wherever
    quick_isr_change vouches (not NOT_QUICK), the ONLINE and UNCLEAN builders
    (no shrink bump, ELR off) give the very same record, or None."""
    quick = quick_isr_change(p, TOPIC_ID, PID, target_isr, target_lrs, p.leader in active)
    b = PartitionChangeBuilder(p, TOPIC_ID, PID, lambda r: r in active, election)
    b.target_isr = target_isr
    b.target_lrs = target_lrs
    built = b.build()
    if quick is not NOT_QUICK:
        assert quick == built
        assert quick is None or quick.isr is target_isr


def test_the_quick_isr_change_vouches_for_a_shrink_and_an_expansion_by_an_active_leader():
    p = part([1, 2, 3])
    shrunk = quick_isr_change(p, TOPIC_ID, PID, (1, 2), LRS_RECOVERED, True)
    assert shrunk == change(isr=(1, 2))
    grown = quick_isr_change(part([1, 2, 3], isr=[1]), TOPIC_ID, PID, (1, 3), LRS_RECOVERED, True)
    assert grown == change(isr=(1, 3))
    assert quick_isr_change(p, TOPIC_ID, PID, (1, 2, 3), LRS_RECOVERED, True) is None
    # A fenced or shutting-down leader, a reassignment, an ELR, a new LRS: the builder's.
    assert quick_isr_change(p, TOPIC_ID, PID, (1, 2), LRS_RECOVERED, False) is NOT_QUICK
    reassigning = part([1, 2, 3], adding=[3])
    assert quick_isr_change(reassigning, TOPIC_ID, PID, (1, 2), LRS_RECOVERED, True) is NOT_QUICK
    with_elr = p._replace(elr=(4,))
    assert quick_isr_change(with_elr, TOPIC_ID, PID, (1, 2), LRS_RECOVERED, True) is NOT_QUICK
    recovering = part([1, 2, 3], lrs=LRS_RECOVERING)
    assert quick_isr_change(recovering, TOPIC_ID, PID, (1,), LRS_RECOVERED, True) is NOT_QUICK
