"""The nemesis suite: three voters in their own network namespaces, a broker
workload, one fault at a time for 5 minutes (METAQUORUM_NEMESIS_DURATION=90s,
30m, ... to change it, METAQUORUM_NEMESIS_SEED to replay a schedule;
``python -m tests.faults --duration 30m`` for a long run), then every check of
checker.py. The report goes to the terminal
(also in CI) and to report.txt beside the voters' logs."""

from __future__ import annotations

import os
import random

import pytest

from .netns import netns_unavailable_reason
from .run import SETTLE_TIMEOUT_S, parse_duration, run_nemesis

_why = netns_unavailable_reason()
DURATION_S = parse_duration(os.environ.get("METAQUORUM_NEMESIS_DURATION", "5m"))


@pytest.mark.slow
@pytest.mark.skipif(_why is not None, reason=_why or "")
@pytest.mark.timeout(DURATION_S + SETTLE_TIMEOUT_S + 600)
def test_no_acknowledged_write_is_lost_under_faults(tmp_path, request):
    seed = int(os.environ.get("METAQUORUM_NEMESIS_SEED") or random.randrange(2**31))
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")

    def say(message: str) -> None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"nemesis: {message}")

    say(f"seed {seed} (rerun: METAQUORUM_NEMESIS_SEED={seed}), data in {tmp_path}")
    report = run_nemesis(tmp_path, DURATION_S, seed, progress=say)
    text = report.format()
    (tmp_path / "report.txt").write_text(text + "\n")
    for line in text.splitlines():
        say(line)
    assert report.result.ok, (
        f"the nemesis found violations (seed {seed}; voter logs, history.jsonl, log.jsonl "
        f"and faults.json in {tmp_path}):\n{text}"
    )
    assert report.lost == 0
    assert report.acknowledged > 0 and report.faults, "the run made no progress or no faults"
