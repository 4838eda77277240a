"""A removed voter knows and says so, removed while running or while down
(issue 42; quorum/voter_set_notice.py), with real voters on loopback: its
status says ``role: removed``, /readyz fails with the reason, one log line
says what to do, ``metaquorum status`` shows it; added again, it is a voter."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .cluster import Cluster, holds_for
from .test_membership import add, remove, role, voters_of

pytestmark = pytest.mark.slow

# Learnt from its own log (removed while running, as a rule), from a voter
# (removed while down; or while running, if a voter's word came first).
BY_LOG = "is no longer in the voter set ("
BY_NOTICE = "was removed from the voter set, as voter"


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


def log_lines(c: Cluster, i: int) -> list[str]:
    text = c.logs[i].read_text(errors="replace")
    return [line for line in text.splitlines() if BY_LOG in line or BY_NOTICE in line]


def says_removed(c: Cluster, gone: int, reasons: tuple[str, ...]) -> None:
    """All four: the status, /readyz, one log line, ``metaquorum status``."""
    c.wait(lambda: role(c, gone) == "removed", 60, f"node {gone} says role removed")
    r = c.get(gone, "/readyz")
    assert r.status_code == 503, r.text
    said = r.json()["reason"]
    assert any(f"node {gone} {w}" in said for w in reasons), said
    assert "stop it and clear its data dir" in said, said
    assert f"metaquorum add-voter --node-id {gone} --address {c.raft_address(gone)}" in said
    out = subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "status", "--url", c.url(gone)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "role removed" in out.stdout, out.stdout
    assert f"node {gone} was removed from the voter set" in out.stdout, out.stdout

    def one_line_and_quiet() -> None:
        lines = log_lines(c, gone)
        assert len(lines) == 1, lines
        assert "stop it and clear its data dir, or add it again" in lines[0], lines
        assert role(c, gone) in ("removed", None)  # never a voter again by itself
        assert not (c.status(gone) or {}).get("active")

    holds_for(2.0, one_line_and_quiet, every=0.25)


def comes_back(c: Cluster, gone: int) -> None:
    add(c, gone)
    c.wait(lambda: role(c, gone) == "voter", 60, f"node {gone} a voter again")
    c.wait(lambda: c.ready(gone), 60, f"node {gone} ready again")
    assert gone in voters_of(c, c.leader())


def test_a_voter_removed_while_down_says_so_and_can_be_added_again(cluster):
    c = cluster
    leader = c.leader()
    gone = next(i for i in range(3) if i != leader)
    c.stop(gone)
    c.wait(lambda: not voters_of(c, leader).get(gone, {}).get("connected", True), 30, "seen gone")
    remove(c, gone)
    c.start(gone)
    says_removed(c, gone, (BY_NOTICE,))
    comes_back(c, gone)


def test_a_voter_removed_while_running_says_so_and_can_be_added_again(cluster):
    c = cluster
    leader = c.leader()
    gone = next(i for i in range(3) if i != leader)
    remove(c, gone)
    says_removed(c, gone, (BY_LOG, BY_NOTICE))  # its log, as a rule
    comes_back(c, gone)
