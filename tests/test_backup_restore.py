"""`metaquorum backup` and `metaquorum restore` against real voters
(`metaquorum serve` on loopback): a backup taken under writes is the image
at its offset (the digest a replay of the log to that offset gives, every
write acknowledged before it began), from a follower too, over TLS with a
token; refused for a read token; `--verify` names what is wrong with a
damaged or foreign file. Restored into three new dirs, it starts a new
cluster holding the backup's state under a new cluster id (old brokers
refused; `--keep-cluster-id` accepts them); every refusal writes nothing."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from metadata_records.backup_file import load_backup, trailer_line
from metadata_records.features import MAX_METADATA_VERSION
from metadata_records.log_invariants import LogInvariants
from metadata_records.snapshot import image_digest

from .cluster import Cluster
from .conftest import running
from .k8s_rolling import Writer
from .test_cluster import register, register_body, write
from .test_http_workers import heartbeat_until_unfenced
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


def _at_rest(c: Cluster, i: int) -> bool:
    """Voter ``i``'s last applied offset stays put for half a second (no
    writer, no periodic NoOp: only a new leader's own writes move it)."""
    before = (c.status(i) or {}).get("lastAppliedOffset")
    time.sleep(0.5)
    return before is not None and (c.status(i) or {}).get("lastAppliedOffset") == before


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
    c.wait(
        lambda: (c.status(follower) or {}).get("highWatermark", 0) > h["nextOffset"],
        30,
        "writes after the backup applied on the follower",
    )
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


def test_out_dir_names_each_backup_and_keep_deletes_only_this_clusters_oldest(voters, tmp_path):
    """What a CronJob runs (no shell to name the file): each backup gets its
    cluster, offset and time in its name; ``--keep 2`` leaves the newest two
    and never touches another file."""
    c = voters
    out = tmp_path / "backups"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "metaquorum-other-cluster-000000000001-20260101T000000Z.backup").write_text("x")
    args = ["backup", "--url", c.url(0), "--token", "tok-admin", "--out-dir", str(out)]
    made = []
    for k in range(3):
        register(c, c.leader(), 6100 + k)  # a new offset each time
        run = cli(*args, "--keep", "2")
        assert run.returncode == 0, run.stderr
        made.append(next(line.split()[1].rstrip(":") for line in run.stdout.splitlines()
                         if line.startswith("wrote ")))  # fmt: skip
    left = sorted(os.listdir(out))
    assert [os.path.basename(m) for m in made[1:]] == [
        n for n in left if n.startswith(f"metaquorum-{c.cluster_id}-")
    ]
    assert "notes.txt" in left and len(left) == 4, left
    assert all(cli("backup", "--verify", m).returncode == 0 for m in made[1:])
    bad = cli(*args[:-2], "--out", str(tmp_path / "x"), "--keep", "1")
    assert bad.returncode == 2 and "--keep N needs --out-dir" in bad.stderr


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
        "header-bit-flipped": (
            _flip(blob, blob.index(c.cluster_id.encode())),
            "header digest mismatch",
        ),
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
        c.wait(lambda: _at_rest(c, 0), 30, "the new leader's own writes applied")
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


# ---------------------------------------------------------------- restore


def _populate(c: Cluster) -> None:
    """Brokers, a topic with configs, a broker config with a sensitive value,
    an ACL and a client quota: every kind of state a restore must bring back."""
    leader = c.leader()
    for b in (1, 2, 3):
        heartbeat_until_unfenced(c, leader, b, register(c, leader, b))
    created = write(c, leader, "/v1/topics", {"topics": [
        {"name": "orders", "numPartitions": 4, "replicationFactor": 3,
         "configs": [{"name": "retention.ms", "value": "3600000"}]},
    ]})  # fmt: skip
    assert created["topics"][0]["errorName"] == "NONE", created
    configs = write(c, leader, "/v1/configs", {"resources": [
        {"resourceType": 4, "resourceName": "1", "configs": [
            {"name": "ssl.keystore.password", "configOperation": 0, "value": "s3cret"}]},
    ]})  # fmt: skip
    assert configs["responses"][0]["errorName"] == "NONE", configs
    acl = {
        "resourceType": "TOPIC", "resourceName": "orders", "resourcePatternType": "LITERAL",
        "principal": "User:alice", "host": "*", "operation": "READ", "permissionType": "ALLOW",
    }  # fmt: skip
    assert write(c, leader, "/v1/acls", {"creations": [acl]})["results"][0]["errorCode"] == 0
    quota = {
        "entity": [{"entityType": "user", "entityName": "alice"}],
        "ops": [{"key": "producer_byte_rate", "value": 1024.0}],
    }
    assert (
        write(c, leader, "/v1/client-quotas", {"entries": [quota]})["entries"][0]["errorCode"] == 0
    )


def _restore(backup: Path, data_dir: Path, node_id: int, voters: str, *flags: str):
    return cli(
        "restore", "--from", str(backup), "--data-dir", str(data_dir),
        "--node-id", str(node_id), "--voters", voters, *flags,
    )  # fmt: skip


def _set_aside(image):
    """What a restored cluster changes by starting: its first leader writes a
    LEADER_CHANGE (controller epoch, leader id and URL) and the voter set
    (KRAFT_VOTERS: new addresses, new directory ids) at offsets from the
    backup's next offset on. Everything else must be the backup's."""
    return image._replace(
        next_offset=0, controller_epoch=0, leader_id=-1, leader_url=None, voters=()
    )


def _backup_of(c: Cluster, i: int, out: Path):
    run = cli("backup", "--url", c.url(i), "--token", "tok-admin", "--out", str(out))
    assert run.returncode == 0, run.stderr
    return load_backup([out.read_bytes()])


def test_a_backup_restores_to_a_new_three_voter_cluster(voters, tmp_path):
    old = voters
    _populate(old)
    writer = Writer([old.url(i) for i in range(3)], "tok-admin", old.cluster_id, first_id=5000)
    writer.start()
    try:
        old.wait(lambda: len(writer.acked) >= 10, 60, "writes under way")
        started = time.monotonic()
        backup = tmp_path / "cluster.backup"
        summary, image = _backup_of(old, _follower(old), backup)
    finally:
        writer.stop()
    assert {b for b, t in writer.acked if t < started} <= set(image.brokers)
    assert image.acls and image.client_quotas and image.broker_configs

    root = tmp_path / "restored"
    root.mkdir()
    new = Cluster(root, voters=3, extra=["--tokens-file", str(old.root / "tokens"),
                                          "--session-timeout-ms", "600000"])  # fmt: skip
    new.client.headers.update(ADMIN)
    new.cluster_id = "restored-cluster-id"
    try:
        for i in range(3):
            run = _restore(backup, new.data_dir(i), i, new.voters, "--cluster-id", new.cluster_id)
            assert run.returncode == 0, run.stderr
            assert f"restored node {i} into" in run.stdout
            assert "INCONSISTENT_CLUSTER_ID" in run.stdout and "metaquorum serve" in run.stdout
        new.start()
        new.wait_ready()
        leader = new.leader()

        def voter_set_written() -> bool:
            head = new.get(leader, "/v1/backup").content.split(b"\n", 1)[0]
            return len(orjson.loads(head)["voters"]) == 3

        new.wait(voter_set_written, 30, "the first leader writing the voter set")
        # Everything but what its first leader wrote is the backup's image.
        _, restored = _backup_of(new, leader, tmp_path / "restored.backup")
        assert restored.next_offset > image.next_offset
        assert _set_aside(restored) == _set_aside(image)
        assert {v.voter_id for v in restored.voters} == {0, 1, 2}
        # New writes go on at offsets after the backup's.
        assert register(new, leader, 77) > image.last_offset
        # A broker of the old cluster id is refused; the restored id is accepted.
        body = new.post(leader, "/v1/brokers/register", register_body(old, 78),
                        follow_redirects=True).json()  # fmt: skip
        assert body["errorName"] == "INCONSISTENT_CLUSTER_ID", body
    finally:
        new.close()


def test_keep_cluster_id_accepts_the_old_brokers(voters, tmp_path):
    backup = tmp_path / "b"
    summary, image = _backup_of(voters, 0, backup)
    root = tmp_path / "kept"
    root.mkdir()
    new = Cluster(root, voters=1, extra=["--tokens-file", str(voters.root / "tokens")])
    new.client.headers.update(ADMIN)
    try:
        run = _restore(backup, new.data_dir(0), 0, new.voters, "--keep-cluster-id")
        assert run.returncode == 0, run.stderr
        assert f"cluster id {voters.cluster_id}, the backup's" in run.stdout
        new.start()
        new.wait_ready()
        leader = new.leader()
        assert register(new, leader, 90) > image.last_offset  # under the old cluster id
    finally:
        new.close()


def _crafted(blob: bytes, metadata_version: int) -> bytes:
    """``blob`` with its image and header at another metadata.version, every
    digest made to match (what a newer release's backup would look like)."""
    header_line, body, _trailer, _ = blob.split(b"\n")
    obj = orjson.loads(body)
    obj["features"]["metadata.version"] = metadata_version
    new_body = orjson.dumps(obj)
    header = orjson.loads(header_line)
    header["metadataVersion"] = metadata_version
    header["finalizedFeatures"]["metadata.version"] = metadata_version
    new_header = orjson.dumps(header)
    trailer = trailer_line(new_header, len(new_body), hashlib.sha256(new_body).hexdigest())
    return new_header + b"\n" + new_body + b"\n" + trailer


def test_restore_refusals_write_nothing(voters, tmp_path):
    backup = tmp_path / "good"
    _backup_of(voters, 0, backup)
    blob = backup.read_bytes()
    target = tmp_path / "dir"
    one = "0@127.0.0.1:9093"
    three = "0@127.0.0.1:9093,1@127.0.0.1:9094,2@127.0.0.1:9095"
    newer = tmp_path / "newer"
    newer.write_bytes(_crafted(blob, MAX_METADATA_VERSION + 1))
    files = {"truncated": blob[:-100], "flipped": _flip(blob, len(blob) // 2),
             "foreign": b'{"records": []}\n'}  # fmt: skip
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    cases = [
        (_restore(tmp_path / "truncated", target, 0, one), 1, "truncated at byte"),
        (_restore(tmp_path / "flipped", target, 0, one), 1, "digest mismatch"),
        (_restore(tmp_path / "foreign", target, 0, one), 1, "not a metaquorum backup"),
        (_restore(newer, target, 0, one), 1,
         f"metadata.version {MAX_METADATA_VERSION + 1}; this metaquorum runs up to "
         f"{MAX_METADATA_VERSION}"),
        (_restore(backup, target, 0, three), 2, "needs the new cluster id"),
        (_restore(backup, target, 5, one), 2, "--node-id 5 is not among --voters"),
        (_restore(tmp_path / "missing", target, 0, one), 2, "cannot read it"),
    ]  # fmt: skip
    for run, code, says in cases:
        assert (run.returncode, says in run.stderr) == (code, True), run.stderr
        assert "nothing was written" in run.stderr or code == 2
        assert not target.exists()
    target.mkdir()
    (target / "raft.journal").write_bytes(b"someone's")
    run = _restore(backup, target, 0, one)
    assert run.returncode == 2 and "is not empty" in run.stderr, run.stderr
    assert os.listdir(target) == ["raft.journal"]
    # The crafted file is good in every other way: at this build's level it restores.
    (tmp_path / "same").write_bytes(_crafted(blob, MAX_METADATA_VERSION))
    ok = _restore(tmp_path / "same", tmp_path / "ok", 0, one)
    assert ok.returncode == 0, ok.stderr


def test_a_voter_with_http_workers_serves_its_backup(tmp_path):
    """A worker (voter/worker_node.py) answers GET /v1/backup from its own
    image after a barrier through its core, with the voter's cluster id."""
    with running(Cluster(tmp_path, voters=1, extra=["--http-workers", "2"])) as c:
        leader = c.leader()
        register(c, leader, 1)
        out = tmp_path / "w.backup"
        for _ in range(4):  # the workers share the port: more than one answers
            run = cli("backup", "--url", c.url(0), "--out", str(out), "--force")
            assert run.returncode == 0, run.stderr
            summary, image = load_backup([out.read_bytes()])
            assert summary.header["clusterId"] == c.cluster_id
            assert 1 in image.brokers
