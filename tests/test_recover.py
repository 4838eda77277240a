"""``metaquorum recover`` (metaquorum/recover.py): its refusals, a run cut
short at every step and finished by the next, and the lost majority with
real voters: two of three killed and wiped, the survivor recovered keeps
exactly what it had committed, leads alone, and grows back to three."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import threading

import httpx
import pytest

from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import Voter
from metaquorum import recover as recover_module
from metaquorum.cli import main
from quorum import journal_format
from quorum.data_dir_reader import DataDirError, _commit_index, read_data_dir, read_journal_tail
from quorum.node_config import ConfigError, NodeConfig, inspect_data_dir
from quorum.seeded_data_dir import RAFT_INDEX_MARGIN, write_seeded_data_dir

from .cluster import Cluster, holds_for
from .test_cluster import brokers, register, register_body
from .test_membership import Writer, add, digest, role, voters_of

ADDRESS = ("127.0.0.1", 9093)
ALONE = (Voter(0, None, *ADDRESS),)
# Brokers that never heartbeat are not fenced during a test: nothing writes
# but the test, so an image read before a kill is the one the survivor keeps.
LONG_SESSIONS = ["--session-timeout-ms", "600000"]


def survivor(path, voters=ALONE) -> str:
    """A stopped voter's data dir holding an image at offset 10 (seeded: no cluster needed)."""
    image = EMPTY_IMAGE._replace(next_offset=10, controller_epoch=3)
    write_seeded_data_dir(
        str(path), node_id=0, cluster_id="the-cluster", image=image, voters=voters,
        raft_index=RAFT_INDEX_MARGIN,
    )  # fmt: skip
    return str(path)


def files(path) -> dict[str, bytes]:
    return {
        name: (path / name).read_bytes()
        for name in sorted(os.listdir(path))
        if (path / name).is_file()
    }


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_refusals_change_nothing(tmp_path, capsys, monkeypatch):
    assert main(["recover", "--data-dir", str(tmp_path / "missing"), "--yes"]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["recover", "--data-dir", str(tmp_path / "empty"), "--yes"]) == 2
    assert "is empty: nothing to recover from" in capsys.readouterr().err
    d = survivor(tmp_path / "d")
    before = files(tmp_path / "d")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # no terminal, no --yes
    assert main(["recover", "--data-dir", d]) == 2
    captured = capsys.readouterr()
    assert "no terminal to confirm on" in captured.err and "--yes" in captured.err
    assert "may be lost" in captured.out  # the loss is printed all the same
    monkeypatch.setattr(sys, "stdin", Terminal("not-the-cluster-id\n"))
    assert main(["recover", "--data-dir", d]) == 1
    assert "not confirmed: nothing was changed" in capsys.readouterr().err
    assert files(tmp_path / "d") == before
    assert sorted(os.listdir(d)) == sorted(before)


def test_a_journal_without_its_stored_commit_index_is_refused(tmp_path, capsys):
    d = survivor(tmp_path / "d")
    (tmp_path / "d" / "raft.journal").write_bytes(journal_format.header(b"0.3.17"))
    (tmp_path / "d" / "raft.journal.meta").unlink()
    before = files(tmp_path / "d")
    assert main(["recover", "--data-dir", d, "--yes"]) == 2
    assert "nothing tells the committed entries from the others" in capsys.readouterr().err
    assert files(tmp_path / "d") == before


def test_a_voter_set_without_this_node_needs_its_raft_address(tmp_path, capsys):
    d = survivor(tmp_path / "d", voters=(Voter(0, None, *ADDRESS), Voter(1, None, "h", 1)))
    assert main(["recover", "--data-dir", d, "--yes"]) == 2  # the image has no voter set
    assert "give its Raft address with --raft-address" in capsys.readouterr().err
    assert main(["recover", "--data-dir", d, "--yes", "--raft-address", "nope"]) == 2
    assert "--raft-address" in capsys.readouterr().err
    assert main(["recover", "--data-dir", d, "--yes", "--raft-address", "127.0.0.1:9"]) == 0
    assert "node 0 at 127.0.0.1:9" in capsys.readouterr().out
    assert read_data_dir(d).snapshot.voters[0][2:] == ("127.0.0.1", 9)


def test_typed_cluster_id_confirms_and_old_files_move_aside(tmp_path, capsys, monkeypatch):
    d = survivor(tmp_path / "d")
    old = files(tmp_path / "d")
    monkeypatch.setattr(sys, "stdin", Terminal("the-cluster\n"))
    assert main(["recover", "--data-dir", d]) == 0
    out = capsys.readouterr().out
    (backup,) = [n for n in os.listdir(d) if n.startswith("pre-recover-")]
    assert files(tmp_path / "d" / backup) == old
    assert f"the old files are in {os.path.join(d, backup)}" in out
    read = read_data_dir(d)
    assert read.snapshot.next_offset == 10
    # Far beyond the survivor's own last index (its lost peers' logs too).
    assert read.last_index == 2 * RAFT_INDEX_MARGIN
    assert sorted(files(tmp_path / "d")) == [
        "metaquorum.json",
        "raft.journal.meta",
        "raft.snapshot",
    ]
    # Again (within the same second, as a script may): a backup of its own.
    assert main(["recover", "--data-dir", d, "--yes"]) == 0
    backups = sorted(n for n in os.listdir(d) if n.startswith("pre-recover-"))
    assert len(backups) == 2 and files(tmp_path / "d" / backup) == old


@pytest.mark.parametrize("crash_at", range(12))
def test_a_run_cut_short_at_any_rename_is_refused_by_serve_and_finished_by_the_next(
    tmp_path, capsys, monkeypatch, crash_at
):
    d = survivor(tmp_path / "d")
    old = files(tmp_path / "d")
    real_replace, calls = os.replace, []

    def crashing_replace(src, dst):
        calls.append(src)
        if len(calls) == crash_at + 1:
            raise OSError(5, "Input/output error (injected)")
        return real_replace(src, dst)

    monkeypatch.setattr(recover_module.os, "replace", crashing_replace)
    code = main(["recover", "--data-dir", d, "--yes"])
    monkeypatch.setattr(recover_module.os, "replace", real_replace)
    if len(calls) <= crash_at:
        assert code == 0  # fewer renames than that: nothing to cut short
        return
    assert code == 3
    assert "run recover again to finish" in capsys.readouterr().err
    now = files(tmp_path / "d")
    marked = now.pop(recover_module.MARKER, None) is not None
    now.pop(recover_module.MARKER + ".tmp", None)
    # Either the dir is as it was, or serve refuses it, naming recover.
    config = NodeConfig(0, {0: "127.0.0.1:9093"}, d, "http://127.0.0.1:1")
    if marked or now != old:
        with pytest.raises(ConfigError, match="a metaquorum recover was cut short here"):
            inspect_data_dir(config)
    else:
        assert inspect_data_dir(config)[0].cluster_id == "the-cluster"
    assert main(["recover", "--data-dir", d, "--yes"]) == 0
    (backup,) = [n for n in os.listdir(d) if n.startswith("pre-recover-")]
    assert files(tmp_path / "d" / backup) == old
    assert sorted(os.listdir(d)) == sorted([backup, *old])
    assert read_data_dir(d).last_index == 2 * RAFT_INDEX_MARGIN


def recover_cli(data_dir, *flags, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "recover", "--data-dir", str(data_dir), *flags],
        capture_output=True, text=True, timeout=120, stdin=stdin,
    )  # fmt: skip


@pytest.mark.slow
def test_a_lost_majority_recovered_from_the_survivor_keeps_what_it_committed(tmp_path):
    c = Cluster(tmp_path, voters=3, fsync="always", extra=LONG_SESSIONS)
    try:
        c.start()
        s = c.leader()
        c.wait(lambda: len(voters_of(c, s)) == 3, 30, "the first voter set")
        with Writer(c) as writer:
            c.wait(lambda: len(writer.acked) >= 30, 60, "30 acknowledged writes")
        # Everything acknowledged is committed on the leader, the survivor-to-be
        # (and perhaps a write whose answer was lost when the writer stopped).
        s = c.leader()
        committed = brokers(c, s)
        assert all(committed.get(b) == e for b, e in writer.acked.items())
        kept = digest(c, s)  # nothing else writes: no NoOps, brokers never time out
        # A recover refuses the data dir of a voter that still runs.
        busy = recover_cli(c.data_dir(s), "--yes")
        assert busy.returncode == 2 and "in use by another metaquorum serve" in busy.stderr
        lost = [i for i in range(3) if i != s]
        for i in lost:
            c.signal(i, signal.SIGSTOP)
        # An entry the survivor appends now never commits: its uncommitted tail.
        planted = threading.Thread(target=lambda: _try_register(c, s, 999), daemon=True)
        planted.start()
        journal = str(c.data_dir(s) / "raft.journal")
        c.wait(
            lambda: _last_journal_index(journal) > (c.status(s) or {}).get("raftCommitIndex", 0),
            30, "an entry past the survivor's commit index",
        )  # fmt: skip
        for i in lost:
            c.kill(i)
            shutil.rmtree(c.data_dir(i))
        assert c.stop(s) == 0
        planted.join(timeout=30)
        assert _commit_index(journal) is not None
        # Without a terminal and without --yes: refused, the loss printed.
        refused = recover_cli(c.data_dir(s))
        assert refused.returncode == 2 and "no terminal" in refused.stderr, refused
        done = recover_cli(c.data_dir(s), "--yes")
        assert done.returncode == 0, done.stderr
        print(done.stdout)
        assert "1 Raft entry past its commit index" in done.stdout, done.stdout
        assert "RegisterBrokerRecord" in done.stdout, done.stdout
        assert f"image digest {kept[1]}" in done.stdout, (kept, done.stdout)
        # Started with its usual flags (the old --voters): it leads alone.
        c.start(s)
        assert c.leader(among=[s]) == s
        assert brokers(c, s) == committed  # every committed write, not the planted one
        new_epoch = register(c, s, 1000)
        assert new_epoch > kept[0]
        # The lost voters come back with empty data dirs and are added one at a time.
        for i in lost:
            c.start(i)
            c.wait(lambda i=i: role(c, i) == "observer", 30, f"{i} back, empty")
            add(c, i, via=s)
        c.wait(lambda: all(role(c, i) == "voter" for i in range(3)), 30, "three voters")
        register(c, s, 1001)
        c.wait(lambda: len({digest(c, i) for i in range(3)}) == 1, 30, "equal digests")
        for i in range(3):
            assert brokers(c, i) == {**committed, 1000: new_epoch, 1001: brokers(c, s)[1001]}
    finally:
        c.close()


@pytest.mark.slow
def test_a_lost_voter_that_comes_back_with_its_log_is_not_let_in(tmp_path):
    """Its log is the old cluster's: the recovered voter's set does not name
    it, so the recovered voter neither dials it nor takes its connection, and
    it believes the recovered voter's word (a voter of its own set, applied
    further) that it was removed: it never votes or stands again."""
    c = Cluster(tmp_path, voters=3, fsync="always")
    try:
        c.start().wait_ready()  # every voter answers HTTP before it is read
        s = c.leader()
        acked = {b: register(c, s, b) for b in (1, 2, 3)}
        back, wiped = [i for i in range(3) if i != s]
        c.wait(lambda: brokers(c, back) == acked, 30, "the returning voter holds the writes")
        for i in (back, wiped):
            c.kill(i)
        shutil.rmtree(c.data_dir(wiped))
        assert c.stop(s) == 0
        assert recover_cli(c.data_dir(s), "--yes").returncode == 0
        c.start(s)
        assert c.leader(among=[s]) == s
        c.start(back)  # with its old data dir, its old log and voter set
        c.wait(lambda: role(c, back) == "removed", 30, "the returning voter knows it was removed")

        def alone() -> None:
            assert list(voters_of(c, s)) == [s]
            assert (c.status(back) or {}).get("leaderId") in (None, s)

        holds_for(3.0, alone)
        assert register(c, s, 4) > 0  # the recovered voter takes writes alone
        # Wiped and started again, it is added as a new voter.
        c.kill(back)
        shutil.rmtree(c.data_dir(back))
        c.start(back)
        c.wait(lambda: role(c, back) == "observer", 30, "back, empty")
        add(c, back, via=s)
        c.wait(lambda: role(c, back) == "voter", 30, "a voter again")
    finally:
        c.close()


def _try_register(c: Cluster, i: int, broker: int) -> None:
    try:
        c.client.post(c.url(i) + "/v1/brokers/register", json=register_body(c, broker), timeout=5.0)
    except httpx.HTTPError:
        pass  # no majority: it never commits


def _last_journal_index(path: str) -> int:
    """Of a journal a live voter writes (an entry half written reads as none yet)."""
    try:
        tail = read_journal_tail(path, 0)
    except DataDirError:
        return 0
    return tail[-1].raft_index if tail else 0
