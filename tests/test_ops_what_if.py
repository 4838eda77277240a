"""``metaquorum what-if`` and the guard of ``unregister-broker`` against a
real voter (``metaquorum serve``): what they print, their exit codes, the
refusal naming the partitions a broker's loss takes offline, then --force."""

import json
import threading

import httpx
import pytest

from .test_cluster import register_body
from .test_ops import mq

RACKS = {81: "ra", 82: "rb"}


@pytest.fixture
def live_brokers(voter):
    """Brokers 81 (rack ra) and 82 (rack rb), kept unfenced by a heartbeat a
    second until the test ends (a loaded machine must not let their 9 s
    sessions lapse); topic wi on [81] alone, wj on [81, 82]."""
    epochs = {}
    for b, rack in RACKS.items():
        reg = voter.post(0, "/v1/brokers/register", {**register_body(voter, b), "rack": rack})
        epochs[b] = reg.json()["brokerEpoch"]
    stop = threading.Event()
    beating = threading.Event()

    def heartbeat() -> None:
        with httpx.Client(timeout=10.0) as client:
            while not stop.is_set():
                for b, epoch in epochs.items():
                    body = {"brokerId": b, "brokerEpoch": epoch, "currentMetadataOffset": 10**9}
                    try:
                        client.post(voter.url(0) + "/v1/brokers/heartbeat", json=body)
                    except httpx.HTTPError:
                        pass  # the next beat tries again; the test's deadline decides
                beating.set()
                stop.wait(1.0)

    thread = threading.Thread(target=heartbeat, daemon=True)
    thread.start()
    try:
        assert beating.wait(30)
        topics = [
            {"name": "wi", "assignments": [{"partitionIndex": 0, "brokerIds": [81]}]},
            {"name": "wj", "assignments": [{"partitionIndex": 0, "brokerIds": [81, 82]}]},
        ]
        r = voter.post(0, "/v1/topics", {"topics": topics})
        assert [t["errorName"] for t in r.json()["topics"]] == ["NONE", "NONE"], r.text
        yield epochs
    finally:
        stop.set()
        thread.join(timeout=30)


def test_what_if_then_the_unregister_guard(voter, live_brokers):
    r = mq("what-if", "--lose", "brokers:81", url=voter.url(0))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("losing brokers 81 (image at offset ")
    assert "  offline        1" in lines and "  leader moved   1" in lines
    assert any(line.startswith("OFFLINE") and "wi-0  leader 81 -> none" in line for line in lines)
    assert any(
        line.startswith("LEADER MOVED") and "wj-0  leader 81 -> 82" in line for line in lines
    )
    r = mq("what-if", "--lose", "racks:ra", "--lose", "brokers:82", "--json", url=voter.url(0))
    assert r.returncode == 0 and r.stderr == ""
    body = json.loads(r.stdout)
    assert body["lost"] == [81, 82] and body["counts"]["offline"] == 2
    r = mq("what-if", "--lose", "racks:zz", url=voter.url(0))
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "racks no registered broker is in: zz" in r.stderr

    # unregister-broker asks what-if first: refused while it would take
    # partitions offline, then forced.
    r = mq("unregister-broker", "81", url=voter.url(0))
    assert r.returncode == 1, r.stdout
    assert "would take 1 partition(s) offline (wi-0)" in r.stderr, r.stderr
    assert "POST /v1/reassignments" in r.stderr and "--force" in r.stderr
    assert 81 in {b["brokerId"] for b in voter.get(0, "/v1/brokers").json()["brokers"]}
    r = mq("unregister-broker", "81", "--force", url=voter.url(0))
    assert r.returncode == 0 and "unregistered broker 81" in r.stdout, r.stderr
    assert 81 not in {b["brokerId"] for b in voter.get(0, "/v1/brokers").json()["brokers"]}
