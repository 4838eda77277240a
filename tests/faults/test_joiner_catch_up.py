"""Found by the nemesis's membership changes (decisions.md 52): a node that
catches up through the log, not a snapshot, applies every older voter set on
its way, and quorum/membership_port.set_members makes pysyncobj's member list
that set at once, dropping every node it does not name (``transport.dropNode``).
When the leader streaming to it was added after such a set, the joiner drops
the leader's connection on applying it, and from then on refuses it as an
unknown address: it never catches up and is never added (the nemesis's
add-voter of node 9 retried for 180 s; it held Raft entry 1496 of 2218, the
leader saw it not connected; the joiner's member list, 0.15 s after its
start, was the set of the leader's snapshot, which predates the leader). No
write is at risk: the joiner counts for nothing; but a wiped voter catching up
the same way would not be re-admitted. Loopback voters, no root needed.

Not deterministic: it failed in 3 of 13 runs here (the joiner's log says
"Raft members now" with the set without its leader, and the add answers
"has not connected"); when the leader compacts after its own addition the
snapshot names it and all is well. Hence not strict: a pass proves nothing,
a failure of the add is the bug. Fix (not made: quorum/ is not this
change's): a node that is not a voter keeps the node it hears AppendEntries
from as a peer whatever set it applies, or learns the leader from the
leader's hello rather than from its own member list."""

from __future__ import annotations

import time

import httpx
import pytest

from ..cluster import Cluster
from ..test_cluster import register_body

pytestmark = pytest.mark.slow


def role(c: Cluster, i: int) -> str | None:
    return (c.status(i) or {}).get("role")


def post(c: Cluster, via: int, path: str, body: dict, timeout: float = 60.0) -> httpx.Response:
    return c.client.post(c.url(via) + path, json=body, follow_redirects=True, timeout=timeout)


@pytest.mark.xfail(
    strict=False,  # it reproduced in 3 of 13 runs on loopback, each ~7-40 s
    reason="a catching-up node applying an older voter set drops the leader that was "
    "added after it (quorum/membership_port.set_members), and stops catching up",
)
def test_a_joiner_catches_up_through_a_voter_set_that_predates_its_leader(tmp_path):
    # Snapshots every 100 entries: the one the joiner gets predates its leader.
    c = Cluster(tmp_path, voters=3, extra=["--compaction-entries", "100"])
    try:
        c.start()
        leader = c.leader()
        for broker in range(1000, 1250):
            r = post(c, leader, "/v1/brokers/register", register_body(c, broker), timeout=10)
            assert r.status_code == 200, r.text
        first = c.add_node()
        c.start(first)
        c.wait(lambda: role(c, first) == "observer", 30, f"node {first} up")
        body = {"nodeId": first, "address": c.raft_address(first), "timeoutMs": 30_000}
        r = post(c, leader, "/v1/quorum/add-voter", body)
        assert r.status_code == 200, r.text
        c.wait(lambda: role(c, first) == "voter", 30, f"node {first} a voter")

        def moved() -> bool:  # retried: a transfer may time out on a loaded machine
            r = post(c, c.leader(), "/v1/quorum/transfer-leadership", {"targetNodeId": first})
            return r.status_code == 200 and c.leader() == first

        c.wait(moved, 60, f"node {first} leading")
        # Entries after the set that names the new leader (fewer than a
        # compaction's): the joiner must receive them from that leader once
        # it has loaded a snapshot whose voter set does not name it.
        for broker in range(1, 21):
            r = post(c, first, "/v1/brokers/register", register_body(c, broker), timeout=10)
            assert r.status_code == 200, r.text
        # The joiner is told the current voters, as an operator would.
        c.voters = ",".join(f"{i}@{c.raft_address(i)}" for i in (0, 1, 2, first))
        joiner = c.add_node()
        # pysyncobj connects a pair from the side whose address sorts higher:
        # here the leader, whose connection the joiner then refuses as unknown.
        # (The other way round the joiner's own connection survived, in 4 runs.)
        c.start(joiner)
        c.wait(lambda: role(c, joiner) == "observer", 30, f"node {joiner} up")
        started = time.monotonic()
        body = {"nodeId": joiner, "address": c.raft_address(joiner), "timeoutMs": 30_000}
        r = post(c, first, "/v1/quorum/add-voter", body)
        assert r.status_code == 200, (r.status_code, r.text, c.tail(joiner))
        c.wait(lambda: role(c, joiner) == "voter", 30, f"node {joiner} a voter")
        assert time.monotonic() - started < 60
    finally:
        c.close()
