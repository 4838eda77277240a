"""Disk loss with real ``metaquorum serve`` voters (issue 17's variants): a
voter whose whole data dir is deleted (a replaced PVC) and restarted with the
same command line, while the cluster elects, twice in a row, and while the
leader is partitioned away. Each test keeps a writer going through it all and
checks that every acknowledged write is in the log, that every voter ends with
one image digest at one offset, and that the wiped voter ends a voter again
(it never stands or votes before; quorum/voter_guard.py, decisions.md 37).

Losing the majority (503 + Retry-After, failing /readyz within 5 s, recovery
when a voter returns) is tests/test_leader_liveness.py's.
"""

from __future__ import annotations

import itertools
import shutil
import threading
import time
import uuid

import httpx
import pytest

from .cluster import Cluster
from .faults.netns import Network, netns_unavailable_reason
from .faults.voters import NetnsCluster
from .test_cluster import MV

pytestmark = pytest.mark.slow

COMPACTION = ["--compaction-entries", "50"]  # a wiped voter gets a snapshot, not the whole log


class Writer:
    """Registers a new broker every few ms through any voter (following the
    redirect to the leader) and keeps each acknowledged (broker id, epoch):
    what must survive. A failed or unanswered write is not acknowledged."""

    def __init__(self, urls: list[str], cluster_id: str, first_broker: int = 1000) -> None:
        self.urls = urls
        self.cluster_id = cluster_id
        self.acked: dict[int, int] = {}
        self.refused = 0
        self.attempts = 0
        self._ids = itertools.count(first_broker)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="writer", daemon=True)
        self.last_ack = time.monotonic()
        self.longest_gap = 0.0

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def write_once(self, http: httpx.Client, url: str) -> bool:
        broker = next(self._ids)
        self.attempts += 1
        body = {
            "brokerId": broker,
            "clusterId": self.cluster_id,
            "incarnationId": str(uuid.uuid4()),
            "listeners": [
                {"name": "PLAINTEXT", "host": "localhost", "port": 9092, "securityProtocol": 0}
            ],
            "features": MV,
            "rack": None,
        }
        try:
            r = http.post(url + "/v1/brokers/register", json=body, follow_redirects=True)
        except httpx.HTTPError:
            return False
        if r.status_code == 200 and r.json().get("errorName") == "NONE":
            self.acked[broker] = r.json()["brokerEpoch"]
            now = time.monotonic()
            self.longest_gap = max(self.longest_gap, now - self.last_ack)
            self.last_ack = now
            return True
        self.refused += 1
        return False

    def _run(self) -> None:
        with httpx.Client(timeout=3.0, trust_env=False) as http:
            for n in itertools.count():
                if self._stop.wait(0.02):
                    return
                self.write_once(http, self.urls[n % len(self.urls)])

    def wait_attempts(self, more: int, timeout_s: float = 60.0) -> None:
        """Until ``more`` writes past the ones tried now were tried (answered or not)."""
        want = self.attempts + more
        deadline = time.monotonic() + timeout_s
        while self.attempts < want:
            assert time.monotonic() < deadline, f"the writer is stuck ({self.attempts} tried)"
            time.sleep(0.05)

    def wait_for(self, more: int, timeout_s: float = 60.0) -> None:
        """Until ``more`` writes past the ones acknowledged now are acknowledged."""
        want = len(self.acked) + more
        deadline = time.monotonic() + timeout_s
        while len(self.acked) < want:
            assert time.monotonic() < deadline, (
                f"{more} more writes not acknowledged within {timeout_s} s "
                f"({len(self.acked)} acknowledged, {self.refused} refused)"
            )
            time.sleep(0.05)


# ---------------------------------------------------------------- helpers


def every_voter_holds_one_image(c, wait, statuses) -> tuple[int, str]:
    """Waits until every voter is a voter, at one offset with one digest."""

    def same():
        seen = {
            (s["lastAppliedOffset"], s["imageDigest"], s["role"]) if s else None for s in statuses()
        }
        return next(iter(seen)) if len(seen) == 1 and None not in seen else None

    offset, digest, role = wait(same, 90, "every voter a voter with one image digest")
    assert role == "voter"
    return offset, digest


def assert_acknowledged_kept(acked: dict[int, int], registered: dict[int, int]) -> None:
    lost = {b: e for b, e in acked.items() if registered.get(b) != e}
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged registrations lost: {lost}"


def brokers_at(http: httpx.Client, url: str) -> dict[int, int]:
    r = http.get(url + "/v1/brokers?consistency=linearizable", timeout=30)
    assert r.status_code == 200, r.text
    return {b["brokerId"]: b["brokerEpoch"] for b in r.json()["brokers"]}


OBSERVER = "is new to it: it catches up as an observer"
READMITTED = "is now a voter of cluster"


def said_observer_then_voter(log: str) -> int:
    """How many times a voter's log says it came back as an observer on a new
    data dir and was then named a voter (in that order)."""
    times = 0
    at = 0
    while (seen := log.find(OBSERVER, at)) >= 0:
        admitted = log.find(READMITTED, seen)
        if admitted < 0:
            break
        times += 1
        at = admitted
    return times


def voter_set(status: dict) -> dict[int, str | None]:
    return {v["nodeId"]: v["directoryId"] for v in status["voters"]}


# ---------------------------------------------------------------- loopback


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, voters=3, fsync="always", extra=COMPACTION)
    try:
        c.start()
        c.wait_ready()
        leader = c.leader()
        c.wait(lambda: all(voter_set(c.status(leader) or {"voters": []}).values()), 30, "set")
        yield c
    finally:
        c.close()


def digest_statuses(c: Cluster):
    def each():
        out = []
        for i in range(c.n):
            try:
                r = c.get(i, "/v1/quorum/status?digest=true", timeout=10)
            except httpx.HTTPError:
                out.append(None)
                continue
            out.append(r.json() if r.status_code == 200 else None)
        return out

    return each


def wipe_and_restart(c: Cluster, i: int) -> None:
    c.kill(i)
    shutil.rmtree(c.data_dir(i))
    c.start(i)


def wait_readmitted(c: Cluster, i: int, old_dir: str, timeout_s: float = 90.0) -> str:
    """Until voter ``i`` says it is a voter under a new directory that every
    answering voter's set names; returns that directory."""

    def readmitted():
        me = c.status(i)
        if not me or me["role"] != "voter" or me["directoryId"] == old_dir:
            return None
        sets = [voter_set(s) for j in range(c.n) if (s := c.status(j))]
        return me["directoryId"] if all(v[i] == me["directoryId"] for v in sets) else None

    return c.wait(readmitted, timeout_s, f"voter {i} re-admitted on its new disk")


@pytest.mark.layout("default")
def test_an_empty_voter_restarted_during_an_election_never_votes_and_nothing_is_lost(cluster):
    """The leader killed and a follower wiped and restarted at the same moment,
    the leader restarted at once: the wiped voter comes back while the other
    two elect. It must stay an observer (never a candidate or a leader) until
    a leader re-admits it; every acknowledged write survives."""
    c = cluster
    a = c.leader()
    b, other = [i for i in range(3) if i != a]
    old_b = c.status(b)["directoryId"]
    with Writer([c.url(i) for i in range(3)], c.cluster_id) as w:
        w.wait_for(30)
        term = c.status(other)["raftTerm"]
        c.kill(a)
        wipe_and_restart(c, b)
        c.start(a)
        # While the election runs: b is never a leader and never says it is a voter
        # on its new disk before the voter set names it.

        def elected():
            s = c.status(b)
            if s is not None:
                assert s["leaderId"] != b and not s["active"], s
                if s["role"] == "voter":
                    assert voter_set(s)[b] == s["directoryId"] != old_b, s
            leader = next((i for i in (a, other) if (c.status(i) or {}).get("leaderId") == i), None)
            return None if leader is None else leader + 1

        new_leader = c.wait(elected, 60, "a leader among the two voters with their disks") - 1
        assert c.status(new_leader)["raftTerm"] > term
        wait_readmitted(c, b, old_b)
        w.wait_for(30)
    # Its own word, whether or not a status poll caught it before re-admission.
    assert said_observer_then_voter(c.logs[b].read_text(errors="replace")) == 1, c.tail(b)
    leader = c.leader()
    assert_acknowledged_kept(w.acked, brokers_at(c.client, c.url(leader)))
    every_voter_holds_one_image(c, c.wait, digest_statuses(c))


@pytest.mark.layout("2-workers")
def test_two_voters_replaced_one_after_the_other_keep_every_acknowledged_write(cluster):
    """Wipe B, wait until it is a voter again, then wipe C, wait again (a
    rolling PVC replacement), writes flowing all along: nothing acknowledged
    lost, one image everywhere, both on their new directories."""
    c = cluster
    leader = c.leader()
    b, cc = [i for i in range(3) if i != leader]
    with Writer([c.url(i) for i in range(3)], c.cluster_id) as w:
        w.wait_for(100)  # past two compactions: B and C get snapshots
        for victim in (b, cc):
            old = c.status(victim)["directoryId"]
            wipe_and_restart(c, victim)
            new = wait_readmitted(c, victim, old)
            assert new != old
            w.wait_for(60)
    assert_acknowledged_kept(w.acked, brokers_at(c.client, c.url(c.leader())))
    every_voter_holds_one_image(c, c.wait, digest_statuses(c))
    for victim in (b, cc):
        log = c.logs[victim].read_text(errors="replace")
        assert said_observer_then_voter(log) == 1, c.tail(victim)


@pytest.mark.layout("default")
def test_leadership_handed_to_a_voter_on_a_new_disk_moves_to_it(cluster):
    """An operator hands leadership to the voter whose disk was just replaced
    (a rolling restart after a PVC replacement), writes flowing: the transfer
    elects it, every time (a Kubernetes run of session 9 saw such transfers
    lose their election; not seen on loopback since: 14 of 14 here)."""
    c = cluster
    with Writer([c.url(i) for i in range(3)], c.cluster_id) as w:
        for _ in range(2):
            leader = c.leader()
            target = (leader + 1) % 3
            old = c.status(target)["directoryId"]
            wipe_and_restart(c, target)
            wait_readmitted(c, target, old)
            r = c.client.post(
                c.url(leader) + "/v1/quorum/transfer-leadership",
                json={"targetNodeId": target},
                timeout=15,
            )
            assert r.status_code == 200, r.text
            assert c.leader(timeout_s=30) == target
            w.wait_for(20)
    assert_acknowledged_kept(w.acked, brokers_at(c.client, c.url(c.leader())))


PENDING_SET = "the journal holds a voter set past the stored commit index"


# What it tests is the journal and the election, which the HTTP layout does not
# touch; and the state it needs (B killed within 100 ms of the re-admission's
# commit) was reached at once in the default layout in every run here, and in
# none of five runs of six attempts in the 2-workers one (80-190 s each, a skip).
@pytest.mark.layout("default")
def test_a_follower_restarted_just_after_a_readmission_elects_with_the_readmitted_voter(
    cluster,
):
    """A is wiped and re-admitted; at once (before B's next commit-index
    store) the leader L and B are killed and B restarted. A and B are a
    majority and both hold every committed entry (the new voter set among
    them, in B's journal): they must elect a leader without L. Found by
    bench/disk_replace.py: B used to come back with the set from before A's
    re-admission (applied only up to its stored commit index) and the two
    elected nobody until L returned; B now counts by the last set its journal
    holds (decisions.md 50). When B happened to store its commit index before
    the kill, the round is tried again; the election is checked either way."""
    c = cluster

    def readmitted(a: int, old: str) -> bool:
        s = c.status(a)
        return s is not None and s["role"] == "voter" and s["directoryId"] != old

    attempts = 0
    for attempts in range(1, 7):  # noqa: B007 - the count is reported below
        leader = c.leader()
        a, b = [i for i in range(3) if i != leader]
        old_a = c.status(a)["directoryId"]
        # Writes all along: B then stores its commit index every 100 ms
        # (COMMIT_INDEX_EVERY_S) rather than at once on the re-admission's
        # commit, in a quiet cluster, before any kill could come.
        urls = [c.url(i) for i in range(3)]
        with Writer(urls, c.cluster_id, first_broker=1000 * attempts):
            wipe_and_restart(c, a)
            c.wait(lambda a=a: c.status(a), 60, f"voter {a} answering on its new disk")
            deadline = time.monotonic() + 90
            while not readmitted(a, old_a):  # polled tightly: the state lasts < 100 ms
                assert time.monotonic() < deadline, f"voter {a} not re-admitted within 90 s"
                time.sleep(0.005)
            # B first, and both before either is waited for.
            for i in (b, leader):
                c.procs[i].kill()
            c.kill(b)
            c.kill(leader)
        mark = len(c.logs[b].read_text(errors="replace"))
        c.start(b)
        c.wait(lambda b=b: c.status(b), 60, f"voter {b} answering after its restart")
        new_a = c.status(a)["directoryId"]
        # At once from its journal's tail, or once it replayed to its commit index.
        c.wait(
            lambda b=b, a=a, new_a=new_a: (s := c.status(b)) and voter_set(s)[a] == new_a,
            30,
            f"voter {b} counting by the set naming voter {a}'s new directory",
        )
        if PENDING_SET in c.logs[b].read_text(errors="replace")[mark:]:
            break  # B restarted with the re-admission past its stored commit index
        # B stored its commit index in time: not the state under test; again,
        # after checking that this ordinary restart elects too.
        c.wait(lambda: c.leader() is not None, 30, "a leader after an ordinary restart")
        c.start(leader)
        c.wait_ready(timeout_s=60)
    else:
        pytest.skip("B stored its commit index before every kill: the state was not reached")
    assert voter_set(c.status(a))[a] == new_a, "A holds the new voter set"

    def elected():
        for i in (a, b):
            s = c.status(i)
            if s and s["leaderId"] == i and s["active"]:
                return True
        return False

    deadline = time.monotonic() + 20
    while not elected():
        assert time.monotonic() < deadline, (
            f"attempt {attempts}: voters {a} (re-admitted, set {voter_set(c.status(a))}) and "
            f"{b} (restarted, set {voter_set(c.status(b))}) elected no leader within 20 s "
            f"with voter {leader} down"
        )
        time.sleep(0.1)


# ---------------------------------------------------------------- a real partition

_why = netns_unavailable_reason()


@pytest.fixture
def netns_cluster(tmp_path):
    net = Network(3)
    cluster = None
    try:
        net.setup()
        cluster = NetnsCluster(net, tmp_path, compaction_entries=50)
        cluster.start()
        cluster.wait_ready()
        yield cluster
    finally:
        if cluster is not None:
            cluster.close()
        net.teardown()


@pytest.mark.skipif(_why is not None, reason=_why or "")
@pytest.mark.layout("2-workers")
def test_a_disk_replaced_while_the_leader_is_partitioned_away_loses_nothing(netns_cluster):
    """Network namespaces (tests/faults/netns.py): the leader A is cut from B
    and C, which elect B and acknowledge writes A never saw; then C's disk is
    replaced. B alone with an empty C must not commit (C's acks do not count),
    and when the partition heals, A (stale log) must not win with the wiped
    C's vote: B, with every acknowledged write, leads; C is re-admitted."""
    c = netns_cluster

    def leader_among(voters):
        def find():
            for i in voters:
                s = c.status(i)
                if s and s["leaderId"] == i and s["active"]:
                    return i + 1
            return None

        return c.wait(find, 60, f"a leader among {voters}") - 1

    a = leader_among(range(3))
    c.wait(lambda: all(voter_set(c.status(a) or {"voters": []}).values()), 30, "the voter set")
    with Writer(c.urls, c.cluster_id) as w:
        w.wait_for(30)
        b_and_c = [i for i in range(3) if i != a]
        c.net.partition([a], b_and_c)
        b = leader_among(b_and_c)
        cc = next(i for i in b_and_c if i != b)
        w.wait_for(40)  # acknowledged by B and C: A has none of them
        old_c = c.status(cc)["directoryId"]
        acked_before_wipe = dict(w.acked)
        c.kill(cc)
        c.wipe(cc)
        c.start(cc)
        # B with an observer only: C's acks do not count, B steps down (check-quorum).
        c.wait(lambda: (c.status(cc) or {}).get("role") == "observer", 60, "C an observer")
        c.wait(lambda: (c.status(b) or {}).get("active") is False, 30, "B stepping down")
        stalled = len(w.acked)
        w.wait_attempts(30)
        assert len(w.acked) == stalled, "a write was acknowledged with one voter and an observer"
        assert (c.status(cc) or {}).get("role") == "observer"
        c.net.heal()
        c.wait(lambda: (c.status(cc) or {}).get("role") == "voter", 120, "C re-admitted")
        w.wait_for(30)
        leader = leader_among(range(3))
    assert len(w.acked) > stalled
    with httpx.Client(trust_env=False) as http:
        registered = brokers_at(http, c.url(leader))
    assert_acknowledged_kept(acked_before_wipe, registered)
    assert_acknowledged_kept(w.acked, registered)
    s = c.status(cc)
    assert s["directoryId"] != old_c and voter_set(s)[cc] == s["directoryId"]

    def statuses():
        return [c.status(i, digest=True, timeout=10.0) for i in range(3)]

    every_voter_holds_one_image(c, c.wait, statuses)
