"""quorum/record_log.py: batches kept as their encoded bytes, read back as
records at any offset, trimmed in whole batches, the tail kept decoded."""

import pytest

from metadata_records.codec import encode_batch
from metadata_records.records import Batch, NoOpRecord, PartitionChangeRecord
from quorum.record_log import OffsetTooOld, RecordLog

TOPIC = "fPZv1VBsRFmnlRvmGcOW9w"


def batch(first: int, size: int) -> Batch:
    records = tuple(PartitionChangeRecord(first + k, TOPIC, isr=(1, 2)) for k in range(size))
    return Batch(3, 1_000 + first, records, first)


def filled(sizes, retention=1_000_000, first=0) -> tuple[RecordLog, dict]:
    log, records = RecordLog(retention), {}
    for size in sizes:
        b = batch(first, size)
        log.append(b, first, encode_batch(b))
        for k, r in enumerate(b.records):
            records[first + k] = (b.timestamp_ms, r)
        first += size
    return log, records


@pytest.mark.parametrize("start,count", [(0, 1), (0, 100), (3, 4), (5, 1), (9, 30), (31, 5)])
def test_any_offset_reads_the_records_from_there_across_batches(start, count):
    log, records = filled([5, 1, 20, 10])
    entries = log.read(start, count)
    expected = [o for o in range(start, min(36, start + count))]
    assert [e.offset for e in entries] == expected
    firsts = [0, 5, 6, 26]  # where the batches of sizes 5, 1, 20, 10 begin
    for e in entries:
        assert (e.timestamp_ms, e.record) == records[e.offset] and e.controller_epoch == 3
        assert e.batch_offset == max(f for f in firsts if f <= e.offset)
    assert log.next_offset == 36 and log.read(36, 10) == [] and log.read(99, 10) == []


def test_batches_older_than_the_decoded_tail_are_decoded_from_their_bytes():
    log, records = filled([3] * (RecordLog.DECODED_KEPT + 10))
    assert len(log._decoded) == RecordLog.DECODED_KEPT
    old = log.read(0, 9)  # the first three batches were dropped from the decoded tail
    assert [(e.timestamp_ms, e.record) for e in old] == [records[o] for o in range(9)]


def test_the_decoded_tail_holds_at_most_its_records_and_a_big_batch_is_never_kept():
    """Large batches (a CreatePartitions of 10,000) kept decoded were
    hundreds of thousands of objects that every full collection walked."""
    size = RecordLog.DECODED_RECORDS_KEPT // 4 + 1
    log, records = filled([size] * 6 + [RecordLog.DECODED_RECORDS_KEPT + 1, 2])
    assert sum(len(b.records) for b in log._decoded.values()) == log._decoded_records
    assert log._decoded_records <= RecordLog.DECODED_RECORDS_KEPT
    assert list(log._decoded) == [3 * size, 4 * size, 5 * size, log.next_offset - 2]
    big = 6 * size
    got = log.read(big, 3)  # the big batch: decoded from its bytes, and not kept
    assert [(e.timestamp_ms, e.record) for e in got] == [records[o] for o in range(big, big + 3)]
    assert big not in log._decoded
    log.read(0, 1)  # an old batch read is kept; the oldest decoded make room
    assert 0 in log._decoded and log._decoded_records <= RecordLog.DECODED_RECORDS_KEPT


def test_trimming_keeps_at_least_the_retention_in_whole_batches():
    log, _ = filled([10] * 40, retention=100)
    assert log.oldest_offset % 10 == 0
    assert 100 <= log.next_offset - log.oldest_offset <= 125 + 10
    with pytest.raises(OffsetTooOld) as e:
        log.read(log.oldest_offset - 1, 5)
    assert e.value.oldest == log.oldest_offset
    assert log.read(log.oldest_offset, 1)[0].offset == log.oldest_offset


def test_a_reset_starts_from_a_snapshot_offset_and_a_gap_restarts_the_log():
    log, _ = filled([4, 4])
    log.reset(500)
    assert log.oldest_offset == 500 and log.next_offset == 500 and log.read(500, 5) == []
    b = batch(700, 2)  # not where the log ends: it starts again there
    log.append(b, 700, encode_batch(b))
    assert log.oldest_offset == 700 and [e.offset for e in log.read(700, 5)] == [700, 701]
    empty = Batch(3, 0, (), 702)
    log.append(empty, 702, encode_batch(empty))
    assert log.next_offset == 702


def test_noop_batches_are_kept_like_any_other():
    log = RecordLog()
    b = Batch(1, 5, (NoOpRecord(), NoOpRecord()), 0)
    log.append(b, 0, encode_batch(b))
    assert [e.record for e in log.read(0, 5)] == [NoOpRecord(), NoOpRecord()]
