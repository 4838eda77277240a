"""The web console in a real browser: Debian's headless Chromium, driven by
selenium through Debian's chromedriver (never a downloaded browser or driver),
against a real 3-voter cluster with auth on and brokers that heartbeat.

It signs in with a read token; the pages show the brokers and partitions the
API reports, under-replicated ones highlighted; a broker whose heartbeats
stop is fenced, and its explain page says why; a leader change shows on the
open page without a reload; without a credential nothing about the cluster
is served. It screenshots each page: into docs/console/ when
METAQUORUM_SCREENSHOTS=1 (how docs/console/*.png are made), else the test's
own folder. Skipped where Chromium is missing, failed in CI (.ci/run
installs it)."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from .cluster import Cluster
from .test_cluster import register_body

pytestmark = pytest.mark.slow

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
TOKENS = """\
ops.admin-secret admin
viewer.read-secret read
"""
ADMIN = {"Authorization": "Bearer ops.admin-secret"}
READ_TOKEN = "viewer.read-secret"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "console"
WAIT_S = 45


def _needs_browser():
    why = None
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        why = "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
    else:
        try:
            import selenium  # noqa: F401
        except ImportError:
            why = "selenium is not installed (pip install -e '.[dev]')"
    if why:
        if os.environ.get("METAQUORUM_CI"):
            pytest.fail(why)
        pytest.skip(why)


def _descendants(pid: int) -> list[int]:
    """Every live process under ``pid`` (Chromium's many), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Browser:
    """Headless Chromium at 1280x800; ``close`` ends it and every process it started."""

    def __init__(self, shots: Path) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never download anything
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in (
            "--headless=new",
            "--no-sandbox",  # root in CI
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1280,800",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-background-networking",
        ):
            options.add_argument(arg)
        self.service = Service(CHROMEDRIVER)
        self.driver = webdriver.Chrome(service=self.service, options=options)
        self.driver.set_page_load_timeout(WAIT_S)
        self.shots = shots

    def open(self, url: str, view: str) -> None:
        self.driver.get(url)
        self.wait_view(view)

    def wait_view(self, view: str) -> None:
        def drawn() -> bool:
            loaded = self.js("return document.body.dataset.loaded")
            if loaded == "error":
                message = self.driver.find_element("id", "error").text
                raise AssertionError(f"{self.driver.current_url} could not load: {message}")
            return loaded == view

        self.until(drawn, f"view {view}")

    def until(self, condition, what: str, timeout_s: float = WAIT_S):
        deadline = time.monotonic() + timeout_s
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{what} not reached within {timeout_s} s at {self.driver.current_url}:\n"
                    + self.driver.find_element("tag name", "body").text[:2000]
                )
            time.sleep(0.1)

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    def texts(self, selector: str) -> list[str]:
        return self.js(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent)", selector
        )

    def shot(self, name: str) -> None:
        path = self.shots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        _shrink(path)

    def close(self) -> None:
        process = getattr(self.service, "process", None)
        under = _descendants(process.pid) if process is not None else []
        try:
            self.driver.quit()
        finally:
            for pid in under:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _shrink(path: Path) -> None:
    """A screenshot as a 256-colour PNG (a third of the bytes), when Pillow is there."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256)
    small.save(path, optimize=True)


class Heartbeats:
    """Brokers that heartbeat every 0.5 s through any voter (redirected to the
    leader), until ``stop``; ``silence(id)`` stops one broker's heartbeats."""

    def __init__(self, c: Cluster, epochs: dict[int, int]) -> None:
        self.c, self.epochs = c, epochs
        self.silent: set[int] = set()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with httpx.Client(timeout=2.0, headers=ADMIN, follow_redirects=True) as client:
            while not self.done.wait(0.5):
                for broker_id, epoch in self.epochs.items():
                    if broker_id in self.silent:
                        continue
                    body = {
                        "brokerId": broker_id,
                        "brokerEpoch": epoch,
                        "currentMetadataOffset": 10**9,
                    }
                    for i in range(self.c.n):
                        if not self.c.alive(i):
                            continue
                        try:
                            r = client.post(self.c.url(i) + "/v1/brokers/heartbeat", json=body)
                        except httpx.HTTPError:
                            continue
                        if r.status_code == 200:
                            break

    def silence(self, broker_id: int) -> None:
        self.silent.add(broker_id)

    def stop(self) -> None:
        self.done.set()
        self.thread.join(timeout=10)


def write(c: Cluster, path: str, body: dict) -> dict:
    r = c.client.post(c.url(c.leader()) + path, json=body, follow_redirects=True)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def test_the_console_in_a_real_browser(tmp_path):
    _needs_browser()
    shots = DOCS if os.environ.get("METAQUORUM_SCREENSHOTS") == "1" else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    (tmp_path / "tokens").write_text(TOKENS)
    c = Cluster(
        tmp_path,
        extra=["--tokens-file", str(tmp_path / "tokens"), "--session-timeout-ms", "4000"],
    )
    c.client.headers.update(ADMIN)
    beats = browser = None
    try:
        c.start()
        c.wait_ready()
        epochs = {}
        for broker_id, rack in ((1, "r1"), (2, "r1"), (3, "r2"), (4, "r2")):
            body = {**register_body(c, broker_id), "rack": rack}
            epochs[broker_id] = write(c, "/v1/brokers/register", body)["brokerEpoch"]
        beats = Heartbeats(c, epochs)
        c.wait(
            lambda: all(
                not b["fenced"] for b in c.get(c.leader(), "/v1/brokers").json()["brokers"]
            ),
            30,
            "every broker unfenced",
        )
        topics = [
            {"name": "orders", "numPartitions": 6, "replicationFactor": 3},
            {"name": "payments", "numPartitions": 3, "replicationFactor": 2},
        ]
        created = write(c, "/v1/topics", {"topics": topics})
        assert all(t["errorCode"] == 0 for t in created["topics"]), created

        # Broker 4 stops heartbeating: its session expires and it is fenced.
        beats.silence(4)
        c.wait(lambda: c.get(c.leader(), "/v1/brokers/4").json()["fenced"], 30, "broker 4 fenced")

        leader = c.leader()
        shown = next(i for i in range(c.n) if i != leader)  # the browser reads a follower
        url = c.url(shown)
        c.wait(
            lambda: c.get(shown, "/v1/brokers/4").json()["fenced"], 30, "the follower sees 4 fenced"
        )

        # Without a credential: nothing about the cluster, and the browser is sent to sign in.
        anonymous = httpx.Client(timeout=5.0)
        for path in ("/ui", "/ui/brokers", "/ui/assets/app.js", "/ui/data/partitions"):
            r = anonymous.get(url + path)
            assert r.status_code == 401, (path, r.status_code)
            assert "orders" not in r.text and c.cluster_id not in r.text
        anonymous.close()

        browser = Browser(shots)
        browser.driver.get(url + "/ui/brokers")
        browser.until(lambda: browser.driver.current_url.endswith("/ui/login"), "the sign-in page")
        assert "orders" not in browser.driver.page_source
        browser.shot("login")
        browser.driver.find_element("id", "token").send_keys(READ_TOKEN)
        browser.driver.find_element("css selector", "button[type=submit]").click()
        browser.wait_view("quorum")
        cookie = browser.driver.get_cookie("mq_console")
        assert cookie and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert "read-secret" not in cookie["value"]

        # The quorum: the leader and the voters the API reports.
        status = c.get(shown, "/v1/quorum/status").json()
        browser.until(
            lambda: browser.texts("#leader-id") == [str(c.leader())], "the leader on the page"
        )
        assert sorted(browser.texts("tr[data-node] td:first-child")) == sorted(
            str(v["nodeId"]) for v in status["voters"]
        )
        browser.shot("quorum")

        # Brokers: the ones the API lists, 4 fenced.
        browser.open(url + "/ui/brokers", "brokers")
        api_brokers = c.get(shown, "/v1/brokers").json()["brokers"]
        ids = browser.js(
            "return [...document.querySelectorAll('tr[data-broker]')].map(e => e.dataset.broker)"
        )
        assert sorted(map(int, ids)) == sorted(b["brokerId"] for b in api_brokers)
        fenced_rows = browser.js(
            "return [...document.querySelectorAll('tr[data-broker].offline')].map(e => e.dataset.broker)"
        )
        assert fenced_rows == ["4"]
        browser.shot("brokers")

        # Partitions: every one the API lists, those without broker 4 in the
        # ISR it should be in highlighted as under-replicated.
        browser.open(url + "/ui/partitions", "partitions")
        api_topics = c.get(shown, "/v1/topics").json()["topics"]
        expected = {
            f"{t['name']}/{p['partitionIndex']}": len(p["isr"]) < len(p["replicas"])
            for t in api_topics
            for p in t["partitions"]
        }
        rows = browser.js(
            "return Object.fromEntries([...document.querySelectorAll('tr[data-partition]')]"
            ".map(e => [e.dataset.partition, e.classList.contains('under')]))"
        )
        assert rows == expected
        assert any(expected.values())  # broker 4 held replicas
        browser.shot("partitions")

        # The fenced broker's explain page says why.
        browser.open(url + "/ui/brokers/4", "broker-explain")
        explained = c.get(shown, "/v1/explain/brokers/4").json()
        page = browser.driver.find_element("id", "summary").text
        assert explained["state"] == "fenced" and explained["summary"] in page
        assert "fenced" in page.lower()
        browser.shot("broker-explain")

        under = next(k for k, v in expected.items() if v)
        topic, partition = under.split("/")
        browser.open(url + f"/ui/partitions/{topic}/{partition}", "partition-explain")
        reasons = c.get(shown, f"/v1/explain/partitions/{topic}/{partition}").json()["reasons"]
        page = browser.driver.find_element("id", "summary").text
        assert all(s in page for s in reasons)
        browser.shot("partition-explain")

        # The log, with who did each batch.
        browser.open(url + "/ui/log", "log")
        shown_offsets = browser.js(
            "return [...document.querySelectorAll('tr[data-offset]')].map(e => +e.dataset.offset)"
        )
        low = min(shown_offsets)
        records = c.get(shown, f"/v1/log?fromOffset={low}&maxRecords=1000").json()["records"]
        by_offset = {r["offset"]: (r.get("who") or {}).get("principal", "") for r in records}
        principals = browser.texts("tr[data-offset] td:nth-child(5)")
        assert principals == [by_offset[o] for o in shown_offsets]
        assert "controller" in principals  # the fencing sweep's batch, at least
        browser.shot("log")

        browser.open(url + "/ui/what-if?lose=racks:r1", "what-if")
        what_if = c.get(shown, "/v1/what-if?lose=racks:r1").json()
        assert str(what_if["counts"]["offline"]) in browser.texts(".card .value")
        browser.shot("what-if")

        # A leader change shows on the open page without a reload.
        browser.open(url + "/ui", "quorum")
        browser.js("window.notReloaded = true")
        leader = c.leader()
        target = next(i for i in range(c.n) if i != leader)
        r = c.client.post(
            c.url(leader) + "/v1/quorum/transfer-leadership", json={"targetNodeId": target}
        )
        assert r.status_code == 200, r.text
        assert c.leader(timeout_s=30) == target
        browser.until(
            lambda: browser.texts("#leader-id") == [str(target)], "the new leader on the page"
        )
        assert browser.js("return window.notReloaded") is True

        # Signed out: the console is gone again.
        browser.driver.get(url + "/ui/logout")
        browser.until(lambda: browser.driver.current_url.endswith("/ui/login"), "signed out")
        browser.driver.get(url + "/ui/partitions")
        browser.until(lambda: browser.driver.current_url.endswith("/ui/login"), "sent to sign in")
    finally:
        try:
            if browser is not None:
                browser.close()
        finally:
            if beats is not None:
                beats.stop()
            c.close()


def test_no_browser_download_is_possible():
    """The test's browser and driver are Debian's: the paths it names exist as
    files of packages, never a cache a tool filled."""
    _needs_browser()
    assert shutil.which("chromium") == CHROMIUM or os.path.exists(CHROMIUM)
    assert not os.path.realpath(CHROMEDRIVER).startswith(os.path.expanduser("~/.cache"))
