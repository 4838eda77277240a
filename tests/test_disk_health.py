"""A full disk (issue 24, finding 7), without sockets: the sizing rule, the
snapshot backoff schedule, the lines a full disk logs (one, then a reminder a
minute), recovery with hysteresis, and, on a real tiny tmpfs (root only), a
journal append that finds no room leaving file and memory as they were and a
snapshot that finds no room backing off instead of forking."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess

import pytest
from pysyncobj.config import SERIALIZER_STATE

from quorum.disk_health import (
    JOURNAL_GROW_STEP,
    WRITE_RESERVE,
    DiskHealth,
    DiskWriteError,
    human_bytes,
    snapshot_backoff_s,
    snapshot_no_room_message,
    snapshot_room_needed,
    volume_size_needed,
)
from quorum.raft.durability import JournalFile, MetaquorumJournal
from quorum.raft.raft_port import _PROMISES, _WRITES_ON_RECEIPT, GuardedTransport
from quorum.state_machine import MetadataStateMachine

MiB = 1 << 20


def test_the_sizing_rule_is_journal_plus_two_images_plus_headroom():
    assert volume_size_needed(100 * MiB, 30 * MiB, 64 * MiB) == 224 * MiB
    # Headroom never below what the journal needs to grow once.
    assert volume_size_needed(0, 0, 0) == WRITE_RESERVE
    assert JOURNAL_GROW_STEP == JournalFile.GROW_STEP
    assert WRITE_RESERVE > JournalFile.GROW_STEP


def test_a_snapshot_needs_room_for_the_old_one_and_the_journal_beside_it():
    assert snapshot_room_needed(10 * MiB, 5 * MiB) == 15 * MiB + WRITE_RESERVE
    assert snapshot_room_needed(0, 0) == WRITE_RESERVE


def test_snapshot_attempts_back_off_exponentially_to_a_minute():
    assert [snapshot_backoff_s(n) for n in range(10)] == [0, 1, 2, 4, 8, 16, 32, 60, 60, 60]


def test_the_snapshot_message_names_path_free_needed_and_what_to_free():
    line = snapshot_no_room_message("/data/node-0", 12 * 1024, 3 * MiB, 4.0)
    assert "/data/node-0" in line and "12.0 KiB free" in line and "3.0 MiB" in line
    assert "Tried again in 4 s" in line and "journal + 2 x the snapshot + headroom" in line
    assert human_bytes(512) == "512 bytes" and human_bytes(None) == "unknown"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_full_disk_logs_one_line_then_a_reminder_a_minute_then_recovers():
    clock = Clock()
    disk = DiskHealth("/data/node-1", clock=clock)
    assert disk.observe(50 * MiB, clock.now) is None and disk.writable
    level, line = disk.observe(4096, clock.now)
    assert level == logging.ERROR and not disk.writable
    assert "/data/node-1" in line and "4.0 KiB free" in line
    assert human_bytes(WRITE_RESERVE) + " free to write its Raft journal" in line
    assert "To fix: free space on that volume" in line and "/readyz fails" in line
    assert disk.reason() is not None and "/data/node-1" in disk.reason()
    # Five minutes at the monitor's pace: a reminder a minute, nothing else.
    lines, start = [], clock.now
    for tick in range(1, 3001):
        clock.now = start + tick / 10
        lines.append(disk.observe(4096, clock.now))
    reminders = [entry for entry in lines if entry is not None]
    assert len(reminders) == 5, reminders
    assert all(r[0] == logging.WARNING and "still not writable" in r[1] for r in reminders)
    # Just over the limit is not enough to come back (no flapping at the edge).
    assert disk.observe(WRITE_RESERVE + 1, clock.now) is None and not disk.writable
    level, line = disk.observe(2 * WRITE_RESERVE, clock.now)
    assert disk.writable and "writable again" in line and disk.reason() is None


def test_after_a_failed_write_room_alone_is_not_recovery_a_probe_write_is():
    clock = Clock()
    disk = DiskHealth("/data/node-2", clock=clock)
    level, line = disk.write_failed(
        "Raft journal entry 7", OSError(errno.ENOSPC, "No space left on device"), 0, clock.now
    )
    assert level == logging.ERROR and "disk full: cannot write Raft journal entry 7" in line
    assert "no space left on the device" in line and not disk.writable
    assert disk.write_failed("x", OSError(errno.ENOSPC, "full"), 0, clock.now) is None
    assert disk.write_failures == 2
    assert disk.observe(100 * MiB, clock.now) is None and not disk.writable
    assert disk.recovery_needs_probe()
    assert disk.probe_succeeded(clock.now) is not None and disk.writable


def test_the_transport_drops_what_would_write_or_promise_while_the_disk_is_not_writable():
    transport = object.__new__(GuardedTransport)  # the gate only, no sockets
    writable = [False]
    transport.disk_writable = lambda: writable[0]
    for kind in ("append_entries", "request_vote", "timeout_now"):
        assert transport._disk_blocks({"type": kind}, _WRITES_ON_RECEIPT)
    for kind in ("next_node_idx", "response_vote", "request_vote"):
        assert transport._disk_blocks({"type": kind}, _PROMISES)
    assert not transport._disk_blocks({"type": "apply_command"}, _WRITES_ON_RECEIPT)
    writable[0] = True
    assert not transport._disk_blocks({"type": "append_entries"}, _WRITES_ON_RECEIPT)


# ------------------------------------------------------------------ on a real tiny volume


@pytest.fixture
def tiny_volume(tmp_path):
    """A 4 MiB tmpfs, always unmounted (root only)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a tmpfs mount needs root")
    path = tmp_path / "vol"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(volume) -> str:
    """Fills the volume to the last byte; returns the filler's path."""
    filler = os.path.join(volume, "filler")
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(bytes(64 << 10))
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC
    return filler


def test_an_append_without_room_changes_neither_file_nor_memory(tiny_volume, caplog):
    disk = DiskHealth(str(tiny_volume))
    path = str(tiny_volume / "raft.journal")
    journal = MetaquorumJournal(path, fsync=True, disk=disk)
    payload = b"\x01" + bytes(30_000)
    journal.add(payload, 1, 1)
    filler = fill(tiny_volume)
    added = 1
    with caplog.at_level(logging.ERROR, logger="quorum.disk_health"):
        with pytest.raises(DiskWriteError):
            while True:  # the zero-filled room takes entries until it must grow
                journal.add(payload, added + 1, 1)
                added += 1
    assert len(journal) == added and journal[len(journal) - 1][1] == added
    assert not disk.writable and disk.write_failures == 1
    lines = [r for r in caplog.records if r.name == "quorum.disk_health"]
    assert len(lines) == 1 and str(tiny_volume) in lines[0].getMessage()
    journal.sync_pending()
    os.unlink(filler)
    journal.add(payload, added + 1, 1)  # room again: the next index, not a gap
    journal._destroy()
    reopened = MetaquorumJournal(path, fsync=False)
    assert [entry[1] for entry in reopened[0 : len(reopened)]] == list(range(1, added + 2))
    reopened._destroy()


def test_a_snapshot_without_room_is_not_forked_and_backs_off(tiny_volume, caplog):
    sm = MetadataStateMachine()
    sm.disk = DiskHealth(str(tiny_volume))
    sm.journal_file = str(tiny_volume / "raft.journal")
    filler = fill(tiny_volume)
    with caplog.at_level(logging.WARNING, logger="quorum.state_machine"):
        for _ in range(100):  # pysyncobj asks on every tick
            sm.write_snapshot(str(tiny_volume / "raft.snapshot.tmp"), (None, None, []))
    assert sm._snapshot_pid == 0 and sm.snapshot_failures == 1
    # Reported FAILED once, so pysyncobj's Serializer asks again later.
    assert sm.snapshot_state() == SERIALIZER_STATE.FAILED
    assert sm.snapshot_state() == SERIALIZER_STATE.NOT_SERIALIZING
    assert not os.path.exists(tiny_volume / "raft.snapshot.part")
    lines = [r.getMessage() for r in caplog.records if r.name == "quorum.state_machine"]
    assert len(lines) == 1 and "no snapshot written" in lines[0] and str(tiny_volume) in lines[0]
    assert "Tried again in 1 s" in lines[0]
    os.unlink(filler)


def test_a_failed_journal_sync_is_sticky_so_nothing_is_acknowledged_after_it(tmp_path):
    """After a failed fsync the kernel may have dropped the pages and report the
    next sync as a success: every later sync fails too (the node then stops)."""
    journal = MetaquorumJournal(str(tmp_path / "raft.journal"), fsync=True)
    journal.add(b"\x01entry", 1, 1)
    os.close(journal._file._fd)  # a real failure from the kernel: EBADF
    try:
        with pytest.raises(DiskWriteError):
            journal.sync_pending()
        assert journal.sync_failed is not None and "what it holds on disk is unknown" in (
            journal.sync_failed
        )
        journal._file._fd = os.open(tmp_path / "raft.journal", os.O_RDWR)  # works again...
        with pytest.raises(DiskWriteError):
            journal.sync_pending()  # ...and still nothing counts as stored
    finally:
        journal._file.close()
