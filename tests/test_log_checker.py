"""brokers/log_checker.py over logs the real controller wrote, and logs with
one planted violation each (which the controller itself would never write)."""

from __future__ import annotations

import orjson

from brokers.log_checker import LogChecker, check_records
from metadata_records.codec import log_record_to_obj
from metadata_records.records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
)

from .harness import ControllerHarness


def objs(records) -> list[dict]:
    """Records as ``GET /v1/log`` serves them (through JSON, as over HTTP)."""
    return orjson.loads(
        orjson.dumps([log_record_to_obj(i, 1000 + i, 1, r, i) for i, r in enumerate(records)])
    )


def busy_log() -> ControllerHarness:
    """A log with every kind of change: registrations, unfencing, a topic, ISR
    shrink and expand, session fencing, a bounce and a controlled shutdown."""
    h = ControllerHarness(session_timeout_ms=5000)
    h.start_brokers(1, 2, 3, 4)
    h.create_topic("t", 6, 3)
    p = h.partition("t", 0)
    follower = [b for b in p.isr if b != p.leader][0]
    h.alter_isr("t", 0, [b for b in p.isr if b != follower])  # shrink
    h.alter_isr("t", 0, list(h.partition("t", 0).isr) + [follower])  # expand
    h.advance(6000)  # everyone's session expires but 2's
    h.heartbeat(2)
    while (fenced := h.controller.maybe_fence_stale_broker(h.now_ms)) is not None:
        h.commit(fenced.records)
    for b in (1, 3, 4):
        h.heartbeat(b)  # fenced ones are unfenced again when caught up
    h.register(3, generation=1)  # a bounce: new incarnation
    h.heartbeat(3)
    h.heartbeat(4, want_shut_down=True)  # controlled shutdown, moves its leaderships
    h.heartbeat(4, want_shut_down=True)
    return h


def test_a_log_the_controller_wrote_is_clean():
    h = busy_log()
    checker = LogChecker()
    for obj in objs(h.log):
        checker.check(obj)
    assert checker.finish() == []
    assert checker.records == len(h.log)
    assert checker.isr_removals > 0 and checker.isr_additions > 0


def test_a_fenced_broker_joining_an_isr_is_found_at_its_offset():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 1, 3)
    p = h.partition("t", 0)
    follower = [b for b in p.isr if b != p.leader][0]
    h.alter_isr("t", 0, [b for b in p.isr if b != follower])
    records = list(h.log)
    records.append(
        BrokerRegistrationChangeRecord(
            broker_id=follower, broker_epoch=h.epochs[follower], fenced=1
        )
    )
    bad = len(records)
    records.append(PartitionChangeRecord(partition_id=0, topic_id=h.topic_id("t"), isr=p.isr))
    found = check_records(objs(records))
    assert [(v.offset, v.kind) for v in found] == [(bad, "kip-841")]
    assert f"broker {follower} joined the ISR while fenced" in found[0].message


def test_a_leader_in_controlled_shutdown_that_keeps_leading_is_found():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 1, 3)
    leader = h.partition("t", 0).leader
    records = list(h.log)
    bad = len(records)  # it stops being active here, and nothing moves its leadership
    records.append(
        BrokerRegistrationChangeRecord(
            broker_id=leader, broker_epoch=h.epochs[leader], in_controlled_shutdown=1, version=1
        )
    )
    records.append(
        RegisterBrokerRecord(
            broker_id=99,
            incarnation_id=h.log[2].incarnation_id,
            broker_epoch=bad + 1,  # its own offset: a correct registration
            end_points=(),
            features=(),
            rack=None,
        )
    )
    found = check_records(objs(records))
    assert [(v.offset, v.kind) for v in found] == [(bad, "leader")]
    assert "in controlled shutdown" in found[0].message


def test_a_leader_outside_its_isr_and_a_wrong_epoch_are_found():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 1, 3)
    p = h.partition("t", 0)
    others = [b for b in p.isr if b != p.leader]
    records = list(h.log)
    bad = len(records)
    records.append(
        PartitionChangeRecord(partition_id=0, topic_id=h.topic_id("t"), isr=tuple(others))
    )
    records.append(
        RegisterBrokerRecord(
            broker_id=7,
            incarnation_id="AAAAAAAAAAAAAAAAAAAAAQ",
            broker_epoch=3,
            end_points=(),
            features=(),
            rack=None,
        )
    )
    found = check_records(objs(records))
    kinds = sorted((v.offset, v.kind) for v in found)
    assert kinds == [(bad, "leader"), (bad + 1, "broker-epoch")]


def test_a_gap_in_offsets_is_found():
    h = ControllerHarness()
    h.start_brokers(1)
    log = objs(h.log)
    last = log[-1]["offset"]
    log[-1]["offset"] += 1
    found = check_records(log)
    assert [(v.offset, v.kind) for v in found] == [(last + 1, "offsets")]
