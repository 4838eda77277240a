"""A controller with a log under it, for tests: decide, commit, replay.

``ControllerHarness.run(request)`` decides one request and commits its records
as one batch, like the quorum does with a single request in flight; ``decide``
without ``commit`` lets tests build multi-request batches (group commit).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.config import ControllerConfig
from controller.controller import Controller
from controller.messages import (
    AlterPartitionPartition,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    BrokerState,
    ControllerResult,
    CreatableTopic,
    CreateTopicsRequest,
    UnregisterBrokerRequest,
)
from metadata_records.delta import apply, apply_records
from metadata_records.image import EMPTY_IMAGE, MetadataImage
from metadata_records.records import (
    Batch,
    Endpoint,
    FeatureLevelRecord,
    FeatureRange,
    LeaderChangeRecord,
    Record,
)

CLUSTER_ID = "test-cluster"
MV_RANGE = (FeatureRange("metadata.version", 6, 12),)
ELR_FEATURES = (*MV_RANGE, FeatureRange("eligible.leader.replicas.version", 0, 1))


def incarnation(broker_id: int, generation: int = 0) -> str:
    """A deterministic, valid base64url UUID per broker and generation."""
    import base64

    raw = broker_id.to_bytes(8, "big") + (generation + 1).to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _topic_ids():
    import base64

    for i in itertools.count(1):
        raw = b"T" + i.to_bytes(15, "big")
        yield base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass
class ControllerHarness:
    metadata_version: int = 12  # Kafka 3.6-IV0, where new clusters start
    session_timeout_ms: int = 9000
    # Two clocks, as the quorum has (quorum/node.py): the controller's is
    # monotonic; the wall clock only stamps batches, and steps (step_wall_clock).
    now_ms: int = 1_000_000
    wall_ms: int = 1_700_000_000_000
    image: MetadataImage = EMPTY_IMAGE
    log: list[Record] = field(default_factory=list)
    # Per record of ``log``: (timestamp ms, controller epoch, batch offset) of its batch.
    envelopes: list[tuple[int, int, int]] = field(default_factory=list)
    epochs: dict[int, int] = field(default_factory=dict)
    # More ControllerConfig fields (e.g. max_elections_per_imbalance).
    config_options: dict = field(default_factory=dict)
    # The placer's random source from the image's partition count (Controller's
    # default: random.Random); a test passes Kafka's MockRandom for Kafka's lists.
    placement_random: Callable[[int], object] = random.Random
    # The feature ranges brokers register with (ELR_FEATURES: they support
    # eligible.leader.replicas.version too).
    broker_features: tuple = MV_RANGE

    def __post_init__(self) -> None:
        self._decided = None
        ids = _topic_ids()
        self.config = ControllerConfig(
            CLUSTER_ID, session_timeout_ms=self.session_timeout_ms, **self.config_options
        )
        self.controller = self._controller(ids)
        if self.image.next_offset == 0:
            # What the first active controller commits: its LEADER_CHANGE, then bootstrap.
            self.commit(
                [
                    LeaderChangeRecord(controller_epoch=1, leader_id=0, leader_url="http://c0"),
                    FeatureLevelRecord(
                        name="metadata.version", feature_level=self.metadata_version
                    ),
                ],
                leader_change=True,
            )

    def _controller(self, ids) -> Controller:
        return Controller(
            self.image, self.config, self.now_ms, lambda: next(ids), self.placement_random
        )

    # ------------------------------------------------------------ log

    def commit(
        self, records: list[Record] | tuple[Record, ...], leader_change: bool = False
    ) -> None:
        """Applies records as one batch, as every voter would, and moves the controller on."""
        if leader_change:
            batch = Batch(records[0].controller_epoch, self.wall_ms, tuple(records))
        else:  # as the quorum does: the batch must land where it was decided
            batch = Batch(
                self.image.controller_epoch, self.wall_ms, tuple(records), self.image.next_offset
            )
        before = self.image
        self.image = apply(self.image, batch)
        assert self.image.next_offset == before.next_offset + len(records)
        decided, self._decided = self._decided, None
        if decided is not None and decided[0] is records:
            view = decided[1]
            assert (
                view.brokers,
                view.topics,
                view.broker_configs,
                view.client_quotas,
                view.next_offset,
            ) == (
                self.image.brokers,
                self.image.topics,
                self.image.broker_configs,
                self.image.client_quotas,
                self.image.next_offset,
            ), "the controller's view differs from what its records do"
        self.log.extend(records)
        envelope = (batch.timestamp_ms, batch.controller_epoch, before.next_offset)
        self.envelopes.extend([envelope] * len(records))
        self.controller.committed(self.image)

    def decide(self, request: object) -> ControllerResult:
        result = self.controller.handle(request, self.now_ms)
        # What the controller now believes, to check against what its records
        # really do once committed (its view takes shortcuts: Controller.merged).
        self._decided = (result.records, self.controller.view.apply())
        return result

    def run(self, request: object) -> object:
        result = self.decide(request)
        self.commit(result.records)
        self.last = result
        return result.response

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.wall_ms += ms

    def step_wall_clock(self, ms: int) -> None:
        """An NTP step: the wall clock jumps, the controller's clock does not."""
        self.wall_ms += ms

    def replayed(self) -> MetadataImage:
        """The image rebuilt from the whole log, from scratch."""
        return apply_records(EMPTY_IMAGE, self.log)

    def new_leader(self) -> None:
        """A failover: a fresh controller over the same image (soft state lost)."""
        ids = _topic_ids()
        for _ in range(1000 + len(self.log)):
            next(ids)
        self.controller = self._controller(ids)
        self.commit(
            [
                LeaderChangeRecord(
                    controller_epoch=self.image.controller_epoch + 1,
                    leader_id=1,
                    leader_url="http://c1",
                )
            ],
            leader_change=True,
        )

    # ------------------------------------------------------------ shortcuts

    def register(self, broker_id: int, generation: int = 0, **kw) -> object:
        kw.setdefault("features", self.broker_features)
        resp = self.run(
            BrokerRegistrationRequest(
                broker_id,
                kw.pop("cluster_id", CLUSTER_ID),
                kw.pop("incarnation_id", incarnation(broker_id, generation)),
                listeners=kw.pop(
                    "listeners", (Endpoint("PLAINTEXT", "localhost", 9092 + broker_id, 0),)
                ),
                **kw,
            )
        )
        if resp.error == 0:
            self.epochs[broker_id] = resp.broker_epoch
        return resp

    def heartbeat(self, broker_id: int, offset: int | None = None, **kw) -> object:
        return self.run(
            BrokerHeartbeatRequest(
                broker_id,
                kw.pop("epoch", self.epochs.get(broker_id, -1)),
                self.image.next_offset if offset is None else offset,
                **kw,
            )
        )

    def unregister(self, broker_id: int) -> object:
        return self.run(UnregisterBrokerRequest(broker_id))

    def start_brokers(self, *broker_ids: int) -> None:
        """Registered and unfenced."""
        for b in broker_ids:
            assert self.register(b).error == 0
        for b in broker_ids:
            resp = self.heartbeat(b)
            assert resp.error == 0 and not resp.is_fenced, resp

    def create_topic(self, name: str, partitions: int = -1, rf: int = -1, **kw) -> object:
        resp = self.run(CreateTopicsRequest((CreatableTopic(name, partitions, rf, **kw),)))
        return resp.topics[0]

    def topic_id(self, name: str) -> str:
        return self.image.topic_ids[name]

    def partition(self, name: str, pid: int = 0):
        return self.image.partition(self.topic_id(name), pid)

    def alter_isr(
        self,
        name: str,
        pid: int,
        new_isr: list[int],
        *,
        broker_id: int | None = None,
        version: int = 3,
        epochs: dict[int, int] | None = None,
        leader_epoch: int | None = None,
        partition_epoch: int | None = None,
        leader_recovery_state: int = 0,
    ) -> object:
        """AlterPartition for one partition, by default from its current leader
        with its current epochs (the happy path) -- override to test rejections."""
        part = self.partition(name, pid)
        leader = part.leader if broker_id is None else broker_id
        epochs = {} if epochs is None else epochs
        data = AlterPartitionPartition(
            pid,
            part.leader_epoch if leader_epoch is None else leader_epoch,
            part.partition_epoch if partition_epoch is None else partition_epoch,
            new_isr=tuple(new_isr) if version < 3 else (),
            new_isr_with_epochs=tuple(
                BrokerState(b, epochs.get(b, self.epochs.get(b, -1))) for b in new_isr
            )
            if version >= 3
            else (),
            leader_recovery_state=leader_recovery_state,
        )
        topic = (
            AlterPartitionTopic((data,), topic_id=self.topic_id(name))
            if version > 1
            else AlterPartitionTopic((data,), topic_name=name)
        )
        return self.run(
            AlterPartitionRequest(leader, self.epochs.get(leader, -1), (topic,), version)
        )
