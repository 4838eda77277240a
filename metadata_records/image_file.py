"""An image as a file that every process of a voter maps: one copy of the
partitions a voter, however many processes follow its log.

The core writes its image at an offset into a file (voter/shared_image.py
says when, and where); the HTTP workers and the orderer map it read-only, so
the page cache holds its partitions once for all of them. A process's image
then reads each partition from the file until a batch changes it: the
changed slots (and chunks made since) are its own, in ``FileChunk``'s
changes, and a newer file takes them back (``rebased``).

The layout, all positions absolute, integers little-endian:

* a header, ``_HEADER``: magic, the image's next offset, where the head and
  the index sit and how long each is;
* every topic's chunks (``PartitionStates``'s chunks of 256 ids): the slots'
  ``marshal`` bytes one after another, then ``n + 1`` uint64 bounds from the
  first slot's start (slot ``i`` is ``[bounds[i], bounds[i + 1])``, empty
  where there is no partition: a chunk's bytes are the same wherever it sits);
* the head: ``encode_image`` of the image with no partition in it (the
  snapshot's canonical JSON: everything but the partitions, decoded by the
  same code as a snapshot);
* the index: ``marshal`` of ``((topic id, partitions, ((chunk key, slots
  position, bounds position, slots), ...)), ...)``, each topic's chunks in
  the order its map iterates them.

A file is written whole before any reader is named it (the core's memfd,
voter/shared_image.py; ``write_image_file`` writes one at a path through a
``.part`` file renamed when complete), and never changed after: a reader
maps a whole file or none, and a file closed or unlinked while a process
maps it stays readable to that process (so the writer can let old files go
without asking who still reads them). Files are not kept across restarts,
and only the core's own processes are named one, so reading one trusts it as
the core's own memory, checking only that it is whole.
"""

from __future__ import annotations

import contextlib
import marshal
import mmap
import os
import struct
from typing import BinaryIO

from .chunked_map import ChunkedMap, chunked_with
from .image import MetadataImage
from .partition_states import FileChunk, PartitionStates, _from_chunks, file_chunk_bytes
from .snapshot import decode_image, encode_image

MAGIC = b"MQIMAGE1"
# magic, next offset, head position, head length, index position, index length
_HEADER = struct.Struct("<8sQQQQQ")


class ImageFileError(Exception):
    """An image file that is missing, cut short or not one: its message says which."""


def write_image_file(path: str, image: MetadataImage) -> int:
    """Writes ``image`` to ``path`` whole (through ``path + ".part"``,
    renamed when complete); returns the file's size. Not synced: a file
    lives only as long as the core that wrote it."""
    part = path + ".part"
    try:
        with open(part, "wb") as f:
            size = write_image(f, image)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise
    os.rename(part, path)
    return size


def write_image(f: BinaryIO, image: MetadataImage) -> int:
    """Writes ``image`` into the empty file ``f`` (seekable); returns its size."""
    index = []
    f.write(bytes(_HEADER.size))
    at = _HEADER.size
    for topic_id, topic in image.topics.items():
        states = topic.partitions
        if not isinstance(states, PartitionStates):
            states = PartitionStates(states)
        chunks = []
        for key, chunk in states._chunks.items():
            data, bounds = file_chunk_bytes(chunk)
            f.write(data)
            f.write(bounds)
            chunks.append((key, at, at + len(data), len(chunk)))
            at += len(data) + len(bounds)
        index.append((topic_id, len(states), tuple(chunks)))
    head = encode_image(
        image._replace(
            topics=ChunkedMap({tid: t._replace(partitions={}) for tid, t in image.topics.items()}),
            partition_count=0,
        )
    )
    encoded_index = marshal.dumps(tuple(index))
    f.write(head)
    f.write(encoded_index)
    f.seek(0)
    f.write(
        _HEADER.pack(MAGIC, image.next_offset, at, len(head), at + len(head), len(encoded_index))
    )
    f.flush()
    return at + len(head) + len(encoded_index)


class ImageFile:
    """One image file, mapped: its offset, its whole image, each topic's chunks."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < _HEADER.size:
                    raise ImageFileError(
                        f"image file {path}: {size} bytes, shorter than its header"
                    )
                self._buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise ImageFileError(f"image file {path}: {e.strerror or e}") from None
        magic, self.next_offset, head_at, head_len, index_at, index_len = _HEADER.unpack_from(
            self._buf, 0
        )
        if magic != MAGIC:
            raise ImageFileError(f"image file {path}: not an image file (magic {magic!r})")
        if head_at + head_len != index_at or index_at + index_len != size:
            raise ImageFileError(f"image file {path}: cut short ({size} bytes)")
        self._head = (head_at, head_len)
        self._topics: dict[str, tuple[int, tuple]] = {
            topic_id: (count, chunks)
            for topic_id, count, chunks in marshal.loads(self._buf[index_at:size])
        }
        self.size = size

    def chunks(self, topic_id: str) -> dict[int, FileChunk] | None:
        """The topic's chunks read from the file, or None if it has no such topic."""
        found = self._topics.get(topic_id)
        if found is None:
            return None
        buf = self._buf
        at = self.next_offset
        return {key: FileChunk(buf, data, bounds, n, at) for key, data, bounds, n in found[1]}

    def image(self) -> MetadataImage:
        """The whole image the file holds, its partitions read from the file."""
        at, length = self._head
        head = decode_image(self._buf[at : at + length])
        topics = ChunkedMap(
            {
                topic_id: topic._replace(
                    partitions=_from_chunks(self.chunks(topic_id) or {}, self._count(topic_id))
                )
                for topic_id, topic in head.topics.items()
            }
        )
        return head._replace(
            topics=topics, partition_count=sum(count for count, _ in self._topics.values())
        )

    def _count(self, topic_id: str) -> int:
        found = self._topics.get(topic_id)
        return 0 if found is None else found[0]


def rebased(image: MetadataImage, file: ImageFile) -> MetadataImage:
    """``image``, equal, reading from ``file`` (written at an offset ``image``
    is at or past) every partition the two hold alike: the partitions a
    process keeps of its own shrink to those changed since the file.
    ValueError for a file older than one the image reads from (what a chunk
    does not hold of its own is then not known to be the older file's)."""
    if image.next_offset < file.next_offset:
        raise ValueError(
            f"an image at offset {image.next_offset} cannot be read from a file at "
            f"{file.next_offset}: it would serve the future"
        )
    changed: dict[str, object] = {}
    for topic_id, topic in image.topics.items():
        chunks = file.chunks(topic_id)
        if chunks is not None and isinstance(topic.partitions, PartitionStates):
            changed[topic_id] = topic._replace(partitions=topic.partitions.rebased(chunks))
    if not changed:
        return image
    return image._replace(topics=chunked_with(image.topics, changed))
