"""``metaquorum serve`` started where it must not run: a live voter's node id,
a compacted journal whose snapshot was deleted, a read-only data dir, a data
dir owned by someone else. Each ends at once with the promised exit code (2
configuration, 3 refused state) and one line naming the port or the path,
never a traceback, a silent retry or a silent hang."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quorum.journal_format import first_entry_index

from ..cluster import Cluster
from ..conftest import running_cluster
from ..local_node import registration_body
from ..nodes import free_port

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 60


def serve(args: list[str], prefix: list[str] | None = None) -> subprocess.CompletedProcess:
    """Runs ``serve`` to its end (bounded): it must exit on its own."""
    return subprocess.run(
        [*(prefix or []), *args], capture_output=True, text=True, timeout=START_TIMEOUT_S
    )


def one_line_error(done: subprocess.CompletedProcess) -> str:
    """The single line the refusal printed to stderr (log lines before it aside)."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("metaquorum serve:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def as_another_node(c: Cluster, i: int, data_dir: Path) -> list[str]:
    """Voter ``i``'s command line with its own empty data dir and HTTP port."""
    args = c.args(i)
    args[args.index("--data-dir") + 1] = str(data_dir)
    args[args.index("--http-port") + 1] = str(free_port())
    return args


def test_a_second_process_with_a_live_voters_id_is_refused_naming_the_port(tmp_path):
    (tmp_path / "cluster").mkdir()
    with running_cluster(tmp_path / "cluster", voters=1) as c:
        before = c.status(0)
        impostor_dir = tmp_path / "impostor"
        done = serve(as_another_node(c, 0, impostor_dir))
        assert done.returncode == 2, done.stderr
        line = one_line_error(done)
        assert f":{c.raft[0]} of node 0" in line, line
        pid = c.procs[0].pid
        assert f"another metaquorum serve (pid {pid}, --node-id 0)" in line, line
        assert not impostor_dir.exists() or not any(impostor_dir.iterdir())
        # The live voter never noticed.
        assert c.ready(0)
        assert c.status(0)["controllerEpoch"] == before["controllerEpoch"]


def test_a_second_process_on_a_live_voters_data_dir_is_refused(tmp_path):
    """An operator's slip: the same data dir, with the voter given another
    Raft port (so the port check passes). Both would write one journal."""
    (tmp_path / "cluster").mkdir()
    with running_cluster(tmp_path / "cluster", voters=1) as c:
        args = c.args(0)
        args[args.index("--voters") + 1] = f"0@127.0.0.1:{free_port()}"
        args[args.index("--http-port") + 1] = str(free_port())
        journal = c.data_dir(0) / "raft.journal"
        size = journal.stat().st_size
        done = serve(args)
        assert done.returncode == 2, done.stderr
        line = one_line_error(done)
        pid = c.procs[0].pid
        assert (
            f"--data-dir {c.data_dir(0)} is in use by another metaquorum serve (pid {pid}, --node-id 0)"
            in line
        ), line
        assert c.ready(0) and journal.stat().st_size == size


def test_a_port_held_by_another_program_is_named_too(tmp_path):
    c = Cluster(tmp_path, voters=1)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import socket,sys,time\n"
         f"s=socket.socket(); s.bind(('127.0.0.1', {c.raft[0]})); s.listen(1)\n"
         "print('listening', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "listening"
        done = serve(c.args(0))
        assert done.returncode == 2, done.stderr
        line = one_line_error(done)
        assert f":{c.raft[0]} of node 0" in line and f"another process (pid {holder.pid}:" in line
        assert "\n" not in line
    finally:
        holder.kill()
        holder.wait(timeout=10)
        c.close()


def test_a_restart_whose_http_port_is_still_held_is_exit_2_naming_the_port(tmp_path):
    """Issue 18: a voter restarted while its predecessor still held its HTTP
    port exited 3 ("corrupt snapshot or journal"). A port in use is a
    configuration problem: exit 2, the port and its holder named, nothing
    written to the new data dir."""
    (tmp_path / "cluster").mkdir()
    with running_cluster(tmp_path / "cluster", voters=1) as c:
        args = c.args(0)
        args[args.index("--voters") + 1] = f"0@127.0.0.1:{free_port()}"
        args[args.index("--data-dir") + 1] = str(tmp_path / "second")
        done = serve(args)  # the same --http-port as the live voter
        assert done.returncode == 2, done.stderr
        line = one_line_error(done)
        pid = c.procs[0].pid
        assert f"the HTTP port 127.0.0.1:{c.http[0]} (--http-port, --http-host)" in line, line
        assert f"another metaquorum serve (pid {pid}, --node-id 0)" in line, line
        assert not (tmp_path / "second").exists() or not any((tmp_path / "second").iterdir())
        assert c.ready(0)


def register_and_heartbeat(c: Cluster, writes: int) -> None:
    r = c.post(0, "/v1/brokers/register", registration_body(c.cluster_id, 1))
    assert r.status_code == 200, r.text
    epoch = r.json()["brokerEpoch"]
    for n in range(writes):
        body = {
            "brokerId": 1,
            "brokerEpoch": epoch,
            "currentMetadataOffset": 10**9,
            "wantFence": n % 2 == 0,
        }
        r = c.post(0, "/v1/brokers/heartbeat", body)
        assert r.status_code == 200, r.text


def refused_at_restart(c: Cluster) -> str:
    """Starts voter 0 again; it must stop with exit 3 and no traceback. Its log's tail."""
    c.start(0)
    code = c.procs[0].wait(timeout=START_TIMEOUT_S)
    log = c.tail(0, 20)
    assert code == 3, log
    assert "Traceback" not in log, log
    return log


def journal_first_index(journal: Path) -> int | None:
    data = journal.read_bytes()
    return first_entry_index(lambda offset, n: data[offset : offset + n], len(data))


def test_a_deleted_snapshot_behind_a_compacted_journal_is_refused_with_exit_3(tmp_path):
    c = Cluster(tmp_path, voters=1, extra=["--compaction-entries", "30"])
    try:
        c.start()
        c.wait_ready()
        c.leader()
        register_and_heartbeat(c, 80)
        journal, snapshot = c.data_dir(0) / "raft.journal", c.data_dir(0) / "raft.snapshot"
        c.wait(
            lambda: snapshot.exists() and (journal_first_index(journal) or 0) > 1,
            60,
            "a snapshot written and the journal compacted behind it",
        )
        assert c.stop(0) == 0
        first = journal_first_index(journal)
        assert first is not None and first > 1
        snapshot.unlink()

        log = refused_at_restart(c)
        assert f"Raft journal {journal} starts at Raft index {first}" in log, log
        assert f"the snapshot {snapshot} is missing" in log, log
        assert "move the data dir aside" in log, log
    finally:
        c.close()


def test_a_deleted_journal_is_refused_rather_than_served_without_its_entries(tmp_path):
    """pysyncobj would clamp its commit index to the snapshot and serve: a lone
    voter would lose every acknowledged write after the snapshot."""
    c = Cluster(tmp_path, voters=1, extra=["--compaction-entries", "30"])
    try:
        c.start()
        c.wait_ready()
        c.leader()
        register_and_heartbeat(c, 80)
        journal, snapshot = c.data_dir(0) / "raft.journal", c.data_dir(0) / "raft.snapshot"
        c.wait(lambda: snapshot.exists(), 60, "a snapshot written")
        register_and_heartbeat(c, 5)  # acknowledged after the snapshot
        assert c.stop(0) == 0
        journal.unlink()

        log = refused_at_restart(c)
        assert f"Raft journal {journal} is missing, but {journal}.meta says Raft index" in log, log
        assert "move the data dir aside" in log, log
    finally:
        c.close()


def _private_read_only_mount(path: Path) -> list[str] | None:
    """A command prefix that runs its command with ``path`` read-only in a
    mount namespace of its own (nothing outside sees it), or None if this
    machine cannot make one."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return None
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && shift && exec "$@"'
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(path), "_"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30)
    return prefix if probe.returncode == 0 else None


def test_a_read_only_data_dir_is_exit_2_naming_the_path(tmp_path):
    c = Cluster(tmp_path, voters=1)
    try:
        # First start: the dir gets its identity and journal, then the voter stops.
        c.start()
        c.wait_ready()
        assert c.stop(0) == 0
        prefix = _private_read_only_mount(c.data_dir(0))
        if prefix is None:
            pytest.skip("a private read-only mount needs root and unshare(1)")
        done = serve(c.args(0), prefix)
        assert done.returncode == 2, done.stderr
        line = one_line_error(done)
        assert f"--data-dir {c.data_dir(0)}" in line and "read-only" in line, line

        fresh = tmp_path / "fresh"
        fresh.mkdir()
        done = serve(as_another_node(c, 0, fresh), _private_read_only_mount(fresh))
        assert done.returncode == 2, done.stderr
        line = one_line_error(done)
        assert f"--data-dir {fresh}" in line and "read-only" in line, line
    finally:
        c.close()


def test_a_full_disk_at_the_first_start_is_exit_2_and_leaves_nothing_half_written(tmp_path):
    """A 200 KiB volume: the identity file fits, the journal's first room does
    not. Once the volume is grown, the same data dir starts and serves."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a private tmpfs mount needs root and unshare(1)")
    c = Cluster(tmp_path, voters=1)
    try:
        data = c.data_dir(0)
        data.mkdir()
        first, code = tmp_path / "first-start.err", tmp_path / "first-start.code"
        # In a mount namespace of its own: a tiny volume, the first start, the
        # volume grown, then the second start in place of the shell.
        script = (
            'mount -t tmpfs -o size=200k tmpfs "$0" || exit 99; shift; '
            f'"$@" 2>{first}; echo $? >{code}; '
            f'mount -o remount,size=64m "$0" || exit 99; exec "$@"'
        )
        with open(c.logs[0], "ab") as log:
            c.procs[0] = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                 str(data), "_", *c.args(0)],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        c.wait(lambda: code.exists() and code.read_text().strip(), 60, "the first start ended")
        assert code.read_text().strip() == "2", first.read_text()
        line = one_line_error(subprocess.CompletedProcess([], 2, "", first.read_text()))
        assert f"--data-dir {data}" in line and "no space left on the device" in line, line
        c.wait_ready([0], START_TIMEOUT_S)  # the grown volume serves the same data dir
        assert c.stop(0) == 0
    finally:
        c.close()


def test_a_data_dir_owned_by_another_user_is_exit_2_naming_the_path(tmp_path):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv(1) to drop the override of file permissions")
    c = Cluster(tmp_path, voters=1)
    try:
        data = c.data_dir(0)
        data.mkdir()
        os.chown(data, 65534, 65534)  # nobody's, mode 0700
        data.chmod(0o700)
        # Root without CAP_DAC_OVERRIDE meets file permissions as any user would.
        no_override = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
        done = serve(c.args(0), no_override)
        assert done.returncode == 2, done.stderr
        line = one_line_error(done)
        assert f"--data-dir {data}" in line and "permission denied" in line, line
        assert "chown" in line, line
    finally:
        c.close()
