"""Broker registration and broker epochs (Kafka's ``ClusterControlManager``),
docs/kafka-rules.md section 3."""

from __future__ import annotations

from collections.abc import Callable

from metadata_records.delta import ImageDelta
from metadata_records.errors import Errors
from metadata_records.features import (
    ELR_VERSION,
    METADATA_VERSION,
    register_broker_record_version,
)
from metadata_records.records import (
    SECURITY_PROTOCOLS,
    FeatureRange,
    Record,
    RegisterBrokerRecord,
)

from .config import ControllerConfig
from .heartbeats import BrokerHeartbeatManager
from .messages import BrokerRegistrationRequest, BrokerRegistrationResponse, ControllerResult
from .rejected import Rejected
from .replication_control import ReplicationControlManager


class ClusterControlManager:
    def __init__(
        self,
        view: Callable[[], ImageDelta],
        config: ControllerConfig,
        heartbeats: BrokerHeartbeatManager,
        replication: ReplicationControlManager,
    ) -> None:
        self._view = view  # the controller's view (committed image + pending records)
        self._config = config
        self._heartbeats = heartbeats
        # A new incarnation fences the old one, or leaves every ISR after an
        # unclean shutdown, through the replication manager.
        self._replication = replication

    @staticmethod
    def _check_listeners(req: BrokerRegistrationRequest) -> None:
        """Rejected if the listeners cannot be registered. Kafka's controller
        throws on both (ListenerInfo.fromBrokerRegistrationRequest: an unknown
        protocol; the record's endpoints are keyed by name), answers
        UNKNOWN_SERVER_ERROR and resigns; the request is what is wrong."""
        seen: set[str] = set()
        for listener in req.listeners:
            if listener.security_protocol not in SECURITY_PROTOCOLS:
                known = ", ".join(f"{k} {v}" for k, v in SECURITY_PROTOCOLS.items())
                raise Rejected(
                    Errors.INVALID_REQUEST,
                    f"Unknown security protocol {listener.security_protocol} in listener "
                    f"{listener.name} (known: {known})",
                    "registration.listener-protocol-unknown",
                )
            if listener.name in seen:
                raise Rejected(
                    Errors.INVALID_REQUEST,
                    f"Duplicate listener name {listener.name}: a broker's listeners are keyed "
                    "by name",
                    "registration.listener-name-duplicate",
                )
            seen.add(listener.name)

    def _check_features(self, req: BrokerRegistrationRequest) -> None:
        """Rejected unless the broker supports every finalized feature's level."""
        view = self._view()
        finalized = {METADATA_VERSION: view.metadata_version}
        # KIP-966: once finalized, ELR's level must be supported too (Kafka
        # checks every finalized feature; a broker naming none supports 0).
        elr = view.feature(ELR_VERSION, 0)
        if elr:
            finalized[ELR_VERSION] = elr
        ranges = {f.name: f for f in req.features}
        # A broker that names no metadata.version supports only the first level.
        ranges.setdefault(METADATA_VERSION, FeatureRange(METADATA_VERSION, 1, 1))
        # A finalized feature the broker does not name counts as [0, 0].
        for name, level in finalized.items():
            if level != 0:
                ranges.setdefault(name, FeatureRange(name, 0, 0))
        for name, r in ranges.items():
            level = finalized.get(name, 1 if name == METADATA_VERSION else 0)
            if not r.min_supported_version <= level <= r.max_supported_version:
                raise Rejected(
                    Errors.UNSUPPORTED_VERSION,
                    f"Unable to register because the broker does not support finalized version "
                    f"{level} of {name}. The broker wants a version between "
                    f"{r.min_supported_version} and {r.max_supported_version}, inclusive.",
                    "registration.feature-unsupported",
                )

    def register_broker(self, req: BrokerRegistrationRequest, now_ms: int) -> ControllerResult:
        try:
            return self._register(req, now_ms)
        except Rejected as r:
            return ControllerResult((), BrokerRegistrationResponse(r.code, r.message, rule=r.rule))

    def _register(self, req: BrokerRegistrationRequest, now_ms: int) -> ControllerResult:
        view = self._view()
        if req.cluster_id != self._config.cluster_id:
            raise Rejected(
                Errors.INCONSISTENT_CLUSTER_ID,
                f"Expected cluster ID {self._config.cluster_id}, but got cluster ID "
                f"{req.cluster_id}",
                "registration.cluster-id-mismatch",
            )
        existing = view.broker(req.broker_id)
        if (
            existing is not None
            and existing.incarnation_id != req.incarnation_id
            and self._heartbeats.has_valid_session(view, req.broker_id, now_ms)
        ):
            raise Rejected(
                Errors.DUPLICATE_BROKER_REGISTRATION,
                f"Another broker is registered with that broker id {req.broker_id} "
                f"(incarnation {existing.incarnation_id}) and its session is still valid; "
                f"retry after {self._config.session_timeout_ms} ms without heartbeats",
                "registration.session-still-valid",
            )
        if req.is_migrating_zk_broker:
            raise Rejected(
                Errors.BROKER_ID_NOT_REGISTERED,
                "Controller does not support registering ZK brokers.",
                "registration.zk-broker",
            )
        # Kafka's position: the listeners are read after the ZooKeeper and
        # log-directory checks, before the features.
        self._check_listeners(req)
        self._check_features(req)

        features = req.features
        if not any(f.name == METADATA_VERSION for f in features):
            features = (*features, FeatureRange(METADATA_VERSION, 1, 1))
        records: list[Record] = []
        if existing is not None and existing.incarnation_id == req.incarnation_id:
            # Amending a registration keeps epoch and state (KAFKA-16757, KAFKA-16952).
            epoch, fenced, shutdown = (
                existing.epoch,
                existing.fenced,
                existing.in_controlled_shutdown,
            )
            # ... and is contact: the broker is not fenced a timeout after its
            # last heartbeat when it has just registered (Kafka's register touches).
            self._heartbeats.amend(req.broker_id, now_ms)
        else:
            # KIP-966: a new incarnation whose previousBrokerEpoch is not the
            # epoch of its registration shut down uncleanly (Kafka's broker
            # sends it from its clean-shutdown file): with ELR on it leaves
            # every ISR and ELR. Nothing registered: nothing can match.
            unclean = existing is None or req.previous_broker_epoch != existing.epoch
            if existing is not None and not existing.fenced:
                # The old incarnation's session expired but nobody fenced it yet.
                # Kafka (without ELR) lets the new incarnation inherit its
                # leaderships at the same leader epoch; we fence the old one
                # first, so no fenced broker ever leads or sits in an ISR.
                records = self._replication.handle_broker_fenced(
                    req.broker_id, unclean_shutdown=unclean
                )
            elif unclean:
                records = self._replication.handle_broker_unclean_shutdown(req.broker_id)
            # KIP-380 in KRaft: the epoch is the offset of this very record.
            epoch, fenced, shutdown = view.next_offset + len(records), True, False
            self._heartbeats.register(req.broker_id, now_ms)
        record = RegisterBrokerRecord(
            broker_id=req.broker_id,
            incarnation_id=req.incarnation_id,
            broker_epoch=epoch,
            end_points=req.listeners,
            features=features,
            rack=req.rack,
            fenced=fenced,
            in_controlled_shutdown=shutdown,
            version=register_broker_record_version(view.metadata_version),
        )
        records.append(record)
        return ControllerResult(
            tuple(records), BrokerRegistrationResponse(Errors.NONE, None, epoch)
        )
