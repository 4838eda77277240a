"""Heartbeats end to end (docs/kafka-rules.md 4): unfencing, fencing, controlled shutdown,
session expiry and failover, plus the soft state in controller/heartbeats.py."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.heartbeats import BrokerHeartbeatManager
from controller.messages import BrokerHeartbeatRequest
from metadata_records.errors import Errors
from metadata_records.records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
)
from tests.harness import ControllerHarness


def change_records(h):
    return [r for r in h.last.records if isinstance(r, PartitionChangeRecord)]


def test_heartbeat_before_registration_and_with_a_stale_epoch():
    h = ControllerHarness()
    resp = h.heartbeat(7, epoch=3)
    assert resp.error is Errors.STALE_BROKER_EPOCH
    assert resp.error_message == "Receive a heartbeat from broker 7 before registration"
    assert (resp.is_caught_up, resp.is_fenced, resp.should_shut_down) == (False, True, False)
    h.register(1)
    resp = h.heartbeat(1, epoch=h.epochs[1] - 1)
    assert resp.error is Errors.STALE_BROKER_EPOCH
    assert (
        resp.error_message
        == f"Expected broker epoch {h.epochs[1]}, but got broker epoch {h.epochs[1] - 1}"
    )


def test_unfenced_only_once_caught_up_with_its_own_registration():
    h = ControllerHarness()
    h.register(1)
    reg_offset = h.image.brokers[1].registration_offset
    resp = h.heartbeat(1, offset=reg_offset - 1)
    assert (resp.is_caught_up, resp.is_fenced) == (False, True) and h.last.records == ()
    resp = h.heartbeat(1, offset=reg_offset)  # not the log end: its own record suffices
    assert (resp.is_caught_up, resp.is_fenced) == (True, False)
    (record,) = h.last.records
    assert record == BrokerRegistrationChangeRecord(
        broker_id=1, broker_epoch=h.epochs[1], fenced=-1, version=0
    )


def test_want_fence_keeps_a_caught_up_broker_fenced():
    h = ControllerHarness()
    h.register(1)
    resp = h.heartbeat(1, want_fence=True)
    assert resp.is_caught_up and resp.is_fenced and h.last.records == ()


def test_fencing_removes_the_broker_from_every_isr_then_writes_the_fence_record():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 3, 3)
    led_by_1 = [p for p in range(3) if h.partition("t", p).leader == 1]
    resp = h.heartbeat(1, want_fence=True)
    assert resp.is_fenced and not resp.should_shut_down
    *changes, last = h.last.records
    assert last == BrokerRegistrationChangeRecord(
        broker_id=1, broker_epoch=h.epochs[1], fenced=1, version=0
    )
    assert len(changes) == 3 and all(isinstance(c, PartitionChangeRecord) for c in changes)
    for p in range(3):
        part = h.partition("t", p)
        assert 1 not in part.isr
        if p in led_by_1:
            # The first replica in replica order that is in the new ISR and active.
            assert part.leader == next(r for r in part.replicas if r in part.isr)
            assert part.leader_epoch == 1
        else:
            assert part.leader_epoch == 0  # an ISR shrink does not bump the leader epoch
        assert part.partition_epoch == 1
    assert h.image.brokers[1].fenced


def test_last_isr_member_fenced_keeps_the_isr_and_loses_the_leader_then_gets_it_back():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic("t", 1, 1)
    leader = h.partition("t").leader
    h.heartbeat(leader, want_fence=True)
    part = h.partition("t")
    assert part.isr == (leader,) and part.leader == -1 and part.leader_epoch == 1
    h.heartbeat(leader)  # caught up: unfenced, then elected again
    assert [type(r) for r in h.last.records] == [
        BrokerRegistrationChangeRecord,
        PartitionChangeRecord,
    ]
    part = h.partition("t")
    assert part.leader == leader and part.leader_epoch == 2 and part.isr == (leader,)
    assert h.replayed() == h.image


def test_unclean_topic_elects_an_out_of_sync_replica_when_the_last_leader_is_fenced():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic(
        "t", assignments=((0, (1, 2)),), configs=(("unclean.leader.election.enable", "true"),)
    )
    h.alter_isr("t", 0, [1])
    h.heartbeat(1, want_fence=True)
    part = h.partition("t")
    assert part.leader == 2 and part.isr == (2,) and part.leader_recovery_state == 1


def test_controlled_shutdown_moves_leadership_then_waits_for_active_brokers():
    h = ControllerHarness(metadata_version=12)
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 6, 3)
    h.create_topic("solo", assignments=((0, (1,)),))
    resp = h.heartbeat(1, want_shut_down=True)
    assert (resp.is_fenced, resp.should_shut_down) == (False, False)
    first, *changes = h.last.records
    assert first == BrokerRegistrationChangeRecord(
        broker_id=1, broker_epoch=h.epochs[1], in_controlled_shutdown=1, version=1
    )
    assert len(changes) == 7 and all(isinstance(c, PartitionChangeRecord) for c in changes)
    cs_offset = h.image.next_offset - 1
    for p in range(6):
        part = h.partition("t", p)
        assert 1 not in part.isr and part.leader in (2, 3)
    solo = h.partition("solo")
    assert solo.isr == (1,) and solo.leader == -1  # the last member stays in the ISR
    reg = h.image.brokers[1]
    assert reg.in_controlled_shutdown and not reg.fenced

    # Still waiting: the active brokers have not reported the shutdown's offset.
    resp = h.heartbeat(1, want_shut_down=True)
    assert (resp.is_fenced, resp.should_shut_down) == (False, False) and h.last.records == ()
    h.heartbeat(2, offset=cs_offset)
    h.heartbeat(3, offset=cs_offset - 1)
    assert not h.heartbeat(1, want_shut_down=True).should_shut_down
    h.heartbeat(3, offset=cs_offset)
    # Flags are ignored once in controlled shutdown: it cannot be cancelled.
    resp = h.heartbeat(1, want_shut_down=False)
    assert (resp.is_fenced, resp.should_shut_down) == (True, True)
    assert h.last.records[-1] == BrokerRegistrationChangeRecord(
        broker_id=1, broker_epoch=h.epochs[1], fenced=1, version=0
    )
    reg = h.image.brokers[1]
    assert reg.fenced and reg.in_controlled_shutdown  # sticky until a new incarnation
    # Asking again gets the same answer, and no redundant fence record.
    resp = h.heartbeat(1, want_shut_down=True)
    assert resp.should_shut_down and h.last.records == ()
    # A broker told to stop that keeps heartbeating is not unfenced: only a
    # new incarnation leaves controlled shutdown.
    resp = h.heartbeat(1)
    assert (resp.is_fenced, resp.should_shut_down) == (True, False) and h.last.records == ()
    assert h.partition("solo").leader == -1
    assert h.replayed() == h.image


def test_a_broker_leading_nothing_may_stop_at_once():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic("t", assignments=((0, (2, 1)),))
    resp = h.heartbeat(1, want_shut_down=True)
    assert (resp.is_fenced, resp.should_shut_down) == (True, True)
    assert [type(r) for r in h.last.records] == [
        PartitionChangeRecord,
        BrokerRegistrationChangeRecord,
    ]
    assert h.partition("t").isr == (2,)
    assert not h.image.brokers[1].in_controlled_shutdown  # it never entered controlled shutdown


def test_a_fenced_broker_asking_to_stop_is_told_to_stop_without_a_redundant_record():
    h = ControllerHarness()
    h.register(1)
    resp = h.heartbeat(1, want_shut_down=True, offset=0)
    assert (resp.is_fenced, resp.should_shut_down) == (True, True) and h.last.records == ()


def test_want_fence_and_want_shut_down_together():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic("t", 1, 2)
    resp = h.heartbeat(1, want_fence=True, want_shut_down=True)
    assert (resp.is_fenced, resp.should_shut_down) == (True, True)
    assert h.image.brokers[1].fenced


def test_before_3_3_iv3_controlled_shutdown_is_soft_state():
    h = ControllerHarness(metadata_version=6)  # 3.3-IV2
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 3, 3)
    resp = h.heartbeat(1, want_shut_down=True)
    assert not resp.is_fenced and not resp.should_shut_down
    assert all(isinstance(r, PartitionChangeRecord) for r in h.last.records)
    assert not h.image.brokers[1].in_controlled_shutdown  # the log does not know
    # ... which is the pre-KIP-841 hole: a leader may add it back to an ISR.
    p = next(p for p in range(3) if h.partition("t", p).leader == 2)
    isr = list(h.partition("t", p).isr)
    assert h.alter_isr("t", p, isr + [1]).topics[0].partitions[0].error is Errors.NONE
    # KIP-841 closes it at metadata.version 7, 3.3-IV3 (see test_replication_control).


def test_session_expiry_fences_one_broker_at_a_time_oldest_first():
    h = ControllerHarness(session_timeout_ms=9000)
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 3, 3)
    c = h.controller
    h.advance(1000)
    h.heartbeat(2)
    h.advance(1000)
    h.heartbeat(3)
    assert c.next_fence_check_ms() == h.now_ms - 2000 + 9001
    h.advance(8000)  # broker 1: 10 s; broker 2: 9 s (not expired: > is required)
    assert c.maybe_fence_stale_broker(h.now_ms - 1001) is None
    result = c.maybe_fence_stale_broker(h.now_ms)
    assert result.response == 1
    h.commit(result.records)
    assert h.image.brokers[1].fenced and all(1 not in h.partition("t", p).isr for p in range(3))
    assert c.maybe_fence_stale_broker(h.now_ms) is None
    h.advance(2000)
    for expected in (2, 3):
        result = c.maybe_fence_stale_broker(h.now_ms)
        assert result.response == expected
        h.commit(result.records)
    assert c.maybe_fence_stale_broker(h.now_ms) is None
    assert c.next_fence_check_ms() is None  # nobody left to fence
    # The last ISR member keeps its place, leaderless.
    assert all(h.partition("t", p).leader == -1 for p in range(3))
    assert h.replayed() == h.image


def test_usable_brokers_are_the_registered_ones_this_leader_is_not_shutting_down():
    """Kafka's ``BrokerHeartbeatManager.usableBrokers``: fenced brokers count
    (with their flag), a broker in controlled shutdown does not; once it is
    let go (fenced) it counts again, as a fenced broker."""
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.register(4)  # fenced
    h.create_topic("t", assignments=((0, (1, 2)),))
    c = h.controller

    def usable():
        return [(u.broker_id, u.fenced) for u in c.heartbeats.usable_brokers(c.view)]

    assert usable() == [(1, False), (2, False), (3, False), (4, True)]
    h.heartbeat(1, want_shut_down=True)  # it leads t-0: it waits in controlled shutdown
    assert c.heartbeats.session(1, h.now_ms).shutting_down
    assert usable() == [(2, False), (3, False), (4, True)]
    for b in (2, 3):
        h.heartbeat(b)
    assert h.heartbeat(1, want_shut_down=True).should_shut_down
    assert h.image.brokers[1].in_controlled_shutdown and h.image.brokers[1].fenced
    assert usable() == [(1, True), (2, False), (3, False), (4, True)]


def test_brokers_in_controlled_shutdown_can_be_session_fenced():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic("t", assignments=((0, (1, 2)),))  # 1 leads: it waits in controlled shutdown
    h.heartbeat(1, want_shut_down=True)
    h.advance(9001)
    h.heartbeat(2)
    result = h.controller.maybe_fence_stale_broker(h.now_ms)
    assert result.response == 1
    h.commit(result.records)
    assert h.image.brokers[1].fenced


def test_a_new_leader_gives_every_broker_a_fresh_session_and_remembers_shutdowns():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 3, 3)
    h.heartbeat(1, want_shut_down=True)
    h.advance(20_000)  # long enough that every old session would have expired
    h.new_leader()
    assert h.controller.maybe_fence_stale_broker(h.now_ms) is None
    # Broker 1 is still shutting down under the new leader...
    assert not h.heartbeat(1, want_shut_down=True).should_shut_down
    h.heartbeat(2)
    h.heartbeat(3)
    # ... and may stop once the active brokers have caught up with the new leader.
    assert h.heartbeat(1, want_shut_down=True).should_shut_down
    assert h.replayed() == h.image


def test_soft_state_rules():
    m = BrokerHeartbeatManager(100)
    with pytest.raises(ValueError, match="session timeout must be positive"):
        BrokerHeartbeatManager(0)
    m.register(1, 0)
    m.start_controlled_shutdown(1, 50, 0)
    m.start_controlled_shutdown(1, 70, 0)  # set once
    assert m.sessions[1].controlled_shutdown_offset == 50
    m.fence(1)
    assert not m.sessions[1].shutting_down
    m.touch(1, 10, 33)
    assert (m.sessions[1].last_contact_ms, m.sessions[1].metadata_offset) == (10, 33)


def test_a_heartbeat_that_queued_too_long_only_proves_the_broker_is_alive():
    h = ControllerHarness()
    h.start_brokers(1)
    h.advance(5000)
    request = BrokerHeartbeatRequest(1, h.epochs[1], 0, want_fence=True)
    result = h.controller.expire_heartbeat(request, h.now_ms)
    assert result.records == ()
    assert result.response.error is Errors.REQUEST_TIMED_OUT
    assert h.controller.heartbeats.sessions[1].last_contact_ms == h.now_ms
    assert not h.image.brokers[1].fenced  # wantFence was not acted on
    stale = h.controller.expire_heartbeat(BrokerHeartbeatRequest(1, 99, 0), h.now_ms)
    assert stale.response.error is Errors.STALE_BROKER_EPOCH


def _walks_agree(h: ControllerHarness) -> None:
    """The ordered walk (the first unfenced session in contact order) finds
    what comparing every session finds, and so do the fencer and its timer."""
    from controller import heartbeats as hb

    manager, view = h.controller.heartbeats, h.controller.view
    answers = []
    for ordered in (True, False):
        hb.ORDERED_WALK = ordered
        try:
            answers.append(
                (
                    manager.oldest_unfenced(view),
                    manager.find_stale_broker(view, h.now_ms),
                    manager.next_check_ms(view),
                )
            )
        finally:
            hb.ORDERED_WALK = True
    assert answers[0] == answers[1]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            # Heartbeats and time passing most often: the order is made by them.
            st.sampled_from(["register", "register", "heartbeat", "heartbeat", "heartbeat",
                             "advance", "advance", "fence-me", "unregister", "expire",
                             "new-leader"]),
            st.integers(1, 4),
            st.sampled_from([0, 1, 500, 4_000, 9_001]),
        ),
        min_size=10,
        max_size=60,
    )
)  # fmt: skip
def test_the_ordered_walk_finds_the_oldest_unfenced_session_as_a_full_walk_does(actions):
    """``ORDERED_WALK``: sessions kept in contact order (a contact moves one to
    the end, as Kafka's unfenced list) against the plain walk of them all,
    through registrations, heartbeats, wanted fences, expiries, unregistrations
    and failovers, with ties (several contacts in one millisecond)."""
    h = ControllerHarness()
    for action, broker_id, ms in actions:
        if action == "register":
            h.register(broker_id, generation=ms % 2)
        elif action == "heartbeat" and broker_id in h.epochs:
            h.heartbeat(broker_id)
        elif action == "fence-me" and broker_id in h.epochs:
            h.heartbeat(broker_id, want_fence=True)
        elif action == "advance":
            h.advance(ms)
        elif action == "unregister":
            h.unregister(broker_id)
        elif action == "expire":
            result = h.controller.maybe_fence_stale_broker(h.now_ms)
            if result is not None:
                h.commit(result.records)
        elif action == "new-leader":
            h.new_leader()
        _walks_agree(h)


def test_a_heartbeat_moves_its_session_behind_the_others():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.advance(100)
    h.heartbeat(1)
    assert list(h.controller.heartbeats.sessions) == [2, 1]
    assert h.controller.heartbeats.oldest_unfenced(h.controller.view)[0] == 2
    _walks_agree(h)
