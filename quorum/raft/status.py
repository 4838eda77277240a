"""What code outside quorum/raft/ reads of pysyncobj: one RaftStatus, read
from the SyncObj at once (``QuorumNode.status()``)."""

from __future__ import annotations

from dataclasses import dataclass

from . import internals

# pysyncobj 0.3.17's _RAFT_STATE: FOLLOWER 0, CANDIDATE 1, LEADER 2.
FOLLOWER, CANDIDATE, LEADER = "follower", "candidate", "leader"
_ROLES = (FOLLOWER, CANDIDATE, LEADER)


@dataclass(frozen=True)
class RaftStatus:
    role: str  # FOLLOWER, CANDIDATE or LEADER
    term: int
    leader: str | None  # the leader's Raft address as pysyncobj names it, or None
    commit_index: int
    last_applied: int
    members: tuple[str, ...]  # the other voters pysyncobj replicates to, by Raft address

    @property
    def leading(self) -> bool:
        return self.role == LEADER


def raft_status(syncobj) -> RaftStatus:
    """Read on any thread: each field is one attribute read of the SyncObj
    (pysyncobj keeps no lock), as the node read them before."""
    leader = syncobj._getLeader()
    return RaftStatus(
        role=_ROLES[syncobj._SyncObj__raftState],
        term=syncobj.raftCurrentTerm,
        leader=None if leader is None else internals.node_name(leader),
        commit_index=syncobj.raftCommitIndex,
        last_applied=syncobj.raftLastApplied,
        members=_members(syncobj),
    )


def _members(syncobj) -> tuple[str, ...]:
    # The tick thread may change the set meanwhile (a membership change).
    nodes = internals.read_racing(lambda: tuple(syncobj._SyncObj__otherNodes))
    return () if nodes is None else tuple(sorted(internals.node_name(n) for n in nodes))
