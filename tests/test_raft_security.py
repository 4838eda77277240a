"""The Raft port of a real voter (``metaquorum serve``) against hostile peers:
no secret, a wrong secret, pysyncobj's admin commands, garbage and oversized
frames. The voter must refuse them all, change nothing, stay small and keep
serving."""

import os
import pickle
import socket
import struct
import time
import uuid
import zlib

import pysyncobj.utility
import pytest
from cryptography.fernet import Fernet
from pysyncobj.encryptor import getEncryptor
from pysyncobj.utility import TcpUtility, UtilityException

from quorum.raft.raft_port import (
    MAX_UNTRUSTED_FRAME_BYTES,
    FrameRejected,
    RaftCipher,
    check_frame_header,
    raft_password,
)

from .cluster import SECRET, Cluster

# ``voter`` (conftest): one voter with a Raft secret, what a hostile peer would attack.

pytestmark = pytest.mark.slow

MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]


def raft_address(c: Cluster) -> tuple[str, int]:
    return "127.0.0.1", c.raft[0]


def rss_kib(c: Cluster) -> int:
    with open(f"/proc/{c.procs[0].pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def last_offset(c: Cluster) -> int:
    status = c.status(0)
    assert status is not None, c.tail(0)
    return status["lastAppliedOffset"]


def assert_serving(c: Cluster) -> None:
    """The voter is alive, leads, and still takes a write."""
    assert c.alive(0), c.tail(0)
    r = c.post(
        0,
        "/v1/brokers/register",
        {
            "brokerId": int(time.monotonic_ns() % 1_000_000),
            "clusterId": c.cluster_id,
            "incarnationId": str(uuid.uuid4()),
            "listeners": [{"name": "P", "host": "h", "port": 9092, "securityProtocol": 0}],
            "features": MV,
            "rack": None,
        },
    )
    assert r.status_code == 200 and r.json()["errorName"] == "NONE", r.text


def frame(payload: bytes) -> bytes:
    return struct.pack("i", len(payload)) + payload


def closed_by_peer(sock: socket.socket, timeout_s: float = 20.0) -> bool:
    """True once the voter closed the connection (EOF or reset)."""
    sock.settimeout(timeout_s)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def admin(c: Cluster, password: str | None, command: list, monkeypatch) -> str:
    """pysyncobj's admin tool (``syncobj_admin``), speaking the voter's cipher."""
    monkeypatch.setattr(pysyncobj.utility, "getEncryptor", RaftCipher)
    host, port = raft_address(c)
    return TcpUtility(password=password, timeout=10.0).executeCommand(f"{host}:{port}", command)


def first_frame(encryptor) -> bytes:
    """What a pysyncobj peer sends first when it has a password: its random
    key, pickled, compressed, encrypted."""
    data = zlib.compress(pickle.dumps(os.urandom(32)), 3)
    return frame(encryptor.encrypt_at_time(data, int(time.monotonic())))


# ------------------------------------------------------------------ secret


def test_a_peer_without_the_secret_is_disconnected_and_nothing_is_applied(voter):
    # A write answered first: everything before it (the new cluster's
    # bootstrap batches included) is applied, so the offset can only move now
    # if the forged frames wrote something.
    assert_serving(voter)
    before = last_offset(voter)
    # What an unencrypted pysyncobj peer sends: its address, then AppendEntries.
    forged = [
        frame(zlib.compress(pickle.dumps("127.0.0.1:1"), 3)),
        frame(
            zlib.compress(pickle.dumps({"type": "append_entries", "term": 10**6, "entries": []}), 3)
        ),
    ]
    with socket.create_connection(raft_address(voter), timeout=10) as s:
        s.sendall(b"".join(forged))
        assert closed_by_peer(s)
    # The same, encrypted with a wrong secret; and with the secret, by a peer
    # speaking pysyncobj's own cipher (Fernet, metaquorum before AES-GCM).
    for encryptor in (RaftCipher("not-the-secret-0123456789"), getEncryptor(SECRET)):
        with socket.create_connection(raft_address(voter), timeout=10) as s:
            s.sendall(first_frame(encryptor))
            assert closed_by_peer(s)
    assert last_offset(voter) == before
    status = voter.status(0)
    assert status["leaderId"] == 0 and status["raftTerm"] < 10**6
    assert_serving(voter)


@pytest.mark.parametrize("password", [None, "not-the-secret-0123456789"])
@pytest.mark.parametrize("command", [["status"], ["add", "127.0.0.1:1"], ["remove", "x:1"]])
def test_admin_commands_without_the_secret_get_no_answer(voter, password, command, monkeypatch):
    with pytest.raises(UtilityException):
        admin(voter, password, command, monkeypatch)
    assert voter.status(0)["voters"] and len(voter.status(0)["voters"]) == 1
    assert_serving(voter)


@pytest.mark.parametrize(
    "command",
    [["status"], ["add", "127.0.0.1:1"], ["remove", "127.0.0.1:1"], ["set_version", 7],
     ["transfer", "127.0.0.1:1"]],
)  # fmt: skip
def test_admin_commands_are_refused_even_with_the_secret(voter, command, monkeypatch):
    """metaquorum's HTTP API (with tokens) is the only way to operate a voter."""
    answer = admin(voter, SECRET, command, monkeypatch)
    assert "admin commands are disabled" in answer, answer
    assert len(voter.status(0)["voters"]) == 1
    assert_serving(voter)


# ------------------------------------------------------------------ frames


def test_garbage_and_bad_lengths_do_not_hurt_the_voter(voter):
    before = last_offset(voter)
    payloads = [
        b"\x00" * 3,  # a truncated header, then EOF
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # the wrong protocol
        os.urandom(4096),
        frame(os.urandom(1000)),  # a well-formed frame of noise
        struct.pack("i", -1) + os.urandom(64),  # a negative length
        frame(Fernet(Fernet.generate_key()).encrypt(b"x" * 100)),  # another key's token
    ]
    for payload in payloads:
        with socket.create_connection(raft_address(voter), timeout=10) as s:
            try:
                s.sendall(payload)
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the voter may close first: that is the point
            assert closed_by_peer(s), payload[:20]
    assert last_offset(voter) == before
    assert_serving(voter)


def test_an_oversized_frame_is_dropped_early_and_memory_stays_bounded(voter):
    rss_before = rss_kib(voter)
    sent, total = 0, 256 << 20
    chunk = os.urandom(1 << 20)
    with socket.create_connection(raft_address(voter), timeout=10) as s:
        s.settimeout(20)
        try:
            s.sendall(struct.pack("i", 2**31 - 1))
            while sent < total:
                s.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert sent < total, "the voter kept reading a 2 GiB frame"
        assert closed_by_peer(s)
    # Many connections at once, each declaring a huge frame.
    socks = [socket.create_connection(raft_address(voter), timeout=10) for _ in range(50)]
    try:
        for s in socks:
            try:
                s.sendall(struct.pack("i", 1 << 30) + chunk[: MAX_UNTRUSTED_FRAME_BYTES * 2])
            except OSError:
                pass
        assert all(closed_by_peer(s) for s in socks)
    finally:
        for s in socks:
            s.close()
    grown_mib = (rss_kib(voter) - rss_before) / 1024
    print(f"\nRaft port: {sent >> 20} MiB sent before the voter dropped the oversized frame; "
          f"RSS grew {grown_mib:.1f} MiB")  # fmt: skip
    assert grown_mib < 64, f"RSS grew {grown_mib:.1f} MiB"
    assert_serving(voter)


def test_frame_header_limits():
    check_frame_header(b"", 10)
    check_frame_header(struct.pack("i", 10), 10)
    with pytest.raises(FrameRejected, match="11 bytes"):
        check_frame_header(struct.pack("i", 11), 10)
    with pytest.raises(FrameRejected, match="-5 bytes"):
        check_frame_header(struct.pack("i", -5) + b"x", 10)


def test_a_lone_voter_without_a_secret_gets_a_random_one():
    """Its pickle port must never be open: nobody else needs to connect to it."""
    first, second = raft_password(None, 1), raft_password(None, 1)
    assert first != second and len(first) >= 32
    assert raft_password("configured-secret-0123", 3) == "configured-secret-0123"
    with pytest.raises(ValueError, match="needs a Raft secret"):
        raft_password(None, 3)


def test_an_impostor_voter_without_the_secret_cannot_disturb_the_cluster(tmp_path):
    """A real pysyncobj node takes a stopped voter's address with a wrong
    secret: it never gets a connection, so it can neither campaign nor be
    sent the log, and the cluster goes on at the same term."""
    from pysyncobj import SyncObj, SyncObjConf

    c = Cluster(tmp_path)
    impostor = None
    try:
        c.start()
        c.wait_ready()
        leader = c.leader()
        victim = next(i for i in range(c.n) if i != leader)
        assert c.stop(victim) == 0
        before = c.status(leader)
        others = [f"127.0.0.1:{c.raft[i]}" for i in range(c.n) if i != victim]
        impostor = SyncObj(
            f"127.0.0.1:{c.raft[victim]}",
            others,
            conf=SyncObjConf(
                password="not-the-secret-0123456789",
                raftMinTimeout=0.3,
                raftMaxTimeout=0.5,
                appendEntriesPeriod=0.05,
                connectionRetryTime=0.2,
            ),
        )
        # Give it many election timeouts to try, watching the cluster meanwhile.
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            status = c.status(leader)
            assert status is not None and status["leaderId"] == leader, status
            assert status["controllerEpoch"] == before["controllerEpoch"], status
            time.sleep(0.1)
        # pysyncobj campaigns only once connected to a peer: it never got that far.
        assert impostor._getLeader() is None and impostor.raftCurrentTerm == 0
        assert impostor.getStatus()["partner_nodes_count"] == len(others)
        assert all(
            impostor.getStatus()[f"partner_node_status_server_{peer}"] == 0 for peer in others
        ), impostor.getStatus()
        after = c.status(leader)
        assert after["raftTerm"] == before["raftTerm"], (before, after)
        assert_serving_cluster(c, leader)
    finally:
        if impostor is not None:
            impostor.destroy()
        c.close()


def assert_serving_cluster(c: Cluster, leader: int) -> None:
    r = c.post(
        leader,
        "/v1/brokers/register",
        {
            "brokerId": 1,
            "clusterId": c.cluster_id,
            "incarnationId": str(uuid.uuid4()),
            "listeners": [],
            "features": MV,
            "rack": None,
        },
    )
    assert r.status_code == 200 and r.json()["errorName"] == "NONE", r.text
