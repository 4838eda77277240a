"""Anyone who reaches a voter's Raft port can open connections and send junk:
oversized frame headers (dropped at once), and frames no key decrypts. A flood
of them leaves the voter serving and its log a few lines long, however many
connections came."""

from __future__ import annotations

import socket
import struct

import pytest

from ..conftest import running_cluster

pytestmark = pytest.mark.slow

CONNECTIONS = 300


def junk(port: int, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        s.settimeout(5)
        try:
            s.recv(1)  # the voter closes it (or the timeout ends it)
        except OSError:
            pass


def test_a_flood_of_junk_connections_leaves_a_few_log_lines(tmp_path):
    with running_cluster(tmp_path) as c:
        before = c.logs[0].read_text(errors="replace").count("Raft port: dropping a connection")
        for n in range(CONNECTIONS):
            if n % 2:
                junk(c.raft[0], struct.pack("i", (1 << 30) + n))  # a 1 GiB frame declared
            else:
                junk(c.raft[0], struct.pack("i", 40) + bytes(range(40)))  # no key decrypts it
        assert c.ready(0)
        log = c.logs[0].read_text(errors="replace")
        lines = log.count("Raft port: dropping a connection") - before
        # 150 connections were dropped for their frame size: at most a burst of
        # them is logged per minute, plus one line that says how many were held back.
        assert 1 <= lines <= 6, log[-3000:]
        assert "Traceback" not in log
