"""quorum/runtime_tuning.py: young collections are rarer, the GIL switches
faster, the heap a voter holds after replay is frozen out of full
collections, and collections are counted for /metrics."""

import ctypes
import ctypes.util
import gc
import sys
import time
import zlib

import pytest

from quorum.runtime_tuning import (
    SWITCH_INTERVAL_S,
    YOUNG_THRESHOLD,
    GcPauses,
    freeze_startup_heap,
    tune_malloc,
    tune_runtime,
    watch_pauses,
)


def test_tune_then_freeze_the_startup_heap():
    thresholds, switch = gc.get_threshold(), sys.getswitchinterval()
    try:
        gc.disable()  # as serve and a worker start: off while they import
        tune_runtime()
        assert gc.isenabled()
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert sys.getswitchinterval() == SWITCH_INTERVAL_S
        startup_heap = [[i] for i in range(1000)]  # stands for the image
        freeze_startup_heap()
        assert gc.get_freeze_count() >= len(startup_heap)
        collected = {id(o) for generation in range(3) for o in gc.get_objects(generation)}
        assert all(gc.is_tracked(x) and id(x) not in collected for x in startup_heap)
    finally:
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(switch)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]  # fmt: skip


def test_a_zlib_sized_allocation_comes_from_the_heap_not_a_fresh_mapping():
    """After tune_malloc, a 300 KB allocation (zlib's state for each Raft
    message is about 270 KB) is served from glibc's heap: the count of mapped
    chunks (mallinfo2().hblks) does not grow while it is held."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("not glibc 2.33 or later: no mallinfo2")
    libc.mallinfo2.restype = _MallInfo2
    assert tune_malloc()
    before = libc.mallinfo2().hblks
    held = bytearray(300_000)
    assert libc.mallinfo2().hblks == before
    assert zlib.decompress(zlib.compress(bytes(held[:100]))) == bytes(100)


def test_collections_are_counted_by_generation():
    watch_pauses()
    watch_pauses()  # once only
    assert gc.callbacks.count(GcPauses.callback) == 1
    try:
        before = list(GcPauses.collections)
        gc.collect(0)
        gc.collect()
        assert GcPauses.collections[0] > before[0] and GcPauses.collections[2] > before[2]
        assert GcPauses.seconds[2] > 0
    finally:
        gc.callbacks.remove(GcPauses.callback)


def test_what_survives_a_full_collection_is_frozen_and_unfrozen_hourly(monkeypatch):
    import quorum.runtime_tuning as rt

    watch_pauses()
    gc.disable()  # only this test's collections: the counts it checks are exact
    try:
        freeze_startup_heap()
        frozen = gc.get_freeze_count()
        survivors = [[i] for i in range(500)]  # stands for new log records
        rt.refreeze()  # no full collection since the freeze: nothing to do
        assert gc.get_freeze_count() <= frozen  # (frozen objects may still be freed)
        gc.collect()
        rt.refreeze()
        collected = {id(o) for generation in range(3) for o in gc.get_objects(generation)}
        assert all(id(x) not in collected for x in survivors)  # frozen
        assert not GcPauses.full_since_freeze
        # An hour later everything is unfrozen, collected once, and frozen again.
        unfrozen = []
        monkeypatch.setattr(gc, "unfreeze", lambda real=gc.unfreeze: (unfrozen.append(1), real()))
        monkeypatch.setattr(rt, "_last_clean", time.monotonic() - rt.CLEAN_EVERY_S)
        rt.refreeze()
        assert unfrozen == [1] and gc.get_freeze_count() > 0
    finally:
        gc.enable()
        gc.callbacks.remove(GcPauses.callback)
        gc.unfreeze()


def test_a_large_topic_creation_is_frozen_without_waiting_for_a_full_collection():
    """The image grew by FREEZE_AFTER_NEW_ENTRIES partitions: its new
    registrations are frozen after a young collection, so the next full
    collection does not walk them; young garbage cycles are freed, not frozen."""
    import weakref

    import quorum.runtime_tuning as rt

    class Cycle:
        pass

    gc.disable()  # only this test's collections
    try:
        freeze_startup_heap(entries=100)
        partitions = [[i] for i in range(2000)]  # stands for new registrations
        rt.refreeze(entries=100 + rt.FREEZE_AFTER_NEW_ENTRIES - 1)  # not yet
        tracked = {id(o) for generation in range(3) for o in gc.get_objects(generation)}
        assert all(id(p) in tracked for p in partitions)
        garbage = Cycle()
        garbage.self = garbage
        dead = weakref.ref(garbage)
        del garbage
        rt.refreeze(entries=100 + rt.FREEZE_AFTER_NEW_ENTRIES)
        tracked = {id(o) for generation in range(3) for o in gc.get_objects(generation)}
        assert all(id(p) not in tracked for p in partitions)  # frozen
        assert dead() is None  # the young cycle was collected, not frozen
        frozen = gc.get_freeze_count()
        rt.refreeze(entries=100 + rt.FREEZE_AFTER_NEW_ENTRIES + 10)
        assert gc.get_freeze_count() <= frozen  # nothing new to freeze for
    finally:
        gc.unfreeze()
        gc.enable()
