"""A restarted cluster elects as soon as a majority is up (issue 42).

No fixed start-up delay: a voter that starts, or reaches nobody, asks for a
pre-vote in its turn (rule 5's turns, quorum/raft/pre_vote.py) as soon as it
reaches a voter, not a whole election timeout later; a rolling restart is
kept from deposing the leader by the pre-vote itself (the voters that hear
the leader refuse it: tests/test_k8s_contract.py checks a follower's restart
costs no term). Real ``metaquorum serve`` voters killed with SIGKILL and
started again keep every acknowledged write. How soon they elect is a figure
of bench/restart_election.py, not an assert here."""

import argparse
import asyncio
import logging
import time

import pytest
from pysyncobj.monotonic import monotonic

from metaquorum.serve import add_serve_flags, build_config
from quorum.raft.election_timing import (
    LEADER_LOST_FIRST_S,
    LEADER_LOST_JITTER_S,
    LEADER_LOST_TURN_S,
)

from .cluster import Cluster
from .nodes import build_node
from .test_cluster import brokers, register

# The longest turn of voter ``turn`` (0-based) among the voters.
TURN_S = [LEADER_LOST_FIRST_S + t * LEADER_LOST_TURN_S + LEADER_LOST_JITTER_S for t in range(3)]


def _serve_flags():
    parser = argparse.ArgumentParser()
    add_serve_flags(parser)
    return parser


def asks_in_turn(c: Cluster, i: int, watch_s: float = 2.0) -> list[float]:
    """Builds voter ``i`` in this process from its data dir and flags while its
    peers are down; returns how far its election deadline was, sampled."""
    node = build_node(build_config(_serve_flags().parse_args(c.args(i)[4:])))
    try:
        started = monotonic()
        seen = [node.raft.election_deadline - started]
        while monotonic() < started + watch_s:
            time.sleep(0.05)
            seen.append(node.raft.election_deadline - monotonic())
        return seen
    finally:
        asyncio.run(node.stop(transfer=False))


def test_the_removed_delay_flag_is_ignored_with_a_warning(tmp_path, caplog, monkeypatch):
    monkeypatch.delenv("METAQUORUM_STARTUP_ELECTION_DELAY_MS", raising=False)
    parser = _serve_flags()
    flags = ["--node-id", "0", "--voters", "0@127.0.0.1:9093", "--data-dir", str(tmp_path)]
    with caplog.at_level(logging.WARNING, logger="metaquorum"):
        build_config(parser.parse_args([*flags, "--startup-election-delay-ms", "5000"]))
    assert "--startup-election-delay-ms" in caplog.text and "is ignored" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="metaquorum"):
        build_config(parser.parse_args(flags))
    assert "startup-election-delay" not in caplog.text


@pytest.fixture
def fsync_cluster(tmp_path):
    c = Cluster(tmp_path, voters=3, fsync="always")
    try:
        yield c.start()
    finally:
        c.close()


@pytest.mark.slow
def test_every_voter_killed_and_restarted_elects_and_keeps_every_acknowledged_write(
    fsync_cluster,
):
    c = fsync_cluster
    c.wait_ready(timeout_s=120)
    acked = {b: register(c, b % 3, b) for b in range(1, 11)}
    for i in range(c.n):
        c.kill(i)
    # Its peers are down: nobody to ask, and it asks again in its turn, not an
    # election timeout (0.7-1.5 s) later, so it asks as soon as a peer is up.
    seen = asks_in_turn(c, 1)
    assert max(seen) <= TURN_S[1], seen
    c.start()
    leader = c.leader(timeout_s=120)
    acked[11] = register(c, leader, 11)
    assert brokers(c, leader) == acked
    c.wait_ready(timeout_s=120)
    for i in range(c.n):
        assert brokers(c, i) == acked


@pytest.mark.slow
def test_two_of_three_restarted_elect_and_the_third_catches_up(fsync_cluster):
    c = fsync_cluster
    c.wait_ready(timeout_s=120)
    acked = {b: register(c, b % 3, b) for b in range(1, 11)}
    for i in range(c.n):
        c.kill(i)
    c.start(0)
    c.start(1)
    leader = c.leader(among=[0, 1], timeout_s=120)
    acked[11] = register(c, leader, 11)
    assert brokers(c, leader) == acked
    c.start(2)
    c.wait_ready(timeout_s=120)
    assert brokers(c, 2) == acked
