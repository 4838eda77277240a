"""GET /v1/what-if: what losing brokers or racks would do to the partitions
(controller/what_if.py decides it)."""

from __future__ import annotations

from pydantic import Field

from controller.what_if import PartitionOutcome, WhatIf

from .common import ORDERS_ID, ResponseModel, example


class WhatIfCountsOut(ResponseModel):
    """Partitions by outcome; they add up to the cluster's partition count."""

    offline: int = Field(description="had a leader and would have none")
    under_min_isr: int = Field(
        description="still led, but the ISR would fall below the topic's min.insync.replicas"
    )
    leader_moved: int = Field(description="another broker would lead (newLeader)")
    isr_shrunk: int = Field(description="same leader, a smaller ISR (or only the ELR changes)")
    untouched: int = Field(description="nothing would change")


class WhatIfPartitionOut(ResponseModel):
    """One partition the loss changes: before and after."""

    topic: str = Field(description="the topic's name")
    topic_id: str = Field(description="the topic's id")
    partition: int = Field(description="the partition id")
    outcome: str = Field(description="offline, underMinIsr, leaderMoved or isrShrunk")
    min_isr: int = Field(description="the topic's min.insync.replicas (its own, else the default)")
    replicas: list[int] = Field(description="its replicas (the loss does not change them)")
    leader: int = Field(description="its leader now (-1: none)")
    new_leader: int = Field(description="its leader after the loss (-1: none: offline)")
    isr: list[int] = Field(description="its ISR now")
    new_isr: list[int] = Field(description="its ISR after the loss")
    new_elr: list[int] = Field(description="its ELR after the loss (KIP-966; [] while ELR is off)")

    @classmethod
    def of(cls, p: PartitionOutcome) -> WhatIfPartitionOut:
        return cls(
            topic=p.topic,
            topic_id=p.topic_id,
            partition=p.partition,
            outcome=p.outcome,
            min_isr=p.min_isr,
            replicas=list(p.before.replicas),
            leader=p.before.leader,
            new_leader=p.after.leader,
            isr=list(p.before.isr),
            new_isr=list(p.after.isr),
            new_elr=list(p.after.elr),
        )


class WhatIfOut(ResponseModel):
    """What losing the brokers asked for would do, by the controller's rules
    (their sessions expire and the controller fences them, in ascending id):
    counts always; the changed partitions worst first (offline, under min
    ISR, leader moved, ISR shrunk), then by topic and partition, at most
    ``limit`` of them (``truncated`` says more exist)."""

    model_config = example(
        {
            "offset": 41,
            "lost": [1, 2],
            "alreadyFenced": [],
            "totalPartitions": 3,
            "counts": {
                "offline": 1,
                "underMinIsr": 1,
                "leaderMoved": 1,
                "isrShrunk": 0,
                "untouched": 0,
            },
            "partitions": [
                {
                    "topic": "orders",
                    "topicId": ORDERS_ID,
                    "partition": 2,
                    "outcome": "offline",
                    "minIsr": 2,
                    "replicas": [1, 2],
                    "leader": 1,
                    "newLeader": -1,
                    "isr": [1, 2],
                    "newIsr": [2],
                    "newElr": [],
                },
                {
                    "topic": "orders",
                    "topicId": ORDERS_ID,
                    "partition": 1,
                    "outcome": "underMinIsr",
                    "minIsr": 2,
                    "replicas": [2, 3, 1],
                    "leader": 2,
                    "newLeader": 3,
                    "isr": [2, 3, 1],
                    "newIsr": [3],
                    "newElr": [],
                },
            ],
            "truncated": True,
        }
    )

    offset: int = Field(description="the image it was computed over (as X-Metadata-Offset)")
    lost: list[int] = Field(description="the brokers the loss fences: registered and unfenced")
    already_fenced: list[int] = Field(
        description="brokers asked for that are fenced already: losing them changes nothing"
    )
    total_partitions: int = Field(description="every partition of the cluster")
    counts: WhatIfCountsOut = Field(description="partitions by outcome")
    partitions: list[WhatIfPartitionOut] = Field(
        description="the changed partitions, worst first, at most `limit`"
    )
    truncated: bool = Field(description="more changed partitions than listed (raise `limit`)")

    @classmethod
    def of(cls, answer: WhatIf, offset: int, limit: int) -> WhatIfOut:
        counts = answer.counts
        return cls(
            offset=offset,
            lost=list(answer.lost),
            already_fenced=list(answer.already_fenced),
            total_partitions=answer.total_partitions,
            counts=WhatIfCountsOut(
                offline=counts["offline"],
                under_min_isr=counts["underMinIsr"],
                leader_moved=counts["leaderMoved"],
                isr_shrunk=counts["isrShrunk"],
                untouched=counts["untouched"],
            ),
            partitions=[WhatIfPartitionOut.of(p) for p in answer.partitions[:limit]],
            truncated=len(answer.partitions) > limit,
        )
