"""The cluster as it was: GET /v1/image (at an offset or a time) and
GET /v1/image/diff (quorum/history.py keeps what they are built from)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .acls import AclBindingOut
from .brokers import BROKER_EXAMPLE, BrokerOut
from .common import (
    ORDERS_ID,
    ErrorFields,
    ResponseModel,
    example,
)
from .quotas import QuotaEntityComponentOut
from .scram import CredentialInfoOut
from .topics import TopicOut


class ImageConfigsOut(ResponseModel):
    """The dynamic configs set on one resource."""

    resource_type: int = Field(description="2 a topic, 4 a broker (or the cluster default)")
    resource_name: str = Field(description='the topic name, the broker id, or "" for the default')
    configs: dict[str, str] = Field(
        description="name -> value; a sensitive config's value is `(redacted)` unless the "
        "caller's role sees it (admin, broker; includeSensitive)"
    )


class ImageAclOut(AclBindingOut):
    """A binding and its id (the ACCESS_CONTROL_ENTRY_RECORD's)."""

    id: str = Field(description="the binding's id")


class ImageQuotaOut(ResponseModel):
    """One client quota entity and its values."""

    entity: list[QuotaEntityComponentOut] = Field(description="its components")
    values: dict[str, float] = Field(description="quota key -> value")


class ImageScramUserOut(ResponseModel):
    """A user's SCRAM credentials: mechanisms and iterations, never a salt or a key."""

    user: str = Field(description="the user")
    credential_infos: list[CredentialInfoOut] = Field(description="by mechanism")


class ImageDelegationTokenOut(ResponseModel):
    """A delegation token: never its HMAC (DescribeDelegationToken shows that)."""

    token_id: str = Field(description="its id")
    owner: str = Field(description='its owner, "type:name"')
    requester: str = Field(description="who created it")
    renewers: list[str] = Field(description="who may renew it besides its owner")
    issue_timestamp: int = Field(description="when it was issued (wall clock, ms)")
    expiry_timestamp: int = Field(description="when it expires unless renewed")
    max_timestamp: int = Field(description="no renewal goes past this")


class ImageVoterOut(ResponseModel):
    """A Raft voter of the image's voter set (its KRAFT_VOTERS record)."""

    voter_id: int = Field(description="its node id")
    directory_id: str = Field(description="the directory id of the data dir it votes with")
    host: str = Field(description="its Raft host")
    port: int = Field(description="its Raft port")


class ImageOut(ResponseModel):
    """The cluster after ``offset``: every record up to it replayed (exact to
    the record, also inside a batch). Only the parts asked for (``only=``)
    are present; ``topics=`` narrows topics and their configs."""

    model_config = example(
        {
            "offset": 41,
            "nextOffset": 42,
            "timestampMs": 1795000004000,
            "oldestOffset": 0,
            "highWatermark": 120,
            "controllerEpoch": 3,
            "leaderId": 0,
            "brokers": [BROKER_EXAMPLE],
            "topics": [
                {
                    "name": "orders",
                    "topicId": ORDERS_ID,
                    "configs": [{"name": "retention.ms", "value": "86400000"}],
                    "partitions": [
                        {
                            "partitionIndex": 0,
                            "replicas": [1, 2, 3],
                            "isr": [1, 2],
                            "leader": 1,
                            "leaderEpoch": 4,
                            "partitionEpoch": 9,
                            "leaderRecoveryState": 0,
                            "addingReplicas": [],
                            "removingReplicas": [],
                            "eligibleLeaderReplicas": [],
                            "lastKnownElr": [],
                        }
                    ],
                }
            ],
            "configs": [
                {
                    "resourceType": 2,
                    "resourceName": "orders",
                    "configs": {"retention.ms": "86400000"},
                }
            ],
            "acls": [
                {
                    "id": "vZx5p1rGQ4eKfy2n8y3C9w",
                    "resourceType": "TOPIC",
                    "resourceName": "orders",
                    "patternType": "LITERAL",
                    "principal": "User:alice",
                    "host": "*",
                    "operation": "READ",
                    "permissionType": "ALLOW",
                }
            ],
            "clientQuotas": [
                {
                    "entity": [{"entityType": "user", "entityName": "alice"}],
                    "values": {"producer_byte_rate": 1048576.0},
                }
            ],
            "scram": [{"user": "alice", "credentialInfos": [{"mechanism": 1, "iterations": 8192}]}],
            "delegationTokens": [
                {
                    "tokenId": "4Bd5Jm3uQNC8bn4r8KFeyA",
                    "owner": "User:alice",
                    "requester": "User:token/ops",
                    "renewers": [],
                    "issueTimestamp": 1764871200000,
                    "expiryTimestamp": 1764957600000,
                    "maxTimestamp": 1765476000000,
                }
            ],
            "features": {"metadata.version": 12},
            "voters": [
                {"voterId": 0, "directoryId": "b4Qu2DxXQvWv1CK6Rnh0Zw", "host": "h0", "port": 9093}
            ],
        }
    )

    offset: int = Field(description="the last offset the image holds (-1: the empty image)")
    next_offset: int = Field(description="offset + 1")
    timestamp_ms: int | None = Field(
        description="the timestamp of the batch holding ``offset`` (null: the current image "
        "of a voter whose history does not hold it)"
    )
    oldest_offset: int | None = Field(
        description="the oldest offset this voter's history window serves now (null: none kept)"
    )
    high_watermark: int = Field(description="this voter's log end (the next offset it applies)")
    controller_epoch: int = Field(description="the controller epoch of the image")
    leader_id: int = Field(description="the active controller named by its last LEADER_CHANGE")
    brokers: list[BrokerOut] | None = Field(None, description="as GET /v1/brokers shows them")
    topics: list[TopicOut] | None = Field(None, description="as GET /v1/topics shows them")
    configs: list[ImageConfigsOut] | None = Field(
        None, description="the dynamic configs of topics (by name), then brokers"
    )
    acls: list[ImageAclOut] | None = Field(None, description="every binding, by id")
    client_quotas: list[ImageQuotaOut] | None = Field(None, description="every entity")
    scram: list[ImageScramUserOut] | None = Field(
        None,
        description="every user with a SCRAM credential: its mechanisms and iterations, "
        "never a salt or a key",
    )
    delegation_tokens: list[ImageDelegationTokenOut] | None = Field(
        None, description="every delegation token, by id: never an HMAC"
    )
    features: dict[str, int] | None = Field(None, description="finalized feature -> level")
    voters: list[ImageVoterOut] | None = Field(None, description="the Raft voter set")


class ImageChangeOut(ResponseModel):
    """One entity that differs between the two images."""

    kind: str = Field(
        description="broker, topic, partition, config, acl, clientQuota, scram, "
        "delegationToken, feature or voters",
        examples=["partition"],
    )
    key: dict[str, Any] = Field(
        description="which one: {brokerId}, {topic}, {topic, partition}, {resourceType, "
        "resourceName, name}, {id}, {entity}, {user}, {tokenId}, {name}, or {} for the "
        "voter set",
        examples=[{"topic": "orders", "partition": 0}],
    )
    before: Any = Field(description="its value after ``from`` (null: absent)")
    after: Any = Field(description="its value after ``to`` (null: absent)")


class ImageDiffOut(ResponseModel):
    """Every entity that changed between the image after ``from`` and the one
    after ``to``, each with its value in both."""

    model_config = example(
        {
            "from": 40,
            "to": 57,
            "changes": [
                {
                    "kind": "broker",
                    "key": {"brokerId": 7},
                    "before": {"brokerId": 7, "fenced": False},
                    "after": {"brokerId": 7, "fenced": True},
                },
                {
                    "kind": "partition",
                    "key": {"topic": "orders", "partition": 0},
                    "before": {"partitionIndex": 0, "leader": 7, "isr": [7, 1]},
                    "after": {"partitionIndex": 0, "leader": 1, "isr": [1]},
                },
            ],
            "total": 2,
            "truncated": False,
        }
    )

    from_: int = Field(alias="from", description="the first image's last offset")
    to: int = Field(description="the second image's last offset")
    changes: list[ImageChangeOut] = Field(
        description="brokers, topics and their partitions and configs, broker configs, ACLs, "
        "client quotas, SCRAM users, features, voters; at most maxChanges of them"
    )
    total: int = Field(description="how many entities changed (changes holds maxChanges at most)")
    truncated: bool = Field(description="whether changes was cut at maxChanges")


class ImageNotYetResponse(ErrorFields):
    """404: the offset asked for is past this voter's committed log."""

    model_config = example(
        {
            "errorCode": 1,
            "errorName": "OFFSET_OUT_OF_RANGE",
            "errorMessage": "offset 900 is not committed here yet: the log ends at offset 119 "
            "(highWatermark 120)",
            "highWatermark": 120,
        }
    )

    high_watermark: int = Field(
        description="this voter's log end: the newest image is after it - 1"
    )
