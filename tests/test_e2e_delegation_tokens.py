"""Delegation tokens end to end on a real 3-voter cluster with auth and a
secret on every voter, through brokers/client.py and ``metaquorum
delegation-tokens``: create through a follower, renew, expire at once, a
short-lived token removed by the active controller's sweep (its batch's who
naming the controller and the rule), every voter describing the same
tokens with the same HMACs and holding an equal image digest, and a new
leader finding a token by its HMAC."""

import asyncio
import base64
import json
import subprocess
import sys
import time

import pytest

from brokers.client import MetaquorumClient
from metadata_records.delegation_tokens import token_hmac

from .cluster import Cluster
from .conftest import running

pytestmark = pytest.mark.slow

SECRET = "e2e-delegation-token-secret-0123456789"
TOKENS = "admin-token admin\nsecond-admin admin\n"
SWEEP_MS = 200


def cli(c: Cluster, i: int, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "delegation-tokens", *args,
         "--url", c.url(i), "--token", "admin-token"],
        capture_output=True, text=True, timeout=60, input=stdin,
    )  # fmt: skip


def test_tokens_across_voters_the_sweep_and_a_failover(tmp_path):
    secret, tokens = tmp_path / "dt-secret", tmp_path / "tokens"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    tokens.write_text(TOKENS)
    c = Cluster(
        tmp_path,
        extra=[
            "--tokens-file", str(tokens),
            "--delegation-token-secret-file", str(secret),
            "--delegation-token-expiry-check-interval-ms", str(SWEEP_MS),
        ],
    )  # fmt: skip
    c.client.headers["Authorization"] = "Bearer admin-token"
    with running(c):
        leader = c.leader()
        follower = next(i for i in range(c.n) if i != leader)
        asyncio.run(scenario(c, leader, follower, tmp_path))


async def scenario(c: Cluster, leader: int, follower: int, tmp_path) -> None:
    async with MetaquorumClient([c.url(follower)], token="admin-token") as client:
        made = await client.create_delegation_token(renewers=["User:token/line-2"])
        assert client.leader == c.url(leader)  # the write followed the 307
        assert made.body["errorName"] == "NONE", made.body
        kept = made.body
        assert base64.b64decode(kept["hmac"]) == token_hmac(SECRET, kept["tokenId"])
        renewed = await client.renew_delegation_token(kept["hmac"], 3_600_000)
        assert renewed.body["errorName"] == "NONE", renewed.body
        short = (await client.create_delegation_token(max_lifetime_ms=300)).body
        gone = (await client.create_delegation_token()).body
        expired = await client.expire_delegation_token(gone["hmac"])
        assert expired.body["expiryTimestampMs"] == -1

        # The controller's sweep removes the short-lived token on its own.
        deadline = time.monotonic() + 30
        while True:
            seen = (await client.describe_delegation_tokens(linearizable=True)).body["tokens"]
            if {t["tokenId"] for t in seen} == {kept["tokenId"]}:
                break
            assert time.monotonic() < deadline, seen
            await asyncio.sleep(0.1)
        log = (await client._read("/v1/log", {"fromOffset": 0})).body["records"]
        (swept,) = [
            r for r in log
            if r["type"] == "REMOVE_DELEGATION_TOKEN_RECORD"
            and r["data"]["tokenId"] == short["tokenId"]
        ]  # fmt: skip
        assert (swept["who"]["principal"], swept["who"]["api"], swept["who"]["rule"]) == (
            "controller",
            "SweepExpiredDelegationTokens",
            "delegation-token.expiry-swept",
        )

    # Every voter describes the same token with the same HMAC, and holds the same image.
    for i in range(c.n):
        async with MetaquorumClient([c.url(i)], token="admin-token") as voter:
            found = (await voter.describe_delegation_tokens(linearizable=True)).body["tokens"]
            assert [(t["tokenId"], t["hmac"]) for t in found] == [
                (kept["tokenId"], kept["hmac"])
            ], i

    def digests():
        seen = {
            tuple(
                c.get(i, "/v1/quorum/status?digest=true").json()[k]
                for k in ("lastAppliedOffset", "imageDigest")
            )
            for i in range(c.n)
        }
        return len(seen) == 1

    c.wait(digests, 30, "identical image digests on every voter")
    await _cli_steps(c, follower, kept, tmp_path)

    # A new leader finds the token by its HMAC (derived from the same secret).
    c.kill(leader)
    survivors = [i for i in range(c.n) if i != leader]
    c.leader(among=survivors)
    async with MetaquorumClient([c.url(i) for i in survivors], token="admin-token") as client:
        again = await client.renew_delegation_token(kept["hmac"])
        assert again.body["errorName"] == "NONE", again.body
        stranger = MetaquorumClient([c.url(i) for i in survivors], token="second-admin")
        async with stranger:
            # The second admin is a renewer: it may expire the token.
            done = await stranger.expire_delegation_token(kept["hmac"])
            assert done.body["errorName"] == "NONE", done.body
    # The killed voter, restarted, replays to the same image.
    c.start(leader)
    c.wait_ready()
    c.wait(digests, 30, "identical image digests after the restart")


async def _cli_steps(c: Cluster, follower: int, kept: dict, tmp_path) -> None:
    # The CLI: the HMAC from a file, never a flag; create writes it to a new file.
    hmac_file = tmp_path / "hmac"
    hmac_file.write_text(kept["hmac"] + "\n")
    r = cli(c, follower, "renew", "--hmac-file", str(hmac_file), "--renew-time-period", "60000")
    assert r.returncode == 0 and r.stdout.startswith("renewed"), r.stderr
    new_file = tmp_path / "new-hmac"
    r = cli(c, follower, "create", "--hmac-file", str(new_file), "--json")
    assert r.returncode == 0, r.stderr
    created = json.loads(r.stdout)
    assert created["hmac"] == f"(written to {new_file})"
    assert (new_file.stat().st_mode & 0o777) == 0o600
    r = cli(c, follower, "expire", "--hmac-file", "-", stdin=new_file.read_text())
    assert r.returncode == 0 and "removed" in r.stdout, r.stderr
    r = cli(c, follower, "renew", "--hmac-file", str(new_file))
    assert r.returncode == 1 and "DELEGATION_TOKEN_NOT_FOUND" in r.stderr
    r = cli(c, follower, "renew")
    assert r.returncode == 2 and "--hmac-file" in r.stderr
    r = cli(c, follower, "describe", "--json")
    assert r.returncode == 0, r.stderr
    assert [t["tokenId"] for t in json.loads(r.stdout)["tokens"]] == [kept["tokenId"]]
