"""The garbage collector's policy for a voter process.

A voter holds a large, long-lived heap (the image, the retained log) and makes
many short-lived objects per request. CPython's defaults (a young collection
every 700 allocations, a full one whenever a quarter of the heap is new) made
the collector a third of a busy leader's CPU: bench/api.py with 100-partition
AlterPartition requests spent 2.3 s of 7 in the collector, 72 ms per full
collection, and per-request CPU fell from 6.1 to 3.4 ms with these settings.

* Young collections every ``YOUNG_THRESHOLD`` allocations instead of 700: a
  request's garbage is freed by reference counting anyway (the collector is for
  cycles, which metaquorum's immutable records and images do not make).
* ``freeze_startup_heap``: once a restarted voter has replayed its snapshot and
  journal, that heap (the image, the log, the code) moves to the permanent
  generation, so full collections no longer walk it. Objects freed later are
  still freed by reference counting; only a cycle among them would be kept.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)

YOUNG_THRESHOLD = 10_000
OLDER_THRESHOLDS = (10, 10)  # CPython's own


def tune_gc() -> None:
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)


def freeze_startup_heap() -> None:
    """Collects once, then moves everything alive to the permanent generation."""
    gc.collect()
    gc.freeze()
    log.info("garbage collector: %d startup objects frozen", gc.get_freeze_count())
