"""The one object every route module is given: what the app serves
(``RouteContext``), and the few things every route does with it.

A route translates HTTP to the controller's messages and back; it decides
nothing itself. So what routes share is small: submit a request (a
controller bug answers 500, never a half-told story), read the image a read
may show, and answer JSON (large answers built off the event loop, reads
marked with the offset they show).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metadata_records.codec import brief
from metadata_records.errors import Errors
from metadata_records.image import MetadataImage, TopicImage
from quorum.callers import Caller
from quorum.node_errors import NodeError, UnavailableError

from .. import models as M
from ..auth import Authenticator
from ..direct_routes import DirectRoute
from ..errors import ApiProblem, JsonResponse, internal_error
from ..metrics import ApiMetrics
from ..reads import VoterTracker, not_ready_reason

if TYPE_CHECKING:
    from ..served_node import ServedNode

LARGE_ANSWER = 1_000  # entries of an answer built in a thread
# Above this many partitions, building a read's JSON moves off the event loop.
OFFLOAD_PARTITIONS = 20_000


@dataclass(frozen=True)
class RouteContext:
    """What the app serves, given to every entry of ROUTES (api/routes/__init__.py)."""

    # Any node (api/served_node.py); the routes a worker forwards (status,
    # probes, voter changes) read more of it, and only run over a QuorumNode.
    node: ServedNode
    auth: Authenticator
    metrics: ApiMetrics
    # When each voter was last seen caught up: sampled by /readyz, /metrics
    # and /v1/quorum/status, shown by the last.
    tracker: VoterTracker
    # The broker routes served without FastAPI's routing (api/direct_routes.py),
    # by path; None when they are off (create_app(direct_routes=False)).
    direct: dict[str, DirectRoute] | None
    # The delegation tokens' secret (serve --delegation-token-secret-file),
    # from which a describe derives each token's HMAC; None: tokens disabled.
    delegation_token_secret: str | None = field(default=None, repr=False)
    # Token id -> its HMAC under that secret, as describes computed them
    # (api/routes/delegation_tokens.py bounds it).
    token_hmacs: dict[str, bytes] = field(default_factory=dict, repr=False)

    async def submit(self, message: object, caller: Caller | None) -> Any:
        """``message`` decided by the active controller; ``caller`` (the edge's
        ``caller_of`` the request) is written with its records as who asked."""
        try:
            return await self.node.submit(message, caller=caller)
        except NodeError:
            raise
        except Exception as e:  # a controller bug: nothing of this request was written
            raise ApiProblem(
                500,
                Errors.UNKNOWN_SERVER_ERROR,
                internal_error(e, f"in the controller on {brief(message)}", written=False),
            ) from None

    async def read_image(self, consistency: str | None) -> MetadataImage:
        # A local read needs a whole image, not a leader: a voter cut off from
        # the others still answers (X-Metadata-Offset says how fresh); only a
        # replaying or refusing node has nothing trustworthy to show.
        node = self.node
        if node.sm.fatal is not None or node.replaying or not node.raft_alive:
            raise UnavailableError(not_ready_reason(node) or "this node cannot serve reads", 1.0)
        if consistency == "linearizable":
            await node.barrier()
        return node.image


def answer(model: M.ResponseModel) -> JsonResponse:
    return JsonResponse(model.to_json_obj())


async def answer_large(build: Callable[..., Any], *args: Any, entries: int) -> JsonResponse:
    """The answer ``build(*args)`` makes, built in a thread when it has
    more than LARGE_ANSWER entries (10,000 matched ACLs are about 100 ms
    of the event loop otherwise: decisions.md 139)."""
    if entries <= LARGE_ANSWER:
        return JsonResponse(build(*args))
    obj = await asyncio.to_thread(build, *args)
    return await asyncio.to_thread(JsonResponse, obj)


def with_offset(content: Any, image: MetadataImage, **headers: str) -> JsonResponse:
    return JsonResponse(content, headers={"X-Metadata-Offset": str(image.last_offset), **headers})


def problem_at(image: MetadataImage, status: int, error: Errors, message: str) -> ApiProblem:
    """A read's refusal, marked with the offset of the image it read."""
    return ApiProblem(status, error, message, headers={"X-Metadata-Offset": str(image.last_offset)})


def topic_or_404(image: MetadataImage, name: str) -> TopicImage:
    topic = image.topic_by_name(name)
    if topic is None:
        raise problem_at(
            image, 404, Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
        )
    return topic


async def build(fn: Callable[[MetadataImage], Any], image: MetadataImage) -> Any:
    if image.partition_count > OFFLOAD_PARTITIONS:
        return await asyncio.to_thread(fn, image)  # the image is immutable
    return fn(image)


async def stream_pieces(pieces: Iterator[bytes], image: MetadataImage) -> AsyncIterator[bytes]:
    """A streamed body's pieces, each made off the event loop when the image
    is large (a piece of 2,000,000 partitions' snapshot takes milliseconds)."""
    offload = image.partition_count > OFFLOAD_PARTITIONS
    while True:
        piece = await asyncio.to_thread(next, pieces, None) if offload else next(pieces, None)
        if piece is None:
            return
        yield piece
