"""quorum/raft/snapshot_transfer.py: a snapshot keeps streaming to a
follower while the leader's own writer (a fork of ours, reported through
serializeChecker) writes the next one; pysyncobj alone sends nothing then.
On pysyncobj's own Serializer, built as SyncObj builds it."""

import os

from pysyncobj.config import SERIALIZER_STATE
from pysyncobj.serializer import Serializer

from quorum.raft.snapshot_transfer import send_while_writing

PIECE = 1000


def serializer(tmp_path, state):
    dump = tmp_path / "raft.snapshot"
    dump.write_bytes(b"old snapshot " * 3000)  # what a transfer must send, whole

    def write(tmp_name, data):  # ours forks a writer and returns at once
        state["asked"] = tmp_name

    return dump, Serializer(str(dump), PIECE, False, write, None, lambda: state["now"])


def pysyncobj_own(s, node):
    """Serializer.getTransmissionData as pysyncobj has it, patched here or not."""
    method = Serializer.getTransmissionData
    return getattr(method, "__wrapped__", method)(s, node)


def test_pysyncobj_alone_sends_nothing_while_our_writer_runs(tmp_path):
    state = {"now": SERIALIZER_STATE.SERIALIZING}
    _, s = serializer(tmp_path, state)
    s.serialize(("data", "last", "prev", "cluster"), 1)
    assert state["asked"].endswith(".tmp") and s._Serializer__pid in (-1, -2)
    assert pysyncobj_own(s, "follower") is None
    state["now"] = SERIALIZER_STATE.SUCCESS  # the writer ended: pysyncobj sends again
    s.checkSerializing()
    assert pysyncobj_own(s, "follower") is not None


def test_a_transfer_goes_on_while_the_next_snapshot_is_written(tmp_path):
    state = {"now": SERIALIZER_STATE.SERIALIZING}
    dump, s = serializer(tmp_path, state)
    patched = send_while_writing(pysyncobj_own)
    whole = dump.read_bytes()
    s.serialize(("data", "last", "prev", "cluster"), 1)  # our writer "runs"
    marker = s._Serializer__pid
    assert marker in (-1, -2)
    first = patched(s, "follower")
    assert first is not None and first[1] and first[0] == whole[:PIECE]
    assert s._Serializer__pid == marker  # left as it was: pysyncobj still waits to compact
    # The writer finishes and renames a new snapshot over the dump mid-transfer:
    # the follower still gets the file the transfer opened, whole.
    fresh = tmp_path / "raft.snapshot.part"
    fresh.write_bytes(b"new snapshot")
    os.replace(fresh, dump)  # as our writer does
    state["now"] = SERIALIZER_STATE.SUCCESS
    assert s.checkSerializing()[0] == SERIALIZER_STATE.SUCCESS
    rest = b""
    while True:
        data, is_first, is_last = patched(s, "follower")
        assert not is_first
        rest += data
        if is_last:
            break
    assert first[0] + rest == whole
