"""quorum/startup_checks.py: the Raft port, the data dir, and a journal that
needs a snapshot, checked before a voter builds its SyncObj (the whole
``serve`` is driven in tests/hostile/test_startup_refusals.py)."""

from __future__ import annotations

import os
import socket

import orjson
import pytest
from pysyncobj.pickle import dumps

from quorum import startup_checks
from quorum.journal_format import (
    FORMAT_CHECKSUMMED,
    HEADER_SIZE,
    JournalCorruptError,
    encode_entry,
    first_entry_index,
    header,
)
from quorum.node_config import ConfigError
from quorum.startup_checks import (
    MissingJournalError,
    MissingSnapshotError,
    check_data_dir,
    check_journal_holds_what_was_committed,
    check_memory_room,
    check_raft_port,
    check_snapshot_covers_journal,
    lock_data_dir,
    memory_room,
    snapshot_last_index,
    unlock_data_dir,
)

from .nodes import build_node, free_port, single_voter_config

# ---------------------------------------------------------------- the Raft port


def test_a_free_port_passes_and_stays_free():
    port = free_port()
    check_raft_port(f"127.0.0.1:{port}", 0)
    check_raft_port(f"127.0.0.1:{port}", 0)  # the probe let it go


def test_a_port_in_use_names_the_port_and_its_holder():
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen(1)
        with pytest.raises(ConfigError) as e:
            check_raft_port(f"0.0.0.0:{port}", 3)
    message = str(e.value)
    assert f"the Raft port 0.0.0.0:{port} of node 3" in message
    assert f"already in use by another process (pid {os.getpid()}:" in message
    assert "give this one its own id and port" in message


def test_an_address_of_another_host_is_named():
    with pytest.raises(ConfigError, match="192.0.2.1 is not an address of this host"):
        check_raft_port(f"192.0.2.1:{free_port()}", 0)


def test_a_node_whose_port_was_taken_after_the_check_refuses_instead_of_retrying(tmp_path):
    """The window between serve's check and pysyncobj's bind: the node sees
    pysyncobj's first bind fail and stops its SyncObj instead of retrying."""
    port = free_port()
    config = single_voter_config(tmp_path / "data", raft_port=port, raft_bind=f"127.0.0.1:{port}")
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        holder.listen(1)
        with pytest.raises(ConfigError, match=f"127.0.0.1:{port} of node 0 .* already in use"):
            build_node(config)


# ---------------------------------------------------------------- the data dir


def test_a_usable_data_dir_is_created_and_left_without_the_probe(tmp_path):
    path = tmp_path / "a" / "b"
    check_data_dir(str(path))
    assert path.is_dir() and list(path.iterdir()) == []


def test_a_data_dir_that_is_a_file_is_named(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=f"--data-dir {tmp_path / 'file'} is not a directory"):
        check_data_dir(str(tmp_path / "file"))


def test_an_empty_data_dir_flag_is_named():
    with pytest.raises(ConfigError, match="--data-dir is empty"):
        check_data_dir(" ")


def test_a_data_dir_under_a_file_cannot_be_created(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="cannot create it"):
        check_data_dir(str(tmp_path / "file" / "data"))


def test_a_locked_data_dir_is_refused_naming_the_holder(tmp_path):
    fd = lock_data_dir(str(tmp_path))
    try:
        with pytest.raises(ConfigError) as e:
            lock_data_dir(str(tmp_path))
        assert f"--data-dir {tmp_path} is in use by another process (pid {os.getpid()}:" in str(
            e.value
        )
    finally:
        unlock_data_dir(fd)
    unlock_data_dir(lock_data_dir(str(tmp_path)))  # free again


def test_a_forked_child_does_not_keep_the_lock_after_its_parent_let_go(tmp_path):
    """The snapshot writer is a forked child: it must not hold the data dir
    (a restarted voter would be refused until the child finished)."""
    fd = lock_data_dir(str(tmp_path))
    read_end, write_end = os.pipe()
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child (its at-fork hooks have run) waits until the parent has checked
        os.close(write_end)
        os.write(ready_write, b"r")
        os.read(read_end, 1)
        os._exit(0)
    os.close(read_end)
    os.close(ready_write)
    try:
        assert os.read(ready_read, 1) == b"r"
        unlock_data_dir(fd)
        unlock_data_dir(lock_data_dir(str(tmp_path)))  # the child is alive, the dir is free
    finally:
        os.close(write_end)
        os.close(ready_read)
        os.waitpid(pid, 0)


# ---------------------------------------------------------------- snapshot and journal


def write_journal(path, first: int, count: int) -> None:
    body = b"".join(
        encode_entry(b"cmd", i, 1, FORMAT_CHECKSUMMED) for i in range(first, first + count)
    )
    head = bytearray(header(b"0.3.17"))
    head[36:40] = (HEADER_SIZE + len(body)).to_bytes(4, "little")
    path.write_bytes(bytes(head) + body)


def write_snapshot_header(path, last: int) -> None:
    raft = {"last": ["", last, 1], "prev": ["", last - 1, 1], "cluster": []}
    path.write_bytes(orjson.dumps({"format": 2, "raft": raft}) + b"\nimage")


def test_a_journal_from_index_1_needs_no_snapshot(tmp_path):
    write_journal(tmp_path / "j", 1, 5)
    check_snapshot_covers_journal(str(tmp_path / "j"), str(tmp_path / "s"))


def test_no_journal_or_an_empty_one_needs_no_snapshot(tmp_path):
    check_snapshot_covers_journal(str(tmp_path / "j"), str(tmp_path / "s"))
    (tmp_path / "j").write_bytes(header(b"0.3.17"))
    assert first_entry_index(lambda o, n: header(b"0.3.17")[o : o + n], HEADER_SIZE) is None
    check_snapshot_covers_journal(str(tmp_path / "j"), str(tmp_path / "s"))


def test_a_compacted_journal_without_its_snapshot_is_refused(tmp_path):
    journal, snapshot = tmp_path / "raft.journal", tmp_path / "raft.snapshot"
    write_journal(journal, 41, 3)
    with pytest.raises(MissingSnapshotError) as e:
        check_snapshot_covers_journal(str(journal), str(snapshot))
    assert isinstance(e.value, JournalCorruptError)  # serve's exit 3 path
    assert str(e.value).startswith(
        f"Raft journal {journal} starts at Raft index 41, and the snapshot {snapshot} is missing"
    )
    assert "move the data dir aside" in str(e.value)


def test_a_snapshot_that_ends_before_the_journal_starts_is_refused(tmp_path):
    journal, snapshot = tmp_path / "raft.journal", tmp_path / "raft.snapshot"
    write_journal(journal, 41, 3)
    write_snapshot_header(snapshot, 39)
    with pytest.raises(MissingSnapshotError, match="ends at Raft index 39"):
        check_snapshot_covers_journal(str(journal), str(snapshot))
    for last in (40, 42, 100):  # continues the journal, or is newer than its start
        write_snapshot_header(snapshot, last)
        check_snapshot_covers_journal(str(journal), str(snapshot))


def test_damage_is_left_to_the_checks_that_name_it(tmp_path):
    journal, snapshot = tmp_path / "raft.journal", tmp_path / "raft.snapshot"
    write_journal(journal, 41, 3)
    data = bytearray(journal.read_bytes())
    data[HEADER_SIZE + 4 + 16] ^= 1  # the first entry's command: its checksum fails
    journal.write_bytes(bytes(data))
    check_snapshot_covers_journal(str(journal), str(snapshot))  # the journal scan refuses it
    write_journal(journal, 41, 3)
    snapshot.write_bytes(b"not json\n")
    assert snapshot_last_index(str(snapshot)) is not None  # the snapshot's load refuses it
    check_snapshot_covers_journal(str(journal), str(snapshot))


def write_meta(journal, commit: int) -> None:
    (journal.parent / (journal.name + ".meta")).write_bytes(
        dumps({"raftCommitIndex": commit, "currentTerm": 3, "votedForNodeId": None})
    )


def test_a_deleted_journal_with_commits_past_the_snapshot_is_refused(tmp_path):
    journal, snapshot = tmp_path / "raft.journal", tmp_path / "raft.snapshot"
    write_meta(journal, 90)
    with pytest.raises(MissingJournalError) as e:
        check_journal_holds_what_was_committed(str(journal), str(snapshot))
    assert str(e.value).startswith(
        f"Raft journal {journal} is missing, but {journal}.meta says Raft index 90 was "
        f"committed and the snapshot {snapshot} is missing too"
    )
    write_snapshot_header(snapshot, 86)
    with pytest.raises(MissingJournalError, match="ends at Raft index 86"):
        check_journal_holds_what_was_committed(str(journal), str(snapshot))


def test_a_journal_that_is_there_or_a_snapshot_that_holds_the_commits_passes(tmp_path):
    journal, snapshot = tmp_path / "raft.journal", tmp_path / "raft.snapshot"
    check_journal_holds_what_was_committed(str(journal), str(snapshot))  # a new data dir
    write_meta(journal, 90)
    write_snapshot_header(snapshot, 90)
    check_journal_holds_what_was_committed(str(journal), str(snapshot))
    snapshot.unlink()
    write_journal(journal, 1, 3)  # shorter than the commit index: a journal's own matter
    check_journal_holds_what_was_committed(str(journal), str(snapshot))


# ---------------------------------------------------------------- memory room


def _fake_root(tmp_path, cgroup: str, files: dict[str, str], available_kb: int = 8 << 20):
    """/proc and /sys under ``tmp_path``, as memory_room reads them."""
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text(cgroup)
    (tmp_path / "proc/meminfo").write_text(
        f"MemTotal:       16000000 kB\nMemAvailable:   {available_kb} kB\n"
    )
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text + "\n")
    return str(tmp_path)


def test_memory_room_is_the_cgroup_v2_limit_less_its_use(tmp_path):
    root = _fake_root(
        tmp_path,
        "0::/kubepods/pod1/c1\n",
        {
            "sys/fs/cgroup/kubepods/pod1/c1/memory.max": str(512 << 20),
            "sys/fs/cgroup/kubepods/pod1/c1/memory.current": str(100 << 20),
        },
    )
    room, what = memory_room(root)
    assert room == 412 << 20
    assert "cgroup /kubepods/pod1/c1" in what and "memory.max" in what


def test_memory_room_is_the_cgroup_v1_limit_less_its_use(tmp_path):
    root = _fake_root(
        tmp_path,
        "9:pids:/\n4:memory:/docker/abc\n0::/\n",
        {
            "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": str(256 << 20),
            "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": str(300 << 20),
        },
    )
    assert memory_room(root) == (0, memory_room(root)[1])  # over its limit already: none
    assert "memory.limit_in_bytes" in memory_room(root)[1]


@pytest.mark.parametrize("limit", ["max", "9223372036854771712"])
def test_no_cgroup_limit_leaves_the_machines_available_memory(tmp_path, limit):
    root = _fake_root(
        tmp_path,
        "4:memory:/\n0::/\n",
        {
            "sys/fs/cgroup/memory.max": limit,
            "sys/fs/cgroup/memory/memory.limit_in_bytes": limit,
        },
        available_kb=3 << 20,
    )
    assert memory_room(root) == (3 << 30, "the machine's available memory")


def test_the_ring_that_does_not_fit_is_refused_naming_the_flag(monkeypatch):
    monkeypatch.setattr(
        startup_checks, "memory_room", lambda: (200 << 20, "the memory limit of cgroup /x")
    )
    check_memory_room(64 << 20, "--batch-ring-mib 64")
    with pytest.raises(ConfigError) as e:
        check_memory_room(1024 << 20, "--batch-ring-mib 1024")
    assert str(e.value) == (
        "--batch-ring-mib 1024: 1024 MiB of shared memory is claimed at start, but only "
        "200 MiB is left under the memory limit of cgroup /x; give a smaller "
        "--batch-ring-mib or this voter more memory"
    )
