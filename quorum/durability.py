"""Making pysyncobj's journal durable.

pysyncobj writes its journal through an mmap and its term/vote/commit file
with write+rename, and never syncs either (PYSYNCOBJ.md 3.1): an acknowledged
write survives a process crash but not power loss. With ``fsync=always``,
metaquorum syncs the journal after every append (one Raft entry = one batch of
records, so the cost is per batch, not per record) and before pysyncobj can
acknowledge it, and syncs the meta file and its directory on every store.

pysyncobj builds its journal with a module-level ``createJournal``; the
journal cannot be chosen through SyncObjConf, so we replace that function for
the process (one node per process). Pinned to pysyncobj 0.3.17.
"""

from __future__ import annotations

import os
import time

import pysyncobj.syncobj as _syncobj
from pysyncobj.journal import FileJournal, MemoryJournal, MetaStorer
from pysyncobj.pickle import dumps


class SyncStats:
    """How much syncing costs (read by /metrics and the bench)."""

    syncs = 0
    seconds = 0.0


def fsync_dir(path: str) -> None:
    """Makes a rename or create in ``path``'s directory durable."""
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DurableMetaStorer(MetaStorer):
    """Term, vote and commit index: written to a temp file, fsynced, renamed,
    and the directory fsynced, so a vote is never forgotten after a crash."""

    def storeMeta(self, meta):  # noqa: N802 - pysyncobj's name
        path = self.getPath()
        with open(path + ".tmp", "wb") as f:
            f.write(dumps(meta))
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        fsync_dir(path)


class MetaquorumJournal(FileJournal):
    """pysyncobj's FileJournal, plus:

    * with ``fsync``: an msync after every change and a synced meta file;
    * the commit index stored at most every 100 ms instead of once a second, so
      a restarted voter's replay target (what it must apply before it is ready)
      is close to what it had really applied."""

    COMMIT_INDEX_EVERY_S = 0.1

    def __init__(self, journal_file: str, fsync: bool) -> None:
        self._fsync = fsync
        self._batching = False
        self._commit_stored_at = 0.0
        super().__init__(journal_file)
        if fsync:
            self._FileJournal__metaStorer = DurableMetaStorer(journal_file + ".meta")
            fsync_dir(journal_file)

    def _sync(self) -> None:
        if not self._fsync or self._batching:
            return
        start = time.perf_counter()
        self.flush()  # mmap.flush(): msync(MS_SYNC) of the dirty pages
        SyncStats.syncs += 1
        SyncStats.seconds += time.perf_counter() - start

    def add(self, command, idx, term):
        super().add(command, idx, term)
        self._sync()

    def deleteEntriesFrom(self, entryFrom):  # noqa: N802 - pysyncobj's name
        super().deleteEntriesFrom(entryFrom)
        self._sync()

    def deleteEntriesTo(self, entryTo):  # noqa: N802
        # Compaction rewrites the journal through add(): sync once, at the end.
        self._batching = True
        try:
            super().deleteEntriesTo(entryTo)
        finally:
            self._batching = False
        self._sync()

    def setRaftCommitIndex(self, raftCommitIndex):  # noqa: N802
        super().setRaftCommitIndex(raftCommitIndex)
        now = time.monotonic()
        if now - self._commit_stored_at >= self.COMMIT_INDEX_EVERY_S:
            self._commit_stored_at = now
            self.onOneSecondTimer()  # stores the meta file if it changed


def install_journal(fsync: bool) -> None:
    """Make pysyncobj build durable journals in this process (or plain ones)."""

    def create_journal(journal_file=None):
        if journal_file is None:
            return MemoryJournal()
        return MetaquorumJournal(journal_file, fsync)

    _syncobj.createJournal = create_journal
