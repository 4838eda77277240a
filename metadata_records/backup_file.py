"""The backup file: one image as of a committed offset, checked end to end.

Three parts, each on its own line:

1. a header, one line of JSON: ``"magic": "metaquorum-backup"`` first (so
   a foreign file is told apart from its first bytes), the file's format,
   the cluster id, the offsets the image is as of, its voter set and
   finalized features, its counts, when and where it was taken;
2. the image, in exactly ``snapshot.encode_image``'s canonical bytes, so
   that its SHA-256 is the ``image_digest`` voters report: a backup is
   checked against a voter with nothing but that digest. JSON as orjson
   writes it never holds a raw newline, so the image ends at the next one;
3. a trailer, one line of JSON: the header's SHA-256 and the image's byte
   count and SHA-256.

It is written in pieces (``backup_pieces``: the image from
``encode_image_chunks``), so a 2,000,000-partition image never sits whole in
memory as bytes, and read the same way: ``BackupCheck`` is fed the file's
bytes as they come (the download, or the file read back) and names what is
wrong: not a backup, a newer format, truncated at byte N, a digest that does
not match. Only ``load_backup`` decodes the image (a restore needs it; a
check of the bytes does not).

Pure: time is an argument (``created_at_ms``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from .codec import DecodeError, _decode_value, _encode_value, brief
from .features import METADATA_VERSION
from .image import MetadataImage
from .records import Kind
from .snapshot import SNAPSHOT_FORMAT, decode_image, encode_image_chunks

MAGIC = "metaquorum-backup"
BACKUP_FORMAT = 1
MAGIC_PREFIX = b'{"magic":"' + MAGIC.encode() + b'"'
# A header is a few hundred bytes (its voter set and features); anything
# longer without a newline is not one.
MAX_HEADER_BYTES = 1 << 20
MAX_TRAILER_BYTES = 4096
MEDIA_TYPE = "application/octet-stream"


class BackupError(Exception):
    """The file is not a whole, good backup; the message says what is wrong."""


def image_facts(image: MetadataImage) -> dict:
    """What the header says of the image, and what a check holds the decoded
    image against."""
    return {
        "nextOffset": image.next_offset,
        "lastOffset": image.last_offset,
        "controllerEpoch": image.controller_epoch,
        "voters": _encode_value(Kind.VOTERS, image.voters),
        "metadataVersion": image.metadata_version,
        "finalizedFeatures": dict(sorted(image.features.items())),
        "brokers": len(image.brokers),
        "topics": len(image.topics),
        "partitions": image.partition_count,
    }


def backup_header(
    image: MetadataImage, *, cluster_id: str, source_node_id: int, created_at_ms: int
) -> dict[str, Any]:
    return {
        "magic": MAGIC,
        "format": BACKUP_FORMAT,
        "imageFormat": SNAPSHOT_FORMAT,
        "clusterId": cluster_id,
        **image_facts(image),
        "createdAtMs": created_at_ms,
        "sourceNodeId": source_node_id,
    }


def backup_pieces(header: dict[str, Any], image: MetadataImage) -> Iterator[bytes]:
    """The file, piece by piece: the header line, the image's pieces, the trailer."""
    line = orjson.dumps(header)
    yield line + b"\n"
    digest, size = hashlib.sha256(), 0
    for piece in encode_image_chunks(image):
        digest.update(piece)
        size += len(piece)
        yield piece
    yield b"\n" + trailer_line(line, size, digest.hexdigest())


def trailer_line(header_line: bytes, image_bytes: int, image_sha256: str) -> bytes:
    return (
        orjson.dumps(
            {
                "headerSha256": hashlib.sha256(header_line).hexdigest(),
                "imageBytes": image_bytes,
                "imageSha256": image_sha256,
            }
        )
        + b"\n"
    )


@dataclass
class BackupSummary:
    header: dict[str, Any]
    image_bytes: int
    image_sha256: str
    file_bytes: int


@dataclass
class BackupCheck:
    """Fed a backup's bytes in order (``feed``), then ``finish``: the summary,
    or BackupError naming the first thing wrong and the byte it is at. With
    ``keep_image``, the image's bytes are kept for ``load_backup``."""

    keep_image: bool = False
    received: int = 0
    header: dict[str, Any] | None = None
    _header_line: bytes = b""
    _part: str = "header"  # then "image", then "trailer"
    _buffer: bytearray = field(default_factory=bytearray)
    _image_digest: Any = field(default_factory=hashlib.sha256)
    _image_bytes: int = 0
    image_pieces: list[bytes] = field(default_factory=list)

    def feed(self, data: bytes) -> None:
        self.received += len(data)
        if self._part == "header":
            self._buffer += data
            self._check_magic()
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) > MAX_HEADER_BYTES:
                    raise BackupError(
                        f"not a metaquorum backup: no header line in its first {MAX_HEADER_BYTES} bytes"
                    )
                return
            self._header_line = bytes(self._buffer[:end])
            self.header = _parse_header(self._header_line)
            rest = bytes(self._buffer[end + 1 :])
            self._buffer = bytearray()
            self._part = "image"
            data = rest
        if self._part == "image":
            end = data.find(b"\n")
            piece = data if end < 0 else data[:end]
            self._image_digest.update(piece)
            self._image_bytes += len(piece)
            if self.keep_image and piece:
                self.image_pieces.append(bytes(piece))
            if end < 0:
                return
            self._part = "trailer"
            data = data[end + 1 :]
        self._buffer += data
        if len(self._buffer) > MAX_TRAILER_BYTES:
            raise BackupError(
                f"not a whole backup: {len(self._buffer)} bytes after the image, where a "
                f"trailer line of at most {MAX_TRAILER_BYTES} belongs (two files joined?)"
            )

    def _check_magic(self) -> None:
        seen = bytes(self._buffer[: len(MAGIC_PREFIX)])
        if not MAGIC_PREFIX.startswith(seen):
            raise BackupError(
                f"not a metaquorum backup: it starts with {brief(seen[:40])}, not "
                f'{{"magic":"{MAGIC}" (a GET /v1/snapshot body or another file?)'
            )

    def finish(self) -> BackupSummary:
        if self._part == "header":
            raise BackupError(
                f"truncated at byte {self.received}: the file ends inside its header line"
                if self.received
                else "the file is empty: not a metaquorum backup"
            )
        if self._part == "image":
            raise BackupError(
                f"truncated at byte {self.received}: the file ends inside the image "
                f"({self._image_bytes} image bytes read, no trailer)"
            )
        line = bytes(self._buffer)
        end = line.find(b"\n")
        if 0 <= end < len(line) - 1:
            extra = len(line) - end - 1
            raise BackupError(
                f"not a whole backup: {extra} bytes follow its trailer, which ends at byte "
                f"{self.received - extra} (two files joined, or something appended?)"
            )
        if not line.endswith(b"\n"):
            raise BackupError(
                f"truncated at byte {self.received}: the file ends inside its trailer line"
            )
        trailer = _parse_trailer(line[:-1])
        header_sha = hashlib.sha256(self._header_line).hexdigest()
        if trailer["headerSha256"] != header_sha:
            raise BackupError(
                f"header digest mismatch: the header hashes to {header_sha}, the trailer "
                f"says {trailer['headerSha256']} (the header was changed or corrupted)"
            )
        assert self.header is not None
        _check_header_fields(self.header)
        image_sha = self._image_digest.hexdigest()
        if trailer["imageBytes"] != self._image_bytes:
            raise BackupError(
                f"image length mismatch: {self._image_bytes} image bytes, the trailer says "
                f"{trailer['imageBytes']} (truncated or corrupted)"
            )
        if trailer["imageSha256"] != image_sha:
            raise BackupError(
                f"image digest mismatch: the image hashes to {image_sha}, the trailer says "
                f"{trailer['imageSha256']} (corrupted)"
            )
        return BackupSummary(self.header, self._image_bytes, image_sha, self.received)


def _parse_header(line: bytes) -> dict[str, Any]:
    try:
        header = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise BackupError(f"corrupt header line (not JSON: {e})") from None
    if type(header) is not dict or header.get("magic") != MAGIC:
        raise BackupError("not a metaquorum backup: its first line has no magic")
    fmt = header.get("format")
    if type(fmt) is not int or fmt < 1:
        raise BackupError(f"corrupt header: format {brief(fmt)}")
    if fmt > BACKUP_FORMAT:
        raise BackupError(
            f"a newer backup format ({fmt}; this metaquorum reads {BACKUP_FORMAT}): "
            "use the metaquorum release that wrote it, or a newer one"
        )
    return header


def _check_header_fields(header: dict[str, Any]) -> None:
    """After the header's digest matched: its fields, each of its type."""
    expected = {
        "imageFormat": int, "clusterId": str, "nextOffset": int, "lastOffset": int,
        "controllerEpoch": int, "voters": list, "metadataVersion": int,
        "finalizedFeatures": dict, "brokers": int, "topics": int, "partitions": int,
        "createdAtMs": int, "sourceNodeId": int,
    }  # fmt: skip
    for key, kind in expected.items():
        if type(header.get(key)) is not kind:
            raise BackupError(f"corrupt header: {key} is {brief(header.get(key))}")
    if header["imageFormat"] != SNAPSHOT_FORMAT:
        raise BackupError(
            f"the image is in snapshot format {header['imageFormat']}; this metaquorum "
            f"reads {SNAPSHOT_FORMAT}: use the release that wrote it, or a newer one"
        )
    try:
        _decode_value(Kind.VOTERS, header["voters"], "header.voters")
    except DecodeError as e:
        raise BackupError(f"corrupt header: {e}") from None


def _parse_trailer(line: bytes) -> dict[str, Any]:
    try:
        trailer = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise BackupError(f"corrupt trailer line (not JSON: {e})") from None
    if (
        type(trailer) is not dict
        or type(trailer.get("headerSha256")) is not str
        or type(trailer.get("imageBytes")) is not int
        or type(trailer.get("imageSha256")) is not str
    ):
        raise BackupError(f"corrupt trailer: {brief(trailer)}")
    return trailer


def check_backup(pieces: Iterable[bytes], keep_image: bool = False) -> BackupCheck:
    check = BackupCheck(keep_image=keep_image)
    for piece in pieces:
        check.feed(piece)
    return check


def load_backup(pieces: Iterable[bytes]) -> tuple[BackupSummary, MetadataImage]:
    """The whole check: the bytes (``BackupCheck``), then the image decoded
    and held against its header (offset, counts, voters, features)."""
    check = check_backup(pieces, keep_image=True)
    summary = check.finish()
    data = b"".join(check.image_pieces)
    check.image_pieces.clear()
    try:
        image = decode_image(data)
    except DecodeError as e:
        raise BackupError(f"the image does not decode: {e}") from None
    del data
    header = summary.header
    found = image_facts(image)
    for key, value in found.items():
        if orjson.dumps(header[key]) != orjson.dumps(value):
            raise BackupError(
                f"the header does not match the image: {key} {brief(header[key])} in the "
                f"header, {brief(value)} in the image"
            )
    return summary, image


def describe(summary: BackupSummary) -> list[str]:
    """The header, as lines for people."""
    h = summary.header
    voters = ", ".join(f"{v['voterId']}@{v['host']}:{v['port']}" for v in h["voters"])
    taken = datetime.fromtimestamp(h["createdAtMs"] / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        f"cluster id {h['clusterId']}, taken from node {h['sourceNodeId']} at {taken}",
        f"as of offset {h['lastOffset']} (next offset {h['nextOffset']}), "
        f"{METADATA_VERSION} {h['metadataVersion']}",
        f"{h['brokers']:,} brokers, {h['topics']:,} topics, {h['partitions']:,} partitions; "
        f"voter set {voters or 'none written yet'}",
        f"image {summary.image_bytes:,} bytes, SHA-256 {summary.image_sha256}; "
        f"file {summary.file_bytes:,} bytes",
    ]
