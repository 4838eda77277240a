"""Leader-side ISR management: what a partition leader asks the controller to change.

Modelled on Kafka's ``Partition.scala`` (``updateFollowerFetchState``,
``maybeExpandIsr``, ``maybeShrinkIsr``, ``handleAlterPartitionError``) and
``AlterPartitionManager`` (one request outstanding, many partitions per request).

Pure: no network, no threads, no clock. Time is an argument; the metadata cache is
a ``MetadataImage`` built with ``metadata_records``' own ``apply``. The caller sends
what ``decide`` returns as the ``topics`` of ``POST /v1/alter-partition?version=3``
and feeds the answer back with ``on_response`` (or ``on_request_failed`` when the
outcome is unknown).

Rules, with the KIP each one comes from:

* KIP-497: the controller owns the ISR; the leader only *proposes* a change and
  keeps at most one in flight per partition. While it is in flight the high
  watermark respects the *maximal* ISR: committed + the joining member for an
  expansion, the (larger) committed ISR for a shrink.
* KIP-841: only *active* replicas (registered, not fenced, not in controlled
  shutdown) may join; INELIGIBLE_REPLICA (OPERATION_NOT_ATTEMPTED for v0-1) means
  the change was surely not applied, so the leader reverts to the committed ISR.
* KIP-903: a follower may join only if the broker epoch it sent in its fetch equals
  the image's epoch for it; ``newIsrWithEpochs`` carries every member's epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from metadata_records.errors import Errors
from metadata_records.image import EMPTY_IMAGE, BrokerRegistration, MetadataImage

TopicPartition = tuple[str, int]  # (topic id, partition index)

# Kafka's "the epoch check is not supported / skipped" value in NewIsrWithEpochs.
UNKNOWN_BROKER_EPOCH = -1


class Committed(NamedTuple):
    """The last ISR state the controller confirmed (image or NONE response)."""

    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]


class Proposal(NamedTuple):
    """One in-flight AlterPartition change (Kafka's PendingExpandIsr / PendingShrinkIsr)."""

    new_isr: tuple[int, ...]
    epochs: tuple[tuple[int, int], ...]  # (brokerId, brokerEpoch) per member
    leader_epoch: int
    partition_epoch: int
    added: int | None  # the joining member of an expansion; None for a shrink

    def entry(self, partition: int) -> dict[str, Any]:
        return {
            "partitionIndex": partition,
            "leaderEpoch": self.leader_epoch,
            "partitionEpoch": self.partition_epoch,
            "newIsrWithEpochs": [{"brokerId": b, "brokerEpoch": e} for b, e in self.epochs],
        }


@dataclass
class _Follower:
    """Kafka's ``ReplicaState`` for one remote replica."""

    fetch_offset: int | None = None  # the follower's log end offset; None = unknown
    broker_epoch: int | None = None  # as reported in its fetch (KIP-903)
    last_caught_up_ms: int | None = None  # None = not yet stamped (see _touch)
    last_fetch_ms: int | None = None
    last_fetch_leader_leo: int | None = None
    caught_up: bool = False  # last fetch reached the leader's log end at that time


@dataclass
class _Partition:
    committed: Committed
    followers: dict[int, _Follower] = field(default_factory=dict)
    in_flight: Proposal | None = None
    sent: bool = False  # in_flight is in the outstanding request (else: (re)send it)
    # Awaiting metadata: no proposals until the image shows an epoch above these.
    wait_leader_epoch: int | None = None
    wait_partition_epoch: int | None = None
    # Rejected as ineligible: member -> the state it was proposed in. It is not
    # proposed again until that state changes (new fetch epoch or registration).
    blocked: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    blocked_shrink: tuple[Any, ...] | None = None


class IsrManager:
    def __init__(self, broker_id: int, replica_lag_time_max_ms: int = 30000) -> None:
        self.broker_id = broker_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._image: MetadataImage = EMPTY_IMAGE
        self._parts: dict[TopicPartition, _Partition] = {}
        # The local log end per partition; kept apart so an append seen just before
        # the metadata that makes us leader is not lost.
        self._leo: dict[TopicPartition, int] = {}
        self._outstanding = False  # AlterPartitionManager sends one request at a time

    # ---------------------------------------------------------------- inputs

    def on_append(self, topic_id: str, partition: int, log_end_offset: int, now_ms: int) -> None:
        tp = (topic_id, partition)
        self._leo[tp] = log_end_offset
        ps = self._parts.get(tp)
        if ps is not None:
            self._touch(ps, now_ms)

    def on_fetch(
        self,
        topic_id: str,
        partition: int,
        follower_id: int,
        follower_broker_epoch: int,
        fetch_offset: int,
        now_ms: int,
    ) -> None:
        ps = self._parts.get((topic_id, partition))
        # A fetch to a non-leader gets NOT_LEADER_OR_FOLLOWER in Kafka; nothing to track.
        if ps is None or follower_id == self.broker_id or follower_id not in ps.committed.replicas:
            return
        self._touch(ps, now_ms)
        leo = self._leo.get((topic_id, partition), 0)
        f = ps.followers.setdefault(follower_id, _Follower())
        # Kafka's ReplicaState.updateFetchState: caught up "now" if the fetch reaches
        # the leader's current end, else caught up as of the previous fetch if it
        # reaches the end the leader had then.
        if fetch_offset >= leo:
            f.last_caught_up_ms = _max(f.last_caught_up_ms, now_ms)
        elif f.last_fetch_leader_leo is not None and fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_ms = _max(f.last_caught_up_ms, f.last_fetch_ms)
        f.caught_up = fetch_offset >= leo
        f.fetch_offset = fetch_offset
        f.broker_epoch = follower_broker_epoch
        f.last_fetch_ms = now_ms
        f.last_fetch_leader_leo = leo

    def on_metadata(self, image: MetadataImage) -> None:
        self._image = image
        led = {
            (topic_id, index): reg
            for topic_id, topic in image.topics.items()
            for index, reg in topic.partitions.items()
            if reg.leader == self.broker_id
        }
        for tp in [tp for tp in self._parts if tp not in led]:
            del self._parts[tp]  # no longer the leader: nothing of ours to change
        for tp, reg in led.items():
            image_state = Committed(reg.leader_epoch, reg.partition_epoch, reg.isr, reg.replicas)
            ps = self._parts.get(tp)
            if ps is None:
                # Newly leading (Kafka's makeLeader): fresh follower states; ISR
                # members get the benefit of the doubt from the first time we see
                # a clock (_touch), as resetReplicaState does with currentTimeMs.
                self._parts[tp] = _Partition(image_state)
                continue
            # Never regress to an image older than a NONE response already adopted.
            if reg.partition_epoch >= ps.committed.partition_epoch:
                ps.committed = image_state
            for b in [b for b in ps.followers if b not in reg.replicas]:
                del ps.followers[b]  # reassigned away
            p = ps.in_flight
            if p is not None and (
                reg.partition_epoch > p.partition_epoch or reg.leader_epoch > p.leader_epoch
            ):
                # KIP-497: the image moved past the epochs the change was sent with,
                # so it was applied or superseded; either way the image is the truth.
                ps.in_flight, ps.sent = None, False
            if ps.wait_leader_epoch is not None and reg.leader_epoch > ps.wait_leader_epoch:
                ps.wait_leader_epoch = None
            if (
                ps.wait_partition_epoch is not None
                and reg.partition_epoch > ps.wait_partition_epoch
            ):
                ps.wait_partition_epoch = None

    # --------------------------------------------------------------- decisions

    def decide(self, now_ms: int, image: MetadataImage) -> list[dict[str, Any]]:
        """The ``topics`` of the AlterPartition v3 request to send now ([] = none).

        Returns [] while a request is outstanding: like Kafka's AlterPartitionManager
        this keeps one request in flight, so every answer matches one request."""
        if image is not self._image:
            self.on_metadata(image)
        if self._outstanding:
            return []
        me = image.brokers.get(self.broker_id)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in sorted(self._parts):
            ps = self._parts[tp]
            self._touch(ps, now_ms)
            if ps.in_flight is None and _usable(me) and not _waiting(ps):
                ps.in_flight = self._shrink(tp, ps, now_ms, image) or self._expand(
                    tp, ps, now_ms, image
                )
                ps.sent = False
            if ps.in_flight is not None and not ps.sent:
                # A new proposal, or one kept pending after NOT_CONTROLLER / a
                # top-level error / an unknown outcome: resent as is, since the same
                # epochs make a duplicate harmless (it fails INVALID_UPDATE_VERSION).
                ps.sent = True
                by_topic.setdefault(tp[0], []).append(ps.in_flight.entry(tp[1]))
        self._outstanding = bool(by_topic)
        return [{"topicId": t, "partitions": parts} for t, parts in by_topic.items()]

    def _shrink(
        self, tp: TopicPartition, ps: _Partition, now_ms: int, image: MetadataImage
    ) -> Proposal | None:
        c = ps.committed
        lagging = {
            b
            for b in c.isr
            if b != self.broker_id
            and now_ms - _stamp(ps.followers.get(b), now_ms) > self.replica_lag_time_max_ms
        }
        if not lagging:
            return None
        p = self._proposal(ps, tuple(b for b in c.isr if b not in lagging), None, image)
        if p is None or ps.blocked_shrink == _signature(p, image):
            return None  # rejected as ineligible before, and nothing has changed since
        return p

    def _expand(
        self, tp: TopicPartition, ps: _Partition, now_ms: int, image: MetadataImage
    ) -> Proposal | None:
        c = ps.committed
        for b in c.replicas:  # replica order: deterministic, preferred replicas first
            f = ps.followers.get(b)
            if b == self.broker_id or b in c.isr or f is None or not f.caught_up:
                continue
            if now_ms - _stamp(f, now_ms) > self.replica_lag_time_max_ms:
                continue  # caught up once, but has stopped fetching since
            reg = image.brokers.get(b)
            # KIP-841: only active replicas may join. KIP-903: the epoch in its fetch
            # must be the one the image knows, or it is a previous incarnation.
            if reg is None or not reg.active or f.broker_epoch != reg.epoch:
                continue
            if ps.blocked.get(b) == _member_state(b, f, image):
                continue  # INELIGIBLE_REPLICA for this very state: wait for a change
            return self._proposal(ps, c.isr + (b,), b, image)
        return None

    def _proposal(
        self, ps: _Partition, new_isr: tuple[int, ...], added: int | None, image: MetadataImage
    ) -> Proposal | None:
        c = ps.committed
        if self.broker_id not in new_isr or not set(new_isr) <= set(c.replicas):
            return None  # never an ISR without the leader (so never empty), nor a non-replica
        # KIP-903: every member carries its image epoch, the leader's own included;
        # -1 (skip the check) only for an ID the image does not know.
        epochs = tuple(
            (b, reg.epoch if (reg := image.brokers.get(b)) is not None else UNKNOWN_BROKER_EPOCH)
            for b in new_isr
        )
        return Proposal(new_isr, epochs, c.leader_epoch, c.partition_epoch, added)

    # --------------------------------------------------------------- responses

    def on_response(
        self, now_ms: int, topics_result: list[dict[str, Any]], error_code: int = 0
    ) -> None:
        """The answer to the outstanding request: its ``topics`` and top-level error."""
        self._outstanding = False
        if error_code != Errors.NONE:
            # NOT_CONTROLLER, STALE_BROKER_EPOCH, ...: nothing was decided; keep
            # every proposal pending and send it again.
            self._resend_all()
            return
        answered: set[TopicPartition] = set()
        for topic in topics_result:
            for entry in topic.get("partitions", ()):
                tp = (topic["topicId"], entry["partitionIndex"])
                answered.add(tp)
                ps = self._parts.get(tp)
                if ps is not None and ps.in_flight is not None and ps.sent:
                    self._on_partition(tp, ps, entry, now_ms)
        for tp, ps in self._parts.items():
            if ps.in_flight is not None and ps.sent and tp not in answered:
                ps.sent = False  # no answer for it: outcome unknown, resend as is

    def on_request_failed(self, now_ms: int) -> None:
        """The request timed out or its answer was lost: the outcome is unknown
        (it may still commit). Resend as is; the epochs make a duplicate safe."""
        self._outstanding = False
        self._resend_all()

    def _resend_all(self) -> None:
        for ps in self._parts.values():
            if ps.in_flight is not None:
                ps.sent = False

    def _on_partition(
        self, tp: TopicPartition, ps: _Partition, entry: dict[str, Any], now_ms: int
    ) -> None:
        p = ps.in_flight
        assert p is not None
        code = entry.get("errorCode", Errors.NONE)
        if code == Errors.NONE:
            state = Committed(
                entry["leaderEpoch"],
                entry["partitionEpoch"],
                tuple(entry["isr"]),
                ps.committed.replicas,
            )
            if state.partition_epoch >= ps.committed.partition_epoch:
                ps.committed = state
            ps.in_flight, ps.sent = None, False
        elif code in (Errors.INELIGIBLE_REPLICA, Errors.OPERATION_NOT_ATTEMPTED):
            # KIP-841/903: surely not applied, so revert to the committed ISR; do not
            # retry the same proposal until the member's state changes.
            if p.added is not None:
                ps.blocked[p.added] = _member_state(p.added, ps.followers.get(p.added), self._image)
            else:
                ps.blocked_shrink = _signature(p, self._image)
            ps.in_flight, ps.sent = None, False
        elif code in (Errors.FENCED_LEADER_EPOCH, Errors.NEW_LEADER_ELECTED):
            # A newer leader epoch exists (NEW_LEADER_ELECTED: our change applied and
            # moved leadership). Wait for the metadata that explains it.
            ps.in_flight, ps.sent = None, False
            ps.wait_leader_epoch = p.leader_epoch
        elif code == Errors.INVALID_UPDATE_VERSION:
            # Our partition epoch is stale. on_metadata already refreshes the epochs
            # from every image (and clears a proposal the image has moved past), so
            # the last image is no newer than what we sent: drop the proposal and
            # retry from the next image whose partition epoch is newer.
            ps.in_flight, ps.sent = None, False
            ps.wait_partition_epoch = p.partition_epoch
        elif code == Errors.NOT_CONTROLLER:
            ps.sent = False  # a newer epoch than the controller's, or no controller: retry
        else:
            # INVALID_REQUEST, UNKNOWN_TOPIC_ID, ...: Kafka keeps the pending state
            # and waits for metadata; the image that explains it clears it.
            ps.wait_partition_epoch = p.partition_epoch

    # ---------------------------------------------------------------- queries

    def has_partitions(self) -> bool:
        """Leads (or still tracks) at least one partition."""
        return bool(self._parts)

    def led_partitions(self) -> list[TopicPartition]:
        return sorted(self._parts)

    def committed(self, tp: TopicPartition) -> Committed | None:
        ps = self._parts.get(tp)
        return None if ps is None else ps.committed

    def in_flight(self, tp: TopicPartition) -> Proposal | None:
        ps = self._parts.get(tp)
        return None if ps is None else ps.in_flight

    def last_caught_up_ms(self, tp: TopicPartition, broker_id: int) -> int | None:
        ps = self._parts.get(tp)
        f = None if ps is None else ps.followers.get(broker_id)
        return None if f is None else f.last_caught_up_ms

    def maximal_isr(self, tp: TopicPartition) -> tuple[int, ...]:
        """KIP-497: the largest ISR the change in flight could produce. An expansion
        counts its new member at once; a shrink keeps the committed (larger) ISR,
        since the high watermark must not advance as if the shrink had committed."""
        ps = self._parts.get(tp)
        if ps is None:
            return ()
        isr = ps.committed.isr
        p = ps.in_flight
        if p is not None and p.added is not None and p.added not in isr:
            isr = isr + (p.added,)
        return isr

    def log_end(self, tp: TopicPartition, broker_id: int) -> int:
        """A replica's log end as the leader knows it (0 when it has not fetched)."""
        if broker_id == self.broker_id:
            return self._leo.get(tp, 0)
        ps = self._parts.get(tp)
        f = None if ps is None else ps.followers.get(broker_id)
        return 0 if f is None or f.fetch_offset is None else f.fetch_offset

    def high_watermark(self, tp: TopicPartition) -> int:
        """min log end over the maximal ISR, the leader included."""
        members = set(self.maximal_isr(tp)) | {self.broker_id}
        return min(self.log_end(tp, b) for b in members)

    # ---------------------------------------------------------------- helpers

    def _touch(self, ps: _Partition, now_ms: int) -> None:
        # Committed ISR members we have no time for yet (newly leading, or added by
        # the controller) count as caught up from the first clock we see.
        for b in ps.committed.isr:
            if b != self.broker_id:
                f = ps.followers.setdefault(b, _Follower())
                if f.last_caught_up_ms is None:
                    f.last_caught_up_ms = now_ms


def _usable(me: BrokerRegistration | None) -> bool:
    # The controller checks the leader's own entry too (KIP-841): an inactive
    # leader's proposals would all fail INELIGIBLE_REPLICA.
    return me is not None and me.active


def _waiting(ps: _Partition) -> bool:
    return ps.wait_leader_epoch is not None or ps.wait_partition_epoch is not None


def _stamp(f: _Follower | None, now_ms: int) -> int:
    return now_ms if f is None or f.last_caught_up_ms is None else f.last_caught_up_ms


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def _member_state(b: int, f: _Follower | None, image: MetadataImage) -> tuple[Any, ...]:
    return (None if f is None else f.broker_epoch, image.brokers.get(b))


def _signature(p: Proposal, image: MetadataImage) -> tuple[Any, ...]:
    return (p.new_isr, p.partition_epoch, tuple(image.brokers.get(b) for b, _ in p.epochs))
