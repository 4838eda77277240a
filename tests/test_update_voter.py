"""update-voter on real voters (KIP-853 UpdateRaftVoter, quorum/membership.py
rule 6): a voter restarted at a new Raft port, with its data dir, takes its
place in the quorum under the new address by asking the leader itself; the
leader too. The refusals are decided without sockets in
tests/test_membership_rules.py."""

from __future__ import annotations

import json
import signal
import time

import pytest

from quorum.membership import address_of

from .cluster import Cluster
from .local_node import LocalNode
from .nodes import free_port
from .test_cluster import brokers
from .test_membership import Writer, digest, mq, role, voters_of


def move(c: Cluster, i: int) -> str:
    """Stops voter ``i`` and starts it again, with its data dir, at a new Raft
    port (its --voters entry spelled at the new address, as an operator would)."""
    assert c.stop(i) == 0
    c.raft[i] = free_port()
    c.voters = ",".join(f"{j}@127.0.0.1:{c.raft[j]}" for j in range(c.n))
    c.start(i)
    return c.raft_address(i)


def everyone_sees_from(c: Cluster, j: int, i: int, address: str) -> bool:
    """Voter ``j``'s status names voter ``i`` at ``address``."""
    return voters_of(c, j).get(i, {}).get("raftAddress") == address


def everyone_sees(c: Cluster, i: int, address: str, directory: str) -> bool:
    """Every voter's status names voter ``i`` at ``address`` with its directory,
    and the leader has it connected."""
    for j in range(c.n):
        v = voters_of(c, j).get(i)
        if v is None or v["raftAddress"] != address or v["directoryId"] != directory:
            return False
    leader = c.leader(timeout_s=10)
    return bool(voters_of(c, leader)[i]["connected"]) and role(c, i) == "voter"


def test_a_lone_voter_restarted_at_a_new_address_moves_itself(tmp_path):
    """Kafka's leader updates itself (testLeaderUpdatesVoter): a lone voter
    restarted with its data dir at a new Raft port leads, and writes the set
    with itself at that port, its directory id kept."""
    first = LocalNode(str(tmp_path))
    try:
        first.wait_active()
        first.wait_until(lambda: bool(first.node.image.voters), 15, "the first voter set")
        (before,) = first.node.image.voters
    finally:
        first.close()
    second = LocalNode(str(tmp_path))  # the same data dir, another free port
    try:
        new = second.config.raft_address
        assert new != address_of(before)
        second.wait_until(
            lambda: [address_of(v) for v in second.node.image.voters] == [new], 15, "moved"
        )
        (after,) = second.node.image.voters
        assert after == before._replace(port=int(new.rpartition(":")[2]))
        assert second.node.guard.moved() is None and second.node.guard.admitted
    finally:
        second.close()


@pytest.mark.slow
def test_a_follower_then_the_leader_move_to_new_ports_under_a_writer(tmp_path):
    # Elections after 2-3.2 s, check-quorum after 6.4 s: a leader cut off from
    # its majority still leads when the moved follower's ask comes (below).
    c = Cluster(tmp_path, voters=3, fsync="always", extra=["--election-timeout-ms", "2000"])
    try:
        c.start()
        leader = c.leader()
        c.wait(lambda: len(voters_of(c, leader)) == 3, 30, "the first voter set in the log")
        directories = {i: v["directoryId"] for i, v in voters_of(c, leader).items()}
        follower = next(i for i in range(3) if i != leader)
        with Writer(c) as w:
            c.wait(lambda: len(w.acked) >= 10, 30, "the writer going")
            started = time.monotonic()
            # A follower: it asks the leader, which writes the set with it moved.
            old = c.raft_address(follower)
            new = move(c, follower)
            c.wait(
                lambda: everyone_sees(c, follower, new, directories[follower]),
                60,
                f"node {follower} moved from {old} to {new} on every voter",
            )
            # The leader: the two others elect a leader, which it then asks.
            old_leader = c.leader()
            new = move(c, old_leader)
            c.wait(
                lambda: everyone_sees(c, old_leader, new, directories[old_leader]),
                60,
                f"node {old_leader} (the leader) moved to {new} on every voter",
            )
            # The leader dies before the move commits: the third voter frozen,
            # the leader takes the moved follower's ask but cannot commit it
            # (the moved follower counts for nothing yet), and is killed. The
            # third voter resumes and the old leader comes back at its address:
            # they elect a leader (its log, with or without the record, wins by
            # Raft's rule) and the follower's next ask finishes the move.
            leader = c.leader()
            follower, third = [i for i in range(3) if i != leader]
            asked = c.logs[follower].stat().st_size
            c.signal(third, signal.SIGSTOP)
            new = move(c, follower)
            c.wait(
                lambda: b"the leader is moving this voter" in c.logs[follower].read_bytes()[asked:],
                30,
                f"node {follower}'s ask taken",
            )
            assert not everyone_sees_from(c, leader, follower, new)  # not committed
            c.kill(leader)
            c.signal(third, signal.SIGCONT)
            c.start(leader)
            c.wait(
                lambda: everyone_sees(c, follower, new, directories[follower]),
                60,
                f"node {follower} moved to {new} although the leader died before it committed",
            )
            moved = time.monotonic()
            c.wait(lambda: w.acked_since(moved) >= 10, 30, "writes after the moves")
            during = w.acked_since(started)
        leader = c.leader()
        # Nothing else changed: the same three ids and directories, three addresses.
        voters = voters_of(c, leader)
        assert {i: v["directoryId"] for i, v in voters.items()} == directories
        assert len({v["raftAddress"] for v in voters.values()}) == 3
        assert during > 0
        acked = dict(w.acked)
        assert brokers(c, leader).items() >= acked.items(), "an acknowledged write was lost"
        c.wait(lambda: len({digest(c, i) for i in range(3)}) == 1, 60, "one image on every voter")
        # The operator's path (the CLI): the same address again is done already,
        # exit 0 and nothing written; another directory is refused, exit 1.
        flags = [
            "--url", c.url(leader), "--node-id", str(follower),
            "--raft-address", c.raft_address(follower),
        ]  # fmt: skip
        done = mq("update-voter", *flags, "--directory-id", directories[follower])
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["changed"] is False
        wrong = mq("update-voter", *flags, "--directory-id", "x" * 22)
        assert wrong.returncode == 1, (wrong.stdout, wrong.stderr)
        assert (json.loads(wrong.stdout)["errorName"], json.loads(wrong.stdout)["rule"]) == (
            "VOTER_NOT_FOUND",
            "kip-853.voter-directory-mismatch",
        )
        assert "(rule kip-853.voter-directory-mismatch; docs/rules.md)" in wrong.stderr
        # Every voter, restarted with its command line, keeps the moved set.
        for i in range(3):
            assert c.stop(i) == 0
        c.start()
        leader = c.leader()
        c.wait(
            lambda: all(everyone_sees(c, i, c.raft_address(i), directories[i]) for i in range(3)),
            60,
            "the moved set after a full restart",
        )
    finally:
        c.close()
