"""The nemesis: one fault at a time, drawn from a seed, each healed after a few
seconds, with a quiet gap between faults so the cluster makes progress.

Kinds:

* ``kill``: SIGKILL a voter (the leader half the time), restart it on the same
  data dir after the hold.
* ``kill-all``: SIGKILL every voter at once, restart them all (with --fsync
  always an acknowledged write is on a majority's disk: none may be lost).
* ``restart``: SIGTERM (a clean stop hands leadership over), start again.
* ``pause``: SIGSTOP a voter (the leader half the time), SIGCONT after the hold.
* ``isolate-leader``: the leader cut from both other voters (the workload still
  reaches it: a deposed leader keeps answering clients).
* ``isolate-follower``: a majority/minority partition with a follower alone.
* ``bridge``: two voters cut from each other, the third sees both.
* ``offline``: a voter's bridge port down (cut from the workload too).
* ``loss``: 10-30 % of every voter's packets dropped.
* ``delay``/``slow-link``: every voter's packets delayed (netem) or rate-limited
  (tbf, where the kernel has no netem).
* ``disk-loss``: SIGKILL a voter (the leader half the time), delete its whole
  data dir (a replaced PVC) and, after the hold, start it again with the same
  command line (``--cluster-id`` included). It comes back as an observer and
  must be named a voter again by the leader once caught up (decisions.md 37).
  Three voters survive one voter without a caught-up disk, not two: a disk
  loss is drawn only once the last wiped voter says ``role: voter`` again
  (until then the other kinds are drawn); one not
  re-admitted within ``READMIT_TIMEOUT_S`` of its restart is a finding. A
  voter that exits on its own (code 3: its applied log diverged) is recorded
  by the cluster (``NetnsCluster.exits``), never hidden by the restart that
  heals it, and the checker reports it.

Kinds are drawn with ``WEIGHTS`` (disk loss three times as often as the
others: about one fault in five). The schedule is a function of the seed and
of who leads when a fault starts.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import asdict, dataclass

from .voters import NetnsCluster

KINDS = (
    "kill",
    "kill-all",
    "restart",
    "pause",
    "isolate-leader",
    "isolate-follower",
    "bridge",
    "offline",
    "loss",
    "delay",
    "disk-loss",
)
WEIGHTS = {kind: 1.0 for kind in KINDS} | {"disk-loss": 3.0}
# From a wiped voter's restart to its role "voter"; past it the run reports it.
# Generous: it includes faults drawn meanwhile (a partition, a kill-all) that
# hold the catch-up up, on two loaded cores.
READMIT_TIMEOUT_S = 180.0


@dataclass
class Fault:
    kind: str
    target: str
    start: float  # seconds since the workload began
    end: float = 0.0
    leader_before: int | None = None
    readmitted: float | None = None  # disk-loss: when it said role "voter" again

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Wiped:
    """A voter whose disk was replaced, until it is a voter again."""

    voter: int
    fault: Fault
    restarted: float = 0.0  # monotonic; 0 while it is still down


class Nemesis:
    def __init__(
        self,
        cluster: NetnsCluster,
        seed: int,
        t0: float,
        interval_s: tuple[float, float] = (10.0, 20.0),
        hold_s: tuple[float, float] = (3.0, 8.0),
        progress=print,
        kinds: tuple[str, ...] = KINDS,
        first: str | None = None,
    ) -> None:
        """``first``: the kind of the first fault (then drawn by weight), so a
        short run is sure to hold one of it."""
        unknown = [k for k in (*kinds, *([first] if first else [])) if k not in KINDS]
        if unknown or not kinds:
            raise ValueError(f"fault kinds {unknown or kinds}: choose among {', '.join(KINDS)}")
        self.kinds = tuple(kinds)
        self.cluster = cluster
        self.net = cluster.net
        self.rng = random.Random(seed)
        self.t0 = t0
        self.interval_s = interval_s
        self.hold_s = hold_s
        self.first = first
        self.faults: list[Fault] = []
        self.findings: list[str] = []  # what the checker must report (re-admission)
        self.wiped: Wiped | None = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self.progress = progress

    def now(self) -> float:
        return time.monotonic() - self.t0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stops injecting, heals everything and brings every voter back."""
        self._stop.set()
        self._thread.join(timeout=120)
        self.heal_all()
        if self.error is not None:
            raise self.error

    def heal_all(self) -> None:
        self.net.heal()
        for i in range(self.cluster.n):
            self.cluster.resume(i)
            if not self.cluster.alive(i):
                self.cluster.start(i)

    # ------------------------------------------------------------ the loop

    def _run(self) -> None:
        try:
            while self._idle(self.rng.uniform(*self.interval_s)):
                self.inject(self.draw())
        except BaseException as e:  # reported by stop(), in the test's thread
            self.error = e

    def draw(self) -> str:
        """The next kind, by ``WEIGHTS``; no disk loss while a wiped voter
        waits for re-admission (another kind is drawn instead)."""
        if self.first is not None:
            kind, self.first = self.first, None
            return kind
        kinds = self.kinds
        if not self.poll_readmission():
            kinds = tuple(k for k in kinds if k != "disk-loss") or ("kill",)
        return self.rng.choices(kinds, [WEIGHTS[k] for k in kinds])[0]

    def _idle(self, seconds: float) -> bool:
        """Waits ``seconds``, watching the wiped voter's role; False when stopping."""
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            if self._stop.wait(min(left, 0.5)):
                return False
            self.poll_readmission()
        return not self._stop.is_set()

    def poll_readmission(self) -> bool:
        """True when no wiped voter waits for re-admission (notes when one came)."""
        w = self.wiped
        if w is None:
            return True
        if not w.restarted:
            return False
        role = self.cluster.role(w.voter)
        if role == "voter":
            w.fault.readmitted = self.now()
            self.progress(
                f"[{self.now():6.1f}s] voter {w.voter} re-admitted as a voter "
                f"{time.monotonic() - w.restarted:.1f} s after its restart on an empty disk"
            )
            self.wiped = None
            return True
        if time.monotonic() - w.restarted > READMIT_TIMEOUT_S:
            self.findings.append(
                f"voter {w.voter} (disk lost at {w.fault.start:.1f}s) not re-admitted within "
                f"{READMIT_TIMEOUT_S:.0f} s of its restart (role {role!r})"
            )
            self.progress(f"[{self.now():6.1f}s] FINDING: {self.findings[-1]}")
            # Another disk loss could now wipe the only other copy: none more this run.
            self.kinds = tuple(k for k in self.kinds if k != "disk-loss") or ("kill",)
            self.wiped = None
        return False

    def await_readmission(self, timeout_s: float) -> bool:
        """After ``stop``: waits for the last wiped voter to be a voter again."""
        deadline = time.monotonic() + timeout_s
        while self.wiped is not None and time.monotonic() < deadline:
            if self.poll_readmission():
                return True
            time.sleep(0.5)
        return self.wiped is None

    def _pick(self, leader: int | None, prefer_leader: bool = True) -> int:
        if leader is not None and prefer_leader and self.rng.random() < 0.5:
            return leader
        return self.rng.randrange(self.cluster.n)

    def inject(self, kind: str) -> Fault:
        c, net = self.cluster, self.net
        leader = c.leader()
        hold = self.rng.uniform(*self.hold_s)
        others = lambda i: [j for j in range(c.n) if j != i]  # noqa: E731
        fault = Fault(kind, "", self.now(), leader_before=leader)
        if kind == "kill":
            i = self._pick(leader)
            fault.target = f"voter {i}"
            c.kill(i)
            heal = lambda: c.start(i)  # noqa: E731
        elif kind == "disk-loss":
            i = self._pick(leader)
            fault.target = f"voter {i}"
            c.kill(i)
            c.wipe(i)
            wiped = self.wiped = Wiped(i, fault)

            def heal() -> None:
                c.start(i)
                wiped.restarted = time.monotonic()

        elif kind == "kill-all":
            fault.target = "every voter"
            for i in range(c.n):
                c.kill(i)
            heal = c.start
        elif kind == "restart":
            i = self._pick(leader)
            fault.target = f"voter {i}"
            c.stop(i)
            heal = lambda: c.start(i)  # noqa: E731
        elif kind == "pause":
            i = self._pick(leader)
            fault.target = f"voter {i}"
            c.pause(i)
            heal = lambda: c.resume(i)  # noqa: E731
        elif kind == "isolate-leader":
            i = leader if leader is not None else self.rng.randrange(c.n)
            fault.target = f"voter {i} | {others(i)}"
            net.partition([i], others(i))
            heal = net.heal
        elif kind == "isolate-follower":
            i = self.rng.choice([j for j in range(c.n) if j != leader])
            fault.target = f"voter {i} | {others(i)}"
            net.partition([i], others(i))
            heal = net.heal
        elif kind == "bridge":
            middle = self.rng.randrange(c.n)
            a, b = others(middle)
            fault.target = f"{a} x {b}, {middle} sees both"
            net.cut(a, b)
            heal = net.heal
        elif kind == "offline":
            i = self._pick(leader)
            fault.target = f"voter {i}"
            net.offline(i)
            heal = net.heal
        elif kind == "loss":
            fraction = self.rng.uniform(0.1, 0.3)
            fault.target = f"all voters, {fraction:.0%}"
            for i in range(c.n):
                net.loss(i, fraction)
            heal = net.heal
        elif kind == "delay":
            ms = self.rng.randrange(50, 200)
            for i in range(c.n):
                fault.kind = net.delay(i, ms, ms // 4)
            fault.target = f"all voters, {ms} ms" if fault.kind == "delay" else "all voters"
            heal = net.heal
        else:
            raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(KINDS)}")
        self.faults.append(fault)
        self.progress(
            f"[{fault.start:6.1f}s] fault {fault.kind} on {fault.target} "
            f"(leader was {leader}), healing in {hold:.1f}s"
        )
        self._stop.wait(hold)
        heal()
        fault.end = self.now()
        return fault
