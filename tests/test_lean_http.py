"""brokers/lean_http.py: the simulator's lean HTTP client agrees with httpx,
answer for answer, behind the same MetaquorumClient, against real voters."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from brokers.client import ClientError, MetaquorumClient, OutcomeUnknown, RequestRejected
from brokers.lean_http import LeanHttp

from .conftest import running_cluster
from .nodes import free_port

MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]
LISTENERS = [{"name": "PLAINTEXT", "host": "localhost", "port": 9092, "securityProtocol": 0}]
VOLATILE = {"throttleTimeMs"}  # neither client's doing


@pytest.fixture(scope="module")
def trio(tmp_path_factory):
    """Three ``metaquorum serve`` voters, one leading (a follower answers 307)."""
    with running_cluster(tmp_path_factory.mktemp("lean"), voters=3) as c:
        yield c


def both(urls: list[str], **kw) -> tuple[MetaquorumClient, MetaquorumClient]:
    return (
        MetaquorumClient(urls, **kw),
        MetaquorumClient(urls, http=LeanHttp(timeout_s=10.0), **kw),
    )


def same(a, b) -> None:
    strip = lambda body: {k: v for k, v in body.items() if k not in VOLATILE}  # noqa: E731
    assert type(a) is type(b)
    assert strip(a.body) == strip(b.body)


def test_both_clients_give_the_same_answers_through_a_follower(trio):
    """Register, heartbeat (current and stale epoch) and alter-partition, each
    sent through a follower: both clients follow the 307 to the same leader and
    get the same answer."""
    leader = trio.leader()
    follower = next(i for i in range(3) if i != leader)

    async def go():
        plain, lean = both([trio.url(follower)])
        async with plain, lean:
            incarnation = str(uuid.uuid4())
            args = (501, trio.cluster_id, incarnation, LISTENERS, MV)
            first = await plain.register(*args)
            again = await lean.register(*args)  # the same incarnation: the same epoch
            assert first.ok and again.ok and again.broker_epoch == first.broker_epoch
            same(first, again)
            assert plain.leader == lean.leader == trio.url(leader)
            epoch = first.broker_epoch
            for call in (
                lambda c: c.heartbeat(501, epoch, 0),  # behind: stays fenced
                lambda c: c.heartbeat(501, epoch + 1000, 0),  # STALE_BROKER_EPOCH
                lambda c: c.register(501, "another-cluster", incarnation, LISTENERS, MV),
                lambda c: c.alter_partition(
                    501, epoch, [{"topicId": "AAAAAAAAAAAAAAAAAAAAAA", "partitions": []}]
                ),
            ):
                a, b = await call(plain), await call(lean)
                same(a, b)
            assert a.partitions == b.partitions

    asyncio.run(go())


def test_both_clients_reject_a_bad_request_alike(trio):
    async def go():
        plain, lean = both([trio.url(0)])
        async with plain, lean:
            errors = []
            for c in (plain, lean):
                with pytest.raises(RequestRejected) as e:
                    await c.heartbeat(2**31, 1, 1)  # brokerId beyond int32
                errors.append((e.value.status, e.value.body.get("errorName")))
            assert errors[0] == errors[1] and errors[0][0] == 400

    asyncio.run(go())


def test_reads_with_params_and_a_dead_seed(trio):
    """A dead first seed is skipped (ConnectError, as httpx raises it), and a
    read's query string and headers come through."""
    dead = f"http://127.0.0.1:{free_port()}"

    async def go():
        plain, lean = both([dead, trio.url(0)], backoff_s=0.01)
        async with plain, lean:
            a, b = await plain.log(0, 3), await lean.log(0, 3)
            assert a.body["records"] == b.body["records"] and len(b.body["records"]) == 3
            s = await lean.status()
            assert s.ok and s.body["clusterId"] == trio.cluster_id

    asyncio.run(go())


def test_nobody_answering_gives_up_as_httpx_does():
    async def go():
        url = f"http://127.0.0.1:{free_port()}"
        lean = MetaquorumClient([url], http=LeanHttp(), max_attempts=3, backoff_s=0.01)
        with pytest.raises(ClientError, match="gave up after 3 attempts"):
            await lean.status()
        await lean.http.aclose()

    asyncio.run(go())


def test_an_answer_that_never_comes_is_an_unknown_outcome_for_a_write():
    """A server that accepts and never answers: a read times out and is
    retried, a write is OutcomeUnknown (httpx.ReadTimeout either way)."""

    async def go():
        held: list[asyncio.StreamWriter] = []

        async def silent(reader, writer):
            held.append(writer)

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        lean = MetaquorumClient([f"http://127.0.0.1:{port}"], http=LeanHttp(timeout_s=0.2))
        try:
            with pytest.raises(OutcomeUnknown, match="timed out"):
                await lean.heartbeat(1, 1, 1)
            with pytest.raises(httpx.ReadTimeout):
                await lean.http.request("GET", f"http://127.0.0.1:{port}/v1/quorum/status")
        finally:
            await lean.http.aclose()
            for w in held:
                w.close()
            server.close()
            await server.wait_closed()

    asyncio.run(go())


def test_connections_are_kept_alive_and_bounded(trio):
    async def go():
        lean = LeanHttp(max_connections=3)
        try:
            url = trio.url(0) + "/v1/quorum/status"
            answers = await asyncio.gather(*(lean.request("GET", url) for _ in range(30)))
            assert {r.status_code for r in answers} == {200}
            (origin,) = lean._origins.values()
            assert origin.open <= 3 and len(origin.idle) == origin.open
        finally:
            await lean.aclose()

    asyncio.run(go())
