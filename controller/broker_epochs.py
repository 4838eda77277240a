"""The broker-epoch check (Kafka's ``ClusterControlManager.checkBrokerEpoch``):
a pure function of the view, so the managers that call it (broker
heartbeats, AlterPartition, AllocateProducerIds) name only the view."""

from __future__ import annotations

from metadata_records.delta import ImageDelta
from metadata_records.errors import ApiError, Errors


def check_broker_epoch(view: ImageDelta, broker_id: int, broker_epoch: int) -> ApiError | None:
    """STALE_BROKER_EPOCH unless ``broker_epoch`` is the broker's registered epoch."""
    reg = view.broker(broker_id)
    if reg is None:
        return ApiError(
            Errors.STALE_BROKER_EPOCH,
            f"No broker registration found for broker {broker_id}",
            "kip-380.broker-not-registered",
        )
    if reg.epoch != broker_epoch:
        return ApiError(
            Errors.STALE_BROKER_EPOCH,
            f"Expected broker epoch {reg.epoch}, but got broker epoch {broker_epoch}",
            "kip-380.broker-epoch-mismatch",
        )
    return None
