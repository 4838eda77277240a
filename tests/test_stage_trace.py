"""The stage trace (quorum/stage_trace.py): off without its environment
variable, and on, every mark reaches its file on the shared clock."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from quorum import stage_trace

ROOT = Path(__file__).resolve().parent.parent


def test_off_unless_the_environment_names_a_directory():
    assert os.environ.get(stage_trace.ENV) is None
    assert stage_trace.TRACE is None


def test_marks_reach_the_file_in_order_on_the_monotonic_clock(tmp_path):
    """A process started with the variable writes what it marked, each mark
    on the clock the bench reads too."""
    before = time.monotonic_ns()
    code = (
        "from quorum import stage_trace\n"
        "stage_trace.TRACE.mark('append', 7)\n"
        "stage_trace.TRACE.mark('synced', 7)\n"
        "stage_trace.TRACE.mark('route')\n"
        "stage_trace.TRACE.flush()\n"
    )
    env = {**os.environ, stage_trace.ENV: str(tmp_path), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    (path,) = tmp_path.glob("stages-*.tsv")
    events = stage_trace.read(str(path))
    assert [(stage, idx) for _, stage, idx in events] == [
        ("append", 7),
        ("synced", 7),
        ("route", -1),
    ]
    times = [t for t, _, _ in events]
    assert before <= times[0] <= times[1] <= times[2] <= time.monotonic_ns()
