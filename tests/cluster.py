"""Real voters as real processes on loopback (``metaquorum serve``), for tests.

Every process a test starts is stopped by ``Cluster.close``, which the fixture
runs also when the test fails. Waits are on conditions with deadlines.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from .nodes import free_port
from .tls_files import TlsFiles

SECRET = "test-raft-secret-0123456789abcdef"


def holds_for(seconds: float, check: Callable[[], None], every: float = 0.1) -> None:
    """Runs ``check`` (it asserts) again and again for ``seconds``: a property
    that must hold throughout a window, not a condition to wait for."""
    end = time.monotonic() + seconds
    while True:
        check()
        if time.monotonic() >= end:
            return
        time.sleep(every)


class Cluster:
    def __init__(
        self,
        root: Path,
        voters: int = 3,
        fsync: str = "never",
        extra: list[str] | None = None,
        tls: TlsFiles | None = None,
        client_cert: str | None = "admin-tests",
        tls_client_auth: str | None = "optional",
        noop_ms: int = 0,
    ):
        """``tls``: the voters serve HTTPS with these files (client certificates
        ``tls_client_auth``; None: not asked for), and this object's own client
        trusts their CA and presents ``client_cert``'s certificate (an admin's,
        by the default rules). ``noop_ms``: --metadata-max-idle-interval-ms, 0
        (no periodic NoOpRecord) unless a test asks, because most tests compare
        the voters' offsets and digests read one after another, and a NoOp
        committed between two reads would move them."""
        self.root = Path(root)
        self.tls = tls
        self.tls_client_auth = tls_client_auth
        self.n = voters
        self.fsync = fsync
        self.extra = extra or []
        self.noop_ms = noop_ms
        self.http = [free_port() for _ in range(voters)]
        self.raft = [free_port() for _ in range(voters)]
        self.voters = ",".join(f"{i}@127.0.0.1:{self.raft[i]}" for i in range(voters))
        self.cluster_id = "test-cluster-id"
        self.secret_file = self.root / "raft-secret"
        self.secret_file.write_text(SECRET)
        self.procs: list[subprocess.Popen | None] = [None] * voters
        self.logs: list[Path] = [self.root / f"node-{i}.log" for i in range(voters)]
        verify = tls.context(client_cert) if tls is not None else True
        self.client = httpx.Client(timeout=10.0, verify=verify)
        # Extra environment of one voter's process (e.g. libfaketime's, to step its wall clock).
        self.env: dict[int, dict[str, str]] = {}
        self.bootstrap = voters  # nodes from here on are not in --voters: they join
        self.observers: set[int] = set()  # started with serve --observer

    def add_observer(self) -> int:
        """A read-only follower (serve --observer); ``start(i)`` starts it."""
        i = self.add_node()
        self.observers.add(i)
        return i

    def add_node(self) -> int:
        """A node outside --voters (started with --raft-address), to be added
        with add-voter; returns its id. ``start(i)`` starts it."""
        i = self.n
        self.n += 1
        self.http.append(free_port())
        self.raft.append(free_port())
        self.procs.append(None)
        self.logs.append(self.root / f"node-{i}.log")
        return i

    def raft_address(self, i: int) -> str:
        return f"127.0.0.1:{self.raft[i]}"

    # ------------------------------------------------------------ processes

    def url(self, i: int) -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.http[i]}"

    def data_dir(self, i: int) -> Path:
        return self.root / f"node-{i}"

    def args(self, i: int) -> list[str]:
        return [
            sys.executable, "-m", "metaquorum.cli", "serve",
            "--node-id", str(i),
            "--voters", self.voters,
            "--http-host", "127.0.0.1",
            "--http-port", str(self.http[i]),
            "--advertised-url", self.url(i),
            "--data-dir", str(self.data_dir(i)),
            "--cluster-id", self.cluster_id,
            "--raft-secret-file", str(self.secret_file),
            "--fsync", self.fsync,
            "--metadata-max-idle-interval-ms", str(self.noop_ms),
            *(
                ["--observer"] if i in self.observers
                else ["--raft-address", self.raft_address(i)] if i >= self.bootstrap
                else []
            ),
            *(
                self.tls.serve_flags(self.tls_client_auth) + ["--tls-reload-interval-ms", "200"]
                if self.tls else []
            ),
            *self.extra,
        ]  # fmt: skip

    def start(self, i: int | None = None) -> Cluster:
        for j in range(self.n) if i is None else [i]:
            assert self.procs[j] is None or self.procs[j].poll() is not None
            log = open(self.logs[j], "ab")
            env = {**os.environ, **self.env[j]} if j in self.env else None
            self.procs[j] = subprocess.Popen(
                self.args(j), stdout=log, stderr=subprocess.STDOUT, env=env
            )
            log.close()
        return self

    def signal(self, i: int, sig: int) -> None:
        proc = self.procs[i]
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def stop(self, i: int, timeout_s: float = 20.0) -> int:
        proc = self.procs[i]
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc else 0
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(
                f"voter {i} did not stop within {timeout_s} s after SIGTERM"
            ) from None

    def close(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait(timeout=10)
        self.client.close()

    def alive(self, i: int) -> bool:
        proc = self.procs[i]
        return proc is not None and proc.poll() is None

    def tail(self, i: int, lines: int = 30) -> str:
        try:
            return "\n".join(self.logs[i].read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # ------------------------------------------------------------ HTTP

    def get(self, i: int, path: str, **kw) -> httpx.Response:
        return self.client.get(self.url(i) + path, **kw)

    def post(self, i: int, path: str, body: dict, **kw) -> httpx.Response:
        return self.client.post(self.url(i) + path, json=body, **kw)

    def status(self, i: int) -> dict | None:
        try:
            r = self.get(i, "/v1/quorum/status", timeout=2.0)
        except httpx.HTTPError:
            return None
        return r.json() if r.status_code == 200 else None

    def ready(self, i: int) -> bool:
        try:
            return self.get(i, "/readyz", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def wait(self, predicate, timeout_s: float = 60.0, what: str = "condition"):
        deadline = time.monotonic() + timeout_s
        while True:
            value = predicate()
            if value:
                return value
            for i in range(self.n):
                proc = self.procs[i]
                if proc is not None and proc.poll() not in (None, -9, -15, 0):
                    raise AssertionError(
                        f"voter {i} exited with {proc.returncode}:\n{self.tail(i)}"
                    )
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- voter {i}\n{self.tail(i, 15)}" for i in range(self.n))
                raise AssertionError(f"{what} not reached within {timeout_s} s\n{logs}")
            time.sleep(0.05)

    def takes_writes(self, i: int) -> bool:
        """Ready, and a write sent to it now is taken or redirected: it has
        applied the active controller's LEADER_CHANGE, so it knows its URL. A
        voter that knows a new Raft leader but not yet that record, nor the
        URL of an earlier one of that leader, is ready (caught up within a few
        entries) and answers writes 503 NOT_CONTROLLER with Retry-After, as a
        broker expects during an election. With auth on
        and no token here, /readyz is all it can see."""
        if not self.ready(i):
            return False
        try:
            r = self.get(i, "/v1/quorum/status", timeout=2.0)
        except httpx.HTTPError:
            return False
        if r.status_code in (401, 403):
            return True
        return r.status_code == 200 and bool(r.json().get("leaderUrl"))

    def wait_ready(self, voters: list[int] | None = None, timeout_s: float = 60.0) -> None:
        voters = list(range(self.n)) if voters is None else voters
        self.wait(
            lambda: all(self.takes_writes(i) for i in voters),
            timeout_s,
            f"voters {voters} ready and naming the active controller's URL",
        )

    def leader(self, among: list[int] | None = None, timeout_s: float = 60.0) -> int:
        """The voter that is the active controller (asked of the voters themselves)."""
        among = list(range(self.n)) if among is None else among

        def find():
            for i in among:
                if not self.alive(i):
                    continue
                s = self.status(i)
                if s and s.get("leaderId") == i and s.get("active"):
                    # Active: its own LEADER_CHANGE is applied and it says so (the
                    # image's controllerEpoch may still be an earlier leader's).
                    return i + 1
            return None

        return self.wait(find, timeout_s, "an active controller") - 1
