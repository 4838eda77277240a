"""The controller's settings (Kafka's controller configs that metaquorum keeps)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SESSION_TIMEOUT_MS = 9000  # broker.session.timeout.ms


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    cluster_id: str
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    default_num_partitions: int = 1  # num.partitions
    max_default_replication_factor: int = 3  # default RF = min(this, registered brokers)
