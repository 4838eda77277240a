"""brokers.isr_manager: the leader-side ISR rules of KIP-497, KIP-841 and KIP-903."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.isr_manager import IsrManager
from metadata_records.delta import apply_records
from metadata_records.errors import Errors
from metadata_records.image import EMPTY_IMAGE, MetadataImage
from metadata_records.records import (
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    UNFENCE,
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)

T = "fPZv1VBsRFmnlRvmGcOW9w"
U = "AAAAAAAAAAAAAAAAAAAAAQ"
INC = "Ag5vK0JSRnKuYq1Ut1zjDg"
EPOCHS = {1: 10, 2: 20, 3: 30}
LAG = 1000
TP = (T, 0)


def image(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, parts=1, epochs=EPOCHS, topics=(T,)):
    recs = [
        RegisterBrokerRecord(broker_id=b, incarnation_id=INC, broker_epoch=e, fenced=False)
        for b, e in epochs.items()
    ]
    for i, t in enumerate(topics):
        recs.append(TopicRecord(name=f"t{i}", topic_id=t))
        recs += [
            PartitionRecord(partition_id=p, topic_id=t, replicas=replicas, isr=isr, leader=leader)
            for p in range(parts)
        ]
    return apply_records(EMPTY_IMAGE, recs)


def change(img, *recs) -> MetadataImage:
    return apply_records(img, recs)


def manager(img, leo=100, now=0) -> IsrManager:
    m = IsrManager(1, replica_lag_time_max_ms=LAG)
    m.on_metadata(img)
    for t, topic in img.topics.items():
        for p in topic.partitions:
            m.on_append(t, p, leo, now)
    return m


def isr_of(entries, tp=TP):
    for t in entries:
        for p in t["partitions"]:
            if (t["topicId"], p["partitionIndex"]) == tp:
                return [(s["brokerId"], s["brokerEpoch"]) for s in p["newIsrWithEpochs"]]
    return None


def respond(m, entries, code=Errors.NONE, now=0, isr=None):
    topics = []
    for t in entries:
        parts = []
        for p in t["partitions"]:
            ok = code == Errors.NONE
            new = [s["brokerId"] for s in p["newIsrWithEpochs"]]
            parts.append(
                {
                    "partitionIndex": p["partitionIndex"],
                    "errorCode": int(code),
                    "errorName": code.name,
                    "leaderId": 1 if ok else 0,
                    "leaderEpoch": p["leaderEpoch"] if ok else 0,
                    "isr": (isr or new) if ok else [],
                    "partitionEpoch": p["partitionEpoch"] + 1 if ok else 0,
                }
            )
        topics.append({"topicId": t["topicId"], "partitions": parts})
    m.on_response(now, topics)


def expand_setup():
    """ISR (1,2); replica 3 caught up with the right epoch: an expansion is due."""
    img = image(isr=(1, 2))
    m = manager(img)
    m.on_fetch(T, 0, 2, 20, 100, 10)
    m.on_fetch(T, 0, 3, 30, 100, 10)
    return img, m


# ------------------------------------------------------------------ metadata


def test_learns_led_partitions_and_drops_the_rest():
    img = image(parts=2)
    img = change(img, PartitionChangeRecord(partition_id=1, topic_id=T, leader=2))
    m = manager(img)
    assert m.led_partitions() == [TP]
    c = m.committed(TP)
    assert (c.leader_epoch, c.partition_epoch, c.isr, c.replicas) == (0, 0, (1, 2, 3), (1, 2, 3))
    m.on_metadata(change(img, PartitionChangeRecord(partition_id=0, topic_id=T, leader=3)))
    assert m.led_partitions() == [] and m.committed(TP) is None


def test_fetches_for_unled_partitions_or_non_replicas_are_ignored():
    img = image(replicas=(1, 2), isr=(1, 2))
    m = manager(img)
    m.on_fetch(T, 0, 3, 30, 100, 5)  # not a replica
    m.on_fetch(U, 0, 2, 20, 100, 5)  # not led
    assert m.last_caught_up_ms(TP, 3) is None
    assert m.committed((U, 0)) is None


# ------------------------------------------------------------- fetch tracking


def test_last_caught_up_follows_kafkas_update_fetch_state():
    m = manager(image(isr=(1, 2)), leo=10)
    m.on_fetch(T, 0, 3, 30, 10, 100)  # reaches the leader's end: caught up now
    assert m.last_caught_up_ms(TP, 3) == 100
    m.on_append(T, 0, 20, 150)
    m.on_fetch(T, 0, 3, 30, 10, 200)  # behind now, but reached the end of the last fetch
    assert m.last_caught_up_ms(TP, 3) == 100
    m.on_fetch(T, 0, 3, 30, 15, 300)  # >= 20? no; >= last fetch's leader end 20? no
    assert m.last_caught_up_ms(TP, 3) == 100
    m.on_fetch(T, 0, 3, 30, 20, 400)
    assert m.last_caught_up_ms(TP, 3) == 400


def test_new_leader_counts_isr_members_caught_up_from_the_first_clock():
    img = image()
    m = IsrManager(1, replica_lag_time_max_ms=LAG)
    m.on_metadata(img)
    assert m.decide(5000, img) == []
    assert m.last_caught_up_ms(TP, 2) == 5000
    assert isr_of(m.decide(5000 + LAG + 1, img)) == [(1, 10)]


# --------------------------------------------------------------------- shrink


def test_shrink_removes_lagging_followers_and_keeps_committed_as_maximal():
    img = image()
    m = manager(img)
    m.on_fetch(T, 0, 2, 20, 100, 0)
    m.on_fetch(T, 0, 3, 30, 40, 0)
    assert m.decide(LAG, img) == []  # exactly at the limit: not lagging yet
    m.on_fetch(T, 0, 2, 20, 100, LAG)
    entries = m.decide(LAG + 1, img)
    assert entries == [
        {
            "topicId": T,
            "partitions": [
                {
                    "partitionIndex": 0,
                    "leaderEpoch": 0,
                    "partitionEpoch": 0,
                    "newIsrWithEpochs": [
                        {"brokerId": 1, "brokerEpoch": 10},
                        {"brokerId": 2, "brokerEpoch": 20},
                    ],
                }
            ],
        }
    ]
    assert m.in_flight(TP).new_isr == (1, 2)
    # KIP-497: until the shrink commits, the HW still waits for the lagging member.
    assert m.maximal_isr(TP) == (1, 2, 3)
    assert m.high_watermark(TP) == 40
    respond(m, entries)
    assert m.committed(TP).isr == (1, 2) and m.in_flight(TP) is None
    assert m.high_watermark(TP) == 100


def test_shrink_never_drops_the_leader_nor_empties_the_isr():
    img = image()
    m = manager(img)
    assert isr_of(m.decide(LAG + 1, img)) == [(1, 10)]


# --------------------------------------------------------------------- expand


def test_expand_adds_a_caught_up_active_follower_with_image_epochs():
    img, m = expand_setup()
    entries = m.decide(20, img)
    assert isr_of(entries) == [(1, 10), (2, 20), (3, 30)]
    assert m.in_flight(TP).added == 3
    # KIP-497: an expansion counts at once for the high watermark.
    assert m.maximal_isr(TP) == (1, 2, 3)
    m.on_append(T, 0, 120, 30)
    m.on_fetch(T, 0, 2, 20, 120, 30)
    assert m.high_watermark(TP) == 100  # held back by 3, not yet committed


def test_expand_ignores_a_follower_that_is_behind():
    img = image(isr=(1, 2))
    m = manager(img)
    m.on_fetch(T, 0, 2, 20, 100, 10)
    m.on_fetch(T, 0, 3, 30, 99, 10)
    assert m.decide(20, img) == []


def _fenced(img):
    return change(img, BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=30, fenced=FENCE))


def _shutting_down(img):
    return change(
        img,
        BrokerRegistrationChangeRecord(
            broker_id=3, broker_epoch=30, in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN, version=1
        ),
    )


def _reregistered(img):  # a new incarnation: the fetch's epoch 30 is stale (KIP-903)
    return change(
        img, RegisterBrokerRecord(broker_id=3, incarnation_id=U, broker_epoch=40, fenced=False)
    )


def _unregistered(img):
    return image(isr=(1, 2), epochs={1: 10, 2: 20})


@pytest.mark.parametrize("mutate", [_fenced, _shutting_down, _reregistered, _unregistered])
def test_expand_requires_active_replica_with_matching_epoch(mutate):
    img, m = expand_setup()
    img = mutate(img)
    assert m.decide(20, img) == []


def test_one_change_in_flight_and_one_request_outstanding():
    img, m = expand_setup()
    first = m.decide(20, img)
    assert m.decide(21, img) == []  # the request is outstanding
    m.on_request_failed(22)  # unknown outcome: resend as is, nothing new
    m.on_fetch(T, 0, 2, 20, 100, 5000)  # 3 now lags; still no second change
    assert m.decide(5000, img) == first


def test_many_partitions_in_one_request_grouped_by_topic():
    img = image(isr=(1, 2), parts=2, topics=(T, U))
    m = manager(img)
    for t in (T, U):
        for p in (0, 1):
            m.on_fetch(t, p, 3, 30, 100, 10)
    entries = m.decide(20, img)
    assert [t["topicId"] for t in entries] == sorted([T, U])
    assert all([p["partitionIndex"] for p in t["partitions"]] == [0, 1] for t in entries)


# ------------------------------------------------------------------ responses


def test_none_adopts_the_returned_state_and_older_images_do_not_regress_it():
    img, m = expand_setup()
    respond(m, m.decide(20, img))
    c = m.committed(TP)
    assert (c.isr, c.leader_epoch, c.partition_epoch) == ((1, 2, 3), 0, 1)
    assert m.in_flight(TP) is None
    m.on_metadata(
        change(
            img,
            PartitionRecord(partition_id=0, topic_id=T, replicas=(1, 2, 3), isr=(1, 2), leader=1),
        )
    )
    assert m.committed(TP).isr == (1, 2, 3)


def test_metadata_past_the_sent_epoch_clears_the_in_flight_change():
    img, m = expand_setup()
    m.decide(20, img)
    same = change(img, RegisterBrokerRecord(broker_id=4, incarnation_id=INC, broker_epoch=50))
    m.on_metadata(same)
    assert m.in_flight(TP) is not None  # the partition did not move
    m.on_metadata(change(img, PartitionChangeRecord(partition_id=0, topic_id=T, isr=(1, 2, 3))))
    assert m.in_flight(TP) is None
    assert m.committed(TP).isr == (1, 2, 3) and m.committed(TP).partition_epoch == 1


@pytest.mark.parametrize("code", [Errors.INELIGIBLE_REPLICA, Errors.OPERATION_NOT_ATTEMPTED])
def test_ineligible_reverts_and_waits_for_the_member_to_change(code):
    img, m = expand_setup()
    respond(m, m.decide(20, img), code)
    assert m.in_flight(TP) is None and m.maximal_isr(TP) == (1, 2)
    m.on_fetch(T, 0, 3, 30, 100, 30)  # same epoch, same registration
    assert m.decide(30, img) == []
    img = _reregistered(img)  # the image changes, but the fetch still says 30
    assert m.decide(40, img) == []
    m.on_fetch(T, 0, 3, 40, 100, 50)  # the new incarnation fetches
    assert isr_of(m.decide(50, img)) == [(1, 10), (2, 20), (3, 40)]


def test_ineligible_shrink_is_not_retried_until_registrations_change():
    img = image()
    m = manager(img)
    m.on_fetch(T, 0, 2, 20, 100, LAG)
    entries = m.decide(LAG + 1, img)
    respond(m, entries, Errors.INELIGIBLE_REPLICA)
    assert m.decide(LAG + 2, img) == []
    img = change(
        img,
        RegisterBrokerRecord(
            broker_id=2, incarnation_id=INC, broker_epoch=20, fenced=False, rack="r"
        ),
    )
    assert isr_of(m.decide(LAG + 3, img)) == [(1, 10), (2, 20)]


@pytest.mark.parametrize("code", [Errors.FENCED_LEADER_EPOCH, Errors.NEW_LEADER_ELECTED])
def test_fenced_leader_epoch_waits_for_a_newer_leader_epoch(code):
    img, m = expand_setup()
    respond(m, m.decide(20, img), code)
    assert m.in_flight(TP) is None
    assert m.decide(30, img) == []
    img = change(img, PartitionChangeRecord(partition_id=0, topic_id=T, isr=(1, 2)))
    assert m.decide(40, img) == []  # partition epoch moved, leader epoch did not
    img = change(img, PartitionChangeRecord(partition_id=0, topic_id=T, leader=1))
    m.on_fetch(T, 0, 3, 30, 100, 45)
    entries = m.decide(50, img)
    assert isr_of(entries) == [(1, 10), (2, 20), (3, 30)]
    assert entries[0]["partitions"][0]["leaderEpoch"] == 1


def test_invalid_update_version_retries_from_the_next_newer_image():
    img, m = expand_setup()
    respond(m, m.decide(20, img), Errors.INVALID_UPDATE_VERSION)
    assert m.in_flight(TP) is None and m.decide(30, img) == []
    img = change(img, PartitionChangeRecord(partition_id=0, topic_id=T, isr=(1, 2)))
    entries = m.decide(40, img)
    assert entries[0]["partitions"][0]["partitionEpoch"] == 1


def test_not_controller_keeps_the_proposal_and_resends_it_as_is():
    img, m = expand_setup()
    first = m.decide(20, img)
    respond(m, first, Errors.NOT_CONTROLLER)
    assert m.maximal_isr(TP) == (1, 2, 3)
    assert m.decide(30, img) == first
    m.on_response(40, [], error_code=Errors.STALE_BROKER_EPOCH)  # top level
    assert m.decide(50, img) == first
    m.on_response(60, [])  # no entry for the partition: unknown, resend
    assert m.decide(70, img) == first


def test_no_proposals_while_the_leader_itself_is_inactive():
    img, m = expand_setup()
    img = change(img, BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=FENCE))
    assert m.decide(20, img) == []
    img = change(img, BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=UNFENCE))
    assert isr_of(m.decide(30, img)) is not None


def test_high_watermark_is_the_min_over_the_maximal_isr():
    img = image()
    m = manager(img, leo=50)
    m.on_fetch(T, 0, 2, 20, 30, 1)
    m.on_fetch(T, 0, 3, 30, 45, 1)
    assert m.high_watermark(TP) == 30
    m.on_fetch(T, 0, 2, 20, 50, 2)
    assert m.high_watermark(TP) == 45


# ------------------------------------------------------------- property test

REPLICAS = {0: (1, 2, 3), 1: (1, 2, 3, 4), 2: (1, 3)}
FOLLOWERS = (2, 3, 4)


def _initial():
    recs = [
        RegisterBrokerRecord(broker_id=b, incarnation_id=INC, broker_epoch=b * 10, fenced=False)
        for b in (1, 2, 3, 4)
    ]
    recs.append(TopicRecord(name="t", topic_id=T))
    recs += [
        PartitionRecord(partition_id=p, topic_id=T, replicas=r, isr=r[:2], leader=1)
        for p, r in REPLICAS.items()
    ]
    return apply_records(EMPTY_IMAGE, recs)


def _controller(truth, entries, not_controller):
    """docs/kafka-rules.md section 2.2 in its order, for broker 1."""
    topics, records = [], []
    for t in entries:
        parts = []
        for e in t["partitions"]:
            cur = truth.partition(t["topicId"], e["partitionIndex"])
            new = [s["brokerId"] for s in e["newIsrWithEpochs"]]
            out = {"partitionIndex": e["partitionIndex"], "isr": [], "leaderEpoch": 0}
            out["partitionEpoch"] = 0
            le, pe = e["leaderEpoch"], e["partitionEpoch"]
            if not_controller or le > cur.leader_epoch or pe > cur.partition_epoch:
                code = Errors.NOT_CONTROLLER
            elif le < cur.leader_epoch:
                code = Errors.FENCED_LEADER_EPOCH
            elif cur.leader != 1:
                code = Errors.INVALID_REQUEST
            elif pe < cur.partition_epoch:
                code = Errors.INVALID_UPDATE_VERSION
            else:
                assert set(new) <= set(cur.replicas) and 1 in new and len(set(new)) == len(new)
                bad = [
                    s
                    for s in e["newIsrWithEpochs"]
                    if (reg := truth.brokers.get(s["brokerId"])) is None
                    or not reg.active
                    or s["brokerEpoch"] not in (-1, reg.epoch)
                ]
                code = Errors.INELIGIBLE_REPLICA if bad else Errors.NONE
                if not bad:
                    new_pe = cur.partition_epoch
                    if tuple(new) != cur.isr:
                        records.append(
                            PartitionChangeRecord(
                                partition_id=e["partitionIndex"], topic_id=T, isr=tuple(new)
                            )
                        )
                        new_pe += 1
                    out.update(isr=new, leaderEpoch=cur.leader_epoch, partitionEpoch=new_pe)
            out["errorCode"] = int(code)
            parts.append(out)
        topics.append({"topicId": t["topicId"], "partitions": parts})
    return apply_records(truth, records), topics


part = st.sampled_from(sorted(REPLICAS))
ops = st.one_of(
    st.tuples(st.just("time"), st.integers(0, 1500)),
    st.tuples(st.just("append"), part, st.integers(0, 5)),
    st.tuples(st.just("fetch"), part, st.sampled_from(FOLLOWERS), st.booleans(), st.integers(0, 3)),
    st.tuples(
        st.just("broker"),
        st.sampled_from(FOLLOWERS),
        st.sampled_from(["fence", "unfence", "shutdown", "reregister"]),
    ),
    st.tuples(st.just("isr"), part, st.integers(0, 15)),
    st.tuples(st.just("leader"), part, st.booleans()),
    st.tuples(st.just("deliver")),
)


def _broker_change(truth, b, action):
    reg = truth.brokers[b]
    if action == "reregister":
        rec = RegisterBrokerRecord(
            broker_id=b, incarnation_id=INC, broker_epoch=reg.epoch + 1, fenced=False
        )
    elif action == "shutdown":
        rec = BrokerRegistrationChangeRecord(
            broker_id=b,
            broker_epoch=reg.epoch,
            in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN,
            version=1,
        )
    else:
        rec = BrokerRegistrationChangeRecord(
            broker_id=b, broker_epoch=reg.epoch, fenced=FENCE if action == "fence" else UNFENCE
        )
    return apply_records(truth, [rec])


def _check_hw(m):
    for tp in m.led_partitions():
        hw = m.high_watermark(tp)
        assert all(hw <= m.log_end(tp, b) for b in m.maximal_isr(tp))
        assert 1 in m.maximal_isr(tp)


def _decide_and_check(m, now, delivered, pending, fetched):
    """decide(), checking every entry it returns against the image it was given."""
    before = {tp: m.in_flight(tp) for tp in m.led_partitions()}
    entries = m.decide(now, delivered)
    if pending is not None:
        assert entries == []
    seen = set()
    for t in entries:
        for e in t["partitions"]:
            tp = (t["topicId"], e["partitionIndex"])
            assert tp not in seen
            seen.add(tp)
            new = [s["brokerId"] for s in e["newIsrWithEpochs"]]
            prior = before.get(tp)
            assert m.in_flight(tp) is not None
            if prior is not None:  # a resend: the very same change
                assert e == prior.entry(tp[1])
                continue
            committed = m.committed(tp)
            reg = delivered.partition(*tp)
            assert 1 in new and new and len(set(new)) == len(new)
            assert set(new) <= set(committed.replicas) == set(reg.replicas)
            for s in e["newIsrWithEpochs"]:
                if s["brokerId"] not in committed.isr:  # added by this proposal
                    b = delivered.brokers[s["brokerId"]]
                    # KIP-841: active; KIP-903: its fetch and the request carry the image's epoch.
                    assert b.active and s["brokerEpoch"] == b.epoch == fetched[tp[1], b.broker_id]
    return entries


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            ops,
            st.sampled_from(
                ["hold", "ok", "ok", "ok", "not_controller", "top", "lost", "lost_applied"]
            ),
        ),
        max_size=50,
    )
)
def test_random_sequences_keep_the_invariants(steps):
    """After every event the leader decides; the answer comes from a model controller
    (docs/kafka-rules.md 2.2) working on the true image, which reaches the leader only on
    "deliver", or is lost, rejected at the top level, or held for a step."""
    truth = delivered = _initial()
    m = IsrManager(1, replica_lag_time_max_ms=LAG)
    m.on_metadata(delivered)
    now, leo, pending, fetched = 0, dict.fromkeys(REPLICAS, 0), None, {}
    for op, mode in steps:
        kind = op[0]
        if kind == "time":
            now += op[1]
        elif kind == "append":
            leo[op[1]] += op[2]
            m.on_append(T, op[1], leo[op[1]], now)
        elif kind == "fetch":
            _, p, b, current, behind = op
            epoch = truth.brokers[b].epoch - (0 if current else 1)
            m.on_fetch(T, p, b, epoch, max(0, leo[p] - behind), now)
            fetched[p, b] = epoch
        elif kind == "broker":
            truth = _broker_change(truth, op[1], op[2])
        elif kind == "isr":
            cur = truth.partition(T, op[1])
            if cur.leader == 1:
                isr = (1,) + tuple(b for i, b in enumerate(cur.replicas[1:]) if op[2] >> i & 1)
                truth = apply_records(
                    truth, [PartitionChangeRecord(partition_id=op[1], topic_id=T, isr=isr)]
                )
        elif kind == "leader":
            cur = truth.partition(T, op[1])
            new = 1 if op[2] or len(cur.isr) < 2 else cur.isr[-1]
            truth = apply_records(
                truth, [PartitionChangeRecord(partition_id=op[1], topic_id=T, leader=new)]
            )
        elif kind == "deliver":
            delivered = truth
            m.on_metadata(delivered)
        entries = _decide_and_check(m, now, delivered, pending, fetched)
        pending = entries or pending
        if pending is not None and mode != "hold":
            if mode == "top":
                m.on_response(now, [], error_code=Errors.NOT_CONTROLLER)
            elif mode in ("lost", "lost_applied"):
                if mode == "lost_applied":
                    truth, _ = _controller(truth, pending, False)
                m.on_request_failed(now)
            else:
                truth, topics = _controller(truth, pending, mode == "not_controller")
                m.on_response(now, topics)
            pending = None
        for tp in m.led_partitions():
            assert m.in_flight(tp) is None or 1 in m.in_flight(tp).new_isr
        _check_hw(m)
