"""Every replacement metaquorum makes in pysyncobj, in one table.

pysyncobj 0.3.17 (pinned in pyproject.toml) has no hooks for what metaquorum
needs: a durable journal, an authenticated port, pre-vote, check-quorum,
fail-stop on a diverged log. Each is a function or value put in place of one
of pysyncobj's, process-wide. ``PATCHES`` lists them all: the target, the
wrapper, why, and the pysyncobj behaviour the wrapper relies on (what to
check again before moving the pin). ``install()`` applies them in the
table's order, once per process, before the first ``SyncObj`` is built.

A target listed more than once is a chain: each entry wraps what the target
held when it was installed, so the entry listed last is the outermost and is
entered first (``SyncObj._onTick``: tick_on_time, then check_quorum, then
forget_silent_leader, then listen_before_electing, then pysyncobj's own tick).

Each wrapper is a factory ``wrap(original) -> replacement``; the modules of
this package define them and install nothing themselves.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import divergence, durability, leader_liveness, pre_vote, raft_port, snapshot_transfer

PYSYNCOBJ_VERSION = "0.3.17"  # pyproject.toml's pin; tests/test_raft_patches.py checks both


@dataclass(frozen=True)
class Patch:
    target: str  # "module.Class.attr" or "module.attr", pysyncobj's (mangled) name
    wrap: Callable[[Any], Any]  # the original -> what replaces it
    why: str
    relies_on: str  # the pinned pysyncobj behaviour the replacement needs

    @property
    def name(self) -> str:
        return f"{self.wrap.__module__.rpartition('.')[2]}.{self.wrap.__name__}"


_SYNCOBJ = "pysyncobj.syncobj.SyncObj."
_TCP = "pysyncobj.tcp_connection.TcpConnection."

PATCHES: tuple[Patch, ...] = (
    Patch(
        "pysyncobj.syncobj.createJournal",
        durability.journal_factory,
        "journals that fsync their entries and .meta, checksum them, and report failed "
        "writes to DiskHealth (pysyncobj never syncs: docs/pysyncobj.md 0.1)",
        "SyncObj.__init__ calls the module global createJournal(conf.journalFile) once, "
        "on the constructing thread, and uses only the Journal interface of "
        "pysyncobj.journal (add, clear, deleteEntriesFrom/To, __getitem__, __len__, "
        "onOneSecondTimer, setRaftCommitIndex, getRaftCommitIndex, currentTerm, votedFor, "
        "flush, destroy)",
    ),
    Patch(
        "pysyncobj.syncobj.getEncryptor",
        raft_port.cipher,
        "AES-GCM with a fresh nonce per message instead of pysyncobj's Fernet, which "
        "needs the old cryptography API (docs/security.md)",
        "SyncObj.__init__ calls the module global getEncryptor(conf.password) when a "
        "password is set; TcpConnection only calls encrypt(bytes) and decrypt(bytes)",
    ),
    Patch(
        "pysyncobj.pickle.__protocol",
        raft_port.pickle_protocol,
        "pickle protocol 4: protocol 2 has no opcode for bytes, 232 µs against 1.6 µs "
        "for a 46 KB batch (decision 126)",
        "pysyncobj.pickle.dumps pickles with the module global __protocol (2); loads "
        "reads any protocol",
    ),
    Patch(
        "pysyncobj.tcp_connection.zlib",
        raft_port.frame_zlib,
        "a message under 4 KiB goes out as stored zlib blocks, not deflated: deflate's "
        "setup was nearly all of its cost (speed switch STORED_SMALL_FRAMES)",
        "TcpConnection.send frames zlib.compress(pickle.dumps(message), 3) and "
        "__processParseMessage reads zlib.decompress(data): the module global zlib, "
        "nothing else of it",
    ),
    Patch(
        _TCP + "_TcpConnection__processRead",
        raft_port.guarded_read,
        "drop a connection whose next frame declares more than the limit (a small one "
        "until the peer proved it has the secret) before pysyncobj buffers it",
        "__processRead reads into __readBuffer, whose frames start with a native int "
        "length (struct 'i'), and returns whether to read more",
    ),
    Patch(
        _TCP + "_TcpConnection__processParseMessage",
        raft_port.tracking_parse,
        "a connection that decrypted a message is trusted with the large frame limit",
        "__processParseMessage returns the next decrypted message or None, and "
        "self.encryptor is set when the port has a password",
    ),
    Patch(
        _TCP + "disconnect",
        raft_port.resetting_disconnect,
        "a reused connection object is untrusted again",
        "TcpConnection objects are reused across reconnects; disconnect() is called on every close",
    ),
    Patch(
        _SYNCOBJ + "_SyncObj__onMessageReceived",
        raft_port.keep_next_index_forward,
        "a late acknowledgement never moves a follower's next index back (pysyncobj "
        "would re-send and truncate entries the follower had applied)",
        "the leader sets __raftNextIndex[node] from each successful next_node_idx "
        "answer; a follower that lacks entries answers with reset; the transport's "
        "callback is bound at SyncObj construction, so the patch must come first",
    ),
    Patch(
        _SYNCOBJ + "_onTick",
        raft_port.listen_before_electing,
        "an overdue follower reads its sockets before it stands; each election this "
        "voter starts is logged and counted",
        "_onTick checks __raftElectionDeadline at its start and polls its sockets at "
        "its end; _poller.poll(0) reads without blocking; a candidate or leader whose "
        "__raftCurrentTerm moved in the tick stood for election",
    ),
    Patch(
        _SYNCOBJ + "_onTick",
        leader_liveness.forget_silent_leader,
        "a follower that can reach nobody forgets its leader at its election deadline",
        "a follower's __raftElectionDeadline moves on with each AppendEntries; "
        "__onLeaderChanged fails the commands forwarded to the old leader",
    ),
    Patch(
        _SYNCOBJ + "_onTick",
        leader_liveness.check_quorum,
        "a leader not answered by a majority within two election timeouts steps down "
        "(pysyncobj waits leaderFallbackTimeout)",
        "__lastResponseTime holds each other voter's last answer (reset to now by "
        "__onBecomeLeader); __setState(FOLLOWER) with __raftLeader None is pysyncobj's "
        "own fallback",
    ),
    Patch(
        _SYNCOBJ + "_onTick",
        leader_liveness.tick_on_time,
        "a tick wakes at a follower's election deadline or the leader's next heartbeat "
        "instead of sleeping the whole tick past it",
        "_onTick(timeToWait) ends with _poller.poll(timeToWait); a follower's deadline is "
        "__raftElectionDeadline, a leader sends AppendEntries once monotonic() > "
        "__newAppendEntriesTime",
    ),
    Patch(
        _SYNCOBJ + "_SyncObj__generateRaftTimeout",
        leader_liveness.silent_leader_turns,
        "a follower of a silent leader stands in its turn, not at a random point "
        "(no split votes after a leader hangs)",
        "every move of __raftElectionDeadline adds __generateRaftTimeout(); on "
        "append_entries it is called before __raftLeader is set to the sender",
    ),
    Patch(
        _SYNCOBJ + "_SyncObj__onBecomeLeader",
        leader_liveness.remember_election_answers,
        "keep the answer times pysyncobj counted at election, so the status leaves "
        "out a voter not heard since",
        "__onBecomeLeader sets every __lastResponseTime to the election's time",
    ),
    Patch(
        _SYNCOBJ + "_SyncObj__onMessageReceived",
        divergence.fail_stop_on_divergence,
        "an AppendEntries that conflicts with applied entries stops the voter instead "
        "of truncating them",
        "append_entries messages carry prevLogIdx, prevLogTerm and entries (or "
        "transmission pieces); __getEntries reads the in-memory journal; "
        "__raftLastApplied is the applied index",
    ),
    Patch(
        _SYNCOBJ + "_SyncObj__connectedToAnyone",
        pre_vote.may_stand,
        "a voter stands only after winning a pre-vote round",
        "_onTick calls __connectedToAnyone only where a follower or candidate whose "
        "deadline passed would stand for election, and stands when it returns True",
    ),
    Patch(
        "pysyncobj.serializer.Serializer.getTransmissionData",
        snapshot_transfer.send_while_writing,
        "a snapshot keeps streaming to a follower while the leader writes its next one "
        "(a replaced disk waited out every write: 136 s at 2,000,000 partitions)",
        "with a serializeChecker, Serializer.serialize leaves __pid at -1 or -2 until the "
        "checker reports SUCCESS or FAILED, and getTransmissionData sends nothing while "
        "__pid != 0; a transfer reads the file it opened at its first piece",
    ),
    Patch(
        _SYNCOBJ + "_SyncObj__applyLogEntries",
        raft_port.deferred_commit_push,
        "a leader sends a moved commit index with the next batch, not alone "
        "(33-38k -> 44-50k records/s); a SyncObj without defer_commit_push is unchanged",
        "with appendEntriesUseBatch=False __applyLogEntries returns whether an "
        "AppendEntries should go out now, and __newAppendEntriesTime is when the "
        "next is due (any AppendEntries moves it on)",
    ),
)

_lock = threading.Lock()
_installed: dict[int, Any] = {}  # PATCHES index -> the replacement installed


def resolve(target: str) -> tuple[Any, str]:
    """The object holding ``target``'s attribute, and the attribute's name."""
    path, _, attr = target.rpartition(".")
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            owner = getattr(owner, name)
        return owner, attr
    raise ImportError(f"no module in {target}")


def current(target: str) -> Any:
    owner, attr = resolve(target)
    return getattr(owner, attr)


def install() -> None:
    """Applies ``PATCHES`` in order, once per process (a second call does
    nothing). Call before the first SyncObj is built."""
    with _lock:
        if _installed:
            return
        for i, patch in enumerate(PATCHES):
            owner, attr = resolve(patch.target)
            replacement = patch.wrap(getattr(owner, attr))
            setattr(owner, attr, replacement)
            _installed[i] = replacement


def installed() -> dict[int, Any]:
    """What install() put in place, by index in PATCHES (empty before it)."""
    return dict(_installed)
