"""What the app serves: the node it is built over, as a ``typing.Protocol``.

In a voter of one process that is the QuorumNode itself; in each HTTP worker
it is the worker's view of its voter (voter/worker_node.WorkerNode), which
follows the committed log into an image of its own and sends writes and read
barriers over its links. Both satisfy ``ServedNode``: what the app reads and
calls on every request a worker answers itself. The routes a worker forwards
(status, metrics, probes, voter changes: voter/worker_node.FORWARDED) read
more of a QuorumNode; they only ever run in the process that has one.

So api/ knows nothing of processes: it never imports voter/ (the layers in
pyproject.toml), and tells a worker's node only by ``ForwardingNode``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from metadata_records.image import MetadataImage
from quorum.callers import Caller
from quorum.history_images import HistoryReader
from quorum.state_machine import MetadataStateMachine


class ServedNode(Protocol):
    node_id: int
    cluster_id: str  # what a backup (GET /v1/backup) is of
    # The followed image's state machine: its retained log (/v1/log) and
    # ``fatal`` (why the node refuses to serve).
    sm: MetadataStateMachine
    # The voter's history store (GET /v1/image?atOffset=); None: none kept.
    history: HistoryReader | None

    @property
    def image(self) -> MetadataImage: ...

    @property
    def replaying(self) -> bool: ...

    @property
    def raft_alive(self) -> bool: ...

    @property
    def ready(self) -> bool: ...

    async def submit(
        self, request: object, timeout_s: float = ..., caller: Caller | None = None
    ) -> object:
        """A controller request, decided by the active controller; its response.
        ``caller``: who asked, written with its records (quorum/callers.py)."""

    async def barrier(self, timeout_s: float = ...) -> int:
        """A linearizable read's barrier: an offset this node's image now holds."""

    async def wait_for_offset(self, offset: int, timeout_s: float) -> bool:
        """Whether the image reached ``offset`` (exclusive end) within ``timeout_s``."""


@runtime_checkable
class ForwardingNode(Protocol):
    """A node whose own state (status, metrics, probes, voter changes) another
    process answers: an HTTP worker's. Its app forwards those requests whole
    and renders no metrics of its own (api/metrics.ApiMetrics)."""

    async def forward(self, head: dict[str, Any], body: bytes) -> tuple[int, list, bytes]: ...
