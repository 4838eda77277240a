"""Fail-stop on divergence (quorum/raft/divergence.py).

With real voters: two of three restored from a backup older than the third's
data dir (docs/kubernetes.md warns against exactly this) go on without it at
higher terms; the third, started on its newer log, finds that entries it
applied are of other terms on the leader, stops at once with exit code 3 and
one CRITICAL line, and rejoins after its data dir is moved aside.

With a real pysyncobj voter fed AppendEntries: a re-send of entries it holds
with the same terms (or a cut without them) is not divergence; another term
at an applied index is, and nothing of it is written."""

from __future__ import annotations

import pickle
import shutil
import time

import pytest
from pysyncobj import SyncObj, SyncObjConf

from quorum.raft import internals, patches
from quorum.raft.divergence import (
    diverged,
    first_conflict,
    watch_divergence,
)

from .cluster import Cluster
from .nodes import free_port
from .test_cluster import brokers, others, register

NO_OP = b"\x01"  # pysyncobj's no-op command: applying it changes nothing


# ------------------------------------------------------------------ a pysyncobj follower


class Follower:
    """A real pysyncobj SyncObj as a follower of a peer that is not there; the
    test delivers the peer's AppendEntries to it as its transport would."""

    def __init__(self) -> None:
        patches.install()  # fail_stop_on_divergence among them
        self.syncobj = SyncObj(
            f"127.0.0.1:{free_port()}",
            [f"127.0.0.1:{free_port()}"],
            conf=SyncObjConf(
                autoTick=False, raftMinTimeout=30, raftMaxTimeout=60, connectionTimeout=60
            ),
        )
        self.why: list[str] = []
        watch_divergence(self.syncobj, self.why.append)
        (self.leader,) = self.syncobj._SyncObj__otherNodes
        self.term = 1

    def append(self, prev: int, prev_term: int, terms: list[int], commit: int) -> None:
        """AppendEntries after (prev, prev_term) with entries of ``terms``."""
        entries = [(NO_OP, prev + 1 + i, term) for i, term in enumerate(terms)]
        self.syncobj._SyncObj__onMessageReceived(
            self.leader,
            {
                "type": "append_entries",
                "term": self.term,
                "commit_index": commit,
                "prevLogIdx": prev,
                "prevLogTerm": prev_term,
                "entries": entries,
            },
        )
        self.syncobj.doTick(0.0)  # applies up to the commit index

    def append_in_pieces(self, prev: int, prev_term: int, term: int, pieces: int) -> None:
        """One entry of ``term`` after (prev, prev_term), sent as pysyncobj
        sends an entry over its batch size: start, process..., finish."""
        data = pickle.dumps((NO_OP, prev + 1, term))
        step = -(-len(data) // pieces)
        chunks = [data[i : i + step] for i in range(0, len(data), step)]
        for n, chunk in enumerate(chunks):
            kind = "start" if n == 0 else "finish" if n == len(chunks) - 1 else "process"
            self.syncobj._SyncObj__onMessageReceived(
                self.leader,
                {
                    "type": "append_entries",
                    "transmission": kind,
                    "data": chunk,
                    "term": self.term,
                    "commit_index": prev,
                    "prevLogIdx": prev,
                    "prevLogTerm": prev_term,
                },
            )
        self.syncobj.doTick(0.0)

    def log_terms(self) -> list[tuple[int, int]]:
        journal = internals.journal(self.syncobj)
        return [(journal[i][1], journal[i][2]) for i in range(len(journal))]

    @property
    def applied(self) -> int:
        return self.syncobj.raftLastApplied

    def close(self) -> None:
        self.syncobj.destroy()


@pytest.fixture
def follower():
    f = Follower()
    try:
        f.append(1, 0, [1, 1, 1, 1], commit=5)  # entries 2-5 of term 1, applied
        assert f.applied == 5 and f.log_terms()[-1] == (5, 1)
        yield f
    finally:
        f.close()


def test_a_re_send_of_applied_entries_with_their_terms_is_not_divergence(follower):
    follower.append(2, 1, [1, 1], commit=5)  # entries 3-4 again: pysyncobj cuts 3-5
    assert follower.log_terms()[-1] == (4, 1) and follower.applied == 5  # 5 was cut
    follower.append(4, 1, [1], commit=5)  # and entry 5 comes back with its term
    follower.append(5, 1, [1, 1], commit=7)  # the log goes on
    assert not diverged(follower.syncobj) and follower.why == []
    assert follower.log_terms()[1:] == [(i, 1) for i in range(2, 8)]
    assert follower.applied == 7


def test_another_term_at_an_applied_index_stops_the_voter_and_writes_nothing(follower):
    before = follower.log_terms()
    follower.term = 2
    follower.append(3, 1, [2, 2, 2], commit=6)  # entries 4-6 of term 2: 4 and 5 were applied
    assert diverged(follower.syncobj)
    (why,) = follower.why
    assert "entry 4, already applied here at term 1, is of term 2" in why
    assert "move its data dir aside" in why and "empty data dir" in why
    assert follower.log_terms() == before and follower.applied == 5
    # Everything after is dropped unread, even a message that would be fine.
    follower.append(5, 1, [2], commit=6)
    assert follower.log_terms() == before and follower.why == [why]


def test_applied_entries_cut_by_an_empty_append_and_sent_back_with_another_term(follower):
    follower.append(2, 1, [], commit=5)  # a late heartbeat: pysyncobj cuts 3-5
    assert not diverged(follower.syncobj) and follower.log_terms()[-1] == (2, 1)
    follower.term = 3
    follower.append(2, 1, [3], commit=5)  # entry 3 comes back of term 3
    assert diverged(follower.syncobj)
    assert "entry 3, already applied here at term 1, is of term 3" in follower.why[0]


def test_another_term_at_the_applied_entry_the_leader_appends_after(follower):
    follower.term = 4
    follower.append(5, 4, [4], commit=5)  # the leader's entry 5 is of term 4
    assert diverged(follower.syncobj)
    assert "entry 5, already applied here at term 1, is of term 4" in follower.why[0]


def test_an_entry_sent_in_pieces_is_checked_when_its_last_piece_arrives(follower):
    follower.append_in_pieces(3, 1, term=1, pieces=3)  # entry 4 again, same term
    assert not diverged(follower.syncobj)
    follower.term = 2
    follower.append_in_pieces(3, 1, term=2, pieces=3)
    assert diverged(follower.syncobj)
    assert "entry 4, already applied here at term 1, is of term 2" in follower.why[0]


def test_an_unapplied_entry_of_another_term_is_raft_s_own_business(follower):
    follower.append(5, 1, [1, 1], commit=5)  # 6-7 held, not applied (not committed)
    follower.term = 2
    follower.append(5, 1, [2], commit=6)  # a new leader replaces them: plain Raft
    assert not diverged(follower.syncobj)
    assert follower.log_terms()[-1] == (6, 2) and follower.applied == 6


@pytest.mark.parametrize(
    ("applied", "entries", "conflict"),
    [
        ({}, [(NO_OP, 3, 2)], None),
        ({3: 1, 4: 1}, [(NO_OP, 3, 1), (NO_OP, 4, 1)], None),
        ({3: 1, 4: 1}, [(NO_OP, 3, 1), (NO_OP, 4, 2)], (4, 1, 2)),
        ({3: 2}, [(NO_OP, 4, 1)], None),  # not an applied index
    ],
)
def test_first_conflict(applied, entries, conflict):
    assert first_conflict(applied, entries) == conflict


# ------------------------------------------------------------------ real voters


def wait_exit(cluster: Cluster, i: int, timeout_s: float) -> int:
    """Waits for voter ``i`` to exit; its /readyz must never say ready meanwhile."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        code = cluster.procs[i].poll()
        if code is not None:
            return code
        assert not cluster.ready(i), f"the diverged voter {i} said it was ready"
        time.sleep(0.05)
    raise AssertionError(f"voter {i} did not stop within {timeout_s} s:\n{cluster.tail(i)}")


def stop_all(cluster: Cluster, leader: int) -> None:
    for i in [leader, *others(cluster, leader)]:  # the leader hands over first
        assert cluster.stop(i) == 0


def raise_term(cluster: Cluster, voters: list[int], above: int) -> int:
    """Moves leadership between ``voters`` until the Raft term is above ``above``."""
    leader = cluster.leader(among=voters)
    while cluster.status(leader)["raftTerm"] <= above:
        target = next(i for i in voters if i != leader)
        r = cluster.client.post(
            cluster.url(leader) + "/v1/quorum/transfer-leadership", json={"targetNodeId": target}
        )
        assert r.status_code == 200, r.text
        cluster.wait(
            lambda t=target: (s := cluster.status(t)) and s["leaderId"] == t and s["active"],
            60,
            f"voter {target} the active controller",
        )
        leader = target
    return leader


@pytest.mark.slow
def test_a_voter_whose_applied_log_diverged_stops_and_rejoins_from_an_empty_data_dir(tmp_path):
    c = Cluster(tmp_path)
    try:
        c.start()
        c.wait_ready()
        leader = c.leader()
        register(c, leader, 1)
        c.wait(lambda: len({c.status(i)["lastAppliedOffset"] for i in range(3)}) == 1, 30)
        stop_all(c, leader)
        backups = {i: tmp_path / f"backup-{i}" for i in (0, 1)}
        for i, backup in backups.items():
            shutil.copytree(c.data_dir(i), backup)

        # Later: voter 2 applies brokers 2-9 with the others.
        c.start()
        c.wait_ready()
        leader = c.leader()
        for broker in range(2, 10):
            register(c, leader, broker)
        done = c.status(leader)["lastAppliedOffset"]
        c.wait(lambda: c.status(2)["lastAppliedOffset"] == done, 30, "voter 2 applied all")
        term_of_2 = c.status(2)["raftTerm"]
        stop_all(c, leader)

        # Voters 0 and 1 restored from the older backup go on at higher terms.
        for i, backup in backups.items():
            shutil.rmtree(c.data_dir(i))
            shutil.copytree(backup, c.data_dir(i))
        c.start(0)
        c.start(1)
        c.wait_ready([0, 1])
        leader = raise_term(c, [0, 1], term_of_2 + 2)
        for broker in range(20, 25):
            register(c, leader, broker)
        kept = brokers(c, leader)
        assert set(kept) == {1, *range(20, 25)}

        # Voter 2 on its newer log: it must stop, never serve it.
        c.start(2)
        assert wait_exit(c, 2, 60) == 3
        log = c.logs[2].read_text(errors="replace")
        critical = [line for line in log.splitlines() if "CRITICAL" in line and "diverged" in line]
        assert len(critical) == 1, log[-3000:]
        assert "already applied here" in critical[0] and "move its data dir aside" in critical[0]
        assert brokers(c, leader) == kept  # the others go on, untouched
        register(c, leader, 30)

        # The documented recovery: data dir aside, start it empty; it catches up.
        c.data_dir(2).rename(tmp_path / "node-2.diverged")
        c.start(2)
        c.wait_ready(timeout_s=60)
        expected = brokers(c, leader)
        assert brokers(c, 2) == expected and 2 not in expected
        offset = c.status(leader)["lastAppliedOffset"]
        c.wait(lambda: c.status(2)["lastAppliedOffset"] >= offset, 30, "voter 2 caught up")

        def one_image() -> bool:
            # Read at one offset: an idle leader's NoOp may land between reads.
            seen = {
                (s["lastAppliedOffset"], s["imageDigest"])
                for s in (c.get(i, "/v1/quorum/status?digest=true").json() for i in range(3))
            }
            return len(seen) == 1

        c.wait(one_image, 30, "one image digest on all three at one offset")
    finally:
        c.close()
