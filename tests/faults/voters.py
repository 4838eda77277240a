"""Real ``metaquorum serve`` voters, one per network namespace, with --fsync always
(the suite tests the durability claim). Every port is the same in every
namespace: each namespace has its own port space.

A *slot* is a namespace (its address, log file and data dir); the voters
are the slots in ``members``, the others are spare for the nemesis's
membership changes: a node started in a spare slot under a fresh node id
(``node_ids[slot]``) is a joiner until add-voter names it. Every start
passes the voter set as the nemesis last saw it committed as ``--voters``
(as an operator would update the command line after a change), and
``--raft-address`` to a node it does not name.

``ip netns exec`` execs the command, so the Popen pid is the serve process
itself: SIGSTOP/SIGKILL reach the voter, not a wrapper (``serve_pid`` checks).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from .netns import Network

HTTP_PORT = 7070
RAFT_PORT = 7071
SECRET = "nemesis-raft-secret-0123456789abcdef"
# Exit codes the suite's own signals and clean stops give; anything else is the
# voter's own doing (3: it refused to serve, e.g. its applied log diverged).
OURS = (0, -signal.SIGKILL, -signal.SIGTERM)


@dataclass
class Exit:
    """A voter process that ended on its own (seen when it was next reaped)."""

    voter: int
    code: int
    seen: float  # time.monotonic() when it was noticed
    tail: str

    def to_json(self) -> dict:
        return asdict(self)


class NetnsCluster:
    # Compaction well below the default so voters snapshot, compact and restart
    # from snapshots several times within a run.
    def __init__(
        self,
        net: Network,
        root: Path,
        compaction_entries: int = 500,
        voters: int | None = None,
        extra: list[str] | None = None,
    ) -> None:
        """``voters``: how many slots start as the bootstrap voters (default all);
        ``extra``: more ``serve`` arguments for every voter (e.g. --no-pre-vote)."""
        self.net = net
        self.n = net.n
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.members: list[int] = list(range(self.n if voters is None else voters))
        self.node_ids: list[int] = list(range(self.n))  # the node id each slot runs
        self.next_id = self.n  # a fresh node id for a joiner
        self.cluster_id = "nemesis-cluster"
        self.secret_file = self.root / "raft-secret"
        self.secret_file.write_text(SECRET)
        self.compaction_entries = compaction_entries
        self.extra = list(extra or [])
        self.procs: list[subprocess.Popen | None] = [None] * self.n
        self.exits: list[Exit] = []  # every exit not caused by the suite, in order
        self._noted: set[int] = set()  # ids of the Popen objects already looked at
        self.logs = [self.root / f"voter-{i}.log" for i in range(self.n)]
        self.http = httpx.Client(timeout=3.0, trust_env=False)

    def url(self, i: int) -> str:
        return f"http://{self.net.ips[i]}:{HTTP_PORT}"

    @property
    def urls(self) -> list[str]:
        return [self.url(i) for i in range(self.n)]

    def data_dir(self, i: int) -> Path:
        return self.root / f"voter-{i}"

    def raft_address(self, i: int) -> str:
        return f"{self.net.ips[i]}:{RAFT_PORT}"

    @property
    def voters(self) -> str:
        """``--voters``: the members, as the nemesis last saw the voter set."""
        return ",".join(f"{self.node_ids[s]}@{self.raft_address(s)}" for s in self.members)

    def slot_of(self, node_id: int | None) -> int | None:
        for s, nid in enumerate(self.node_ids):
            if nid == node_id:
                return s
        return None

    def spare(self) -> list[int]:
        """Slots with no member (their node stopped)."""
        return [s for s in range(self.n) if s not in self.members]

    def args(self, i: int) -> list[str]:
        joiner = i not in self.members
        return [
            *self.net.exec_prefix(i),
            sys.executable, "-m", "metaquorum.cli", "serve",
            "--node-id", str(self.node_ids[i]),
            "--voters", self.voters,
            *(["--raft-address", self.raft_address(i)] if joiner else []),
            "--http-host", "0.0.0.0",
            "--http-port", str(HTTP_PORT),
            "--advertised-url", self.url(i),
            "--data-dir", str(self.data_dir(i)),
            "--cluster-id", self.cluster_id,
            "--raft-secret-file", str(self.secret_file),
            "--fsync", "always",
            "--compaction-entries", str(self.compaction_entries),
            *self.extra,
        ]  # fmt: skip

    # ------------------------------------------------------------ processes

    def start(self, i: int | None = None) -> NetnsCluster:
        """Starts slot ``i`` (default: every member)."""
        for j in self.members if i is None else [i]:
            if self.alive(j):
                continue
            self.note_exit(j)
            with open(self.logs[j], "ab") as log:
                log.write(
                    f"\n=== start node {self.node_ids[j]} at {time.strftime('%H:%M:%S')}\n".encode()
                )
                log.flush()
                self.procs[j] = subprocess.Popen(self.args(j), stdout=log, stderr=subprocess.STDOUT)
        return self

    def serve_pid(self, i: int) -> int:
        """The pid of the serve process (the Popen pid, as ip netns exec execs)."""
        proc = self.procs[i]
        assert proc is not None
        return proc.pid

    def alive(self, i: int) -> bool:
        proc = self.procs[i]
        return proc is not None and proc.poll() is None

    def pause(self, i: int) -> None:
        if self.alive(i):
            self.procs[i].send_signal(signal.SIGSTOP)

    def resume(self, i: int) -> None:
        if self.alive(i):
            self.procs[i].send_signal(signal.SIGCONT)

    def note_exit(self, i: int) -> Exit | None:
        """Records voter ``i``'s exit if it ended on its own; call before a
        restart replaces its process (so a restart never hides a crash)."""
        proc = self.procs[i]
        if proc is None or proc.poll() is None or id(proc) in self._noted:
            return None
        self._noted.add(id(proc))
        if proc.returncode in OURS:
            return None
        seen = Exit(i, proc.returncode, time.monotonic(), self.tail(i, 30))
        self.exits.append(seen)
        return seen

    def fresh_node(self, slot: int, node_id: int | None = None) -> int:
        """Slot ``slot`` (spare, stopped) gets an empty data dir and node id
        ``node_id`` (default: one never used); returns the id."""
        assert slot not in self.members and not self.alive(slot), f"slot {slot} is in use"
        if node_id is None:
            node_id, self.next_id = self.next_id, self.next_id + 1
        self.node_ids[slot] = node_id
        self.wipe(slot)
        return node_id

    def wipe(self, i: int) -> None:
        """Voter ``i``'s whole data dir deleted, as a replaced PVC (it must be down)."""
        assert not self.alive(i), f"voter {i} is running: stop it before wiping its disk"
        shutil.rmtree(self.data_dir(i), ignore_errors=True)

    def role(self, i: int) -> str | None:
        """Its role as it says (voter, observer, ...); None when it does not answer."""
        s = self.status(i, timeout=2.0)
        return None if s is None else s.get("role")

    def kill(self, i: int) -> None:
        self.note_exit(i)
        proc = self.procs[i]
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait(timeout=30)

    def stop(self, i: int, timeout_s: float = 30.0) -> int | None:
        """SIGTERM (the voter hands leadership over first); SIGKILL past ``timeout_s``."""
        self.note_exit(i)
        proc = self.procs[i]
        if proc is None or proc.poll() is not None:
            return None if proc is None else proc.returncode
        proc.send_signal(signal.SIGCONT)
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
            return None

    def close(self) -> None:
        for i in range(self.n):
            self.kill(i)  # notes an exit of its own first
        self.http.close()

    def tail(self, i: int, lines: int = 20) -> str:
        try:
            return "\n".join(self.logs[i].read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def crashed(self) -> list[int]:
        """Voters that exited on their own (not by our signals)."""
        return [
            i for i, p in enumerate(self.procs) if p is not None and p.poll() not in (None, *OURS)
        ]

    # ------------------------------------------------------------ HTTP

    def status(self, i: int, digest: bool = False, timeout: float = 2.0) -> dict | None:
        try:
            r = self.http.get(
                self.url(i) + "/v1/quorum/status",
                params={"digest": "true"} if digest else None,
                timeout=timeout,
            )
        except httpx.HTTPError:
            return None
        return r.json() if r.status_code == 200 else None

    def summary(self, i: int) -> str:
        """What voter ``i`` says of itself, for a failure message."""
        if not self.alive(i):
            return "not running"
        try:
            r = self.http.get(self.url(i) + "/v1/quorum/status", timeout=5.0)
        except httpx.HTTPError as e:
            return f"status failed: {e!r}"
        if r.status_code != 200:
            return f"status answered {r.status_code}: {r.text[:200]}"
        s = r.json()
        keys = ("leaderId", "active", "ready", "raftTerm", "raftCommitIndex", "role")
        return ", ".join(f"{k}={s.get(k)}" for k in keys)

    def ready(self, i: int) -> bool:
        try:
            return self.http.get(self.url(i) + "/readyz", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def leader(self) -> int | None:
        """The slot whose node says it is the active controller, if one does now."""
        found = self.leader_and_term()
        return None if found is None else found[0]

    def leader_and_term(self) -> tuple[int, int] | None:
        """(slot, Raft term) of the node that says it is the active controller."""
        for i in range(self.n):
            if not self.alive(i):
                continue
            s = self.status(i, timeout=1.0)
            if s and s.get("leaderId") == self.node_ids[i] and s.get("active"):
                return i, s.get("raftTerm", 0)
        return None

    def committed_voters(self) -> set[int] | None:
        """The node ids of the voter set as the active controller holds it."""
        i = self.leader()
        s = None if i is None else self.status(i, timeout=2.0)
        if not s:
            return None
        return {v["nodeId"] for v in s.get("voters", []) if v.get("voter", True)}

    def admin(self, path: str, body: dict, timeout: float = 60.0) -> httpx.Response | None:
        """POST to the first member that answers (redirects to the leader
        followed), as the CLI does; None when none answered."""
        order = [*self.members, *(s for s in range(self.n) if s not in self.members)]
        for i in order:
            if not self.alive(i):
                continue
            try:
                return self.http.post(
                    self.url(i) + path, json=body, follow_redirects=True, timeout=timeout
                )
            except httpx.HTTPError:
                continue
        return None

    def wait(self, predicate, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        while True:
            value = predicate()
            if value:
                return value
            crashed = self.crashed()
            if crashed:
                i = crashed[0]
                raise AssertionError(
                    f"voter {i} exited with {self.procs[i].returncode}:\n{self.tail(i)}"
                )
            if time.monotonic() > deadline:
                logs = "\n".join(
                    f"--- voter {i}: {self.summary(i)}\n{self.tail(i, 10)}" for i in range(self.n)
                )
                raise AssertionError(f"{what} not reached within {timeout_s} s\n{logs}")
            time.sleep(0.2)

    def wait_ready(self, timeout_s: float = 90.0) -> None:
        self.wait(lambda: all(self.ready(i) for i in self.members), timeout_s, "all voters ready")
        self.wait(lambda: self.leader() is not None, timeout_s, "an active controller")
