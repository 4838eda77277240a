"""quorum/raft/raft_port.py without sockets: the Raft port's cipher."""

import itertools
import time

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.fernet import Fernet

from quorum.raft.raft_port import InvalidRaftToken, RaftCipher

SECRET = "raft-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def cipher():
    return RaftCipher(SECRET)


def test_a_token_decrypts_with_the_same_secret_and_carries_its_timestamp(cipher):
    other_process = RaftCipher(SECRET)  # the same key, its own nonces
    now = int(time.monotonic())
    token = cipher.encrypt_at_time(b"payload", now)
    assert other_process.decrypt(token) == b"payload"
    assert other_process.extract_timestamp(token) == now
    assert len(token) == len(b"payload") + 37  # version, timestamp, nonce, tag


def test_another_secret_cannot_read_a_token(cipher):
    token = cipher.encrypt_at_time(b"payload", 1)
    with pytest.raises(InvalidTag):
        RaftCipher("not-the-secret-0123456789").decrypt(token)


def test_a_change_to_any_byte_is_refused(cipher):
    """The timestamp is authenticated too: pysyncobj orders a connection's
    frames by it, so a forged one could make it drop the real ones."""
    token = cipher.encrypt_at_time(b"x" * 40, 1_000)
    for i in range(len(token)):
        changed = bytearray(token)
        changed[i] ^= 0x01
        with pytest.raises((InvalidTag, InvalidRaftToken)):
            cipher.decrypt(bytes(changed))


@pytest.mark.parametrize(
    "token, reason",
    [
        (b"", "too short"),
        (b"\x01" + bytes(35), "too short"),
        (Fernet(Fernet.generate_key()).encrypt(b"x" * 100), "token version"),
    ],
)
def test_what_is_not_a_token_is_named(cipher, token, reason):
    for read in (cipher.extract_timestamp, cipher.decrypt):
        with pytest.raises(InvalidRaftToken, match=reason):
            read(token)


def test_nonces_never_repeat_and_the_prefix_is_drawn_again_at_the_counter_end():
    cipher = RaftCipher(SECRET)
    nonces = {cipher._nonce() for _ in range(10_000)}
    assert len(nonces) == 10_000
    cipher._counter = 0xFFFFFFFF
    last, after = cipher._nonce(), cipher._nonce()
    assert last[8:] == b"\xff\xff\xff\xff"
    assert after[8:] == bytes(4) and after[:8] != last[:8]


def test_two_processes_draw_different_nonce_prefixes():
    prefixes = {RaftCipher(SECRET)._nonce()[:8] for _ in itertools.repeat(None, 3)}
    assert len(prefixes) == 3


def test_raft_messages_pickle_bytes_as_bytes_and_old_pickles_still_load():
    """Decision 126: protocol 4 for pysyncobj's pickles. A batch's payload is
    pickled as bytes (not through a latin-1 str), and a protocol-2 pickle (a
    journal written before, a voter not yet upgraded) still loads."""
    import pickle

    import pysyncobj.pickle

    from quorum.data_dir_reader import _safe_loads
    from quorum.raft import patches

    patches.install()  # pickle protocol 4 among them
    call = (3, (bytes(range(256)) * 10,), {})
    new = pysyncobj.pickle.dumps(call)
    assert new[:2] == b"\x80\x04" and b"_codecs" not in new
    old = pickle.dumps(call, 2)
    assert b"_codecs" in old  # what pysyncobj wrote before
    assert pysyncobj.pickle.loads(new) == pysyncobj.pickle.loads(old) == call
    # The journal reader (quorum/data_dir_reader.py) refuses classes but reads both.
    assert _safe_loads(new) == _safe_loads(old) == call


def test_the_orderers_word_that_a_push_may_go_wakes_no_one():
    """``commit_push_may_go`` comes as a write is answered: it counts the word
    and its time for the Raft thread's next poll (which looks for it every
    ``delay_s`` while a push is held), and never writes to pysyncobj's pipe
    notifier, whose wake-up took the interpreter lock from the loop writing
    the answer (issue 46). The push's timing after the word:
    tests/test_node.py::test_a_commit_index_waits_for_the_orderers_next_batch_and_goes_once_it_has_none."""
    from pysyncobj.monotonic import monotonic

    from quorum.raft.raft_port import _PUSH_MAY_GO, commit_push_may_go

    class Notifier:
        def notify(self) -> None:
            raise AssertionError("the word woke the Raft thread")

    class Voter:
        _SyncObj__pipeNotifier = Notifier()

    voter = Voter()
    before = monotonic()
    commit_push_may_go(voter)
    commit_push_may_go(voter)
    said, said_at = getattr(voter, _PUSH_MAY_GO)
    assert said == 2
    assert before <= said_at <= monotonic()


@pytest.mark.parametrize("stored", [True, False])
@pytest.mark.parametrize("size", [0, 1, 500, 4095, 4096, 50_000])
def test_a_frame_reads_back_alike_stored_or_deflated(monkeypatch, stored, size):
    """STORED_SMALL_FRAMES (a speed switch) changes how a small message is
    framed, never what the peer reads: pysyncobj's own zlib.decompress gives
    the message back either way, and a peer on either side of the switch
    reads the other's frames."""
    import os
    import pickle
    import zlib

    from quorum.raft import raft_port
    from quorum.raft.raft_port import STORED_UNDER_BYTES, FrameZlib

    monkeypatch.setattr(raft_port, "STORED_SMALL_FRAMES", stored)
    message = pickle.dumps({"type": "append_entries", "entries": [os.urandom(size // 2)]})[:size]
    message += b"a" * (size - len(message))
    framed = FrameZlib.compress(message, 3)
    assert zlib.decompress(framed) == message
    assert FrameZlib.decompress(zlib.compress(message, 3)) == message
    if stored and size < STORED_UNDER_BYTES:
        assert framed == zlib.compress(message, 0)
    else:
        assert framed == zlib.compress(message, 3)
