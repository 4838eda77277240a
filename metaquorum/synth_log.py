"""``metaquorum synth-log``: large, realistic metadata logs, written by the real
controller handlers driven by simulated brokers.

Brokers register, heartbeat every two seconds, crash (and are fenced when
their session expires), go through controlled shutdown, restart with a new
incarnation; partition leaders shrink and expand their ISRs with AlterPartition
v3; now and then the controller fails over. Every record is decided by
``controller.controller.Controller`` and committed as the quorum commits it (one
batch per simulated tick, applied with ``metadata_records.delta.apply``), so
offsets, epochs and timestamps are the ones a real cluster would have written.

``--plant KIND`` then appends records the real controller would refuse to
write, one per kind, so tests can check the audit finds exactly those; where
they went, the invariant each breaks (``rule``) and who each batch names, is
written to ``PLANTED.json`` in the output directory.

Each record carries the who of the request (or controller sweep) that wrote
it, as a real cluster's voters record it (``synth_who.py``).
"""

from __future__ import annotations

import base64
import heapq
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import orjson
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from controller.config import ControllerConfig
from controller.controller import Controller
from controller.messages import (
    AlterableConfig,
    AlterConfigsResource,
    AlterPartitionPartition,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    BrokerState,
    CreatableTopic,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
)
from metadata_records.delta import apply
from metadata_records.image import EMPTY_IMAGE, MetadataImage
from metadata_records.records import (
    NO_CHANGE,
    NO_LEADER,
    Batch,
    BrokerRegistrationChangeRecord,
    Endpoint,
    FeatureRange,
    LeaderChangeRecord,
    NoOpRecord,
    PartitionChangeRecord,
    Record,
    RegisterBrokerRecord,
)
from metaquorum.synth_who import CONFIG_ADMIN, TOPIC_ADMIN, SynthWho, as_json

if TYPE_CHECKING:  # imported where it writes: the parser reads PLANT_NAMES without pyarrow
    from pipeline.export_files import OffsetRangeWriter

CLUSTER_ID = "synth-cluster"
# --plant's words, each with the log invariant (log_invariants.RULES) its record
# breaks. The words stay as they were, so existing commands keep working;
# --plant also takes the invariant's id.
PLANT_RULES = {
    "gap": "log.offsets-dense",
    "broker-epoch": "kip-380.epoch-is-registration-offset",
    "change-epoch": "kip-380.change-at-current-epoch",
    "kip841": "kip-841.isr-adds-only-active",
    "leader": "partition.leader-active-in-isr",
    "partition-epoch": "partition.epoch-increases-by-one",
    "leader-epoch": "partition.leader-epoch-never-decreases",
    "controller-epoch": "log.controller-epoch-never-decreases",
    "empty-isr": "kip-966.isr-empty-only-with-elr",
}
PLANT_KINDS = tuple(PLANT_RULES)
_KIND_OF = {name: kind for kind, rule in PLANT_RULES.items() for name in (kind, rule)}
PLANT_NAMES = tuple(_KIND_OF)  # what --plant takes: a word or an invariant's id
TICK_MS = 250
# Besides the random ones, one broker begins a controlled shutdown this often
# (a rolling restart): every log of a few thousand records holds one, whatever
# the seed draws (the audit's tests count them).
ROLLING_RESTART_MS = 30_000
HEARTBEAT_MS = 2_000
SESSION_TIMEOUT_MS = 9_000
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


class SynthError(Exception):
    pass


def _uuid(rng: random.Random) -> str:
    while True:
        text = base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode()[:22]
        if not text.startswith("-") and text not in (
            "AAAAAAAAAAAAAAAAAAAAAA",
            "AAAAAAAAAAAAAAAAAAAAAQ",
        ):
            return text


@dataclass
class SimBroker:
    broker_id: int
    epoch: int = -1
    up: bool = False
    fenced: bool = True
    shutting_down: bool = False
    next_heartbeat_ms: int = 0
    restart_at_ms: int | None = None


@dataclass
class Simulation:
    writer: OffsetRangeWriter
    brokers: int = 12
    topics: int = 20
    partitions: int = 50
    seed: int = 1
    now_ms: int = START_MS
    image: MetadataImage = EMPTY_IMAGE
    sim: dict[int, SimBroker] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.who = SynthWho(self.seed)
        self.config = ControllerConfig(CLUSTER_ID, session_timeout_ms=SESSION_TIMEOUT_MS)
        self.controller_id = 0
        self._new_controller()
        self.pending: list[Record] = []
        self.pending_who: list[tuple] = []  # the who of each pending record
        self.expansions: list[tuple[int, str, int, int]] = []  # (due, topic id, partition, broker)
        self.topic_ids: list[str] = []
        self.next_rolling_ms = self.now_ms + ROLLING_RESTART_MS // 3

    # ------------------------------------------------------------ the log

    def _new_controller(self) -> None:
        """A controller takes over: new soft state, its LEADER_CHANGE first."""
        self.controller = Controller(self.image, self.config, self.now_ms, lambda: _uuid(self.rng))
        epoch = self.image.controller_epoch + 1
        records: list[Record] = [
            LeaderChangeRecord(
                controller_epoch=epoch,
                leader_id=self.controller_id,
                leader_url=f"http://controller-{self.controller_id}:7070",
            )
        ]
        delta = self.controller.view
        delta.replay(records[0])
        records += self.controller.bootstrap_records()
        who = SynthWho.controller
        whos = [who("LeaderChange")] + [who("Bootstrap")] * (len(records) - 1)
        self._commit(Batch(epoch, self.now_ms, tuple(records)), whos)

    def _commit(self, batch: Batch, whos: list[tuple]) -> None:
        """``whos``: the who of each of the batch's records."""
        first = self.image.next_offset
        self.image = apply(self.image, batch)
        if self.image.next_offset != first + len(batch.records):
            raise SynthError(f"a batch did not apply at offset {first}")  # a controller bug
        add, ts, epoch = self.writer.add, batch.timestamp_ms, batch.controller_epoch
        for i, (record, who) in enumerate(zip(batch.records, whos, strict=True)):
            add(first + i, ts, epoch, record, batch_offset=first, who=who)
        self.controller.committed(self.image)

    def _flush_tick(self) -> None:
        if self.pending:
            records, whos = tuple(self.pending), self.pending_who
            self.pending, self.pending_who = [], []
            self._commit(
                Batch(self.image.controller_epoch, self.now_ms, records, self.image.next_offset),
                whos,
            )

    def _handle(self, request: object, api: str, broker_id: int | None = None, admin=None):
        """``request`` from broker ``broker_id``, else from the ``admin`` (synth_who)."""
        result = self.controller.handle(request, self.now_ms)
        if result.records:
            self.pending.extend(result.records)
            if broker_id is not None:
                who = self.who.broker(broker_id, api)
            else:
                who = self.who.admin(admin, api)
            self.pending_who.extend([who] * len(result.records))
        return result.response

    # ------------------------------------------------------------ brokers

    def _register(self, b: SimBroker) -> None:
        self.who.connect(b.broker_id)  # a (re)started broker: a new connection
        resp = self._handle(
            BrokerRegistrationRequest(
                b.broker_id,
                CLUSTER_ID,
                _uuid(self.rng),
                listeners=(Endpoint("PLAINTEXT", f"broker-{b.broker_id}", 9092, 0),),
                features=(FeatureRange("metadata.version", 6, 12),),
                rack=f"rack-{b.broker_id % 3}",
                previous_broker_epoch=b.epoch,
            ),
            "RegisterBroker",
            b.broker_id,
        )
        if resp.error == 0:
            b.epoch, b.up, b.shutting_down, b.fenced = resp.broker_epoch, True, False, True
            b.next_heartbeat_ms = self.now_ms + TICK_MS
            b.restart_at_ms = None

    def _heartbeat(self, b: SimBroker) -> None:
        # A broker that registered in this very tick reports the offset its
        # registration will have once committed.
        offset = self.controller.view.next_offset
        resp = self._handle(
            BrokerHeartbeatRequest(b.broker_id, b.epoch, offset, want_shut_down=b.shutting_down),
            "BrokerHeartbeat",
            b.broker_id,
        )
        b.next_heartbeat_ms = self.now_ms + HEARTBEAT_MS + self.rng.randrange(-200, 200)
        if resp.error == 0 and b.fenced and not resp.is_fenced:
            self._caught_up(b)
        if resp.error == 0:
            b.fenced = resp.is_fenced
        if resp.error == 0 and b.shutting_down and resp.should_shut_down:
            b.up = False
            b.restart_at_ms = self.now_ms + self.rng.randrange(5_000, 30_000)

    def _alter_isr(self, topic_id: str, pid: int, new_isr: tuple[int, ...]) -> None:
        """AlterPartition v3 from the partition's leader, with its current epochs."""
        part = self.controller.view.partition(topic_id, pid)
        leader = self.sim[part.leader]
        self._handle(
            AlterPartitionRequest(
                leader.broker_id,
                leader.epoch,
                (
                    AlterPartitionTopic(
                        (
                            AlterPartitionPartition(
                                pid,
                                part.leader_epoch,
                                part.partition_epoch,
                                new_isr_with_epochs=tuple(
                                    BrokerState(r, self.sim[r].epoch) for r in new_isr
                                ),
                            ),
                        ),
                        topic_id=topic_id,
                    ),
                ),
                3,
            ),
            "AlterPartition",
            leader.broker_id,
        )

    def _leader_ok(self, part) -> bool:
        leader = self.sim.get(part.leader)
        return leader is not None and leader.up and not leader.shutting_down

    def _shrink_one(self) -> None:
        """A follower falls behind: its leader drops it from the ISR, and it
        catches up (and is added back) some seconds later."""
        view = self.controller.view
        topic_id = self.rng.choice(self.topic_ids)
        pid = self.rng.randrange(self.partitions)
        part = view.partition(topic_id, pid)
        if part is None or not self._leader_ok(part) or len(part.isr) < 2:
            return
        out = self.rng.choice([r for r in part.isr if r != part.leader])
        self._alter_isr(topic_id, pid, tuple(r for r in part.isr if r != out))
        self._expand_later(topic_id, pid, out, self.rng.randrange(500, 20_000))

    def _expand_later(self, topic_id: str, pid: int, broker_id: int, delay_ms: int) -> None:
        heapq.heappush(self.expansions, (self.now_ms + delay_ms, topic_id, pid, broker_id))

    def _due_expansions(self) -> None:
        view = self.controller.view
        while self.expansions and self.expansions[0][0] <= self.now_ms:
            _, topic_id, pid, b = heapq.heappop(self.expansions)
            part = view.partition(topic_id, pid)
            if (
                part is None
                or b not in part.replicas
                or b in part.isr
                or not self._leader_ok(part)
                or not view.is_active(b)
            ):
                continue
            self._alter_isr(topic_id, pid, part.isr + (b,))

    def _caught_up(self, b: SimBroker) -> None:
        """An unfenced broker's replicas catch up: their leaders add it back."""
        view = self.controller.view
        for topic_id in self.topic_ids:
            for pid in view.partition_ids(topic_id):
                part = view.partition(topic_id, pid)
                if b.broker_id in part.replicas and b.broker_id not in part.isr:
                    self._expand_later(
                        topic_id, pid, b.broker_id, self.rng.randrange(1_000, 15_000)
                    )

    # ------------------------------------------------------------ running

    def start(self) -> None:
        for broker_id in range(1, self.brokers + 1):
            self.sim[broker_id] = SimBroker(broker_id)
            self._register(self.sim[broker_id])
        self._flush_tick()
        for b in self.sim.values():
            self._heartbeat(b)
        self._flush_tick()
        for t in range(self.topics):
            self._handle(
                CreateTopicsRequest((CreatableTopic(f"topic-{t:03d}", self.partitions, 3),)),
                "CreateTopics",
                admin=TOPIC_ADMIN,
            )
        self._flush_tick()
        self.topic_ids = sorted(self.image.topics)
        # A second operator tunes a few topics (a config write of its own).
        for t in range(min(self.topics, 3)):
            setting = AlterableConfig("min.insync.replicas", 0, "2")
            self._handle(
                IncrementalAlterConfigsRequest(
                    (AlterConfigsResource(2, f"topic-{t:03d}", (setting,)),)
                ),
                "IncrementalAlterConfigs",
                admin=CONFIG_ADMIN,
            )
        self._flush_tick()

    def tick(self) -> None:
        self.now_ms += TICK_MS
        rng = self.rng
        for b in self.sim.values():
            if b.up and self.now_ms >= b.next_heartbeat_ms:
                self._heartbeat(b)
            elif not b.up and b.restart_at_ms is not None and self.now_ms >= b.restart_at_ms:
                self._register(b)
        while (fenced := self.controller.maybe_fence_stale_broker(self.now_ms)) is not None:
            self.pending.extend(fenced.records)
            self.pending_who.extend(
                [SynthWho.controller("FenceExpiredSessions")] * len(fenced.records)
            )
        self._due_expansions()
        for _ in range(5):  # about 20 ISR shrinks a second
            self._shrink_one()
        up = [b for b in self.sim.values() if b.up and not b.shutting_down]
        if len(up) > self.brokers // 2:
            roll = rng.random()
            if roll < 0.00125:  # a crash: it stops heartbeating, the session expires
                b = rng.choice(up)
                b.up = False
                b.restart_at_ms = self.now_ms + rng.randrange(15_000, 60_000)
            elif roll < 0.0025 or self.now_ms >= self.next_rolling_ms:
                rng.choice(up).shutting_down = True  # a controlled shutdown (a rolling restart)
                self.next_rolling_ms = self.now_ms + ROLLING_RESTART_MS
        self._flush_tick()
        if rng.random() < 0.00025:  # the active controller fails over
            self.controller_id = (self.controller_id + 1) % 3
            self._new_controller()


# ---------------------------------------------------------------- planting


def plant(sim: Simulation, kinds: list[str]) -> list[dict]:
    """Appends one wrong record per kind; returns where each went and why.

    First a broker goes through a real controlled shutdown (so one broker is
    in controlled shutdown and in no ISR), then each plant is written at the
    next offset, as if a broken controller had committed it."""
    unknown = [k for k in kinds if k not in _KIND_OF]
    if unknown:
        raise SynthError(
            f"unknown --plant {unknown[0]!r}; kinds: {', '.join(PLANT_KINDS)}, "
            "or the invariant's id: " + ", ".join(PLANT_RULES.values())
        )
    kinds = [_KIND_OF[k] for k in kinds]
    if not kinds:
        return []
    image = sim.image
    victim = next(
        (
            b
            for b in sim.sim.values()
            if b.up and not b.shutting_down and sim.controller.view.is_active(b.broker_id)
        ),
        None,
    )
    if victim is None:
        raise SynthError("no active broker left to plant with; make a longer log")
    victim.shutting_down = True
    sim.now_ms += TICK_MS
    sim._heartbeat(victim)
    sim._flush_tick()
    image = sim.image
    # Partitions led by an active broker that is in their ISR, with the victim
    # among their replicas but (after its controlled shutdown) not in their ISR.
    candidates = []
    for topic_id, topic in sorted(image.topics.items()):
        for pid, p in sorted(topic.partitions.items()):
            reg = image.brokers.get(p.leader)
            if (
                reg is not None
                and reg.active
                and p.leader in p.isr
                and victim.broker_id in p.replicas
                and victim.broker_id not in p.isr
            ):
                candidates.append((topic_id, pid, p))
    if len(candidates) < len(kinds):
        raise SynthError("too few partitions to plant in; make a longer log")
    offset = image.next_offset
    epoch = image.controller_epoch
    ts = sim.now_ms + 1
    planted = []
    active = next(b for b in sorted(image.brokers.values()) if b.active)
    for kind in kinds:
        # A leader epoch can only be lowered where it is above 0.
        pick = next(
            (c for c in candidates if kind != "leader-epoch" or c[2].leader_epoch >= 1), None
        )
        if pick is None:
            raise SynthError(f"no partition to plant {kind} in; make a longer log")
        candidates.remove(pick)
        topic_id, pid, p = pick
        record_epoch = epoch
        if kind == "gap":
            offset += 1
            record: Record = NoOpRecord()
            why = f"offset {offset - 1} is missing"
            who = SynthWho.controller("WriteNoOp")
        elif kind == "broker-epoch":
            new_id = max(image.brokers) + 100
            record = RegisterBrokerRecord(
                broker_id=new_id,
                incarnation_id=_uuid(sim.rng),
                broker_epoch=offset - 1,
                fenced=True,
            )
            why = f"broker {new_id} registered with epoch {offset - 1} at offset {offset}"
            sim.who.connect(new_id)
            who = sim.who.broker(new_id, "RegisterBroker")
        elif kind == "change-epoch":
            record = BrokerRegistrationChangeRecord(
                broker_id=active.broker_id,
                broker_epoch=active.epoch - 1,
                fenced=NO_CHANGE,
                in_controlled_shutdown=NO_CHANGE,
                version=1,
            )
            why = f"broker {active.broker_id} change record with a stale epoch"
            who = sim.who.broker(active.broker_id, "BrokerHeartbeat")
        elif kind == "kip841":
            record = PartitionChangeRecord(
                partition_id=pid, topic_id=topic_id, isr=p.isr + (victim.broker_id,)
            )
            why = f"broker {victim.broker_id} (in controlled shutdown) put into an ISR"
            who = sim.who.broker(p.leader, "AlterPartition")
        elif kind == "leader":
            record = PartitionChangeRecord(
                partition_id=pid, topic_id=topic_id, leader=victim.broker_id
            )
            why = f"broker {victim.broker_id} (not in the ISR, in controlled shutdown) made leader"
            who = sim.who.admin(CONFIG_ADMIN, "ElectLeaders")
        elif kind in ("partition-epoch", "leader-epoch"):
            record = p._replace(
                leader_epoch=p.leader_epoch - 1 if kind == "leader-epoch" else p.leader_epoch,
                partition_epoch=p.partition_epoch + (1 if kind == "leader-epoch" else 3),
            ).to_record(topic_id, pid)
            why = f"partition restated with a wrong {kind.split('-')[0]} epoch"
            who = sim.who.admin(TOPIC_ADMIN, "AlterPartitionReassignments")
        elif kind == "controller-epoch":
            record = NoOpRecord()
            record_epoch = epoch - 1
            why = f"a record of controller epoch {epoch - 1} after epoch {epoch}"
            who = SynthWho.controller("WriteNoOp")
        else:  # empty-isr
            record = PartitionChangeRecord(
                partition_id=pid, topic_id=topic_id, isr=(), leader=NO_LEADER
            )
            why = "an ISR emptied"
            who = SynthWho.controller("ElectUncleanLeaders")
        # A batch each, with the who of whoever a broken controller took it from.
        sim.writer.add(offset, ts, record_epoch, record, batch_offset=offset, who=who)
        planted.append({
            "kind": kind, "rule": PLANT_RULES[kind], "offset": offset, "what": why,
            "who": as_json(who),
        })  # fmt: skip
        offset += 1
        ts += 1
    return planted


# ---------------------------------------------------------------- command


def run_synth_log(
    records: int,
    out: str,
    *,
    plant_kinds: list[str] | None = None,
    fmt: str = "parquet",
    seed: int = 1,
    brokers: int = 12,
    topics: int = 20,
    partitions: int = 50,
    records_per_file: int = 1_000_000,
    quiet: bool = False,
) -> dict:
    if records < 1:
        raise SynthError(f"--records must be at least 1, not {records}")
    from pipeline.export_files import OffsetRangeWriter

    writer = OffsetRangeWriter(out, fmt, records_per_file)
    if writer.next_offset is not None:
        raise SynthError(f"{out} already holds an exported log; give an empty or new directory")
    sim = Simulation(writer, brokers=brokers, topics=topics, partitions=partitions, seed=seed)
    try:
        with Progress(
            TextColumn("[bold]synth-log[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("records"),
            TimeRemainingColumn(),
            disable=quiet,
        ) as progress:
            task = progress.add_task("synth", total=records)
            sim.start()
            while sim.image.next_offset < records:
                sim.tick()
                progress.update(task, completed=min(sim.image.next_offset, records))
        planted = plant(sim, list(plant_kinds or []))
        writer.flush()
    except BaseException:
        writer.abort()
        raise
    summary = {
        "records": writer.records_written,
        "nextOffset": sim.image.next_offset,
        "simulatedMs": sim.now_ms - START_MS,
        "brokers": brokers,
        "partitions": sim.image.partition_count,
        "controllerEpoch": sim.image.controller_epoch,
        "planted": planted,
        "files": writer.files_written,
    }
    if planted:
        writer.write_text("PLANTED.json", orjson.dumps(planted, option=orjson.OPT_INDENT_2))
    return summary
