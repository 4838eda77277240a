"""pysyncobj's member list, made to follow the committed voter set (quorum/membership.py).

pysyncobj 0.3.17 knows two kinds of peers: members (``__otherNodes``: they get
AppendEntries and vote requests, and its majority arithmetic counts them) and
read-only nodes (``__readonlyNodes``: they get AppendEntries and count for
nothing). Its own dynamic membership changes members when a MEMBERSHIP entry
is *appended*, and counts a node that catches up as a member at once
(decisions.md 50 says why metaquorum does not use it). Here the member list
is set from the voter set when a KRAFT_VOTERS record is *applied*, and a
joiner is a read-only node of the leader until then. Runs on the tick thread
only (it touches pysyncobj's sets and its transport). Patched by name like
quorum/raft/raft_port.py (pinned to pysyncobj 0.3.17).
"""

from __future__ import annotations

import logging

from pysyncobj.monotonic import monotonic
from pysyncobj.node import TCPNode

log = logging.getLogger(__name__)

_ATTRS = (
    "_SyncObj__otherNodes",
    "_SyncObj__readonlyNodes",
    "_SyncObj__connectedNodes",
    "_SyncObj__raftNextIndex",
    "_SyncObj__raftMatchIndex",
    "_SyncObj__lastResponseTime",
    "_SyncObj__transport",
    "_SyncObj__getCurrentLogIndex",
)


def check_port(syncobj) -> None:
    """Raises if this pysyncobj lacks what ``set_members`` changes."""
    missing = [a for a in _ATTRS if not hasattr(syncobj, a)]
    if missing:
        raise RuntimeError(
            f"this pysyncobj has no {', '.join(missing)}: pin the pysyncobj of pyproject.toml"
        )


def set_members(syncobj, members: set[str], learners: set[str]) -> bool:
    """Makes pysyncobj's members exactly ``members`` and its read-only nodes
    (those we added: TCP nodes) exactly ``learners`` (addresses, never this
    node's own). A node moving between the two keeps its connection and its
    replication progress. True if anything changed."""
    other: set = syncobj._SyncObj__otherNodes
    readonly: set = syncobj._SyncObj__readonlyNodes
    transport = syncobj._SyncObj__transport
    next_index = syncobj._SyncObj__raftNextIndex
    match_index = syncobj._SyncObj__raftMatchIndex
    answered = syncobj._SyncObj__lastResponseTime
    ours = {n.id: n for n in readonly if isinstance(n, TCPNode)}
    known = {n.id: n for n in other} | ours
    learners = learners - members
    changed = False

    def track(node) -> None:
        if node not in next_index:
            next_index[node] = syncobj._SyncObj__getCurrentLogIndex() + 1
            match_index[node] = 0
        # A leader counts a new member as heard now (pysyncobj's own add does).
        answered.setdefault(node, monotonic())

    def drop(node) -> None:
        next_index.pop(node, None)
        match_index.pop(node, None)
        answered.pop(node, None)
        syncobj._SyncObj__connectedNodes.discard(node)
        transport.dropNode(node)

    for address in members | learners:
        if address in known:
            continue
        node = TCPNode(address)
        known[address] = node
        transport.addNode(node)
        track(node)
        changed = True
    for address, node in known.items():
        in_other, in_readonly = node in other, node in readonly
        if address in members and not in_other:
            readonly.discard(node)
            other.add(node)
            track(node)
            changed = True
        elif address in learners and not in_readonly:
            other.discard(node)
            readonly.add(node)
            track(node)
            changed = True
        elif address not in members and address not in learners and (in_other or in_readonly):
            other.discard(node)
            readonly.discard(node)
            drop(node)
            changed = True
    return changed
