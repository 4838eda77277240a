"""The probes and the metrics: /livez, /readyz, /metrics. They need no token
(api/edge.py OPEN_PATHS) and answer even on a node that is not ready: saying
so is what they are for.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.responses import Response

from metadata_records.errors import Errors

from .. import models as M
from ..errors import JsonResponse, error_body, retry_after
from ..metrics import CONTENT_TYPE
from ..openapi_doc import NOT_READY
from ..reads import not_ready_reason
from .context import RouteContext


def probes(app: FastAPI, ctx: RouteContext) -> None:
    node, tracker = ctx.node, ctx.tracker

    @app.get(
        "/livez",
        operation_id="livez",
        tags=["health"],
        summary="Liveness",
        response_model=M.HealthOut,
    )
    async def livez() -> Response:
        """The process and the Raft tick thread are alive."""
        if node.raft_alive:
            return JsonResponse({"status": "alive", "reason": None})
        reason = node.sm.fatal or "the Raft tick thread is not running"
        return JsonResponse({"status": "dead", "reason": reason}, status_code=503)

    @app.get(
        "/readyz",
        operation_id="readyz",
        tags=["health"],
        summary="Readiness",
        response_model=M.HealthOut,
        responses=NOT_READY,
    )
    async def readyz() -> Response:
        """Replay done, a leader known, this node caught up."""
        tracker.sample(node, node.raft_status())
        reason = not_ready_reason(node)
        if reason is None:
            return JsonResponse({"status": "ready", "reason": None})
        return JsonResponse(
            {"status": "not ready", "reason": reason, **error_body(Errors.NOT_CONTROLLER, reason)},
            status_code=503,
            headers=retry_after(1.0),
        )

    @app.get(
        "/metrics",
        operation_id="metrics",
        tags=["health"],
        summary="Prometheus metrics",
        response_class=Response,
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text"}},
    )
    async def prometheus() -> Response:
        tracker.sample(node, node.raft_status())
        return Response(ctx.metrics.render(), media_type=CONTENT_TYPE)
