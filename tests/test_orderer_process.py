"""A voter with HTTP workers orders its writes in a process of its own
(voter/orderer_process.py), Raft staying in the serve process. What a
broker sees is the same; an orderer that dies or freezes is replaced without
the voter losing its Raft role, and no client hears an acknowledgement of a
write that did not commit."""

import os
import signal
import threading

import pytest

from .cluster import Cluster
from .conftest import running_cluster
from .test_cluster import register
from .test_http_workers import alive, check_acknowledged, load

pytestmark = pytest.mark.slow


def orderer_of(cluster, i):
    status = cluster.status(i)
    return status.get("ordererProcess") if status else None


def committed_records(cluster, i) -> float:
    """The voter's metaquorum_committed_records counter, as /metrics says."""
    r = cluster.get(i, "/metrics")
    assert r.status_code == 200, r.text
    (line,) = (
        x for x in r.text.splitlines() if x.startswith("metaquorum_committed_records_total ")
    )
    return float(line.split()[1])


@pytest.mark.parametrize("how", ["killed", "frozen"])
def test_an_orderer_killed_or_frozen_under_load_is_replaced_and_acknowledges_nothing_false(
    tmp_path, how
):
    cluster = Cluster(tmp_path, extra=["--http-workers", "1"])
    try:
        cluster.start()
        cluster.wait_ready()
        leader = cluster.leader()
        term = cluster.status(leader)["raftTerm"]
        victim = orderer_of(cluster, leader)
        assert victim is not None and victim["alive"] and victim["restarts"] == 0, victim
        acknowledged: dict[int, int] = {}
        outcomes: list[str] = []
        stop = threading.Event()
        threads = load(cluster, leader, acknowledged, outcomes, stop)
        try:
            cluster.wait(lambda: len(acknowledged) >= 50, 60, "writes under way")
            # Reported every STATUS_EVERY_S: what the orderer had counted by
            # the kill is at least what the voter says now.
            counted = committed_records(cluster, leader)
            assert counted > 0
            # Frozen, the serve process kills it once it has been silent
            # ORDERER_SILENT_S (voter/worker_pool.py).
            os.kill(victim["pid"], signal.SIGKILL if how == "killed" else signal.SIGSTOP)
            before = len(acknowledged)

            def counts_on():
                # The new orderer counts on from its predecessors': the voter's
                # counters never go back while its serve process runs.
                now = committed_records(cluster, leader)
                assert now >= counted, f"committed records went back from {counted} to {now}"
                return now

            def replaced():
                counts_on()
                now = orderer_of(cluster, leader)
                return now is not None and now["pid"] != victim["pid"] and now["alive"]

            cluster.wait(replaced, 60, "the orderer replaced")
            cluster.wait(
                lambda: counts_on() and len(acknowledged) >= before + 100, 60, "writes after it"
            )
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=30)
        assert not alive(victim["pid"])
        status = cluster.status(leader)
        assert status["leaderId"] == leader and status["active"], status
        assert status["raftTerm"] == term, "losing the orderer cost the voter its leadership"
        assert status["ordererProcess"]["restarts"] == 1, status["ordererProcess"]
        # What the clients heard meanwhile: answers, refusals (503) and unknown
        # outcomes; nothing else.
        assert set(outcomes) <= {"200", "503", "ReadTimeout"}, sorted(set(outcomes))
        check_acknowledged(cluster, acknowledged)
    finally:
        cluster.close()


def test_status_names_the_orderer_and_sigterm_stops_it(tmp_path):
    with running_cluster(tmp_path, extra=["--http-workers", "1"]) as c:
        orderer = orderer_of(c, 0)
        assert orderer is not None and alive(orderer["pid"]), orderer
        assert register(c, 0, 1) > 0
        assert c.stop(0) == 0, c.tail(0)
        assert not alive(orderer["pid"])


def test_one_process_orders_its_own_writes(tmp_path):
    with running_cluster(tmp_path, extra=["--http-workers", "0"]) as c:
        assert orderer_of(c, 0) is None
        assert register(c, 0, 1) > 0


def test_an_orderer_that_keeps_dying_on_the_leader_hands_leadership_over(tmp_path):
    """A leader whose orderer dies again and again (ORDERER_HANDOVER_AFTER in
    a row) would lead a cluster no write reaches: it hands leadership to
    another voter."""
    with running_cluster(tmp_path, voters=3, extra=["--http-workers", "1"]) as c:
        leader = c.leader()
        killed = set()

        def kill_the_next():
            now = orderer_of(c, leader)
            if now is not None and now["pid"] not in killed and alive(now["pid"]):
                killed.add(now["pid"])
                os.kill(now["pid"], signal.SIGKILL)
            return len(killed) >= 3

        c.wait(kill_the_next, 60, "the leader's orderer killed three times")
        c.wait(lambda: c.leader() != leader, 60, "leadership handed to another voter")
        assert register(c, c.leader(), 1) > 0
        assert "handing leadership to another voter" in c.tail(leader, 2000)
