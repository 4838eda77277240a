"""What a voter checks before it builds its SyncObj, so that every start-up
failure is one line naming the port or the path and an exit code, never a
traceback, a silent retry or a silent hang.

* **The Raft port** (exit 2). pysyncobj retries a failed bind in the background
  (forever, once its retries run out) while it dials the other voters under
  this node's id: a second process started with a live voter's id would take
  part in Raft with an empty log. The port is bound here once, as pysyncobj
  binds it (SO_REUSEADDR, so a restart beside TIME_WAIT connections is fine),
  and whoever holds it is named.
* **The data dir** (exit 2). A read-only, foreign-owned or full directory must
  be found before anything is written, not by a traceback halfway through; and
  a data dir serves one process: ``serve`` holds an exclusive lock on it for
  its whole life, so a second process on it (given another port) is refused
  instead of writing the same journal.
* **A journal that starts after index 1 needs the snapshot before it** (exit 3,
  like a corrupt journal). pysyncobj would wait forever for entries nobody has,
  not ready and with no error, and still stand for election.
* **A deleted journal is not an empty one** (exit 3): with the meta file still
  saying entries were committed past the snapshot, pysyncobj clamps its commit
  index with a warning and serves without them (a lone voter loses
  acknowledged writes). Only a missing journal is refused: a crash never
  deletes it, while a shorter one is what a crash in a compaction leaves.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket

from .journal_format import JournalCorruptError, first_entry_index
from .node_config import ConfigError
from .raft import internals

_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp


# ------------------------------------------------------------------ the Raft port


def check_raft_port(bind_address: str, node_id: int) -> None:
    """ConfigError naming the port if this voter cannot listen on it."""
    host, _, port_text = bind_address.rpartition(":")
    host, port = host.strip("[]") or "0.0.0.0", int(port_text)
    where = f"the Raft port {host}:{port} of node {node_id} (--voters, --raft-bind)"
    _check_listen(
        host,
        port,
        where,
        "A node id may run in one process only: stop the other process, or give this one "
        "its own id and port",
    )


def check_http_port(host: str, port: int) -> None:
    """ConfigError naming the port if the HTTP API cannot listen on it (a
    voter restarted while its predecessor still holds the port is a
    configuration problem, exit 2, not a corrupt data dir)."""
    _check_listen(
        host or "0.0.0.0",
        port,
        f"the HTTP port {host or '0.0.0.0'}:{port} (--http-port, --http-host)",
        "Stop the other process (an earlier metaquorum on this data dir still running?), "
        "or choose another --http-port",
    )


def _check_listen(host: str, port: int, where: str, advice: str) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn and pysyncobj
        try:
            probe.bind((host, port))
            probe.listen(1)
        except socket.gaierror:
            return  # a name DNS does not know yet (a new pod): pysyncobj resolves it later
        except OSError as e:
            raise ConfigError(_bind_problem(e, host, port, where, advice)) from None


def refuse_unbound_port(syncobj, bind_address: str, node_id: int) -> None:
    """ConfigError (after stopping ``syncobj``) if pysyncobj's first bind
    failed: it would retry silently while dialling the other voters as this
    node. serve checked the port just before; this catches a process that took
    it in between. pysyncobj's first attempt is over once its constructor
    returns (its tick thread binds before the constructor's wait ends)."""
    transport = internals.transport(syncobj)
    if transport is None or transport.ready:
        return
    host = bind_address.rpartition(":")[0].strip("[]")
    try:
        socket.getaddrinfo(host, None)
    except socket.gaierror:
        return  # a name DNS does not know yet (a new pod): pysyncobj's retries are for that
    syncobj.destroy()
    check_raft_port(bind_address, node_id)  # names who holds it
    raise ConfigError(f"the Raft port {bind_address} of node {node_id} could not be bound")


def _bind_problem(e: OSError, host: str, port: int, where: str, advice: str) -> str:
    if e.errno == errno.EADDRINUSE:
        return f"{where} is already in use by {port_owner(port)}. {advice}"
    if e.errno == errno.EADDRNOTAVAIL:
        return f"{where}: {host} is not an address of this host; fix the flag"
    if e.errno == errno.EACCES:
        return f"{where}: permission denied (ports below 1024 need privileges); use another port"
    return f"{where} cannot be bound: {e.strerror}"


def port_owner(port: int) -> str:
    """Who listens on TCP ``port``, as well as /proc lets this process see."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if (
                len(fields) > 9
                and fields[3] == _LISTEN
                and int(fields[1].split(":")[1], 16) == port
            ):
                inodes.add(f"socket:[{fields[9]}]")
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if not any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in fds):
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        return _describe(pid, argv)
    return "another process (one this user cannot see, or in another network namespace)"


def _describe(pid: str, argv: list[str]) -> str:
    if "voter.worker_pool" in argv:  # an HTTP worker of a serve (its parent)
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                parent = f.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{parent}/cmdline", "rb") as f:
                serve = f.read().decode(errors="replace").split("\0")
        except (OSError, IndexError):
            return f"an HTTP worker of another metaquorum serve (pid {pid})"
        return f"{_describe(parent, serve)}, through its HTTP worker pid {pid}"
    if "serve" in argv and any("metaquorum" in arg for arg in argv):
        node = argv[argv.index("--node-id") + 1] if "--node-id" in argv[:-1] else "?"
        return f"another metaquorum serve (pid {pid}, --node-id {node})"
    command = " ".join(" ".join(argv).split())  # one line, whatever the arguments hold
    return f"another process (pid {pid}: {command[:120]})"


# ------------------------------------------------------------------ the data dir


PROBE = ".metaquorum-write-check"


def check_data_dir(path: str) -> None:
    """ConfigError naming ``path`` unless this process can create it (if
    missing), list it, create, sync, rename and delete a file in it, and read
    and write every file already in it."""
    if not path.strip():
        raise ConfigError("--data-dir is empty; give the directory of this voter's journal")
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ConfigError(f"--data-dir {path} is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise ConfigError(
            f"--data-dir {path}: cannot create it ({e.filename}): {explain_os_error(e)}"
        ) from None
    probe = os.path.join(path, PROBE)
    try:
        names = os.listdir(path)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"metaquorum")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(probe, probe + ".renamed")
        os.unlink(probe + ".renamed")
    except OSError as e:
        for leftover in (probe, probe + ".renamed"):  # nothing half-written stays behind
            with contextlib.suppress(OSError):
                os.unlink(leftover)
        raise ConfigError(f"--data-dir {path} is not usable: {explain_os_error(e)}") from None
    for name in names:
        file = os.path.join(path, name)
        if os.path.isfile(file) and not os.access(file, os.R_OK | os.W_OK):
            raise ConfigError(
                f"--data-dir {path}: {name} is not readable and writable by this user "
                f"(uid {os.geteuid()}, the file's owner is uid {os.stat(file).st_uid}); "
                "fix its ownership or run as its owner"
            )


# ------------------------------------------------------------------ memory

_UNLIMITED = 1 << 60  # cgroup v1 spells "no limit" as a page-rounded 2**63 - 1


def memory_room(root: str = "/") -> tuple[int, str]:
    """The bytes this process may still claim, and what limits it: its
    cgroup's memory limit less what the cgroup uses (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``), or the machine's available memory, whichever
    is less. ``root``: where /proc and /sys are (tests)."""

    def read(path: str) -> str | None:
        try:
            with open(os.path.join(root, path.lstrip("/")), encoding="ascii") as f:
                return f.read().strip()
        except (OSError, ValueError):
            return None

    room, what = _UNLIMITED, "no limit found"
    for line in (read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            room, what = int(line.split()[1]) * 1024, "the machine's available memory"
    for line in (read("/proc/self/cgroup") or "").splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":  # v2
            base = f"/sys/fs/cgroup{path.rstrip('/')}"
            limit = read(f"{base}/memory.max")
            used = read(f"{base}/memory.current")
            where = f"cgroup {path or '/'} (memory.max {limit})"
        elif "memory" in controllers.split(","):  # v1
            base = f"/sys/fs/cgroup/memory{path.rstrip('/')}"
            limit = read(f"{base}/memory.limit_in_bytes")
            used = read(f"{base}/memory.usage_in_bytes")
            where = f"cgroup {path or '/'} (memory.limit_in_bytes {limit})"
        else:
            continue
        if limit and limit.isdigit() and int(limit) < _UNLIMITED:
            left = max(0, int(limit) - int(used if used and used.isdigit() else 0))
            if left < room:
                room, what = left, f"the memory limit of {where}"
    return room, what


def check_memory_room(needed: int, flag: str) -> None:
    """ConfigError unless ``needed`` bytes, claimed at start, fit in what
    this process may still claim: past it the kernel would kill the voter
    without a word (an OOM kill), at start or later."""
    room, what = memory_room()
    if needed > room:
        raise ConfigError(
            f"{flag}: {needed >> 20} MiB of shared memory is claimed at start, but only "
            f"{room >> 20} MiB is left under {what}; give a smaller {flag.split()[0]} "
            "or this voter more memory"
        )


_held_locks: set[int] = set()


def _close_locks_in_child() -> None:
    # A forked child (the snapshot writer) would share the lock and keep it
    # after its parent died, refusing the voter's restart until it finished.
    # Closing its copy leaves the parent's lock alone (never LOCK_UN here).
    for fd in _held_locks:
        os.close(fd)
    _held_locks.clear()


os.register_at_fork(after_in_child=_close_locks_in_child)


def lock_data_dir(path: str) -> int:
    """Takes an exclusive lock on the data dir and returns its descriptor, to
    be held for the life of the process (the kernel drops the lock when the
    process ends, however it ends; ``unlock_data_dir`` before that). ConfigError
    naming the holder if another process has it."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(
            f"--data-dir {path} is in use by {lock_holder(path)}. A data dir serves one "
            "process: stop the other one, or give this one its own data dir"
        ) from None
    _held_locks.add(fd)
    return fd


def unlock_data_dir(fd: int) -> None:
    _held_locks.discard(fd)
    os.close(fd)


def lock_holder(path: str) -> str:
    """Who holds the lock on ``path``, from /proc/locks, as far as this process sees."""
    inode = os.stat(path).st_ino
    try:
        with open("/proc/locks", encoding="ascii") as f:
            rows = [line.split() for line in f]
    except OSError:
        rows = []
    for fields in rows:
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
            pid = fields[4]
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    return _describe(pid, f.read().decode(errors="replace").split("\0"))
            except OSError:
                return f"another process (pid {pid})"
    return "another process (one this user cannot see)"


def explain_os_error(e: OSError) -> str:
    """What went wrong with a file and what to do, in a few words."""
    if e.errno == errno.EROFS:
        return "the file system is read-only; give a writable volume"
    if e.errno in (errno.EACCES, errno.EPERM):
        return (
            f"permission denied for uid {os.geteuid()}; fix the directory's ownership "
            "(chown) or run as its owner"
        )
    if e.errno == errno.ENOSPC:
        return "no space left on the device; free some or give a larger volume"
    return f"{e.strerror or e}; fix it, or give another --data-dir"


# ------------------------------------------------------------------ snapshot and journal


class MissingSnapshotError(JournalCorruptError):
    """The journal was compacted behind a snapshot that is gone or older."""

    def __init__(self, journal: str, snapshot: str, first: int, covered: int | None) -> None:
        self.path, self.offset = journal, 0
        have = "is missing" if covered is None else f"ends at Raft index {covered}"
        self.reason = f"starts at Raft index {first}, and the snapshot {snapshot} {have}"
        Exception.__init__(
            self,
            f"Raft journal {journal} {self.reason}: the entries before index {first} are on "
            "no file. The voter refuses to serve rather than serve wrong state; move the data "
            "dir aside and restart this voter with an empty one (and --cluster-id) so that it "
            "catches up from the leader (docs/durability.md)",
        )


class MissingJournalError(JournalCorruptError):
    """The journal is gone while the meta file says entries past the snapshot
    were committed."""

    def __init__(self, journal: str, snapshot: str, committed: int, covered: int | None) -> None:
        self.path, self.offset = journal, 0
        have = "is missing too" if covered is None else f"ends at Raft index {covered}"
        self.reason = (
            f"is missing, but {journal}.meta says Raft index {committed} was committed "
            f"and the snapshot {snapshot} {have}"
        )
        Exception.__init__(
            self,
            f"Raft journal {journal} {self.reason}: committed entries are on no file. The "
            "voter refuses to serve rather than serve without them; move the data dir aside "
            "and restart this voter with an empty one (and --cluster-id) so that it catches "
            "up from the leader (docs/durability.md)",
        )


def check_journal_holds_what_was_committed(journal: str, snapshot: str) -> None:
    """MissingJournalError if the journal file is gone while its meta file
    says entries past the snapshot's end were committed (a damaged meta file
    is left to the journal's own check, which names it)."""
    from .raft.durability import load_meta  # noqa: PLC0415 - only on this path

    if os.path.exists(journal) or not os.path.exists(journal + ".meta"):
        return
    try:
        committed = load_meta(journal + ".meta").get("raftCommitIndex", 0)
    except JournalCorruptError:
        return
    covered = snapshot_last_index(snapshot)
    if committed > (covered or 0):
        raise MissingJournalError(journal, snapshot, committed, covered)


def check_snapshot_covers_journal(journal: str, snapshot: str) -> None:
    """MissingSnapshotError unless the snapshot and the journal together hold
    every entry from index 1: a journal whose first entry is above 1 continues
    a snapshot that must end at most one entry before it. A damaged journal or
    snapshot is left to their own checks at load, which name the damage."""
    try:
        with open(journal, "rb") as f:
            size = os.fstat(f.fileno()).st_size

            def read(offset: int, n: int) -> bytes:
                f.seek(offset)
                return f.read(n)

            first = first_entry_index(read, size)
    except FileNotFoundError:
        return
    if first is None or first <= 1:
        return
    covered = snapshot_last_index(snapshot)
    if covered is None or covered + 1 < first:
        raise MissingSnapshotError(journal, snapshot, first, covered)


def snapshot_last_index(path: str) -> int | None:
    """The Raft index a snapshot ends at; None if there is no snapshot file.
    An unreadable header counts as covering everything: the snapshot's own
    check at load refuses it with the reason."""
    import orjson  # noqa: PLC0415 - only on this path

    try:
        with open(path, "rb") as f:
            line = f.readline(1 << 20)
    except FileNotFoundError:
        return None
    try:
        index = orjson.loads(line)["raft"]["last"][1]
    except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
        return 2**63
    return index if type(index) is int else 2**63
