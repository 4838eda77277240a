"""The leader's journal sync on a thread of its own (quorum/raft/durability.py,
``leader_sync_off_thread``): an entry commits once a majority holds it synced,
the leader counted only once its own sync is done, so a leader that loses
power between its followers' acknowledgements and its own sync loses no
acknowledged write.

Three journals stand for three voters, driven as pysyncobj's tick threads
drive them (a follower syncs before it answers; the leader counts the commit
with ``setRaftCommitIndex``); each journal's disk keeps, as a power cut
would, only what a finished sync covered (``PowerLossDisk``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from quorum.raft import durability
from quorum.raft.durability import LeaderView, MetaquorumJournal, allowed_commit

NOOP = (b"\x01noop", 1, 1)
WRITE = (b"\x01an acknowledged write", 2, 1)
NEXT = (b"\x01the write after it", 3, 1)


class PowerLossDisk:
    """A journal's file as a power cut leaves it: the bytes written before its
    last finished sync began. ``hold`` blocks the syncs that start while it
    is set, until released."""

    def __init__(self, journal: MetaquorumJournal, path: Path) -> None:
        self.path = path
        self.synced = b""
        self.cut = False
        self.held = threading.Event()
        self.held.set()  # set: syncs go through
        self.syncing = threading.Event()
        real = journal._file.sync

        def sync() -> None:
            data = path.read_bytes()  # a sync covers what was written before it began
            self.syncing.set()
            assert self.held.wait(10)
            real()
            if not self.cut:
                self.synced = data

        journal._file.sync = sync

    def hold(self) -> None:
        self.held.clear()

    def release(self) -> None:
        self.held.set()

    def power_cut(self, to: Path) -> list:
        """What this voter's journal holds once power comes back, written at ``to``."""
        self.cut = True
        to.write_bytes(self.synced)
        journal = MetaquorumJournal(str(to), fsync=False)
        try:
            return list(journal._entries)
        finally:
            journal._destroy()


class Voters:
    """A leader's journal and two followers', with the leader's view of them:
    a follower's match index is what it answered, and it answers only once
    synced (its ``durable_index``)."""

    def __init__(self, root: Path, off_thread: bool = True) -> None:
        self.root = root
        self.journals, self.disks = [], []
        for name in ("leader", "f1", "f2"):
            path = root / f"{name}.journal"
            journal = MetaquorumJournal(str(path), fsync=True)
            self.journals.append(journal)
            self.disks.append(PowerLossDisk(journal, path))
        self.leader, self.f1, self.f2 = self.journals
        self.answered = {1: 0, 2: 0}  # follower -> the index it acknowledged
        self.moved_to: list[int] = []  # what the commit count put pysyncobj's index back to
        self.woken = threading.Event()
        if off_thread:
            self.leader.sync_off_thread(
                LeaderView(
                    leading=lambda: True,
                    matched=lambda: [self.answered[1], self.answered[2]],
                    voters=lambda: 3,
                    term=lambda: 1,
                    set_commit=self.moved_to.append,
                    wake=self.woken.set,
                )
            )

    def append_everywhere_synced(self, entry) -> None:
        for j in self.journals:
            j.add(*entry)
            j.sync_pending()
        self.answered = {1: entry[1], 2: entry[1]}
        self.leader.setRaftCommitIndex(entry[1])

    def follower_acknowledges(self, i: int, entry) -> None:
        """A follower appends ``entry`` and answers: it syncs first (before_ack)."""
        follower = self.journals[i]
        follower.add(*entry)
        follower.sync_pending()
        self.answered[i] = follower.durable_index

    def close(self) -> None:
        for disk in self.disks:
            disk.release()
        for j in self.journals:
            j._destroy()


@pytest.fixture
def voters(tmp_path):
    v = Voters(tmp_path)
    yield v
    v.close()


@pytest.mark.parametrize(
    ("durable", "matched", "proposed", "committed", "allowed", "why"),
    [
        (1, [2, 0], 2, 1, 1, "one follower and the leader's unsynced entry: no majority"),
        (1, [2, 2], 2, 1, 2, "two followers of three commit without the leader's sync"),
        (2, [2, 0], 2, 1, 2, "the leader synced and one follower: a majority"),
        (3, [2, 1], 3, 1, 2, "the highest index a majority holds, below what pysyncobj counted"),
        (5, [5, 5], 5, 3, 3, "an entry of an older term is not committed by counting (Raft 5.4.2)"),
        (2, [2, 2], 2, 2, 2, "nothing new"),
    ],
)
def test_the_commit_counts_the_leader_only_once_synced(
    durable, matched, proposed, committed, allowed, why
):
    terms = {1: 1, 2: 1, 3: 1, 4: 2, 5: 2}
    term = 1 if "older term" not in why else 3
    assert allowed_commit(proposed, committed, durable, matched, 3, terms.get, term) == allowed, why


def test_a_leader_lost_before_its_own_sync_loses_no_acknowledged_write(voters, tmp_path):
    """The leader appends a write and sends it; its own sync is held up. One
    follower's answer does not commit it (the leader's copy is not on its
    disk); the second's does: two of three voters hold it synced, and the
    client is answered. The leader then loses power before its sync: its
    journal comes back without the write, and both survivors, which any new
    leader needs a vote of, still hold it."""
    v = voters
    v.append_everywhere_synced(NOOP)
    assert v.leader.getRaftCommitIndex() == 1

    v.disks[0].hold()
    v.leader.add(*WRITE)
    v.leader.end_of_tick()  # asks its sync thread, which the disk holds up
    assert v.disks[0].syncing.wait(10)
    assert v.leader.durable_index == 1

    v.follower_acknowledges(1, WRITE)
    v.leader.setRaftCommitIndex(2)  # pysyncobj counted itself and f1
    assert v.leader.getRaftCommitIndex() == 1 and v.moved_to[-1] == 1

    v.follower_acknowledges(2, WRITE)
    v.leader.setRaftCommitIndex(2)
    assert v.leader.getRaftCommitIndex() == 2  # committed: the client gets its answer
    assert v.leader._dirty and v.leader.durable_index == 1  # the leader's sync never ran

    after = {
        name: disk.power_cut(tmp_path / f"{name}-after.journal")
        for name, disk in zip(("leader", "f1", "f2"), v.disks, strict=True)
    }
    assert after["leader"] == [NOOP]  # the leader's own copy was lost...
    assert after["f1"] == after["f2"] == [NOOP, WRITE]  # ...and a majority holds it


def test_the_leader_sync_wakes_the_commit_it_held_back_and_only_that(voters):
    """Once the leader's sync thread is done, the commit it held back goes on
    at the next count, and the tick thread is woken for that count; a sync
    that no commit waited for wakes nobody (the event loop keeps the
    interpreter lock)."""
    v = voters
    v.append_everywhere_synced(NOOP)
    v.disks[0].hold()
    v.leader.add(*WRITE)
    v.leader.end_of_tick()
    assert v.disks[0].syncing.wait(10)
    v.follower_acknowledges(1, WRITE)
    v.leader.setRaftCommitIndex(2)
    assert v.leader.getRaftCommitIndex() == 1
    v.woken.clear()
    v.disks[0].release()
    assert v.woken.wait(10)
    assert v.leader.durable_index == 2 and not v.leader._dirty
    v.leader.setRaftCommitIndex(2)
    assert v.leader.getRaftCommitIndex() == 2

    v.woken.clear()
    rounds = v.leader._leader_sync.rounds
    v.leader.add(*NEXT)
    v.leader.end_of_tick()
    deadline = time.monotonic() + 10
    while v.leader._leader_sync.rounds == rounds:  # its sync, and what it woke, done
        assert time.monotonic() < deadline, "the leader's sync thread never finished"
        time.sleep(0.001)
    v.follower_acknowledges(1, NEXT)
    v.leader.setRaftCommitIndex(3)
    assert v.leader.getRaftCommitIndex() == 3
    assert not v.woken.is_set()


def test_a_truncation_forgets_what_was_synced_past_the_new_end(voters):
    """An index synced before a truncation names another entry after it."""
    v = voters
    v.append_everywhere_synced(NOOP)
    v.leader.add(*WRITE)
    v.leader.sync_pending()
    assert v.leader.durable_index == 2
    v.leader.deleteEntriesFrom(1)  # list position 1: WRITE is cut
    assert v.leader.durable_index == 1


@pytest.mark.parametrize("off_thread", [True, False])
def test_both_twins_commit_the_same_entries(tmp_path, monkeypatch, off_thread):
    """The same writes and answers, with the switch on and off: the same
    commit index and the same journals once the leader's sync is done; with
    the switch off (the plain twin) the leader syncs before its commit moves."""
    monkeypatch.setattr(durability, "leader_sync_off_thread", off_thread)
    v = Voters(tmp_path, off_thread=durability.leader_sync_off_thread)
    try:
        v.append_everywhere_synced(NOOP)
        for entry in (WRITE, NEXT):
            v.leader.add(*entry)
            v.leader.end_of_tick()
            deadline = time.monotonic() + 10
            while v.leader._dirty:  # the sync thread's (or, plain, done already)
                assert time.monotonic() < deadline, "the leader's journal was never synced"
                time.sleep(0.001)
            v.follower_acknowledges(1, entry)
            v.leader.setRaftCommitIndex(entry[1])
            assert v.leader.getRaftCommitIndex() == entry[1]
            assert v.disks[0].synced.count(entry[0]) == 1  # on the leader's disk too
        assert list(v.leader._entries) == list(v.f1._entries) == [NOOP, WRITE, NEXT]
    finally:
        v.close()
