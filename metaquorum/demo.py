"""``metaquorum demo``: the pure controller deciding a small cluster's life, with
every record it commits printed as the log shows it.

Three brokers register and are unfenced once caught up, a topic is created,
a leader's AlterPartition is refused for a stale broker epoch (KIP-903), then
broker 1 goes through controlled shutdown (KIP-841): leadership moves, ISRs
shrink, and a leader that tries to put it back in an ISR is refused.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import orjson
from rich.console import Console
from rich.table import Table

from controller.config import ControllerConfig
from controller.controller import Controller
from controller.messages import (
    AlterPartitionPartition,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    BrokerState,
    CreatableTopic,
    CreateTopicsRequest,
)
from metadata_records.codec import log_record_to_obj
from metadata_records.delta import apply
from metadata_records.image import EMPTY_IMAGE, MetadataImage
from metadata_records.records import (
    Batch,
    Endpoint,
    FeatureRange,
    LeaderChangeRecord,
    Record,
)
from metadata_records.uuids import random_uuid

CLUSTER_ID = "metaquorum-demo"


class _Cluster:
    """A controller over an in-memory log: decide, then commit as one batch."""

    def __init__(self, console: Console, as_json: bool) -> None:
        self.console = console
        self.as_json = as_json
        self.now_ms = int(time.time() * 1000)
        self.image: MetadataImage = EMPTY_IMAGE
        self.controller = Controller(self.image, ControllerConfig(CLUSTER_ID), self.now_ms)
        self.epochs: dict[int, int] = {}

    def say(self, text: str) -> None:
        if not self.as_json:
            self.console.print(f"\n[bold cyan]>> {text}[/]")

    def commit(self, records: Iterable[Record], epoch: int | None = None) -> None:
        records = tuple(records)
        batch = Batch(self.image.controller_epoch if epoch is None else epoch, self.now_ms, records)
        first = self.image.next_offset
        self.image = apply(self.image, batch)
        self.controller.committed(self.image)
        for i, record in enumerate(records):
            obj = log_record_to_obj(
                first + i, batch.timestamp_ms, batch.controller_epoch, record, first
            )
            line = orjson.dumps(obj).decode()
            if self.as_json:
                print(line)
            else:
                self.console.print(f"  [dim]{first + i:>3}[/] {record.TYPE:<34} ", end="")
                self.console.print(orjson.dumps(obj["data"]).decode(), markup=False, soft_wrap=True)

    def run(self, request: object) -> object:
        self.now_ms += 50
        result = self.controller.handle(request, self.now_ms)
        self.commit(result.records)
        return result.response

    def alter_isr(self, topic_name: str, pid: int, epochs: dict[int, int]) -> object:
        """The partition's leader asks for ``epochs``' brokers as its ISR (v3)."""
        topic = self.image.topic_by_name(topic_name)
        part = topic.partitions[pid]
        entry = AlterPartitionPartition(
            pid,
            part.leader_epoch,
            part.partition_epoch,
            new_isr_with_epochs=tuple(BrokerState(b, e) for b, e in epochs.items()),
        )
        return self.run(
            AlterPartitionRequest(
                part.leader,
                self.epochs[part.leader],
                (AlterPartitionTopic((entry,), topic_id=topic.topic_id),),
            )
        )

    def answer(self, text: str) -> None:
        if not self.as_json:
            self.console.print(f"  [green]<- {text}[/]")


def _partitions_table(cluster: _Cluster, name: str) -> Table:
    topic = cluster.image.topic_by_name(name)
    table = Table(title=f"topic {name} ({topic.topic_id}) at offset {cluster.image.last_offset}")
    for column in ("partition", "replicas", "isr", "leader", "leader epoch", "partition epoch"):
        table.add_column(column, justify="right")
    for pid, p in sorted(topic.partitions.items()):
        table.add_row(
            str(pid),
            str(list(p.replicas)),
            str(list(p.isr)),
            str(p.leader),
            str(p.leader_epoch),
            str(p.partition_epoch),
        )
    return table


def run_demo(as_json: bool = False) -> int:
    console = Console()
    c = _Cluster(console, as_json)
    c.say("A new active controller commits LEADER_CHANGE and the bootstrap records")
    c.commit(
        [
            LeaderChangeRecord(controller_epoch=1, leader_id=0, leader_url="http://127.0.0.1:9090"),
            *c.controller.bootstrap_records(),
        ],
        epoch=1,
    )

    c.say("Three brokers register: each epoch is the offset of its RegisterBrokerRecord (KIP-380)")
    for b in (1, 2, 3):
        resp = c.run(
            BrokerRegistrationRequest(
                b,
                CLUSTER_ID,
                random_uuid(),
                (Endpoint("PLAINTEXT", "localhost", 9091 + b, 0),),
                (FeatureRange("metadata.version", 6, 12),),
            )
        )
        c.epochs[b] = resp.broker_epoch
        c.answer(f"broker {b}: {resp.error.name}, brokerEpoch={resp.broker_epoch}")

    c.say("They heartbeat; caught up with their own registration, they are unfenced")
    for b in (1, 2, 3):
        resp = c.run(BrokerHeartbeatRequest(b, c.epochs[b], c.image.last_offset))
        c.answer(f"broker {b}: isCaughtUp={resp.is_caught_up} isFenced={resp.is_fenced}")

    c.say("An operator creates topic 'orders': 6 partitions, replication factor 3")
    (res,) = c.run(CreateTopicsRequest((CreatableTopic("orders", 6, 3),))).topics
    c.answer(f"{res.error.name}, topicId={res.topic_id}")
    if not as_json:
        console.print(_partitions_table(c, "orders"))

    topic = c.image.topic_by_name("orders")
    p0 = topic.partitions[0]
    follower = p0.isr[1]
    c.say(
        f"Leader {p0.leader} asks to keep broker {follower} in the ISR of orders-0, "
        "with a stale broker epoch for it (KIP-903)"
    )
    epochs = {b: c.epochs[b] - (1 if b == follower else 0) for b in p0.isr}
    resp = c.alter_isr("orders", 0, epochs)
    part = resp.topics[0].partitions[0]
    c.answer(f"{part.error.name}: {part.error_message} (nothing written)")

    c.say("Broker 1 asks for a controlled shutdown (KIP-841)")
    resp = c.run(BrokerHeartbeatRequest(1, c.epochs[1], c.image.last_offset, want_shut_down=True))
    c.answer(f"isFenced={resp.is_fenced} shouldShutDown={resp.should_shut_down}: wait")
    if not as_json:
        console.print(_partitions_table(c, "orders"))

    topic = c.image.topic_by_name("orders")
    pid, part = next((pid, p) for pid, p in sorted(topic.partitions.items()))
    c.say(f"Leader {part.leader} tries to add broker 1 back to the ISR of orders-{pid}")
    resp = c.alter_isr("orders", pid, {b: c.epochs[b] for b in (*part.isr, 1)})
    entry = resp.topics[0].partitions[0]
    c.answer(f"{entry.error.name}: {entry.error_message}")

    c.say("Brokers 2 and 3 report they have replicated the shutdown; broker 1 may stop")
    for b in (2, 3):
        c.run(BrokerHeartbeatRequest(b, c.epochs[b], c.image.last_offset))
    resp = c.run(BrokerHeartbeatRequest(1, c.epochs[1], c.image.last_offset, want_shut_down=True))
    c.answer(f"isFenced={resp.is_fenced} shouldShutDown={resp.should_shut_down}")
    if not as_json:
        reg = c.image.brokers[1]
        console.print(
            f"\n[bold]Done.[/] {c.image.next_offset} records; broker 1 fenced={reg.fenced} "
            f"inControlledShutdown={reg.in_controlled_shutdown}. "
            "Run [bold]metaquorum demo --json[/] for the log as NDJSON."
        )
    return 0
