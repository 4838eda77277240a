"""A real single-voter node on a private event loop, with in-process HTTP calls.

For the API tests: ``LocalNode`` builds a ``QuorumNode`` in the calling
(main) thread, as pysyncobj requires, on a free port from the OS, starts it on
its own asyncio loop and talks to an app through ``httpx.ASGITransport`` on
that same loop. Nothing is mocked. Always ``close()`` it (it stops Raft).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx

from quorum.node import QuorumNode
from quorum.node_config import NodeConfig, claim_data_dir

from .harness import incarnation as incarnation_id
from .nodes import free_port

T = TypeVar("T")

MV_FEATURES = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]


def registration_body(
    cluster_id: str, broker_id: int, generation: int = 0, **extra: Any
) -> dict[str, Any]:
    """A BrokerRegistration body that a cluster at any supported metadata.version accepts."""
    return {
        "brokerId": broker_id,
        "clusterId": cluster_id,
        "incarnationId": incarnation_id(broker_id, generation),
        "listeners": [
            {
                "name": "PLAINTEXT",
                "host": "localhost",
                "port": 9092 + broker_id % 1000,
                "securityProtocol": 0,
            }
        ],
        "features": MV_FEATURES,
        "rack": None,
        **extra,
    }


class LocalNode:
    def __init__(
        self,
        data_dir: str,
        *,
        node_id: int = 0,
        other_voters: dict[int, str] | None = None,
        **config: Any,
    ) -> None:
        """``other_voters``: node id -> Raft address of voters that are not
        started (none by default: a lone voter, which elects itself at once)."""
        raft_port = free_port()
        # No periodic NoOpRecord unless a test asks: the API tests check what a
        # request wrote (often nothing) by the node's next offset, and the loop
        # runs only inside run(), so a NoOp due meanwhile would land in any request.
        config.setdefault("metadata_max_idle_interval_ms", 0)
        self.config = NodeConfig(
            node_id=node_id,
            voters={node_id: f"127.0.0.1:{raft_port}", **(other_voters or {})},
            data_dir=data_dir,
            advertised_url=f"http://127.0.0.1:{free_port()}",
            **config,
        )
        identity = claim_data_dir(self.config)
        self.cluster_id = identity.cluster_id
        self.node = QuorumNode(self.config, identity)
        self.loop = asyncio.new_event_loop()
        self._closed = False
        self._stopped = False
        try:
            self.loop.run_until_complete(self.node.start())
        except BaseException:
            self.close()
            raise

    def run(self, awaitable: Awaitable[T], timeout_s: float = 30.0) -> T:
        """Runs ``awaitable`` on the node's loop (the loop only runs meanwhile)."""
        return self.loop.run_until_complete(asyncio.wait_for(awaitable, timeout_s))

    def wait_until(
        self, condition: Callable[[], bool], timeout_s: float = 15.0, what: str = "condition"
    ) -> None:
        async def poll() -> None:
            deadline = time.monotonic() + timeout_s
            while not condition():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{what} not reached within {timeout_s} s")
                await asyncio.sleep(0.01)

        self.run(poll(), timeout_s + 5)

    def wait_active(self, timeout_s: float = 15.0) -> None:
        self.wait_until(lambda: self.node.active, timeout_s, "the node becoming active")

    @staticmethod
    def client(app: Any, token: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://metaquorum.test",
            headers=headers,
            follow_redirects=False,
        )

    def request(
        self, app: Any, method: str, url: str, *, token: str | None = None, **kwargs: Any
    ) -> httpx.Response:
        """One request through ``app`` on the node's loop."""

        async def call() -> httpx.Response:
            async with self.client(app, token) as client:
                return await client.request(method, url, **kwargs)

        return self.run(call())

    def unfenced_broker(self, app: Any, broker_id: int, **extra: Any) -> int:
        """Registers ``broker_id`` (``extra``: registration fields, e.g. rack)
        and unfences it with a heartbeat; its broker epoch."""
        body = registration_body(self.cluster_id, broker_id, **extra)
        epoch = self.request(app, "POST", "/v1/brokers/register", json=body).json()["brokerEpoch"]
        beat = {"brokerId": broker_id, "brokerEpoch": epoch, "currentMetadataOffset": 1 << 40}
        answer = self.request(app, "POST", "/v1/brokers/heartbeat", json=beat).json()
        assert answer["isFenced"] is False, answer
        return epoch

    def stop(self) -> None:
        """Stops the node (Raft included); the loop stays usable for requests."""
        if self._stopped:
            return
        self._stopped = True
        self.loop.run_until_complete(asyncio.wait_for(self.node.stop(transfer=False), 15.0))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if not self.loop.is_closed():
                self.stop()
        finally:
            if not self.loop.is_closed():
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.close()
