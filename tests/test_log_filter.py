"""api/log_filter.py, pure: what brokerId and topic match, learned in
offset order from the records a scan meets, and the scan's bound."""

from __future__ import annotations

from api import log_filter
from api.log_filter import LogFilter, scan
from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    Who,
)
from quorum.record_log import LogEntry

T1, T2 = "zBTExEswSU63HSkHIAXA_A", "b4Qu2DxXQvWv1CK6Rnh0Zw"
FENCER = Who(1, "controller", "FenceExpiredSessions", rule="kip-631.session-expired")


def entries(*records, who=None) -> list[LogEntry]:
    return [LogEntry(i, 1_000 + i, 1, r, 0, who) for i, r in enumerate(records)]


def matched(f: LogFilter, log: list[LogEntry]) -> list[int]:
    return [e.offset for e in log if f.matches(e)]


def test_broker_matches_records_that_move_it_in_or_out_and_its_own():
    log = entries(
        TopicRecord(name="orders", topic_id=T1),
        PartitionRecord(partition_id=0, topic_id=T1, replicas=(1, 2, 7), isr=(1, 2, 7), leader=7),
        PartitionRecord(partition_id=1, topic_id=T1, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1),
        PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1, 2), leader=1),  # 7 out
        PartitionChangeRecord(partition_id=1, topic_id=T1, isr=(1, 2)),  # 7 never there
        BrokerRegistrationChangeRecord(broker_id=7, broker_epoch=5, fenced=1),
        PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1,)),  # 7 out already
        PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1, 7)),  # 7 back in
    )
    assert matched(LogFilter.parse(EMPTY_IMAGE, broker_id=7), log) == [1, 3, 5, 7]
    assert matched(LogFilter.parse(EMPTY_IMAGE, broker_id=3), log) == [2, 4]


def test_a_change_the_scan_has_no_before_for_matches_the_brokers_it_may_have_moved():
    """Without the partition's earlier record (the scan began after it) and
    with nothing in the image, only what the change names is known."""
    log = entries(PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1, 2), leader=1))
    assert matched(LogFilter.parse(EMPTY_IMAGE, broker_id=7), log) == []
    assert matched(LogFilter.parse(EMPTY_IMAGE, broker_id=2), log) == [0]


def test_topic_matches_by_name_and_by_every_id_the_name_had():
    log = entries(
        TopicRecord(name="orders", topic_id=T1),
        PartitionRecord(partition_id=0, topic_id=T1, replicas=(1,), isr=(1,), leader=1),
        RemoveTopicRecord(topic_id=T1),
        TopicRecord(name="other", topic_id=T2),
        TopicRecord(name="orders", topic_id=T2[::-1]),  # created again: a new id
        PartitionChangeRecord(partition_id=0, topic_id=T2[::-1], isr=(1,)),
        PartitionChangeRecord(partition_id=0, topic_id=T2, isr=(1,)),
    )
    assert matched(LogFilter.parse(EMPTY_IMAGE, topic="orders"), log) == [0, 1, 2, 4, 5]


def test_who_and_time_filters_and_every_filter_must_hold():
    log = entries(
        TopicRecord(name="orders", topic_id=T1),
        BrokerRegistrationChangeRecord(broker_id=7, broker_epoch=5, fenced=1),
        who=FENCER,
    ) + [LogEntry(2, 1_002, 1, TopicRecord(name="x", topic_id=T2), 2, None)]
    assert matched(LogFilter.parse(EMPTY_IMAGE, principal="controller"), log) == [0, 1]
    assert matched(LogFilter.parse(EMPTY_IMAGE, principal="controller", broker_id=7), log) == [1]
    assert matched(LogFilter.parse(EMPTY_IMAGE, api="FenceExpiredSessions"), log) == [0, 1]
    assert matched(LogFilter.parse(EMPTY_IMAGE, since="1001", until="1002"), log) == [1]
    assert matched(LogFilter.parse(EMPTY_IMAGE, since="1970-01-01T00:00:01.001Z"), log) == [1, 2]


def test_a_scan_stops_at_its_bound_and_says_where(monkeypatch):
    monkeypatch.setattr(log_filter, "MAX_SCANNED_RECORDS", 5)
    log = entries(*(TopicRecord(name=f"t{i}", topic_id=T1) for i in range(12)))

    def read(offset, count, remember):
        assert remember is False  # a scan does not push the followers' tail out
        return log[offset : offset + count]

    nothing = LogFilter.parse(EMPTY_IMAGE, topic="absent")
    assert scan(read, nothing, 0, 100, 12) == ([], 5)
    assert scan(read, nothing, 10, 100, 12) == ([], 12)
    some = LogFilter.parse(EMPTY_IMAGE, principal="controller")
    assert scan(read, some, 0, 100, 12) == ([], 5)
    everything = LogFilter.parse(EMPTY_IMAGE, since="0")
    found, next_offset = scan(read, everything, 3, 2, 12)
    assert [e.offset for e in found] == [3, 4] and next_offset == 5
