"""``metaquorum dev --nodes 3``: three local voters, stopped together on Ctrl-C."""

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from .nodes import free_port


@pytest.mark.slow
def test_dev_runs_three_voters_and_stops_them_together(tmp_path):
    base = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaquorum.cli", "dev", "--nodes", "3",
         "--data-dir", str(tmp_path), "--http-port", str(base), "--fsync", "never"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its voters share the group: the cleanup reaches them
    )  # fmt: skip
    lines = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Ctrl-C stops all voters" in line:
                break
        out = "".join(lines)
        assert "Ctrl-C stops all voters" in out, out
        assert "curl -sL -X POST" in out and "/v1/brokers/register" in out
        statuses = [
            httpx.get(f"http://127.0.0.1:{base + 2 * i}/v1/quorum/status").json() for i in range(3)
        ]
        assert len({s["clusterId"] for s in statuses}) == 1
        assert {s["leaderId"] for s in statuses} <= {0, 1, 2}
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        for i in range(3):
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"http://127.0.0.1:{base + 2 * i}/livez", timeout=1)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
