"""The heartbeat state machine table (docs/kafka-rules.md 4.2), row by row."""

import itertools

import pytest

from controller.broker_states import TRANSITIONS, current_state, next_state, render_table
from controller.broker_states import BrokerControlState as S

ROWS = [
    # current, want_fence, want_shut_down, caught_up, leads_any, replicated -> next
    (S.FENCED, False, True, False, False, False, S.SHUTDOWN_NOW),
    (S.FENCED, True, True, True, True, True, S.SHUTDOWN_NOW),
    (S.FENCED, False, False, True, False, False, S.UNFENCED),
    (S.FENCED, False, False, False, False, False, S.FENCED),
    (S.FENCED, True, False, True, False, False, S.FENCED),
    (S.UNFENCED, True, True, True, True, True, S.SHUTDOWN_NOW),
    (S.UNFENCED, True, False, True, True, True, S.FENCED),
    (S.UNFENCED, False, True, True, True, True, S.CONTROLLED_SHUTDOWN),
    (S.UNFENCED, False, True, True, False, True, S.SHUTDOWN_NOW),
    (S.UNFENCED, False, False, False, True, True, S.UNFENCED),
    (S.CONTROLLED_SHUTDOWN, False, False, True, True, True, S.CONTROLLED_SHUTDOWN),
    (S.CONTROLLED_SHUTDOWN, False, True, True, False, False, S.CONTROLLED_SHUTDOWN),
    (S.CONTROLLED_SHUTDOWN, False, False, True, False, True, S.SHUTDOWN_NOW),
    (S.CONTROLLED_SHUTDOWN, True, False, True, False, True, S.SHUTDOWN_NOW),
]


@pytest.mark.parametrize("current,fence,shut,caught,leads,replicated,expected", ROWS)
def test_each_row(current, fence, shut, caught, leads, replicated, expected):
    got = next_state(
        current,
        want_fence=fence,
        want_shut_down=shut,
        caught_up=caught,
        in_controlled_shutdown=False,
        leads_any=leads,
        shutdown_offset_replicated=replicated,
    )
    assert got is expected


def test_states_are_distinct_and_say_what_the_reply_says():
    assert len(set(S)) == 4
    assert [(s.fenced, s.should_shut_down) for s in S] == [
        (True, False),
        (False, False),
        (False, False),
        (True, True),
    ]


def test_current_state():
    assert current_state(fenced=True, shutting_down=False) is S.FENCED
    assert current_state(fenced=False, shutting_down=False) is S.UNFENCED
    assert current_state(fenced=False, shutting_down=True) is S.CONTROLLED_SHUTDOWN


def test_controlled_shutdown_cannot_be_cancelled_and_shutdown_now_is_final():
    for flags in itertools.product([False, True], repeat=5):
        fence, shut, caught, leads, replicated = flags
        kw = dict(
            want_fence=fence,
            want_shut_down=shut,
            caught_up=caught,
            in_controlled_shutdown=False,
            leads_any=leads,
            shutdown_offset_replicated=replicated,
        )
        assert next_state(S.CONTROLLED_SHUTDOWN, **kw) in (S.CONTROLLED_SHUTDOWN, S.SHUTDOWN_NOW)
        assert next_state(S.SHUTDOWN_NOW, **kw) is S.SHUTDOWN_NOW


def test_a_fenced_broker_still_in_controlled_shutdown_stays_fenced():
    kw = dict(want_fence=False, want_shut_down=False, caught_up=True, leads_any=False)
    kw["shutdown_offset_replicated"] = True
    assert next_state(S.FENCED, in_controlled_shutdown=True, **kw) is S.FENCED
    assert next_state(S.FENCED, in_controlled_shutdown=False, **kw) is S.UNFENCED


def test_the_docstring_shows_the_table_the_code_reads():
    """next_state's docstring is TRANSITIONS rendered, never written again by hand."""
    shown = "\n".join(line.strip() for line in next_state.__doc__.splitlines() if "|" in line)
    assert shown == render_table()


def test_every_row_of_the_table_is_exercised_by_the_rows_above():
    """The test's rows and the table are one: each transition fires for at
    least one row (SHUTDOWN_NOW, final, by the cancel test below)."""
    fired = set()
    for current, fence, shut, caught, leads, replicated, expected in ROWS:
        facts = (fence, shut, caught, False, leads, replicated)
        row = next(t for t in TRANSITIONS if t.current is current and t.when(*facts))
        assert row.next is expected
        fired.add(row)
    assert set(TRANSITIONS) - fired == {t for t in TRANSITIONS if t.current is S.SHUTDOWN_NOW}


def test_every_state_has_a_last_row_that_always_holds():
    for state in S:
        rows = [t for t in TRANSITIONS if t.current is state]
        assert rows and all(
            rows[-1].when(*facts) for facts in itertools.product([False, True], repeat=6)
        )
