"""Prometheus metrics, one ``CollectorRegistry`` per app (so several apps, or
several tests, never share series).

Gauges are read from the node when scraped; the batch-size and commit-latency
histograms are fed from ``node.stats`` at scrape time (every batch committed
since the last scrape, up to the 1,024 the node remembers); request latencies
are observed by the app's middleware, labelled by route template.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from metadata_records.image import MetadataImage
from quorum.leadership_events import FIRST_WRITE_BUCKETS, LeadershipEvents, cumulative
from quorum.node import QuorumNode
from quorum.orderer import wall_clock_ms
from quorum.raft.durability import SyncStats
from quorum.runtime_tuning import gc_report

from .connections import ConnectionStats
from .served_node import ForwardingNode, ServedNode
from .tls import ReloadingContext

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
_BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000)


class _ImageCounts:
    """Broker and partition counts of one image, computed once per image.

    The partition counts are kept per topic and moved by what changed: a
    topic whose partitions are the same object as last time is skipped, one
    that changed is counted over the partitions that differ (``differing``),
    so a scrape after a batch costs what the batch changed, not a walk of
    every partition (2 s of a core at 2,000,000 partitions, per scrape)."""

    def __init__(self) -> None:
        self._image: MetadataImage | None = None
        self.fenced = self.active = self.shutting_down = self.offline = self.imbalanced = 0
        # topic id -> (its partitions as last counted, offline, imbalanced)
        self._topics: dict[str, tuple[Mapping, int, int]] = {}

    def of(self, image: MetadataImage) -> _ImageCounts:
        if image is not self._image:
            brokers = image.brokers.values()
            self.fenced = sum(1 for b in brokers if b.fenced)
            # Kafka's ActiveBrokerCount: registered and not fenced.
            self.active = sum(1 for b in brokers if not b.fenced)
            self.shutting_down = sum(1 for b in brokers if b.in_controlled_shutdown)
            self._count_partitions(image)
            self._image = image
        return self

    def _count_partitions(self, image: MetadataImage) -> None:
        before, after = self._topics, {}
        offline = imbalanced = 0
        for topic_id, topic in image.topics.items():
            parts = topic.partitions
            last = before.get(topic_id)
            if last is not None and last[0] is parts:
                counted = last
            elif last is not None and hasattr(parts, "differing"):
                counted = _recounted(last, parts)
            else:
                counted = (parts, *_counts(parts.values()))
            after[topic_id] = counted
            offline += counted[1]
            imbalanced += counted[2]
        self._topics = after
        self.offline, self.imbalanced = offline, imbalanced


def _counts(partitions) -> tuple[int, int]:
    """(offline, imbalanced) of these partitions: led by no one, and not led
    by their first replica (Kafka's PreferredReplicaImbalanceCount)."""
    offline = imbalanced = 0
    for p in partitions:
        if p.leader < 0:
            offline += 1
        if not p.has_preferred_leader:
            imbalanced += 1
    return offline, imbalanced


def _recounted(last: tuple[Mapping, int, int], parts: Mapping) -> tuple[Mapping, int, int]:
    """A topic's counts moved from ``last`` by the partitions that differ."""
    old, offline, imbalanced = last
    pids = list(parts.differing(old))
    gone = _counts(p for p in map(old.get, pids) if p is not None)
    came = _counts(p for p in map(parts.get, pids) if p is not None)
    return parts, offline - gone[0] + came[0], imbalanced - gone[1] + came[1]


# quorum/raft/pre_vote.PreVoteStats, as counters: (metric, help, attribute).
_PRE_VOTE_COUNTERS = (
    ("pre_vote_rounds", "pre-vote rounds this voter started", "rounds"),
    (
        "pre_vote_rounds_won",
        "pre-vote rounds a majority granted (this voter then stood for election)",
        "rounds_won",
    ),
    ("pre_votes_granted", "pre-votes this voter granted", "granted"),
    ("pre_votes_refused", "pre-votes this voter refused", "refused"),
    (
        "votes_refused_in_lease",
        "vote requests dropped while this voter heard a leader",
        "votes_refused_in_lease",
    ),
    (
        "leader_connections_lost",
        "times the leader's connection closed under this follower",
        "leader_connections_lost",
    ),
)


def _leadership_metrics(events: LeadershipEvents):
    """Elections and step-downs by cause, leader changes, heartbeat gaps, time
    to the first write after a leadership won here (quorum/leadership_events.py)."""
    started = CounterMetricFamily(
        "metaquorum_elections_started",
        "elections this voter started, by cause",
        labels=["cause"],
    )
    for cause, n in events.elections.items():
        started.add_metric([cause], n)
    yield started
    lost = CounterMetricFamily(
        "metaquorum_leadership_lost", "leaderships this voter lost, by cause", labels=["cause"]
    )
    for cause, n in events.losses.items():
        lost.add_metric([cause], n)
    yield lost
    yield CounterMetricFamily(
        "metaquorum_leader_changes",
        "times the leader this node follows became another node",
        value=events.leader_changes,
    )
    yield HistogramMetricFamily(
        "metaquorum_leader_heartbeat_gap_seconds",
        "seconds between two AppendEntries from the same leader, as this follower read them "
        "(the jitter the election timeout must outlast)",
        buckets=events.cumulative_buckets(),
        sum_value=events.gap_sum_s,
    )
    yield HistogramMetricFamily(
        "metaquorum_leader_change_first_write_seconds",
        "for each leadership this voter won: seconds from its previous leader's last "
        "AppendEntries (from when it stood, if it had heard none) to the first write of "
        "its term applied (the write outage of the leader change)",
        buckets=cumulative(FIRST_WRITE_BUCKETS, events.first_write_counts),
        sum_value=events.first_write_sum_s,
    )


class _NodeCollector(Collector):
    def __init__(self, node: QuorumNode, children: Any = None) -> None:
        self.node = node
        self.counts = _ImageCounts()
        # The orderer's and the HTTP workers' reports (voter/core_link.SummedRequests.gc).
        self.children = children

    def collect(self):
        node = self.node
        image = node.image
        counts = self.counts.of(image)
        raft = node.status()

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"metaquorum_{name}", doc, value=value)

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            return CounterMetricFamily(f"metaquorum_{name}", doc, value=value)

        yield gauge("active_controller", "1 if this node is the active controller", node.active)
        yield gauge("fenced_broker_count", "registered brokers that are fenced", counts.fenced)
        yield gauge("active_broker_count", "registered brokers that are not fenced", counts.active)
        yield gauge(
            "in_controlled_shutdown_broker_count",
            "registered brokers in controlled shutdown",
            counts.shutting_down,
        )
        yield gauge("registered_broker_count", "registered brokers", len(image.brokers))
        yield gauge("offline_partitions_count", "partitions without a leader", counts.offline)
        yield gauge(
            "preferred_replica_imbalance_count",
            "partitions not led by their preferred replica (the first of their replicas)",
            counts.imbalanced,
        )
        yield gauge("global_partition_count", "partitions", image.partition_count)
        yield gauge("global_topic_count", "topics", len(image.topics))
        yield gauge(
            "last_applied_offset", "offset of the last record this node applied", image.last_offset
        )
        applied_ms = node.sm.last_applied_timestamp_ms
        if applied_ms:  # Kafka's LastAppliedRecordTimestamp and LastAppliedRecordLagMs
            yield gauge(
                "last_applied_record_timestamp_ms",
                "the leader's wall clock when it built the last batch this node applied",
                applied_ms,
            )
            yield gauge(
                "last_applied_record_lag_ms",
                "this node's wall clock less last_applied_record_timestamp_ms (on an idle "
                "cluster at most about --metadata-max-idle-interval-ms while caught up)",
                wall_clock_ms() - applied_ms,
            )
        yield gauge("controller_epoch", "the image's controller epoch", image.controller_epoch)
        yield gauge("metadata_version", "finalized metadata.version", image.metadata_version)
        yield gauge(
            "commit_lag",
            "Raft entries committed but not yet applied on this node",
            max(0, raft.commit_index - raft.last_applied),
        )
        yield gauge("raft_term", "the Raft term this node knows", raft.term)
        yield gauge("queue_depth", "requests waiting for the next batch", node.queue_depth)
        yield gauge("voters", "voters in the committed voter set", len(node.voter_addresses()))
        yield gauge(
            "voter", "1 if this node votes (0: observer, joiner, removed)", node.guard.admitted
        )
        yield gauge("ready", "1 if this node is ready (/readyz)", node.ready)
        yield gauge("replaying", "1 while this node replays its log", node.replaying)
        if node.pre_vote is not None:
            stats = node.pre_vote.stats
            for name, doc, attr in _PRE_VOTE_COUNTERS:
                yield counter(name, doc, getattr(stats, attr))
        yield from _leadership_metrics(node.leadership)
        disk = node.disk
        yield gauge(
            "disk_writable",
            "1 if this voter can write its data dir (journal, term and vote); 0 fails /readyz",
            disk.writable,
        )
        if disk.free_bytes is not None:
            yield gauge("disk_free_bytes", "free bytes on the data dir's volume", disk.free_bytes)
        yield gauge(
            "disk_needed_bytes",
            "free bytes below which this voter stops writing (journal growth, meta file)",
            disk.reserve,
        )
        yield counter(
            "disk_write_failures",
            "journal, meta or probe writes that failed (no space, I/O error)",
            disk.write_failures,
        )
        yield counter(
            "snapshot_failures",
            "snapshots not written: no room found before the attempt, or the writer failed",
            node.sm.snapshot_failures,
        )
        history = node.sm.history
        if history is not None:
            yield counter(
                "history_write_failures",
                "history store writes that failed (no space, I/O error): batches skipped, "
                "images served from after them (docs/durability.md 'History')",
                history.write_failures,
            )
            yield counter(
                "history_dropped_batches",
                "batches the history store skipped because its writer fell behind",
                history.dropped,
            )
        yield counter("throttled_requests", "requests refused by admission control", node.throttled)
        yield counter(
            "committed_batches", "batches this node committed as leader", node.stats.batches
        )
        yield counter(
            "committed_records", "records this node committed as leader", node.stats.records
        )
        yield counter(
            "noop_records",
            "periodic NoOpRecords this node committed as leader (--metadata-max-idle-interval-ms)",
            node.stats.noop_records,
        )
        yield counter(
            "leader_balance_elections",
            "preferred leaders this node elected back as leader (--auto-leader-rebalance-enable)",
            node.stats.balance_elections,
        )
        yield counter(
            "quiet_heartbeats",
            "heartbeats that changed nothing, answered from the committed image without a "
            "place in the queue (docs/decisions.md 139)",
            node.stats.quiet_heartbeats,
        )
        yield counter(
            "ignored_records", "records in the log that could not apply", image.ignored_records
        )
        yield counter("journal_syncs", "journal fdatasyncs (fsync=always)", SyncStats.syncs)
        yield counter("journal_sync_seconds", "time spent in journal fdatasyncs", SyncStats.seconds)
        yield _sync_histogram()
        yield counter(
            "meta_stores", "synced stores of term, vote and commit index", SyncStats.meta_stores
        )
        yield counter(
            "meta_store_seconds",
            "time spent storing term, vote and commit index",
            SyncStats.meta_seconds,
        )
        yield from self._gc_metrics()
        yield counter(
            "stale_batches",
            "batches applied as no-ops (stale epoch or offset)",
            node.sm.stale_batches,
        )

    def _gc_metrics(self):
        collections = CounterMetricFamily(
            "metaquorum_gc_collections",
            "garbage collections by generation (2 = full), of each of the voter's processes "
            "(core, orderer, worker-N)",
            labels=["generation", "process"],
        )
        pauses = CounterMetricFamily(
            "metaquorum_gc_pause_seconds",
            "time each process was stopped by garbage collections, by generation",
            labels=["generation", "process"],
        )
        frozen = GaugeMetricFamily(
            "metaquorum_gc_frozen_objects",
            "objects moved out of the collector's reach once the image was loaded",
            labels=["process"],
        )
        reports = [("core", gc_report())]
        if self.children is not None:
            reports += sorted(self.children.gc.items())
        for process, report in reports:
            for generation in range(3):
                collections.add_metric(
                    [str(generation), process], report["collections"][generation]
                )
                pauses.add_metric([str(generation), process], report["seconds"][generation])
            frozen.add_metric([process], report["frozen"])
        yield collections
        yield pauses
        yield frozen


def _sync_histogram() -> HistogramMetricFamily:
    """Journal fdatasync latency (etcd's wal_fsync_duration_seconds): the
    disk's slow syncs, also those under the 100 ms that are logged."""
    cumulative, buckets = 0, []
    for bound, count in zip(SyncStats.SYNC_BUCKETS, SyncStats.sync_buckets, strict=False):
        cumulative += count
        buckets.append((repr(float(bound)), cumulative))
    buckets.append(("+Inf", cumulative + SyncStats.sync_buckets[-1]))
    return HistogramMetricFamily(
        "metaquorum_journal_sync_duration_seconds",
        "journal fdatasync latency (fsync=always); the Raft thread waits for each",
        buckets=buckets,
        sum_value=SyncStats.seconds,
    )


class _ConnectionCollector(Collector):
    """The HTTP server's connections (api/connections.py): how many are open,
    and when the limits bite."""

    def __init__(self, stats: ConnectionStats) -> None:
        self.stats = stats

    def collect(self):
        stats = self.stats
        yield GaugeMetricFamily(
            "metaquorum_http_open_connections", "open HTTP connections", value=stats.open
        )
        for name, doc, counts in (
            ("refused", "connections refused at a cap (503), by cap", stats.refused),
            ("evicted", "waiting connections closed for a new one, by cap", stats.evicted),
            ("timed_out", "connections closed at a deadline, by phase", stats.timed_out),
        ):
            family = CounterMetricFamily(
                f"metaquorum_http_connections_{name}",
                doc,
                labels=["cap" if name != "timed_out" else "phase"],
            )
            keys = ("head", "body", "write") if name == "timed_out" else ("total", "per_address")
            for key in keys:
                family.add_metric([key], counts[key])
            yield family
        yield CounterMetricFamily(
            "metaquorum_http_invalid_requests",
            "requests that were not valid HTTP/1.1 (400, then closed)",
            value=stats.invalid,
        )
        yield CounterMetricFamily(
            "metaquorum_http_heads_refused",
            "request heads refused for their size (414, 431)",
            value=stats.head_too_large,
        )


class _TlsCollector(Collector):
    """The server certificate in use and its reloads (api/tls.py): alert on
    the expiry well before it, and on failed reloads (files that changed but
    could not be used)."""

    def __init__(self, tls: ReloadingContext) -> None:
        self.tls = tls

    def collect(self):
        tls = self.tls
        yield GaugeMetricFamily(
            "metaquorum_tls_certificate_expiry_timestamp_seconds",
            "when the server certificate in use expires (Unix time)",
            value=tls.current.not_after.timestamp(),
        )
        yield CounterMetricFamily(
            "metaquorum_tls_reloads", "TLS file changes put in use", value=tls.reloads
        )
        yield CounterMetricFamily(
            "metaquorum_tls_reload_failures",
            "checks that found changed TLS files that could not be used (the old ones serve)",
            value=tls.failures,
        )


class RequestCounts:
    """HTTP requests as /metrics shows them: responses by (method, route,
    status) and latency by (method, route), kept in plain dicts. Counting one
    is two dict updates and a bisect, where prometheus-client's metrics cost
    a label lookup each and, in the HTTP workers' multiprocess mode, three
    mmap writes (about 5% of a worker). ``totals`` is what an HTTP worker
    sends its core every second (voter/core_link.SummedRequests)."""

    __slots__ = ("responses", "latency", "auth_throttled")

    BOUNDS = _LATENCY_BUCKETS  # upper bounds; a last bucket for +Inf

    def __init__(self) -> None:
        self.responses: dict[tuple[str, str, str], int] = {}
        # (method, route) -> one count per bucket (not cumulative), then the sum
        self.latency: dict[tuple[str, str], list[float]] = {}
        # Requests refused (429) by the failed-check limit (api/failure_limit.py).
        self.auth_throttled = 0

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, str(status))
        self.responses[key] = self.responses.get(key, 0) + 1
        counts = self.latency.get(key[:2])
        if counts is None:
            counts = self.latency[key[:2]] = [0] * (len(self.BOUNDS) + 2)
        # Prometheus' buckets are "less than or equal": bisect_left.
        counts[bisect_left(self.BOUNDS, seconds)] += 1
        counts[-1] += seconds

    def totals(self) -> dict[str, Any]:
        return {
            "responses": dict(self.responses),
            "latency": {key: list(counts) for key, counts in self.latency.items()},
            "authThrottled": self.auth_throttled,
        }


def add_request_totals(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two ``RequestCounts.totals`` summed (a new dict)."""
    responses = dict(a["responses"])
    for key, n in b["responses"].items():
        responses[key] = responses.get(key, 0) + n
    latency = {key: list(counts) for key, counts in a["latency"].items()}
    for key, counts in b["latency"].items():
        mine = latency.get(key)
        latency[key] = (
            list(counts) if mine is None else [x + y for x, y in zip(mine, counts, strict=True)]
        )
    throttled = a.get("authThrottled", 0) + b.get("authThrottled", 0)
    return {"responses": responses, "latency": latency, "authThrottled": throttled}


class _RequestCollector(Collector):
    """The request metrics from ``totals()`` (this process's RequestCounts, or
    the HTTP workers' summed by the core), in prometheus-client's names."""

    def __init__(self, totals) -> None:  # noqa: ANN001 - () -> RequestCounts.totals()
        self.totals = totals

    def collect(self):
        totals = self.totals()
        latency = HistogramMetricFamily(
            "metaquorum_http_request_duration_seconds",
            "HTTP request latency by route (long polls included)",
            labels=["method", "route"],
        )
        bounds = [*(str(float(b)) for b in RequestCounts.BOUNDS), "+Inf"]
        for key, counts in sorted(totals["latency"].items()):
            running, buckets = 0, []
            for bound, n in zip(bounds, counts[:-1], strict=True):
                running += n
                buckets.append((bound, running))
            latency.add_metric(list(key), buckets, sum_value=counts[-1])
        yield latency
        responses = CounterMetricFamily(
            "metaquorum_http_responses",
            "HTTP responses by route and status",
            labels=["method", "route", "status"],
        )
        for key, n in sorted(totals["responses"].items()):
            responses.add_metric(list(key), n)
        yield responses
        yield CounterMetricFamily(
            "metaquorum_auth_throttled",
            "requests refused (429) before a hashed token's check because their client "
            "address failed such checks too often (docs/security.md)",
            value=totals.get("authThrottled", 0),
        )


class ApiMetrics:
    """``workers``: the core of a voter with HTTP workers renders their
    requests (voter/core_link.SummedRequests, reported every second) and counts
    none of its own (every request it answers came through a worker, which
    counted it). ``node`` an HTTP worker's (a ForwardingNode): only
    ``requests``, which it reports to its core (the worker renders nothing;
    /metrics is forwarded)."""

    def __init__(
        self,
        node: ServedNode,
        connections: ConnectionStats | None = None,
        tls: ReloadingContext | None = None,
        workers: Any = None,
    ) -> None:
        self.node = node
        self.registry = CollectorRegistry()
        self.requests = RequestCounts()
        self.count_requests = workers is None
        if isinstance(node, ForwardingNode):
            return
        self.registry.register(_NodeCollector(node, workers))
        if connections is not None:
            self.registry.register(_ConnectionCollector(connections))
        if tls is not None:
            self.registry.register(_TlsCollector(tls))
        self.registry.register(
            _RequestCollector(self.requests.totals if workers is None else workers.totals)
        )
        self._batch_metrics()

    def _batch_metrics(self) -> None:
        self.batch_records = Histogram(
            "metaquorum_batch_records",
            "records per committed batch (group commit)",
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.commit_latency = Histogram(
            "metaquorum_commit_latency_seconds",
            "time from proposing a batch to its apply, on the leader",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._batches_seen = self.node.stats.batches

    def count_auth_throttled(self) -> None:
        if self.count_requests:
            self.requests.auth_throttled += 1

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        if self.count_requests:
            self.requests.observe(method, route, status, seconds)

    def _feed_batches(self) -> None:
        stats = self.node.stats
        new = stats.batches - self._batches_seen
        if new <= 0:
            self._batches_seen = stats.batches
            return
        take = min(new, len(stats.sizes), len(stats.latencies))
        sizes = list(stats.sizes)[-take:] if take else []
        latencies = list(stats.latencies)[-take:] if take else []
        for size in sizes:
            self.batch_records.observe(size)
        for seconds in latencies:
            self.commit_latency.observe(seconds)
        self._batches_seen = stats.batches

    def render(self) -> bytes:
        self._feed_batches()
        return generate_latest(self.registry)
