"""Not in the issue: a client that asks for a large answer (a snapshot) and
never reads it parks what the kernel's socket buffer does not take (up to 4
MiB does go there) in the voter's memory for as long as it keeps the
connection. The edge aborts a connection whose answer
stays unread for 30 s (``ConnectionLimits.write_stall_s``)."""

from __future__ import annotations

import socket
import time

import pytest

from tests.local_node import registration_body

from .attackers import hostile_cluster

STALL_S = 30.0


@pytest.mark.slow
def test_an_answer_left_unread_is_dropped_with_its_connection(tmp_path):
    with hostile_cluster(tmp_path) as c:
        reg = c.post(0, "/v1/brokers/register", registration_body(c.cluster_id, 1)).json()
        epoch = reg["brokerEpoch"]
        body = {"brokerId": 1, "brokerEpoch": epoch, "currentMetadataOffset": epoch}
        assert c.post(0, "/v1/brokers/heartbeat", body).json()["isFenced"] is False
        for name in ("big-1", "big-2"):  # a snapshot of about 6 MB: more than a socket takes
            # 9,999: with its TopicRecord, one operation's 10,000 records (record_cap)
            topic = {"name": name, "numPartitions": 9_999, "replicationFactor": 1}
            created = c.post(0, "/v1/topics", {"topics": [topic]}, timeout=60).json()
            assert created["topics"][0]["errorName"] == "NONE", created

        reader = socket.socket()
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # reads nothing
        reader.connect(("127.0.0.1", c.http[0]))
        reader.sendall(
            b"GET /v1/snapshot HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer read-token\r\n\r\n"
        )
        started = time.monotonic()
        c.wait(lambda: _metric(c, "write") >= 1, STALL_S + 30, "the stalled answer aborted")
        waited = time.monotonic() - started
        reader.settimeout(10)
        received = 0
        try:
            while chunk := reader.recv(1 << 16):
                received += len(chunk)
        except ConnectionResetError:
            pass  # aborted: what was still buffered is gone
        reader.close()
        assert waited >= STALL_S - 1, waited
        assert received < 5_000_000  # the answer was about 6 MB: it was not all sent
        assert c.get(0, "/v1/brokers").status_code == 200
        assert "stopped reading its answers" in c.logs[0].read_text(errors="replace")


def _metric(c, phase: str) -> float:
    name = f'metaquorum_http_connections_timed_out_total{{phase="{phase}"}}'
    for line in c.get(0, "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0
