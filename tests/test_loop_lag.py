"""brokers/loop_lag.py: the simulator's own lag and whose fault a fencing is,
on an injected clock (no sleeping)."""

from __future__ import annotations

import asyncio

import pytest

from brokers.loop_lag import CLUSTER, SIMULATOR, HeartbeatClock, LagMonitor, warn_at_s


def test_the_warning_threshold_is_half_of_what_one_late_beat_needs():
    assert warn_at_s(9.0, 2.0) == 3.5  # Kafka's defaults
    assert warn_at_s(1.0, 2.0) == 0.0


def test_a_small_lag_says_nothing_and_a_large_one_blames_the_simulator():
    now = [100.0]
    lag = LagMonitor(9.0, 2.0, clock=lambda: now[0])
    lag.observe_loop(0.02)
    lag.observe_heartbeat(3.4)
    assert lag.warning() is None and lag.worst_s == 3.4
    lag.observe_loop(3.2)
    lag.observe_heartbeat(3.6)
    warning = lag.warning()
    assert warning is not None
    assert "fell 3.6 s behind" in warning and "--processes" in warning
    assert "fencings may be the simulator's" in warning
    assert lag.recent_max_s() == 3.6
    now[0] += 60  # the dashboard's "now" forgets; the run's worst does not
    assert lag.recent_max_s() == 0.0 and lag.warning() is not None
    assert lag.loop.total == 2 and lag.heartbeats.total == 2


def test_the_monitor_measures_how_late_the_loop_woke():
    """The clock jumps 4 s across one sleep, as a loop busy for 4 s would."""
    ticks = iter([10.0, 14.0, 14.0, 14.0])
    lag = LagMonitor(9.0, 2.0, period_s=0.0, clock=lambda: next(ticks, 14.0))

    async def go():
        task = asyncio.create_task(lag.run())
        while lag.loop.total < 1:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert lag.worst_s == pytest.approx(4.0)
    assert lag.warning() is not None


@pytest.mark.parametrize(
    "last_ok, late, sent_at, blame",
    [
        (0.0, 0.0, 11.0, CLUSTER),  # sent on time (the cluster answered slowly)
        (0.0, 8.5, 10.5, SIMULATOR),  # 8.5 s late: on time it would have been 2 s
        (0.0, 8.0, 4.0, CLUSTER),  # within the session: the cluster's doing
        (0.0, 1.0, 12.0, CLUSTER),  # 11 s even had it been on time
        (None, 9.0, 20.0, CLUSTER),  # never answered unfenced: nothing to judge by
    ],
)
def test_whose_fault_a_fencing_is(last_ok, late, sent_at, blame):
    beats = HeartbeatClock(session_timeout_s=9.0)
    if last_ok is not None:
        beats.answered_unfenced(last_ok)
    beats.sent(late / 2)
    beats.sent(late / 2)
    assert beats.blame(sent_at) == blame


def test_an_unfenced_answer_forgives_earlier_lateness():
    beats = HeartbeatClock(session_timeout_s=9.0)
    beats.answered_unfenced(0.0)
    beats.sent(8.0)
    beats.answered_unfenced(9.0)  # the late beat got through in time
    beats.sent(0.0)
    assert beats.blame(19.0) == CLUSTER
    beats.reset()
    assert beats.last_ok_sent is None and beats.late_since_ok == 0.0
