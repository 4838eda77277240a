"""What the StatefulSet needs from the command line: the node id from
$HOSTNAME, ``--raft-bind``, ``--token-file`` and the preStop's
``transfer-leadership --if-leader`` (its leader and follower cases run in
tests/test_k8s_contract.py on three voters)."""

import os
import subprocess
import sys

from metaquorum.prestop import rollout_target
from metaquorum.serve import node_id_from_hostname


def mq(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_the_node_id_comes_from_hostname_env_first(monkeypatch):
    monkeypatch.setenv("HOSTNAME", "metaquorum-4")
    assert node_id_from_hostname() == 4
    assert node_id_from_hostname("metaquorum-1.metaquorum-headless") == 1


def test_serve_refuses_a_bad_raft_bind_address(tmp_path):
    r = mq(
        "serve", "--node-id", "0", "--voters", "0@127.0.0.1:1", "--data-dir", str(tmp_path),
        "--raft-bind", "0.0.0.0/8",
    )  # fmt: skip
    assert r.returncode == 2 and "--raft-bind '0.0.0.0/8' is not a host" in r.stderr


def test_serve_takes_its_node_id_from_the_pod_name_in_the_environment(tmp_path):
    env = {
        **os.environ,
        "HOSTNAME": "metaquorum-7",
        "METAQUORUM_NODE_ID_FROM_HOSTNAME": "true",
        "METAQUORUM_VOTERS": "0@127.0.0.1:1",
        "METAQUORUM_DATA_DIR": str(tmp_path),
    }
    r = mq("serve", env=env)
    assert r.returncode == 2 and "--node-id 7 is not among --voters ([0])" in r.stderr


def test_token_file_problems_are_named(tmp_path):
    r = mq("status", "--token-file", str(tmp_path / "nope"))
    assert r.returncode == 2 and "--token-file" in r.stderr and "cannot read" in r.stderr
    two = tmp_path / "two"
    two.write_text("a b\n")
    r = mq("status", "--token-file", str(two))
    assert r.returncode == 2 and "expected one token" in r.stderr


def test_if_leader_takes_one_url():
    r = mq("transfer-leadership", "--if-leader", "--url", "http://a:1,http://b:2")
    assert r.returncode == 2 and "--if-leader takes one --url" in r.stderr


def test_if_leader_on_a_lone_voter_is_a_no_op(voter, tmp_path):
    token = tmp_path / "token"
    token.write_text("unused-when-auth-is-off\n")
    r = mq("transfer-leadership", "--if-leader", "--url", voter.url(0), "--token-file", str(token))
    assert r.returncode == 0, r.stderr
    assert "node 0 is the only voter: nothing to transfer" in r.stdout


def test_if_leader_fails_clearly_when_nothing_answers():
    r = mq("transfer-leadership", "--if-leader", "--url", "http://127.0.0.1:1")
    assert r.returncode == 2 and "cannot read http://127.0.0.1:1/v1/quorum/status" in r.stderr


def test_the_prestop_hands_over_to_the_voter_a_rollout_restarts_last():
    def v(node, connected=True, lag=0):
        return {"nodeId": node, "connected": connected, "lagRecords": lag}

    voters = [v(0), v(1), v(2), v(3), v(4)]
    assert rollout_target(2, voters) == 4  # 4 and 3 are already updated
    assert rollout_target(4, voters) == 0  # the first restarted: 0 goes last
    assert rollout_target(2, [v(0), v(1), v(2), v(3, lag=500), v(4, connected=False)]) == 0
    assert rollout_target(2, [v(0), v(1), v(2), v(3, lag=5)]) == 3
    assert rollout_target(0, [v(0), v(1, lag=None), v(2, connected=False)]) is None
    # A joiner the leader streams to is listed (voter: false) but never chosen.
    joiner = {**v(5), "voter": False}
    assert rollout_target(2, [v(0), v(1), v(2), joiner]) == 0


def test_if_leader_with_a_wrong_token_fails_instead_of_skipping(tmp_path):
    """A hook that cannot read the status must say so, not claim 'not the leader'."""
    from .cluster import Cluster

    tokens = tmp_path / "tokens"
    tokens.write_text("right-token admin\n")
    (tmp_path / "c").mkdir()
    c = Cluster(tmp_path / "c", voters=1, extra=["--tokens-file", str(tokens)])
    try:
        c.start()
        c.wait_ready()
        wrong = tmp_path / "wrong"
        wrong.write_text("wrong-token\n")
        r = mq("transfer-leadership", "--if-leader", "--url", c.url(0), "--token-file", str(wrong))
        assert r.returncode == 1 and "HTTP 401" in r.stderr and "--token-file" in r.stderr
    finally:
        c.close()
