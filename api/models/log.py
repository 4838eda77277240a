"""The metadata log over HTTP: a record, a page of GET /v1/log, and
GET /v1/snapshot's records that recreate the image.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .common import FEATURES_EXAMPLE, LISTENER_EXAMPLE, ResponseModel, example


class RecordOut(ResponseModel):
    """A record as the log, export and snapshot show it (docs/api.md "A record")."""

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
    next_offset: int = Field(description="the offset to ask for next")
    high_watermark: int = Field(description="this node's log end (the next offset it will apply)")
    oldest_offset: int = Field(description="the oldest offset this node still serves")


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
