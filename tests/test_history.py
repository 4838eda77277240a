"""The history store (quorum/history.py) and the images it builds
(quorum/history_images.py): an image at any offset equals a plain replay of
the log up to it; gaps, torn writes, retention and a full disk."""

from __future__ import annotations

import errno
import os
import tempfile
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata_records.codec import encode_batch
from metadata_records.delta import apply_records
from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import Batch, NoOpRecord, TopicRecord
from metadata_records.snapshot import image_digest
from metadata_records.uuids import uuid_from_bytes
from quorum import history as history_module
from quorum.history import HistoryWriter, Retention, SegmentIndex, list_files
from quorum.history_images import HistoryReader, OffsetBeyondWindow, OffsetNotCommitted
from quorum.state_machine import write_snapshot_file
from tests.test_delta import records as random_records

NO_RAFT = ((b"", 1, 1), (b"", 0, 1), [])
T0 = 1_795_000_000_000


DEFAULT = Retention()


def write_log(path, batches, checkpoints=(), retention=DEFAULT, clock=lambda: T0):
    """Writes ``batches`` (lists of records, one batch each, one second
    apart from T0) and checkpoints (batch indexes: the image before that
    batch) through a HistoryWriter; returns every record in order."""
    writer = HistoryWriter(path, retention, clock_ms=clock)
    writer.start()
    log, image = [], EMPTY_IMAGE
    for i, batch in enumerate(batches):
        if i in checkpoints:
            snapshot = os.path.join(path, "..", f"snap-{i}")
            write_snapshot_file(snapshot, image, *NO_RAFT)
            writer.checkpoint(snapshot, image.next_offset)
        payload = encode_batch(Batch(0, T0 + 1000 * i, tuple(batch)))
        writer.append(len(log), len(batch), T0 + 1000 * i, payload)
        log += batch
        image = apply_records(image, batch)
    writer.close()
    return log


def plain_digest(log, offset):
    return image_digest(apply_records(EMPTY_IMAGE, log[: offset + 1]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(st.lists(random_records, min_size=1, max_size=5), min_size=1, max_size=25),
    data=st.data(),
)
def test_image_at_any_offset_equals_a_plain_replay(batches, data) -> None:
    checkpoints = data.draw(st.sets(st.integers(0, len(batches) - 1), max_size=3))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "history")
        log = write_log(path, batches, checkpoints)
        reader = HistoryReader(path, Retention(), clock_ms=lambda: T0)
        offsets = data.draw(st.lists(st.integers(0, len(log) - 1), min_size=1, max_size=4))
        for offset in offsets:  # in any order: built from checkpoints or the cache
            image, stamp = reader.image_after(offset)
            assert image.next_offset == offset + 1
            assert image_digest(image) == plain_digest(log, offset)
            batch_index = next(i for i, end in enumerate(_ends(batches)) if end > offset)
            assert stamp == T0 + 1000 * batch_index
        with pytest.raises(OffsetNotCommitted):
            reader.image_after(len(log))


@pytest.mark.parametrize("pause_every", [0, 3])
def test_the_store_holds_the_same_files_with_and_without_the_linger(
    tmp_path, monkeypatch, pause_every
) -> None:
    """The linger (speed switch LINGER) changes when the writer looks, never
    what it writes: the same batches and checkpoints give the same files,
    whether they come at once or with pauses that let the writer catch up
    (and linger) between them."""
    batches = topics(20)
    checkpoints = {5, 12}
    held = {}
    for linger in (False, True):
        monkeypatch.setattr(history_module, "LINGER", linger)
        path = str(tmp_path / f"linger-{linger}")
        writer = HistoryWriter(path, DEFAULT, clock_ms=lambda: T0)
        writer.start()
        image, next_offset = EMPTY_IMAGE, 0
        for i, batch in enumerate(batches):
            if i in checkpoints:
                snapshot = str(tmp_path / f"snap-{linger}-{i}")
                write_snapshot_file(snapshot, image, *NO_RAFT)
                writer.checkpoint(snapshot, image.next_offset)
            payload = encode_batch(Batch(0, T0 + i, tuple(batch)))
            writer.append(next_offset, len(batch), T0 + i, payload)
            next_offset += len(batch)
            image = apply_records(image, batch)
            if pause_every and i % pause_every == 0:
                reader = HistoryReader(path, DEFAULT, clock_ms=lambda: T0)
                deadline = time.monotonic() + 10
                while reader.timestamp_of(next_offset - 1) is None:
                    assert time.monotonic() < deadline, f"batch {i} never written"
                    time.sleep(0.001)
        writer.close()
        held[linger] = {
            name: open(os.path.join(path, name), "rb").read() for name in os.listdir(path)
        }
    assert sorted(held[True]) == sorted(held[False])
    assert any(name.startswith("ckpt-") for name in held[True])
    assert held[True] == held[False]


def _ends(batches):
    end = 0
    for batch in batches:
        end += len(batch)
        yield end


def topics(n: int, start: int = 0) -> list[list]:
    return [
        [TopicRecord(name=f"t{i}", topic_id=uuid_from_bytes((i + 1).to_bytes(16, "big")))]
        for i in range(start, start + n)
    ]


def test_a_gap_is_never_crossed(tmp_path) -> None:
    """Batches 0..9, then (the writer fell behind) a snapshot at 15 and
    batches from 15: served from 14 on only."""
    path = str(tmp_path / "history")
    writer = HistoryWriter(path, Retention(), clock_ms=lambda: T0)
    writer.start()
    log, image = [], EMPTY_IMAGE
    for i, batch in enumerate(topics(20)):
        if i == 15:
            write_snapshot_file(str(tmp_path / "snap"), image, *NO_RAFT)
            writer.checkpoint(str(tmp_path / "snap"), 15)
        if not 10 <= i < 15:
            writer.append(i, 1, T0 + i, encode_batch(Batch(0, T0 + i, tuple(batch))))
        log += batch
        image = apply_records(image, batch)
    writer.close()
    reader = HistoryReader(path, Retention(), clock_ms=lambda: T0)
    assert reader.window() == (14, 20)
    for offset in (14, 15, 19):
        assert image_digest(reader.image_after(offset)[0]) == plain_digest(log, offset)
    with pytest.raises(OffsetBeyondWindow) as e:
        reader.image_after(5)
    assert e.value.oldest == 14
    # What lies before the gap is of no use: trimmed.
    assert [first for first, _ in list_files(path)[0]] == [15]


def test_a_torn_write_is_cut_and_a_restart_goes_on(tmp_path) -> None:
    path = str(tmp_path / "history")
    log = write_log(path, topics(6))
    ((first, segment),) = list_files(path)[0]
    size = os.path.getsize(segment)
    with open(segment, "r+b") as f:
        f.truncate(size - 3)  # the last frame torn
    reader = HistoryReader(path, Retention(), clock_ms=lambda: T0)
    assert reader.window() == (0, 5)
    # A restart: the writer cuts the torn frame; the journal replays batches
    # 3.. again, the ones it holds are skipped.
    writer = HistoryWriter(path, Retention(), clock_ms=lambda: T0)
    writer.start()
    more = topics(4, start=6)
    for i, batch in enumerate(topics(6)[3:] + more, start=3):
        writer.append(i, 1, T0 + i, encode_batch(Batch(0, T0 + i, tuple(batch))))
    writer.close()
    log = log + [r for b in more for r in b]
    reader = HistoryReader(path, Retention(), clock_ms=lambda: T0)
    assert reader.window() == (0, 10)
    for offset in range(10):
        assert image_digest(reader.image_after(offset)[0]) == plain_digest(log, offset)


def test_retention_trims_whole_segments_and_keeps_the_base(tmp_path) -> None:
    """A window of 8 records: segments of one record each; the checkpoint at
    10 is the base of the oldest offsets served, older ones go."""
    path = str(tmp_path / "history")
    retention = Retention(records=8)
    log = write_log(path, topics(30), checkpoints={5, 10, 25}, retention=retention)
    reader = HistoryReader(path, retention, clock_ms=lambda: T0)
    oldest, end = reader.window()
    assert (oldest, end) == (22, 30)
    with pytest.raises(OffsetBeyondWindow) as e:
        reader.image_after(21)
    assert e.value.oldest == 22
    assert image_digest(reader.image_after(22)[0]) == plain_digest(log, 22)
    segments, checkpoints = list_files(path)
    assert [c for c, _ in checkpoints] == [10, 25]  # 10: the base of offsets 22..24
    assert segments[0][0] == 10


def test_retention_in_time(tmp_path) -> None:
    path = str(tmp_path / "history")
    retention = Retention(ms=5_000)
    now = T0 + 20_000  # batch i is stamped T0 + 1000 i
    log = write_log(path, topics(20), retention=retention, clock=lambda: now)
    reader = HistoryReader(path, retention, clock_ms=lambda: now)
    assert reader.window()[0] == 15  # stamped at or after now - 5 s
    assert reader.offset_at(T0 + 17_500) == 17
    with pytest.raises(OffsetBeyondWindow):
        reader.offset_at(T0 + 3_000)
    assert image_digest(reader.image_after(17)[0]) == plain_digest(log, 17)


def test_a_full_disk_fails_history_soft(tmp_path, caplog) -> None:
    path = str(tmp_path / "history")
    writer = HistoryWriter(path, Retention(), clock_ms=lambda: T0)
    writer.start()
    for i in range(3):
        writer.append(i, 1, T0, encode_batch(Batch(0, T0, (NoOpRecord(),))))
    writer.close()

    class FullDisk:
        def __init__(self, f) -> None:
            self.f = f

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

    writer = HistoryWriter(path, Retention(), clock_ms=lambda: T0)
    writer._open()
    writer._write_batch(3, 1, T0, encode_batch(Batch(0, T0, (NoOpRecord(),))))  # opens a file
    writer._file = FullDisk(writer._file)
    writer._write_batch(4, 1, T0, encode_batch(Batch(0, T0, (NoOpRecord(),))))
    assert writer.write_failures == 1
    assert "disk full" in caplog.text and "To fix" in caplog.text
    writer._write_batch(5, 1, T0, encode_batch(Batch(0, T0, (NoOpRecord(),))))
    writer._close_segment()
    reader = HistoryReader(path, Retention(), clock_ms=lambda: T0)
    # Offset 4 was lost: with no checkpoint after it, nothing is servable past the gap.
    with pytest.raises(LookupError):
        reader.image_after(5)


def test_a_flush_cut_short_by_a_full_disk_leaves_whole_frames(tmp_path, caplog) -> None:
    """The buffered writes land on disk only at the flush: a full disk there
    may write part of a frame. The segment is cut at its last whole frame,
    and the next batch starts a new segment after the gap."""
    path = str(tmp_path / "history")
    noop = encode_batch(Batch(0, T0, (NoOpRecord(),)))

    class PartialFlush:
        def __init__(self, f) -> None:
            self.f, self.pending = f, b""

        def write(self, data):
            self.pending += data

        def flush(self):
            self.f.write(self.pending[: len(self.pending) - 5])
            self.f.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

    writer = HistoryWriter(path, Retention(), clock_ms=lambda: T0)
    writer._open()
    writer._write_batch(0, 1, T0, noop)
    writer._flush()
    writer._file = PartialFlush(writer._file)
    writer._write_batch(1, 1, T0, noop)
    writer._write_batch(2, 1, T0, noop)
    writer._flush()
    assert writer.write_failures == 1 and "disk full" in caplog.text
    assert writer._end == 2, "batch 1 reached the disk whole, batch 2 did not"
    ((_, segment),) = list_files(path)[0]
    on_disk = SegmentIndex(segment)
    assert on_disk.scan() and list(on_disk.firsts) == [0, 1], "cut at the last whole frame"
    writer._write_batch(3, 1, T0, noop)
    writer._close_segment()
    assert [first for first, _ in list_files(path)[0]] == [3], "a new run after the gap"


def test_checkpoints_are_thinned_to_one_per_eighth_of_the_window(tmp_path) -> None:
    """Window 80 records: a checkpoint fewer than 10 records after a kept one
    is dropped; images still equal a replay."""
    path = str(tmp_path / "history")
    log = write_log(path, topics(30), checkpoints={5, 8, 12, 20}, retention=Retention(records=80))
    assert [c for c, _ in list_files(path)[1]] == [5, 20]
    reader = HistoryReader(path, Retention(records=80), clock_ms=lambda: T0)
    for offset in (0, 7, 13, 29):
        assert image_digest(reader.image_after(offset)[0]) == plain_digest(log, offset)


def test_the_caches_are_let_go_when_idle(tmp_path) -> None:
    path = str(tmp_path / "history")
    log = write_log(path, topics(10), checkpoints={4})
    reader = HistoryReader(path, Retention(), clock_ms=lambda: T0)
    reader.idle_s = 0.05
    assert image_digest(reader.image_after(8)[0]) == plain_digest(log, 8)
    assert reader._images and reader._checkpoints
    deadline = time.monotonic() + 10
    while (reader._images or reader._checkpoints) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not reader._images and not reader._checkpoints
    assert image_digest(reader.image_after(8)[0]) == plain_digest(log, 8)


def test_batches_that_differ_from_the_log_are_cut(tmp_path) -> None:
    """A recover drops entries its voter had applied (and kept in history):
    the new batches at those offsets replace them, and checkpoints past the
    cut go."""
    path = str(tmp_path / "history")
    write_log(path, topics(10), checkpoints={8})
    writer = HistoryWriter(path, Retention(), clock_ms=lambda: T0)
    writer.start()
    image = apply_records(EMPTY_IMAGE, [r for b in topics(6) for r in b])
    write_snapshot_file(str(tmp_path / "seeded"), image, *NO_RAFT)
    writer.checkpoint(str(tmp_path / "seeded"), 6)
    new = topics(4, start=20)
    for i, batch in enumerate(new, start=6):
        writer.append(i, 1, T0 + i, encode_batch(Batch(0, T0 + i, tuple(batch))))
    writer.close()
    log = [r for b in topics(6) + new for r in b]
    assert [c for c, _ in list_files(path)[1]] == [6]
    reader = HistoryReader(path, Retention(), clock_ms=lambda: T0)
    for offset in (3, 6, 9):
        assert image_digest(reader.image_after(offset)[0]) == plain_digest(log, offset)


def test_at_time_takes_epoch_ms_and_iso_8601() -> None:
    from api.log_filter import parse_time

    assert parse_time("1795000000000", "atTime") == 1_795_000_000_000
    assert parse_time("2026-12-04T03:12:00Z", "atTime") == parse_time(
        "2026-12-04T03:12:00+00:00", "atTime"
    )
    assert parse_time("2026-12-04T03:12:00", "atTime") == parse_time(
        "2026-12-04T03:12:00Z", "atTime"
    )
    assert parse_time("2026-12-04T04:12:00+01:00", "atTime") == parse_time(
        "2026-12-04T03:12:00Z", "atTime"
    )
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_time("yesterday", "atTime")


def test_without_hard_links_a_checkpoint_is_copied(tmp_path, monkeypatch) -> None:
    def no_links(*_):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    path = str(tmp_path / "history")
    log = write_log(path, topics(10), checkpoints={4})
    assert [c for c, _ in list_files(path)[1]] == [4]
    assert not [n for n in os.listdir(path) if n.endswith((".part", ".pending"))]
    reader = HistoryReader(path, Retention(), clock_ms=lambda: T0)
    assert image_digest(reader.image_after(7)[0]) == plain_digest(log, 7)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(st.lists(random_records, min_size=1, max_size=5), min_size=2, max_size=20),
    data=st.data(),
)
def test_the_log_is_read_past_its_retention_from_the_history(batches, data) -> None:
    """GET /v1/log's reader: the retained log in memory for what it holds,
    the history for what it no longer holds, the same entries either way."""
    from quorum.history_images import log_reader
    from quorum.record_log import OffsetTooOld, RecordLog

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "history")
        write_log(path, batches)
        whole = RecordLog(10_000)
        short = RecordLog(1)  # keeps little: most reads go to the history
        offset = 0
        for i, batch in enumerate(batches):
            b = Batch(0, T0 + 1000 * i, tuple(batch))
            for kept in (whole, short):
                kept.append(b, offset, encode_batch(b))
            offset += len(batch)
        read = log_reader(short, HistoryReader(path, Retention(), clock_ms=lambda: T0))
        start = data.draw(st.integers(0, offset - 1))
        size = data.draw(st.integers(1, 7))
        got, at = [], start
        while at < offset:
            page = read(at, size)
            assert page and len(page) <= size
            got += page
            at = page[-1].offset + 1
        assert got == whole.read(start, offset)
        # Without a history, the same read is refused below what is retained.
        if start < short.oldest_offset:
            with pytest.raises(OffsetTooOld):
                log_reader(short, None)(start, size)
