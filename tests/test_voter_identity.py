"""Voter identity (quorum/voter_guard.py) with real voters on loopback: a voter
whose disk was replaced never votes or counts toward a commit, catches up as an
observer, and is named a voter again once it has caught up."""

import shutil
import signal

import pytest

from .cluster import Cluster, holds_for
from .test_cluster import brokers, register

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, voters=3, fsync="always")
    try:
        yield c.start()
    finally:
        c.close()


def status(c, i):
    s = c.status(i)
    assert s is not None, c.tail(i)
    return s


def digest(c, i):
    r = c.get(i, "/v1/quorum/status?digest=true", timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    return body["lastAppliedOffset"], body["imageDigest"]


def voter_set(c, i):
    return {v["nodeId"]: v["directoryId"] for v in status(c, i)["voters"]}


def voter_set_now(c, i) -> dict | None:
    """The voter set voter i reports, or None when its status did not come (a
    2 s status read can time out on a loaded machine): for waits, which ask again."""
    s = c.status(i)
    return None if s is None else {v["nodeId"]: v["directoryId"] for v in s["voters"]}


def every_directory_named(c, i) -> bool:
    vs = voter_set_now(c, i)
    return bool(vs) and all(vs.values())


def test_a_new_cluster_writes_every_voters_directory_into_the_log(cluster):
    c = cluster
    leader = c.leader()
    c.wait(lambda: every_directory_named(c, leader), 30, "the voter set in the log")
    dirs = voter_set(c, leader)

    def names_itself(i: int) -> bool:  # a status may time out on a loaded machine: ask again
        s = c.status(i) or {}
        return s.get("directoryId") == dirs[i] and s.get("role") == "voter"

    c.wait(lambda: all(names_itself(i) for i in range(3)), 30, "each voter names its directory")
    c.wait(lambda: all(voter_set_now(c, i) == dirs for i in range(3)), 30, "every voter agrees")


def test_a_voter_that_lost_its_disk_cannot_elect_a_lagging_voter(cluster):
    """Issue 17's scenario: C paused, 20 writes acknowledged by A+B, A killed,
    B's data dir deleted and B restarted empty, C resumed, A restarted. B must
    not vote for C; nothing acknowledged is lost; every voter ends with one image."""
    c = cluster
    a = c.leader()
    b, cc = [i for i in range(3) if i != a]
    c.wait(lambda: every_directory_named(c, a), 30, "the voter set in the log")
    old_b_dir = voter_set(c, a)[b]
    c.signal(cc, signal.SIGSTOP)
    acked = {broker: register(c, a, broker) for broker in range(1, 21)}
    c.kill(a)
    c.kill(b)
    shutil.rmtree(c.data_dir(b))
    c.start(b)
    c.signal(cc, signal.SIGCONT)
    # B (empty) and C (lagging) alone: no leader may arise, whatever the wait.
    c.wait(lambda: (c.status(b) or {}).get("role") == "observer", 30, "B up as an observer")
    c.wait(lambda: c.status(cc) is not None, 30, "C answering")

    def no_leader() -> None:  # elections that must all fail
        for i in (b, cc):
            s = c.status(i)
            assert s is None or s["leaderId"] != i or not s["active"], s

    holds_for(4.0, no_leader)
    c.start(a)
    leader = c.leader()
    assert leader in (a, cc)
    # B is an observer until the leader names its new directory; then a voter.
    c.wait(
        lambda: (
            (voter_set_now(c, leader) or {}).get(b) not in (None, old_b_dir)
            and (c.status(b) or {}).get("role") == "voter"
        ),
        60,
        "B re-admitted with its new directory",
    )
    assert voter_set(c, leader)[b] == status(c, b)["directoryId"]
    assert brokers(c, leader).items() >= acked.items()
    c.wait_ready(timeout_s=60)
    c.wait(lambda: len({digest(c, i) for i in range(3)}) == 1, 60, "one image digest on all voters")


def test_an_empty_voter_does_not_form_a_cluster_alone_with_a_lagging_one(tmp_path):
    """Two of three voters of an existing cluster: one with its log, one wiped.
    The wiped one must wait (observer), so the pair cannot commit; with the
    third back, the cluster serves and re-admits the wiped voter."""
    c = Cluster(tmp_path, voters=3, fsync="always")
    try:
        c.start()
        leader = c.leader()
        c.wait(lambda: every_directory_named(c, leader), 30, "the voter set in the log")
        register(c, leader, 1)
        for i in range(3):
            c.kill(i)
        shutil.rmtree(c.data_dir(1))
        c.start(0)
        c.start(1)
        c.wait(lambda: (c.status(1) or {}).get("role") == "observer", 30, "1 up as an observer")
        s0 = c.wait(lambda: c.status(0), 30, "voter 0 answering")
        assert not s0["active"] and status(c, 1)["leaderId"] != 1
        c.start(2)
        leader = c.leader(among=[0, 2])
        assert brokers(c, leader).get(1) is not None
        c.wait(lambda: status(c, 1)["role"] == "voter", 60, "voter 1 re-admitted")
    finally:
        c.close()
