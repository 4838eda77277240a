"""How a voter process runs CPython: its garbage collector and thread switching.

A voter holds a large, long-lived heap (the image, the retained log) and makes
many short-lived objects per request. CPython's defaults (a young collection
every 700 allocations, a full one whenever a quarter of the heap is new) made
the collector a third of a busy leader's CPU: bench/api.py with 100-partition
AlterPartition requests spent 2.3 s of 7 in the collector, 72 ms per full
collection, and per-request CPU fell from 6.1 to 3.4 ms with these settings.

* Young collections every ``YOUNG_THRESHOLD`` allocations instead of 700: a
  request's garbage is freed by reference counting anyway (the collector is for
  cycles, which metaquorum's immutable records and images do not make).
* The GIL is handed between threads every ``SWITCH_INTERVAL_S`` instead of
  5 ms: pysyncobj's tick thread (replication, commit, apply) waits for the GIL
  while the event loop parses and decides requests, and every batch needs it
  several times (bench/api.py: p50 20 -> 19 ms, p99 49 -> 43 ms at 4 clients).
* ``tune_malloc``: glibc's allocator serves requests up to ``MMAP_THRESHOLD``
  from its heap and keeps up to ``TRIM_THRESHOLD`` free there. pysyncobj
  zlib-compresses every Raft message, and zlib allocates about 270 KB of state
  per call: above glibc's default 128 KB threshold (which it raises only after
  a large free, so a small heap stays below it) every message was a fresh
  mmap, page faults and munmap, 50-65 us instead of 2-6 us, on both sides of
  every round trip.
* ``watch_pauses``: every collection is timed (``GcPauses``, in /metrics) and
  one that stops the process for ``LONG_PAUSE_S`` or more is logged.
* ``freeze_startup_heap``: once a restarted voter has replayed its snapshot and
  journal, that heap (the image, the log, the code) moves to the permanent
  generation, so full collections no longer walk it. Objects freed later are
  still freed by reference counting; only a cycle among them would be kept.
* ``refreeze``, called every half second by the serving loop
  (``manage_collector``, in every process that holds an image): after a full
  collection, what survived it (long-lived: new partitions, log records) is
  frozen too, so each full collection walks only what is newer than the last
  one (74 ms -> a few ms with a growing log and image); and after the image
  grew by 10,000 partitions and ACLs, without waiting for a full collection
  to walk them. Once an hour everything is unfrozen and collected once, so
  cycles that died while frozen are not kept for longer than that.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import sys
import time
from collections.abc import Callable

from metadata_records.image import MetadataImage

log = logging.getLogger(__name__)

YOUNG_THRESHOLD = 10_000
OLDER_THRESHOLDS = (10, 10)  # CPython's own
LONG_PAUSE_S = 0.1


class GcPauses:
    """Collections and the time they took, per generation (0 young, 2 full)."""

    collections = [0, 0, 0]
    seconds = [0.0, 0.0, 0.0]
    # Objects frozen at the last freeze: gc.get_freeze_count() walks them all
    # (0.9% of an idle worker's core when it was asked every second).
    frozen = 0
    full_since_freeze = False
    _started = 0.0

    @classmethod
    def callback(cls, phase: str, info: dict) -> None:
        if phase == "start":
            cls._started = time.perf_counter()
            return
        took = time.perf_counter() - cls._started
        generation = info["generation"]
        cls.collections[generation] += 1
        cls.seconds[generation] += took
        if generation == 2:
            cls.full_since_freeze = True
        if took >= LONG_PAUSE_S:
            log.warning(
                "garbage collector: a generation-%d collection stopped the process for "
                "%.0f ms (%d objects collected)",
                generation,
                took * 1000,
                info["collected"],
            )


SWITCH_INTERVAL_S = 0.001


MMAP_THRESHOLD = 1 << 20
TRIM_THRESHOLD = 8 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def tune_runtime() -> None:
    """The collector's thresholds (on again, where a process's start turned
    it off while it imported), thread switching and malloc."""
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
    gc.enable()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    tune_malloc()


def tune_malloc() -> bool:
    """Sets glibc's mmap and trim thresholds; False where there is no glibc
    (musl has no mallopt): nothing to tune there."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def trim_malloc() -> bool:
    """Hands the pages malloc holds free back to the kernel (glibc's
    ``malloc_trim``): after a process lets go of its own copy of many
    partitions at once (voter/shared_image.py), the freed memory sits
    between live objects, where the trim threshold never reaches it. About
    8 ms at 500,000 partitions let go; False where there is no glibc."""
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = (ctypes.c_size_t,)
    return bool(trim(0))


def gc_report() -> dict:
    """This process's collections and pauses by generation, and how many
    objects are frozen: what an orderer or HTTP worker reports to its core
    for /metrics (> 0 frozen: its heap was frozen once its image loaded)."""
    return {
        "collections": list(GcPauses.collections),
        "seconds": list(GcPauses.seconds),
        "frozen": GcPauses.frozen,
    }


def watch_pauses() -> None:
    if GcPauses.callback not in gc.callbacks:
        gc.callbacks.append(GcPauses.callback)


CLEAN_EVERY_S = 3600.0
FREEZE_AFTER_NEW_ENTRIES = 10_000
_last_clean = 0.0
_entries_at_freeze = 0


def freeze_startup_heap(entries: int = 0) -> None:
    """Collects once, then moves everything alive to the permanent generation."""
    global _last_clean, _entries_at_freeze
    gc.collect()
    _freeze()
    _last_clean = time.monotonic()
    _entries_at_freeze = entries
    GcPauses.full_since_freeze = False
    log.info("garbage collector: %d startup objects frozen", GcPauses.frozen)


def _freeze() -> None:
    gc.freeze()
    GcPauses.frozen = gc.get_freeze_count()


def refreeze(entries: int = 0) -> None:
    """Freezes what survived the last full collection; once every
    ``CLEAN_EVERY_S``, unfreezes and collects everything first.

    Also once the image holds ``FREEZE_AFTER_NEW_ENTRIES`` more partitions
    and ACLs than at the last freeze (``entries``: ``long_lived_entries``
    of the image): the registrations of a large topic creation are
    long-lived, and the next full collection walked them all (100-150 ms
    after topics of 2,000-25,600 partitions in bench/api.py); so are the
    ACLs and their indexes (a collection of 140-280 ms after CreateAcls of
    10,000 with 100,000 stored: docs/decisions.md 139). A young collection
    first, so what is only young garbage is freed rather than frozen."""
    global _last_clean, _entries_at_freeze
    if time.monotonic() - _last_clean >= CLEAN_EVERY_S:
        started = time.perf_counter()
        gc.unfreeze()
        freeze_startup_heap(entries)
        log.info("garbage collector: hourly full collection took %.0f ms",
                 (time.perf_counter() - started) * 1000)  # fmt: skip
    elif GcPauses.full_since_freeze:
        GcPauses.full_since_freeze = False
        _freeze()
        _entries_at_freeze = entries
    elif entries - _entries_at_freeze >= FREEZE_AFTER_NEW_ENTRIES:
        gc.collect(1)
        _freeze()
        _entries_at_freeze = entries
    else:  # deleted topics and ACLs lower the mark
        _entries_at_freeze = min(_entries_at_freeze, entries)


def long_lived_entries(image: MetadataImage) -> int:
    """What ``refreeze`` counts of an image: its partitions and its ACLs."""
    return image.partition_count + len(image.acls)


async def manage_collector(ready: Callable[[], bool], entries: Callable[[], int]) -> None:
    """Freezes the heap once ``ready`` (the image replayed or loaded), then
    what survives each full collection, from the event loop. Every process
    that holds an image runs it: the core, the orderer and each HTTP worker."""
    while not ready():
        await asyncio.sleep(0.1)
    freeze_startup_heap(entries())
    while True:
        await asyncio.sleep(0.5)
        refreeze(entries())
