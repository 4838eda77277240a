"""``metaquorum serve`` refuses bad configuration with exit code 2 and a message
naming the flag, before it binds anything."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from metaquorum.serve import node_id_from_hostname
from quorum.node_config import ConfigError, parse_voters

from .nodes import free_port
from .tls_files import TlsFiles


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


# ---------------------------------------------------------------- a refused start writes nothing


def contents(d: Path) -> dict[str, bytes | None] | None:
    """Every file's bytes under ``d`` (None for a directory), None if ``d`` is missing."""
    if not d.exists():
        return None
    return {
        p.relative_to(d).as_posix(): p.read_bytes() if p.is_file() else None
        for p in sorted(d.rglob("*"))
    }


def one_voter(port: int | None = None) -> list[str]:
    return ["--node-id", "0", "--voters", f"0@127.0.0.1:{port or free_port()}"]


def refusal_bad_tokens(t: Path) -> tuple[list[str], str]:
    (t / "tokens").write_text("$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA admin\n")
    return (
        [*one_voter(), "--tokens-file", str(t / "tokens")],
        f"--tokens-file: {t}/tokens line 1: `$argon2id$` is not a hash this server checks",
    )


def refusal_bad_principals(t: Path) -> tuple[list[str], str]:
    files = TlsFiles(t / "tls")
    (t / "principals").write_text("OU=ops admin\n")
    return (
        [*one_voter(), *files.serve_flags(), "--tls-principals-file", str(t / "principals")],
        f"--tls-principals-file: {t}/principals line 1: 'OU=ops' must start with CN=",
    )


def refusal_bad_tls_key(t: Path) -> tuple[list[str], str]:
    files = TlsFiles(t / "tls")
    other = TlsFiles(t / "other")
    flags = files.serve_flags(None)
    flags[flags.index("--tls-key-file") + 1] = str(other.key_file)
    return (
        [*one_voter(), *flags],
        f"--tls-key-file {other.key_file} does not match the certificate in --tls-cert-file",
    )


def refusal_bad_raft_secret(t: Path) -> tuple[list[str], str]:
    (t / "secret").write_text("short\n")
    voters = f"0@127.0.0.1:{free_port()},1@127.0.0.1:{free_port()}"
    return (
        ["--node-id", "0", "--voters", voters, "--raft-secret-file", str(t / "secret")],
        f"--raft-secret-file {t}/secret: the secret must be at least 16 characters",
    )


def refusal_no_cluster_id(t: Path) -> tuple[list[str], str]:
    """Flags each good alone, refused together only once serve knows the
    data dir is new: the first start of a voter of several needs --cluster-id."""
    (t / "secret").write_text("a-raft-secret-of-32-characters!!\n")
    voters = f"0@127.0.0.1:{free_port()},1@127.0.0.1:{free_port()}"
    return (
        ["--node-id", "0", "--voters", voters, "--raft-secret-file", str(t / "secret")],
        "--cluster-id is required on the first start of a multi-voter cluster",
    )


REFUSALS = [
    refusal_bad_tokens,
    refusal_bad_principals,
    refusal_bad_tls_key,
    refusal_bad_raft_secret,
    refusal_no_cluster_id,
]


@pytest.mark.parametrize("data_dir_state", ["missing", "empty"])
@pytest.mark.parametrize("refusal", REFUSALS, ids=lambda f: f.__name__.removeprefix("refusal_"))
def test_a_refused_start_leaves_the_data_dir_as_it_was(tmp_path, refusal, data_dir_state):
    """Every check that can refuse runs before the first byte goes to the data
    dir: a retry with the input fixed is not refused for what the refused
    start wrote (metaquorum.json with another cluster id)."""
    data_dir = tmp_path / "data"
    if data_dir_state == "empty":
        data_dir.mkdir()
    before = contents(data_dir)
    args, message = refusal(tmp_path)
    r = serve(*args, "--http-port", str(free_port()), "--data-dir", str(data_dir))
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("metaquorum serve:")]
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert contents(data_dir) == before


def test_a_refused_start_leaves_a_used_data_dir_byte_identical(tmp_path):
    from quorum.node_config import NodeConfig, claim_data_dir

    port = free_port()
    data_dir = tmp_path / "data"
    claim_data_dir(NodeConfig(0, {0: f"127.0.0.1:{port}"}, str(data_dir), "http://x:1", "c1"))
    (data_dir / "raft.journal").write_bytes(b"\x00" * 64)
    before = contents(data_dir)
    args, message = refusal_bad_tokens(tmp_path)
    args[args.index("--voters") + 1] = f"0@127.0.0.1:{port}"
    r = serve(*args, "--http-port", str(free_port()), "--data-dir", str(data_dir))
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert contents(data_dir) == before


def test_a_start_refused_for_its_tokens_file_starts_once_the_file_is_fixed(tmp_path):
    """The issue's report: the refused start wrote metaquorum.json with a
    cluster id of its own, so the retry with the fixed file and --cluster-id
    was refused until the data dir was wiped."""
    data_dir, http_port = tmp_path / "data", free_port()
    args, message = refusal_bad_tokens(tmp_path)
    args += ["--http-port", str(http_port), "--http-workers", "0", "--data-dir", str(data_dir)]
    r = serve(*args)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert contents(data_dir) is None
    (tmp_path / "tokens").write_text("a-plain-admin-token admin\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaquorum.cli", "serve", *args, "--cluster-id", "c1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                if httpx.get(f"http://127.0.0.1:{http_port}/livez", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve did not start within 60 s"
            time.sleep(0.1)
        identity = json.loads((data_dir / "metaquorum.json").read_bytes())
        assert identity["clusterId"] == "c1"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0
