"""The OpenAPI document the app serves at /openapi.json: its description,
tags and the schemas of every request body.

The app parses bodies itself (api/bodies.py), so FastAPI sees no body
models: api/openapi_doc.py ``finish`` adds REQUEST_MODELS' schemas (and
DESCRIBED_MODELS', the body of no JSON answer) to the
document, drops FastAPI's 422 (a bad request is 400 here) and gives every
nested schema an example. Built once, on first ask.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from .. import models as M
from ..openapi_doc import finish

# Every request body, for the OpenAPI components (the app parses bodies itself).
REQUEST_MODELS: tuple[type[BaseModel], ...] = (
    M.BrokerRegistrationRequest,
    M.BrokerHeartbeatRequest,
    M.AlterPartitionRequest,
    M.CreateTopicsRequest,
    M.DeleteTopicsRequest,
    M.CreatePartitionsRequest,
    M.AlterPartitionReassignmentsRequest,
    M.ElectLeadersRequest,
    M.UpdateFeaturesRequest,
    M.IncrementalAlterConfigsRequest,
    M.AllocateProducerIdsRequest,
    M.AlterClientQuotasRequest,
    M.AlterUserScramCredentialsRequest,
    M.CreateDelegationTokenRequest,
    M.RenewDelegationTokenRequest,
    M.ExpireDelegationTokenRequest,
    M.CreateAclsRequest,
    M.DeleteAclsRequest,
    M.TransferLeadershipRequest,
    M.AddVoterRequest,
    M.RemoveVoterRequest,
    M.UpdateVoterRequest,
)
# Models that no route returns as JSON: GET /v1/backup's header line.
DESCRIBED_MODELS: tuple[type[BaseModel], ...] = (M.BackupHeader,)

DESCRIPTION = """\
A Raft-replicated cluster-metadata service in the style of Apache Kafka's KRaft
controller. The contract is docs/api.md.

* JSON in and out; Kafka's camelCase field names; UUIDs in base64url (the
  36-character form is accepted on input). Integers are strict and checked
  against their Kafka type's range. Unknown fields are ignored, except fields
  of another AlterPartition version, which are refused.
* **200** whenever the active controller processed the request; the protocol
  outcome is in `errorCode` / `errorName` / `errorMessage`.
* **400** (`INVALID_REQUEST`, 42): not JSON, wrong type, missing field, out of
  range, unknown query value; `errorMessage` names the field. Nothing is written.
* **401 / 403** (`CLUSTER_AUTHORIZATION_FAILED`, 31): missing/unknown token, or
  a token without the role (a bound broker token acting for another broker).
* **307** (`NOT_CONTROLLER`, 41): a write reached a node that is not the
  active controller; `Location` is the same path and query on the leader.
* **503** + `Retry-After`: no leader known, replaying, not ready or shutting
  down (`NOT_CONTROLLER`, 41); or the write's outcome is unknown
  (`REQUEST_TIMED_OUT`, 7): it may still commit, so retry (epochs make a retry
  safe).
* **413** (42): body over the limit. **415** (42): a body without
  `Content-Type: application/json`. **429** (`THROTTLING_QUOTA_EXCEEDED`, 89)
  + `Retry-After`: too much is queued; nothing was written.
* **408 / 414 / 431 / 503** from the HTTP server, then the connection is
  closed: a request head or body too slow, a URL or head over its limit, too
  many connections. Duplicate keys in a body are refused (400). Every limit:
  docs/limits.md.
* Reads carry `X-Metadata-Offset` (the serving node's last applied offset) and
  take `?consistency=linearizable` (a barrier through the log first).
* Every answer carries `X-Request-Id`: the request's own (1 to 64 printable
  ASCII characters; anything else is a 400, nothing written), else one the
  voter made. A write's records say who asked for them in `GET /v1/log`
  (`who`: principal, API, client address, request id; docs/history.md).
"""

TAGS = [
    {"name": "brokers", "description": "Broker endpoints (role `broker`)"},
    {"name": "admin", "description": "Admin endpoints (role `admin`)"},
    {"name": "reads", "description": "Reads (role `read`), served by any ready node"},
    {"name": "health", "description": "Probes and metrics (no token)"},
]


def serve_document(app: FastAPI) -> None:
    """``app.openapi`` builds the document from the app's routes once, finished."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
            tags=TAGS,
        )
        finish(schema, REQUEST_MODELS + DESCRIBED_MODELS)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
