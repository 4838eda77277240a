"""The end of a simulator run: the whole metadata log read back from the
cluster and checked offset by offset (metadata_records.log_invariants). A log
that starts after a snapshot is checked from the snapshot's state on.
"""

from __future__ import annotations

from metadata_records.log_invariants import LogInvariants

from .client import ClientError, MetaquorumClient

MAX_VIOLATIONS = 1000  # kept for the summary (the count is exact)


def restore_snapshot(checker: LogInvariants, body: dict) -> None:
    """A ``GET /v1/snapshot`` body: the state the log goes on from."""
    for obj in body["records"]:
        checker.restore_obj(obj)


def check_page(checker: LogInvariants, body: dict) -> None:
    """A ``GET /v1/log`` page, in offset order after the pages before it."""
    for obj in body["records"]:
        checker.check_obj(obj)


async def read_and_check_log(meta: MetaquorumClient) -> LogInvariants:
    """Reads the whole log back from the cluster and checks every offset."""
    checker = LogInvariants(max_violations=MAX_VIOLATIONS)
    offset = 0
    end = None
    while True:
        page = await meta.log(offset, 5000)
        if page.body.get("errorName") == "OFFSET_OUT_OF_RANGE":
            snap = await meta.snapshot()
            restore_snapshot(checker, snap.body)
            offset = snap.body["nextOffset"]
            continue
        if not page.ok:
            raise ClientError(f"reading the log: {page.error_name}: {page.error_message}")
        if end is None:
            end = page.body["highWatermark"]
        check_page(checker, page.body)
        offset = page.body["nextOffset"]
        if offset >= end or not page.body["records"]:
            break
    checker.finish()
    return checker
