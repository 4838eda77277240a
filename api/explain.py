"""Why a broker or a partition is as it is (``GET /v1/explain/...``,
``metaquorum explain``): the answer worked out from what the shell hands in,
the image, the log's entries about it (with who wrote each batch), the
active controller's refusals and session facts, and the wall clock.

Pure: no I/O and no clock of its own; ``scan_back`` reads the log only
through the ``read`` it is given (the retained log, reaching into the
history store, as GET /v1/log reads it). It lives in api/ rather than
controller/ because it reads the log's entries (quorum's ``LogEntry``, with
their ``Who``), which the controller's layer may not import.

What keeps it bounded: the look-back reads at most ``MAX_SCANNED`` records
back from the image's offset and keeps the newest ``HISTORY_LIMIT`` matches;
the answer's ``lookBack`` says where it stopped and why, so "not found" is
never silent. The broker's registration is read at its offset (the image
keeps it) when the look-back did not reach it. A replica is ineligible by
the rules of controller/rules.py (KIP-841's: fenced, in controlled
shutdown, not registered), the ids AlterPartition refuses with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

from controller.heartbeats import SessionFacts
from controller.refusals import Refusal
from metadata_records.codec import decode_batch, who_obj
from metadata_records.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from metadata_records.records import (
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    NO_LEADER,
    NO_LEADER_CHANGE,
    UNFENCE,
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    Who,
)
from quorum.callers import CONTROLLER
from quorum.callers import FENCE as FENCE_WORK
from quorum.record_log import LogEntry, OffsetTooOld, batch_entries

from .models.refusals import refusal_obj

HISTORY_LIMIT = 20  # events (broker) or changes (partition) shown, newest first
MAX_SCANNED = 50_000  # records the look-back reads at most, back from the image's offset
LEADS_LISTED = 100  # partitions a broker in controlled shutdown still leads, listed
_CHUNK = 2_000
# The switch of the look-back's fast path: decode only the retained batches
# whose bytes name the target. False decodes every batch, as
# tests/test_explain.py does to check both find the same entries.
PAYLOAD_FILTER = True

UNFENCED, FENCED, SHUTTING_DOWN, UNREGISTERED = (
    "unfenced",
    "fenced",
    "controlledShutdown",
    "unregistered",
)
# Why a replica may not join the ISR nor lead, by controller/rules.py's ids.
RULE_FENCED = "kip-841.replica-fenced"
RULE_SHUTTING_DOWN = "kip-841.replica-in-controlled-shutdown"
RULE_NOT_REGISTERED = "kip-841.replica-not-registered"
STATUSES = (
    "online",
    "underReplicated",
    "underMinIsr",
    "offline",
    "reassigning",
    "leaderNotPreferred",
)


class NotFound(LookupError):
    """Nothing to explain: the message says what is unknown (404)."""


class LookBack(NamedTuple):
    """How far back the log was read: [from_offset, to_offset)."""

    from_offset: int
    to_offset: int
    scanned: int
    ended: str  # "enough" (found HISTORY_LIMIT), "budget" (MAX_SCANNED read), "oldest" (none older kept)

    def obj(self) -> dict[str, Any]:
        why = {
            "enough": f"found the newest {HISTORY_LIMIT}",
            "budget": f"read its budget of {MAX_SCANNED:,} records",
            "oldest": "reached the oldest record this voter keeps",
        }[self.ended]
        return {
            "fromOffset": self.from_offset,
            "toOffset": self.to_offset,
            "scanned": self.scanned,
            "ended": self.ended,
            "why": f"looked back from offset {self.to_offset - 1} to {self.from_offset}: {why}",
        }


def scan_back(
    read: Callable[..., list[LogEntry]],
    below: int,
    wanted: Wanted,
    limit: int = HISTORY_LIMIT,
    max_scanned: int = MAX_SCANNED,
    stored: Callable[[int, int], list[tuple[int, int, bytes]]] | None = None,
) -> tuple[list[LogEntry], LookBack]:
    """The newest ``limit`` entries before ``below`` whose record is ``wanted``,
    newest first, reading at most ``max_scanned`` records back; ``read`` is
    RecordLog.read's shape (``log_reader``).

    ``stored`` (RecordLog.stored_from): the retained log's encoded batches,
    of which only those whose bytes hold one of ``wanted.needles`` are decoded
    (PAYLOAD_FILTER; a batch's JSON is written without spaces, so a record
    that names the target holds its needle); what is older, in the history
    store, is read and decoded through ``read``."""
    found: list[LogEntry] = []
    end = below
    floor = max(0, below - max_scanned)
    oldest = floor == 0  # reaching the floor is reaching the log's start
    if stored is not None and PAYLOAD_FILTER:
        try:
            batches = stored(floor, below)
        except OffsetTooOld as e:
            batches = stored(e.oldest, below) if e.oldest < below else []
        needles = wanted.needles
        for first, count, payload in reversed(batches):
            if any(n in payload for n in needles):
                for entry in reversed(batch_entries(decode_batch(payload), first, 0, count)):
                    if wanted(entry.record):
                        found.append(entry)
                        if len(found) >= limit:
                            return found, LookBack(
                                entry.offset, below, below - entry.offset, "enough"
                            )
            end = first
    while end > floor:
        start = max(floor, end - _CHUNK)
        try:
            chunk = read(start, end - start, False)
        except OffsetTooOld as e:
            oldest = True
            if e.oldest >= end:
                break
            floor = start = e.oldest
            chunk = read(start, end - start, False)
        if not chunk:
            oldest = True
            break
        for entry in reversed(chunk):
            if entry.offset < end and wanted(entry.record):
                found.append(entry)
                if len(found) >= limit:
                    return found, LookBack(entry.offset, below, below - entry.offset, "enough")
        end = start
    return found, LookBack(end, below, below - end, "oldest" if oldest else "budget")


class Wanted(Protocol):
    """Which records a look-back keeps (``__call__``), and byte strings one
    of which the encoded batch of any such record holds (``needles``)."""

    needles: tuple[bytes, ...]

    def __call__(self, record: object) -> bool: ...


class BrokerRecords:
    """A broker's registrations, changes and unregistration."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        # One needle (a byte search costs its bytes): it also finds ids it is a
        # prefix of (7 in 70-79, ...), decoded and then left out.
        self.needles = (f'"brokerId":{broker_id}'.encode(),)

    def __call__(self, record: object) -> bool:
        kind = type(record)
        return (
            kind is BrokerRegistrationChangeRecord
            or kind is RegisterBrokerRecord
            or kind is UnregisterBrokerRecord
        ) and record.broker_id == self.broker_id


class PartitionRecords:
    """A partition's record and its changes."""

    def __init__(self, topic_id: str, partition: int) -> None:
        self.topic_id, self.partition = topic_id, partition
        # The codec writes partitionId, then topicId (the records' field order).
        self.needles = (f'"partitionId":{partition},"topicId":"{topic_id}"'.encode(),)

    def __call__(self, record: object) -> bool:
        kind = type(record)
        return (
            (kind is PartitionChangeRecord or kind is PartitionRecord)
            and record.partition_id == self.partition
            and record.topic_id == self.topic_id
        )


def _who(who: Who | None) -> dict[str, Any] | None:
    return None if who is None else who_obj(who, with_records=False)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def broker_state(reg: BrokerRegistration | None) -> str:
    if reg is None:
        return UNREGISTERED
    if reg.fenced:
        return FENCED
    return SHUTTING_DOWN if reg.in_controlled_shutdown else UNFENCED


# ---------------------------------------------------------------- brokers


def _fence_cause(who: Who | None, shutting_down: bool, timeout_ms: int | None) -> str:
    if who is None:
        return "fenced (the batch does not say who: written before who was recorded)"
    if who.principal == CONTROLLER and who.api == FENCE_WORK[3]:
        within = f"{timeout_ms} ms" if timeout_ms is not None else "its session timeout"
        return f"session expired: no heartbeat within {within}, the controller fenced it"
    if who.api == "BrokerHeartbeat":
        if shutting_down:
            return "its controlled shutdown finished (it led nothing and was caught up)"
        return "its own heartbeat asked to be fenced (wantFence)"
    if who.api == "RegisterBroker":
        return "a new incarnation registered after an unclean shutdown"
    return f"{who.principal} fenced it ({who.api})"


def _event(entry: LogEntry, name: str, cause: str) -> dict[str, Any]:
    who = entry.who
    return {
        "offset": entry.offset,
        "timeMs": entry.timestamp_ms,
        "event": name,
        "cause": cause,
        "rule": who.rule if who is not None and who.rule else None,
        "who": _who(who),
    }


def _events(
    entries_newest_first: Sequence[LogEntry], timeout_ms: int | None
) -> list[dict[str, Any]]:
    """The broker's events, newest first; walked oldest first so a fence knows
    whether a controlled shutdown came before it."""
    out: list[dict[str, Any]] = []
    shutting_down = False
    for entry in reversed(entries_newest_first):
        r, who = entry.record, entry.who
        kind = type(r)
        if kind is RegisterBrokerRecord:
            shutting_down = r.in_controlled_shutdown
            cause = f"registered (broker epoch {r.broker_epoch}, incarnation {r.incarnation_id})"
            if r.fenced:
                cause += "; fenced until a heartbeat reports its metadata caught up to this offset"
            out.append(_event(entry, "registered", cause))
        elif kind is UnregisterBrokerRecord:
            by = who.principal if who is not None else "someone (no who recorded)"
            out.append(_event(entry, UNREGISTERED, f"unregistered by {by}"))
        else:
            if r.in_controlled_shutdown == IN_CONTROLLED_SHUTDOWN:
                shutting_down = True
                cause = "its heartbeat asked to shut down (wantShutDown): leaderships move away"
                out.append(_event(entry, SHUTTING_DOWN, cause))
            if r.fenced == FENCE:
                cause = _fence_cause(who, shutting_down, timeout_ms)
                out.append(_event(entry, FENCED, cause))
            elif r.fenced == UNFENCE:
                cause = "its heartbeat reported its metadata caught up: it may lead and join ISRs"
                out.append(_event(entry, UNFENCED, cause))
    out.reverse()
    return out


def _leads(image: MetadataImage, broker_id: int) -> list[tuple[str, int]]:
    led = []
    for topic in image.topics.values():
        for pid, part in topic.partitions.items():
            if part.leader == broker_id:
                led.append((topic.name, pid))
    led.sort()
    return led


def _session_obj(s: SessionFacts, now_ms: int) -> dict[str, Any]:
    return {
        "lastHeartbeatMs": now_ms - s.since_contact_ms,
        "sinceLastHeartbeatMs": s.since_contact_ms,
        "sessionTimeoutMs": s.session_timeout_ms,
        "expiresInMs": s.session_timeout_ms - s.since_contact_ms,
        "heardByThisController": s.heard,
        "metadataOffset": None if s.metadata_offset < 0 else s.metadata_offset,
        "controlledShutdownOffset": (
            None if s.controlled_shutdown_offset < 0 else s.controlled_shutdown_offset
        ),
    }


class ControllerFacts(NamedTuple):
    """What the active controller told the shell, or why it could not."""

    refusals: Sequence[Refusal] | None  # None: not asked of the active controller
    session: SessionFacts | None
    source: str  # where the refusals and the session came from, for people


def explain_broker(
    image: MetadataImage,
    broker_id: int,
    entries: Sequence[LogEntry],
    look_back: LookBack,
    registration_entry: LogEntry | None,
    facts: ControllerFacts,
    now_ms: int,
) -> dict[str, Any]:
    """The answer of GET /v1/explain/brokers/{id}. ``entries``: the broker's
    records in the look-back, newest first; ``registration_entry``: its
    current registration's record when read apart. NotFound when neither the
    image nor the look-back knows the broker."""
    reg = image.brokers.get(broker_id)
    if reg is None and not entries:
        raise NotFound(
            f"broker {broker_id} is not registered, and the last {look_back.scanned:,} records "
            "do not name it: check the id (GET /v1/brokers lists the registered ones)"
        )
    session = facts.session
    timeout_ms = session.session_timeout_ms if session is not None else None
    events = _events(entries, timeout_ms)
    state = broker_state(reg)

    registration = None
    if reg is not None:
        found = next(
            (
                e
                for e in entries
                if type(e.record) is RegisterBrokerRecord and e.offset == reg.registration_offset
            ),
            registration_entry,
        )
        registration = {
            "offset": reg.registration_offset,
            "timeMs": None if found is None else found.timestamp_ms,
            "brokerEpoch": reg.epoch,
            "incarnationId": reg.incarnation_id,
            "rack": reg.rack,
            "who": None if found is None else _who(found.who),
        }

    shutdown = None
    if reg is not None and reg.in_controlled_shutdown:
        since = next((e for e in events if e["event"] == SHUTTING_DOWN), None)
        led = _leads(image, broker_id)
        if reg.fenced:
            why = "its controlled shutdown finished: it is fenced and leads nothing"
        elif led:
            why = (
                f"it still leads {len(led)} partition(s); the controller moves them to other "
                "ISR members, and the broker may stop once it leads none and the active "
                "brokers have caught up (Kafka's BrokerHeartbeatManager)"
            )
        else:
            why = (
                "it leads nothing; it may stop once every active broker has replicated the "
                "metadata up to the offset of its shutdown (its heartbeat's answer says so)"
            )
        shutdown = {
            "since": None if since is None else {k: since[k] for k in ("offset", "timeMs")},
            "leaderOf": [{"topic": t, "partition": p} for t, p in led[:LEADS_LISTED]],
            "leaderOfCount": len(led),
            "why": why,
        }

    return {
        "brokerId": broker_id,
        "state": state,
        "summary": _broker_summary(broker_id, state, reg, events, look_back, session, now_ms),
        "registration": registration,
        "events": events,
        "lookBack": look_back.obj(),
        "session": None if session is None else _session_obj(session, now_ms),
        "controlledShutdown": shutdown,
        "refusals": None if facts.refusals is None else [refusal_obj(r) for r in facts.refusals],
        "refusalsFrom": facts.source,
    }


def _broker_summary(
    broker_id: int,
    state: str,
    reg: BrokerRegistration | None,
    events: list[dict[str, Any]],
    look_back: LookBack,
    session: SessionFacts | None,
    now_ms: int,
) -> str:
    b = f"Broker {broker_id}"

    def at(e: dict[str, Any]) -> str:
        return f"offset {e['offset']} ({_when(e['timeMs'])})"

    def newest(*kinds: str) -> dict[str, Any] | None:
        return next((e for e in events if e["event"] in kinds), None)

    not_reached = (
        f"the look-back (offsets {look_back.from_offset}-{look_back.to_offset - 1}) did not "
        "reach the change that made it so"
    )
    if state == UNREGISTERED:
        e = newest(UNREGISTERED)
        return (
            f"{b} is not registered: {e['cause']} at {at(e)}." if e else f"{b} is not registered."
        )
    if state == FENCED:
        e = newest(FENCED, "registered")
        if e is None:
            return f"{b} is fenced; {not_reached}."
        if e["event"] == "registered":
            return (
                f"{b} is fenced since it registered at {at(e)}: a new registration stays fenced "
                "until a heartbeat reports its metadata caught up to that offset."
            )
        return f"{b} is fenced since {at(e)}: {e['cause']}."
    if state == SHUTTING_DOWN:
        e = newest(SHUTTING_DOWN)
        since = f" since {at(e)}" if e else ""
        return f"{b} is in controlled shutdown{since}: it asked to stop and is handing over."
    e = newest(UNFENCED)
    since = f" since {at(e)}" if e else ""
    alive = ""
    if session is not None:
        alive = f"; its last heartbeat was {session.since_contact_ms} ms ago"
    return f"{b} is unfenced (active){since}: it may lead and join ISRs{alive}."


# ---------------------------------------------------------------- partitions


def _replica_state(image: MetadataImage, b: int, part: PartitionRegistration) -> dict[str, Any]:
    reg = image.brokers.get(b)
    state = broker_state(reg)
    in_isr, in_elr = b in part.isr, b in part.elr
    rule = None
    if reg is None:
        rule, why = RULE_NOT_REGISTERED, f"broker {b} is not registered"
    elif reg.fenced:
        rule, why = RULE_FENCED, f"broker {b} is fenced: it may not lead nor join the ISR"
    elif reg.in_controlled_shutdown:
        rule = RULE_SHUTTING_DOWN
        why = f"broker {b} is in controlled shutdown: it may not lead nor join the ISR"
    elif b == part.leader:
        why = "the leader"
    elif in_isr:
        why = "in the ISR"
    else:
        why = (
            "active but not in the ISR: it joins when the leader sees it caught up "
            "(the leader's AlterPartition)"
        )
    if in_elr:
        why += "; in the ELR (KIP-966): a clean former ISR member that may be elected"
    return {
        "brokerId": b,
        "inIsr": in_isr,
        "inElr": in_elr,
        "brokerState": state,
        "eligible": rule is None,
        "rule": rule,
        "why": why,
    }


def partition_status(part: PartitionRegistration, min_isr: int) -> list[str]:
    status = ["online" if part.leader != NO_LEADER else "offline"]
    if len(part.isr) < len(part.replicas):
        status.append("underReplicated")
    if len(part.isr) < min_isr:
        status.append("underMinIsr")
    if part.is_reassigning:
        status.append("reassigning")
    if part.leader != NO_LEADER and not part.has_preferred_leader:
        status.append("leaderNotPreferred")
    return status


def _names(ids: Iterable[int]) -> str:
    ids = list(ids)
    return ", ".join(map(str, ids)) if ids else "none"


def _reasons(
    part: PartitionRegistration, status: list[str], min_isr: int, replicas: list[dict[str, Any]]
) -> list[str]:
    out_of_isr = [r for r in replicas if not r["inIsr"]]

    def why_out() -> str:
        return "; ".join(f"{r['brokerId']}: {r['why']}" for r in out_of_isr) or "none"

    reasons = []
    if "offline" in status:
        in_isr = [r for r in replicas if r["inIsr"]]
        if not in_isr:
            why_not = "the ISR is empty"
        else:
            why_not = "no ISR member can lead: " + "; ".join(
                f"{r['brokerId']}: {r['why']}" for r in in_isr
            )
        if part.elr:
            why_not += f"; the ELR ({_names(part.elr)}) may be elected once one is unfenced"
        reasons.append(f"Offline: no leader; {why_not}.")
    if "underReplicated" in status:
        reasons.append(
            f"Under-replicated: ISR [{_names(part.isr)}] of replicas "
            f"[{_names(part.replicas)}]; out of the ISR: {why_out()}."
        )
    if "underMinIsr" in status:
        reasons.append(
            f"Under min ISR: {len(part.isr)} in the ISR, min.insync.replicas is {min_isr}: "
            "acks=all writes are refused (NOT_ENOUGH_REPLICAS) until it grows."
        )
    if "reassigning" in status:
        reasons.append(
            f"Reassigning: adding [{_names(part.adding_replicas)}], removing "
            f"[{_names(part.removing_replicas)}]; it completes when the new replicas join the ISR."
        )
    if "leaderNotPreferred" in status:
        preferred = part.replicas[0] if part.replicas else NO_LEADER
        pref = next((r for r in replicas if r["brokerId"] == preferred), None)
        cause = "" if pref is None else f" ({pref['why']})"
        reasons.append(
            f"Led by {part.leader}, not by its preferred replica {preferred}{cause}; the "
            "preferred election moves it back once the preferred replica is in the ISR."
        )
    return reasons


_FIELDS = ("leader", "isr", "elr")


def _history(part: PartitionRegistration, entries: Sequence[LogEntry]) -> list[dict[str, Any]]:
    """The partition after each change, newest first: worked back from the
    image (what a newer change set was something else before it, the epochs
    one lower each), then forward from the oldest change found (what a change
    did not set stays as the change before left it). A field set only before
    the look-back and changed within it is not known: null."""
    state: dict[str, Any] = {
        "leader": part.leader,
        "isr": list(part.isr),
        "elr": list(part.elr),
        "leaderEpoch": part.leader_epoch,
        "partitionEpoch": part.partition_epoch,
    }
    out = []
    kept: list[dict[str, bool]] = []  # per change, the fields it did not set
    for entry in entries:
        r = entry.record
        full = type(r) is PartitionRecord
        sets = {
            "leader": full or r.leader != NO_LEADER_CHANGE,
            "isr": full or r.isr is not None,
            "elr": full or r.eligible_leader_replicas is not None,
        }
        after = dict(state)
        if sets["leader"]:
            after["leader"] = r.leader
        if sets["isr"]:
            after["isr"] = list(r.isr)
        if sets["elr"]:
            after["elr"] = list(r.eligible_leader_replicas or ())
        if full:
            after["leaderEpoch"], after["partitionEpoch"] = r.leader_epoch, r.partition_epoch
        out.append(
            {
                "offset": entry.offset,
                "timeMs": entry.timestamp_ms,
                "change": "created" if full else "changed",
                **after,
                "who": _who(entry.who),
            }
        )
        kept.append({name: not did for name, did in sets.items()})
        # Before this change: what it set is unknown, the epochs one lower.
        state = dict(after)
        for name in _FIELDS:
            if sets[name]:
                state[name] = None
        if not full:
            if sets["leader"] and state["leaderEpoch"] is not None:
                state["leaderEpoch"] -= 1
            if state["partitionEpoch"] is not None:
                state["partitionEpoch"] -= 1
    for i in range(len(out) - 2, -1, -1):  # forward, from the oldest change
        for name in _FIELDS:
            if out[i][name] is None and kept[i][name]:
                out[i][name] = out[i + 1][name]
    return out


def find_partition(image: MetadataImage, topic: str, partition: int) -> TopicImage:
    """The topic that has ``partition``; NotFound saying which is unknown."""
    t = image.topic_by_name(topic)
    if t is None:
        raise NotFound(f"no topic {topic!r}: check the name (GET /v1/topics lists them)")
    if t.partitions.get(partition) is None:
        raise NotFound(
            f"topic {topic!r} has no partition {partition}: it has {len(t.partitions)}, "
            f"0-{len(t.partitions) - 1}"
        )
    return t


def explain_partition(
    image: MetadataImage,
    topic: str,
    partition: int,
    min_isr: int,
    entries: Sequence[LogEntry],
    look_back: LookBack,
    facts: ControllerFacts,
) -> dict[str, Any]:
    """The answer of GET /v1/explain/partitions/{topic}/{partition}; NotFound
    for a topic or partition the image has not."""
    t = find_partition(image, topic, partition)
    part = t.partitions[partition]
    status = partition_status(part, min_isr)
    replicas = [_replica_state(image, b, part) for b in part.replicas]
    refusals = None if facts.refusals is None else list(facts.refusals)
    last_refused = None
    if refusals is not None:
        last_refused = next((r for r in refusals if r.api == "AlterPartition"), None)
    return {
        "topic": topic,
        "topicId": t.topic_id,
        "partition": partition,
        "leader": part.leader,
        "leaderEpoch": part.leader_epoch,
        "partitionEpoch": part.partition_epoch,
        "replicas": list(part.replicas),
        "isr": list(part.isr),
        "elr": list(part.elr),
        "lastKnownElr": list(part.last_known_elr),
        "addingReplicas": list(part.adding_replicas),
        "removingReplicas": list(part.removing_replicas),
        "minIsr": min_isr,
        "status": status,
        "reasons": _reasons(part, status, min_isr, replicas),
        "replicaStates": replicas,
        "history": _history(part, entries),
        "lookBack": look_back.obj(),
        "lastRefusedAlterPartition": None if last_refused is None else refusal_obj(last_refused),
        "refusals": None if refusals is None else [refusal_obj(r) for r in refusals],
        "refusalsFrom": facts.source,
    }
