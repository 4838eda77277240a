"""The active controller's ring of recent refusals: what it refused, to whom,
by which rule (``controller/rules.py``), so ``explain`` can say why a broker
is fenced or a partition's ISR does not grow.

Pure: the orderer feeds it each response it settles (``note``) with the wall
clock to call when one was refused; nothing here reads a clock of its own or
the log. Bounded twice: the ring keeps
the last ``capacity`` refusals, and each broker id, topic and topic-partition
keeps the last ``per_key`` of its own, in a map of at most ``capacity`` keys
(the least recently refused key goes first), so a flood of refusals for one
broker does not push another's few out of reach.

The accepting path pays one attribute read per response (and per entry of a
response that has entries, where an accepted entry's ``rule`` is None); a
refusal is worked out only when there is one. A ring is this controller's:
a new leader starts empty (refusals are not in the log). It is read with a
``RefusalsQuery`` submitted as a write is, which the orderer answers at once
(GET /v1/refusals), so the read finds the ring wherever the orderer runs.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from metadata_records.errors import Errors

from . import messages as m
from .heartbeats import SessionFacts

CAPACITY = 10_000
PER_KEY = 16


class Refusal(msgspec.Struct, frozen=True, gc=False):
    """One refused request or entry."""

    time_ms: int  # wall clock, when the answer was settled
    api: str  # Kafka's request name, e.g. "AlterPartition"
    rule: str | None  # an id of controller/rules.py (None: a refusal without one is a bug)
    error: Errors
    message: str | None
    broker_id: int | None = None  # the broker the request came from or names
    topic: str | None = None
    partition: int | None = None
    resource: str | None = None  # what else the entry names: a config resource, an entity, an ACL


class RefusalsQuery(msgspec.Struct, frozen=True, gc=False):
    """A read of the ring, sent to the orderer as a write is (so it reaches the
    active controller wherever its orderer runs) and answered at once."""

    broker_id: int | None = None
    topic: str | None = None
    partition: int | None = None
    limit: int = 100
    # Also this broker's session (explain): the heartbeats live beside the ring.
    session_of: int | None = None


class RefusalsAnswer(msgspec.Struct, frozen=True, gc=False):
    noted: int  # refusals noted since this controller became active
    refusals: tuple[Refusal, ...]  # newest first
    session: SessionFacts | None = None  # the session asked for (``session_of``), if any


def _api(request: object) -> str:
    name = type(request).__name__
    return name[: -len("Request")] if name.endswith("Request") else name


def refusals_of(
    request: object, response: object, now_ms: int, topic_name: Callable[[str], str | None]
) -> Iterator[Refusal]:
    """The refusals one response holds (none for an accepted request).
    ``topic_name`` names a topic id (AlterPartition v2+ names topics by id)."""
    api = _api(request)
    broker_id = getattr(request, "broker_id", None)
    top = getattr(response, "error", Errors.NONE)
    if top is not Errors.NONE:
        topic = (
            getattr(request, "name", None) if type(request) is m.CreatePartitionsRequest else None
        )
        yield Refusal(now_ms, api, response.rule, top, response.error_message, broker_id, topic)
        if type(response) not in _WHOLE_AND_ENTRIES:
            return
    t = type(response)
    if t is m.AlterPartitionResponse:
        for topic in response.topics:
            name = topic.topic_name
            for p in topic.partitions:
                if p.rule is not None:
                    if name is None and topic.topic_id is not None:
                        name = topic_name(topic.topic_id) or topic.topic_id
                    yield Refusal(
                        now_ms, api, p.rule, p.error, p.error_message, broker_id, name,
                        p.partition_index,
                    )  # fmt: skip
    elif t is m.CreateTopicsResponse or t is m.DeleteTopicsResponse:
        for r in response.topics:
            if r.error is not Errors.NONE:
                yield Refusal(now_ms, api, r.rule, r.error, r.error_message, topic=r.name)
    elif t is m.AlterPartitionReassignmentsResponse or t is m.ElectLeadersResponse:
        for topic in response.topics:
            for p in topic.partitions:
                if p.error is not Errors.NONE:
                    yield Refusal(
                        now_ms, api, p.rule, p.error, p.error_message,
                        topic=topic.name, partition=p.partition_index,
                    )  # fmt: skip
    elif t is m.IncrementalAlterConfigsResponse:
        for r in response.responses:
            if r.error is not Errors.NONE:
                topic = r.resource_name if r.resource_type == 2 else None
                yield Refusal(
                    now_ms, api, r.rule, r.error, r.error_message, topic=topic,
                    resource=f"{r.resource_type}:{r.resource_name}",
                )  # fmt: skip
    elif t is m.AlterClientQuotasResponse:
        for r in response.entries:
            if r.error is not Errors.NONE:
                entity = ",".join(f"{k}={v}" for k, v in r.entity)
                yield Refusal(now_ms, api, r.rule, r.error, r.error_message, resource=entity)
    elif t is m.AlterUserScramCredentialsResponse:
        for r in response.results:
            if r.error is not Errors.NONE:
                yield Refusal(now_ms, api, r.rule, r.error, r.error_message, resource=r.user)
    elif t is m.CreateAclsResponse or t is m.DeleteAclsResponse:
        entries = response.results if t is m.CreateAclsResponse else response.filter_results
        for i, r in enumerate(entries):
            if r.error is not Errors.NONE:
                yield Refusal(now_ms, api, r.rule, r.error, r.error_message, resource=f"#{i}")


# Responses whose entries may be refused while the whole request is not.
_WITH_ENTRIES = frozenset(
    {
        m.AlterPartitionResponse,
        m.CreateTopicsResponse,
        m.DeleteTopicsResponse,
        m.AlterPartitionReassignmentsResponse,
        m.ElectLeadersResponse,
        m.IncrementalAlterConfigsResponse,
        m.AlterClientQuotasResponse,
        m.AlterUserScramCredentialsResponse,
        m.CreateAclsResponse,
        m.DeleteAclsResponse,
    }
)
# Responses whose whole-request error is also on every entry (the record cap):
# the entries are noted too, so a topic's or a partition's lookup finds them.
_WHOLE_AND_ENTRIES = frozenset({m.AlterPartitionReassignmentsResponse, m.ElectLeadersResponse})


class RefusalRing:
    """The last ``capacity`` refusals, and the last ``per_key`` of each broker,
    topic and topic-partition."""

    def __init__(self, capacity: int = CAPACITY, per_key: int = PER_KEY) -> None:
        self.capacity = capacity
        self.per_key = per_key
        self._ring: collections.deque[Refusal] = collections.deque(maxlen=capacity)
        self._by_key: collections.OrderedDict[Any, collections.deque[Refusal]] = (
            collections.OrderedDict()
        )
        self.noted = 0  # refusals ever noted (the ring holds the last ``capacity``)

    def note(
        self,
        request: object,
        response: object,
        clock_ms: Callable[[], int],
        topic_name: Callable[[str], str | None] = lambda _: None,
    ) -> None:
        """Keeps the refusals of one settled response. An accepted one without
        entries costs a type test and an attribute read; ``clock_ms`` (the
        wall clock) is read only when something was refused."""
        if type(response) not in _WITH_ENTRIES:
            error = getattr(response, "error", None)
            if error is None or error is Errors.NONE:
                return
        now_ms = clock_ms()
        for refusal in refusals_of(request, response, now_ms, topic_name):
            self.add(refusal)

    def add(self, refusal: Refusal) -> None:
        self.noted += 1
        self._ring.append(refusal)
        if refusal.broker_id is not None:
            self._keep(("broker", refusal.broker_id), refusal)
        if refusal.topic is not None:
            self._keep(("topic", refusal.topic), refusal)
            if refusal.partition is not None:
                self._keep(("partition", refusal.topic, refusal.partition), refusal)

    def _keep(self, key: Any, refusal: Refusal) -> None:
        kept = self._by_key.get(key)
        if kept is None:
            kept = self._by_key[key] = collections.deque(maxlen=self.per_key)
            if len(self._by_key) > self.capacity:
                self._by_key.popitem(last=False)
        else:
            self._by_key.move_to_end(key)
        kept.append(refusal)

    def recent(
        self,
        broker_id: int | None = None,
        topic: str | None = None,
        partition: int | None = None,
        limit: int = 100,
    ) -> list[Refusal]:
        """The newest refusals first, at most ``limit``: of a broker, a topic,
        a topic-partition (a partition needs its topic), or all of them."""
        if partition is not None and topic is None:
            raise ValueError("a partition needs its topic")
        if topic is not None:
            key = ("topic", topic) if partition is None else ("partition", topic, partition)
            kept: Any = self._by_key.get(key, ())
            if broker_id is not None:
                kept = [r for r in kept if r.broker_id == broker_id]
        elif broker_id is not None:
            kept = self._by_key.get(("broker", broker_id), ())
        else:
            kept = self._ring
        out = []
        for r in reversed(kept):
            if len(out) >= limit:
                break
            out.append(r)
        return out

    def answer(self, query: RefusalsQuery, session: SessionFacts | None = None) -> RefusalsAnswer:
        found = self.recent(query.broker_id, query.topic, query.partition, query.limit)
        return RefusalsAnswer(self.noted, tuple(found), session)

    def __len__(self) -> int:
        return len(self._ring)
