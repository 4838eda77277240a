"""The heartbeat state machine (Kafka's ``BrokerControlState`` and
``BrokerHeartbeatManager.calculateNextBrokerState``), docs/kafka-rules.md 4.2.

Pure: the caller supplies what the heartbeat asks for and what the controller
knows; this says where the broker goes next.
"""

from __future__ import annotations

from enum import Enum


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
    """
    | current             | request / condition                         | next                |
    |---------------------|---------------------------------------------|---------------------|
    | FENCED              | wantShutDown                                | SHUTDOWN_NOW        |
    | FENCED              | !wantFence, caught up, registration not in  | UNFENCED            |
    |                     | controlled shutdown (only a new incarnation |                     |
    |                     | leaves it, KIP-841)                         |                     |
    | FENCED              | otherwise                                   | FENCED              |
    | UNFENCED            | wantFence and wantShutDown                  | SHUTDOWN_NOW        |
    | UNFENCED            | wantFence                                   | FENCED              |
    | UNFENCED            | wantShutDown, leads a partition             | CONTROLLED_SHUTDOWN |
    | UNFENCED            | wantShutDown, leads nothing                 | SHUTDOWN_NOW        |
    | UNFENCED            | neither                                     | UNFENCED            |
    | CONTROLLED_SHUTDOWN | leads a partition, or active brokers behind | CONTROLLED_SHUTDOWN |
    | CONTROLLED_SHUTDOWN | otherwise (flags ignored: no way to cancel) | SHUTDOWN_NOW        |
    """
    if current is S.FENCED:
        if want_shut_down:
            return S.SHUTDOWN_NOW
        if not want_fence and caught_up and not in_controlled_shutdown:
            # Kafka would unfence a broker told to shut down that keeps
            # heartbeating, and let it lead while still in controlled shutdown.
            return S.UNFENCED
        return S.FENCED
    if current is S.UNFENCED:
        if want_fence:
            return S.SHUTDOWN_NOW if want_shut_down else S.FENCED
        if want_shut_down:
            return S.CONTROLLED_SHUTDOWN if leads_any else S.SHUTDOWN_NOW
        return S.UNFENCED
    if current is S.CONTROLLED_SHUTDOWN:
        if leads_any or not shutdown_offset_replicated:
            return S.CONTROLLED_SHUTDOWN
        return S.SHUTDOWN_NOW
    return S.SHUTDOWN_NOW
