"""Reading a voter's data dir offline, without starting a node: the snapshot
(our format) and the pysyncobj journal after it, replayed through the same
``MetadataStateMachine.apply_batch`` a running voter uses, so every record gets
exactly the offset the service gave it.

Read-only: the journal is parsed from its bytes (pysyncobj's FileJournal would
open it for writing and resize it), and pickled journal commands are loaded
with an unpickler that refuses every class (a command is a tuple of an int and
bytes; nothing else is legitimate) but the function protocol 2 builds bytes with.
"""

from __future__ import annotations

import codecs
import io
import mmap
import os
import pickle
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from metadata_records.codec import DecodeError, decode_batch
from metadata_records.image import EMPTY_IMAGE, MetadataImage
from metadata_records.records import Voter, VotersRecord

from .record_log import LogEntry
from .state_machine import INVALID, STALE, MetadataStateMachine

JOURNAL_FILE = "raft.journal"  # NodeConfig.journal_file / dump_file
SNAPSHOT_FILE = "raft.snapshot"
_HEADER = 24 + 8 + 4 + 4  # name, version, format, last-record offset (pysyncobj journal.py)
_REGULAR = 0  # pysyncobj _COMMAND_TYPE.REGULAR


class DataDirError(Exception):
    """The data dir cannot be read; the message names the file, entry and offset."""


class _NoClasses(pickle.Unpickler):
    def find_class(self, module, name):
        # Protocol 2 (pysyncobj's) pickles bytes as _codecs.encode(text, "latin1").
        if (module, name) == ("_codecs", "encode"):
            return codecs.encode
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a journal")


def _safe_loads(data: bytes):
    return _NoClasses(io.BytesIO(data)).load()


@dataclass
class JournalEntry:
    raft_index: int
    term: int
    command: bytes


def read_journal(path: str) -> Iterator[JournalEntry]:
    """The journal's entries, checked for truncation as they are read."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _HEADER or not data.startswith(b"PYSYNCOBJ"):
        raise DataDirError(f"{path} is not a pysyncobj journal (bad header)")
    (end,) = struct.unpack_from("<I", data, _HEADER - 4)
    pos = _HEADER
    while pos < end:
        if pos + 4 > len(data) or pos + 8 + struct.unpack_from("<I", data, pos)[0] > len(data):
            raise DataDirError(
                f"{path} is truncated: the entry at byte {pos} goes past the end of the file "
                f"({len(data)} bytes; the header says entries end at byte {end})"
            )
        (size,) = struct.unpack_from("<I", data, pos)
        if size < 16 or pos + 8 + size > end:
            raise DataDirError(f"{path}: the entry at byte {pos} is corrupt (bad size {size})")
        (trailer,) = struct.unpack_from("<I", data, pos + 4 + size)
        if trailer != size:
            raise DataDirError(f"{path}: entry at byte {pos} is corrupt (size fields disagree)")
        idx, term = struct.unpack_from("<QQ", data, pos + 4)
        yield JournalEntry(idx, term, data[pos + 20 : pos + 4 + size])
        pos += size + 8


def _commit_index(path: str) -> int | None:
    try:
        with open(path + ".meta", "rb") as f:
            meta = _safe_loads(f.read())
    except (OSError, pickle.UnpicklingError, EOFError, ValueError):
        return None
    value = meta.get("raftCommitIndex") if isinstance(meta, dict) else None
    return value if type(value) is int else None


def _batch_payload(command: bytes) -> bytes | None:
    """The encoded batch a journal command carries; None for pysyncobj's own
    entries (no-ops, membership and version changes)."""
    if not command or command[0] != _REGULAR:
        return None
    try:
        call = _safe_loads(command[1:])
    except (pickle.UnpicklingError, EOFError, ValueError, struct.error) as e:
        raise DecodeError(f"the journal command is not a pickled call ({e})") from None
    if (
        type(call) is tuple
        and len(call) >= 2
        and type(call[1]) is tuple
        and len(call[1]) == 1
        and type(call[1][0]) is bytes
    ):
        return call[1][0]
    raise DecodeError("the journal command is not a call of apply_batch(payload)")


def last_voter_set(entries, after_index: int) -> tuple[int, tuple[Voter, ...]] | None:
    """(Raft index, voters) of the last KRAFT_VOTERS record among journal
    ``entries`` ((command, index, term), pysyncobj's) past ``after_index``,
    or None. Entries that are not batches, or do not decode, hold none."""
    found = None
    for entry in entries:
        command, index = entry[0], entry[1]
        if index <= after_index:
            continue
        try:
            payload = _batch_payload(command)
            batch = decode_batch(payload) if payload is not None else None
        except DecodeError:
            continue
        for record in batch.records if batch is not None else ():
            if type(record) is VotersRecord:
                found = (index, record.voters)
    return found


def read_journal_tail(path: str, after_index: int) -> list[JournalEntry]:
    """The journal's entries past Raft index ``after_index``, oldest first,
    read backwards from its end through the trailing sizes (only the tail is
    touched: a journal holds up to a compaction's worth of batches)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size < _HEADER:
            raise DataDirError(f"{path} is not a pysyncobj journal (too short)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if not data[:9] == b"PYSYNCOBJ":
                raise DataDirError(f"{path} is not a pysyncobj journal (bad header)")
            (pos,) = struct.unpack_from("<I", data, _HEADER - 4)
            if pos > len(data):
                raise DataDirError(f"{path}: the header's end ({pos}) is past the file")
            tail = []
            while pos > _HEADER:
                (size,) = struct.unpack_from("<I", data, pos - 4)
                start = pos - 8 - size
                if size < 16 or start < _HEADER or struct.unpack_from("<I", data, start)[0] != size:
                    raise DataDirError(f"{path}: the entry ending at byte {pos} is corrupt")
                index, term = struct.unpack_from("<QQ", data, start + 4)
                if index <= after_index:
                    break
                tail.append(JournalEntry(index, term, bytes(data[start + 20 : start + 4 + size])))
                pos = start
    tail.reverse()
    return tail


def voters_past_commit(journal_path: str) -> tuple[int, tuple[Voter, ...]] | None:
    """The last voter set in a journal file past its stored commit index, or
    None (no journal, none there, or a journal this reader cannot trust: the
    node's own checks report that)."""
    if not os.path.exists(journal_path):
        return None
    commit = _commit_index(journal_path) or 0
    try:
        tail = read_journal_tail(journal_path, commit)
    except (DataDirError, OSError, ValueError, struct.error):
        return None
    return last_voter_set(((e.command, e.raft_index, e.term) for e in tail), commit)


@dataclass
class DataDirLog:
    snapshot: MetadataImage | None  # the image the snapshot file holds, if there is one
    entries: Iterator[list[LogEntry]]  # the journal's records after it, batch by batch
    journal_entries: int  # Raft entries in the journal (for progress)
    commit_index: int | None
    held_back: int  # Raft entries after the stored commit index (not read)
    # The highest Raft index the dir holds (the journal's last entry, or the
    # snapshot's), committed or not.
    last_index: int = 0
    # The image as replayed so far: the snapshot's, then after each batch
    # ``entries`` yielded (all of them read: the image at the commit index).
    image: Callable[[], MetadataImage] = lambda: EMPTY_IMAGE


def read_data_dir(data_dir: str, include_uncommitted: bool = False) -> DataDirLog:
    journal = os.path.join(data_dir, JOURNAL_FILE)
    snapshot = os.path.join(data_dir, SNAPSHOT_FILE)
    if not os.path.isdir(data_dir):
        raise DataDirError(f"--data-dir {data_dir} is not a directory")
    if not os.path.exists(journal) and not os.path.exists(snapshot):
        raise DataDirError(
            f"--data-dir {data_dir} holds neither {JOURNAL_FILE} nor {SNAPSHOT_FILE}: "
            "is it a metaquorum voter's data dir?"
        )
    sm = MetadataStateMachine(log_retention=1 << 30)
    snapshot_last_index = 0
    image = None
    if os.path.exists(snapshot):
        try:
            last, _prev, _cluster = sm.read_snapshot(snapshot)
        except Exception as e:
            raise DataDirError(f"{snapshot}: {sm.fatal or e}") from None
        snapshot_last_index = last[1]
        image = sm.image
    entries: list[JournalEntry] = []
    broken: DataDirError | None = None  # raised when the replay reaches it, with its offset
    if os.path.exists(journal):
        try:
            for entry in read_journal(journal):
                entries.append(entry)
        except DataDirError as e:
            broken = e
    commit = _commit_index(journal)
    limit = None if include_uncommitted or commit is None else commit
    held_back = sum(1 for e in entries if limit is not None and e.raft_index > limit)

    def batches() -> Iterator[list[LogEntry]]:
        for entry in entries:
            if entry.raft_index <= snapshot_last_index:
                continue  # already in the snapshot
            if limit is not None and entry.raft_index > limit:
                break
            next_offset = sm.image.next_offset
            try:
                payload = _batch_payload(entry.command)
                if payload is None:
                    continue
                decode_batch(payload)  # apply_batch would skip a bad entry: name it instead
            except DecodeError as e:
                raise DataDirError(
                    f"{journal}: Raft entry {entry.raft_index} (at metadata offset "
                    f"{next_offset}) is not a metadata batch: {e}"
                ) from None
            first = sm.apply_batch(payload, _doApply=True)
            if first in (STALE, INVALID):
                continue
            count = sm.image.next_offset - first
            yield sm.log.read(first, count)
            sm.log.reset(sm.image.next_offset)  # keep memory flat on a long journal
        if broken is not None:
            raise DataDirError(
                f"{broken} (the last good record is at offset {sm.image.last_offset}; "
                f"the next would be {sm.image.next_offset})"
            )

    last_index = max([snapshot_last_index] + [e.raft_index for e in entries[-1:]])
    return DataDirLog(
        image, batches(), len(entries), commit, held_back, last_index, lambda: sm.image
    )
