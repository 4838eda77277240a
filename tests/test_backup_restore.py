"""`metaquorum backup` against real voters (`metaquorum serve` on loopback):
a backup taken under writes is the image at its offset (the digest a replay
of the log to that offset gives, every write acknowledged before it began),
from a follower too, over TLS with a token; refused for a read token; and
`--verify` names what is wrong with a damaged or foreign file."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from metadata_records.backup_file import load_backup
from metadata_records.log_invariants import LogInvariants
from metadata_records.snapshot import image_digest

from .cluster import Cluster
from .conftest import running
from .k8s_rolling import Writer
from .tls_files import TlsFiles

pytestmark = pytest.mark.slow

TOKENS = "tok-admin admin\ntok-read read\n"
ADMIN = {"Authorization": "Bearer tok-admin"}


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def voters(tmp_path_factory):
    root = tmp_path_factory.mktemp("backup-cluster")
    tokens = root / "tokens"
    tokens.write_text(TOKENS)
    c = Cluster(root, voters=3, extra=["--tokens-file", str(tokens)])
    c.client.headers.update(ADMIN)  # its status reads (which voter leads) need a token
    with running(c):
        yield c


def _replayed_digest(c: Cluster, i: int, next_offset: int) -> str:
    """The image digest at ``next_offset``, from voter ``i``'s log replayed
    from 0 by the one replay (metadata_records/log_invariants.py)."""
    invariants = LogInvariants()
    offset = 0
    while offset < next_offset:
        r = c.get(
            i,
            "/v1/log",
            params={"fromOffset": offset, "maxRecords": min(10_000, next_offset - offset)},
            headers=ADMIN,
        )
        assert r.status_code == 200, r.text
        records = [obj for obj in r.json()["records"] if obj["offset"] < next_offset]
        assert records, f"the log has nothing at {offset}"
        for obj in records:
            invariants.check_obj(obj)
        offset = records[-1]["offset"] + 1
    assert not invariants.finish()
    return image_digest(invariants.delta.apply())


def _follower(c: Cluster) -> int:
    leader = c.leader()
    return next(i for i in range(c.n) if i != leader)


def test_a_backup_under_writes_is_the_image_at_its_offset(voters, tmp_path):
    c = voters
    follower = _follower(c)
    writer = Writer([c.url(i) for i in range(c.n)], "tok-admin", c.cluster_id).start()
    try:
        c.wait(lambda: len(writer.acked) >= 30, 60, "30 acknowledged writes")
        started = time.monotonic()
        acked_before = {b for b, t in writer.acked if t < started}
        out = tmp_path / "cluster.backup"
        run = cli("backup", "--url", c.url(follower), "--token", "tok-admin", "--out", str(out))
        during = len(writer.acked)
        c.wait(lambda: len(writer.acked) >= during + 10, 60, "writes after the backup")
    finally:
        writer.stop()
    assert run.returncode == 0, run.stderr
    assert not writer.failed, writer.failed[:3]
    assert os.listdir(tmp_path) == ["cluster.backup"]  # no .part left
    summary, image = load_backup([out.read_bytes()])
    h = summary.header
    assert h["sourceNodeId"] == follower
    assert h["clusterId"] == c.cluster_id
    assert f"as of offset {h['lastOffset']} (next offset {h['nextOffset']})" in run.stdout
    assert summary.image_sha256 in run.stdout
    # Every write acknowledged before the backup started is in it; the cluster went on after.
    assert acked_before and acked_before <= set(image.brokers)
    assert c.status(follower)["highWatermark"] > h["nextOffset"]
    # The file's digest is the image a replay of the log to its offset gives.
    assert summary.image_sha256 == image_digest(image)
    assert summary.image_sha256 == _replayed_digest(c, c.leader(), h["nextOffset"])
    verified = cli("backup", "--verify", str(out))
    assert verified.returncode == 0, verified.stderr
    assert "a good metaquorum backup" in verified.stdout
    assert f"{h['partitions']:,} partitions" in verified.stdout


def test_refused_for_a_read_token_and_for_an_existing_file(voters, tmp_path):
    c = voters
    out = tmp_path / "b"
    run = cli("backup", "--url", c.url(0), "--token", "tok-read", "--out", str(out))
    assert run.returncode == 1
    assert "403" in run.stderr and "admin role" in run.stderr, run.stderr
    assert os.listdir(tmp_path) == []
    token_file = tmp_path / "token"
    token_file.write_text("tok-admin\n")
    args = ["backup", "--url", c.url(0), "--token-file", str(token_file), "--out", str(out)]
    assert cli(*args).returncode == 0
    first = out.read_bytes()
    again = cli(*args)
    assert again.returncode == 2
    assert "exists" in again.stderr and "--force" in again.stderr
    assert out.read_bytes() == first
    assert cli(*args, "--force").returncode == 0
    assert sorted(os.listdir(tmp_path)) == ["b", "token"]
    assert oct(out.stat().st_mode & 0o777) == "0o600"  # it holds sensitive values


def test_no_voter_answering_leaves_nothing(tmp_path):
    from tests.cluster import free_port  # noqa: PLC0415

    run = cli("backup", "--url", f"http://127.0.0.1:{free_port()}", "--out", str(tmp_path / "b"))
    assert run.returncode == 2
    assert "no voter answered" in run.stderr
    assert os.listdir(tmp_path) == []


def _flip(blob: bytes, at: int) -> bytes:
    return blob[:at] + bytes([blob[at] ^ 0x04]) + blob[at + 1 :]


def test_verify_names_what_is_wrong(voters, tmp_path):
    c = voters
    good = tmp_path / "good"
    assert (
        cli("backup", "--url", c.url(0), "--token", "tok-admin", "--out", str(good)).returncode == 0
    )
    blob = good.read_bytes()
    cases: dict[str, tuple[bytes, str]] = {
        "truncated": (blob[: len(blob) // 2], f"truncated at byte {len(blob) // 2}"),
        "header-bit-flipped": (_flip(blob, 120), "header digest mismatch"),
        "image-bit-flipped": (_flip(blob, blob.index(b"\n") + 100), "image digest mismatch"),
        "random": (os.urandom(10_000), "not a metaquorum backup"),
        "json": (b'{"clusterId": "x"}\n', "not a metaquorum backup"),
        "snapshot": (
            c.get(0, "/v1/snapshot", headers=ADMIN).content,
            "not a metaquorum backup",
        ),
        "empty": (b"", "empty"),
    }
    for name, (content, says) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        run = cli("backup", "--verify", str(path))
        assert run.returncode == 1, (name, run.stdout)
        assert says in run.stderr, (name, run.stderr)
        assert str(path) in run.stderr
    missing = cli("backup", "--verify", str(tmp_path / "nothing"))
    assert missing.returncode == 2 and "cannot read it" in missing.stderr


def test_backup_over_tls_with_a_token(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKENS)
    tls = TlsFiles(tmp_path / "tls")
    with running(Cluster(tmp_path, voters=1, tls=tls, extra=["--tokens-file", str(tokens)])) as c:
        out = tmp_path / "tls.backup"
        base = ["backup", "--url", c.url(0), "--out", str(out), "--token", "tok-admin"]
        unknown_ca = cli(*base)
        assert unknown_ca.returncode == 2, unknown_ca.stderr
        assert not out.exists() and not Path(f"{out}.part").exists()
        run = cli(*base, "--cacert", str(tls.ca_file))
        assert run.returncode == 0, run.stderr
        summary, image = load_backup([out.read_bytes()])
        status = c.client.get(
            f"{c.url(0)}/v1/quorum/status", params={"digest": "true"}, headers=ADMIN
        ).json()
        # Nothing was written since (no writer, no periodic NoOp): the voter's digest now.
        assert status["lastAppliedOffset"] == image.last_offset
        assert status["imageDigest"] == summary.image_sha256
        assert orjson.loads(out.read_bytes().split(b"\n", 1)[0])["clusterId"] == c.cluster_id
