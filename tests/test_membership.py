"""Online membership (quorum/membership.py) with real voters on loopback:
add-voter and remove-voter one at a time while a writer keeps writing,
their refusals, a removed voter that cannot disrupt, and a restart that
keeps the voter set of the log whatever --voters says."""

from __future__ import annotations

import json
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from quorum.data_dir_reader import last_voter_set, read_journal

from .cluster import Cluster, holds_for
from .test_cluster import brokers, register_body

pytestmark = pytest.mark.slow


def status(c: Cluster, i: int) -> dict:
    s = c.status(i)
    assert s is not None, c.tail(i)
    return s


def role(c: Cluster, i: int) -> str | None:
    """Its role, or None while it does not answer (starting, busy): for waits."""
    return (c.status(i) or {}).get("role")


def voters_of(c: Cluster, i: int) -> dict[int, dict]:
    s = c.status(i) or {}
    return {v["nodeId"]: v for v in s.get("voters", []) if v.get("voter", True)}


def digest(c: Cluster, i: int) -> tuple[int, str]:
    r = c.get(i, "/v1/quorum/status?digest=true", timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    return body["lastAppliedOffset"], body["imageDigest"]


def change(c: Cluster, via: int, path: str, body: dict, timeout: float = 60.0) -> httpx.Response:
    """A voter change sent to node ``via``, following the redirect to the leader."""
    return c.client.post(c.url(via) + path, json=body, follow_redirects=True, timeout=timeout)


def add(c: Cluster, i: int, via: int | None = None, timeout_ms: int = 30_000) -> dict:
    via = c.leader() if via is None else via
    body = {"nodeId": i, "address": c.raft_address(i), "timeoutMs": timeout_ms}
    r = change(c, via, "/v1/quorum/add-voter", body)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def remove(c: Cluster, i: int, via: int | None = None) -> dict:
    via = c.leader() if via is None else via
    if via == i:  # a leader is not removed: it hands over first
        r = change(c, via, "/v1/quorum/transfer-leadership", {})
        assert r.status_code == 200, r.text
        via = r.json()["leaderId"]
    r = change(c, via, "/v1/quorum/remove-voter", {"nodeId": i})
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def mq(*args: str) -> subprocess.CompletedProcess:
    """The operator's command line, as a process."""
    return subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def refused(r: httpx.Response, name: str, words: str) -> None:
    assert r.status_code == 409, (r.status_code, r.text)
    body = r.json()
    assert body["errorName"] == name, body
    assert words in body["errorMessage"], body


class Writer:
    """Registers brokers 1, 2, ... one at a time through any live voter,
    following redirects; remembers every acknowledged registration."""

    def __init__(self, c: Cluster) -> None:
        self.c = c
        self.acked: dict[int, int] = {}
        self.ack_times: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._client = httpx.Client(timeout=5.0)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._client.close()

    def _run(self) -> None:
        broker, via = 1, 0
        while not self._stop.is_set():
            via = (via + 1) % self.c.n
            if not self.c.alive(via):
                continue
            try:
                r = self._client.post(
                    self.c.url(via) + "/v1/brokers/register",
                    json=register_body(self.c, broker),
                    follow_redirects=True,
                )
            except httpx.HTTPError:
                self.failures += 1
                continue
            if r.status_code == 200 and r.json()["errorName"] == "NONE":
                self.acked[broker] = r.json()["brokerEpoch"]
                self.ack_times.append(time.monotonic())
                broker += 1
            else:
                self.failures += 1
                time.sleep(0.02)

    def acked_since(self, t: float) -> int:
        return sum(1 for at in self.ack_times if at >= t)

    def longest_gap(self, since: float) -> float:
        times = [since] + [t for t in self.ack_times if t >= since] + [time.monotonic()]
        return max(b - a for a, b in zip(times, times[1:], strict=False))


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, voters=3, fsync="always")
    try:
        c.start()
        leader = c.leader()
        c.wait(lambda: len(voters_of(c, leader)) == 3, 30, "the first voter set in the log")
        yield c
    finally:
        c.close()


def test_scale_3_to_5_to_3_while_writing(cluster):
    c = cluster
    joiners = [c.add_node(), c.add_node()]
    for j in joiners:
        c.start(j)
    for j in joiners:
        c.wait(lambda j=j: role(c, j) == "observer", 30, f"{j} up")
    with Writer(c) as w:
        c.wait(lambda: len(w.acked) >= 20, 30, "the writer going")
        started = time.monotonic()
        for j in joiners:
            body = add(c, j)
            assert body["changed"] is True
            assert j in {v["nodeId"] for v in body["voters"]}
            c.wait(lambda j=j: role(c, j) == "voter", 30, f"node {j} a voter")
        five = {v["nodeId"] for v in add(c, joiners[0])["voters"]}
        assert five == {0, 1, 2, 3, 4}  # a retried add finds it done
        for j in joiners:
            remove(c, j)
        ended = time.monotonic()
        during = w.acked_since(started)
        c.wait(lambda: w.acked_since(ended) >= 20, 30, "writes after the changes")
        gap = w.longest_gap(started)
    # Writes went on being acknowledged while the voter set changed four times.
    assert during > 0 and gap < 5.0, f"{during} writes acked; a {gap:.1f} s stall"
    leader = c.leader(among=[0, 1, 2])
    assert set(voters_of(c, leader)) == {0, 1, 2}
    for j in joiners:
        c.wait(lambda j=j: role(c, j) == "removed", 30, f"node {j} knows it left")
    acked = dict(w.acked)
    assert brokers(c, leader).items() >= acked.items(), "an acknowledged write was lost"
    c.wait(lambda: len({digest(c, i) for i in range(3)}) == 1, 60, "one image on every voter")


def test_each_refused_change_says_why_and_changes_nothing(cluster):
    c = cluster
    leader = c.leader()
    f1, f2 = [i for i in range(3) if i != leader]
    add_path, remove_path = "/v1/quorum/add-voter", "/v1/quorum/remove-voter"
    r = change(c, leader, add_path, {"nodeId": f1, "address": "127.0.0.1:1"})
    refused(r, "DUPLICATE_VOTER", f"node {f1} is already a voter")
    r = change(c, leader, add_path, {"nodeId": 9, "address": c.raft_address(f1)})
    refused(r, "DUPLICATE_VOTER", f"is already voter {f1}'s")
    r = change(c, leader, add_path, {"nodeId": 9, "address": "nohost"})
    assert r.status_code == 400 and r.json()["errorMessage"].startswith("address:"), r.text
    r = change(c, leader, add_path, {"nodeId": -1, "address": "127.0.0.1:1"})
    assert r.status_code == 400 and "nodeId" in r.json()["errorMessage"], r.text
    j = c.add_node()  # never started: nobody says hello at its address
    body = {"nodeId": j, "address": c.raft_address(j), "timeoutMs": 1500}
    refused(change(c, leader, add_path, body), "REQUEST_TIMED_OUT", "has not connected")
    # While one change is in flight, any other is refused.
    slow: dict = {}
    waiting = threading.Thread(
        target=lambda: slow.update(r=change(c, leader, add_path, {**body, "timeoutMs": 6000}))
    )
    waiting.start()
    try:
        c.wait(lambda: j in {v["nodeId"] for v in status(c, leader)["voters"]}, 10, "the add")
        r = change(c, leader, remove_path, {"nodeId": f2})
        refused(r, "REQUEST_TIMED_OUT", f"another voter change is in flight (adding node {j}")
    finally:
        waiting.join(timeout=30)
    refused(slow["r"], "REQUEST_TIMED_OUT", "has not connected")
    refused(change(c, leader, remove_path, {"nodeId": 7}), "VOTER_NOT_FOUND", "7 is not a voter")
    r = change(c, leader, remove_path, {"nodeId": leader})
    refused(r, "INVALID_REQUEST", f"node {leader} is the active controller")
    c.kill(f1)
    c.wait(
        lambda: not voters_of(c, leader).get(f1, {}).get("connected", True), 30, f"{f1} seen gone"
    )
    r = change(c, leader, remove_path, {"nodeId": f2})
    refused(r, "INVALID_REQUEST", f"bring back [{f1}] first")
    assert set(voters_of(c, leader)) == {0, 1, 2}


def test_the_last_voter_is_not_removed(tmp_path):
    c = Cluster(tmp_path, voters=1)
    try:
        c.start()
        leader = c.leader()

        # Just after it becomes active, the voter writes its first voter set,
        # and a change meanwhile is refused as one in flight (REQUEST_TIMED_OUT,
        # retriable). The status cannot show when that record is in: a lone
        # voter's bootstrap set already names its directory. So retry that
        # refusal, as an operator would, until the refusal that matters here.
        def answer():
            r = change(c, leader, "/v1/quorum/remove-voter", {"nodeId": 0})
            in_flight = r.status_code == 409 and r.json()["errorName"] == "REQUEST_TIMED_OUT"
            return None if in_flight else r

        refused(
            c.wait(answer, 30, "a remove-voter not refused as in flight"),
            "INVALID_REQUEST",
            "node 0 is the last voter",
        )
    finally:
        c.close()


def test_a_removed_voter_neither_votes_nor_counts_nor_disrupts(cluster):
    c = cluster
    leader = c.leader()
    gone, kept = [i for i in range(3) if i != leader]
    remove(c, gone)
    c.wait(lambda: role(c, gone) == "removed", 30, "the removed node knows it")
    # The status reads the role from the applied voter set; the log line comes
    # when the node next sets its members, a moment later.
    c.wait(
        lambda: "is no longer in the voter set" in c.logs[gone].read_text(),
        30,
        "the removed node's log line",
    )
    metrics = c.get(gone, "/metrics").text.splitlines()
    assert "metaquorum_voter 0.0" in metrics and "metaquorum_voters 2.0" in metrics
    term = status(c, leader)["raftTerm"]
    deadline = time.monotonic() + 3
    broker = 100
    while time.monotonic() < deadline:  # it stays quiet while the two voters commit
        r = change(c, leader, "/v1/brokers/register", register_body(c, broker), timeout=10)
        assert r.status_code == 200 and r.json()["errorName"] == "NONE", r.text
        broker += 1
        s = status(c, gone)
        assert not s["active"] and s["role"] == "removed"
        assert status(c, leader)["raftTerm"] == term
    # It no longer hears the leader, so it names none (and answers writes 503).
    c.wait(lambda: status(c, gone)["leaderId"] is None, 30, "the removed node names no leader")
    # With the other voter gone, the leader is alone: the removed node must not
    # make a majority, neither by acknowledging nor by voting.
    c.kill(kept)
    c.wait(lambda: status(c, leader)["leaderId"] is None, 30, "the lone voter steps down")

    def neither_leads() -> None:
        for i in (leader, gone):
            assert not status(c, i)["active"]

    holds_for(3.0, neither_leads)
    r = c.post(gone, "/v1/brokers/register", register_body(c, broker))
    assert r.status_code == 503, r.text


def test_a_restart_keeps_the_voter_set_of_the_log(cluster):
    """Every node restarted with its first command line (--voters names 0-2):
    the five voters of the log stay the voters (two of them may be down)."""
    c = cluster
    joiners = [c.add_node(), c.add_node()]
    for j in joiners:
        c.start(j)
    for j in joiners:
        add(c, j)
    c.wait(lambda: all(role(c, i) == "voter" for i in range(5)), 30, "five voters")
    for i in range(5):
        assert c.stop(i) == 0
    c.start()
    leader = c.leader()
    c.wait(lambda: set(voters_of(c, leader)) == {0, 1, 2, 3, 4}, 30, "five voters again")
    c.wait(lambda: all(role(c, i) == "voter" for i in range(5)), 30, "all admitted")
    # Two of --voters' three down: only the five-voter set has a majority left.
    c.kill(1)
    c.kill(2)
    survivor = c.leader(among=[0, 3, 4])

    def written() -> bool:
        r = change(c, survivor, "/v1/brokers/register", register_body(c, 1), timeout=10)
        return r.status_code == 200 and r.json()["errorName"] == "NONE"

    c.wait(written, 30, "a write committed by three of the five voters")


def test_an_add_cut_short_by_a_leader_change_is_finished_by_its_retry(cluster):
    """The leader dies while it streams the log to a joiner (nothing written
    yet); the same add-voter sent again, to any voter, finishes on the new leader."""
    c = cluster
    first = c.leader()
    j = c.add_node()
    c.start(j)
    c.wait(lambda: role(c, j) == "observer", 30, "the joiner up")
    c.signal(j, signal.SIGSTOP)  # it cannot catch up: the add waits
    cut: dict = {}

    def first_try() -> None:
        try:
            cut["r"] = add(c, j, via=first, timeout_ms=20_000)
        except (httpx.HTTPError, AssertionError) as e:
            cut["error"] = e

    attempt = threading.Thread(target=first_try)
    attempt.start()
    try:
        c.wait(lambda: j in {v["nodeId"] for v in status(c, first)["voters"]}, 10, "a learner")
        c.kill(first)
    finally:
        attempt.join(timeout=60)
    assert "error" in cut, cut  # its answer was lost with the leader
    c.signal(j, signal.SIGCONT)
    # The operator's retry, once a new leader is elected: the CLI, given the
    # voters it can reach.
    c.leader(among=[i for i in range(3) if i != first])
    urls = ",".join(c.url(i) for i in range(3) if i != first)
    retry = mq("add-voter", "--url", urls, "--node-id", str(j), "--address", c.raft_address(j))
    assert retry.returncode == 0, retry.stderr
    body = json.loads(retry.stdout)
    assert body["changed"] is True and j in {v["nodeId"] for v in body["voters"]}
    c.wait(lambda: role(c, j) == "voter", 30, "the joiner a voter")
    c.start(first)
    leader = c.leader()
    c.wait(lambda: set(voters_of(c, leader)) == {0, 1, 2, j}, 30, "four voters everywhere")


def test_the_cli_removes_the_leader_after_handing_leadership_over(cluster):
    c = cluster
    leader = c.leader()
    urls = ",".join(c.url(i) for i in range(3))
    done = mq("remove-voter", "--url", urls, "--node-id", str(leader))
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert leader not in {v["nodeId"] for v in body["voters"]} and len(body["voters"]) == 2
    new = c.leader(among=[i for i in range(3) if i != leader])
    c.wait(lambda: role(c, leader) == "removed", 30, "the old leader knows it left")
    r = change(c, new, "/v1/brokers/register", register_body(c, 1))
    assert r.status_code == 200 and r.json()["errorName"] == "NONE", r.text


def test_a_lone_voter_grows_to_three(tmp_path):
    c = Cluster(tmp_path, voters=1, fsync="always")
    try:
        c.start()
        leader = c.leader()
        c.wait(lambda: len(voters_of(c, leader)) == 1, 30, "the first voter set")
        joiners = [c.add_node(), c.add_node()]
        for j in joiners:
            c.start(j)
        for j in joiners:
            c.wait(lambda j=j: role(c, j) == "observer", 30, f"{j} up")
            add(c, j, via=leader)
        c.wait(lambda: all(role(c, i) == "voter" for i in range(3)), 30, "three voters")
        # Three voters now: the first may go, the other two commit.
        c.kill(0)
        survivor = c.leader(among=joiners)

        def written() -> bool:
            r = change(c, survivor, "/v1/brokers/register", register_body(c, 1), timeout=10)
            return r.status_code == 200 and r.json()["errorName"] == "NONE"

        c.wait(written, 30, "a write committed by the two joined voters")
    finally:
        c.close()


def test_a_voter_set_past_the_stored_commit_index_counts_at_restart(cluster):
    """The commit index on disk lags the journal (stored at most every 100 ms):
    a voter restarted holding a voter set it had not applied counts by it (as
    KIP-853 reads the set from the whole log), not by the older applied one."""
    c = cluster
    j = c.add_node()
    c.start(j)
    c.wait(lambda: role(c, j) == "observer", 30, "the joiner up")
    add(c, j)
    c.wait(lambda: all(role(c, i) == "voter" for i in range(4)), 30, "four voters")
    for i in range(4):
        assert c.stop(i) == 0
    journal = c.data_dir(0) / "raft.journal"
    entries = ((e.command, e.raft_index, e.term) for e in read_journal(str(journal)))
    index, voters = last_voter_set(entries, 0)
    assert j in {v.voter_id for v in voters}
    meta_path = c.data_dir(0) / "raft.journal.meta"
    meta = pickle.loads(meta_path.read_bytes())
    meta["raftCommitIndex"] = index - 1  # as if it crashed before storing the index
    meta_path.write_bytes(pickle.dumps(meta, protocol=2))
    c.start(0)  # alone: no leader tells it what is committed
    c.wait(lambda: set(voters_of(c, 0)) == {0, 1, 2, j}, 30, "the set in its journal")
    assert "past the stored commit index" in c.logs[0].read_text()
    for i in (1, 2, j):
        c.start(i)
    leader = c.leader()
    c.wait(lambda: set(voters_of(c, leader)) == {0, 1, 2, j}, 30, "four voters")
    c.wait(lambda: c.ready(0) and set(voters_of(c, 0)) == {0, 1, 2, j}, 60, "0 applied it")


def test_removing_the_leader_under_a_writer_again_and_again_loses_no_write(cluster, capsys):
    """remove-voter of the leader (the CLI hands over first), three rounds
    under a writer; after each the removed node is wiped and added back. Every
    acknowledged write survives; the longest gap between acknowledged writes
    around each removal is printed (figures: bench/leader_removal.py)."""
    from .k8s_rolling import Writer as BrokerWriter

    c = cluster
    urls = ",".join(c.url(i) for i in range(3))
    writer = BrokerWriter([c.url(i) for i in range(3)], "", c.cluster_id, eager=True).start()
    gaps = []
    try:
        c.wait(lambda: len(writer.acked) > 10, 30, "the writer writing")
        for _ in range(3):
            leader = c.leader()
            started = time.monotonic()
            done = mq("remove-voter", "--url", urls, "--node-id", str(leader))
            ended = time.monotonic()
            assert done.returncode == 0, done.stderr
            assert f"node {leader} led: leadership moved to node" in done.stderr
            assert leader not in {v["nodeId"] for v in json.loads(done.stdout)["voters"]}
            c.wait(lambda t=ended: writer.acked[-1][1] > t, 30, "a write after the removal")
            gaps.append(writer.window(started, ended))
            c.stop(leader)
            shutil.rmtree(c.data_dir(leader))
            c.start(leader)
            add(c, leader)
            c.wait(lambda: set(voters_of(c, c.leader())) == {0, 1, 2}, 30, "three voters")
            c.wait_ready()
    finally:
        writer.stop()
    with capsys.disabled():
        print(f"\nwrite gaps around the leader removals: {', '.join(f'{g:.3f} s' for g in gaps)}")
    acked = {b for b, _ in writer.acked}
    assert acked and acked <= set(brokers(c, c.leader())), "an acknowledged write was lost"
