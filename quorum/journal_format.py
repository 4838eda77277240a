"""The Raft journal's on-disk format, and the check a voter makes at start.

The layout is pysyncobj's (journal.py): a 40-byte header (name, version,
format, the offset where the entries end), then entries, each framed by its
size before and after::

    size:u32 | idx:u64 term:u64 command | size:u32            (format 1, pysyncobj's)
    size:u32 | idx:u64 term:u64 command crc32:u32 | size:u32  (format 2, metaquorum's)

Format 2 adds a CRC32 of ``idx, term, command``, so a flipped bit anywhere is
found. Journals written as format 1 (before metaquorum had its own) are still
read, with the structural checks only, and keep being written as format 1.

What the check at start decides (docs/durability.md):

* every entry whole, checksummed, indexes consecutive, terms non-decreasing:
  the journal is used;
* only the **last** entry is damaged, and exactly to where the header says the
  journal ends: that is an append torn by a crash mid-sync. It was never
  acknowledged (a voter acknowledges an entry only after its sync completed),
  so it is dropped, with a warning naming the file and offset;
* anything else (damage before the last entry, entries out of sequence, a
  header that is not a journal's): ``JournalCorruptError`` naming the file,
  the byte offset and the entry, and the voter refuses to serve.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

NAME = b"PYSYNCOBJ"
NAME_SIZE = 24
VERSION_SIZE = 8
LAST_OFFSET_AT = NAME_SIZE + VERSION_SIZE + 4  # 36
HEADER_SIZE = LAST_OFFSET_AT + 4  # 40: where the first entry starts
FORMAT_PYSYNCOBJ = 1
FORMAT_CHECKSUMMED = 2
_IDX_TERM = struct.Struct("<QQ")
_U32 = struct.Struct("<I")


class JournalCorruptError(Exception):
    """A journal (or its meta file) the voter must not serve from."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        self.path, self.offset, self.reason = path, offset, reason
        super().__init__(
            f"Raft journal {path} is corrupt at byte offset {offset}: {reason}. The voter "
            "refuses to serve rather than serve wrong state; move the data dir aside and "
            "restart this voter with an empty one (and --cluster-id) so that it catches up "
            "from the leader (docs/durability.md)"
        )


def header(version: bytes, fmt: int = FORMAT_CHECKSUMMED) -> bytes:
    return (
        NAME.ljust(NAME_SIZE, b"\0")
        + version[: VERSION_SIZE - 1].ljust(VERSION_SIZE, b"\0")
        + struct.pack("<II", fmt, HEADER_SIZE)
    )


def checksum(idx: int, term: int, command: bytes) -> int:
    return zlib.crc32(command, zlib.crc32(_IDX_TERM.pack(idx, term)))


def encode_entry(command: bytes, idx: int, term: int, fmt: int) -> bytes:
    body = _IDX_TERM.pack(idx, term) + command
    if fmt == FORMAT_CHECKSUMMED:
        body += _U32.pack(checksum(idx, term, command))
    size = _U32.pack(len(body))
    return size + body + size


@dataclass
class Scan:
    fmt: int
    entries: list[tuple[bytes, int, int]] = field(default_factory=list)
    end: int = HEADER_SIZE  # where the next entry goes
    torn: str | None = None  # why a torn last entry was dropped, if one was


def scan(read: Callable[[int, int], bytes], size: int, path: str) -> Scan:
    """Reads and checks a journal of ``size`` bytes through ``read(offset, n)``."""
    if size < HEADER_SIZE:
        raise JournalCorruptError(path, 0, f"the file has {size} bytes, less than a header")
    head = read(0, HEADER_SIZE)
    fmt, last = struct.unpack_from("<II", head, NAME_SIZE + VERSION_SIZE)
    if not head.startswith(NAME) or fmt not in (FORMAT_PYSYNCOBJ, FORMAT_CHECKSUMMED):
        raise JournalCorruptError(path, 0, f"not a journal header ({head[:36]!r})")
    if last < HEADER_SIZE:
        raise JournalCorruptError(path, LAST_OFFSET_AT, f"the header's end offset {last} is bad")
    result = Scan(fmt)
    trailer = 4 if fmt == FORMAT_CHECKSUMMED else 0
    limit = min(last, size)
    offset, prev = HEADER_SIZE, None
    while offset < last:
        problem = _check_entry(read, offset, limit, trailer, prev)
        if problem is None:
            (length,) = _U32.unpack(read(offset, 4))
            body = read(offset + 4, length)
            idx, term = _IDX_TERM.unpack_from(body)
            command = body[16 : length - trailer]
            result.entries.append((command, idx, term))
            prev = (idx, term)
            offset += length + 8
            continue
        reason, sequence = problem
        where = f"entry {len(result.entries) + 1} (after Raft index {prev[0] if prev else '-'})"
        if sequence or not _is_last_entry(read, offset, last, size, trailer):
            raise JournalCorruptError(path, offset, f"{where}: {reason}")
        result.torn = f"{where} at byte offset {offset}: {reason}"
        break
    result.end = offset
    return result


def first_entry_index(read: Callable[[int, int], bytes], size: int) -> int | None:
    """The Raft index of the journal's first entry; None if it has none, or if
    the header or that entry is damaged (``scan`` names the damage)."""
    if size < HEADER_SIZE:
        return None
    head = read(0, HEADER_SIZE)
    fmt, last = struct.unpack_from("<II", head, NAME_SIZE + VERSION_SIZE)
    if not head.startswith(NAME) or fmt not in (FORMAT_PYSYNCOBJ, FORMAT_CHECKSUMMED):
        return None
    trailer = 4 if fmt == FORMAT_CHECKSUMMED else 0
    if last <= HEADER_SIZE or _check_entry(read, HEADER_SIZE, min(last, size), trailer, None):
        return None
    return _IDX_TERM.unpack(read(HEADER_SIZE + 4, 16))[0]


def _check_entry(read, offset: int, limit: int, trailer: int, prev) -> tuple[str, bool] | None:
    """None if the entry at ``offset`` is whole; else (why, is-a-sequence-error)."""
    if offset + 4 > limit:
        return f"the entry's size field is cut off (the data ends at {limit})", False
    (length,) = _U32.unpack(read(offset, 4))
    if length < 16 + trailer or offset + length + 8 > limit:
        return f"the entry declares {length} bytes, past the data's end at {limit}", False
    (again,) = _U32.unpack(read(offset + 4 + length, 4))
    if again != length:
        return f"its leading size {length} and trailing size {again} differ", False
    body = read(offset + 4, length)
    idx, term = _IDX_TERM.unpack_from(body)
    if trailer:
        (stored,) = _U32.unpack_from(body, length - 4)
        if stored != checksum(idx, term, body[16 : length - 4]):
            return "checksum mismatch", False
    if prev is not None and (idx != prev[0] + 1 or term < prev[1]):
        return f"Raft index {idx} term {term} does not follow index {prev[0]} term {prev[1]}", True
    return None


def _is_last_entry(read, offset: int, last: int, size: int, trailer: int) -> bool:
    """Whether the damaged entry at ``offset`` is exactly the journal's last one:
    one of its size fields, where readable, spans precisely to the header's end."""
    if offset + 4 <= size:
        (length,) = _U32.unpack(read(offset, 4))
        if offset + length + 8 == last:
            return True
    if HEADER_SIZE <= last - 4 and last <= size:
        (length,) = _U32.unpack(read(last - 4, 4))
        if length >= 16 + trailer and last - length - 8 == offset:
            return True
    return False
