"""A broker's metadata cache: the image, rebuilt from the log the controller serves.

Kafka's brokers follow the metadata log and replay it with the same code the
controller uses. So does this cache: ``metadata_records``' own ``ImageDelta``,
never a second implementation of the rules. ``MetadataCache`` is pure (pages of
log records in, images out); ``LogFollower`` is the async loop that long-polls
``GET /v1/log`` into it, falling back to ``GET /v1/snapshot`` when the log it
needs has been compacted away (410). The cache keeps an ``authorizer``
(``metadata_records.authorizer.StandardAuthorizer``) current with the image's
ACLs, as a Kafka broker's StandardAuthorizer follows the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from metadata_records.acls import StandardAcl
from metadata_records.authorizer import StandardAuthorizer
from metadata_records.codec import DecodeError, record_from_obj
from metadata_records.delta import ImageDelta
from metadata_records.image import EMPTY_IMAGE, MetadataImage
from metadata_records.records import PartitionChangeRecord

from .client import ClientError, MetaquorumClient

log = logging.getLogger(__name__)


class LogGap(Exception):
    """A page does not start where the cache is: the caller must resync."""


class MetadataCache:
    """The image at ``next_offset``, plus counters of what the log did to ISRs."""

    def __init__(
        self,
        super_users: frozenset[str] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.image: MetadataImage = EMPTY_IMAGE
        # Kafka's super.users and allow.everyone.if.no.acl.found (default false).
        self.authorizer = StandardAuthorizer(super_users, allow_everyone_if_no_acl_found)
        self.high_watermark = 0  # the serving node's next offset, as last seen
        # The leader's timestampMs on the last record applied (0: none yet, or
        # only a snapshot): on an idle cluster the periodic NoOpRecord keeps it
        # fresh, so lag_ms is the lag in time (Kafka's last-applied-record-lag-ms).
        self.last_applied_timestamp_ms = 0
        self.isr_shrinks = 0
        self.isr_expands = 0

    @property
    def next_offset(self) -> int:
        return self.image.next_offset

    @property
    def lag(self) -> int:
        return max(0, self.high_watermark - self.image.next_offset)

    def lag_ms(self, now_ms: int) -> int | None:
        """``now_ms`` (wall clock) less the last applied record's timestamp;
        None before any record was applied."""
        stamp = self.last_applied_timestamp_ms
        return None if not stamp else max(0, now_ms - stamp)

    def apply_page(self, records: Iterable[dict[str, Any]]) -> MetadataImage:
        """Replays log records (docs/api.md's record shape) that start at ``next_offset``.

        Raises ``LogGap`` if a record's offset is not the next one, and
        ``DecodeError`` if a record cannot be decoded; the image is then unchanged."""
        delta = ImageDelta(self.image)
        shrinks = expands = 0
        stamp = self.last_applied_timestamp_ms
        for obj in records:
            offset = obj.get("offset") if isinstance(obj, dict) else None
            if offset != delta.next_offset:
                raise LogGap(f"expected offset {delta.next_offset}, the log gave {offset!r}")
            record = record_from_obj(obj, f"log record at offset {offset}")
            if type(record) is PartitionChangeRecord and record.isr is not None:
                before = delta.partition(record.topic_id, record.partition_id)
                if before is not None:
                    old, new = set(before.isr), set(record.isr)
                    shrinks += bool(old - new)
                    expands += bool(new - old)
            delta.replay(record)
            stamp = obj.get("timestampMs", stamp)
        self.image = delta.apply()
        self._follow_acls(delta.acl_changes())
        self.last_applied_timestamp_ms = stamp
        self.isr_shrinks += shrinks
        self.isr_expands += expands
        return self.image

    def load_snapshot(self, records: Iterable[dict[str, Any]], next_offset: int) -> MetadataImage:
        """Replaces the image with a snapshot (every record at the snapshot's offset)."""
        delta = ImageDelta(EMPTY_IMAGE)
        for i, obj in enumerate(records):
            delta.replay(record_from_obj(obj, f"snapshot record {i}"))
        delta.next_offset = next_offset
        self.image = delta.apply()
        self.authorizer.load(self.image)
        return self.image

    def _follow_acls(self, changes: Mapping[str, StandardAcl | None]) -> None:
        """The authorizer follows the page's changes to the image's ACLs
        (what the delta changed, not a comparison of every ACL)."""
        for acl_id in changes:
            self.authorizer.remove_acl(acl_id)
        for acl_id, acl in changes.items():
            if acl is not None:
                self.authorizer.add_acl(acl_id, acl)


class LogFollower:
    """Follows the metadata log by long-poll, and wakes whoever waits for an offset.

    One follower can feed many agents in one process (the simulator), as if each
    broker's cache were at the same offset; a standalone agent has its own."""

    def __init__(
        self,
        client: MetaquorumClient,
        *,
        wait_ms: int = 1000,
        max_records: int = 5000,
        cache: MetadataCache | None = None,
    ) -> None:
        self.client = client
        self.wait_ms = wait_ms
        self.max_records = max_records
        self.cache = cache or MetadataCache()
        self._changed = asyncio.Condition()
        self.problem: str | None = None  # why the last read failed (None: it worked)

    @property
    def image(self) -> MetadataImage:
        return self.cache.image

    async def wait_for_offset(self, offset: int, timeout_s: float) -> bool:
        """Waits until the cache has applied ``offset`` (True) or the timeout passes."""

        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: self.cache.next_offset > offset)

        try:
            await asyncio.wait_for(reached(), timeout_s)
            return True
        except TimeoutError:
            return False

    async def run(self) -> None:
        """Follows until cancelled; errors are retried with a pause, never raised."""
        while True:
            try:
                await self.poll_once()
                self.problem = None
            except asyncio.CancelledError:
                raise
            except (ClientError, LogGap, DecodeError, KeyError, ValueError) as e:
                # A gap or a record we cannot decode: start again from a snapshot
                # rather than serve a cache that may be wrong.
                self.problem = f"{e.__class__.__name__}: {e}"
                if isinstance(e, LogGap | DecodeError):
                    await self._resync()
                await asyncio.sleep(0.2)
            except Exception as e:  # noqa: BLE001 - httpx and JSON surprises; keep following
                self.problem = f"{e.__class__.__name__}: {e}"
                log.warning("log follower: %s", self.problem)
                await asyncio.sleep(0.5)

    async def poll_once(self) -> None:
        page = await self.client.log(self.cache.next_offset, self.max_records, self.wait_ms)
        if page.body.get("errorName") == "OFFSET_OUT_OF_RANGE" or (
            page.error_code != 0 and "oldestOffset" in page.body
        ):
            await self._resync()
            return
        if not page.ok:
            raise ClientError(f"the log read failed: {page.error_name}: {page.error_message}")
        self.cache.high_watermark = page.body.get("highWatermark", self.cache.high_watermark)
        records = page.body.get("records") or []
        if records:
            self.cache.apply_page(records)
            await self._notify()

    async def _resync(self) -> None:
        snap = await self.client.snapshot()
        if not snap.ok:
            raise ClientError(f"the snapshot read failed: {snap.error_name}: {snap.error_message}")
        self.cache.load_snapshot(snap.body["records"], snap.body["nextOffset"])
        await self._notify()

    async def _notify(self) -> None:
        """Wakes whoever waits in ``wait_for_offset``."""
        async with self._changed:
            self._changed.notify_all()
