"""api/admission.py: the control pool is the brokers' own, and each principal
holds at most its share of a pool."""

import asyncio

import pytest

from api import create_app
from api.admission import PER_BROKER_CONTROL_SLOTS, Admission
from api.auth import Principal, Role

from .test_overload import edge

BROKER_1 = Principal(Role.BROKER, 1, line=2)
BROKER_2 = Principal(Role.BROKER, 2, line=3)
ADMIN = Principal(Role.ADMIN, line=1)
ANY_BROKER = Principal(Role.BROKER, line=4)


def fill(admission: Admission, path: str, who: Principal) -> int:
    pool = admission.pool(path)
    share = admission.share(pool, who.broker_id is not None)
    taken = 0
    while pool.take(who, share) is None:
        taken += 1
    return taken


def test_a_bound_broker_holds_a_few_control_slots_and_never_its_neighbours():
    admission = Admission(256, fair=True)
    assert fill(admission, "/v1/brokers/heartbeat", BROKER_1) == PER_BROKER_CONTROL_SLOTS
    refusal = admission.control.take(BROKER_1, PER_BROKER_CONTROL_SLOTS)
    assert "its share is 4 of 256" in refusal
    assert admission.control.take(BROKER_2, PER_BROKER_CONTROL_SLOTS) is None


def test_bulk_writes_cannot_take_the_control_pool():
    admission = Admission(8, fair=True)
    assert fill(admission, "/v1/topics", ADMIN) == 4  # half the bulk pool
    assert fill(admission, "/v1/alter-partition", ANY_BROKER) == 4
    assert "8 other writes are being handled" in admission.bulk.take(BROKER_1, 4)
    assert admission.control.take(BROKER_1, 4) is None  # heartbeats still get in
    assert admission.pending == 9


def test_slots_come_back_and_auth_off_has_no_shares():
    admission = Admission(4, fair=False)
    assert fill(admission, "/v1/brokers/register", ADMIN) == 4
    for _ in range(4):
        admission.control.give_back(ADMIN)
    assert admission.control.held == 0 and not admission.control.by_key
    with pytest.raises(ValueError, match="max_pending_writes"):
        Admission(0, fair=True)


def test_a_callers_bodies_in_hand_are_bounded_and_others_are_not_affected(local, tmp_path):
    """Bodies are read before a write slot is taken: each caller's bytes in
    hand are bounded, so one token with many connections cannot fill memory."""
    tokens = tmp_path / "tokens"
    tokens.write_text("admin-a admin\nadmin-b admin\n")
    app = create_app(local.node, tokens=str(tokens), body_budget_bytes=1000)
    release = asyncio.Event()

    async def slow(first: bytes):
        yield first
        await release.wait()
        yield b"]}"

    async def scenario():
        async with local.client(app, "admin-a") as a, local.client(app, "admin-b") as b:
            json = {"Content-Type": "application/json"}
            held = asyncio.ensure_future(
                a.post("/v1/topics", content=slow(b'{"topics": [' + b" " * 700), headers=json)
            )
            while edge(app) is None or not edge(app).bodies.by_key:
                await asyncio.sleep(0.005)
            over = await a.post(
                "/v1/topics", content=slow(b'{"topics": [' + b" " * 400), headers=json
            )
            other = await b.post("/v1/topics", json={"topics": []})
            release.set()
            return over, other, await held

    over, other, held = local.run(scenario())
    assert over.status_code == 429, over.text
    assert "bytes of request bodies in hand" in over.json()["errorMessage"]
    assert over.headers["Retry-After"] == "1"
    assert other.status_code == 200, other.text
    assert held.status_code == 200, held.text
    assert not edge(app).bodies.by_key  # every byte given back
