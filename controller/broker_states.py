"""The heartbeat state machine (Kafka's ``BrokerControlState`` and
``BrokerHeartbeatManager.calculateNextBrokerState``), docs/kafka-rules.md 4.2.

Pure: the caller supplies what the heartbeat asks for and what the controller
knows; this says where the broker goes next.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import NamedTuple


class BrokerControlState(Enum):
    # The values are distinct on purpose: equal values would make aliases.
    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled shutdown"
    SHUTDOWN_NOW = "shutdown now"

    @property
    def fenced(self) -> bool:
        """What the heartbeat reply says in ``isFenced``."""
        return self is BrokerControlState.FENCED or self is BrokerControlState.SHUTDOWN_NOW

    @property
    def should_shut_down(self) -> bool:
        return self is BrokerControlState.SHUTDOWN_NOW


S = BrokerControlState


def current_state(fenced: bool, shutting_down: bool) -> BrokerControlState:
    """SHUTDOWN_NOW is never current: reaching it fences the broker."""
    if shutting_down:
        return S.CONTROLLED_SHUTDOWN
    return S.FENCED if fenced else S.UNFENCED


class Transition(NamedTuple):
    """One row of the table: from ``current``, when ``when`` holds (its
    words in ``condition``), the broker goes to ``next``."""

    current: BrokerControlState
    condition: str
    when: Callable[[bool, bool, bool, bool, bool, bool], bool]
    next: BrokerControlState


def _always(*_facts: bool) -> bool:
    return True


# The heartbeat's transitions, the first row of the current state whose
# condition holds deciding (h11's EVENT_TRIGGERED_TRANSITIONS: the code reads
# this table; ``next_state``'s docstring and tests/controller/test_broker_states.py
# are checked against it). A condition reads, in this order: want_fence,
# want_shut_down, caught_up, in_controlled_shutdown (the registration's flag),
# leads_any, shutdown_offset_replicated.
TRANSITIONS: tuple[Transition, ...] = (
    Transition(S.FENCED, "wantShutDown", lambda f, sd, cu, ics, la, rep: sd, S.SHUTDOWN_NOW),
    # Only a new incarnation leaves controlled shutdown (KIP-841): Kafka would
    # unfence a broker told to shut down that keeps heartbeating, and let it
    # lead while still in controlled shutdown.
    Transition(
        S.FENCED,
        "!wantFence, caught up, not in controlled shutdown",
        lambda f, sd, cu, ics, la, rep: not f and cu and not ics,
        S.UNFENCED,
    ),
    Transition(S.FENCED, "otherwise", _always, S.FENCED),
    # The steady heartbeat first: one condition per heartbeat in the common case.
    Transition(
        S.UNFENCED, "neither wantFence nor wantShutDown", lambda f, sd, cu, ics, la, rep: not (f or sd),
        S.UNFENCED,
    ),
    Transition(
        S.UNFENCED, "wantFence and wantShutDown", lambda f, sd, cu, ics, la, rep: f and sd,
        S.SHUTDOWN_NOW,
    ),
    Transition(S.UNFENCED, "wantFence", lambda f, sd, cu, ics, la, rep: f, S.FENCED),
    Transition(
        S.UNFENCED, "wantShutDown, leads a partition", lambda f, sd, cu, ics, la, rep: sd and la,
        S.CONTROLLED_SHUTDOWN,
    ),
    Transition(S.UNFENCED, "wantShutDown, leads nothing", _always, S.SHUTDOWN_NOW),
    Transition(
        S.CONTROLLED_SHUTDOWN,
        "leads a partition, or active brokers behind",
        lambda f, sd, cu, ics, la, rep: la or not rep,
        S.CONTROLLED_SHUTDOWN,
    ),
    Transition(
        S.CONTROLLED_SHUTDOWN, "otherwise (no way to cancel)", _always,
        S.SHUTDOWN_NOW,
    ),
    Transition(S.SHUTDOWN_NOW, "always (final)", _always, S.SHUTDOWN_NOW),
)  # fmt: skip

# The table's rows by current state, as (condition, next) pairs: what
# ``next_state`` walks per heartbeat (a few calls, no allocation).
_ROWS: dict[BrokerControlState, tuple[tuple[Callable[..., bool], BrokerControlState], ...]] = {
    state: tuple((t.when, t.next) for t in TRANSITIONS if t.current is state) for state in S
}


def render_table() -> str:
    """TRANSITIONS as the Markdown table ``next_state``'s docstring shows."""
    rows = [("current", "request / condition", "next")]
    rows += [(t.current.name, t.condition, t.next.name) for t in TRANSITIONS]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def next_state(
    current: BrokerControlState,
    *,
    want_fence: bool,
    want_shut_down: bool,
    caught_up: bool,
    in_controlled_shutdown: bool,
    leads_any: bool,
    shutdown_offset_replicated: bool,
) -> BrokerControlState:
    """Where a heartbeat takes its broker: the first row of TRANSITIONS for
    ``current`` whose condition holds (tests/controller/test_broker_states.py
    checks this table against TRANSITIONS):

    | current             | request / condition                               | next                |
    |---------------------|---------------------------------------------------|---------------------|
    | FENCED              | wantShutDown                                      | SHUTDOWN_NOW        |
    | FENCED              | !wantFence, caught up, not in controlled shutdown | UNFENCED            |
    | FENCED              | otherwise                                         | FENCED              |
    | UNFENCED            | neither wantFence nor wantShutDown                | UNFENCED            |
    | UNFENCED            | wantFence and wantShutDown                        | SHUTDOWN_NOW        |
    | UNFENCED            | wantFence                                         | FENCED              |
    | UNFENCED            | wantShutDown, leads a partition                   | CONTROLLED_SHUTDOWN |
    | UNFENCED            | wantShutDown, leads nothing                       | SHUTDOWN_NOW        |
    | CONTROLLED_SHUTDOWN | leads a partition, or active brokers behind       | CONTROLLED_SHUTDOWN |
    | CONTROLLED_SHUTDOWN | otherwise (no way to cancel)                      | SHUTDOWN_NOW        |
    | SHUTDOWN_NOW        | always (final)                                    | SHUTDOWN_NOW        |
    """
    for when, nxt in _ROWS[current]:
        if when(
            want_fence, want_shut_down, caught_up, in_controlled_shutdown, leads_any,
            shutdown_offset_replicated,
        ):  # fmt: skip
            return nxt
    raise AssertionError(f"no transition from {current}")  # every state ends with _always
