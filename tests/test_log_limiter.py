"""RateLimitedLog: a burst per period passes, the rest is counted and reported
with the next line that passes; the clock is an argument."""

from __future__ import annotations

import logging

import pytest

from quorum.log_limiter import RateLimitedLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_passes_then_lines_are_held_back_and_counted(caplog):
    clock = Clock()
    limited = RateLimitedLog(logging.getLogger("t.limit"), period_s=60, burst=3, clock=clock)
    with caplog.at_level(logging.WARNING, logger="t.limit"):
        passed = [limited.warning("junk %d", i) for i in range(100)]
    assert passed == [True] * 3 + [False] * 97
    assert [r.getMessage() for r in caplog.records] == ["junk 0", "junk 1", "junk 2"]
    assert limited.suppressed == 97


def test_the_next_period_reports_how_many_were_held_back(caplog):
    clock = Clock()
    limited = RateLimitedLog(logging.getLogger("t.limit2"), period_s=60, burst=1, clock=clock)
    with caplog.at_level(logging.WARNING, logger="t.limit2"):
        for _ in range(10):
            limited.warning("junk")
        clock.now += 59.9
        assert limited.warning("still inside the period") is False
        clock.now += 0.1
        assert limited.warning("next %s", "period") is True
    assert [r.getMessage() for r in caplog.records] == [
        "junk",
        "next period (and 10 more like it held back by the log's rate limit)",
    ]
    assert limited.suppressed == 0 and limited.suppressed_total == 10


@pytest.mark.parametrize(("period_s", "burst"), [(0, 5), (-1, 5), (60, 0)])
def test_a_limit_that_lets_nothing_through_is_refused(period_s, burst):
    with pytest.raises(ValueError, match="rate limit"):
        RateLimitedLog(logging.getLogger("t"), period_s=period_s, burst=burst)


def test_info_lines_share_the_limit_at_their_own_level(caplog):
    clock = Clock()
    limited = RateLimitedLog(logging.getLogger("t.info"), period_s=60, burst=2, clock=clock)
    with caplog.at_level(logging.INFO, logger="t.info"):
        passed = [limited.info("refused %d", i) for i in range(5)]
        passed.append(limited.warning("a warning"))
    assert passed == [True, True, False, False, False, False]
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "refused 0"),
        (logging.INFO, "refused 1"),
    ]
