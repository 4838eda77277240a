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


def _fsync_dir(path: str) -> None:
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
        _fsync_dir(path)


class DurableFileJournal(FileJournal):
    """FileJournal that msyncs the mapping after every change."""

    def __init__(self, journal_file: str) -> None:
        self._batching = False
        super().__init__(journal_file)
        self._FileJournal__metaStorer = DurableMetaStorer(journal_file + ".meta")
        _fsync_dir(journal_file)

    def _sync(self) -> None:
        if self._batching:
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


def install_journal(fsync: bool) -> None:
    """Make pysyncobj build durable journals in this process (or plain ones)."""

    def create_journal(journal_file=None):
        if journal_file is None:
            return MemoryJournal()
        return DurableFileJournal(journal_file) if fsync else FileJournal(journal_file)

    _syncobj.createJournal = create_journal
