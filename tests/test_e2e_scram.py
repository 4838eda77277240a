"""SCRAM credentials end to end on a real 3-voter cluster, through
brokers/client.py: AlterUserScramCredentials through a follower, every voter
describing the same users and holding the same derived keys, and a new
leader keeping them and taking a deletion."""

import base64

import pytest

from brokers.client import MetaquorumClient
from metadata_records.scram import random_salt, salted_password

from .cluster import Cluster
from .conftest import run_on_three_voters

pytestmark = pytest.mark.slow


def upsertion(name, mechanism, iterations, password=b"pencil"):
    salt = random_salt()
    return {
        "name": name,
        "mechanism": mechanism,
        "iterations": iterations,
        "salt": base64.b64encode(salt).decode(),
        "saltedPassword": base64.b64encode(
            salted_password(password, salt, iterations, mechanism)
        ).decode(),
    }


def described(answer):
    return {
        r["user"]: {i["mechanism"]: i["iterations"] for i in r["credentialInfos"]}
        for r in answer.body["results"]
    }


def test_scram_credentials_from_followers_and_across_a_failover(tmp_path):
    run_on_three_voters(tmp_path, scenario)


async def scenario(c: Cluster, leader: int, follower: int) -> None:
    async with MetaquorumClient([c.url(follower)]) as client:
        answer = await client.alter_user_scram_credentials(
            upsertions=[upsertion("alice", 1, 8192), upsertion("bob", 2, 4096)]
        )
        assert client.leader == c.url(leader)  # the write followed the 307
        assert [r["errorName"] for r in answer.body["results"]] == ["NONE", "NONE"], answer.body
        twice = await client.alter_user_scram_credentials(
            upsertions=[upsertion("alice", 2, 4096), upsertion("alice", 1, 4096)]
        )
        assert twice.body["results"][0]["errorName"] == "DUPLICATE_RESOURCE"

    expected = {"alice": {1: 8192}, "bob": {2: 4096}}
    for i in range(c.n):
        async with MetaquorumClient([c.url(i)]) as voter:
            found = await voter.describe_user_scram_credentials(linearizable=True)
            assert described(found) == expected, i
            assert "storedKey" not in str(found.body) and "salt" not in str(found.body)

    c.kill(leader)
    survivors = [i for i in range(c.n) if i != leader]
    c.leader(among=survivors)
    async with MetaquorumClient([c.url(i) for i in survivors]) as client:
        assert (
            described(await client.describe_user_scram_credentials(linearizable=True)) == expected
        )
        answer = await client.alter_user_scram_credentials(
            deletions=[{"name": "alice", "mechanism": 1}],
            upsertions=[upsertion("carol", 1, 16384)],
        )
        assert [r["errorName"] for r in answer.body["results"]] == ["NONE", "NONE"], answer.body
        after = await client.describe_user_scram_credentials(["alice", "carol"], linearizable=True)
        assert [r["errorName"] for r in after.body["results"]] == ["RESOURCE_NOT_FOUND", "NONE"]
