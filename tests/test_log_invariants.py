"""metadata_records/log_invariants.py, rule by rule: logs the real controller
wrote are clean, and each rule finds what is planted against it (the corpus of
``invariant_corpus.py``, and logs with one planted record each), at its offset."""

from __future__ import annotations

import orjson
import pytest

from metadata_records.codec import log_record_to_obj
from metadata_records.log_invariants import RULES, LogInvariants, Violation, check_log
from metadata_records.records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)

from .harness import ControllerHarness
from .invariant_corpus import corpus, legacy, rules_covered


def objs(records) -> list[dict]:
    """Records as ``GET /v1/log`` serves them (through JSON, as over HTTP), each
    its own batch."""
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
    checker = LogInvariants()
    for i, (record, (ts, epoch, first)) in enumerate(zip(h.log, h.envelopes, strict=True)):
        checker.check(i, ts, epoch, first, record)
    assert checker.finish() == []
    assert checker.records == len(h.log)
    assert checker.isr_removals > 0 and checker.isr_additions > 0


def test_kip_841_a_fenced_broker_joining_an_isr_is_found_at_its_offset():
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
    found = check_log(objs(records))
    assert [(v.offset, v.rule) for v in found] == [(bad, "kip-841.isr-adds-only-active")]
    assert f"adds broker {follower} (fenced)" in found[0].message


def test_leader_in_controlled_shutdown_that_keeps_leading_is_found():
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
    found = check_log(objs(records))
    # It also stays in the ISR it shares with two others (the nemesis's rule).
    assert [(v.offset, v.rule) for v in found] == [
        (bad, "partition.inactive-leaves-isr"),
        (bad, "partition.leader-active-in-isr"),
    ]
    assert "in controlled shutdown" in found[1].message


def test_leader_outside_its_isr_and_broker_epoch_wrong_are_found():
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
    found = check_log(objs(records))
    kinds = sorted((v.offset, v.rule) for v in found)
    assert kinds == [
        (bad, "partition.leader-active-in-isr"),
        (bad + 1, "kip-380.epoch-is-registration-offset"),
    ]


def test_offsets_dense_a_gap_is_found():
    h = ControllerHarness()
    h.start_brokers(1)
    log = objs(h.log)
    last = log[-1]["offset"]
    log[-1]["offset"] += 1
    found = check_log(log)
    assert [(v.offset, v.rule) for v in found] == [(last + 1, "log.offsets-dense")]


CORPUS = corpus()


def test_the_corpus_plants_every_rule_but_decode():
    assert rules_covered() == set(RULES) - {"log.record-decodes"}


@pytest.mark.parametrize("log", CORPUS, ids=lambda log: log.name)
def test_each_rule_finds_what_the_corpus_planted_against_it(log):
    assert [(v.offset, v.rule) for v in check_log(log.records)] == log.expected


@pytest.mark.parametrize("log", [legacy(log) for log in CORPUS], ids=lambda log: log.name)
def test_a_log_without_batch_offsets_is_checked_in_runs_of_one_time_and_epoch(log):
    # The planted batches have a timestamp each, so the runs are the batches.
    checker = LogInvariants()
    for obj in log.records:
        checker.check_obj(obj)
    assert [(v.offset, v.rule) for v in checker.finish()] == log.expected
    assert checker.legacy_records == len(log.records)


def test_leader_a_batch_that_fences_and_moves_in_one_batch_holds_but_split_does_not():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 1, 3)
    leader = h.partition("t", 0).leader
    h.advance(10_000)
    for b in (1, 2, 3):
        if b != leader:
            h.heartbeat(b)
    fenced = h.controller.maybe_fence_stale_broker(h.now_ms)
    assert fenced is not None and len(fenced.records) > 1  # the moves, then the fence
    h.commit(fenced.records)
    batched = orjson.loads(
        orjson.dumps([
            log_record_to_obj(i, ts, e, r, first)
            for i, (r, (ts, e, first)) in enumerate(zip(h.log, h.envelopes, strict=True))
        ])
    )  # fmt: skip
    assert check_log(batched) == []
    # The fence first, as a batch of its own: it leaves the fenced broker
    # leading and in the ISR until the next batch moves it.
    moves, fence = fenced.records[:-1], fenced.records[-1]
    start = len(h.log) - len(fenced.records)
    found = check_log(objs([*h.log[:start], fence, *moves]))
    assert [(v.offset, v.rule) for v in found] == [
        (start, "partition.inactive-leaves-isr"),
        (start, "partition.leader-active-in-isr"),
    ]
    assert found[1].message == f"leader {leader} is fenced"


def test_isr_inactive_a_fenced_broker_left_in_a_shared_isr_is_found_at_its_batch():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 1, 3)
    p = h.partition("t", 0)
    follower = next(b for b in p.isr if b != p.leader)
    records = [
        *h.log,
        BrokerRegistrationChangeRecord(
            broker_id=follower, broker_epoch=h.epochs[follower], fenced=1
        ),
    ]
    found = check_log(objs(records))
    assert [(v.offset, v.rule) for v in found] == [
        (len(records) - 1, "partition.inactive-leaves-isr")
    ]
    assert found[0].message.startswith(f"broker {follower} (fenced) is in the ISR")


def test_broker_epoch_the_same_incarnation_amending_its_registration_keeps_its_epoch():
    h = ControllerHarness()
    h.start_brokers(1)
    h.register(1)  # the same incarnation again
    assert type(h.log[-1]) is RegisterBrokerRecord and h.log[-1].broker_epoch < len(h.log) - 1
    assert check_log(objs(h.log)) == []


def test_decode_a_record_that_does_not_decode_is_named_and_the_rest_still_checked():
    h = ControllerHarness()
    h.start_brokers(1)
    log = objs(h.log)
    log[1] = {**log[1], "type": "NO_SUCH_RECORD"}  # the feature level: nothing follows from it
    found = check_log(log)
    assert [(v.offset, v.rule) for v in found] == [(1, "log.record-decodes")]
    assert "unknown record type 'NO_SUCH_RECORD'" in found[0].message


def test_a_violation_names_a_rule_of_the_table():
    with pytest.raises(ValueError, match="no rule 'kip841'"):
        Violation(1, "kip841", "t-0", "x")


def unregistered_log() -> tuple[ControllerHarness, int]:
    """Brokers 1-3, topic t on all three; the leader of t-0 is unregistered."""
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 1, 3)
    leader = h.partition("t", 0).leader
    h.unregister(leader)
    return h, leader


def test_unregister_the_controllers_batch_is_clean_split_it_is_not():
    h, leader = unregistered_log()
    batched = [
        log_record_to_obj(i, ts, e, r, first)
        for i, (r, (ts, e, first)) in enumerate(zip(h.log, h.envelopes, strict=True))
    ]
    assert check_log(orjson.loads(orjson.dumps(batched))) == []
    # The UnregisterBrokerRecord alone, before the moves: the broker still
    # leads and sits in a shared ISR although it is gone.
    *moves, gone = h.last.records
    start = len(h.log) - len(h.last.records)
    found = check_log(objs([*h.log[:start], gone, *moves]))
    assert [(v.offset, v.rule) for v in found] == [
        (start, "partition.inactive-leaves-isr"),
        (start, "partition.leader-active-in-isr"),
    ]
    assert found[1].message == f"leader {leader} is not registered"
    assert found[0].message.startswith(f"broker {leader} (not registered) is in the ISR")


def test_kip_841_an_unregistered_broker_joining_an_isr_is_found():
    h, leader = unregistered_log()
    p = h.partition("t", 0)
    bad = len(h.log)
    records = [
        *h.log,
        PartitionChangeRecord(partition_id=0, topic_id=h.topic_id("t"), isr=(*p.isr, leader)),
    ]
    found = check_log(objs(records))
    assert [(v.offset, v.rule) for v in found] == [(bad, "kip-841.isr-adds-only-active")]
    assert f"adds broker {leader} (not registered)" in found[0].message


@pytest.mark.parametrize("broker,epoch_delta", [(9, 0), (1, 1)])
def test_change_epoch_an_unregister_record_of_an_unknown_broker_or_epoch(broker, epoch_delta):
    h = ControllerHarness()
    h.start_brokers(1)
    epoch = h.epochs.get(broker, 0) + epoch_delta
    records = [*h.log, UnregisterBrokerRecord(broker_id=broker, broker_epoch=epoch)]
    found = check_log(objs(records))
    assert [(v.offset, v.rule, v.entity) for v in found] == [
        (len(records) - 1, "kip-380.change-at-current-epoch", f"broker {broker}")
    ]
    if broker == 9:
        assert found[0].message == "unregister record for broker 9, which is not registered"
    else:
        assert found[0].message == (
            f"unregister record carries epoch {epoch}, but the broker's current epoch is "
            f"{h.epochs[1]}"
        )
