"""The broker's metadata cache keeps a StandardAuthorizer current from the log:
an ACL created or deleted through the API changes what the cache's authorizer
answers, by following the log and by loading the snapshot alike; in both
HTTP layouts (a worker's own image answers DescribeAcls)."""

from __future__ import annotations

import asyncio
import time

from brokers.client import MetaquorumClient
from brokers.metadata_cache import LogFollower, MetadataCache
from metadata_records.acls import AclOperation as Op
from metadata_records.acls import AclResourceType as RT
from metadata_records.authorizer import ALLOWED, DENIED


async def until(predicate, timeout_s: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s} s")
        await asyncio.sleep(0.05)


def read_topic(cache, principal="User:alice", host="10.0.0.1", topic="payments"):
    return cache.authorizer.authorize(principal, host, Op.READ, RT.TOPIC, topic)


def test_an_acl_created_through_the_api_changes_what_the_cache_authorizes(voter):
    async def go():
        client = MetaquorumClient([voter.url(0)])
        cache = MetadataCache(super_users=frozenset({"User:admin"}))
        follower = LogFollower(client, cache=cache, wait_ms=200)
        task = asyncio.create_task(follower.run())
        try:
            await until(lambda: cache.next_offset > 0, what="the cache following the log")
            assert read_topic(cache) is DENIED  # no ACL: allow.everyone.if.no.acl.found=false
            assert read_topic(cache, "User:admin") is ALLOWED
            answer = await client.create_acls(
                [
                    {"resourceType": "TOPIC", "resourceName": "pay", "resourcePatternType":
                     "PREFIXED", "principal": "User:alice", "host": "*", "operation": "READ",
                     "permissionType": "ALLOW"},
                    {"resourceType": "TOPIC", "resourceName": "payments", "principal":
                     "User:*", "host": "10.0.0.66", "operation": "ALL", "permissionType": "DENY"},
                ]
            )  # fmt: skip
            assert [r["errorName"] for r in answer.body["results"]] == ["NONE", "NONE"]
            await until(lambda: read_topic(cache) is ALLOWED, what="the ALLOW in the cache")
            described = await client.describe_acls(linearizable=True, resourceName="payments",
                                                   patternType="MATCH")  # fmt: skip
            assert [r["resourceName"] for r in described.body["resources"]] == ["pay", "payments"]
            assert read_topic(cache, host="10.0.0.66") is DENIED  # DENY before ALLOW
            assert read_topic(cache, "User:bob") is DENIED
            # DESCRIBE is implied by READ; WRITE is not.
            assert cache.authorizer.authorize(
                "User:alice", "h", Op.DESCRIBE, RT.TOPIC, "payroll"
            ) is ALLOWED  # fmt: skip
            assert cache.authorizer.authorize(
                "User:alice", "h", Op.WRITE, RT.TOPIC, "payroll"
            ) is DENIED  # fmt: skip
            # A cache loaded from the snapshot answers the same.
            snap = await client.snapshot()
            loaded = MetadataCache()
            loaded.load_snapshot(snap.body["records"], snap.body["nextOffset"])
            assert loaded.authorizer.acl_count() == cache.authorizer.acl_count() == 2
            assert read_topic(loaded) is ALLOWED
            assert read_topic(loaded, host="10.0.0.66") is DENIED
            # Deleted through the API: the cache follows.
            answer = await client.delete_acls([{"principalFilter": "User:alice"}])
            assert len(answer.body["filterResults"][0]["matchingAcls"]) == 1
            await until(lambda: cache.authorizer.acl_count() == 1, what="the removal")
            assert read_topic(cache) is DENIED
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client.close()

    asyncio.run(go())
