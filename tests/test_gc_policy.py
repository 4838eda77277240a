"""quorum/gc_policy.py: young collections are rarer, and the heap a voter
holds after replay is frozen out of full collections."""

import gc

from quorum.gc_policy import YOUNG_THRESHOLD, freeze_startup_heap, tune_gc


def test_tune_then_freeze_the_startup_heap():
    thresholds = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        startup_heap = [{"partition": i} for i in range(1000)]  # stands for the image
        freeze_startup_heap()
        assert gc.get_freeze_count() >= len(startup_heap)
        assert not any(gc.is_tracked(x) and x in gc.get_objects(2) for x in startup_heap[:3])
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
