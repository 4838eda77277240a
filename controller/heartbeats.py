"""Heartbeat soft state (Kafka's ``BrokerHeartbeatManager``): what only the
active controller knows and a new leader rebuilds.

Fenced and in-controlled-shutdown are facts in the image; what lives here is
when each broker was last heard from, the metadata offset it reported, and the
offset its controlled shutdown must see replicated. Time comes in as ``now_ms``,
read from a monotonic clock (as Kafka's heartbeat manager reads one): sessions
are durations, and a stepped wall clock must not end or stretch them.

Two uses of a session, two rules (decisions.md 53):

* fencing by session timeout: a new leader gives every registered broker a
  whole session from the moment it takes over (Kafka does the same), so a
  failover never fences a live broker that has not reached it yet;
* refusing a new incarnation as a duplicate (``has_valid_session``): only a
  session this leader has actually heard from counts. A leader that has not
  heard from the old incarnation cannot say it is alive, and Kafka's grace
  would refuse the new incarnation for a whole timeout after every failover,
  and after a restart of the whole cluster, however long ago the old
  incarnation stopped.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from metadata_records.delta import ImageDelta

from .placement import UsableBroker

NO_OFFSET = -1
MAX_OFFSET = 2**63 - 1
# The switch of the ordered walk (``oldest_unfenced``): False compares every
# session, as tests/controller/test_heartbeats.py does to check they agree.
# Listed with every other speed switch in metaquorum/speed_switches.py.
ORDERED_WALK = True


@dataclass(slots=True)
class BrokerSession:
    last_contact_ms: int
    metadata_offset: int = NO_OFFSET
    # Offset of the last record of the batch that put the broker in controlled
    # shutdown; -1 when it is not shutting down.
    controlled_shutdown_offset: int = NO_OFFSET
    # True once this leader has heard from the broker (a heartbeat with its
    # epoch, a registration); a session a new leader granted on trust is False.
    heard: bool = False

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0


class SessionFacts(msgspec.Struct, frozen=True, gc=False):
    """What the active controller knows of one broker's session, for
    ``explain`` (it crosses to an HTTP worker: durations, not monotonic times)."""

    since_contact_ms: int  # since the last heartbeat (or registration) this leader had
    session_timeout_ms: int
    heard: bool  # False: a session this leader granted on trust at its election
    metadata_offset: int  # the offset its last heartbeat reported (-1: none yet)
    controlled_shutdown_offset: int  # what its shutdown waits for (-1: not shutting down)


class BrokerHeartbeatManager:
    def __init__(self, session_timeout_ms: int) -> None:
        if session_timeout_ms <= 0:
            raise ValueError(f"session timeout must be positive, got {session_timeout_ms} ms")
        self.session_timeout_ms = session_timeout_ms
        # In the order of last contact (a contact moves its session to the
        # end), as Kafka's list of unfenced brokers: the first unfenced one is
        # the oldest, found without walking every broker. The clock is
        # monotonic; should a contact ever come earlier than the last, the
        # order is no longer trusted and the walks compare every session
        # until the next reset (``_ordered``).
        self.sessions: dict[int, BrokerSession] = {}
        self._latest_ms = 0
        self._ordered = True

    def reset(self, view: ImageDelta, now_ms: int) -> None:
        """A new leader's sessions: everyone registered was just heard from.

        A broker the log shows in controlled shutdown keeps shutting down; its
        wait offset becomes the last offset the new leader has, which every
        active broker must reach before it may stop (Kafka loses this on
        failover and relies on the broker asking again)."""
        self.sessions = {}
        self._latest_ms, self._ordered = now_ms, True
        for reg in view.brokers():
            session = BrokerSession(now_ms)
            if reg.in_controlled_shutdown and not reg.fenced:
                session.controlled_shutdown_offset = max(view.next_offset - 1, 0)
            self.sessions[reg.broker_id] = session

    def session(self, broker_id: int, now_ms: int) -> BrokerSession:
        session = self.sessions.get(broker_id)
        if session is None:  # registered in a batch this leader did not decide
            session = BrokerSession(now_ms)
            self._contact(broker_id, session, now_ms)
        return session

    def _contact(self, broker_id: int, session: BrokerSession, now_ms: int) -> None:
        """``session`` heard from at ``now_ms``: last in the contact order."""
        session.last_contact_ms = now_ms
        self.sessions.pop(broker_id, None)
        self.sessions[broker_id] = session
        if now_ms < self._latest_ms:
            self._ordered = False
        else:
            self._latest_ms = now_ms

    def facts(self, broker_id: int, now_ms: int) -> SessionFacts | None:
        """The session of ``broker_id`` as ``explain`` shows it; None: none."""
        s = self.sessions.get(broker_id)
        if s is None:
            return None
        return SessionFacts(
            now_ms - s.last_contact_ms,
            self.session_timeout_ms,
            s.heard,
            s.metadata_offset,
            s.controlled_shutdown_offset,
        )

    def register(self, broker_id: int, now_ms: int) -> None:
        """A new incarnation: a fresh session, not shutting down."""
        self._contact(broker_id, BrokerSession(now_ms, heard=True), now_ms)

    def _heard(self, broker_id: int, now_ms: int) -> BrokerSession:
        """The broker's session (built once if this leader has none), heard from now."""
        session = self.sessions.get(broker_id) or BrokerSession(now_ms)
        self._contact(broker_id, session, now_ms)
        session.heard = True
        return session

    def amend(self, broker_id: int, now_ms: int) -> None:
        """The same incarnation registered again: that is contact too (Kafka's
        ``registerBroker`` touches the session), the rest of the session stays."""
        self._heard(broker_id, now_ms)

    def touch(self, broker_id: int, now_ms: int, metadata_offset: int) -> None:
        """Contact from the broker's current epoch (the caller checked it)."""
        self._heard(broker_id, now_ms).metadata_offset = metadata_offset

    def remove(self, broker_id: int) -> None:
        """The broker was unregistered: no session, no fencing to do."""
        self.sessions.pop(broker_id, None)

    def fence(self, broker_id: int) -> None:
        session = self.sessions.get(broker_id)
        if session is not None:
            session.controlled_shutdown_offset = NO_OFFSET

    def start_controlled_shutdown(self, broker_id: int, offset: int, now_ms: int) -> None:
        """Kafka's ``maybeUpdateControlledShutdownOffset``: set once."""
        session = self.session(broker_id, now_ms)
        if session.controlled_shutdown_offset < 0:
            session.controlled_shutdown_offset = offset

    def has_valid_session(self, view: ImageDelta, broker_id: int, now_ms: int) -> bool:
        """Unfenced and heard from, by this leader, within the session timeout.

        A fenced broker never has one, so a new incarnation can always replace
        it; nor has a broker this leader has not heard from, whatever the log
        says about it (in controlled shutdown or not): the session a new leader
        grants on trust only keeps it from fencing live brokers."""
        reg = view.broker(broker_id)
        session = self.sessions.get(broker_id)
        if reg is None or reg.fenced or session is None or not session.heard:
            return False
        return session.last_contact_ms + self.session_timeout_ms >= now_ms

    def usable_brokers(self, view: ImageDelta) -> list[UsableBroker]:
        """Where new replicas may go (Kafka's ``usableBrokers``): every
        registered broker, fenced or not, except those whose controlled
        shutdown this leader is carrying out.

        The registration's in-controlled-shutdown flag is the ISR's rule
        (``ImageDelta.is_active``), not this one: a broker that finished its
        controlled shutdown is fenced with the flag still set, and may follow
        (as in Kafka), and one whose flag came from a batch this leader did not
        decide is placed as its session says (Kafka's
        testCreateTopicsISRInvariants)."""
        usable = []
        for reg in view.brokers():
            session = self.sessions.get(reg.broker_id)
            if session is None or not session.shutting_down:
                usable.append(UsableBroker(reg.broker_id, reg.rack, reg.fenced))
        return usable

    def lowest_active_offset(self, view: ImageDelta) -> int:
        """The least metadata offset reported by an unfenced broker that is not
        shutting down; brokers in controlled shutdown wait for it."""
        lowest = MAX_OFFSET
        for broker_id, session in self.sessions.items():
            if session.shutting_down:
                continue
            reg = view.broker(broker_id)
            if reg is None or reg.fenced or reg.in_controlled_shutdown:
                continue
            lowest = min(lowest, session.metadata_offset)
        return lowest

    def _unfenced(self, view: ImageDelta):
        for broker_id, session in self.sessions.items():
            reg = view.broker(broker_id)
            if reg is not None and not reg.fenced:
                yield broker_id, session

    def oldest_unfenced(self, view: ImageDelta) -> tuple[int, BrokerSession] | None:
        """The unfenced broker heard from longest ago (the first of them in
        the contact order), and its session."""
        if ORDERED_WALK and self._ordered:
            return next(self._unfenced(view), None)
        oldest = None  # the plain walk, which the ordered one must agree with
        for broker_id, session in self._unfenced(view):
            if oldest is None or session.last_contact_ms < oldest[1].last_contact_ms:
                oldest = (broker_id, session)
        return oldest

    def find_stale_broker(self, view: ImageDelta, now_ms: int) -> int | None:
        """The unfenced broker heard from longest ago, if its session expired."""
        oldest = self.oldest_unfenced(view)
        if oldest is not None and oldest[1].last_contact_ms + self.session_timeout_ms < now_ms:
            return oldest[0]
        return None

    def next_check_ms(self, view: ImageDelta) -> int | None:
        """When the oldest unfenced session expires; None if nobody is unfenced."""
        oldest = self.oldest_unfenced(view)
        if oldest is None:
            return None
        return oldest[1].last_contact_ms + self.session_timeout_ms + 1
