"""Whether this voter can persist: its journal, its term and vote, its snapshots.

Raft's safety rests on a voter acknowledging only what it stored and voting
only once it stored the vote. pysyncobj knows nothing about a full disk: its
tick loop logs a traceback per failed write and carries on, a follower's
in-memory log got ahead of its file, a leader whose journal could not grow
kept leading with writes that never committed, and a snapshot writer that
failed for want of room was forked again on the next tick (issue 24, finding
7). Here:

* ``DiskHealth`` decides, from the free space of the data dir's volume and the
  writes that failed, whether the voter is *writable*; it is pure (numbers and
  times in, a verdict and the lines to log out), and ``check`` is its thin
  shell (``os.statvfs``, one probe write when recovering from a failed write).
  A voter that is not writable takes no entries, casts no vote, stands for no
  election, does not lead and fails ``/readyz`` (quorum/node.py,
  quorum/raft/raft_port.py); once there is room again it goes on by itself.
* The room a voter needs (``WRITE_RESERVE``) is one growth step of its
  journal plus its meta file: below it the next append may fail. Recovery
  asks for twice that, so a disk hovering at the limit does not make
  leadership flap.
* Snapshots check the room first (``snapshot_room_needed``) and back off
  (``snapshot_backoff_s``) instead of being retried on every tick.

The volume is sized as ``volume_size_needed``: the journal, twice the image
(the old snapshot stays until the new one is renamed over it) and headroom
(docs/durability.md, "A full disk").
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import time
from collections.abc import Callable

from .raft.internals import SYNCOBJ_LOGGER

log = logging.getLogger(__name__)

JOURNAL_GROW_STEP = 1 << 20  # durability.JournalFile.GROW_STEP (checked by a test)
META_RESERVE = 64 << 10  # a meta file and its temp copy, with room to spare
WRITE_RESERVE = JOURNAL_GROW_STEP + META_RESERVE
CHECK_EVERY_S = 0.1  # statvfs is a few microseconds; a full disk is noticed within this
REMIND_EVERY_S = 60.0
SNAPSHOT_BACKOFF_FIRST_S = 1.0
SNAPSHOT_BACKOFF_MAX_S = 60.0
SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
WHAT_TO_FREE = (
    "free space on that volume (delete files that are not metaquorum's; never the "
    "journal, its .meta or raft.snapshot) or grow it; size it for the journal + 2 x the "
    "snapshot + headroom (docs/durability.md, 'A full disk')"
)


class DiskWriteError(OSError):
    """A write this voter needed failed; already logged by ``DiskHealth`` (the
    tick loop's traceback for it is left out: ``quiet_tick_tracebacks``)."""


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def volume_size_needed(journal_bytes: int, image_bytes: int, headroom_bytes: int) -> int:
    """The sizing rule: the journal as large as it gets between compactions,
    the old and the new snapshot side by side while one is written, and
    headroom (at least ``WRITE_RESERVE``)."""
    return journal_bytes + 2 * image_bytes + max(headroom_bytes, WRITE_RESERVE)


def snapshot_room_needed(old_snapshot_bytes: int, journal_bytes: int) -> int:
    """Free bytes a new snapshot needs beside the old one and the journal.

    The new image is the old one with the journal's entries applied, so it is
    about the old snapshot plus the journal at most (a change record rewrites a
    partition in place; a new broker or topic adds about its records' size).
    The journal keeps growing while the snapshot is written, so the write
    reserve stays free on top."""
    return old_snapshot_bytes + journal_bytes + WRITE_RESERVE


def snapshot_backoff_s(failures: int) -> float:
    """Seconds to wait after ``failures`` snapshot attempts in a row that failed
    or found no room: 1, 2, 4, ... up to 60 s. pysyncobj would try again on
    every tick (about 50 ms): a fork, a failure and two log lines each time."""
    if failures <= 0:
        return 0.0
    return min(SNAPSHOT_BACKOFF_FIRST_S * 2 ** (failures - 1), SNAPSHOT_BACKOFF_MAX_S)


def snapshot_no_room_message(path: str, free: int, needed: int, retry_s: float) -> str:
    return (
        f"disk full: no snapshot written: the data dir {path} has {human_bytes(free)} free, "
        f"and a snapshot needs {human_bytes(needed)} (the new snapshot beside the old one and "
        f"the journal, plus {human_bytes(WRITE_RESERVE)} for the journal to grow); the journal "
        f"is not compacted meanwhile and keeps growing. Tried again in {retry_s:.0f} s. "
        f"To fix: {WHAT_TO_FREE}"
    )


def explain(error: OSError) -> str:
    if error.errno in SPACE_ERRNOS:
        return "no space left on the device"
    return error.strerror or str(error)


class DiskHealth:
    """Whether this voter can write its data dir, and what to log about it.

    Not writable when the volume has less than ``reserve`` bytes free, or when
    a write failed; writable again once it has ``2 * reserve`` free and, after
    a failed write, a probe write succeeded. Every transition logs one line
    (the path, the free and needed space, what to free); while not writable a
    reminder comes every ``remind_every_s``. Thread-safe: writes fail on the
    Raft thread and on the meta-store thread; the HTTP thread reads."""

    def __init__(
        self,
        path: str,
        reserve: int = WRITE_RESERVE,
        remind_every_s: float = REMIND_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.reserve = reserve
        self.recover_at = 2 * reserve
        self.remind_every_s = remind_every_s
        self.clock = clock
        self.writable = True
        self.problem: str | None = None  # why not writable, and what to do
        self.free_bytes: int | None = None
        self.write_failures = 0
        self.unwritable_since: float | None = None
        self._failed_write = False  # recovery then needs a probe write too
        self._reminded_at = 0.0
        self._next_check = 0.0
        self._lock = threading.Lock()

    def reason(self) -> str | None:
        """Why this voter is not writable and what to do (None if it is)."""
        with self._lock:
            if self.writable:
                return None
            return f"{self.problem}; {self._consequence()}"

    # ------------------------------------------------------------ pure decisions

    def observe(self, free: int, now: float) -> tuple[int, str] | None:
        """The volume has ``free`` bytes at ``now``: the line to log, if any.
        After a failed write this does not declare recovery by itself
        (``recovery_needs_probe``, then ``probe_succeeded``)."""
        with self._lock:
            self.free_bytes = free
            if self.writable:
                if free >= self.reserve:
                    return None
                return self._lose(self._low_space_problem(free), now)
            if free < self.recover_at:
                return self._remind(now)
            if self._failed_write:
                return None  # the shell probes, then calls probe_succeeded
            return self._regain(now)

    def recovery_needs_probe(self) -> bool:
        with self._lock:
            return (
                not self.writable
                and self._failed_write
                and (self.free_bytes or 0) >= self.recover_at
            )

    def probe_succeeded(self, now: float) -> tuple[int, str] | None:
        with self._lock:
            if self.writable:
                return None
            return self._regain(now)

    def write_failed(
        self, what: str, error: OSError, free: int | None, now: float
    ) -> tuple[int, str] | None:
        """A write of ``what`` failed: not writable until there is room and a
        probe write succeeds."""
        with self._lock:
            self.write_failures += 1
            self._failed_write = True
            if free is not None:
                self.free_bytes = free
            full = "disk full: " if error.errno in SPACE_ERRNOS else ""
            problem = (
                f"{full}cannot write {what} in the data dir {self.path}: {explain(error)} "
                f"({human_bytes(free)} free, {human_bytes(self.reserve)} needed)"
            )
            if self.writable:
                return self._lose(problem, now)
            if self.problem is not None and " cannot write " not in f" {self.problem}":
                self.problem = problem  # a real failure says more than low space
            return self._remind(now)

    def _low_space_problem(self, free: int) -> str:
        return (
            f"disk full: the data dir {self.path} has {human_bytes(free)} free, and a voter "
            f"needs {human_bytes(self.reserve)} free to write its Raft journal (it grows "
            f"{human_bytes(JOURNAL_GROW_STEP)} at a time) and its term and vote"
        )

    def _consequence(self) -> str:
        return (
            "this voter acknowledges no entries, casts no vote, stands for no election and "
            "does not lead until it has "
            f"{human_bytes(self.recover_at)} free (/readyz fails; writes sent to it answer 503). "
            f"To fix: {WHAT_TO_FREE}"
        )

    def _lose(self, problem: str, now: float) -> tuple[int, str]:
        self.writable = False
        self.problem = problem
        self.unwritable_since = now
        self._reminded_at = now
        return logging.ERROR, f"{problem}; {self._consequence()}"

    def _remind(self, now: float) -> tuple[int, str] | None:
        if now - self._reminded_at < self.remind_every_s:
            return None
        self._reminded_at = now
        since = now - (self.unwritable_since or now)
        return (
            logging.WARNING,
            f"still not writable after {since:.0f} s: {self.problem} "
            f"(now {human_bytes(self.free_bytes)} free); {self._consequence()}",
        )

    def _regain(self, now: float) -> tuple[int, str]:
        since = now - (self.unwritable_since or now)
        self.writable = True
        self.problem = None
        self.unwritable_since = None
        self._failed_write = False
        return (
            logging.WARNING,
            f"the data dir {self.path} is writable again ({human_bytes(self.free_bytes)} free) "
            f"after {since:.0f} s: this voter takes entries, votes and may lead again",
        )

    # ------------------------------------------------------------ the shell

    def check(self, force: bool = False) -> None:
        """Measures the volume (at most every ``CHECK_EVERY_S``) and logs what
        changed; called on the Raft thread at the end of every tick."""
        now = self.clock()
        if not force and now < self._next_check:
            return
        self._next_check = now + CHECK_EVERY_S
        free = free_bytes(self.path)
        if free is None:
            return
        _emit(self.observe(free, now))
        if self.recovery_needs_probe():
            try:
                probe_write(self.path)
            except OSError as e:
                _emit(self.write_failed("a probe file", e, free, now))
                return
            _emit(self.probe_succeeded(now))

    def report(self, what: str, error: OSError) -> DiskWriteError:
        """Records a failed write (any thread), logs it once, and returns the
        error to raise in its place."""
        _emit(self.write_failed(what, error, free_bytes(self.path), self.clock()))
        failure = DiskWriteError(error.errno, f"{what}: {explain(error)}")
        failure.__cause__ = error
        return failure


def _emit(line: tuple[int, str] | None) -> None:
    if line is not None:
        log.log(line[0], "%s", line[1])


def free_bytes(path: str) -> int | None:
    """Bytes an unprivileged writer may still use on ``path``'s volume (root
    may use the filesystem's reserved blocks too; counting them would let a
    voter run the disk to the last block)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


PROBE_NAME = ".metaquorum-disk-probe"


def probe_write(path: str, size: int = 4096) -> None:
    """Writes, syncs and deletes a small file: the disk takes writes again."""
    probe = os.path.join(path, PROBE_NAME)
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, bytes(size))
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)


class _QuietDiskTracebacks(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        # pysyncobj's line for every snapshot not written (every other tick
        # while one backs off): the state machine logs its own, with the reason.
        return not isinstance(exc, DiskWriteError) and record.msg != "Failed to store full dump"


_quiet = _QuietDiskTracebacks()


def quiet_tick_tracebacks() -> None:
    """pysyncobj logs a traceback for every exception out of a tick; a failed
    write was logged by ``DiskHealth`` with what to do, so its traceback is
    left out (once per failed write, it flooded the log of a full voter), and
    so is its bare line for a snapshot not written."""
    logger = logging.getLogger(SYNCOBJ_LOGGER)
    if _quiet not in logger.filters:
        logger.addFilter(_quiet)
