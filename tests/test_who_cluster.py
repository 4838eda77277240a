"""Who changed what, end to end on a real 3-voter cluster with tokens: the
who of every offset is the same on every voter, also after a leader change
and after a snapshot (compaction) and a restart of a voter."""

from __future__ import annotations

from .cluster import Cluster
from .test_cluster import others, register_body

TOKENS = """\
kafka-1.broker-secret-one broker 1
ops-team.admin-secret-two admin
read-token read
"""
BROKER = {"Authorization": "Bearer kafka-1.broker-secret-one"}
ADMIN = {"Authorization": "Bearer ops-team.admin-secret-two"}
READ = {"Authorization": "Bearer read-token"}


def write(c: Cluster, path: str, body: dict, headers: dict) -> dict:
    """A write through the leader (followed there if it moved meanwhile)."""
    r = c.client.post(c.url(c.leader()) + path, json=body, headers=headers, follow_redirects=True)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def who_by_offset(c: Cluster, i: int) -> tuple[dict[int, dict | None], int]:
    """Voter ``i``'s retained log as {offset: who}, and its high watermark."""
    out: dict[int, dict | None] = {}
    offset = c.get(i, "/v1/log?maxRecords=1", headers=READ).json().get("oldestOffset", 0)
    while True:
        r = c.get(i, f"/v1/log?fromOffset={offset}&maxRecords=10000", headers=READ)
        assert r.status_code == 200, r.text
        body = r.json()
        for record in body["records"]:
            out[record["offset"]] = record.get("who")
        offset = body["nextOffset"]
        if offset >= body["highWatermark"]:
            return out, body["highWatermark"]


def same_who_everywhere(c: Cluster) -> dict[int, dict | None]:
    """Waits until every voter holds the same log end, then checks that the
    offsets they all hold have the same who on each; returns the leader's."""
    views: list = []

    def caught_up() -> bool:
        views[:] = [who_by_offset(c, i) for i in range(c.n)]
        return len({end for _, end in views}) == 1

    c.wait(caught_up, 30, "every voter at the same log end")
    common = set.intersection(*(set(view) for view, _ in views))
    assert common, "no offset held by every voter"
    for view, _ in views[1:]:
        assert {o: view[o] for o in common} == {o: views[0][0][o] for o in common}
    return views[c.leader()][0]


def test_the_who_of_every_offset_is_the_same_on_every_voter(tmp_path):
    (tmp_path / "tokens").write_text(TOKENS)
    c = Cluster(
        tmp_path, extra=["--tokens-file", str(tmp_path / "tokens"), "--compaction-entries", "60"]
    )
    c.client.headers.update(READ)  # its status reads (which voter leads) need a token
    try:
        c.start()
        c.wait_ready()
        reg = write(
            c, "/v1/brokers/register", register_body(c, 1), {**BROKER, "X-Request-Id": "reg-1"}
        )
        beat = {"brokerId": 1, "brokerEpoch": reg["brokerEpoch"], "currentMetadataOffset": 10**9}
        write(c, "/v1/brokers/heartbeat", beat, BROKER)
        body = {"topics": [{"name": "orders", "numPartitions": 2, "replicationFactor": 1}]}
        write(c, "/v1/topics", body, {**ADMIN, "X-Request-Id": "ops-1"})
        who = same_who_everywhere(c)
        principals = {w["principal"] for w in who.values() if w}
        assert {"broker:token/kafka-1", "admin:token/ops-team", "controller"} <= principals
        assert any(w and w.get("requestId") == "reg-1" for w in who.values())
        assert any(w and w.get("requestId") == "ops-1" for w in who.values())

        # A leader change: the new leader's LEADER_CHANGE is the controller's,
        # and what it writes next is identical on every voter too.
        leader = c.leader()
        target = others(c, leader)[0]
        r = c.client.post(
            c.url(leader) + "/v1/quorum/transfer-leadership",
            json={"targetNodeId": target},
            headers=ADMIN,
        )
        assert r.status_code == 200, r.text
        assert c.leader(timeout_s=30) == target
        body = {"topics": [{"name": "after", "numPartitions": 1, "replicationFactor": 1}]}
        write(c, "/v1/topics", body, {**ADMIN, "X-Request-Id": "ops-2"})
        who = same_who_everywhere(c)
        assert sum(1 for w in who.values() if w and w["api"] == "LeaderChange") >= 2
        assert any(w and w.get("requestId") == "ops-2" for w in who.values())

        # A snapshot (compaction past 60 entries), then a voter restarted: the
        # offsets its log holds still say who, the same as everywhere else.
        for n in range(70):
            write(c, "/v1/brokers/heartbeat", {**beat, "wantFence": n % 2 == 0}, BROKER)
        restarted = others(c, c.leader())[0]
        snapshot = c.data_dir(restarted) / "raft.snapshot"
        c.wait(snapshot.exists, 30, "a snapshot on the voter to restart")
        assert c.stop(restarted) == 0
        c.start(restarted)
        c.wait_ready([restarted])
        oldest = c.get(restarted, "/v1/log?maxRecords=1", headers=READ).json()["oldestOffset"]
        assert oldest > 0, "the restarted voter did not start from a snapshot"
        write(c, "/v1/topics", {"topics": [{"name": "last", "numPartitions": 1}]}, ADMIN)
        who = same_who_everywhere(c)
        beats = [w for w in who.values() if w and w["api"] == "BrokerHeartbeat"]
        assert beats and all(w["principal"] == "broker:token/kafka-1" for w in beats)
    finally:
        c.close()
