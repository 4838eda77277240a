"""Client quotas end to end on a real 3-voter cluster, through
brokers/client.py, in both HTTP layouts (a voter answering itself, and two
HTTP workers in front of its core): AlterClientQuotas through a follower,
DescribeClientQuotas from a follower with each kind of filter, every voter
describing the same, and a new leader keeping the quotas and taking more."""

import pytest

from brokers.client import MetaquorumClient, RequestRejected

from .cluster import Cluster
from .conftest import run_on_three_voters

pytestmark = pytest.mark.slow


def entry(components, **ops):
    return {
        "entity": [{"entityType": t, "entityName": n} for t, n in components],
        "ops": [
            {"key": k, "remove": True} if v is None else {"key": k, "value": v}
            for k, v in ops.items()
        ],
    }


def entities(answer):
    return {
        tuple((c["entityType"], c["entityName"]) for c in e["entity"]): {
            v["key"]: v["value"] for v in e["values"]
        }
        for e in answer.body["entries"]
    }


ALICE = (("user", "alice"),)
ALICE_DEFAULT_CLIENT = (("user", "alice"), ("client-id", None))
DEFAULT_USER = (("user", None),)
APP = (("client-id", "app"),)
DEFAULT_IP = (("ip", None),)
ONE_IP = (("ip", "10.0.0.1"),)


@pytest.mark.parametrize("layout", ["default", "2-workers"])
def test_client_quotas_from_followers_and_across_a_failover(tmp_path, monkeypatch, layout):
    if layout == "2-workers":
        monkeypatch.setenv("METAQUORUM_HTTP_WORKERS", "2")
    else:
        monkeypatch.delenv("METAQUORUM_HTTP_WORKERS", raising=False)
    run_on_three_voters(tmp_path, scenario)


async def scenario(c: Cluster, leader: int, follower: int) -> None:
    async with MetaquorumClient([c.url(follower)]) as client:
        answer = await client.alter_client_quotas(
            [
                entry(ALICE, producer_byte_rate=1024),
                entry(ALICE_DEFAULT_CLIENT, consumer_byte_rate=2048),
                entry(DEFAULT_USER, request_percentage=50.5),
                entry(APP, controller_mutation_rate=10),
                entry(DEFAULT_IP, connection_creation_rate=20),
                entry(ONE_IP, connection_creation_rate=100),
                entry((("user", "eve"), ("ip", "10.0.0.2")), producer_byte_rate=1),
            ]
        )
        assert client.leader == c.url(leader)  # the write followed the 307
        assert [e["errorName"] for e in answer.body["entries"]] == ["NONE"] * 6 + [
            "INVALID_REQUEST"
        ], answer.body

    # Reads from the follower, each kind of filter.
    async with MetaquorumClient([c.url(follower)]) as reader:
        exact = await reader.describe_client_quotas({"user": "alice"}, linearizable=True)
        assert entities(exact) == {
            ALICE: {"producer_byte_rate": 1024.0},
            ALICE_DEFAULT_CLIENT: {"consumer_byte_rate": 2048.0},
        }
        assert exact.metadata_offset is not None
        strict = await reader.describe_client_quotas({"user": "alice"}, strict=True)
        assert entities(strict) == {ALICE: {"producer_byte_rate": 1024.0}}
        default = await reader.describe_client_quotas({"user": None})
        assert entities(default) == {DEFAULT_USER: {"request_percentage": 50.5}}
        both = await reader.describe_client_quotas({"client-id": None}, any_of=["user"])
        assert list(entities(both)) == [ALICE_DEFAULT_CLIENT]
        any_client = await reader.describe_client_quotas(any_of=["client-id"], strict=True)
        assert list(entities(any_client)) == [APP]
        ips = await reader.describe_client_quotas(any_of=["ip"])
        assert entities(ips) == {
            DEFAULT_IP: {"connection_creation_rate": 20.0},
            ONE_IP: {"connection_creation_rate": 100.0},
        }
        with pytest.raises(RequestRejected) as bad:
            await reader.describe_client_quotas({"ip": None}, any_of=["user"])
        assert bad.value.status == 400 and bad.value.body["errorName"] == "INVALID_REQUEST"

    # Every voter describes the same quotas.
    everything = None
    for i in range(c.n):
        async with MetaquorumClient([c.url(i)]) as voter:
            found = entities(await voter.describe_client_quotas(linearizable=True))
            assert len(found) == 6, (i, found)
            assert everything in (None, found), i
            everything = found

    # The leader goes; a new one keeps the quotas and takes more.
    c.kill(leader)
    survivors = [i for i in range(c.n) if i != leader]
    c.leader(among=survivors)
    async with MetaquorumClient([c.url(i) for i in survivors]) as client:
        checked = await client.alter_client_quotas(
            [entry(ALICE, producer_byte_rate=None)], validate_only=True
        )
        assert checked.body["entries"][0]["errorName"] == "NONE", checked.body
        assert entities(await client.describe_client_quotas(linearizable=True)) == everything
        answer = await client.alter_client_quotas(
            [entry(ALICE, producer_byte_rate=None), entry(APP, producer_byte_rate=4096)]
        )
        assert [e["errorName"] for e in answer.body["entries"]] == ["NONE", "NONE"], answer.body
        after = entities(await client.describe_client_quotas(linearizable=True))
        assert ALICE not in after  # its last quota removed: the entity is gone
        assert after[APP] == {"controller_mutation_rate": 10.0, "producer_byte_rate": 4096.0}
        assert after[DEFAULT_IP] == everything[DEFAULT_IP]
