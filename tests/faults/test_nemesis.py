"""The nemesis suite: three voters in their own network namespaces (five
namespaces: room for joiners), a broker workload, one fault at a time for 3
minutes, the first of them a disk loss (a voter's data dir deleted, as a
replaced PVC), a voter replaced online and a link flapping for 10-15 s
(remove-voter and add-voter; METAQUORUM_NEMESIS_DURATION=90s,
30m, ... to change it, METAQUORUM_NEMESIS_SEED to replay a schedule;
``python -m tests.faults --duration 30m`` for a long run), then every check of
checker.py. The report goes to the terminal
(also in CI) and to report.txt beside the voters' logs."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from .nemesis import MEMBERSHIP, Fault, Nemesis, Wiped
from .netns import netns_unavailable_reason
from .run import SETTLE_TIMEOUT_S, parse_duration, run_nemesis

_why = netns_unavailable_reason()
# 2 minutes in CI: the three forced faults and a few drawn ones (the suite
# has 25 minutes for everything; every CI run draws a new seed, so runs add
# up); `python -m tests.faults --duration 30m` for more.
DURATION_S = parse_duration(os.environ.get("METAQUORUM_NEMESIS_DURATION", "2m"))


@pytest.mark.slow
@pytest.mark.skipif(_why is not None, reason=_why or "")
@pytest.mark.timeout(DURATION_S + SETTLE_TIMEOUT_S + 600)
def test_no_acknowledged_write_is_lost_under_faults(request):
    seed = int(os.environ.get("METAQUORUM_NEMESIS_SEED") or random.randrange(2**31))
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")

    def say(message: str) -> None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"nemesis: {message}")

    # Not pytest's tmp_path: it keeps only the last few runs, and a failed run's
    # evidence must outlive other engineers' test runs. Removed when all passes.
    root = Path(tempfile.mkdtemp(prefix=f"metaquorum-nemesis-{seed}-"))
    say(f"seed {seed} (rerun: METAQUORUM_NEMESIS_SEED={seed}), data in {root}")
    report = run_nemesis(
        root,
        DURATION_S,
        seed,
        progress=say,
        first=("disk-loss", "replace-voter", "flapping-link"),
        flap_s=(10.0, 15.0),
    )
    text = report.format()
    (root / "report.txt").write_text(text + "\n")
    for line in text.splitlines():
        say(line)
    assert report.result.ok, (
        f"the nemesis found violations (seed {seed}; voter logs, history.jsonl, log.jsonl "
        f"and faults.json kept in {root}):\n{text}"
    )
    assert report.lost == 0
    assert report.acknowledged > 0 and report.faults, "the run made no progress or no faults"
    assert report.result.divergent == 0
    wiped = [f for f in report.faults if f.kind == "disk-loss"]
    assert wiped and all(f.readmitted for f in wiped), "a wiped voter was not re-admitted"
    # A change the end of the run interrupted proves nothing either way (the
    # settled voters are checked above); every other one must have finished.
    changes = [f for f in report.faults if f.kind in MEMBERSHIP and not f.cut_short]
    assert changes and all(f.took is not None for f in changes), "a voter change not done"
    assert any(f.kind == "flapping-link" for f in report.faults)
    shutil.rmtree(root, ignore_errors=True)


class _Roles:
    """Just what Nemesis.draw asks of a cluster: its role answers, its
    members and spare slots."""

    net = None
    n = 5

    def __init__(self) -> None:
        self.roles = {0: "voter", 1: "voter", 2: "voter"}
        self.members = [0, 1, 2]

    def role(self, i: int) -> str | None:
        return self.roles[i]

    def spare(self) -> list[int]:
        return [s for s in range(self.n) if s not in self.members]


def test_no_disk_loss_is_drawn_until_the_wiped_voter_is_a_voter_again():
    cluster = _Roles()
    nemesis = Nemesis(cluster, seed=3, t0=0.0, progress=lambda m: None, kinds=("disk-loss", "kill"))
    fault = Fault("disk-loss", "voter 1", 1.0)
    nemesis.wiped = Wiped(1, fault)  # down: not restarted yet
    assert {nemesis.draw() for _ in range(200)} == {"kill"}
    nemesis.wiped.restarted = time.monotonic()
    cluster.roles[1] = "observer"
    assert {nemesis.draw() for _ in range(200)} == {"kill"}
    cluster.roles[1] = "voter"
    assert "disk-loss" in {nemesis.draw() for _ in range(200)}
    assert nemesis.wiped is None and fault.readmitted is not None and not nemesis.findings


def test_a_wiped_voter_not_readmitted_in_time_is_a_finding_and_ends_disk_losses():
    cluster = _Roles()
    nemesis = Nemesis(cluster, seed=3, t0=0.0, progress=lambda m: None)
    cluster.roles[2] = "observer"
    nemesis.wiped = Wiped(2, Fault("disk-loss", "voter 2", 1.0), time.monotonic() - 1000)
    drawn = {nemesis.draw() for _ in range(300)}
    assert "disk-loss" not in drawn and not drawn & set(MEMBERSHIP)
    assert len(nemesis.findings) == 1 and "voter 2" in nemesis.findings[0]
    assert "disk-loss" not in nemesis.kinds


def test_disk_loss_is_about_one_fault_in_five_and_first_can_force_it():
    nemesis = Nemesis(_Roles(), seed=5, t0=0.0, progress=lambda m: None, first="disk-loss")
    draws = [nemesis.draw() for _ in range(2000)]
    assert draws[0] == "disk-loss"
    share = draws.count("disk-loss") / len(draws)
    assert 0.17 < share < 0.29, share  # 4 / 17 (remove-voter is not possible with 3 voters)


def test_membership_changes_keep_three_or_four_voters_and_wait_for_a_readmission():
    cluster = _Roles()
    nemesis = Nemesis(cluster, seed=7, t0=0.0, progress=lambda m: None)
    drawn = {nemesis.draw() for _ in range(500)}
    assert {"add-voter", "replace-voter"} <= drawn and "remove-voter" not in drawn
    cluster.members = [0, 1, 2, 3]
    drawn = {nemesis.draw() for _ in range(500)}
    assert {"remove-voter", "replace-voter"} <= drawn and "add-voter" not in drawn
    cluster.roles[3] = "observer"
    nemesis.wiped = Wiped(3, Fault("disk-loss", "voter 3", 1.0), time.monotonic())
    drawn = {nemesis.draw() for _ in range(500)}
    assert not drawn & {*MEMBERSHIP, "disk-loss"}, drawn


def test_forced_first_kinds_wait_until_they_are_possible():
    cluster = _Roles()
    first = ("disk-loss", "replace-voter", "flapping-link")
    nemesis = Nemesis(cluster, seed=9, t0=0.0, progress=lambda m: None, first=first)
    assert nemesis.draw() == "disk-loss"
    cluster.roles[1] = "observer"
    nemesis.wiped = Wiped(1, Fault("disk-loss", "voter 1", 1.0), time.monotonic())
    assert nemesis.draw() == "flapping-link"  # the replace waits for the re-admission
    assert nemesis.draw() not in MEMBERSHIP
    cluster.roles[1] = "voter"
    assert nemesis.draw() == "replace-voter"
    assert nemesis.first == []
