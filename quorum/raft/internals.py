"""The pysyncobj 0.3.17 privates metaquorum reads and sets (RaftHost, the
startup checks, the state machine), by name, in one place: pysyncobj offers
no public way to reach them. Each is a plain read or write of the SyncObj's
attribute."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# pysyncobj 0.3.17's _RAFT_STATE.FOLLOWER
_FOLLOWER = 0
# The logger of pysyncobj's SyncObj: its tick tracebacks, its failed snapshots.
SYNCOBJ_LOGGER = "pysyncobj.syncobj"


def transport(syncobj):
    """The SyncObj's transport (our GuardedTransport), or None before it has one."""
    return getattr(syncobj, "_SyncObj__transport", None)


def journal(syncobj):
    """The SyncObj's journal (its __raftLog), or None before it has one."""
    return getattr(syncobj, "_SyncObj__raftLog", None)


def election_deadline(syncobj) -> float:
    return syncobj._SyncObj__raftElectionDeadline


def set_election_deadline(syncobj, at: float) -> None:
    """When a follower or candidate stands next (pysyncobj's monotonic clock)."""
    syncobj._SyncObj__raftElectionDeadline = at


def knows_a_leader(syncobj) -> bool:
    return syncobj._SyncObj__raftLeader is not None


def forget_leader(syncobj) -> None:
    """No leader known; the commands forwarded to it fail (__onLeaderChanged)."""
    syncobj._SyncObj__raftLeader = None
    syncobj._SyncObj__onLeaderChanged()


def become_follower(syncobj) -> None:
    """A leader steps down to follower with no leader, as pysyncobj's own fallback."""
    syncobj._SyncObj__setState(_FOLLOWER)
    syncobj._SyncObj__raftLeader = None


def set_tick_period(syncobj, seconds: float) -> None:
    syncobj._SyncObj__conf.autoTickPeriod = seconds


def leader_commit_index(syncobj) -> int:
    """The commit index the leader last announced (0 before any)."""
    return getattr(syncobj, "_SyncObj__leaderCommitIndex", None) or 0


def commands_queued(syncobj) -> bool:
    """Commands proposed but not yet in the log: the tick thread appends them
    at its next tick (the queue's deque, read without its lock: one len())."""
    return len(syncobj._SyncObj__commandsQueue._FastQueue__queue) > 0


def last_response_times(syncobj) -> dict:
    """Each other voter's last answer to this leader (a copy; raises
    RuntimeError if the tick thread changed the dict meanwhile)."""
    return dict(syncobj._SyncObj__lastResponseTime)


def read_racing(read: Callable[[], T]) -> T | None:
    """``read()`` of a pysyncobj dict or set the tick thread changes without a
    lock: iterating it may raise RuntimeError (changed size), so try three
    times; None if every try raced."""
    for _ in range(3):
        try:
            return read()
        except RuntimeError:
            continue
    return None


def node_name(node) -> str:
    """A pysyncobj node as it names itself: its Raft address."""
    return getattr(node, "id", str(node))


def is_leader(syncobj) -> bool:
    return syncobj._isLeader()


def match_indexes(syncobj) -> list[int]:
    """Each other voter's match index (the last entry it said it holds,
    synced), as this leader counts them; tick thread only."""
    match = syncobj._SyncObj__raftMatchIndex
    return [match.get(node, 0) for node in syncobj._SyncObj__otherNodes]


def voter_count(syncobj) -> int:
    """The voters a majority is counted over: this one and its other nodes."""
    return len(syncobj._SyncObj__otherNodes) + 1


def current_term(syncobj) -> int:
    return syncobj._SyncObj__raftCurrentTerm


def set_commit_index(syncobj, index: int) -> None:
    """The leader's commit index as its tick just set it (tick thread only:
    pysyncobj reads it right after ``setRaftCommitIndex`` for what it applies,
    announces and answers)."""
    syncobj._SyncObj__raftCommitIndex = index


def wake(syncobj) -> None:
    """Wakes the tick thread from its poll (any thread): its next tick runs now."""
    notifier = getattr(syncobj, "_SyncObj__pipeNotifier", None)
    if notifier is not None:
        notifier.notify()
