"""The nemesis suite: three voters in their own network namespaces, a broker
workload, one fault at a time for 5 minutes (METAQUORUM_NEMESIS_DURATION=90s,
30m, ... to change it, METAQUORUM_NEMESIS_SEED to replay a schedule;
``python -m tests.faults --duration 30m`` for a long run), then every check of
checker.py. The report goes to the terminal
(also in CI) and to report.txt beside the voters' logs."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest

from .netns import netns_unavailable_reason
from .run import SETTLE_TIMEOUT_S, parse_duration, run_nemesis

_why = netns_unavailable_reason()
DURATION_S = parse_duration(os.environ.get("METAQUORUM_NEMESIS_DURATION", "5m"))


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
    report = run_nemesis(root, DURATION_S, seed, progress=say)
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
    shutil.rmtree(root, ignore_errors=True)
