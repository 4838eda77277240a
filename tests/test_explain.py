"""api/explain.py, pure: hand-built logs (records with who, replayed into the
image they make) with known answers, the bounded look-back, and properties
over random partitions (offline iff leaderless; every ineligible replica
carries a rule of controller/rules.py)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api import explain as X
from controller.heartbeats import SessionFacts
from controller.refusals import Refusal
from controller.rules import RULES
from metadata_records.codec import encode_batch
from metadata_records.delta import apply_records
from metadata_records.errors import Errors
from metadata_records.image import (
    EMPTY_IMAGE,
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
)
from metadata_records.records import (
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    NO_LEADER,
    UNFENCE,
    Batch,
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    Who,
)
from metadata_records.uuids import uuid_from_bytes
from quorum.callers import FENCE as FENCE_WORK
from quorum.record_log import LogEntry, OffsetTooOld, RecordLog

TOPIC_ID = "Y2deagDaQ4yIul6RjJr5IA"
T0 = 1_796_359_800_000  # the first batch's time; each batch a second later
CONTROLLER_FACTS = X.ControllerFacts((), None, "node 1 is the active controller")
FOLLOWER_FACTS = X.ControllerFacts(None, None, "node 2 is not the active controller: ask node 1")


def broker_who(b: int, api: str) -> Who:
    return Who(1, f"broker:cert/CN=kafka-{b}", api)


FENCER = Who(1, FENCE_WORK[0], FENCE_WORK[3], rule=FENCE_WORK[4])
OPERATOR = Who(1, "admin:token/ops", "UnregisterBroker")


class Log:
    """Batches of records with their who, replayed into an image; read as
    RecordLog.read is, with the records before ``oldest`` gone."""

    def __init__(self) -> None:
        self.image: MetadataImage = EMPTY_IMAGE
        self.entries: list[LogEntry] = []
        self.oldest = 0
        self.record_log = RecordLog()  # the same batches, encoded as voters keep them

    def write(self, who: Who | None, *records) -> int:
        """The batch's first offset."""
        first = self.image.next_offset
        time_ms = T0 + 1000 * len({e.batch_offset for e in self.entries})
        if who is not None:
            who = msgspec.structs.replace(who, records=len(records))
        for k, r in enumerate(records):
            self.entries.append(LogEntry(first + k, time_ms, 1, r, first, who))
        self.image = apply_records(self.image, records)
        batch = Batch(1, time_ms, records, first, () if who is None else (who,))
        self.record_log.append(batch, first, encode_batch(batch))
        return first

    def stored(self, offset: int, below: int) -> list[tuple[int, int, bytes]]:
        if offset < self.oldest:
            raise OffsetTooOld(offset, self.oldest)
        return self.record_log.stored_from(offset, below)

    def read(self, from_offset: int, max_records: int, remember: bool = True) -> list[LogEntry]:
        if from_offset < self.oldest:
            raise OffsetTooOld(from_offset, self.oldest)
        return self.entries[from_offset : from_offset + max_records]

    def register(self, b: int, rack: str | None = None) -> int:
        record = RegisterBrokerRecord(
            broker_id=b,
            incarnation_id=uuid_from_bytes(b.to_bytes(16, "big")),
            broker_epoch=b,
            rack=rack,
        )
        return self.write(broker_who(b, "RegisterBroker"), record)

    def change(self, who: Who | None, b: int, fenced: int = 0, shutdown: int = 0) -> int:
        record = BrokerRegistrationChangeRecord(
            broker_id=b, broker_epoch=b, fenced=fenced, in_controlled_shutdown=shutdown, version=1
        )
        return self.write(who, record)

    def explain_broker(self, b: int, facts=CONTROLLER_FACTS, max_scanned=X.MAX_SCANNED):
        entries, look_back = X.scan_back(
            self.read,
            self.image.next_offset,
            X.BrokerRecords(b),
            max_scanned=max_scanned,
            stored=self.stored,
        )
        reg = self.image.brokers.get(b)
        registration = None
        if reg is not None and reg.registration_offset < look_back.from_offset:
            registration = self.entries[reg.registration_offset]
        return X.explain_broker(self.image, b, entries, look_back, registration, facts, T0 + 60_000)

    def explain_partition(self, p: int, min_isr: int = 2, facts=CONTROLLER_FACTS):
        entries, look_back = X.scan_back(
            self.read, self.image.next_offset, X.PartitionRecords(TOPIC_ID, p), stored=self.stored
        )
        return X.explain_partition(self.image, "orders", p, min_isr, entries, look_back, facts)


def three_brokers() -> Log:
    """Brokers 1-3 registered and unfenced; orders p0 on [1, 2, 3], led by 1."""
    log = Log()
    for b in (1, 2, 3):
        log.register(b, rack=f"r{b}")
        log.change(broker_who(b, "BrokerHeartbeat"), b, fenced=UNFENCE)
    log.write(
        Who(2, "admin:token/ops", "CreateTopics"),
        TopicRecord(name="orders", topic_id=TOPIC_ID),
        PartitionRecord(
            partition_id=0, topic_id=TOPIC_ID, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1
        ),
    )
    return log


def shrink(log: Log, who: Who | None, **change) -> int:
    return log.write(who, PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, **change))


# ---------------------------------------------------------------- brokers


def test_fenced_by_an_expired_session_says_so_with_the_fence_offset():
    log = three_brokers()
    shrink(log, FENCER, isr=(1, 2))
    fence_at = log.change(FENCER, 3, fenced=FENCE)
    session = SessionFacts(12_500, 9000, True, 40, -1)
    answer = log.explain_broker(3, X.ControllerFacts((), session, "node 1 is the active one"))
    assert answer["state"] == "fenced"
    fence = answer["events"][0]
    assert (fence["offset"], fence["event"], fence["rule"]) == (
        fence_at, "fenced", "kip-631.session-expired",
    )  # fmt: skip
    assert fence["cause"] == (
        "session expired: no heartbeat within 9000 ms, the controller fenced it"
    )
    assert answer["summary"].startswith(f"Broker 3 is fenced since offset {fence_at} (")
    assert "session expired" in answer["summary"]
    assert [e["event"] for e in answer["events"]] == ["fenced", "unfenced", "registered"]
    assert answer["session"] == {
        "lastHeartbeatMs": T0 + 60_000 - 12_500,
        "sinceLastHeartbeatMs": 12_500,
        "sessionTimeoutMs": 9000,
        "expiresInMs": -3500,
        "heardByThisController": True,
        "metadataOffset": 40,
        "controlledShutdownOffset": None,
    }
    reg = answer["registration"]
    assert (reg["offset"], reg["brokerEpoch"], reg["rack"]) == (4, 3, "r3")
    assert reg["who"] == {"principal": "broker:cert/CN=kafka-3", "api": "RegisterBroker"}
    assert answer["refusals"] == [] and answer["controlledShutdown"] is None


def test_fenced_since_registration_until_its_heartbeat_catches_up():
    log = three_brokers()
    at = log.register(7)
    answer = log.explain_broker(7, FOLLOWER_FACTS)
    assert answer["state"] == "fenced"
    assert answer["summary"].startswith(f"Broker 7 is fenced since it registered at offset {at}")
    assert "caught up" in answer["summary"]
    assert answer["session"] is None and answer["refusals"] is None
    assert answer["refusalsFrom"] == FOLLOWER_FACTS.source


def test_fenced_at_its_own_request_and_by_an_operator():
    log = three_brokers()
    log.change(broker_who(2, "BrokerHeartbeat"), 2, fenced=FENCE)
    assert "asked to be fenced" in log.explain_broker(2)["events"][0]["cause"]
    log.change(Who(1, "admin:token/ops", "SomeAdminApi"), 1, fenced=FENCE)
    assert log.explain_broker(1)["events"][0]["cause"] == "admin:token/ops fenced it (SomeAdminApi)"
    log.change(None, 3, fenced=FENCE)
    assert "before who was recorded" in log.explain_broker(3)["events"][0]["cause"]


def test_controlled_shutdown_names_what_it_still_leads_then_its_end():
    log = three_brokers()
    at = log.change(broker_who(1, "BrokerHeartbeat"), 1, shutdown=IN_CONTROLLED_SHUTDOWN)
    answer = log.explain_broker(1)
    assert answer["state"] == "controlledShutdown"
    shutdown = answer["controlledShutdown"]
    assert shutdown["since"] == {"offset": at, "timeMs": log.entries[at].timestamp_ms}
    assert shutdown["leaderOf"] == [{"topic": "orders", "partition": 0}]
    assert shutdown["leaderOfCount"] == 1 and "still leads 1" in shutdown["why"]
    shrink(log, broker_who(1, "BrokerHeartbeat"), leader=2, isr=(2, 3))
    assert log.explain_broker(1)["controlledShutdown"]["leaderOfCount"] == 0
    log.change(broker_who(1, "BrokerHeartbeat"), 1, fenced=FENCE)
    answer = log.explain_broker(1)
    assert answer["state"] == "fenced"
    assert "controlled shutdown finished" in answer["events"][0]["cause"]
    assert "finished" in answer["controlledShutdown"]["why"]


def test_unregistered_and_never_seen():
    log = three_brokers()
    at = log.write(OPERATOR, UnregisterBrokerRecord(broker_id=2, broker_epoch=2))
    answer = log.explain_broker(2)
    assert (answer["state"], answer["registration"]) == ("unregistered", None)
    assert answer["summary"] == (
        f"Broker 2 is not registered: unregistered by admin:token/ops at offset {at} "
        f"({X._when(log.entries[at].timestamp_ms)})."
    )
    with pytest.raises(X.NotFound, match="broker 9 is not registered, and the last 9 records"):
        log.explain_broker(9)


def test_a_registration_older_than_the_look_back_is_read_at_its_offset():
    log = three_brokers()
    for _ in range(30):
        shrink(log, FENCER, isr=(1, 2))
    answer = log.explain_broker(3, max_scanned=10)
    assert answer["lookBack"]["ended"] == "budget" and answer["lookBack"]["scanned"] == 10
    assert answer["events"] == []
    assert answer["registration"]["timeMs"] == log.entries[4].timestamp_ms
    assert answer["summary"] == "Broker 3 is unfenced (active): it may lead and join ISRs."


def test_look_back_stops_at_the_oldest_kept_record_and_at_enough():
    log = three_brokers()
    log.oldest = 5  # broker 3's registration (offset 4) is gone
    answer = log.explain_broker(3)
    assert answer["lookBack"] == {
        "fromOffset": 5, "toOffset": log.image.next_offset, "scanned": log.image.next_offset - 5,
        "ended": "oldest",
        "why": f"looked back from offset {log.image.next_offset - 1} to 5: reached the oldest "
        "record this voter keeps",
    }  # fmt: skip
    assert [e["event"] for e in answer["events"]] == ["unfenced"]
    log.oldest = 0
    for _ in range(X.HISTORY_LIMIT + 5):
        log.change(broker_who(3, "BrokerHeartbeat"), 3, fenced=FENCE)
    answer = log.explain_broker(3)
    assert len(answer["events"]) == X.HISTORY_LIMIT and answer["lookBack"]["ended"] == "enough"


def test_payload_filter_finds_what_decoding_every_batch_finds(monkeypatch):
    """PAYLOAD_FILTER's twin: decoding every batch finds the same entries,
    for every broker (ids 1, 10, 11: a needle that is a prefix of another
    id's)
    and partition, whole or cut short by the budget or the oldest kept."""
    log = three_brokers()
    for b in (10, 11):
        log.register(b)
    log.write(
        None,
        *(PartitionRecord(partition_id=p, topic_id=TOPIC_ID, replicas=(1, 10, 11), isr=(1,),
                          leader=1) for p in range(1, 12)),
    )  # fmt: skip
    for p in (1, 10, 11, 0):
        shrink_to = (1, 10) if p else (1, 2)
        log.write(FENCER, PartitionChangeRecord(partition_id=p, topic_id=TOPIC_ID, isr=shrink_to))
        log.change(FENCER, 11, fenced=FENCE)
        log.change(broker_who(1, "BrokerHeartbeat"), 10, fenced=UNFENCE)

    def scans(wanted):
        for oldest, budget in ((0, X.MAX_SCANNED), (0, 7), (9, X.MAX_SCANNED), (9, 12)):
            log.oldest = oldest
            yield X.scan_back(log.read, log.image.next_offset, wanted, 3, budget, stored=log.stored)

    targets = [X.BrokerRecords(b) for b in (1, 2, 3, 10, 11, 12)]
    targets += [X.PartitionRecords(TOPIC_ID, p) for p in (0, 1, 10, 11, 12)]
    found = 0
    for wanted in targets:
        fast = list(scans(wanted))
        found += sum(len(entries) for entries, _ in fast)
        monkeypatch.setattr(X, "PAYLOAD_FILTER", False)
        plain = list(scans(wanted))
        monkeypatch.setattr(X, "PAYLOAD_FILTER", True)
        assert fast == plain, wanted.needles
    assert found > 40  # not vacuous


# ---------------------------------------------------------------- partitions


def test_offline_with_its_fenced_replicas_and_their_rules():
    log = three_brokers()
    shrink(log, FENCER, isr=(1,))
    log.change(FENCER, 2, fenced=FENCE)
    log.change(FENCER, 3, fenced=FENCE)
    shrink(log, FENCER, leader=NO_LEADER)
    log.change(FENCER, 1, fenced=FENCE)
    answer = log.explain_partition(0)
    assert answer["status"] == ["offline", "underReplicated", "underMinIsr"]
    assert answer["reasons"][0] == (
        "Offline: no leader; no ISR member can lead: 1: broker 1 is fenced: it may not lead nor "
        "join the ISR."
    )
    assert len(answer["reasons"]) == 3
    assert {r["brokerId"]: r["rule"] for r in answer["replicaStates"]} == {
        1: "kip-841.replica-fenced", 2: "kip-841.replica-fenced", 3: "kip-841.replica-fenced",
    }  # fmt: skip
    assert not any(r["eligible"] for r in answer["replicaStates"])


def test_under_min_isr_shutting_down_and_not_preferred():
    log = three_brokers()
    log.change(broker_who(1, "BrokerHeartbeat"), 1, shutdown=IN_CONTROLLED_SHUTDOWN)
    shrink(log, broker_who(1, "BrokerHeartbeat"), leader=2, isr=(2,))
    answer = log.explain_partition(0)
    assert answer["status"] == ["online", "underReplicated", "underMinIsr", "leaderNotPreferred"]
    states = {r["brokerId"]: r for r in answer["replicaStates"]}
    assert states[1]["rule"] == "kip-841.replica-in-controlled-shutdown"
    assert states[1]["brokerState"] == "controlledShutdown"
    assert states[3]["eligible"] and states[3]["rule"] is None
    assert "active but not in the ISR" in states[3]["why"]
    assert answer["reasons"][1].startswith("Under min ISR: 1 in the ISR, min.insync.replicas is 2")
    assert answer["reasons"][2].startswith("Led by 2, not by its preferred replica 1 (broker 1 is")


def test_reassigning_and_an_unregistered_replica():
    log = three_brokers()
    log.write(OPERATOR, UnregisterBrokerRecord(broker_id=3, broker_epoch=3))
    shrink(log, OPERATOR, replicas=(1, 2, 3, 4), adding_replicas=(4,), isr=(1, 2))
    answer = log.explain_partition(0, min_isr=1)
    assert answer["status"] == ["online", "underReplicated", "reassigning"]
    assert answer["reasons"][1] == (
        "Reassigning: adding [4], removing [none]; it completes when the new replicas join the ISR."
    )
    states = {r["brokerId"]: r for r in answer["replicaStates"]}
    assert states[3]["rule"] == states[4]["rule"] == "kip-841.replica-not-registered"


def test_history_is_worked_back_exactly_and_says_what_it_cannot_know():
    log = three_brokers()
    shrink(log, FENCER, isr=(1, 2))  # partition epoch 1
    shrink(log, FENCER, leader=2, isr=(2,))  # leader epoch 1, partition epoch 2
    answer = log.explain_partition(0)
    assert [
        (h["change"], h["leader"], h["isr"], h["leaderEpoch"], h["partitionEpoch"])
        for h in answer["history"]
    ] == [
        ("changed", 2, [2], 1, 2),
        ("changed", 1, [1, 2], 0, 1),
        ("created", 1, [1, 2, 3], 0, 0),
    ]
    log.oldest = log.image.next_offset - 2  # the creation is gone: who led before is not known
    newest, older = log.explain_partition(0)["history"]
    assert (newest["leader"], newest["isr"], newest["leaderEpoch"]) == (2, [2], 1)
    assert (older["leader"], older["isr"], older["leaderEpoch"]) == (None, [1, 2], 0)


def test_the_last_refused_alter_partition_and_unknown_partitions():
    log = three_brokers()
    refused = Refusal(T0, "AlterPartition", "kip-841.replica-fenced", Errors.INELIGIBLE_REPLICA,
                      "broker 3 is fenced", 1, "orders", 0)  # fmt: skip
    other = Refusal(T0 + 1, "ElectLeaders", "elect.election-not-needed", Errors.ELECTION_NOT_NEEDED,
                    None, None, "orders", 0)  # fmt: skip
    answer = log.explain_partition(0, facts=X.ControllerFacts((other, refused), None, "here"))
    assert answer["lastRefusedAlterPartition"]["rule"] == "kip-841.replica-fenced"
    assert [r["api"] for r in answer["refusals"]] == ["ElectLeaders", "AlterPartition"]
    with pytest.raises(X.NotFound, match="no topic 'nope'"):
        X.find_partition(log.image, "nope", 0)
    with pytest.raises(X.NotFound, match="has no partition 4: it has 1, 0-0"):
        X.find_partition(log.image, "orders", 4)


# ---------------------------------------------------------------- properties

BROKER_STATES = st.sampled_from(["gone", "unfenced", "fenced", "shutdown"])


@st.composite
def partitions(draw):
    ids = draw(st.lists(st.integers(1, 8), min_size=1, max_size=5, unique=True))
    states = {b: draw(BROKER_STATES) for b in ids}
    isr = tuple(b for b in ids if draw(st.booleans()))
    leader = draw(st.sampled_from([NO_LEADER, *isr])) if isr else NO_LEADER
    elr = tuple(b for b in ids if b not in isr and draw(st.booleans()))
    brokers = {
        b: BrokerRegistration(b, "x", b, (), (), None, s == "fenced", s == "shutdown", b)
        for b, s in states.items()
        if s != "gone"
    }
    part = PartitionRegistration(tuple(ids), isr, (), (), leader, 0, 0, 0, elr, ())
    return brokers, part, draw(st.integers(1, 4))


@settings(max_examples=300, deadline=None)
@given(partitions())
def test_status_and_eligibility_follow_the_rules(drawn):
    brokers, part, min_isr = drawn
    log = Log()
    log.write(None, TopicRecord(name="orders", topic_id=TOPIC_ID), part.to_record(TOPIC_ID, 0))
    image = log.image._replace(brokers=brokers)
    answer = X.explain_partition(image, "orders", 0, min_isr, [], X.LookBack(0, 2, 2, "oldest"),
                                 FOLLOWER_FACTS)  # fmt: skip
    status = answer["status"]
    assert ("offline" in status) == (part.leader == NO_LEADER) != ("online" in status)
    assert set(status) <= set(X.STATUSES)
    assert len(answer["reasons"]) == len(status) - ("online" in status)
    assert ("underMinIsr" in status) == (len(part.isr) < min_isr)
    for r in answer["replicaStates"]:
        reg = brokers.get(r["brokerId"])
        assert r["eligible"] == (reg is not None and reg.active)
        assert r["eligible"] == (r["rule"] is None)
        assert r["rule"] is None or r["rule"] in RULES
