"""One image a voter, however many processes follow its log: the core writes
its image into a memory file now and then, and every worker and the orderer
read their partitions from the newest (metadata_records/image_file.py says
what a file holds and how a process reads it).

When: one file as the links first need one (a process starting maps it and
replays the retained log on from it, instead of the core encoding its image
and the process decoding it: seconds each at 2,000,000 partitions), then a
new one each time ``REWRITE_RECORDS`` records (at least, or one per
``REWRITE_PER_PARTITION`` partitions) came after the newest, or fewer once
writes calm down (the end of a bulk load): what a process keeps of its own
is the partitions changed since its file, so this bounds it. A file of
2,000,000 partitions costs its writer (a child, on another core if there is
one) about a second.

How: the file is a memfd (memory, no path in any directory: nothing is left
behind when the core dies, and no mount's size limit applies, as /dev/shm's
64 MiB in a container would); a forked child writes the image into it (the
image is immutable, so copy-on-write hands the child the image at that
offset while the core goes on); the core checks the file once the child
exits 0 and only then names it to the links, as ``/proc/<core>/fd/<fd>``,
which a process of the same user opens. A file is closed ``CLOSE_AFTER_S``
after a newer one is written; a process that mapped it keeps reading it
until it takes the newer one, so the pages of two files are held only while
they switch.

If a file cannot be written, the links get an encoded image, as with the
switch off, and the failure is logged with what to do (tried again after
1, 5, 30, then every 60 s); a process that cannot open one asks again, and
after three misses gets encoded images (voter/core_link.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections import deque
from dataclasses import dataclass

from metadata_records.image import MetadataImage
from metadata_records.image_file import ImageFile, ImageFileError, write_image
from metadata_records.partition_states import COMPACT_PARTITIONS

log = logging.getLogger(__name__)

# Links read their partitions from a file the core writes (this module); False:
# each link is sent the image encoded and keeps a copy of its own (the plain twin).
SHARED_IMAGE = True

# METAQUORUM_IMAGE_FILE_RECORDS sets it (tests: a new file every few hundred records).
REWRITE_RECORDS = int(os.environ.get("METAQUORUM_IMAGE_FILE_RECORDS", "50000"))
REWRITE_PER_PARTITION = 0.05
# And once writes calm down (fewer than QUIET_RECORDS in QUIET_S) after at least
# QUIET_AFTER records: the end of a bulk load leaves no process holding its tail.
QUIET_S = 5.0
QUIET_RECORDS = 200
QUIET_AFTER = 1_000
# The core closes a file this long after a newer one is written: a process
# named it (starting, IMAGE_FILE) opens it within that. A process that maps
# a file keeps it as long as it reads it; one that was named a file the core
# closed before it opened it finds out by its offset (log_follower.opened)
# and asks again.
CLOSE_AFTER_S = 10.0
WRITE_TIMEOUT_S = 120.0
BACKOFF_S = (1.0, 5.0, 30.0, 60.0)


@dataclass(frozen=True)
class SharedFile:
    fd: int
    next_offset: int
    size: int
    file: ImageFile  # the core's own mapping: checked whole before it was named

    @property
    def path(self) -> str:
        """Where another process of the same user opens it."""
        return f"/proc/{os.getpid()}/fd/{self.fd}"


def enabled() -> bool:
    return SHARED_IMAGE and COMPACT_PARTITIONS


class SharedImage:
    """The core's image files. ``image()``: the core's image now;
    ``oldest_offset()``: the oldest offset its retained log still holds (a
    process starting from a file replays the log on from the file's offset)."""

    def __init__(self, image, oldest_offset) -> None:  # noqa: ANN001 - two callables
        self._image = image
        self._oldest_offset = oldest_offset
        self.files: list[SharedFile] = []
        self._writing: asyncio.Task | None = None
        self._child = 0
        self._failures = 0
        self._retry_at = 0.0
        self.written = 0
        self.failed = 0
        self.on_written: list = []  # callables of the new SharedFile
        self._samples: deque[tuple[float, int]] = deque([(time.monotonic(), 0)])

    # ---------------------------------------------------------------- reading

    def usable(self) -> SharedFile | None:
        """The newest file a process can start from now, or None."""
        if not self.files:
            return None
        newest = self.files[-1]
        if self._oldest_offset() <= newest.next_offset <= self._image().next_offset:
            return newest
        return None

    async def for_start(self) -> SharedFile | None:
        """A file to start a process from: the newest if usable, else one
        written now (None if that fails: the caller sends the image encoded)."""
        found = self.usable()
        if found is not None or time.monotonic() < self._retry_at:
            return found  # (None while backing off after a failure: encoded, at once)
        await self.write()
        return self.usable()

    def due(self, now: float) -> bool:
        """Whether a new file is due at ``now`` (monotonic): enough records
        since the newest, or some and writes have calmed down."""
        if not self.files or self._writing is not None or now < self._retry_at:
            return False
        image = self._image()
        since = image.next_offset - self.files[-1].next_offset
        if since >= max(REWRITE_RECORDS, image.partition_count * REWRITE_PER_PARTITION):
            return True
        samples = self._samples
        samples.append((now, image.next_offset))
        while len(samples) > 1 and samples[1][0] <= now - QUIET_S:
            samples.popleft()
        calm = samples[0][0] <= now - QUIET_S and image.next_offset - samples[0][1] < QUIET_RECORDS
        return since >= QUIET_AFTER and calm

    def tick(self) -> None:
        """Looked at now and then (the core's state watcher): a new file when due."""
        if self.due(time.monotonic()):
            asyncio.ensure_future(self.write())

    # ---------------------------------------------------------------- writing

    async def write(self) -> None:
        """A file of the image now (one write at a time: a second caller
        waits for the first)."""
        if self._writing is None:
            self._writing = asyncio.ensure_future(self._write(self._image()))
        try:
            await asyncio.shield(self._writing)
        finally:
            if self._writing is not None and self._writing.done():
                self._writing = None

    async def _write(self, image: MetadataImage) -> None:
        started = time.monotonic()
        fd = os.memfd_create(f"metaquorum-image-{image.next_offset}", os.MFD_CLOEXEC)
        try:
            code = await self._in_child(fd, image)
            if code != 0:
                raise OSError(f"its writer exited with {code}")
            file = ImageFile(f"/proc/self/fd/{fd}")
        except (OSError, ImageFileError) as e:
            os.close(fd)
            self._failed(image, e)
            return
        shared = SharedFile(fd, image.next_offset, file.size, file)
        if self.files:
            asyncio.get_running_loop().call_later(CLOSE_AFTER_S, self._close, self.files[-1])
        self.files.append(shared)
        self.written += 1
        self._failures = 0
        log.info(
            "image file at offset %d (%d partitions, %.1f MB) written in %.1f s",
            image.next_offset,
            image.partition_count,
            shared.size / 1e6,
            time.monotonic() - started,
        )
        for call in list(self.on_written):
            call(shared)

    async def _in_child(self, fd: int, image: MetadataImage) -> int:
        pid = os.fork()
        if pid == 0:  # the child: write, exit; never return into the core's loop
            code = 1
            try:
                with open(fd, "wb", closefd=False) as f:
                    write_image(f, image)
                code = 0
            finally:
                os._exit(code)
        self._child = pid
        try:
            _, status = await asyncio.wait_for(
                asyncio.to_thread(os.waitpid, pid, 0), WRITE_TIMEOUT_S
            )
        except TimeoutError:
            self._kill_child()
            return -1
        finally:
            self._child = 0
        return os.waitstatus_to_exitcode(status)

    def _failed(self, image: MetadataImage, error: Exception) -> None:
        self.failed += 1
        self._failures += 1
        backoff = BACKOFF_S[min(self._failures, len(BACKOFF_S)) - 1]
        self._retry_at = time.monotonic() + backoff
        log.error(
            "could not write the image file at offset %d (%d partitions): %s. The HTTP "
            "workers and the orderer start from an encoded image meanwhile (slower, and "
            "each keeps a copy of its own); tried again in %.0f s. If memory is short, "
            "give the voter more (docs/kubernetes.md sizes it) or run fewer HTTP workers.",
            image.next_offset,
            image.partition_count,
            error,
            backoff,
        )

    def _close(self, shared: SharedFile) -> None:
        if shared in self.files and shared is not self.files[-1]:
            self.files.remove(shared)
            os.close(shared.fd)  # its mappings stay readable

    def _kill_child(self) -> None:
        if self._child:
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(self._child, signal.SIGKILL)

    def stop(self) -> None:
        """On shutdown: a writer killed, the files closed."""
        self._kill_child()
        for shared in self.files:
            with contextlib.suppress(OSError):
                os.close(shared.fd)
        self.files = []
