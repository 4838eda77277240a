"""Making pysyncobj's journal durable.

pysyncobj writes its journal through an mmap and its term/vote/commit file
with write+rename, and never syncs either (docs/pysyncobj.md 3.1): an acknowledged
write survives a process crash but not power loss. With ``fsync=always``,
metaquorum syncs the meta file and its directory on every store, and the
journal before anything that counts an entry as stored:

* a follower syncs before it answers an AppendEntries (``sync_pending`` from
  the transport, quorum/raft/raft_port.py), so one sync covers every entry of the
  message;
* the leader syncs at the end of the tick that appended (an on-tick
  callback), after the AppendEntries went out: its own write overlaps the
  followers' (Raft thesis 10.2.1), and at the latest before its commit index
  moves (``setRaftCommitIndex``), so nothing is applied, and no client
  answered, on the strength of a leader entry that is not on its disk;
* or, with ``leader_sync_off_thread`` (off by default), the leader syncs on
  a thread of its own (``LeaderSync``), asked at the end of the tick that
  appended, and its Raft thread goes on reading the followers' answers
  meanwhile. Its entries then count toward
  the commit only up to what that thread made durable (``allowed_commit``):
  an entry commits once a majority holds it durable, the leader included or
  not (two followers of three commit without the leader's sync), so again
  nothing is answered unless a majority has it on disk.

The cost is per Raft entry or fewer (one entry = one batch of records), never
per record. The journal is written with pwrite into space already filled with
zeros (``JournalFile``), not through pysyncobj's mmap: an fdatasync then has
only data to write, no block allocation or mtime to journal, and it releases
the GIL. Measured on ext4 with three voters syncing at once: 0.22 ms per sync
against 1.55 ms for the mmap's msync (docs/durability.md).

pysyncobj builds its journal with a module-level ``createJournal``; the
journal cannot be chosen through SyncObjConf, so we replace that function for
the process (one node per process). Pinned to pysyncobj 0.3.17.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import mmap
import os
import struct
import threading
import time
from collections.abc import Callable

from pysyncobj.journal import APP_VERSION, Journal, MemoryJournal, MetaStorer
from pysyncobj.pickle import dumps, loads, to_bytes

from .. import stage_trace
from ..disk_health import DiskHealth, DiskWriteError
from ..journal_format import (
    HEADER_SIZE,
    LAST_OFFSET_AT,
    JournalCorruptError,
    encode_entry,
    header,
    scan,
)
from ..log_limiter import RateLimitedLog

log = logging.getLogger(__name__)
# Growing the room ahead is asked at every append while little is left: a
# full disk would otherwise log one line a write.
_grow_ahead_failed = RateLimitedLog(log, period_s=60.0, burst=1)

# The leader's journal sync on a thread of its own, its entries counted toward
# the commit only once synced (LeaderSync, allowed_commit), when True before a
# voter's RaftHost is built; False (the default): synced on the Raft thread at
# the end of the tick and before the commit index moves. Not a speed switch
# (metaquorum/speed_switches.py): measured, it is not the faster path on a
# shared 2-core machine, where the third thread's wake-ups and interpreter-lock
# hand-offs cost a lone write more than reading the followers' answers during
# the leader's sync saves (docs/performance.md, "One write alone"). Kept for a
# quiet machine with a disk per voter, where a leader's disk stall would no
# longer hold commits (bench/lone_request.py --leader-sync-thread).
leader_sync_off_thread = False


def allowed_commit(
    proposed: int,
    committed: int,
    durable: int,
    matched: list[int],
    voters: int,
    term_at: Callable[[int], int],
    term: int,
) -> int:
    """Raft's commit rule with the leader counted only where its journal is
    synced: the highest index N, ``committed`` < N <= ``proposed``, of the
    leader's ``term`` (Raft 5.4.2), that a majority of ``voters`` hold
    durable: the leader if ``durable`` >= N, and each other voter whose match
    index (``matched``) is >= N (a follower answers only once it synced);
    ``committed`` if there is none. ``proposed`` is what pysyncobj's leader
    counted, itself always included."""
    if proposed <= committed:
        return proposed
    for n in range(proposed, committed, -1):
        holders = (durable >= n) + sum(m >= n for m in matched)
        if 2 * holders > voters:
            return n if term_at(n) == term else committed
    return committed


class LeaderView:
    """What the journal reads of its SyncObj to count a leader's commit
    (set by RaftHost; tick thread only): ``leading()`` and, while leading,
    ``matched()``, ``voters()``, ``term()``; ``set_commit(index)`` puts
    pysyncobj's commit index back to what may commit; ``wake()`` (any
    thread) has the tick thread count again."""

    def __init__(self, leading, matched, voters, term, set_commit, wake) -> None:
        self.leading = leading
        self.matched = matched
        self.voters = voters
        self.term = term
        self.set_commit = set_commit
        self.wake = wake


class LeaderSync:
    """The leader's journal syncs, on a thread of their own.

    ``request(writes, index, generation)`` (tick thread) asks for the
    journal's changes up to its ``writes``-th to be synced; the newest
    request wins, and one sync covers every change written before it
    starts. Once synced the journal counts its entries up to ``index`` as
    durable (unless a truncation came between: ``generation``), and
    ``wake`` has the tick thread count the commit again. A failed sync is
    the journal's sticky ``sync_failed``: nothing more is counted, and the
    node stops (quorum/node.py ``_disk_tick``)."""

    def __init__(self, journal: MetaquorumJournal, wake: Callable[[], None]) -> None:
        self._journal = journal
        self._wake = wake
        self._cond = threading.Condition()
        self._wanted: tuple[int, int, int] | None = None
        self._closed = False
        self.rounds = 0  # requests taken and done (a sync, or none needed)
        self.wakes = 0  # of those, how many woke the Raft thread for a held commit
        self._thread = threading.Thread(target=self._run, name="raft-leader-sync", daemon=True)
        self._thread.start()

    def request(self, writes: int, index: int, generation: int) -> None:
        with self._cond:
            self._wanted = (writes, index, generation)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._wanted is None and not self._closed:
                    self._cond.wait()
                if self._wanted is None:
                    return
                writes, index, generation = self._wanted
                self._wanted = None
            journal = self._journal
            try:
                journal._sync_through(
                    writes, index, generation, "the leader's sync thread, not the Raft thread,"
                )
            except DiskWriteError:
                pass  # sync_failed is set and logged; the node stops
            except Exception:  # noqa: BLE001 - the next request tries again
                log.exception("the leader's journal sync failed; tried again at the next one")
            # Only a commit that waits for this sync needs the Raft thread now:
            # any other wake-up takes the interpreter lock from the event loop
            # as it answers. durable_index was written before this read, and
            # the Raft thread marks a held commit before it reads that index,
            # so one of the two sees the other.
            if journal.commit_held:
                self._wake()
                self.wakes += 1
            self.rounds += 1

    def close(self, timeout_s: float = 10.0) -> None:
        """Ends the thread once a sync under way is done."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout_s)


class SyncStats:
    """How much syncing costs (read by /metrics and the bench). A sync that
    holds pysyncobj's tick thread for ``SLOW_S`` or more is logged: nothing
    replicates or commits meanwhile."""

    SLOW_S = 0.1
    # Upper bounds (seconds) of the journal-sync latency histogram in /metrics:
    # slow syncs under SLOW_S are not logged, but show there.
    SYNC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
    syncs = 0
    seconds = 0.0
    sync_buckets = [0] * (len(SYNC_BUCKETS) + 1)  # the last: above every bound
    meta_stores = 0
    meta_seconds = 0.0

    @classmethod
    def count_sync(cls, seconds: float) -> None:
        cls.syncs += 1
        cls.seconds += seconds
        cls.sync_buckets[bisect.bisect_left(cls.SYNC_BUCKETS, seconds)] += 1

    @classmethod
    def note_slow(cls, what: str, seconds: float, who_waited: str = "the Raft thread") -> None:
        if seconds >= cls.SLOW_S:
            log.warning("%s took %.0f ms (%s waited)", what, seconds * 1000, who_waited)


def fsync_dir(path: str) -> None:
    """Makes a rename or create in ``path``'s directory durable."""
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Speed switch: the journal's zero-filled room is grown ahead by a thread of
# its own (JournalFile._grow_ahead), written and synced in pieces before an
# append reaches it. Grown by the append that needed it, 1 MiB of zeros was
# written and then synced with that append, on every voter's Raft thread at
# the same log position: a lone write waited 11-19 ms about every 2,000
# writes (issue 46, decision 174). Plain twin: the append that runs out of
# room grows it.
GROW_AHEAD = True


class JournalFile:
    """The journal's bytes on disk: positional writes and reads, and room
    ahead of the end filled with real zeros, so that appends overwrite
    allocated blocks and a sync has no metadata to write.

    The room grows ``GROW_STEP`` at a time: 16 MiB took 40-75 ms to fill and
    sync on this disk, 1 MiB 1.5-2.5 ms alone and 10-20 ms with three voters
    at once (their journals are identical: they grow at the same log
    position). Every journal byte is written twice (zeros, then data). With
    ``GROW_AHEAD``, once less than ``GROW_AHEAD_BELOW`` is left a thread of
    the file's own fills the next step ``GROW_AHEAD_PIECE`` at a time, each
    piece synced through a descriptor of its own (a failed sync is then
    reported to the journal's descriptor too: each open file description
    sees a writeback error once) before it is room, so the disk is never
    busy with zeros for long; an append that still finds no room grows it
    itself, as without the thread. ``_grow_lock`` keeps the two from filling
    the same bytes: nothing is written past ``_size`` without it, and appends
    write below ``_size`` only."""

    GROW_STEP = 1 << 20
    GROW_AHEAD_BELOW = GROW_STEP // 2
    GROW_AHEAD_PIECE = 64 << 10  # synced a piece at a time: the disk is never busy long
    _ZEROS = bytes(GROW_STEP)

    def __init__(self, path: str, default_content: bytes, sync_room: bool = True) -> None:
        self._path = path
        self._sync_room = sync_room  # the journal syncs: the room grown ahead is synced too
        self._grow_lock = threading.Lock()
        self._ahead: threading.Thread | None = None
        self._ahead_wanted = threading.Event()
        self._closed = False
        self._end_seen = 0  # the end of the furthest write: how much room is left
        self.grown_ahead = 0  # steps the thread made room for (the tests')
        if not os.path.exists(path):
            self._create(path, default_content)
            return
        self._fd = os.open(path, os.O_RDWR, 0o600)
        self._size = os.fstat(self._fd).st_size
        if self._size == 0:
            self.write(0, default_content)

    def _create(self, path: str, default_content: bytes) -> None:
        """A new journal appears whole or not at all: written beside its name,
        then renamed. A disk that fills up during the first start would
        otherwise leave zeros without a header, refused as corrupt ever after."""
        part = path + ".part"
        self._fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self._size = 0
        try:
            self.write(0, default_content)
            os.fsync(self._fd)
            os.replace(part, path)
        except OSError:
            self.close()
            with contextlib.suppress(OSError):
                os.unlink(part)
            raise
        fsync_dir(path)

    def write(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if end > self._size:
            self._grow(end)
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, offset)
            view, offset = view[written:], offset + written
        # The furthest write (the header's are at its start; after a
        # truncation the room is only grown sooner).
        self._end_seen = end = max(end, self._end_seen)
        # A new file's first step leaves more than GROW_AHEAD_BELOW after its
        # header, so no thread is asked while the file is still beside its name.
        if GROW_AHEAD and self._size - end < self.GROW_AHEAD_BELOW:
            self._ask_ahead()

    def _grow(self, needed: int) -> None:
        """Zeros up to at least ``needed`` and one step past the room, unless
        the thread grew it meanwhile."""
        with self._grow_lock:
            if needed > self._size:
                target = max(needed, self._size + self.GROW_STEP)
                self._zeros(self._fd, self._size, target)
                self._size = target

    def _zeros(self, fd: int, start: int, stop: int) -> None:
        while start < stop:
            start += os.pwrite(fd, self._ZEROS[: stop - start], start)

    def _ask_ahead(self) -> None:
        if self._ahead is None:
            self._ahead = threading.Thread(
                target=self._run_ahead, name="journal-grow-ahead", daemon=True
            )
            self._ahead.start()
        self._ahead_wanted.set()

    def _run_ahead(self) -> None:
        while True:
            self._ahead_wanted.wait()
            self._ahead_wanted.clear()
            if self._closed:
                return
            self._grow_ahead()

    def _grow_ahead(self) -> None:
        """One step of room past the end, filled and synced a piece at a time
        (a piece is room once synced); nothing while enough is left (an ask
        the last step answered)."""
        if self._size - self._end_seen >= self.GROW_AHEAD_BELOW:
            return
        try:
            fd = os.open(self._path, os.O_WRONLY)
        except OSError as e:
            _grow_ahead_failed.warning(
                "journal %s: growing its room ahead failed (%s)", self._path, e
            )
            return
        try:
            for _ in range(self.GROW_STEP // self.GROW_AHEAD_PIECE):
                with self._grow_lock:
                    if self._closed:
                        return
                    size = self._size + self.GROW_AHEAD_PIECE
                    self._zeros(fd, self._size, size)
                    if self._sync_room:
                        os.fdatasync(fd)
                    self._size = size
            self.grown_ahead += 1
        except OSError as e:
            # A full or failing disk: the appends grow the room themselves,
            # and their own writes and syncs report it (DiskHealth).
            _grow_ahead_failed.warning(
                "journal %s: growing its room ahead failed (%s)", self._path, e
            )
        finally:
            os.close(fd)

    def read(self, offset: int, size: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def sync(self) -> None:
        os.fdatasync(self._fd)

    def close(self) -> None:
        self._closed = True
        if self._ahead is not None:
            self._ahead_wanted.set()
            self._ahead.join(10.0)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _scan_file(path: str):
    """Reads and checks every entry of the journal at ``path`` (through a
    read-only mapping: one pass, no system call per field)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return scan(lambda offset, n: data[offset : offset + n], size, path)


class DurableMetaStorer(MetaStorer):
    """Term, vote and commit index: written to a temp file, fsynced, renamed,
    and the directory fsynced, so a vote is never forgotten after a crash."""

    def storeMeta(self, meta, who_waited: str = "the Raft thread"):  # noqa: N802 - pysyncobj's name
        start = time.perf_counter()
        path = self.getPath()
        try:
            with open(path + ".tmp", "wb") as f:
                f.write(dumps(meta))
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            # A full disk: the old meta file stays whole; leave no half temp behind.
            with contextlib.suppress(OSError):
                os.unlink(path + ".tmp")
            raise
        os.replace(path + ".tmp", path)
        fsync_dir(path)
        took = time.perf_counter() - start
        SyncStats.meta_stores += 1
        SyncStats.meta_seconds += took
        SyncStats.note_slow(
            "storing the Raft meta file (term, vote, commit index)", took, who_waited
        )


_OFF_THE_RAFT_THREAD = "the commit-index store thread, not the Raft thread,"


class MetaStoreThread:
    """Stores the commit index off pysyncobj's tick thread.

    The commit index on disk is only a restarted voter's replay target (how
    far it must apply before it is ready), never a safety property, so it
    need not be stored before anything goes on. Its store is a write, an
    fsync, a rename and a directory fsync: two filesystem journal commits,
    which on a busy shared disk took 100 ms to over a second and held the
    Raft thread (of the leader: the whole cluster) meanwhile. ``request()``
    asks for a store of the journal's meta as it is when the store runs; the
    newest request wins. Term and vote are still stored on the Raft thread
    before anything reflects them (Raft requires it); both go through the
    journal's lock, so the last store of any kind holds the newest term and
    vote."""

    def __init__(self, store) -> None:
        self._store = store
        self._cond = threading.Condition()
        self._pending = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="raft-meta-store", daemon=True)
        self._thread.start()

    def request(self) -> None:
        with self._cond:
            self._pending = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                self._pending = False
            try:
                self._store()
            except DiskWriteError:
                pass  # DiskHealth logged it; the next request tries again
            except Exception:  # noqa: BLE001 - the next request tries again
                log.exception("storing the Raft commit index failed; tried again at the next one")

    def close(self, timeout_s: float = 10.0) -> None:
        """Stores what is pending, then ends the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout_s)


class MetaquorumJournal(Journal):
    """pysyncobj's file journal (its layout, our format 2 with a checksum per
    entry: quorum/journal_format.py), plus:

    * a check of every entry at start: a torn last append is dropped, anything
      else damaged raises JournalCorruptError (the voter refuses to serve);
    * a meta file (term, vote, commit index) that must be readable if present:
      pysyncobj would silently start from term 0 with no vote;
    * with ``fsync``: changes synced before they are acknowledged or counted
      (``sync_pending``, see the module's docstring) and a synced meta file;
    * the commit index stored at most every 100 ms instead of once a second
      (``end_of_tick``), so a restarted voter's replay target (what it must
      apply before it is ready) is close to what it had really applied."""

    COMMIT_INDEX_EVERY_S = 0.1

    def __init__(self, journal_file: str, fsync: bool, disk: DiskHealth | None = None) -> None:
        self._path = journal_file
        self._fsync = fsync
        self._disk = disk
        # Changes written (with fsync) and synced, counted: a sync covers
        # the changes written before it started, whichever thread ran it.
        self._writes = 0
        self._synced_writes = 0
        self._sync_lock = threading.Lock()
        # The last Raft index synced, and how many truncations came before it.
        self.durable_index = 0
        self._generation = 0
        self.leader_view: LeaderView | None = None  # RaftHost.sync_journal_before_acks
        self._leader_sync: LeaderSync | None = None
        # A leader's commit that waits for its own sync (LeaderSync wakes the Raft thread).
        self.commit_held = False
        # A failed sync is sticky: the kernel may have dropped the pages it could
        # not write and report the next sync as a success (PostgreSQL's
        # "fsyncgate"), so nothing may be acknowledged after it (decision 48).
        self.sync_failed: str | None = None
        self._commit_stored_at = 0.0
        if os.path.exists(journal_file) and os.path.getsize(journal_file) < HEADER_SIZE:
            raise JournalCorruptError(
                journal_file, 0, f"the file has {os.path.getsize(journal_file)} bytes"
            )
        self._file = JournalFile(journal_file, header(APP_VERSION), sync_room=fsync)
        scanned = _scan_file(journal_file)
        self._fmt = scanned.fmt
        self._entries = scanned.entries
        self._offset = scanned.end
        meta_path = journal_file + ".meta"
        self._meta_storer = DurableMetaStorer(meta_path) if fsync else MetaStorer(meta_path)
        self._meta = load_meta(meta_path)
        self._meta_lock = threading.Lock()  # one store at a time, of the newest meta
        self._meta_saved = True
        if scanned.torn is not None:
            log.warning(
                "Raft journal %s: dropped a torn last append (%s); it was never "
                "acknowledged, the leader sends it again if it committed",
                journal_file,
                scanned.torn,
            )
            self._set_end(self._offset)
            self._mark_dirty()
            self.sync_pending()
            if self._entries and self.getRaftCommitIndex() > self._entries[-1][1]:
                self.setRaftCommitIndex(self._entries[-1][1])
                self._store_meta()
                self._meta_saved = True
        if fsync:
            fsync_dir(journal_file)
        # Without fsync a store is a write and a rename: done on the Raft thread.
        self._meta_thread = (
            MetaStoreThread(lambda: self._store_meta(_OFF_THE_RAFT_THREAD)) if fsync else None
        )

    # ------------------------------------------------------------ entries

    def _set_end(self, offset: int) -> None:
        self._file.write(LAST_OFFSET_AT, struct.pack("<I", offset))

    def _mark_dirty(self) -> None:
        if self._fsync:
            self._writes += 1

    @property
    def _dirty(self) -> bool:
        """Changes written and not yet synced."""
        return self._writes != self._synced_writes

    def _last_index(self) -> int:
        return self._entries[-1][1] if self._entries else 0

    def sync_pending(self) -> float:
        """Makes every change so far durable (a no-op when there is none, or
        with fsync off); returns the seconds the sync took (0.0 for none).
        Called on pysyncobj's tick thread only."""
        if self.sync_failed is not None:
            raise DiskWriteError(0, self.sync_failed)
        if not self._dirty:
            return 0.0
        return self._sync_through(self._writes, self._last_index(), self._generation)

    def _sync_through(
        self, writes: int, index: int, generation: int, who_waited: str = "the Raft thread"
    ) -> float:
        """Syncs the file: the first ``writes`` changes, whose last entry is
        ``index``, are durable after it (any thread)."""
        if self.sync_failed is not None:
            raise DiskWriteError(0, self.sync_failed)
        if writes <= self._synced_writes:
            return 0.0
        start = time.perf_counter()
        try:
            self._file.sync()
        except OSError as e:
            self.sync_failed = (
                f"syncing the Raft journal {self._path} failed ({e.strerror or e}): what it "
                "holds on disk is unknown, so this voter acknowledges nothing more and stops; "
                "restart it once the disk is fixed or has room (its journal is checked at start)"
            )
            log.critical("%s", self.sync_failed)
            raise DiskWriteError(e.errno, self.sync_failed) from e
        with self._sync_lock:  # the index first: not _dirty means counted
            if generation == self._generation:
                self.durable_index = max(self.durable_index, index)
            self._synced_writes = max(self._synced_writes, writes)
        if stage_trace.TRACE is not None:
            stage_trace.TRACE.mark("synced", index)
        took = time.perf_counter() - start
        SyncStats.count_sync(took)
        SyncStats.note_slow("a Raft journal sync", took, who_waited)
        return took

    def _truncated(self) -> None:
        """Entries were cut (tick thread): an index synced before no longer
        names the same entry past the new end."""
        with self._sync_lock:
            self._generation += 1
            self.durable_index = min(self.durable_index, self._last_index())

    def add(self, command, idx, term):
        command = to_bytes(command)
        data = encode_entry(command, idx, term, self._fmt)
        end = self._offset + len(data)
        # The file first, memory after: an append that fails for want of room
        # leaves both as they were, so pysyncobj (which sees the exception)
        # never sends or counts an entry this voter does not hold on disk.
        try:
            self._file.write(self._offset, data)
            self._set_end(end)
        except OSError as e:
            if self._disk is None:
                raise
            raise self._disk.report(f"Raft journal entry {idx} to {self._path}", e) from e
        self._entries.append((command, idx, term))
        self._offset = end
        self._mark_dirty()
        if stage_trace.TRACE is not None:
            stage_trace.TRACE.mark("append", idx)

    def _ask_leader_sync(self) -> bool:
        """A leader's changes so far go to its sync thread; False when this
        journal syncs on the Raft thread (a follower, or no sync thread)."""
        view, sync = self.leader_view, self._leader_sync
        if sync is None or view is None or not view.leading():
            return False
        if self.sync_failed is not None:
            raise DiskWriteError(0, self.sync_failed)
        if self._dirty:
            sync.request(self._writes, self._last_index(), self._generation)
        return True

    def clear(self):
        self._entries = []
        self._offset = HEADER_SIZE
        self._set_end(self._offset)
        self._mark_dirty()
        self._truncated()

    def __getitem__(self, item):
        return self._entries[item]

    def __len__(self):
        return len(self._entries)

    def deleteEntriesFrom(self, entryFrom):  # noqa: N802 - pysyncobj's name
        offset = self._offset
        for _ in range(len(self._entries) - entryFrom):
            (size,) = struct.unpack("<I", self._file.read(offset - 4, 4))
            offset -= size + 8
        del self._entries[entryFrom:]
        self._offset = offset
        self._set_end(offset)
        self._mark_dirty()
        self._truncated()

    def deleteEntriesTo(self, entryTo):  # noqa: N802
        # Compaction rewrites the journal in place: synced once, at the end.
        kept = self._entries[entryTo:]
        self.clear()
        for entry in kept:
            self.add(*entry)
        self.sync_pending()

    def flush(self):
        self._file.sync()

    def _destroy(self):
        if self._leader_sync is not None:
            self._leader_sync.close()
        if self._meta_thread is not None:
            self._meta_thread.close()
        if not self._meta_saved:  # a clean stop leaves the last commit index
            with contextlib.suppress(DiskWriteError):  # a full disk: logged; replay goes less far
                self._store_meta()
            self._meta_saved = True
        self._file.close()

    # ------------------------------------------------------------ meta

    def setRaftCommitIndex(self, raftCommitIndex):  # noqa: N802
        view = self.leader_view
        if self._leader_sync is not None and view is not None and view.leading():
            # The leader's entries count only where synced (allowed_commit).
            self.commit_held = True  # before durable_index is read: LeaderSync._run
            allowed = allowed_commit(
                raftCommitIndex,
                self.getRaftCommitIndex(),
                self.durable_index,
                view.matched(),
                view.voters(),
                self._term_at,
                view.term(),
            )
            if allowed != raftCommitIndex:
                view.set_commit(allowed)
                raftCommitIndex = allowed
            else:
                self.commit_held = False
        else:
            # The leader counts its own entries toward the commit: they must be
            # on its disk before the commit index (and what it answers) moves.
            self.sync_pending()
        if self._meta.get("raftCommitIndex") == raftCommitIndex:
            # A follower is told its commit index on every AppendEntries, the
            # leader's 0.1 s heartbeats too: an idle follower stored the same
            # meta file (two fsyncs) every 100 ms.
            return
        self._meta["raftCommitIndex"] = raftCommitIndex
        self._meta_saved = False  # stored by end_of_tick, off the commit path
        if stage_trace.TRACE is not None:
            stage_trace.TRACE.mark("commit", raftCommitIndex)

    def sync_off_thread(self, view: LeaderView) -> None:
        """While ``view.leading()``, this tick's appends are synced by a
        thread of their own, and the leader's entries count toward the commit
        only once synced (the module's docstring). Before the tick thread
        starts using the journal for a leader."""
        self.leader_view = view
        if self._fsync and self._leader_sync is None:
            self._leader_sync = LeaderSync(self, view.wake)

    def _term_at(self, index: int) -> int:
        """The term of the entry at Raft ``index``; -1 if the journal does not
        hold it (compacted away, or past its end): no term counts it."""
        position = index - self._entries[0][1] if self._entries else -1
        if not 0 <= position < len(self._entries):
            return -1
        return self._entries[position][2]

    def end_of_tick(self) -> None:
        """The Raft thread's last step of a tick (an on-tick callback): syncs
        what this tick appended (a leader's on its sync thread, with
        ``sync_off_thread``), then has a moved commit index stored at most
        every ``COMMIT_INDEX_EVERY_S``, by the MetaStoreThread with fsync:
        the meta file's fsyncs (and any disk stall in them) stay off the
        Raft thread, out of commits, applies and followers' answers."""
        if not self._ask_leader_sync():
            self.sync_pending()
        if not self._meta_saved:
            now = time.monotonic()
            if now - self._commit_stored_at >= self.COMMIT_INDEX_EVERY_S:
                self._commit_stored_at = now
                self.onOneSecondTimer()

    def getRaftCommitIndex(self):  # noqa: N802
        return self._meta.get("raftCommitIndex", 1)

    def setCurrentTerm(self, term, votedForNodeId):  # noqa: N802
        # Raft: term and vote are durable before any message reflecting them.
        with self._meta_lock:  # a background store copies both or neither
            self._meta["currentTerm"] = term
            self._meta["votedForNodeId"] = votedForNodeId
        self._store_meta()
        self._meta_saved = True

    def getCurrentTerm(self):  # noqa: N802
        return self._meta.get("currentTerm", 0)

    def getVotedForNodeId(self):  # noqa: N802
        return self._meta.get("votedForNodeId", None)

    def onOneSecondTimer(self):  # noqa: N802 - pysyncobj calls it every second
        if not self._meta_saved:
            self._meta_saved = True
            if self._meta_thread is not None:
                self._meta_thread.request()
            else:
                self._store_meta()

    def _store_meta(self, who_waited: str = "the Raft thread") -> None:
        """Stores the meta as it is now. Under the lock, so a store never
        overtakes a newer one with an older term or vote."""
        with self._meta_lock:
            meta = dict(self._meta)
            try:
                if isinstance(self._meta_storer, DurableMetaStorer):
                    self._meta_storer.storeMeta(meta, who_waited)
                else:
                    self._meta_storer.storeMeta(meta)
            except OSError as e:
                if self._disk is None or isinstance(e, DiskWriteError):
                    raise
                # Raised on the Raft thread, this aborts pysyncobj's handling of
                # the message: a vote or term not on disk is never sent.
                what = f"the Raft term, vote and commit index to {self._meta_storer.getPath()}"
                raise self._disk.report(what, e) from e


def load_meta(path: str) -> dict:
    """Term, vote and commit index; {} for a new journal. pysyncobj's own loader
    swallows every error and returns {}, which would forget a vote."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise JournalCorruptError(path, 0, f"the meta file is unreadable ({e})") from None
    try:
        meta = loads(data)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means damage
        raise JournalCorruptError(path, 0, f"the meta file does not decode ({e!r:.100})") from None
    if not isinstance(meta, dict) or not all(
        isinstance(meta.get(key, 0), int) for key in ("raftCommitIndex", "currentTerm")
    ):
        raise JournalCorruptError(path, 0, f"the meta file holds {meta!r:.100}")
    return meta


# What the next SyncObj built in this process journals with (use_journal).
_journal_settings: tuple[bool, DiskHealth | None] = (True, None)


def use_journal(fsync: bool, disk: DiskHealth | None = None) -> None:
    """The journals pysyncobj builds from now on in this process are durable
    (or plain ones), their failed writes reported to ``disk``. Set before the
    SyncObj is built: pysyncobj makes its journal in its constructor."""
    global _journal_settings
    _journal_settings = (fsync, disk)


def journal_factory(_original: Callable) -> Callable:
    """Takes the place of ``pysyncobj.syncobj.createJournal``
    (quorum/raft/patches.py): a MetaquorumJournal as ``use_journal`` set it."""

    def create_journal(journal_file=None):
        if journal_file is None:
            return MemoryJournal()
        fsync, disk = _journal_settings
        return MetaquorumJournal(journal_file, fsync, disk)

    return create_journal
