"""A stopped voter's real journal, damaged on disk, then ``metaquorum serve``
restarted on it: damage before the last entry makes it refuse (exit 3, the file
and offset named); a torn last append or garbage after the end is survived,
and the voter catches up to the leader's exact state."""

import shutil
import struct
import uuid

import httpx
import pytest

from quorum.journal_format import HEADER_SIZE

from .cluster import Cluster

pytestmark = pytest.mark.slow

MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]


def register(c: Cluster, leader: int, broker_id: int) -> None:
    body = {
        "brokerId": broker_id,
        "clusterId": c.cluster_id,
        "incarnationId": str(uuid.uuid4()),
        "listeners": [{"name": "P", "host": "h", "port": 9092, "securityProtocol": 0}],
        "features": MV,
        "rack": None,
    }
    r = c.post(leader, "/v1/brokers/register", body)
    assert r.status_code == 200 and r.json()["errorName"] == "NONE", r.text


def entry_offsets(journal: bytes) -> list[int]:
    (end,) = struct.unpack_from("<I", journal, 36)
    offsets, at = [], HEADER_SIZE
    while at < end:
        offsets.append(at)
        at += struct.unpack_from("<I", journal, at)[0] + 8
    return offsets


def digest(c: Cluster, i: int) -> tuple[int, str] | None:
    try:
        r = c.get(i, "/v1/quorum/status?digest=true", timeout=5.0)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    body = r.json()
    return body["lastAppliedOffset"], body["imageDigest"]


def test_a_damaged_journal_is_refused_and_a_torn_tail_is_survived(cluster):
    c = cluster
    c.wait_ready()
    leader = c.leader()
    for b in range(1, 6):
        register(c, leader, b)
    follower = next(i for i in range(c.n) if i != leader)
    c.wait(lambda: digest(c, follower) == digest(c, leader), 60, "the follower caught up")
    assert c.stop(follower) == 0
    journal_path = c.data_dir(follower) / "raft.journal"
    pristine = c.root / "pristine"
    shutil.copytree(c.data_dir(follower), pristine)
    journal = journal_path.read_bytes()
    offsets = entry_offsets(journal)
    assert len(offsets) >= 4, offsets

    # 1. A bit flipped inside an entry before the last: refused, named.
    damaged = bytearray(journal)
    damaged[offsets[-3] + 4 + 16 + 3] ^= 0x04
    journal_path.write_bytes(bytes(damaged))
    c.start(follower)
    code = c.procs[follower].wait(timeout=60)
    log = c.tail(follower, 10)
    assert code == 3, log
    assert str(journal_path) in log and f"byte offset {offsets[-3]}" in log, log
    assert "Traceback" not in log, log

    # 2. The file cut in the middle of its last entry (a torn append): the voter
    # drops it, says so, and catches up from the leader.
    register(c, leader, 6)  # written while the follower is down
    shutil.rmtree(c.data_dir(follower))
    shutil.copytree(pristine, c.data_dir(follower))
    (end,) = struct.unpack_from("<I", journal, 36)
    with open(journal_path, "r+b") as f:
        f.truncate(offsets[-1] + (end - offsets[-1]) // 2)
    c.start(follower)
    c.wait(lambda: digest(c, follower) == digest(c, leader), 90, "the follower caught up")
    assert "dropped a torn last append" in c.tail(follower, 200)
    assert c.stop(follower) == 0

    # 3. Garbage after the journal's end: not part of the journal.
    with open(journal_path, "ab") as f:
        f.write(b"\xde\xad\xbe\xef" * 4096)
    register(c, leader, 7)
    c.start(follower)
    c.wait(lambda: digest(c, follower) == digest(c, leader), 90, "the follower caught up")
    assert c.leader() == leader
