"""Every endpoint of docs/api.md, registered by domain: ``register(app, ctx)``.

ROUTES lists them in the order the OpenAPI document lists them (that order is
part of the contract: generated clients and docs/api.md follow it). The admin
writes are rows of data (``AdminWrite``: parse -> submit -> answer, one
handler for all); every other entry is a domain module's function that
registers its own routes, for what needs more than a row: the broker writes
(the caller's broker id, the direct routes), the quorum's (the node, not the
controller), and the reads.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI

from .. import models as M
from . import (
    acls,
    backup,
    brokers,
    configs,
    console,
    delegation_tokens,
    explain,
    health,
    history,
    quorum,
    quotas,
    reassignments,
    records,
    refusals,
    scram,
    topics,
    what_if,
)
from .admin_writes import AdminWrite
from .context import RouteContext

ROUTES: tuple[Callable[[FastAPI, RouteContext], None], ...] = (
    brokers.writes,
    AdminWrite(
        "POST", "/v1/topics", "createTopics", "CreateTopics",
        M.CreateTopicsRequest, M.CreateTopicsResponse,
    ),
    AdminWrite(
        "DELETE", "/v1/topics/{name}", "deleteTopic", "DeleteTopics (one topic)",
        None, M.DeleteTopicsResponse, message=M.delete_topics_message,
    ),
    AdminWrite(
        "POST", "/v1/topics/delete", "deleteTopics", "DeleteTopics (several topics)",
        M.DeleteTopicsRequest, M.DeleteTopicsResponse,
        doc="""Deletes the topics named, each with its own result in the order
        asked (an unknown or repeated name is refused, the others go); the
        ones deleted go in one batch.""",
    ),
    AdminWrite(
        "DELETE", "/v1/brokers/{id}", "unregisterBroker", "UnregisterBroker",
        None, M.UnregisterBrokerResponse, message=M.unregister_broker_message,
        doc="""Decommissions a broker id (Kafka's UnregisterBroker): its
        registration is removed and it leaves every ISR, with new leaders
        elected, in one batch. Kafka does not refuse a live broker; stop it
        first (docs/api-additions.md).""",
    ),
    AdminWrite(
        "POST", "/v1/topics/{name}/partitions", "createPartitions", "CreatePartitions",
        M.CreatePartitionsRequest, M.CreatePartitionsResponse,
        message=topics.create_partitions_message,
    ),
    AdminWrite(
        "POST", "/v1/reassignments", "alterPartitionReassignments", "AlterPartitionReassignments",
        M.AlterPartitionReassignmentsRequest, M.AlterPartitionReassignmentsResponse,
    ),
    AdminWrite(
        "POST", "/v1/elect-leaders", "electLeaders", "ElectLeaders",
        M.ElectLeadersRequest, M.ElectLeadersResponse,
    ),
    AdminWrite(
        "POST", "/v1/features", "updateFeatures",
        "UpdateFeatures (metadata.version, eligible.leader.replicas.version)",
        M.UpdateFeaturesRequest, M.UpdateFeaturesResponse,
    ),
    AdminWrite(
        "POST", "/v1/configs", "incrementalAlterConfigs", "IncrementalAlterConfigs",
        M.IncrementalAlterConfigsRequest, M.IncrementalAlterConfigsResponse,
        doc="""Sets, deletes, appends to or subtracts from the configs of topics,
        brokers and the cluster-wide default (resource type 4, name ""). Each
        resource is all or nothing (docs/api-additions.md).""",
    ),
    AdminWrite(
        "POST", "/v1/acls", "createAcls", "CreateAcls",
        M.CreateAclsRequest, M.CreateAclsResponse,
        entries=lambda response, problems: len(problems) + len(response.results),
        doc="""Creates ACL bindings; one result per creation, in order. A binding
        that exists already succeeds and writes nothing (docs/api-additions.md).""",
    ),
    AdminWrite(
        "POST", "/v1/acls/delete", "deleteAcls", "DeleteAcls",
        M.DeleteAclsRequest, M.DeleteAclsResponse,
        entries=lambda response, _: sum(len(r.matching_acls) for r in response.filter_results),
        doc="""Deletes every binding each filter matches; each filter answers
        what it matched (Kafka's filter semantics).""",
    ),
    acls.reads,
    quorum.membership,
    brokers.reads,
    topics.reads,
    reassignments.reads,
    configs.reads,
    AdminWrite(
        "POST", "/v1/client-quotas", "alterClientQuotas", "AlterClientQuotas",
        M.AlterClientQuotasRequest, M.AlterClientQuotasResponse,
        doc="""Sets or removes quotas of users, client ids (and their defaults)
        and ips. Each entity is all or nothing (docs/api-additions.md).""",
    ),
    quotas.reads,
    AdminWrite(
        "POST", "/v1/scram-credentials", "alterUserScramCredentials",
        "AlterUserScramCredentials",
        M.AlterUserScramCredentialsRequest, M.AlterUserScramCredentialsResponse,
        doc="""Sets (from the client's salt and salted password, never the
        password) or removes users' SCRAM credentials; one result per user
        (docs/api-additions.md).""",
    ),
    scram.reads,
    AdminWrite(
        "POST", "/v1/delegation-tokens", "createDelegationToken", "CreateDelegationToken",
        M.CreateDelegationTokenRequest, M.CreateDelegationTokenResponse, with_caller=True,
        doc="""Creates a delegation token owned by the caller (or the owner
        named), renewable by the renewers named; the answer carries its HMAC
        (docs/api-additions.md "Delegation tokens").""",
    ),
    AdminWrite(
        "POST", "/v1/delegation-tokens/renew", "renewDelegationToken", "RenewDelegationToken",
        M.RenewDelegationTokenRequest, M.DelegationTokenExpiryResponse, with_caller=True,
        doc="""Moves a token's expiry on, never past its max time; only its
        owner or a renewer may.""",
    ),
    AdminWrite(
        "POST", "/v1/delegation-tokens/expire", "expireDelegationToken", "ExpireDelegationToken",
        M.ExpireDelegationTokenRequest, M.DelegationTokenExpiryResponse, with_caller=True,
        doc="""Expires a token now (a negative period: it is removed) or
        after the period given; only its owner or a renewer may.""",
    ),
    delegation_tokens.reads,
    records.reads,
    history.reads,
    refusals.reads,
    what_if.reads,
    explain.reads,
    backup.backup,
    quorum.status,
    health.probes,
    console.pages,  # the web console: not in the OpenAPI document
)  # fmt: skip


def register(app: FastAPI, ctx: RouteContext) -> None:
    for add_routes in ROUTES:
        add_routes(app, ctx)
