"""The simulator's two HTTP clients: the brokers' (register, heartbeat,
alter-partition; many requests, bounded) and the metadata one (log follower,
status, the final check), apart so that metadata never queues behind the
brokers' heartbeats.
"""

from __future__ import annotations

import asyncio
import contextlib

import httpx

from .client import MetaquorumClient
from .lean_http import LeanHttp
from .sim_config import SimConfig


class BoundedClient(httpx.AsyncClient):
    """At most ``limit`` requests handed to the connection pool at once; the rest
    wait here, in a FIFO queue. httpcore rescans its whole wait queue each time
    a request completes, which with thousands of brokers queued on a pool of 16
    costs more CPU than the requests themselves."""

    def __init__(self, *args, limit: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._slots = asyncio.Semaphore(limit)

    async def send(self, *args, **kwargs) -> httpx.Response:
        async with self._slots:
            return await super().send(*args, **kwargs)


@contextlib.asynccontextmanager
async def brokers_http(c: SimConfig):
    """The brokers' transport (register, heartbeat, alter-partition): the lean
    client, or httpx as before (``--http httpx``); brokers/client.py is the same
    above either."""
    if c.http == "lean":
        lean = LeanHttp(
            timeout_s=10.0,
            max_connections=c.max_connections,
            ssl_context=c.tls.context if c.tls is not None else None,
        )
        try:
            yield lean
        finally:
            await lean.aclose()
        return
    limits = httpx.Limits(
        max_connections=c.max_connections, max_keepalive_connections=c.max_connections
    )
    verify = c.tls.context if c.tls is not None else True
    async with BoundedClient(
        timeout=10.0, limits=limits, limit=c.max_connections, verify=verify
    ) as http:
        yield http


@contextlib.asynccontextmanager
async def sim_clients(c: SimConfig, metadata_connections: int = 4):
    """(the brokers' client, the metadata client). Metadata (the log follower,
    status, the final check) has connections of its own, as a Kafka broker's
    metadata fetches do: under load it must not queue behind the brokers'
    heartbeats, or they could never catch up."""
    verify = c.tls.context if c.tls is not None else True
    async with (
        brokers_http(c) as http,
        httpx.AsyncClient(
            timeout=10.0,
            limits=httpx.Limits(max_connections=metadata_connections),
            verify=verify,
        ) as meta,
    ):
        yield (
            MetaquorumClient(c.urls, token=c.token, http=http, tls=c.tls),
            MetaquorumClient(c.urls, token=c.token, http=meta, tls=c.tls),
        )
