"""Fixtures shared by test modules: one real single-voter node per module
(started once, always stopped) with the real app over it, and one real
``metaquorum serve`` voter process per module."""

import asyncio
import contextlib
import os

import pytest
from hypothesis import settings

from api.app import create_app

from .cluster import Cluster
from .local_node import LocalNode

# No per-example deadline: on a loaded 2-core machine one example of a fast
# test took 376 ms against the 200 ms default and failed CI as "flaky".
# Timing is measured in bench/, never asserted; a test that hangs is still
# stopped by pytest-timeout.
settings.register_profile("metaquorum", deadline=None)
settings.load_profile("metaquorum")

# Modules whose tests run in both of serve's HTTP layouts: the default one
# and two HTTP workers in front of the core (issue 26: the cluster, safety and
# broker tests in the multi-worker layout; tests/test_http_workers.py has its
# own tests of that layout, and the nemesis draws one layout a run from its
# seed: tests/faults/run.http_workers). A test marked ``layout("...")`` runs in
# that one only: each of these modules keeps both layouts covered, and runs
# twice only the tests whose path differs most between them (the suite's
# budget, docs/decisions.md 162).
BOTH_LAYOUTS = frozenset(
    {
        "test_cluster",
        "test_e2e",
        "test_agent",
        "test_journal_restart",
        "test_metadata_cache_acls",
        "test_disk_loss",
    }
)
LAYOUTS = ("default", "2-workers")


def pytest_generate_tests(metafunc):
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    if module in BOTH_LAYOUTS and "http_layout" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("layout")
        layouts = LAYOUTS if marker is None else marker.args
        assert set(layouts) <= set(LAYOUTS), f"layout({layouts}): one of {LAYOUTS}"
        metafunc.parametrize("http_layout", layouts, indirect=True, scope="module")


@pytest.fixture(autouse=True, scope="module")
def http_layout(request):
    """``serve``'s HTTP layout for the voters a module's tests start (they
    read METAQUORUM_HTTP_WORKERS when no flag says otherwise); module-scoped,
    so that a module's shared voter (``voter``) is started in each layout."""
    layout = getattr(request, "param", "default")
    saved = os.environ.get(WORKERS_ENV)
    if layout == "2-workers":
        os.environ[WORKERS_ENV] = "2"
    try:
        yield layout
    finally:
        if saved is None:
            os.environ.pop(WORKERS_ENV, None)
        else:
            os.environ[WORKERS_ENV] = saved


WORKERS_ENV = "METAQUORUM_HTTP_WORKERS"


@pytest.fixture(scope="module")
def local(tmp_path_factory, request):
    node = LocalNode(str(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])))
    try:
        node.wait_active()
        yield node
    finally:
        node.close()


@pytest.fixture(scope="module")
def app(local):
    return create_app(local.node)


@contextlib.contextmanager
def running(c: Cluster):
    """``c``'s voters started, one leading and all ready; stopped when the
    block ends, also on failure."""
    try:
        c.start()
        c.wait_ready()
        c.leader()
        yield c
    finally:
        c.close()


def running_cluster(root, voters: int = 1, **kw):
    """Voters as ``metaquorum serve`` processes (``running``)."""
    return running(Cluster(root, voters=voters, **kw))


def run_on_three_voters(root, scenario, **kw) -> None:
    """``asyncio.run(scenario(cluster, leader, follower))`` on 3 running
    voters, stopped afterwards, also on failure (the end-to-end tests)."""
    with running_cluster(root, voters=3, **kw) as c:
        leader = c.leader()
        follower = next(i for i in range(c.n) if i != leader)
        asyncio.run(scenario(c, leader, follower))


@pytest.fixture
def cluster(tmp_path):
    """Three voters as ``metaquorum serve`` processes, started (not yet ready)."""
    c = Cluster(tmp_path)
    try:
        yield c.start()
    finally:
        c.close()


@pytest.fixture(scope="module")
def voter(tmp_path_factory, request, http_layout):
    """A single-voter ``metaquorum serve`` process, leading and ready (one
    per HTTP layout the module runs in)."""
    with running_cluster(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])) as c:
        yield c


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every Spark test (starting one takes seconds)."""
    from pipeline.spark import build_session

    # The tests' logs are tiny: a Spark job's fixed cost is nearly all of an
    # audit's time. Adaptive execution runs each shuffle as a job of its own
    # (about 50 jobs a tiny audit, 12 without), so it is off here, and one
    # shuffle partition does. The product's settings (adaptive on) are
    # exercised by tests/test_audit_cluster.py. test_pipeline.py: 241 -> 181 s.
    session = build_session(
        "local[2]",
        **{
            "spark.sql.shuffle.partitions": "1",
            "spark.default.parallelism": "2",
            "spark.sql.adaptive.enabled": "false",
        },
    )
    try:
        yield session
    finally:
        session.stop()


# ---------------------------------------------------------------- the suite's time
# CI's budget is the whole suite's wall time on two workers (README), and
# ``--dist loadfile`` gives each file to one worker: a file's total is what can
# hold a worker back at the end. The slowest files are printed after the run.
_FILE_SECONDS: dict[str, float] = {}
_WORKER_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration
    node = getattr(report, "node", None)  # the xdist worker that ran it (controller side)
    worker = getattr(getattr(node, "gateway", None), "id", "main")
    _WORKER_SECONDS[worker] = _WORKER_SECONDS.get(worker, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _FILE_SECONDS or hasattr(terminalreporter.config, "workerinput"):
        return
    terminalreporter.section("slowest files (seconds, setup + call + teardown)")
    slowest = sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:40]
    for path, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.1f}  {path}")
    busy = ", ".join(f"{w} {s:.0f} s" for w, s in sorted(_WORKER_SECONDS.items()))
    terminalreporter.write_line(
        f"{sum(_FILE_SECONDS.values()):8.1f}  in all ({len(_FILE_SECONDS)} files; busy: {busy})"
    )
