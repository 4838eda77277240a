"""--startup-election-delay-ms: a restarted voter does not call an election
before its peers had time to reconnect (docs/kubernetes.md, "Known weak spot")."""

import asyncio

import pytest
from pysyncobj.monotonic import monotonic

from quorum.node_config import ConfigError, NodeConfig

from .nodes import build_node, free_port


def _config(tmp_path, delay_s: float) -> NodeConfig:
    return NodeConfig(
        node_id=0,
        voters={0: f"127.0.0.1:{free_port()}", 1: f"127.0.0.1:{free_port()}"},
        data_dir=str(tmp_path),
        advertised_url="http://127.0.0.1:1",
        cluster_id="c",
        raft_secret="0123456789abcdef0123",
        fsync=False,
        startup_election_delay_s=delay_s,
    )


def test_the_first_election_waits_for_the_delay(tmp_path):
    node = build_node(_config(tmp_path, 30.0))
    try:
        deadline = node.raft.election_deadline
        assert deadline >= monotonic() + 29.0
    finally:
        asyncio.run(node.stop(transfer=False))


def test_without_the_delay_pysyncobj_keeps_its_own_timeout(tmp_path):
    node = build_node(_config(tmp_path, 0.0))
    try:
        assert node.raft.election_deadline <= monotonic() + 1.5
    finally:
        asyncio.run(node.stop(transfer=False))


def test_a_negative_delay_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="--startup-election-delay-ms -1000"):
        _config(tmp_path, -1.0)
