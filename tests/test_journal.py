"""The Raft journal file: round trips, the check at start (a torn last append is
dropped, any other damage is refused with the file and offset named), the
meta file, pysyncobj's own format, and Hypothesis fuzzing of the loader."""

import os
import pickle
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pysyncobj.journal import FileJournal

from quorum.journal_format import (
    FORMAT_CHECKSUMMED,
    FORMAT_PYSYNCOBJ,
    HEADER_SIZE,
    JournalCorruptError,
    scan,
)
from quorum.raft.durability import MetaquorumJournal

ENTRIES = [(b"\x01" + bytes([i]) * (10 + 7 * i), i + 1, 1 + i // 3) for i in range(8)]


def write_journal(path, entries=ENTRIES) -> list[int]:
    """Writes ``entries``; returns each entry's byte offset."""
    journal = MetaquorumJournal(str(path), fsync=False)
    offsets = []
    for entry in entries:
        offsets.append(journal._offset)
        journal.add(*entry)
    journal.setCurrentTerm(entries[-1][2], None)
    journal._destroy()
    return offsets


def reopen(path) -> list:
    journal = MetaquorumJournal(str(path), fsync=False)
    try:
        return list(journal._entries)
    finally:
        journal._destroy()


def end_offset(path) -> int:
    with open(path, "rb") as f:
        f.seek(36)
        return struct.unpack("<I", f.read(4))[0]


def patch(path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def flip(path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0x10]))


@pytest.fixture
def journal_path(tmp_path):
    return tmp_path / "raft.journal"


def test_entries_survive_a_reopen_and_new_journals_are_checksummed(journal_path):
    write_journal(journal_path)
    assert reopen(journal_path) == ENTRIES
    with open(journal_path, "rb") as f:
        assert struct.unpack_from("<I", f.read(40), 32)[0] == FORMAT_CHECKSUMMED
    journal = MetaquorumJournal(str(journal_path), fsync=True)
    assert journal.getCurrentTerm() == ENTRIES[-1][2]
    journal.deleteEntriesFrom(5)  # a Raft truncation, then new appends
    journal.add(b"\x01new", 6, 9)
    journal.deleteEntriesTo(2)  # a compaction
    journal._destroy()
    assert reopen(journal_path) == ENTRIES[2:5] + [(b"\x01new", 6, 9)]


def test_with_fsync_changes_are_synced_once_before_they_count(journal_path, monkeypatch):
    """An append is written at once but synced only when something would count
    it (sync_pending: a follower's answer, the end of a leader's tick) or the
    commit index moves: one sync covers every change before it."""
    from quorum.raft.durability import JournalFile

    syncs = []
    real_sync = JournalFile.sync
    monkeypatch.setattr(JournalFile, "sync", lambda self: (syncs.append(1), real_sync(self)))
    journal = MetaquorumJournal(str(journal_path), fsync=True)
    base = len(syncs)
    for entry in ENTRIES[:3]:
        journal.add(*entry)
    assert len(syncs) == base  # written, not yet synced
    journal.sync_pending()
    journal.sync_pending()  # nothing new: no second sync
    assert len(syncs) == base + 1
    journal.add(*ENTRIES[3])
    journal.setRaftCommitIndex(4)  # the leader's own entries count toward a commit
    assert len(syncs) == base + 2 and not journal._dirty
    journal.deleteEntriesFrom(3)  # a truncation (from list position 3) is a change too
    journal.sync_pending()
    assert len(syncs) == base + 3
    journal._destroy()
    assert reopen(journal_path) == ENTRIES[:3]

    plain = MetaquorumJournal(str(journal_path), fsync=False)
    plain.add(*ENTRIES[3])
    plain.sync_pending()
    plain.setRaftCommitIndex(4)
    assert len(syncs) == base + 3  # fsync never: no sync at all
    plain._destroy()


def _wait_for(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def test_a_moved_commit_index_is_stored_off_the_raft_thread_at_the_end_of_the_tick(
    journal_path, monkeypatch
):
    """Moving the commit index syncs the journal but stores nothing: the meta
    file (two fsyncs) is written after end_of_tick asks, at most every
    COMMIT_INDEX_EVERY_S, by the store thread; the Raft thread never does it.
    An index that did not move is not stored again."""
    import threading

    from quorum.raft.durability import DurableMetaStorer, SyncStats, load_meta

    stored_on = []
    real_store = DurableMetaStorer.storeMeta

    def recording_store(self, meta, who_waited="the Raft thread"):
        stored_on.append(threading.current_thread().name)
        real_store(self, meta, who_waited)

    monkeypatch.setattr(DurableMetaStorer, "storeMeta", recording_store)
    meta_path = str(journal_path) + ".meta"
    journal = MetaquorumJournal(str(journal_path), fsync=True)
    for entry in ENTRIES[:3]:
        journal.add(*entry)
    stores = SyncStats.meta_stores
    journal.setRaftCommitIndex(2)
    assert SyncStats.meta_stores == stores and not journal._dirty
    journal.end_of_tick()
    _wait_for(lambda: SyncStats.meta_stores == stores + 1)
    assert load_meta(meta_path)["raftCommitIndex"] == 2
    # The same index again, as a follower hears it on every heartbeat: nothing
    # to store (an idle follower stored its meta file every 100 ms).
    for _ in range(3):
        journal.setRaftCommitIndex(2)
        time.sleep(MetaquorumJournal.COMMIT_INDEX_EVERY_S)
        journal.end_of_tick()
    journal.onOneSecondTimer()
    time.sleep(0.05)
    assert SyncStats.meta_stores == stores + 1
    monkeypatch.setattr(MetaquorumJournal, "COMMIT_INDEX_EVERY_S", 3600.0)
    journal.setRaftCommitIndex(3)
    journal.end_of_tick()
    time.sleep(0.05)
    assert SyncStats.meta_stores == stores + 1  # not due yet
    journal.onOneSecondTimer()  # pysyncobj's own timer has it stored at the latest
    _wait_for(lambda: load_meta(meta_path)["raftCommitIndex"] == 3)
    assert stored_on == ["raft-meta-store", "raft-meta-store"]
    journal.setRaftCommitIndex(4)
    journal._destroy()  # a clean stop stores the last one
    assert load_meta(meta_path)["raftCommitIndex"] == 4


def test_a_stalled_commit_index_store_holds_neither_the_raft_thread_nor_an_older_term(
    journal_path, monkeypatch
):
    """The disk stalls the background store of the commit index: the Raft
    thread goes on syncing entries; a term and vote stored meanwhile waits for
    the stalled store and is stored after it, so the file ends with the new
    term and the newest commit index."""
    import threading

    from quorum.raft.durability import DurableMetaStorer, load_meta

    gate = threading.Event()
    stalled = threading.Event()
    real_store = DurableMetaStorer.storeMeta

    def stalling_store(self, meta, who_waited="the Raft thread"):
        if threading.current_thread().name == "raft-meta-store" and not gate.is_set():
            stalled.set()
            assert gate.wait(20)
        real_store(self, meta, who_waited)

    monkeypatch.setattr(DurableMetaStorer, "storeMeta", stalling_store)
    meta_path = str(journal_path) + ".meta"
    journal = MetaquorumJournal(str(journal_path), fsync=True)
    journal.setCurrentTerm(1, None)
    journal.add(*ENTRIES[0])
    journal.setRaftCommitIndex(1)
    journal.end_of_tick()
    _wait_for(stalled.is_set)
    for entry in ENTRIES[1:4]:  # the Raft thread goes on while the store stalls
        journal.add(*entry)
        journal.end_of_tick()
    journal.setRaftCommitIndex(4)
    voted = threading.Thread(target=journal.setCurrentTerm, args=(2, "127.0.0.1:1"))
    voted.start()
    time.sleep(0.05)
    assert load_meta(meta_path)["currentTerm"] == 1  # the vote waits for the stalled store
    gate.set()
    voted.join(20)
    meta = load_meta(meta_path)
    assert meta["currentTerm"] == 2 and meta["votedForNodeId"] == "127.0.0.1:1"
    assert meta["raftCommitIndex"] == 4
    journal._destroy()
    assert reopen(journal_path) == list(ENTRIES[:4])


def test_the_file_grows_in_zero_filled_steps_and_keeps_every_entry(journal_path):
    """Appends past the zero-filled room grow the file (JournalFile.GROW_STEP
    at a time, or what a larger entry needs, and a step ahead once less than
    GROW_AHEAD_BELOW is left); every entry is read back after a reopen."""
    from quorum.raft.durability import JournalFile

    big = [(b"\x01" + bytes([i % 251]) * 70_000, i + 1, 1) for i in range(40)]
    journal = MetaquorumJournal(str(journal_path), fsync=True)
    for entry in big:
        journal.add(*entry)
    journal.sync_pending()
    end = journal._offset
    journal._destroy()
    size = os.path.getsize(journal_path)
    assert end <= size <= end + JournalFile.GROW_STEP + JournalFile.GROW_AHEAD_BELOW
    assert reopen(journal_path) == big


@pytest.mark.parametrize("ahead", [True, False])
def test_room_grown_ahead_or_by_the_append_holds_the_same_entries(journal_path, monkeypatch, ahead):
    """GROW_AHEAD (a speed switch) changes which thread fills the room, never
    what the journal holds: the same entries read back either way. With it,
    an append that finds the thread caught up never fills room itself (past
    the new file's first step); without it, the appends fill every step."""
    import threading

    from quorum.raft import durability
    from quorum.raft.durability import JournalFile

    monkeypatch.setattr(durability, "GROW_AHEAD", ahead)
    filled_by_writer: list[int] = []
    real_grow = JournalFile._grow
    writer = threading.get_ident()  # this test's thread appends

    def grow(self, needed):
        if threading.get_ident() == writer:
            filled_by_writer.append(self._size)
        return real_grow(self, needed)

    monkeypatch.setattr(JournalFile, "_grow", grow)
    entries = [(b"\x01" + bytes([i % 251]) * 30_000, i + 1, 1) for i in range(120)]
    journal = MetaquorumJournal(str(journal_path), fsync=True)
    room = journal._file
    for entry in entries:
        journal.add(*entry)
        deadline = time.monotonic() + 30
        while ahead and room._size - room._end_seen < room.GROW_AHEAD_BELOW:
            assert time.monotonic() < deadline, "the room was never grown ahead"
            time.sleep(0.001)
    journal.sync_pending()
    grown_ahead = room.grown_ahead
    journal._destroy()
    assert reopen(journal_path) == entries
    if ahead:
        assert filled_by_writer == [0], filled_by_writer  # the new file's first step
        assert grown_ahead >= 3
    else:
        assert len(filled_by_writer) >= 4 and grown_ahead == 0


def test_a_bit_flip_before_the_last_entry_is_refused_naming_file_and_offset(journal_path):
    offsets = write_journal(journal_path)
    flip(journal_path, offsets[3] + 4 + 16 + 2)  # inside entry 4's command
    with pytest.raises(JournalCorruptError) as e:
        reopen(journal_path)
    message = str(e.value)
    assert str(journal_path) in message and f"byte offset {offsets[3]}" in message
    assert "entry 4" in message and "checksum mismatch" in message
    assert "move the data dir aside" in message  # what to do next


def test_a_flipped_size_field_is_refused(journal_path):
    offsets = write_journal(journal_path)
    flip(journal_path, offsets[2] + 1)
    with pytest.raises(JournalCorruptError, match=f"byte offset {offsets[2]}"):
        reopen(journal_path)


@pytest.mark.parametrize(
    "damage",
    ["cut-mid-entry", "flip-in-last-entry", "garbage-over-its-end", "zeroed-last-entry"],
)
def test_a_torn_last_append_is_dropped_and_appends_go_on(journal_path, damage):
    offsets = write_journal(journal_path)
    last, end = offsets[-1], end_offset(journal_path)
    if damage == "cut-mid-entry":
        os.truncate(journal_path, last + (end - last) // 2)
    elif damage == "flip-in-last-entry":
        flip(journal_path, end - 6)
    elif damage == "garbage-over-its-end":
        patch(journal_path, end - 5, b"\xfe" * 5)
    else:
        patch(journal_path, last + 4, b"\0" * (end - last - 8))
    assert reopen(journal_path) == ENTRIES[:-1]
    journal = MetaquorumJournal(str(journal_path), fsync=False)
    assert journal._offset == last
    journal.add(b"\x01again", ENTRIES[-1][1], ENTRIES[-1][2])
    journal._destroy()
    assert reopen(journal_path) == ENTRIES[:-1] + [(b"\x01again", *ENTRIES[-1][1:])]


def test_a_file_cut_before_the_last_entry_is_refused(journal_path):
    offsets = write_journal(journal_path)
    os.truncate(journal_path, offsets[4] + 10)
    with pytest.raises(JournalCorruptError, match=f"byte offset {offsets[4]}"):
        reopen(journal_path)


def test_garbage_after_the_end_is_not_part_of_the_journal(journal_path):
    write_journal(journal_path)
    with open(journal_path, "ab") as f:
        f.write(os.urandom(5000))
    assert reopen(journal_path) == ENTRIES


def test_entries_out_of_sequence_are_refused_even_at_the_end(journal_path):
    entries = ENTRIES[:-1] + [(b"\x01late", ENTRIES[-1][1] + 5, ENTRIES[-1][2])]
    offsets = write_journal(journal_path, entries)
    with pytest.raises(JournalCorruptError, match="does not follow") as e:
        reopen(journal_path)
    assert e.value.offset == offsets[-1]


@pytest.mark.parametrize(
    "content,reason",
    [(b"", "0 bytes"), (b"PYSYNC", "6 bytes"), (b"X" * 4096, "not a journal header")],
)
def test_a_file_that_is_not_a_journal_is_refused(journal_path, content, reason):
    journal_path.write_bytes(content)
    with pytest.raises(JournalCorruptError, match=reason):
        reopen(journal_path)


@pytest.mark.parametrize("content", [b"\x80\x02garbage", b"", pickle.dumps([1, 2])])
def test_a_damaged_meta_file_is_refused_not_read_as_term_0(journal_path, content):
    """pysyncobj's loader turns any damage into {}: term 0, no vote, which could
    let the voter vote twice in a term."""
    write_journal(journal_path)
    (journal_path.parent / "raft.journal.meta").write_bytes(content)
    with pytest.raises(JournalCorruptError, match="meta"):
        reopen(journal_path)


def test_journals_in_pysyncobj_format_are_still_read_and_extended(journal_path):
    old = FileJournal(str(journal_path))
    for entry in ENTRIES:
        old.add(*entry)
    old._destroy()
    assert reopen(journal_path) == ENTRIES
    journal = MetaquorumJournal(str(journal_path), fsync=False)
    assert journal._fmt == FORMAT_PYSYNCOBJ
    journal.add(b"\x01more", 9, 3)
    journal._destroy()
    again = FileJournal(str(journal_path))  # still readable by pysyncobj itself
    assert list(again._FileJournal__journal)[-1] == (b"\x01more", 9, 3)
    again._destroy()


# ------------------------------------------------------------------ fuzzing


def _scan_bytes(data: bytes):
    return scan(lambda offset, n: data[offset : offset + n], len(data), "fuzzed")


@pytest.fixture(scope="module")
def valid_journal(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("fuzz") / "raft.journal"
    write_journal(path)
    return path.read_bytes()[: end_offset(path)]


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_fuzz_damaged_entries_lose_at_most_the_last_entry_or_are_refused(valid_journal, data):
    """Any damage after the header: the loader returns every entry, or every
    entry but the last (a torn append), or refuses; nothing else, ever."""
    journal = bytearray(valid_journal)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "overwrite", "truncate", "append"]))
        at = data.draw(st.integers(HEADER_SIZE, max(HEADER_SIZE, len(journal) - 1)))
        if kind == "flip" and at < len(journal):
            journal[at] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "overwrite":
            junk = data.draw(st.binary(min_size=1, max_size=64))
            journal[at : at + len(junk)] = junk
        elif kind == "truncate":
            del journal[at:]
        else:
            journal += data.draw(st.binary(max_size=256))
    try:
        result = _scan_bytes(bytes(journal))
    except JournalCorruptError as e:
        assert e.offset >= 0 and "fuzzed" in str(e)
        return
    assert result.entries in (ENTRIES, ENTRIES[:-1])


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=2048))
def test_fuzz_arbitrary_bytes_are_refused_or_read(blob):
    """Anything at all, header included: JournalCorruptError or a list of entries."""
    try:
        result = _scan_bytes(blob)
    except JournalCorruptError:
        return
    assert all(len(entry) == 3 for entry in result.entries)


def test_a_slow_sync_is_logged_and_counted(journal_path, monkeypatch, caplog):
    """A sync that holds the Raft thread for SyncStats.SLOW_S or more is named
    in the log (here every sync is 'slow'); meta stores are counted too."""
    from quorum.raft.durability import SyncStats

    monkeypatch.setattr(SyncStats, "SLOW_S", 0.0)
    stores = SyncStats.meta_stores
    journal = MetaquorumJournal(str(journal_path), fsync=True)
    with caplog.at_level("WARNING", logger="quorum.raft.durability"):
        journal.add(*ENTRIES[0])
        journal.sync_pending()
        journal.setCurrentTerm(2, None)
    journal._destroy()
    messages = [r.getMessage() for r in caplog.records]
    assert any("a Raft journal sync took" in m for m in messages)
    assert any("storing the Raft meta file" in m for m in messages)
    assert SyncStats.meta_stores > stores


def test_sync_latencies_are_counted_in_histogram_buckets(monkeypatch):
    """Each journal sync lands in the first bucket whose bound it does not
    exceed (Prometheus' "le"), or past the last one; count and sum follow."""
    from quorum.raft.durability import SyncStats

    monkeypatch.setattr(SyncStats, "sync_buckets", [0] * (len(SyncStats.SYNC_BUCKETS) + 1))
    monkeypatch.setattr(SyncStats, "syncs", 0)
    monkeypatch.setattr(SyncStats, "seconds", 0.0)
    bounds = SyncStats.SYNC_BUCKETS
    for seconds in (bounds[0], bounds[0] * 1.01, bounds[-1], bounds[-1] * 2):
        SyncStats.count_sync(seconds)
    assert SyncStats.sync_buckets[0] == 1 and SyncStats.sync_buckets[1] == 1
    assert SyncStats.sync_buckets[-2] == 1 and SyncStats.sync_buckets[-1] == 1
    assert SyncStats.syncs == 4
    assert SyncStats.seconds == sum((bounds[0], bounds[0] * 1.01, bounds[-1], bounds[-1] * 2))
