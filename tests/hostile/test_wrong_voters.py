"""Finding 6: a voter restarted with another --voters list used to act on it
(with a fourth voter added to its list it stood for election and led with
four voters while the others had three). The voter set lives in the log now:
the flag only says who forms a new cluster, a voter that disagrees says so
once, naming the command that changes membership, and follows the log."""

from __future__ import annotations

import pytest

from tests.cluster import Cluster
from tests.nodes import free_port

from ..conftest import running_cluster
from .heartbeating import register_unfenced

DIFFERS = "differs from the voter set in the log"


def restart_with_voters(c: Cluster, i: int, voters: str) -> None:
    assert c.stop(i) == 0
    bootstrap = c.voters
    c.voters = voters  # read by args() when the process starts
    try:
        c.start(i)
    finally:
        c.voters = bootstrap


def follows(c: Cluster, i: int, leader: int) -> bool:
    s = c.status(i)
    return bool(s and s["leaderId"] == leader and s["ready"])


@pytest.mark.slow
def test_a_voter_restarted_with_another_voters_list_follows_the_log_and_says_so(tmp_path):
    with running_cluster(tmp_path, voters=3) as c:
        leader = c.leader()
        term = c.status(leader)["raftTerm"]
        f = next(i for i in range(c.n) if i != leader)
        in_log = {v["nodeId"]: v["raftAddress"] for v in c.status(leader)["voters"]}

        # A fourth voter nobody added.
        restart_with_voters(c, f, c.voters + f",3@127.0.0.1:{free_port()}")
        c.wait(lambda: follows(c, f, leader), 60, f"voter {f} following voter {leader}")
        # And the leader's address spelled with a port it does not listen on.
        wrong = ",".join(
            f"{nid}@127.0.0.1:{free_port() if nid == leader else addr.rpartition(':')[2]}"
            for nid, addr in sorted(in_log.items())
        )
        restart_with_voters(c, f, wrong)
        c.wait(lambda: follows(c, f, leader), 60, f"voter {f} following voter {leader} again")

        s = c.status(f)
        assert {v["nodeId"]: v["raftAddress"] for v in s["voters"]} == in_log
        assert c.leader() == leader and c.status(leader)["raftTerm"] == term
        register_unfenced(c, leader, 7)  # a write commits with the log's three voters
        log = c.logs[f].read_text(errors="replace")
        warnings = [line for line in log.splitlines() if DIFFERS in line]
        assert len(warnings) == 2, warnings  # once per start
        assert all("metaquorum add-voter / remove-voter" in w for w in warnings), warnings
        assert "3@127.0.0.1:" in warnings[0] and "3@" not in warnings[0].split(DIFFERS)[1]
