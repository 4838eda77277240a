"""The filters of ``GET /v1/log``: which records a reader asks for, by who
asked for them (principal, API), the broker or topic they name, and when
(docs/api-additions.md "Who changed what").

Every filter given must hold (AND). A filtered read scans the retained log
from ``fromOffset`` for at most ``MAX_SCANNED_RECORDS`` records, so a filter
that matches nothing costs a bounded amount of a worker's time; the page's
``nextOffset`` is where the scan stopped, to go on from.

What a filter matches, exactly:

* ``principal``, ``api``: the Who covering the record (records of batches
  written before who was recorded match neither);
* ``brokerId=N``: REGISTER_BROKER_RECORD, UNREGISTER_BROKER_RECORD,
  BROKER_REGISTRATION_CHANGE_RECORD (fencing, unfencing, controlled
  shutdown) and PRODUCER_IDS_RECORD of broker N; a PARTITION_RECORD naming N
  as leader, replica, ISR, ELR or last known ELR member (or adding or
  removing it); a PARTITION_CHANGE_RECORD naming N in any of those (N moved
  in, or stays named), or taking from N a role it had before (N moved out):
  "before" is the partition as an earlier record of the same scan left it;
  for a partition the scan has not seen yet, a change of its leader, ISR,
  ELR or replicas matches if N is one of its replicas in the image now (the
  change may have moved N out: conservative). The records a
  broker asks for itself (its registration, heartbeats, AlterPartition as
  leader, producer ids) all name it so;
* ``topic=T``: TOPIC_RECORD named T, and PARTITION_RECORD,
  PARTITION_CHANGE_RECORD and REMOVE_TOPIC_RECORD of a topic id T had: its id
  in the image now, or the id of a TOPIC_RECORD named T met earlier in the
  scan (a topic deleted before ``fromOffset`` and gone from the image is not
  known by name: read from before its deletion); a CONFIG_RECORD of topic T;
  ACL records on the literal topic resource T;
* ``since``/``until``: the batch's timestamp (the leader's wall clock when it
  built the batch), ``since <= timestampMs < until``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from metadata_records import limits
from metadata_records.image import MetadataImage
from metadata_records.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    TOPIC_RESOURCE,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    topic_name_problem,
)
from quorum.callers import CONTROLLER, INTERNAL, KNOWN_APIS
from quorum.record_log import LogEntry

# A filtered read looks at no more records than this per request (about
# 0.1-0.3 s of a worker's thread to decode old batches); the page's
# nextOffset goes on from where it stopped.
MAX_SCANNED_RECORDS = 100_000
_ROLES = ("admin:", "broker:", "read:")
_ACL_TOPIC = 2  # Kafka's ResourceType.TOPIC
_BROKER_RECORDS = (
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    BrokerRegistrationChangeRecord,
    ProducerIdsRecord,
)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class FilterError(ValueError):
    """A filter value that cannot be used; the message names it (400)."""


def parse_time(value: str, name: str) -> int:
    """Epoch milliseconds from an ISO-8601 time (UTC when it names no zone)
    or an integer of epoch milliseconds."""
    text = value.strip()
    if text.isdigit():
        return int(text)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise FilterError(
            f"{name}={value[:40]!r} is neither an ISO-8601 time (2026-12-04T03:12:00Z) nor "
            "epoch milliseconds"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return (parsed - _EPOCH) // timedelta(milliseconds=1)  # exact: no float on the way


@dataclass
class LogFilter:
    """The filters of one read; None: not asked for."""

    principal: str | None = None
    api: str | None = None
    broker_id: int | None = None
    topic: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    image: MetadataImage | None = None  # the image now: topic ids, partitions' brokers
    # What the scan learned: ids of TOPIC_RECORDs named ``topic``, and each
    # partition's brokers as its last record in the scan left them.
    _topic_ids: set[str] = field(default_factory=set)
    _states: dict[tuple[str, int], _State] = field(default_factory=dict)

    @classmethod
    def parse(
        cls,
        image: MetadataImage,
        principal: str | None = None,
        api: str | None = None,
        broker_id: int | None = None,
        topic: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> LogFilter:
        """The filters of the query; FilterError naming the first bad one."""
        if principal is not None:
            if len(principal) > limits.MAX_WHO_PRINCIPAL_LENGTH or not (
                principal in (CONTROLLER, INTERNAL[0]) or principal.startswith(_ROLES)
            ):
                raise FilterError(
                    f"principal={principal[:60]!r} is no principal: 'controller', or "
                    "'<role>:<identity>' with role admin, broker or read (admin:token/ops, "
                    "broker:cert/CN=kafka-3, admin:anonymous)"
                )
        if api is not None and api not in KNOWN_APIS:
            raise FilterError(
                f"api={api[:60]!r} is not an API the log names; one of "
                + ", ".join(sorted(KNOWN_APIS))
            )
        if topic is not None and (problem := topic_name_problem(topic)) is not None:
            raise FilterError(f"topic: {problem}")
        since_ms = None if since is None else parse_time(since, "since")
        until_ms = None if until is None else parse_time(until, "until")
        if since_ms is not None and until_ms is not None and until_ms <= since_ms:
            raise FilterError(f"until ({until}) is not after since ({since}): nothing is between")
        log_filter = cls(principal, api, broker_id, topic, since_ms, until_ms, image)
        if topic is not None and (topic_id := image.topic_ids.get(topic)) is not None:
            log_filter._topic_ids.add(topic_id)
        return log_filter

    @property
    def asked(self) -> bool:
        return any(
            v is not None
            for v in (
                self.principal,
                self.api,
                self.broker_id,
                self.topic,
                self.since_ms,
                self.until_ms,
            )
        )

    def matches(self, entry: LogEntry) -> bool:
        """Whether ``entry`` passes every filter (call in offset order: the
        topic and broker filters learn from the records they see)."""
        record = entry.record
        topic_match = self.topic is None or self._names_topic(record)
        broker_match = self.broker_id is None or self._names_broker(record)
        if not (topic_match and broker_match):
            return False
        if self.since_ms is not None and entry.timestamp_ms < self.since_ms:
            return False
        if self.until_ms is not None and entry.timestamp_ms >= self.until_ms:
            return False
        who = entry.who
        if self.principal is not None and (who is None or who.principal != self.principal):
            return False
        return self.api is None or (who is not None and who.api == self.api)

    def _names_topic(self, record: object) -> bool:
        kind = type(record)
        if kind is TopicRecord:
            if record.name == self.topic:
                self._topic_ids.add(record.topic_id)
                return True
            return False
        if kind is PartitionChangeRecord or kind is PartitionRecord or kind is RemoveTopicRecord:
            return record.topic_id in self._topic_ids
        if kind is ConfigRecord:
            return record.resource_type == TOPIC_RESOURCE and record.resource_name == self.topic
        if kind is AccessControlEntryRecord or kind is RemoveAccessControlEntryRecord:
            return (
                getattr(record, "resource_type", None) == _ACL_TOPIC
                and getattr(record, "resource_name", None) == self.topic
            )
        return False

    def _names_broker(self, record: object) -> bool:
        n = self.broker_id
        kind = type(record)
        if kind in _BROKER_RECORDS:
            return record.broker_id == n
        if kind is PartitionRecord:
            state = _State(
                record.replicas,
                record.isr,
                record.leader,
                record.eligible_leader_replicas or (),
                record.last_known_elr or (),
            )
            self._states[(record.topic_id, record.partition_id)] = state
            return n in _named(record)
        if kind is PartitionChangeRecord:
            key = (record.topic_id, record.partition_id)
            before = self._states.get(key)
            if n in _named(record):
                named = True
            elif before is not None:
                named = before.lost(n, before.after(record))
            else:
                # Not seen in this scan: the partition as the image holds it
                # now may have lost N to this very change, so a change of
                # its leader, ISR, ELR or replicas matches if N hosts it.
                part = None if self.image is None else self.image.partition(*key)
                named = part is not None and n in part.replicas and _moves(record)
            if before is not None:
                self._states[key] = before.after(record)
            return named
        return False


class _State(NamedTuple):
    """A partition's brokers as a scan last saw them."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]

    def roles(self, n: int) -> tuple[bool, ...]:
        """Whether N is a replica, in the ISR, the leader, in the ELR, in the last known ELR."""
        return (
            n in self.replicas,
            n in self.isr,
            self.leader == n,
            n in self.elr,
            n in self.last_known_elr,
        )

    def lost(self, n: int, after: _State) -> bool:
        """Whether N had a role here that it has not in ``after`` (moved out)."""
        return any(
            then and not now for then, now in zip(self.roles(n), after.roles(n), strict=True)
        )

    def after(self, change: PartitionChangeRecord) -> _State:
        """The fields ``change`` sets replace what they held."""
        return _State(
            self.replicas if change.replicas is None else change.replicas,
            self.isr if change.isr is None else change.isr,
            self.leader if change.leader == NO_LEADER_CHANGE else change.leader,
            self.elr
            if change.eligible_leader_replicas is None
            else change.eligible_leader_replicas,
            self.last_known_elr if change.last_known_elr is None else change.last_known_elr,
        )


def _named(record: PartitionRecord | PartitionChangeRecord) -> frozenset[int]:
    """The brokers a partition record names in any role."""
    members = {
        b
        for values in (
            record.replicas,
            record.isr,
            record.eligible_leader_replicas,
            record.last_known_elr,
            record.adding_replicas,
            record.removing_replicas,
        )
        if values
        for b in values
    }
    if record.leader not in (NO_LEADER, NO_LEADER_CHANGE):
        members.add(record.leader)
    return frozenset(members)


def _moves(change: PartitionChangeRecord) -> bool:
    return (
        change.leader != NO_LEADER_CHANGE
        or change.isr is not None
        or change.replicas is not None
        or change.eligible_leader_replicas is not None
        or change.last_known_elr is not None
    )


def scan(
    read, log_filter: LogFilter, from_offset: int, max_records: int, below: int
) -> tuple[list[LogEntry], int]:
    """Up to ``max_records`` entries from ``from_offset`` that ``log_filter``
    matches, looking at no more than MAX_SCANNED_RECORDS records and none at
    or past ``below``; and the offset the scan stopped at (the page's
    nextOffset). ``read``: RecordLog.read (OffsetTooOld passes through)."""
    matches: list[LogEntry] = []
    offset = from_offset
    scanned = 0
    while scanned < MAX_SCANNED_RECORDS and offset < below:
        chunk = read(offset, min(_CHUNK, MAX_SCANNED_RECORDS - scanned), False)
        if not chunk:
            break
        for entry in chunk:
            if entry.offset >= below:
                return matches, offset
            scanned += 1
            offset = entry.offset + 1
            if log_filter.matches(entry):
                matches.append(entry)
                if len(matches) >= max_records:
                    return matches, offset
    return matches, offset


_CHUNK = 2_000  # records read from the log at a time by a scan
