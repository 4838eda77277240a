"""api/failure_limit.py: failed hashed-token checks are limited per client
address, before any scrypt runs; and api/auth.py's token table and the app's
edge applying it (429 with Retry-After, counted on /metrics)."""

import asyncio

import httpx
import pytest

from api import create_app
from api.auth import Authenticator, parse_tokens
from api.errors import ApiProblem
from api.failure_limit import FAILURE_BURST, FAILURES_PER_S, MAX_ADDRESSES, FailureLimit
from api.token_hashes import TokenHash, hash_token

TOKEN = "ab12cd34.the-secret-part-of-the-token"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_of_failures_then_one_a_second():
    clock = Clock()
    limit = FailureLimit(clock=clock)
    for _ in range(FAILURE_BURST):
        assert limit.wait("10.0.0.1") == 0
        limit.failed("10.0.0.1")
    assert limit.wait("10.0.0.1") == pytest.approx(1 / FAILURES_PER_S)
    assert limit.wait("10.0.0.2") == 0  # another address is not held back
    clock.now += 1 / FAILURES_PER_S
    assert limit.wait("10.0.0.1") == 0
    limit.failed("10.0.0.1")
    assert limit.wait("10.0.0.1") > 0
    clock.now += FAILURE_BURST / FAILURES_PER_S  # refilled: forgotten
    assert limit.wait("10.0.0.1") == 0 and len(limit) == 0


def test_failures_in_flight_are_owed():
    """Checks that started before the bucket ran out still count: an address
    that had 30 wrong secrets checked at once waits for all of them."""
    clock = Clock()
    limit = FailureLimit(clock=clock)
    for _ in range(30):
        limit.failed("10.0.0.1")
    assert limit.wait("10.0.0.1") == pytest.approx((30 - FAILURE_BURST + 1) / FAILURES_PER_S)


def test_the_table_of_addresses_is_bounded_oldest_out():
    clock = Clock()
    limit = FailureLimit(clock=clock, max_addresses=4)
    for i in range(6):
        for _ in range(FAILURE_BURST):
            limit.failed(f"10.0.0.{i}")
    assert len(limit) == 4
    assert limit.wait("10.0.0.0") == 0 and limit.wait("10.0.0.5") > 0
    assert MAX_ADDRESSES == 4096


# ---------------------------------------------------------------- the token table applies it


@pytest.fixture
def scrypts(monkeypatch):
    """How many scrypt checks ran."""
    ran = []
    matches = TokenHash.matches

    def counted(self, token):
        ran.append(token)
        return matches(self, token)

    monkeypatch.setattr(TokenHash, "matches", counted)
    return ran


def wrong(i: int) -> str:
    return f"Bearer ab12cd34.wrong-secret-number-{i:04d}"


def test_an_address_past_its_failures_gets_429_before_any_scrypt(scrypts):
    auth = Authenticator(parse_tokens(f"{hash_token(TOKEN, log_n=10)} admin\n"))

    async def run():
        for i in range(FAILURE_BURST):
            await auth.prepare(wrong(i), "10.0.0.1")
        assert len(scrypts) == FAILURE_BURST
        with pytest.raises(ApiProblem) as refused:
            await auth.prepare(wrong(99), "10.0.0.1")
        assert len(scrypts) == FAILURE_BURST  # refused before its scrypt
        problem = refused.value
        assert problem.status == 429 and problem.headers["Retry-After"] == "1"
        assert "10.0.0.1" in str(problem) and "wrong secret" in str(problem)
        # Another address is checked; a wrong secret seen before costs nothing.
        await auth.prepare(wrong(99), "10.0.0.2")
        await auth.prepare(wrong(0), "10.0.0.1")
        assert len(scrypts) == FAILURE_BURST + 1
        assert auth.throttled == 1

    asyncio.run(run())


def test_a_verified_token_is_never_held_back(scrypts):
    """Success is not slowed: a token already checked is a dict lookup, from a
    limited address too (a fleet behind one NAT address with one broker
    misconfigured keeps working)."""
    auth = Authenticator(parse_tokens(f"{hash_token(TOKEN, log_n=10)} admin\nplain read\n"))

    async def run():
        await auth.prepare(f"Bearer {TOKEN}", "10.0.0.1")
        for i in range(FAILURE_BURST + 5):
            try:
                await auth.prepare(wrong(i), "10.0.0.1")
            except ApiProblem:
                pass
        await auth.prepare(f"Bearer {TOKEN}", "10.0.0.1")
        await auth.prepare("Bearer plain", "10.0.0.1")
        assert auth.identify(f"Bearer {TOKEN}").role.value == "admin"
        assert auth.identify("Bearer plain").role.value == "read"
        assert scrypts.count(TOKEN) == 1

    asyncio.run(run())


def test_the_app_answers_429_with_retry_after_and_counts_it(local):
    app = create_app(local.node, tokens=parse_tokens(f"{hash_token(TOKEN, log_n=10)} admin\n"))

    async def run():
        transport = httpx.ASGITransport(app=app, client=("192.0.2.7", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            for i in range(FAILURE_BURST):
                r = await client.get("/v1/brokers", headers={"Authorization": wrong(i)})
                assert r.status_code == 401
            r = await client.get("/v1/brokers", headers={"Authorization": wrong(99)})
            assert r.status_code == 429 and r.headers["Retry-After"] == "1"
            assert "192.0.2.7" in r.json()["errorMessage"]
            r = await client.post(
                "/v1/brokers/heartbeat", headers={"Authorization": wrong(98)}, json={}
            )  # a direct route: the edge refused it first
            assert r.status_code == 429
            r = await client.get("/v1/brokers", headers={"Authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 429  # a first check is a scrypt: it waits too
            metrics = (await client.get("/metrics")).text
        assert "metaquorum_auth_throttled_total 3.0" in metrics

    local.run(run())
