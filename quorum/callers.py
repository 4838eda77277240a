"""Who asked for a write: what travels with a request from the HTTP edge to
the orderer (``Caller``), and the ``Who`` runs the orderer writes into each
batch beside its records (metadata_records/records.py).

The edge builds a request's Caller from what it knows itself (the principal
its credential maps to, the client address the voter saw, the request id),
never from anything the request says about itself, so a caller cannot write
another's name into the log. The API is the request's own type, named as
Kafka names the API. The controller's own work carries the principal
``controller`` and the rule that made it act (the table below; docs/history.md).

Pure: no clocks, no I/O. The orderer calls ``WhoRuns.add`` once per decided
request; consecutive work of one caller object (a sweep repeated) shares
one Who.
"""

from __future__ import annotations

from controller.messages import (
    AllocateProducerIdsRequest,
    AlterClientQuotasRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    AlterUserScramCredentialsRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreateAclsRequest,
    CreateDelegationTokenRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    ExpireDelegationTokenRequest,
    IncrementalAlterConfigsRequest,
    RenewDelegationTokenRequest,
    UnregisterBrokerRequest,
    UpdateFeaturesRequest,
)
from metadata_records.records import Who

# Who asked, as it travels with a request: (principal, address, request_id,
# api, rule), a Who without its record count; ``api`` empty: the request's
# own (``API_NAMES``). A plain tuple: it is pickled into every SUBMIT frame
# between a voter's processes, where a NamedTuple costs 2.4 times as much.
Caller = tuple[str, str, str, str, str]


def asked_by(
    principal: str, address: str = "", request_id: str = "", api: str = "", rule: str = ""
) -> Caller:
    return (principal, address, request_id, api, rule)


# Kafka's name of the API each controller request is.
API_NAMES: dict[type, str] = {
    BrokerRegistrationRequest: "RegisterBroker",
    BrokerHeartbeatRequest: "BrokerHeartbeat",
    UnregisterBrokerRequest: "UnregisterBroker",
    AllocateProducerIdsRequest: "AllocateProducerIds",
    AlterPartitionRequest: "AlterPartition",
    CreateTopicsRequest: "CreateTopics",
    DeleteTopicsRequest: "DeleteTopics",
    CreatePartitionsRequest: "CreatePartitions",
    AlterPartitionReassignmentsRequest: "AlterPartitionReassignments",
    ElectLeadersRequest: "ElectLeaders",
    UpdateFeaturesRequest: "UpdateFeatures",
    IncrementalAlterConfigsRequest: "IncrementalAlterConfigs",
    AlterClientQuotasRequest: "AlterClientQuotas",
    CreateAclsRequest: "CreateAcls",
    DeleteAclsRequest: "DeleteAcls",
    AlterUserScramCredentialsRequest: "AlterUserScramCredentials",
    CreateDelegationTokenRequest: "CreateDelegationToken",
    RenewDelegationTokenRequest: "RenewDelegationToken",
    ExpireDelegationTokenRequest: "ExpireDelegationToken",
}

CONTROLLER = "controller"


def _controller(api: str, rule: str) -> Caller:
    return asked_by(CONTROLLER, api=api, rule=rule)


# The controller's own work: (api, rule), listed in docs/history.md.
FENCE = _controller("FenceExpiredSessions", "kip-631.session-expired")
UNCLEAN = _controller("ElectUncleanLeaders", "kip-966.unclean-election")
BALANCE = _controller("ElectPreferredLeaders", "leader-imbalance.preferred-election")
TOKEN_SWEEP = _controller("SweepExpiredDelegationTokens", "delegation-token.expiry-swept")
NOOP = _controller("WriteNoOp", "metadata.max.idle.interval.noop")
BOOTSTRAP = _controller("Bootstrap", "cluster.bootstrap")
LEADER_CHANGE = _controller("LeaderChange", "raft.leader-elected")
VOTER_SET = _controller("UpdateRaftVoter", "kip-853.voter-set")
ADD_VOTER = _controller("AddRaftVoter", "kip-853.add-voter")
REMOVE_VOTER = _controller("RemoveRaftVoter", "kip-853.remove-voter")
UPDATE_VOTER = _controller("UpdateRaftVoter", "kip-853.update-voter")
CONTROLLER_WORK = (
    FENCE,
    UNCLEAN,
    BALANCE,
    TOKEN_SWEEP,
    NOOP,
    BOOTSTRAP,
    LEADER_CHANGE,
    VOTER_SET,
    ADD_VOTER,
    REMOVE_VOTER,
    UPDATE_VOTER,
)
# A request submitted in-process without a caller (tests, tools that drive a
# QuorumNode directly): never one that came through the HTTP edge.
INTERNAL = asked_by("internal")

# Every API a Who may name: the filter of GET /v1/log checks against it.
KNOWN_APIS = frozenset(API_NAMES.values()) | {c[3] for c in CONTROLLER_WORK}


class WhoRuns:
    """The Who runs of one batch, built as its requests are decided."""

    __slots__ = ("runs", "_caller", "_api")

    def __init__(self) -> None:
        self.runs: list[Who] = []
        self._caller: Caller | None = None
        self._api = ""

    def add(self, caller: Caller | None, request: object, records: int) -> None:
        """``records`` more records of the batch, asked for by ``caller``
        with ``request`` (None: ``INTERNAL``); none: nothing to say."""
        if records <= 0:
            return
        principal, address, request_id, api, rule = caller or INTERNAL
        if not api:
            api = API_NAMES.get(type(request)) or type(request).__name__
        runs = self.runs
        # The same caller object: the controller's sweeps, repeated. Requests
        # each carry their own (their request ids differ): never compared.
        if runs and caller is self._caller and api == self._api:
            last = runs[-1]
            runs[-1] = Who(last.records + records, principal, api, address, request_id, rule)
            return
        self._caller, self._api = caller, api
        runs.append(Who(records, principal, api, address, request_id, rule))

    def who(self) -> tuple[Who, ...]:
        return tuple(self.runs)


def controller_who(caller: Caller, records: int) -> tuple[Who, ...]:
    """The who of a batch the controller writes alone (LEADER_CHANGE)."""
    runs = WhoRuns()
    runs.add(caller, None, records)
    return runs.who()
