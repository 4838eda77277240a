"""ACLs end to end on a real 3-voter cluster, through brokers/client.py:
CreateAcls through a follower (the client follows the 307), DescribeAcls
from a follower's own image, DeleteAcls by filter (MATCH, a principal), and
the ACLs surviving a leader failover on every voter."""

import asyncio

import pytest

from brokers.client import MetaquorumClient

from .cluster import Cluster
from .conftest import run_on_three_voters

pytestmark = pytest.mark.slow


def acl(name, principal, op, perm="ALLOW", pattern="LITERAL", kind="TOPIC", host="*"):
    return {
        "resourceType": kind,
        "resourceName": name,
        "resourcePatternType": pattern,
        "principal": principal,
        "host": host,
        "operation": op,
        "permissionType": perm,
    }


def bindings(body):
    return sorted(
        (r["resourceType"], r["resourceName"], r["patternType"], a["principal"], a["operation"],
         a["permissionType"])
        for r in body["resources"]
        for a in r["acls"]
    )  # fmt: skip


async def until(check, what, timeout_s=30.0):
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.1)


def test_acls_through_the_client_on_three_voters_and_a_failover(tmp_path):
    run_on_three_voters(tmp_path, acls_scenario)


async def acls_scenario(c: Cluster, leader: int, follower: int) -> None:
    async with MetaquorumClient([c.url(follower)]) as client:
        created = await client.create_acls(
            [
                acl("orders", "User:alice", "READ"),
                acl("orders", "User:alice", "read"),  # the same binding: nothing more
                acl("ord", "User:bob", "WRITE", "DENY", "PREFIXED"),
                acl("*", "User:*", "DESCRIBE", kind="GROUP"),
                acl("orders", "alice", "READ"),
            ]
        )
        assert client.leader == c.url(leader)
        assert [r["errorName"] for r in created.body["results"]] == ["NONE"] * 4 + [
            "INVALID_REQUEST"
        ]
        expected = [
            ("GROUP", "*", "LITERAL", "User:*", "DESCRIBE", "ALLOW"),
            ("TOPIC", "ord", "PREFIXED", "User:bob", "WRITE", "DENY"),
            ("TOPIC", "orders", "LITERAL", "User:alice", "READ", "ALLOW"),
        ]

    # Every voter answers from its own image once it has applied the write.
    for i in range(c.n):
        async with MetaquorumClient([c.url(i)]) as voter:

            async def applied(voter=voter):
                return bindings((await voter.describe_acls()).body) == expected

            await until(applied, f"voter {i} shows the ACLs")
            matched = await voter.describe_acls(
                resourceType="TOPIC", resourceName="orders", patternType="MATCH"
            )
            assert [b[1] for b in bindings(matched.body)] == ["ord", "orders"], i

    async with MetaquorumClient([c.url(follower)]) as client:
        deleted = await client.delete_acls(
            [
                {"resourceTypeFilter": "TOPIC", "resourceNameFilter": "orderly",
                 "patternTypeFilter": "MATCH"},
                {"principalFilter": "User:bob"},
            ]
        )  # fmt: skip
        results = deleted.body["filterResults"]
        assert [[a["resourceName"] for a in r["matchingAcls"]] for r in results] == [
            ["ord"],
            ["ord"],
        ]
        left = await client.describe_acls(linearizable=True)
        assert bindings(left.body) == [expected[0], expected[2]]

    # The leader goes: the ACLs stay on the survivors, and a new leader takes more.
    c.kill(leader)
    survivors = [i for i in range(c.n) if i != leader]
    c.leader(among=survivors)
    async with MetaquorumClient([c.url(i) for i in survivors]) as client:
        created = await client.create_acls(
            [acl("kafka-cluster", "User:ops", "ALTER", kind="CLUSTER")]
        )
        assert [r["errorName"] for r in created.body["results"]] == ["NONE"], created.body
        deleted = await client.delete_acls([{"resourceTypeFilter": "GROUP"}])
        assert len(deleted.body["filterResults"][0]["matchingAcls"]) == 1
    final = [
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:ops", "ALTER", "ALLOW"),
        expected[2],
    ]
    for i in survivors:
        async with MetaquorumClient([c.url(i)]) as voter:
            body = (await voter.describe_acls(linearizable=True)).body
            assert bindings(body) == final, i
