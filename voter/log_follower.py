"""How an HTTP worker and the orderer process follow the committed log: the
core's batches applied, in order, to an image of their own, as an observer
follows a leader. One follower serves both (voter/worker_node.py,
voter/orderer_process.py), so both see the log the same way.

What it keeps true: the image only moves by the next batch (a batch that
does not follow it is a gap, never applied: the owner's link is lost then,
and its process started again); batches come from the batch ring
(voter/batch_ring.py) when the core has one, else over the link; when the
ring cannot serve, the core is asked once (CATCH_UP) and the ring is read
again once its answer (BATCHES, or an IMAGE) came.

With the voter's image file (voter/shared_image.py), the image starts from
the file the core names (IMAGE_FILE) and reads its partitions from it; each
newer file (REBASE) is taken once the image reaches its offset, so what the
process keeps of its own is what changed since its file.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from metadata_records.image_file import ImageFile, ImageFileError
from metadata_records.snapshot import decode_image
from quorum.runtime_tuning import trim_malloc
from quorum.state_machine import MetadataStateMachine

from .batch_ring import RingFollower, RingReader
from .link import BATCHES, CATCH_UP, IDLE, IMAGE, IMAGE_FILE, NO_FILE, REBASE, WAKE

log = logging.getLogger(__name__)


def load_image(sm: MetadataStateMachine, encoded: bytes | ImageFile, retained: tuple) -> None:
    """The core's IMAGE (or IMAGE_FILE) item into ``sm``: the image, and the
    retained log below it."""
    base, batches, next_offset = retained
    sm.image = encoded.image() if isinstance(encoded, ImageFile) else decode_image(encoded)
    sm.log.load(base, batches, next_offset)


def apply_batches(sm: MetadataStateMachine, batches: list, who: str) -> str | None:
    """The core's committed batches into ``sm``, in order; a batch that does
    not follow (it cannot happen while the core sends in order: never serve
    a gap) stops it, and the gap is returned, described."""
    for first_offset, _count, payload in batches:
        if first_offset != sm.image.next_offset:
            return (
                f"batch at offset {first_offset} does not follow {who}'s image "
                f"(next offset {sm.image.next_offset})"
            )
        sm.apply_batch(payload, _doApply=True)
    return None


def opened(path: str, offset: int) -> ImageFile:
    """The image file the core named, checked to be the one it meant: a file
    the core closed meanwhile may have left its descriptor's number to
    another file (ImageFileError names either)."""
    file = ImageFile(path)
    if file.next_offset != offset:
        raise ImageFileError(
            f"image file {path}: at offset {file.next_offset}, not {offset} "
            "(the core closed it meanwhile)"
        )
    return file


class LogFollower:
    """``sm``: the followed image and its retained log. ``who``: whose image,
    in a gap's description; ``reader``: who reads the ring, in its log lines.
    ``to_core``: sends one item to the core; ``on_gap(why)``: the link is
    lost; ``applied()``: batches moved the image; ``loaded()``: an image came
    (and the ring was read on from it)."""

    def __init__(
        self,
        log_retention: int,
        who: str,
        reader: str,
        to_core: Callable[[tuple], None],
        on_gap: Callable[[str], None],
        applied: Callable[[], None] | None = None,
        loaded: Callable[[], None] | None = None,
    ) -> None:
        self.sm = MetadataStateMachine(log_retention)
        self.who = who
        self.reader = reader
        self._to_core = to_core
        self._on_gap = on_gap
        self._applied = applied
        self._loaded = loaded
        self.has_image = asyncio.Event()
        self.ring: RingFollower | None = None  # the committed batches, from shared memory

    def follow_ring(self, ring_fd: int) -> None:
        """Reads the core's batch ring from now on; before the link connects,
        as the image the core sends first starts it."""
        self.ring = RingFollower(
            RingReader(ring_fd),
            lambda: self.sm.image.next_offset,
            self.apply,
            lambda offset: self._to_core((CATCH_UP, offset)),
            lambda offset: self._to_core((IDLE, offset)),
            self.reader,
        )
        self.ring.start()

    def stop(self) -> None:
        if self.ring is not None:
            self.ring.stop()

    def poll(self) -> None:
        """Reads the ring now: an answer names an offset its batch reached."""
        if self.ring is not None:
            self.ring.poll()

    # ---------------------------------------------------------------- the core's items

    def take(self, item: tuple) -> bool:
        """One item from the core's link: True if it was the follower's
        (BATCHES, IMAGE or WAKE), now handled; False for its owner to handle."""
        kind = item[0]
        if kind == BATCHES:
            self.batches(item[1])
        elif kind == IMAGE:
            self.load(item[1], item[2])
        elif kind == IMAGE_FILE:
            try:
                file = opened(item[1], item[2][2])
            except ImageFileError as e:
                self._to_core((NO_FILE, str(e)))
                return True
            self.load(file, item[2])
        elif kind == REBASE:
            self.rebase(item[1], item[2])
        elif kind == WAKE:
            self.wake()
        else:
            return False
        return True

    def load(self, encoded: bytes | ImageFile, retained: tuple) -> None:
        """IMAGE: the image to start from (on connect, or after a catch-up)."""
        self.sm.newer_file = None
        load_image(self.sm, encoded, retained)
        if self.ring is not None:
            self.ring.caught_up()
        self.has_image.set()
        if self._loaded is not None:
            self._loaded()

    def batches(self, batches: list) -> None:
        """BATCHES: the committed batches over the link (with a ring, a
        catch-up's answer: the ring is read on from there)."""
        self.apply(batches)
        if self.ring is not None:
            self.ring.caught_up()

    def wake(self) -> None:
        """WAKE: a batch past the offset this follower went idle at."""
        if self.ring is not None:
            self.ring.wake()

    def rebase(self, path: str, offset: int) -> None:
        """REBASE: a newer image file, taken now or once the image reaches it.
        One that cannot be read is skipped (the image keeps its own partitions;
        the next file is tried)."""
        try:
            self.sm.newer_file = opened(path, offset)
        except ImageFileError as e:
            log.warning("%s: a newer image file was skipped: %s", self.reader, e)
            return
        self._take_newer(self.sm.file_rebases)

    def _take_newer(self, rebases_before: int) -> None:
        """The newer file if the image reached it; the pages of what the image
        kept of its own handed back if it took one (here or in a batch's apply)."""
        self.sm.take_newer_file()
        if self.sm.file_rebases != rebases_before:
            trim_malloc()

    def apply(self, batches: list) -> None:
        rebases_before = self.sm.file_rebases
        gap = apply_batches(self.sm, batches, self.who)
        if gap is not None:
            self._on_gap(gap)
            return
        self._take_newer(rebases_before)
        if self._applied is not None:
            self._applied()
