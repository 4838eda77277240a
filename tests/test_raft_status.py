"""QuorumNode.status() (quorum/raft/status.py): what code outside quorum/
reads of Raft, and nothing else of pysyncobj is read there."""

import re
from pathlib import Path

from pysyncobj.node import TCPNode

from quorum.raft.status import CANDIDATE, FOLLOWER, LEADER, RaftStatus, raft_status

ROOT = Path(__file__).resolve().parent.parent


class _SyncObj:
    """The attributes raft_status reads, as pysyncobj 0.3.17 names them."""

    def __init__(self, state: int, leader) -> None:
        self._SyncObj__raftState = state
        self._SyncObj__otherNodes = {TCPNode("10.0.0.3:9093"), TCPNode("10.0.0.2:9093")}
        self.raftCurrentTerm = 7
        self.raftCommitIndex = 120
        self.raftLastApplied = 118
        self._leader = leader

    def _getLeader(self):
        return self._leader


def test_status_reads_role_term_leader_indexes_and_members():
    leader = TCPNode("10.0.0.2:9093")
    assert raft_status(_SyncObj(0, leader)) == RaftStatus(
        role=FOLLOWER,
        term=7,
        leader="10.0.0.2:9093",
        commit_index=120,
        last_applied=118,
        members=("10.0.0.2:9093", "10.0.0.3:9093"),
    )
    assert raft_status(_SyncObj(1, None)).role == CANDIDATE
    leading = raft_status(_SyncObj(2, "10.0.0.1:9093"))
    assert leading.role == LEADER and leading.leading and leading.leader == "10.0.0.1:9093"
    assert not raft_status(_SyncObj(0, None)).leading


def test_no_pysyncobj_internals_are_read_outside_quorum():
    """api/, voter/ and metaquorum/ read Raft through node.status() (or node.raft_status(),
    pysyncobj's own status dict), never node.syncobj or a _SyncObj__ private."""
    found = []
    for folder in ("api", "voter", "metaquorum"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\bsyncobj\.|_SyncObj__", line.split("#")[0]):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_no_pysyncobj_private_is_named_in_quorum_outside_quorum_raft():
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "quorum").glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "_SyncObj__" in line
    ]
    assert not found, found


def test_only_quorum_raft_holds_the_syncobj():
    """quorum/raft/host.py builds and drives the SyncObj: quorum/ outside
    quorum/raft/, bench/ and scripts/ never reach it as ``.syncobj`` (api/
    and metaquorum/ are held to it above)."""
    paths = [
        *sorted((ROOT / "quorum").glob("*.py")),
        *sorted((ROOT / "bench").rglob("*.py")),
        *sorted((ROOT / "scripts").rglob("*.py")),
    ]
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in paths
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\.syncobj\b", line.split("#")[0])
    ]
    assert not found, "\n".join(found)
