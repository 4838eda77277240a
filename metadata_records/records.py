"""Metadata record types with Kafka's names, fields and versions (docs/kafka-rules.md section 0).

A record is a fact: applying it never fails and never reads a clock. Each class
is declared as a frozen dataclass whose fields carry their Kafka kind and the
version that introduced them; the codec reads those declarations, so a record's
wire shape is written down once, here. ``_record`` turns each declaration into
the frozen ``msgspec.Struct`` the rest of the code uses (built in C).
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from typing import Any, NamedTuple

import msgspec


class Kind(Enum):
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    BOOL = "bool"
    STRING = "string"
    NULLABLE_STRING = "nullable string"
    UUID = "uuid"
    INT32_LIST = "int32 array"
    NULLABLE_INT32_LIST = "nullable int32 array"
    ENDPOINTS = "endpoint array"
    FEATURES = "feature array"
    VOTERS = "voter array"
    FLOAT64 = "float64"
    QUOTA_ENTITY = "entity array"  # ClientQuotaRecord's [(entityType, entityName)]
    BYTES = "bytes"  # base64 in JSON, as Kafka's JSON converters write bytes
    STRING_LIST = "string array"  # DelegationTokenRecord's renewers


INT_RANGES = {
    Kind.INT8: (-(2**7), 2**7 - 1),
    Kind.INT16: (-(2**15), 2**15 - 1),
    Kind.INT32: (-(2**31), 2**31 - 1),
    Kind.INT64: (-(2**63), 2**63 - 1),
}

# Special values of PartitionChangeRecord and friends.
NO_LEADER = -1
NO_LEADER_CHANGE = -2
LRS_RECOVERED = 0
LRS_RECOVERING = 1
LRS_NO_CHANGE = -1
# BrokerRegistrationChangeRecord.fenced / inControlledShutdown (Kafka's *Change enums).
FENCE = 1
UNFENCE = -1
NO_CHANGE = 0
IN_CONTROLLED_SHUTDOWN = 1
# ConfigRecord.resourceType (Kafka's ConfigResource.Type): a topic's configs,
# and a broker's (resourceName its id) or the cluster default (resourceName "").
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


class Endpoint(NamedTuple):
    name: str
    host: str
    port: int
    security_protocol: int


# Kafka's SecurityProtocol ids (org.apache.kafka.common.security.auth.SecurityProtocol):
# the only values an endpoint's securityProtocol may hold.
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


class Voter(NamedTuple):
    """One voter of the Raft quorum: its node id, the directory id of the data
    dir it votes with (KIP-853), and its Raft endpoint."""

    voter_id: int
    voter_directory_id: str
    host: str
    port: int


class EntityData(NamedTuple):
    """One component of a client quota entity (ClientQuotaRecord.EntityData):
    ``entity_name`` None is the default entity of that type."""

    entity_type: str
    entity_name: str | None


class FeatureRange(NamedTuple):
    name: str
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True)
class FieldSpec:
    attr: str  # Python attribute name
    key: str  # camelCase JSON name
    kind: Kind
    since: int  # first record version that has the field
    default: Any  # MISSING when the field is required


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _f(kind: Kind, *, since: int = 0, default: Any = MISSING) -> Any:
    meta = {"kind": kind, "since": since}
    if default is MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


RECORD_TYPES: dict[str, type] = {}


def _record(type_name: str, api_key: int, max_version: int):
    """Registers a record type. Its class body is the declaration (each field
    with its Kafka kind, the version that introduced it, its default), read
    here into ``FIELDS``; the class the module exports is a frozen
    ``msgspec.Struct`` with the same fields, defaults and docstring. A Struct
    is built in C: a PartitionChangeRecord in about 0.07 us where a frozen
    dataclass took 0.6 (docs/decisions.md 128), and every process that
    follows the log builds one per record. ``gc=False``: a record holds only
    numbers, strings and tuples of them, so it can be in no cycle."""

    def register(declared):
        specs = tuple(
            FieldSpec(
                f.name,
                _camel(f.name),
                f.metadata["kind"],
                f.metadata["since"],
                f.default,
            )
            for f in fields(declared)
            if f.name != "version"
        )
        cls = msgspec.defstruct(
            declared.__name__,
            [
                (f.name, f.type) if f.default is MISSING else (f.name, f.type, f.default)
                for f in fields(declared)
            ],
            module=declared.__module__,
            namespace={
                # A record whose fields are secrets prints without them.
                **({"__repr__": declared.__repr__} if "__repr__" in vars(declared) else {}),
                "__doc__": declared.__doc__,
                "TYPE": type_name,
                "API_KEY": api_key,
                "MAX_VERSION": max_version,
                "FIELDS": specs,
            },
            frozen=True,
            gc=False,
        )
        RECORD_TYPES[type_name] = cls
        return cls

    return register


@_record("REGISTER_BROKER_RECORD", 0, 2)
@dataclass(frozen=True)
class RegisterBrokerRecord:
    """Versions as Kafka writes them by metadata.version (features.py): v1 adds
    ``inControlledShutdown`` (KIP-841), v2 ``isMigratingZkBroker`` (KIP-866;
    always false here, ZooKeeper brokers are refused). v3's log directories are
    out of scope."""

    broker_id: int = _f(Kind.INT32)
    incarnation_id: str = _f(Kind.UUID)
    broker_epoch: int = _f(Kind.INT64)
    end_points: tuple[Endpoint, ...] = _f(Kind.ENDPOINTS, default=())
    features: tuple[FeatureRange, ...] = _f(Kind.FEATURES, default=())
    rack: str | None = _f(Kind.NULLABLE_STRING, default=None)
    fenced: bool = _f(Kind.BOOL, default=True)
    in_controlled_shutdown: bool = _f(Kind.BOOL, since=1, default=False)
    is_migrating_zk_broker: bool = _f(Kind.BOOL, since=2, default=False)
    version: int = 2


@_record("UNREGISTER_BROKER_RECORD", 1, 0)
@dataclass(frozen=True)
class UnregisterBrokerRecord:
    """The broker id's registration is gone (Kafka's UnregisterBroker API); only
    a registration at ``broker_epoch`` is removed."""

    broker_id: int = _f(Kind.INT32)
    broker_epoch: int = _f(Kind.INT64)
    version: int = 0


@_record("PRODUCER_IDS_RECORD", 15, 0)
@dataclass(frozen=True)
class ProducerIdsRecord:
    """A block of producer ids granted to a broker (Kafka's AllocateProducerIds):
    the block ends at ``next_producer_id``, the first id of the next block.
    Each record's ``next_producer_id`` exceeds the one before, so no id is
    handed out twice (a snapshot restates it with broker -1, epoch -1)."""

    broker_id: int = _f(Kind.INT32)
    broker_epoch: int = _f(Kind.INT64)
    next_producer_id: int = _f(Kind.INT64)
    version: int = 0


@_record("CLIENT_QUOTA_RECORD", 14, 0)
@dataclass(frozen=True)
class ClientQuotaRecord:
    """One quota key of one client quota entity set (``remove`` false) or
    removed (Kafka's AlterClientQuotas; ``value`` is ignored on removal).
    The entity's components are user, client-id (alone or together) or ip
    alone; metadata_records/client_quotas.py holds the rules."""

    entity: tuple[EntityData, ...] = _f(Kind.QUOTA_ENTITY)
    key: str = _f(Kind.STRING)
    value: float = _f(Kind.FLOAT64, default=0.0)
    remove: bool = _f(Kind.BOOL, default=False)
    version: int = 0


@_record("ACCESS_CONTROL_ENTRY_RECORD", 18, 0)
@dataclass(frozen=True)
class AccessControlEntryRecord:
    """One ACL binding under its id (Kafka's CreateAcls); the enums are
    Kafka's codes (metadata_records/acls.py). A snapshot restates each."""

    id: str = _f(Kind.UUID)
    resource_type: int = _f(Kind.INT8)
    resource_name: str = _f(Kind.STRING)
    pattern_type: int = _f(Kind.INT8)
    principal: str = _f(Kind.STRING)
    host: str = _f(Kind.STRING)
    operation: int = _f(Kind.INT8)
    permission_type: int = _f(Kind.INT8)
    version: int = 0


@_record("REMOVE_ACCESS_CONTROL_ENTRY_RECORD", 19, 0)
@dataclass(frozen=True)
class RemoveAccessControlEntryRecord:
    """The ACL with this id is gone (Kafka's DeleteAcls)."""

    id: str = _f(Kind.UUID)
    version: int = 0


@_record("USER_SCRAM_CREDENTIAL_RECORD", 11, 0)
@dataclass(frozen=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism (Kafka's
    AlterUserScramCredentials, KIP-554): the salt the client chose and the
    keys the controller derived from the salted password (never the
    password, never the salted password). ``salt``, ``stored_key`` and
    ``server_key`` are secrets: metadata_records/redaction.py keeps them out
    of everything a reader is shown. metadata_records/scram.py holds the
    mechanisms and the derivation."""

    name: str = _f(Kind.STRING)
    mechanism: int = _f(Kind.INT8)
    salt: bytes = _f(Kind.BYTES)
    stored_key: bytes = _f(Kind.BYTES)
    server_key: bytes = _f(Kind.BYTES)
    iterations: int = _f(Kind.INT32)
    version: int = 0

    def __repr__(self) -> str:  # as Kafka's RecordRedactor prints it
        return (
            f"UserScramCredentialRecord(name={self.name!r}, mechanism={self.mechanism}, "
            f"salt=(redacted), storedKey=(redacted), serverKey=(redacted), "
            f"iterations={self.iterations})"
        )


@_record("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", 22, 0)
@dataclass(frozen=True)
class RemoveUserScramCredentialRecord:
    """The user's credential for this mechanism is gone."""

    name: str = _f(Kind.STRING)
    mechanism: int = _f(Kind.INT8)
    version: int = 0


@_record("DELEGATION_TOKEN_RECORD", 10, 0)
@dataclass(frozen=True)
class DelegationTokenRecord:
    """A delegation token (Kafka's CreateDelegationToken, KIP-48), written
    again whole when it is renewed or its expiry is moved. Timestamps are
    wall-clock milliseconds since the epoch, as Kafka's (absolute times that
    every broker compares with its own clock). The token's HMAC is no field:
    every node derives it from the token id and the cluster's secret
    (controller/delegation_token_control.py), so no record, snapshot or
    export holds anything that authenticates as the token."""

    owner: str = _f(Kind.STRING)  # a principal, "User:alice"
    requester: str = _f(Kind.STRING)  # the principal that created it
    renewers: tuple[str, ...] = _f(Kind.STRING_LIST)  # principals that may renew it
    issue_timestamp: int = _f(Kind.INT64)
    max_timestamp: int = _f(Kind.INT64)  # it cannot be renewed past this
    expiration_timestamp: int = _f(Kind.INT64)  # it must be renewed before this
    token_id: str = _f(Kind.STRING)
    version: int = 0


@_record("REMOVE_DELEGATION_TOKEN_RECORD", 26, 0)
@dataclass(frozen=True)
class RemoveDelegationTokenRecord:
    """The token is gone: expired at once by its owner or a renewer, or swept
    by the controller once past its expiry or its max lifetime."""

    token_id: str = _f(Kind.STRING)
    version: int = 0


@_record("TOPIC_RECORD", 2, 0)
@dataclass(frozen=True)
class TopicRecord:
    name: str = _f(Kind.STRING)
    topic_id: str = _f(Kind.UUID)
    version: int = 0


@_record("PARTITION_RECORD", 3, 2)
@dataclass(frozen=True)
class PartitionRecord:
    """v2 (KIP-966, written only with ``eligible.leader.replicas.version`` 1)
    adds Kafka's tagged ``eligibleLeaderReplicas`` and ``lastKnownElr``
    (null means empty). v1's log directories are out of scope: v1 is v0's
    shape and never written (decisions.md 110)."""

    partition_id: int = _f(Kind.INT32)
    topic_id: str = _f(Kind.UUID)
    replicas: tuple[int, ...] = _f(Kind.INT32_LIST)
    isr: tuple[int, ...] = _f(Kind.INT32_LIST)
    removing_replicas: tuple[int, ...] = _f(Kind.INT32_LIST, default=())
    adding_replicas: tuple[int, ...] = _f(Kind.INT32_LIST, default=())
    leader: int = _f(Kind.INT32, default=NO_LEADER)
    leader_recovery_state: int = _f(Kind.INT8, default=LRS_RECOVERED)
    leader_epoch: int = _f(Kind.INT32, default=0)
    partition_epoch: int = _f(Kind.INT32, default=0)
    eligible_leader_replicas: tuple[int, ...] | None = _f(
        Kind.NULLABLE_INT32_LIST, since=2, default=None
    )
    last_known_elr: tuple[int, ...] | None = _f(Kind.NULLABLE_INT32_LIST, since=2, default=None)
    version: int = 0


@_record("CONFIG_RECORD", 4, 0)
@dataclass(frozen=True)
class ConfigRecord:
    resource_type: int = _f(Kind.INT8)
    resource_name: str = _f(Kind.STRING)
    name: str = _f(Kind.STRING)
    value: str | None = _f(Kind.NULLABLE_STRING, default=None)
    version: int = 0


@_record("PARTITION_CHANGE_RECORD", 5, 2)
@dataclass(frozen=True)
class PartitionChangeRecord:
    """Null list fields and leader -2 / leaderRecoveryState -1 mean "unchanged".
    v2 (KIP-966) adds ``eligibleLeaderReplicas`` and ``lastKnownElr``; a record
    is written at v2 only when it sets one of them (decisions.md 110)."""

    partition_id: int = _f(Kind.INT32)
    topic_id: str = _f(Kind.UUID)
    isr: tuple[int, ...] | None = _f(Kind.NULLABLE_INT32_LIST, default=None)
    leader: int = _f(Kind.INT32, default=NO_LEADER_CHANGE)
    replicas: tuple[int, ...] | None = _f(Kind.NULLABLE_INT32_LIST, default=None)
    removing_replicas: tuple[int, ...] | None = _f(Kind.NULLABLE_INT32_LIST, default=None)
    adding_replicas: tuple[int, ...] | None = _f(Kind.NULLABLE_INT32_LIST, default=None)
    leader_recovery_state: int = _f(Kind.INT8, default=LRS_NO_CHANGE)
    eligible_leader_replicas: tuple[int, ...] | None = _f(
        Kind.NULLABLE_INT32_LIST, since=2, default=None
    )
    last_known_elr: tuple[int, ...] | None = _f(Kind.NULLABLE_INT32_LIST, since=2, default=None)
    version: int = 0


@_record("REMOVE_TOPIC_RECORD", 9, 0)
@dataclass(frozen=True)
class RemoveTopicRecord:
    topic_id: str = _f(Kind.UUID)
    version: int = 0


@_record("FEATURE_LEVEL_RECORD", 12, 0)
@dataclass(frozen=True)
class FeatureLevelRecord:
    name: str = _f(Kind.STRING)
    feature_level: int = _f(Kind.INT16)
    version: int = 0


@_record("BROKER_REGISTRATION_CHANGE_RECORD", 17, 1)
@dataclass(frozen=True)
class BrokerRegistrationChangeRecord:
    """``fenced``: 1 fence, -1 unfence, 0 no change. ``in_controlled_shutdown``:
    1 enter, 0 no change; there is no value to leave (only a new incarnation does)."""

    broker_id: int = _f(Kind.INT32)
    broker_epoch: int = _f(Kind.INT64)
    fenced: int = _f(Kind.INT8, default=NO_CHANGE)
    in_controlled_shutdown: int = _f(Kind.INT8, since=1, default=NO_CHANGE)
    version: int = 0


@_record("NO_OP_RECORD", 20, 0)
@dataclass(frozen=True)
class NoOpRecord:
    version: int = 0


@_record("LEADER_CHANGE", -2, 0)
@dataclass(frozen=True)
class LeaderChangeRecord:
    """Control record a new active controller commits before answering any write.

    ``controller_epoch`` is the Raft term that elected it: unique per leader and
    increasing, so a deposed leader's batches can always be told apart."""

    controller_epoch: int = _f(Kind.INT32)
    leader_id: int = _f(Kind.INT32)
    leader_url: str = _f(Kind.STRING)
    version: int = 0


@_record("KRAFT_VOTERS", -6, 0)
@dataclass(frozen=True)
class VotersRecord:
    """Control record: the whole voter set from here on (Kafka's ``VotersRecord``,
    KIP-853), written by the first leader of a cluster and by every membership
    change. A voter is a (node id, directory id) pair: a node whose data dir
    was replaced has a new directory id and is not a voter until a later
    VotersRecord names it (quorum/voter_guard.py)."""

    voters: tuple[Voter, ...] = _f(Kind.VOTERS)
    version: int = 0


Record = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | ProducerIdsRecord
    | ClientQuotaRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | DelegationTokenRecord
    | RemoveDelegationTokenRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | FeatureLevelRecord
    | BrokerRegistrationChangeRecord
    | NoOpRecord
    | LeaderChangeRecord
    | VotersRecord
)


class Who(
    msgspec.Struct,
    frozen=True,
    gc=False,
    omit_defaults=True,
    forbid_unknown_fields=True,
    rename={"request_id": "requestId"},
):
    """Who asked for a run of a batch's records: ``records`` of them, counted
    on from where the previous Who of the batch ended (docs/api-additions.md
    "Who changed what").

    ``principal`` is ``<role>:<identity>`` (``admin:token/ops``,
    ``broker:cert/CN=kafka-3``, ``admin:anonymous``) or ``controller`` for the
    controller's own work, with ``rule`` saying why; ``api`` is Kafka's API
    name of the request (or the controller's sweep); ``address`` the client
    address the voter saw; ``request_id`` the caller's X-Request-Id or one the
    voter made. Never any part of a secret. The struct's options are its JSON
    shape in a batch (empty strings left out); the codec checks the bounds of
    limits.py on decode."""

    records: int
    principal: str
    api: str
    address: str = ""
    request_id: str = ""
    rule: str = ""


@dataclass(frozen=True, slots=True)
class Batch:
    """What one Raft entry carries: records decided together under one controller
    epoch, stamped with the leader's clock when the batch was built.

    ``base_offset`` is the offset the leader decided the first record would get
    (broker epochs are offsets, so a batch is only right where it was decided);
    -1 when the batch does not depend on its position (LEADER_CHANGE, which a
    new leader proposes before it has applied its whole log, and the empty
    barrier batches of linearizable reads).

    ``who`` says who asked for the records (``Who``), replicated with them."""

    controller_epoch: int
    timestamp_ms: int
    records: tuple[Record, ...]
    base_offset: int = -1
    # Who asked for which of the records, in order, covering them all; empty
    # for batches written before who was recorded and for empty batches.
    who: tuple[Who, ...] = ()


# Kafka's topic name rule (org.apache.kafka.common.internals.Topic).
TOPIC_NAME_MAX_LENGTH = 249
_TOPIC_NAME_RE = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` is not a legal topic name, or None if it is."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > TOPIC_NAME_MAX_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {TOPIC_NAME_MAX_LENGTH} characters, "
            f"topic name: {name[:40]}..."
        )
    if not _TOPIC_NAME_RE.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None
