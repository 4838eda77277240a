"""The metadata log over HTTP: a record, a page of GET /v1/log, and
GET /v1/snapshot's records that recreate the image.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from .common import CLUSTER_ID, FEATURES_EXAMPLE, LISTENER_EXAMPLE, ResponseModel, example


class WhoOut(ResponseModel):
    """Who asked for a record (docs/api-additions.md "Who changed what"):
    replicated with its batch, the same on every voter. Never any part of a
    secret (docs/security.md "What the who shows"). ``address``,
    ``requestId`` and ``rule`` are left out when empty: the one model whose
    fields may be absent (the issue 43 contract; decisions.md 84 otherwise)."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=False)

    principal: str = Field(
        examples=["broker:cert/CN=kafka-7"],
        description="`<role>:<identity>`: identity `token/<id>`, `token/line-<N>` (a plain "
        "token's line in the tokens file), `cert/<name>` (the certificate name a rule "
        "matched) or `anonymous` (auth off); `controller` for the controller's own work",
    )
    api: str = Field(
        examples=["AlterPartition"],
        description="Kafka's API name of the request (RegisterBroker, BrokerHeartbeat, "
        "AlterPartition, CreateTopics, ...), or the controller's sweep (FenceExpiredSessions, "
        "ElectUncleanLeaders, ElectPreferredLeaders, WriteNoOp, Bootstrap, LeaderChange, ...)",
    )
    address: str | None = Field(
        default=None,
        examples=["10.0.3.7:51234"],
        description="the client address (host:port) the voter saw the request come from; "
        "absent for the controller's own work",
    )
    request_id: str | None = Field(
        default=None,
        examples=["deploy-42-step-3"],
        description="the request's X-Request-Id: the caller's, else one the voter made "
        "(returned in the answer's X-Request-Id)",
    )
    rule: str | None = Field(
        default=None,
        examples=["kip-631.session-expired"],
        description="why the controller did it (its own work only; docs/history.md)",
    )


class RecordOut(ResponseModel):
    """A record as the log, export and snapshot show it (docs/api.md "A record").
    ``who`` is left out where there is none (a snapshot, a batch from before)."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=False)

    offset: int = Field(description="its offset (dense from 0)")
    type: str = Field(examples=["REGISTER_BROKER_RECORD"], description="Kafka's record type")
    version: int = Field(description="the record's version")
    timestamp_ms: int = Field(description="the leader's clock when it built the batch")
    controller_epoch: int = Field(description="the controller epoch it was decided under")
    batch_offset: int = Field(
        description="the offset of the first record of the batch it was committed in"
    )
    data: dict[str, Any] = Field(
        description="the record's fields, with Kafka's names; a CONFIG_RECORD's value of a "
        "sensitive config (a PASSWORD, or of unknown type) is `(redacted)` unless the caller's "
        "role sees it (admin, broker; includeSensitive)"
    )
    who: WhoOut | None = Field(
        default=None,
        description="who asked for it: GET /v1/log only, for batches written since who is "
        "recorded (absent before, and in a snapshot)",
    )


class LogOut(ResponseModel):
    """A page of the metadata log."""

    model_config = example(
        {
            "records": [
                {
                    "offset": 17,
                    "type": "REGISTER_BROKER_RECORD",
                    "version": 2,
                    "timestampMs": 1795000000000,
                    "controllerEpoch": 3,
                    "batchOffset": 17,
                    "who": {
                        "principal": "broker:cert/CN=kafka-1",
                        "api": "RegisterBroker",
                        "address": "10.0.3.7:51234",
                        "requestId": "9f2c1a7e4b01-1a",
                    },
                    "data": {
                        "brokerId": 1,
                        "isMigratingZkBroker": False,
                        "incarnationId": "zBTExEswSU63HSkHIAXA_A",
                        "brokerEpoch": 17,
                        "endPoints": [LISTENER_EXAMPLE],
                        "features": [FEATURES_EXAMPLE],
                        "rack": "eu-west-1a",
                        "fenced": True,
                        "inControlledShutdown": False,
                    },
                }
            ],
            "nextOffset": 18,
            "highWatermark": 42,
            "oldestOffset": 0,
        }
    )

    records: list[RecordOut] = Field(description="the records, by offset")
    next_offset: int = Field(
        description="the offset to ask for next (with a filter: where the scan stopped)"
    )
    high_watermark: int = Field(description="this node's log end (the next offset it will apply)")
    oldest_offset: int = Field(
        description="the oldest offset of the log this node keeps in memory; older offsets of "
        "its history window are read from disk (docs/api-additions.md)"
    )


class SnapshotOut(ResponseModel):
    """The image as records that recreate it. Every record carries ``offset`` =
    the image's last offset; follow the log from ``nextOffset``."""

    model_config = example(
        {
            "offset": 41,
            "nextOffset": 42,
            "records": [
                {
                    "offset": 41,
                    "type": "FEATURE_LEVEL_RECORD",
                    "version": 0,
                    "timestampMs": 1795000004000,
                    "controllerEpoch": 3,
                    "batchOffset": 41,
                    "data": {"name": "metadata.version", "featureLevel": 12},
                }
            ],
        }
    )

    offset: int = Field(description="the image's last offset")
    next_offset: int = Field(description="the offset to follow the log from")
    records: list[RecordOut] = Field(description="records that recreate the image")


class BackupVoterOut(ResponseModel):
    """A voter of the image's voter set (its KRAFT_VOTERS record)."""

    voter_id: int = Field(description="its node id")
    voter_directory_id: str = Field(description="the directory id of the data dir it votes with")
    host: str = Field(description="its Raft host")
    port: int = Field(description="its Raft port")


class BackupHeader(ResponseModel):
    """The first line of GET /v1/backup's body and of a `metaquorum backup`
    file (metadata_records/backup_file.py): what the image that follows is."""

    model_config = example(
        {
            "magic": "metaquorum-backup",
            "format": 1,
            "imageFormat": 1,
            "clusterId": CLUSTER_ID,
            "nextOffset": 42,
            "lastOffset": 41,
            "controllerEpoch": 3,
            "voters": [
                {
                    "voterId": 0,
                    "voterDirectoryId": "b4Qu2DxXQvWv1CK6Rnh0Zw",
                    "host": "metaquorum-0.metaquorum",
                    "port": 9093,
                }
            ],
            "metadataVersion": 12,
            "finalizedFeatures": {"metadata.version": 12},
            "brokers": 2,
            "topics": 1,
            "partitions": 3,
            "createdAtMs": 1795000004000,
            "sourceNodeId": 0,
        }
    )

    magic: str = Field(description='always "metaquorum-backup", first in the line')
    format: int = Field(description="the backup file's format (1)")
    image_format: int = Field(description="the image's snapshot format (1)")
    cluster_id: str = Field(description="the cluster id of the cluster it was taken from")
    next_offset: int = Field(description="the image's next offset: it holds every offset below")
    last_offset: int = Field(description="the last offset the image holds (nextOffset - 1)")
    controller_epoch: int = Field(description="the image's controller epoch")
    voters: list[BackupVoterOut] = Field(description="the image's voter set")
    metadata_version: int = Field(description="the image's finalized metadata.version level")
    finalized_features: dict[str, int] = Field(description="the image's finalized features")
    brokers: int = Field(description="registered brokers in the image")
    topics: int = Field(description="topics in the image")
    partitions: int = Field(description="partitions in the image")
    created_at_ms: int = Field(description="the serving node's wall clock when it was taken")
    source_node_id: int = Field(description="the node that served it")
