"""GET /v1/explain/brokers/{id} and /v1/explain/partitions/{topic}/{partition}:
why a broker or a partition is as it is (api/explain.py works the answers out;
the routes return its dicts, these models are their contract)."""

from __future__ import annotations

from pydantic import Field

from .common import ORDERS_ID, ResponseModel, example
from .log import WhoOut
from .refusals import RefusalOut

_FENCE_WHO = {
    "principal": "controller",
    "api": "FenceExpiredSessions",
    "rule": "kip-631.session-expired",
}
_BROKER_WHO = {
    "principal": "broker:cert/CN=kafka-2",
    "api": "RegisterBroker",
    "address": "10.0.0.12",
    "requestId": "4be1c2f0",
}
_SERVED_BY = {"nodeId": 1, "activeController": True, "leaderId": 1}
_LOOK_BACK = {
    "fromOffset": 0,
    "toOffset": 46,
    "scanned": 46,
    "ended": "oldest",
    "why": "looked back from offset 45 to 0: reached the oldest record this voter keeps",
}
_REFUSAL = {
    "timeMs": 1796359920000,
    "api": "AlterPartition",
    "rule": "kip-841.replica-fenced",
    "errorCode": 107,
    "errorName": "INELIGIBLE_REPLICA",
    "errorMessage": "broker 2 is fenced",
    "brokerId": 1,
    "topic": "orders",
    "partition": 0,
    "resource": None,
}


class ServedByOut(ResponseModel):
    """Which voter answered, and whether it holds the controller's memory."""

    node_id: int = Field(description="the voter that answered")
    active_controller: bool = Field(
        description="whether it is the active controller (it then has the refusals and sessions)"
    )
    leader_id: int | None = Field(description="the active controller its image names (null: none)")


class LookBackOut(ResponseModel):
    """How far back the log was read for the events or the history: a bounded
    look-back (the newest 20 matches within 50,000 records)."""

    from_offset: int = Field(description="the oldest offset read")
    to_offset: int = Field(description="the image's next offset: where the look-back started")
    scanned: int = Field(description="records read")
    ended: str = Field(
        description='why it stopped: "enough" (found 20), "budget" (read 50,000 records), '
        '"oldest" (no older record kept)'
    )
    why: str = Field(description="the same, for people")


class BrokerRegistrationOut(ResponseModel):
    """The broker's current registration, and who wrote it."""

    offset: int | None = Field(description="the offset of its RegisterBrokerRecord")
    time_ms: int | None = Field(
        description="when its batch was written (null: older than the log this voter keeps)"
    )
    broker_epoch: int = Field(description="its broker epoch")
    incarnation_id: str = Field(description="its incarnation id")
    rack: str | None = Field(description="its rack")
    who: WhoOut | None = Field(description="who registered it (as GET /v1/log shows it)")


class BrokerEventOut(ResponseModel):
    """One change of the broker's registration, from the log."""

    offset: int = Field(description="the record's offset")
    time_ms: int = Field(description="when its batch was written (leader's wall clock, epoch ms)")
    event: str = Field(
        description="registered, fenced, unfenced, controlledShutdown or unregistered"
    )
    cause: str = Field(description="why, for people")
    rule: str | None = Field(
        description="the controller's rule when its own work did it (docs/history.md)"
    )
    who: WhoOut | None = Field(description="who asked for the batch")


class SessionOut(ResponseModel):
    """What the active controller knows of the broker's heartbeats."""

    last_heartbeat_ms: int = Field(description="when it last heard from the broker (epoch ms)")
    since_last_heartbeat_ms: int = Field(description="how long ago that was")
    session_timeout_ms: int = Field(description="broker.session.timeout.ms")
    expires_in_ms: int = Field(
        description="when the session expires unless it hears again (negative: expired)"
    )
    heard_by_this_controller: bool = Field(
        description="false: a session granted on trust when this controller was elected"
    )
    metadata_offset: int | None = Field(description="the offset its last heartbeat reported")
    controlled_shutdown_offset: int | None = Field(
        description="the offset its controlled shutdown waits for the active brokers to reach"
    )


class TopicPartitionOut(ResponseModel):
    """A topic-partition."""

    topic: str = Field(description="the topic's name")
    partition: int = Field(description="the partition id")


class OffsetTimeOut(ResponseModel):
    """Where in the log, and when."""

    offset: int = Field(description="the record's offset")
    time_ms: int = Field(description="when its batch was written")


class ControlledShutdownOut(ResponseModel):
    """What a broker in controlled shutdown still waits for."""

    model_config = example(
        {
            "since": {"offset": 52, "timeMs": 1796359990000},
            "leaderOf": [{"topic": "orders", "partition": 2}],
            "leaderOfCount": 1,
            "why": "it still leads 1 partition(s); the controller moves them to other ISR "
            "members, and the broker may stop once it leads none and the active brokers have "
            "caught up (Kafka's BrokerHeartbeatManager)",
        }
    )

    since: OffsetTimeOut | None = Field(description="when it asked (null: before the look-back)")
    leader_of: list[TopicPartitionOut] = Field(
        description="partitions it still leads (the first 100), which keep it from finishing"
    )
    leader_of_count: int = Field(description="how many it leads")
    why: str = Field(description="what it waits for, for people")


class BrokerExplainOut(ResponseModel):
    """Why a broker is in its state: its registration, its recent events from
    the log, its session and refusals on the active controller."""

    model_config = example(
        {
            "offset": 45,
            "servedBy": _SERVED_BY,
            "brokerId": 2,
            "state": "fenced",
            "summary": "Broker 2 is fenced since offset 44 (2026-12-04T15:02:11Z): session "
            "expired: no heartbeat within 9000 ms, the controller fenced it.",
            "registration": {
                "offset": 21,
                "timeMs": 1796359800000,
                "brokerEpoch": 21,
                "incarnationId": "Zx3c8yUGQ0uHkz1ZEd5W9A",
                "rack": "r2",
                "who": _BROKER_WHO,
            },
            "events": [
                {
                    "offset": 44,
                    "timeMs": 1796359931000,
                    "event": "fenced",
                    "cause": "session expired: no heartbeat within 9000 ms, the controller "
                    "fenced it",
                    "rule": "kip-631.session-expired",
                    "who": _FENCE_WHO,
                }
            ],
            "lookBack": _LOOK_BACK,
            "session": {
                "lastHeartbeatMs": 1796359921500,
                "sinceLastHeartbeatMs": 12500,
                "sessionTimeoutMs": 9000,
                "expiresInMs": -3500,
                "heardByThisController": True,
                "metadataOffset": 40,
                "controlledShutdownOffset": None,
            },
            "controlledShutdown": None,
            "refusals": [],
            "refusalsFrom": "node 1 is the active controller",
        }
    )

    offset: int = Field(description="the offset of the image it was read at (X-Metadata-Offset)")
    served_by: ServedByOut = Field(description="which voter answered")
    broker_id: int = Field(description="the broker")
    state: str = Field(description="unfenced, fenced, controlledShutdown or unregistered")
    summary: str = Field(description="why it is in this state, in a sentence or two")
    registration: BrokerRegistrationOut | None = Field(
        description="its registration (null: not registered)"
    )
    events: list[BrokerEventOut] = Field(description="its recent events, newest first (20 at most)")
    look_back: LookBackOut = Field(description="how far back the log was read for them")
    session: SessionOut | None = Field(
        description="its session on the active controller (null elsewhere: see refusalsFrom)"
    )
    controlled_shutdown: ControlledShutdownOut | None = Field(
        description="what its controlled shutdown waits for (null: not shutting down)"
    )
    refusals: list[RefusalOut] | None = Field(
        description="its requests' last refusals, newest first (null: not the active controller)"
    )
    refusals_from: str = Field(
        description="where the refusals and the session came from, or which node has them"
    )


class ReplicaStateOut(ResponseModel):
    """One replica of the partition: may it lead or join the ISR, and if not, why."""

    broker_id: int = Field(description="the replica's broker")
    in_isr: bool = Field(description="in the ISR")
    in_elr: bool = Field(description="in the ELR (KIP-966)")
    broker_state: str = Field(description="unfenced, fenced, controlledShutdown or unregistered")
    eligible: bool = Field(description="whether it could lead or join the ISR now")
    rule: str | None = Field(
        description="the rule that keeps it out (docs/rules.md), e.g. kip-841.replica-fenced"
    )
    why: str = Field(description="its part, for people")


class PartitionChangeOut(ResponseModel):
    """The partition after one change of the log; a field the look-back cannot
    tell (set before it, changed after) is null."""

    offset: int = Field(description="the record's offset")
    time_ms: int = Field(description="when its batch was written")
    change: str = Field(description="created (its PartitionRecord) or changed")
    leader: int | None = Field(description="the leader after it (-1: none)")
    isr: list[int] | None = Field(description="the ISR after it")
    elr: list[int] | None = Field(description="the ELR after it")
    leader_epoch: int | None = Field(description="the leader epoch after it")
    partition_epoch: int | None = Field(description="the partition epoch after it")
    who: WhoOut | None = Field(description="who asked for the batch")


class PartitionExplainOut(ResponseModel):
    """Why a partition is as it is: its status, each replica's eligibility by
    rule, its recent history from the log and its last refusals."""

    model_config = example(
        {
            "offset": 45,
            "servedBy": _SERVED_BY,
            "topic": "orders",
            "topicId": ORDERS_ID,
            "partition": 0,
            "leader": 1,
            "leaderEpoch": 3,
            "partitionEpoch": 5,
            "replicas": [1, 2, 3],
            "isr": [1, 3],
            "elr": [],
            "lastKnownElr": [],
            "addingReplicas": [],
            "removingReplicas": [],
            "minIsr": 2,
            "status": ["online", "underReplicated"],
            "reasons": [
                "Under-replicated: ISR [1, 3] of replicas [1, 2, 3]; out of the ISR: 2: broker "
                "2 is fenced: it may not lead nor join the ISR."
            ],
            "replicaStates": [
                {
                    "brokerId": 2,
                    "inIsr": False,
                    "inElr": False,
                    "brokerState": "fenced",
                    "eligible": False,
                    "rule": "kip-841.replica-fenced",
                    "why": "broker 2 is fenced: it may not lead nor join the ISR",
                }
            ],
            "history": [
                {
                    "offset": 43,
                    "timeMs": 1796359931000,
                    "change": "changed",
                    "leader": 1,
                    "isr": [1, 3],
                    "elr": [],
                    "leaderEpoch": 3,
                    "partitionEpoch": 5,
                    "who": _FENCE_WHO,
                }
            ],
            "lookBack": _LOOK_BACK,
            "lastRefusedAlterPartition": _REFUSAL,
            "refusals": [_REFUSAL],
            "refusalsFrom": "node 1 is the active controller",
        }
    )

    offset: int = Field(description="the offset of the image it was read at (X-Metadata-Offset)")
    served_by: ServedByOut = Field(description="which voter answered")
    topic: str = Field(description="the topic's name")
    topic_id: str = Field(description="the topic's id")
    partition: int = Field(description="the partition id")
    leader: int = Field(description="its leader (-1: none)")
    leader_epoch: int = Field(description="its leader epoch")
    partition_epoch: int = Field(description="its partition epoch")
    replicas: list[int] = Field(description="its replicas, preferred first")
    isr: list[int] = Field(description="its in-sync replicas")
    elr: list[int] = Field(description="its eligible leader replicas (KIP-966)")
    last_known_elr: list[int] = Field(description="its last known ELR (KIP-966)")
    adding_replicas: list[int] = Field(description="replicas a reassignment adds")
    removing_replicas: list[int] = Field(description="replicas a reassignment removes")
    min_isr: int = Field(description="its topic's min.insync.replicas")
    status: list[str] = Field(
        description="online or offline, and any of underReplicated, underMinIsr, reassigning, "
        "leaderNotPreferred"
    )
    reasons: list[str] = Field(description="one sentence per status other than online")
    replica_states: list[ReplicaStateOut] = Field(description="each replica, in replica order")
    history: list[PartitionChangeOut] = Field(
        description="its recent changes, newest first (20 at most)"
    )
    look_back: LookBackOut = Field(description="how far back the log was read for them")
    last_refused_alter_partition: RefusalOut | None = Field(
        description="the newest refused AlterPartition of it (null: none, or not asked)"
    )
    refusals: list[RefusalOut] | None = Field(
        description="its last refusals, newest first (null: not the active controller)"
    )
    refusals_from: str = Field(description="where the refusals came from, or which node has them")
