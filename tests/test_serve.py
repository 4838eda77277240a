"""``metaquorum serve`` refuses bad configuration with exit code 2 and a message
naming the flag, before it binds anything."""

import subprocess
import sys

import pytest

from metaquorum.serve import node_id_from_hostname
from quorum.node_config import ConfigError, parse_voters

from .nodes import free_port


def serve(*args, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "serve", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_multi_voter_cluster_without_a_raft_secret(tmp_path):
    r = serve(
        "--node-id", "0", "--voters", "0@127.0.0.1:1,1@127.0.0.1:2", "--data-dir", str(tmp_path)
    )
    assert r.returncode == 2
    assert "--raft-secret-file is required" in r.stderr


def test_flags_come_from_the_environment_too(tmp_path):
    import os

    env = {**os.environ, "METAQUORUM_NODE_ID": "7", "METAQUORUM_DATA_DIR": str(tmp_path)}
    r = serve("--voters", "0@127.0.0.1:1", env=env)
    assert r.returncode == 2 and "--node-id 7 is not among --voters" in r.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (["--voters", "0@127.0.0.1:1"], "--node-id is required"),
        (["--node-id", "0", "--voters", "zero@127.0.0.1:1"], "--voters: 'zero@127.0.0.1:1'"),
        (["--node-id", "0", "--voters", "0@127.0.0.1:99999"], "out-of-range"),
        (["--node-id", "0", "--voters", "0@127.0.0.1:1", "--http-port", "0"], "--http-port 0"),
        (
            ["--node-id", "0", "--voters", "0@127.0.0.1:1", "--advertised-url", "x"],
            "--advertised-url",
        ),
        (
            ["--node-id", "0", "--voters", "0@127.0.0.1:1", "--tokens-file", "/nope"],
            "--tokens-file",
        ),
        (
            [
                "--node-id",
                "0",
                "--voters",
                "0@127.0.0.1:1,1@127.0.0.1:2",
                "--raft-secret-file",
                "/nope",
            ],
            "--raft-secret-file /nope",
        ),
        (
            ["--node-id", "0", "--voters", "0@127.0.0.1:1"]
            + ["--metadata-max-idle-interval-ms", "-1"],
            "--metadata-max-idle-interval-ms must be 0 (never) or positive",
        ),
        (
            ["--node-id", "0", "--voters", "0@127.0.0.1:1"]
            + ["--leader-imbalance-check-interval-seconds", "0"],
            "--leader-imbalance-check-interval-seconds must be positive (to turn leader "
            "balancing off: --auto-leader-rebalance-enable false)",
        ),
        (
            ["--node-id", "0", "--voters", "0@127.0.0.1:1"]
            + ["--auto-leader-rebalance-enable", "no"],
            "--auto-leader-rebalance-enable: invalid choice: 'no'",
        ),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(tmp_path, args, message):
    r = serve(*args, "--data-dir", str(tmp_path / "d"))
    assert r.returncode == 2, r.stderr
    assert message in r.stderr


def test_a_data_dir_of_another_node_or_cluster_is_refused(tmp_path):
    from quorum.node_config import NodeConfig, claim_data_dir

    port = free_port()
    claim_data_dir(NodeConfig(0, {0: f"127.0.0.1:{port}"}, str(tmp_path), "http://x:1", "c1"))
    r = serve("--node-id", "1", "--voters", f"1@127.0.0.1:{port}", "--data-dir", str(tmp_path))
    assert r.returncode == 2 and "belongs to node 0" in r.stderr
    r = serve(
        "--node-id", "0", "--voters", f"0@127.0.0.1:{port}", "--data-dir", str(tmp_path),
        "--cluster-id", "other",
    )  # fmt: skip
    assert r.returncode == 2 and "belongs to cluster c1" in r.stderr


def test_short_secrets_are_refused(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("short")
    r = serve(
        "--node-id", "0", "--voters", "0@127.0.0.1:1,1@127.0.0.1:2",
        "--raft-secret-file", str(secret), "--data-dir", str(tmp_path / "d"),
    )  # fmt: skip
    assert r.returncode == 2 and "at least 16 characters" in r.stderr


def test_node_id_from_a_statefulset_hostname():
    assert node_id_from_hostname("metaquorum-2.metaquorum-raft.default.svc") == 2
    with pytest.raises(ValueError, match="does not end in -<ordinal>"):
        node_id_from_hostname("laptop")


def test_parse_voters():
    assert parse_voters("0@a:1, 1@b:2") == {0: "a:1", 1: "b:2"}
    for bad, why in [
        ("", "no voters"),
        ("0@a:1,0@b:2", "appears twice"),
        ("0@a:1,1@a:1", "appears twice"),
    ]:
        with pytest.raises(ConfigError, match=why):
            parse_voters(bad)
