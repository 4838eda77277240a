"""api/metrics.RequestCounts: the request metrics kept in plain dicts render
exactly what prometheus-client's own Histogram and Counter render for the same
requests (the plain version they replace), and the core's sum of its workers'
reports (voter/core_link.SummedRequests) keeps a replaced worker's counts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from api.metrics import RequestCounts, _RequestCollector
from voter.core_link import SummedRequests

requests = st.lists(
    st.tuples(
        st.sampled_from(["GET", "POST"]),
        st.sampled_from(["/v1/brokers/heartbeat", "/v1/topics/{name}", "unmatched"]),
        st.sampled_from([200, 307, 400, 503]),
        # the bucket bounds themselves, and values between and past them
        st.one_of(
            st.sampled_from([*RequestCounts.BOUNDS, 0.0, 31.0]),
            st.floats(min_value=0, max_value=60, allow_nan=False),
        ),
    ),
    max_size=60,
)


def samples(registry: CollectorRegistry) -> dict:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if not s.name.endswith("_created")  # prometheus-client's creation stamps
    }


def plain(observed, throttled: int = 0) -> CollectorRegistry:
    registry = CollectorRegistry()
    latency = Histogram(
        "metaquorum_http_request_duration_seconds",
        "HTTP request latency by route (long polls included)",
        ["method", "route"],
        buckets=RequestCounts.BOUNDS,
        registry=registry,
    )
    responses = Counter(
        "metaquorum_http_responses",
        "HTTP responses by route and status",
        ["method", "route", "status"],
        registry=registry,
    )
    for method, route, status, seconds in observed:
        latency.labels(method, route).observe(seconds)
        responses.labels(method, route, str(status)).inc()
    Counter(
        "metaquorum_auth_throttled",
        "requests refused (429) before a hashed token's check because their client "
        "address failed such checks too often (docs/security.md)",
        registry=registry,
    ).inc(throttled)
    return registry


def counted(totals) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(_RequestCollector(totals))
    return registry


def approx(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 1e-9 * max(1, abs(a[k])) for k in a)


@given(requests)
def test_the_counts_render_what_prometheus_clients_metrics_render(observed):
    counts = RequestCounts()
    for r in observed:
        counts.observe(*r)
    assert approx(samples(counted(counts.totals)), samples(plain(observed)))


@given(requests, requests, requests)
def test_the_workers_sum_is_every_request_and_a_replaced_workers_counts_stay(a, b, c):
    summed = SummedRequests()
    first, second = RequestCounts(), RequestCounts()
    for r in a:
        first.observe(*r)
    for r in b:
        second.observe(*r)
    first.auth_throttled, second.auth_throttled = len(a), 2
    summed.update(0, first.totals())
    summed.update(1, second.totals())
    summed.retire(0)  # worker 0 died; its replacement starts from nothing
    replacement = RequestCounts()
    for r in c:
        replacement.observe(*r)
    summed.update(0, replacement.totals())
    # The refusals of the failed-check limit are summed as the requests are.
    assert approx(samples(counted(summed.totals)), samples(plain(a + b + c, len(a) + 2)))


def test_the_totals_a_worker_sends_are_a_copy():
    counts = RequestCounts()
    counts.observe("GET", "/metrics", 200, 0.001)
    sent = counts.totals()
    counts.observe("GET", "/metrics", 200, 0.001)
    assert sent["responses"] == {("GET", "/metrics", "200"): 1}
    assert sum(sent["latency"][("GET", "/metrics")][:-1]) == 1
