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
* ``isolate-follower``: one follower cut from every other voter for 10-20 s
  (``FOLLOWER_CUT_S``), then healed; the leader and its term are watched
  during the cut and for ``AFTER_S`` after it (pre-vote: they must not move),
  and the report prints the leader changes seen.
* ``flapping-link``: the link between the leader and one follower cut and
  healed every second for 10-30 s (``flap_s``); leader changes watched and
  printed as for ``isolate-follower``.
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

Membership changes (decisions.md 50), each sent to whichever voter answers
(redirects followed) and retried every second as an operator would, on
REQUEST_TIMED_OUT, a 503, a leader change or no answer, until
``MEMBERSHIP_TIMEOUT_S``; one not finished by then is a finding, and the
voter set is then taken from the leader as it is. The voters are the
cluster's ``members`` (3 or 4 of the network's 5 slots):

* ``add-voter`` (3 voters -> 4): a node started empty in a spare slot under a
  node id never used, then add-voter; done when it says ``role: voter``.
* ``remove-voter`` (4 -> 3, never below 3): a voter (the leader half the
  time: leadership is transferred first, as ``remove-voter`` asks), then,
  once it knows it was removed, it is stopped and its data dir deleted.
* ``replace-voter``: with 3 voters, a fresh node under a new id added, then a
  voter removed (3 -> 4 -> 3); with 4, a voter removed, then the same node
  id at the same address added again on an empty data dir (4 -> 3 -> 4).

No membership change starts while a wiped voter waits for re-admission, and
none starts while another runs (the nemesis does one thing at a time).

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
    "flapping-link",
    "add-voter",
    "remove-voter",
    "replace-voter",
)
MEMBERSHIP = ("add-voter", "remove-voter", "replace-voter")
WATCHED = ("isolate-follower", "flapping-link")  # leader changes counted
WEIGHTS = {kind: 1.0 for kind in KINDS} | {"disk-loss": 4.0}
MIN_VOTERS, MAX_VOTERS = 3, 4
# A membership change sent, retried and done (the node a voter, or removed,
# stopped and wiped) within this, or it is a finding.
MEMBERSHIP_TIMEOUT_S = 90.0  # a change takes 1-5 s when nothing is wrong
FOLLOWER_CUT_S = (10.0, 20.0)
AFTER_S = 3.0  # leader changes are watched this long after the heal too
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
    # isolate-follower, flapping-link: (seconds, leader node id, its term) each
    # time the active controller or its term was seen to change, from the start
    leaders: list[tuple[float, int, int]] | None = None
    # membership changes: seconds from the first request to done, None if not done
    took: float | None = None
    voters_after: list[int] | None = None  # node ids
    cut_short: bool = False  # a membership change the end of the run interrupted

    @property
    def leader_changes(self) -> int | None:
        """Changes of (leader, term) seen while watched; None if not watched."""
        return None if self.leaders is None else max(0, len(self.leaders) - 1)

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
        first: str | tuple[str, ...] | None = None,
        flap_s: tuple[float, float] = (10.0, 30.0),
        follower_cut_s: tuple[float, float] = FOLLOWER_CUT_S,
    ) -> None:
        """``first``: the kind (or kinds, in order) of the first faults (then
        drawn by weight), so a short run is sure to hold them; a kind not
        possible yet (a membership change while a wiped voter waits) waits
        for a later draw."""
        self.first = [first] if isinstance(first, str) else list(first or ())
        unknown = [k for k in (*kinds, *self.first) if k not in KINDS]
        if unknown or not kinds:
            raise ValueError(f"fault kinds {unknown or kinds}: choose among {', '.join(KINDS)}")
        self.kinds = tuple(kinds)
        self.cluster = cluster
        self.net = cluster.net
        self.rng = random.Random(seed)
        self.t0 = t0
        self.interval_s = interval_s
        self.hold_s = hold_s
        self.flap_s = flap_s
        self.follower_cut_s = follower_cut_s
        self.faults: list[Fault] = []
        # What the checker must report: a message (a re-admission) or (check, message).
        self.findings: list[str | tuple[str, str]] = []
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
        self._thread.join(timeout=MEMBERSHIP_TIMEOUT_S + 120)
        self.heal_all()
        if self.error is not None:
            raise self.error

    def heal_all(self) -> None:
        self.net.heal()
        for i in self.cluster.members:
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

    def possible(self, kind: str, readmitting: bool) -> bool:
        """Whether ``kind`` may start now: no disk loss nor membership change
        while a wiped voter waits; 3 or 4 voters; a spare slot for a joiner."""
        c = self.cluster
        members = len(c.members)
        if kind == "disk-loss" or kind in MEMBERSHIP:
            if readmitting:
                return False
        if kind == "add-voter":
            return members < MAX_VOTERS and bool(c.spare())
        if kind == "remove-voter":
            return members > MIN_VOTERS
        if kind == "replace-voter":
            return members > MIN_VOTERS or (members < MAX_VOTERS and bool(c.spare()))
        return True

    def draw(self) -> str:
        """The next kind: the first of ``first`` that is possible, else one by
        ``WEIGHTS`` among the possible ones."""
        readmitting = not self.poll_readmission()
        for kind in self.first:
            if self.possible(kind, readmitting):
                self.first.remove(kind)
                return kind
        kinds = tuple(k for k in self.kinds if self.possible(k, readmitting)) or ("kill",)
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
            # Another disk loss could now wipe the only other copy: none more
            # this run, and no membership change either.
            self.kinds = tuple(
                k for k in self.kinds if k != "disk-loss" and k not in MEMBERSHIP
            ) or ("kill",)
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

    def _name(self, slot: int) -> str:
        return f"node {self.cluster.node_ids[slot]} (slot {slot})"

    def _pick(self, leader: int | None, prefer_leader: bool = True) -> int:
        if leader is not None and prefer_leader and self.rng.random() < 0.5:
            return leader
        return self.rng.choice(self.cluster.members)

    # ------------------------------------------------------------ leader watch

    def _watch(self, fault: Fault, seconds: float) -> None:
        """Samples who leads, at which term, for ``seconds`` (about 5 times a
        second); appends to ``fault.leaders`` each time it changed."""
        c = self.cluster
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            seen = c.leader_and_term()
            if seen is not None:
                entry = (round(self.now(), 2), c.node_ids[seen[0]], seen[1])
                if fault.leaders is not None and (
                    not fault.leaders or fault.leaders[-1][1:] != entry[1:]
                ):
                    fault.leaders.append(entry)
            if self._stop.wait(0.2):
                return

    # ------------------------------------------------------------ membership

    def _voters_now(self) -> set[int] | None:
        """The voter set the active controller holds, asked for a few seconds."""
        deadline = time.monotonic() + 10.0
        while True:
            got = self.cluster.committed_voters()
            if got is not None or time.monotonic() > deadline:
                return got
            time.sleep(0.5)

    def _change(self, path: str, body: dict, deadline: float, done) -> tuple[bool, str]:
        """Sends a voter change until it is answered 200 or ``done()`` says the
        voter set shows it, retrying every second as an operator would (a
        REQUEST_TIMED_OUT, a 503, a leader change, no answer); returns (done,
        the last answer)."""
        c = self.cluster
        last = "not sent"
        while time.monotonic() < deadline and not self._stop.is_set():
            r = c.admin(path, body, timeout=45.0)
            if r is not None and r.status_code == 200:
                return True, "200"
            if r is None:
                last = "no voter answered"
            else:
                try:
                    answer = r.json()
                except ValueError:
                    answer = {}
                message = answer.get("errorMessage") or r.text[:200]
                last = f"{r.status_code} {answer.get('errorName')}: {message}"
                if "is the active controller" in message:  # remove: move leadership first
                    c.admin("/v1/quorum/transfer-leadership", {}, timeout=30.0)
            if done():
                return True, last
            self._stop.wait(1.0)
        return done(), last

    def _add(self, fault: Fault, slot: int, node_id: int | None, deadline: float) -> bool:
        c = self.cluster
        nid = c.fresh_node(slot, node_id)
        c.start(slot)
        body = {"nodeId": nid, "address": c.raft_address(slot), "timeoutMs": 30_000}
        ok, last = self._change(
            "/v1/quorum/add-voter", body, deadline, lambda: nid in (c.committed_voters() or ())
        )
        if ok:
            c.members.append(slot)
            while c.role(slot) != "voter" and time.monotonic() < deadline:
                if self._stop.wait(0.5):
                    break
            if c.role(slot) == "voter":
                return True
            last = f"added, but it says role {c.role(slot)!r}"
        self._membership_finding(fault, f"add-voter of node {nid} in slot {slot}", last)
        return False

    def _remove(self, fault: Fault, slot: int, deadline: float) -> bool:
        c = self.cluster
        nid = c.node_ids[slot]

        def gone() -> bool:
            voters = c.committed_voters()
            return voters is not None and nid not in voters

        ok, last = self._change("/v1/quorum/remove-voter", {"nodeId": nid}, deadline, gone)
        if not ok:
            self._membership_finding(fault, f"remove-voter of node {nid} in slot {slot}", last)
            return False
        c.members.remove(slot)
        # It learns it was removed (the leader streams to it for a few seconds
        # at most); then the operator stops it and deletes its data dir.
        until = min(deadline, time.monotonic() + 15.0)
        while time.monotonic() < until and c.role(slot) not in ("removed", None):
            time.sleep(0.5)
        c.stop(slot)
        c.wipe(slot)
        return True

    def _membership_finding(self, fault: Fault, what: str, last: str) -> None:
        if self._stop.is_set():
            fault.cut_short = True
            self.progress(f"[{self.now():6.1f}s] {what} cut short by the end of the run ({last})")
        else:
            self.findings.append(
                (
                    "membership",
                    f"{what} (fault at {fault.start:.1f}s) not done within "
                    f"{MEMBERSHIP_TIMEOUT_S:.0f} s; last answer: {last}",
                )
            )
            self.progress(f"[{self.now():6.1f}s] FINDING: {self.findings[-1][1]}")
        self.reconcile()

    def reconcile(self) -> None:
        """After a change that did not finish: the members are the voter set
        the leader holds; a node it does not name is stopped and wiped."""
        c = self.cluster
        voters = self._voters_now()
        if voters is None:
            self.progress(f"[{self.now():6.1f}s] no leader to ask for the voter set")
            return
        for s in range(c.n):
            named = c.node_ids[s] in voters
            if named and s not in c.members and c.alive(s):
                c.members.append(s)
            elif not named and s not in c.members and c.alive(s):
                c.stop(s)
                c.wipe(s)
            elif not named and s in c.members:
                c.members.remove(s)
                c.stop(s)
                c.wipe(s)

    def membership(self, kind: str, fault: Fault, leader: int | None) -> None:
        """Runs one membership change to its end (or its deadline)."""
        c = self.cluster
        started = time.monotonic()
        deadline = started + MEMBERSHIP_TIMEOUT_S
        ok = False
        if kind == "add-voter":
            slot = self.rng.choice(c.spare())
            fault.target = f"slot {slot} (node {c.next_id})"
            self._announce(fault, leader, "")
            ok = self._add(fault, slot, None, deadline)
        elif kind == "remove-voter":
            slot = self._pick(leader)
            fault.target = f"node {c.node_ids[slot]} (slot {slot})"
            self._announce(fault, leader, "")
            ok = self._remove(fault, slot, deadline)
        elif len(c.members) > MIN_VOTERS:  # replace: 4 -> 3 -> 4, the same id
            slot = self._pick(leader)
            nid = c.node_ids[slot]
            fault.target = f"node {nid} (slot {slot}) by itself on an empty disk"
            self._announce(fault, leader, "")
            ok = self._remove(fault, slot, deadline) and self._add(fault, slot, nid, deadline)
        else:  # replace: 3 -> 4 -> 3, a new id
            old = self._pick(leader)
            slot = self.rng.choice(c.spare())
            fault.target = f"node {c.node_ids[old]} (slot {old}) by node {c.next_id} (slot {slot})"
            self._announce(fault, leader, "")
            ok = self._add(fault, slot, None, deadline) and self._remove(fault, old, deadline)
        fault.took = time.monotonic() - started if ok else None
        fault.voters_after = sorted(c.node_ids[s] for s in c.members)
        self.progress(
            f"[{self.now():6.1f}s] {kind} "
            + (f"done in {fault.took:.1f} s" if ok else "NOT done")
            + f"; voters now {fault.voters_after}"
        )

    # ------------------------------------------------------------ faults

    def _announce(self, fault: Fault, leader: int | None, healing: str) -> None:
        self.faults.append(fault)
        self.progress(
            f"[{fault.start:6.1f}s] fault {fault.kind} on {fault.target} "
            f"(leader was node {fault.leader_before}){healing}"
        )

    def inject(self, kind: str) -> Fault:
        c, net = self.cluster, self.net
        seen = c.leader_and_term()
        leader = None if seen is None else seen[0]
        members = list(c.members)
        hold = self.rng.uniform(*self.hold_s)
        others = lambda i: [j for j in members if j != i]  # noqa: E731
        ids = lambda slots: [c.node_ids[j] for j in slots]  # noqa: E731
        fault = Fault(
            kind, "", self.now(), leader_before=None if leader is None else ids([leader])[0]
        )
        if kind in MEMBERSHIP:
            self.membership(kind, fault, leader)
            fault.end = self.now()
            return fault
        if kind in WATCHED:
            fault.leaders = [] if seen is None else [(fault.start, c.node_ids[leader], seen[1])]
        if kind == "flapping-link":
            i = leader if leader is not None else self.rng.choice(members)
            j = self.rng.choice(others(i))
            seconds = self.rng.uniform(*self.flap_s)
            fault.target = f"link {self._name(i)} x {self._name(j)}, cut and healed every second for {seconds:.0f} s"
            self._announce(fault, leader, "")
            until = time.monotonic() + seconds
            while time.monotonic() < until and not self._stop.is_set():
                net.cut(i, j)
                self._watch(fault, 1.0)
                net.heal_cuts()
                self._watch(fault, 1.0)
            fault.end = self.now()
            self._watch(fault, AFTER_S)
            self._report_watch(fault)
            return fault
        if kind == "kill":
            i = self._pick(leader)
            fault.target = self._name(i)
            c.kill(i)
            heal = lambda: c.start(i)  # noqa: E731
        elif kind == "disk-loss":
            i = self._pick(leader)
            fault.target = self._name(i)
            c.kill(i)
            c.wipe(i)
            wiped = self.wiped = Wiped(i, fault)

            def heal() -> None:
                c.start(i)
                wiped.restarted = time.monotonic()

        elif kind == "kill-all":
            fault.target = "every voter"
            for i in members:
                c.kill(i)
            heal = c.start
        elif kind == "restart":
            i = self._pick(leader)
            fault.target = self._name(i)
            c.stop(i)
            heal = lambda: c.start(i)  # noqa: E731
        elif kind == "pause":
            i = self._pick(leader)
            fault.target = self._name(i)
            c.pause(i)
            heal = lambda: c.resume(i)  # noqa: E731
        elif kind == "isolate-leader":
            i = leader if leader is not None else self.rng.choice(members)
            fault.target = f"{self._name(i)} | nodes {ids(others(i))}"
            net.partition([i], others(i))
            heal = net.heal
        elif kind == "isolate-follower":
            i = self.rng.choice([j for j in members if j != leader])
            hold = self.rng.uniform(*self.follower_cut_s)
            fault.target = f"{self._name(i)} | nodes {ids(others(i))}"
            net.partition([i], others(i))
            heal = net.heal
        elif kind == "bridge":
            middle = self.rng.choice(members)
            a, b = self.rng.sample(others(middle), 2)
            fault.target = f"{self._name(a)} x {self._name(b)}, {self._name(middle)} sees both"
            net.cut(a, b)
            heal = net.heal
        elif kind == "offline":
            i = self._pick(leader)
            fault.target = self._name(i)
            net.offline(i)
            heal = net.heal
        elif kind == "loss":
            fraction = self.rng.uniform(0.1, 0.3)
            fault.target = f"all voters, {fraction:.0%}"
            for i in members:
                net.loss(i, fraction)
            heal = net.heal
        elif kind == "delay":
            ms = self.rng.randrange(50, 200)
            for i in members:
                fault.kind = net.delay(i, ms, ms // 4)
            fault.target = f"all voters, {ms} ms" if fault.kind == "delay" else "all voters"
            heal = net.heal
        else:
            raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(KINDS)}")
        self._announce(fault, leader, f", healing in {hold:.1f}s")
        if fault.leaders is not None:
            self._watch(fault, hold)
        else:
            self._stop.wait(hold)
        heal()
        fault.end = self.now()
        if fault.leaders is not None:
            self._watch(fault, AFTER_S)
            self._report_watch(fault)
        return fault

    def _report_watch(self, fault: Fault) -> None:
        self.progress(
            f"[{self.now():6.1f}s] {fault.kind}: {fault.leader_changes} leader change(s)"
            + (f" {fault.leaders}" if fault.leader_changes else "")
        )
