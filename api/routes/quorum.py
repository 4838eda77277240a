"""The Raft quorum's own endpoints: leadership transfer and voter changes
(admin), and the quorum's status (read).

These go to the node, not to the controller: they are not metadata records
a broker asks for but the quorum's own state, so none of them is a row of the
admin-write table. The status is served even by a node that is not ready,
which is when it is needed.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import FastAPI, Query, Request
from starlette.responses import Response

from metadata_records.errors import Errors
from quorum.node_errors import OutcomeUnknownError, TransferNotWon

from .. import models as M
from ..bodies import parse_body
from ..errors import JsonResponse, bad_request, error_body
from ..openapi_doc import (
    ERR_400,
    ERR_409,
    ERR_409_TRANSFER,
    ERR_429,
    ERR_AUTH,
    READ_RESPONSES,
    WRITE_RESPONSES,
)
from ..reads import quorum_status_obj
from .context import RouteContext, answer, with_offset
from .params import AdminCaller, ReadCaller, body_doc


def _voter_change(changed: bool, voters: tuple) -> JsonResponse:
    return answer(
        M.VoterChangeResponse(
            **M.error_fields(Errors.NONE),
            changed=changed,
            voters=[
                M.VoterKeyOut(
                    node_id=v.voter_id,
                    directory_id=v.voter_directory_id,
                    raft_address=f"{v.host}:{v.port}",
                )
                for v in voters
            ],
        )
    )


def _node_id(req: M.AddVoterRequest | M.RemoveVoterRequest) -> int:
    if req.node_id < 0:
        raise bad_request(f"nodeId: {req.node_id} is not a node id (0 or more)")
    return req.node_id


def membership(app: FastAPI, ctx: RouteContext) -> None:
    node = ctx.node

    @app.post(
        "/v1/quorum/transfer-leadership",
        operation_id="transferLeadership",
        tags=["admin"],
        summary="Transfer Raft leadership",
        response_model=M.TransferLeadershipResponse,
        responses={**WRITE_RESPONSES, **ERR_409_TRANSFER},
        openapi_extra=body_doc(M.TransferLeadershipRequest, required=False),
    )
    async def transfer_leadership(request: Request, caller: AdminCaller) -> Response:
        """Hands leadership to ``targetNodeId`` (or the most caught-up voter);
        answers once another voter leads, or 409 once it is clear that it did
        not move (this voter leads again and takes writes). Used before a
        planned restart and by remove-voter of the leader."""
        body = await request.body()
        req = parse_body(M.TransferLeadershipRequest, body if body.strip() else b"{}")
        target = req.target_node_id
        voters = node.voter_addresses()
        others = sorted(v for v in voters if v != node.node_id)
        if target is not None and target not in others:
            raise bad_request(f"targetNodeId: {target} is not another voter (others: {others})")
        if not others:
            raise bad_request("targetNodeId: this cluster has no other voter to lead it")
        try:
            new_leader = await node.transfer_leadership(target)
        except ValueError as e:
            raise bad_request(str(e)) from None
        except TransferNotWon as e:
            # An outcome, not a failure to wait out: the voter named leads and
            # takes writes; the client decides whether to ask again (409, not
            # a 503 its retries would repeat unseen).
            return JsonResponse(
                error_body(
                    Errors.PREFERRED_LEADER_NOT_AVAILABLE, str(e), leaderId=e.leader_id, term=e.term
                ),
                status_code=409,
            )
        if new_leader is None:
            raise OutcomeUnknownError(
                "leadership did not move in time; it may still move (check /v1/quorum/status)"
            )
        return answer(
            M.TransferLeadershipResponse(**M.error_fields(Errors.NONE), leader_id=new_leader)
        )

    @app.post(
        "/v1/quorum/add-voter",
        operation_id="addVoter",
        tags=["admin"],
        summary="Add a voter (AddRaftVoter)",
        response_model=M.VoterChangeResponse,
        responses={**WRITE_RESPONSES, **ERR_409},
        openapi_extra=body_doc(M.AddVoterRequest),
    )
    async def add_voter(request: Request, caller: AdminCaller) -> Response:
        """Streams the log to the running node at ``address`` and, once it has
        caught up, commits a voter set naming it (with its directory id).
        One change at a time; a retry finishes a change half done."""
        req = parse_body(M.AddVoterRequest, await request.body())
        node_id = _node_id(req)
        try:
            _, changed = await node.add_voter(node_id, req.address, req.timeout_ms / 1000)
        except ValueError as e:
            raise bad_request(str(e)) from None
        return _voter_change(changed, node.image.voters)

    @app.post(
        "/v1/quorum/remove-voter",
        operation_id="removeVoter",
        tags=["admin"],
        summary="Remove a voter (RemoveRaftVoter)",
        response_model=M.VoterChangeResponse,
        responses={**WRITE_RESPONSES, **ERR_409},
        openapi_extra=body_doc(M.RemoveVoterRequest),
    )
    async def remove_voter(request: Request, caller: AdminCaller) -> Response:
        """Commits a voter set without ``nodeId``; the node stops voting and
        standing for election once it has that record. One change at a time."""
        req = parse_body(M.RemoveVoterRequest, await request.body())
        voters = await node.remove_voter(_node_id(req))
        return _voter_change(True, voters)

    @app.post(
        "/v1/quorum/update-voter",
        operation_id="updateVoter",
        tags=["admin"],
        summary="Update a voter's Raft address (UpdateRaftVoter)",
        response_model=M.VoterChangeResponse,
        responses={**WRITE_RESPONSES, **ERR_409},
        openapi_extra=body_doc(M.UpdateVoterRequest),
    )
    async def update_voter(request: Request, caller: AdminCaller) -> Response:
        """Commits a voter set with ``nodeId`` at ``raftAddress``, its directory
        id kept (it must be the one the set names). Refusals answer 409 with
        Kafka's code and the rule that refused (docs/rules.md); nothing is
        written then. ``changed: false``: it was already there."""
        req = parse_body(M.UpdateVoterRequest, await request.body())
        if req.node_id < 0:
            raise bad_request(f"nodeId: {req.node_id} is not a node id (0 or more)")
        versions = (
            req.kraft_version.min_supported_version,
            req.kraft_version.max_supported_version,
        )
        voters, changed = await node.update_voter(
            req.node_id, req.directory_id, req.raft_address, versions
        )
        return _voter_change(changed, voters)


def status(app: FastAPI, ctx: RouteContext) -> None:
    node = ctx.node

    @app.get(
        "/v1/quorum/status",
        operation_id="quorumStatus",
        tags=["reads"],
        summary="Quorum status",
        response_model=M.QuorumStatusOut,
        responses={
            200: READ_RESPONSES[200],
            **ERR_400,
            **ERR_AUTH,
            **ERR_429,
        },
    )
    async def quorum_status(
        caller: ReadCaller,
        digest: Annotated[
            bool, Query(description="also compute imageDigest (costs a full image encoding)")
        ] = False,
    ) -> Response:
        """Served even when the node is not ready (that is when it is needed)."""
        image = node.image
        status = quorum_status_obj(node, ctx.tracker, ctx.auth.enabled)
        status["imageDigest"] = None
        pool = getattr(app.state, "http_workers", None)  # voter/worker_pool.py
        status["httpWorkers"] = [] if pool is None else pool.describe()
        status["imageFile"] = None if pool is None else pool.describe_image_file()
        status["ordererProcess"] = None if pool is None else pool.describe_orderer()
        if digest:
            offset, value = await asyncio.to_thread(node.image_digest)
            status["lastAppliedOffset"], status["imageDigest"] = offset, value
        return with_offset(status, image)
