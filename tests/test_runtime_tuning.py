"""quorum/runtime_tuning.py: young collections are rarer, the GIL switches
faster, the heap a voter holds after replay is frozen out of full
collections, and collections are counted for /metrics."""

import gc
import sys

from quorum.runtime_tuning import (
    SWITCH_INTERVAL_S,
    YOUNG_THRESHOLD,
    GcPauses,
    freeze_startup_heap,
    tune_runtime,
    watch_pauses,
)


def test_tune_then_freeze_the_startup_heap():
    thresholds, switch = gc.get_threshold(), sys.getswitchinterval()
    try:
        tune_runtime()
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert sys.getswitchinterval() == SWITCH_INTERVAL_S
        startup_heap = [{"partition": i} for i in range(1000)]  # stands for the image
        freeze_startup_heap()
        assert gc.get_freeze_count() >= len(startup_heap)
        assert not any(gc.is_tracked(x) and x in gc.get_objects(2) for x in startup_heap[:3])
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(switch)


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
