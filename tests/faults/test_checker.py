"""The nemesis checker (and the report's unavailability) on hand-made logs: a healthy history passes, and each
kind of violation it exists to catch is caught (so a green nemesis run means
something). No root needed."""

from __future__ import annotations

import uuid

import orjson
import pytest

from metadata_records.codec import log_record_to_obj, record_from_obj
from metadata_records.delta import apply_records
from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import (
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    NO_LEADER,
    UNFENCE,
    BrokerRegistrationChangeRecord,
    Endpoint,
    FeatureRange,
    LeaderChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from metadata_records.snapshot import image_digest
from metadata_records.uuids import parse_uuid, uuid_from_bytes

from ..invariant_corpus import corpus
from .checker import check
from .nemesis import Fault
from .report import RunReport, longest_unavailability
from .workload import Op

CORPUS = corpus()

T1 = uuid_from_bytes(b"\x01" * 16)
I1, I2 = str(uuid.uuid4()), str(uuid.uuid4())  # as brokers send them (standard form)


def reg(b: int, epoch: int, inc: str) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=b,
        incarnation_id=parse_uuid(inc),
        broker_epoch=epoch,
        end_points=(Endpoint("PLAINTEXT", f"broker-{b}", 9092, 0),),
        features=(FeatureRange("metadata.version", 6, 12),),
    )


def change(
    b: int, epoch: int, fenced: int = 0, shutdown: int = 0
) -> BrokerRegistrationChangeRecord:
    return BrokerRegistrationChangeRecord(
        broker_id=b, broker_epoch=epoch, fenced=fenced, in_controlled_shutdown=shutdown, version=1
    )


def as_json(obj: dict) -> dict:
    return orjson.loads(orjson.dumps(obj))  # lists, as the HTTP API sends them


def as_log(*batches) -> list[dict]:
    """Records as GET /v1/log shows them; one timestamp per batch."""
    out: list[dict] = []
    for n, batch in enumerate(batches):
        first = len(out)
        for record in batch:
            out.append(as_json(log_record_to_obj(len(out), 1_000 + n, 1, record, first)))
    return out


def healthy() -> list[dict]:
    return as_log(
        [LeaderChangeRecord(controller_epoch=1, leader_id=0, leader_url="http://v0")],  # 0
        [reg(1, 1, I1)],  # 1
        [reg(2, 2, I2)],  # 2
        [change(1, 1, fenced=UNFENCE)],  # 3
        [change(2, 2, fenced=UNFENCE)],  # 4
        [
            TopicRecord(name="t", topic_id=T1),  # 5
            PartitionRecord(partition_id=0, topic_id=T1, replicas=(1, 2), isr=(1, 2), leader=1),
        ],
        [PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1,))],  # 7: AlterPartition
        # Controlled shutdown of 1: the flag first, then it leaves leadership; the
        # lone ISR member stays (Kafka without ELR) with no leader.
        [
            change(1, 1, shutdown=IN_CONTROLLED_SHUTDOWN),  # 8
            PartitionChangeRecord(partition_id=0, topic_id=T1, leader=NO_LEADER),  # 9
        ],
        [change(1, 1, fenced=FENCE)],  # 10
    )


def acked_ops() -> list[Op]:
    alter = {
        "brokerId": 1,
        "brokerEpoch": 1,
        "topics": [
            {
                "topicId": T1,
                "partitions": [
                    {
                        "partitionIndex": 0,
                        "leaderEpoch": 0,
                        "newIsrWithEpochs": [{"brokerId": 1, "brokerEpoch": 1}],
                        "leaderRecoveryState": 0,
                        "partitionEpoch": 0,
                    }
                ],
            }
        ],
    }
    answer = {"partitionIndex": 0, "errorCode": 0, "isr": [1], "leaderEpoch": 0}
    return [
        Op(0, "register", 1, 0, 1, "ok", {"incarnationId": I1}, {"brokerEpoch": 1}),
        Op(1, "heartbeat", 1, 1, 2, "ok", {"brokerEpoch": 1}, {"isFenced": False}),
        Op(
            2,
            "create_topic",
            None,
            2,
            3,
            "ok",
            {"name": "t"},
            {"topics": [{"name": "t", "topicId": T1, "errorCode": 0, "numPartitions": 1}]},
        ),
        Op(
            3,
            "alter_partition",
            1,
            3,
            4,
            "ok",
            alter,
            {"topics": [{"topicId": T1, "partitions": [{**answer, "partitionEpoch": 1}]}]},
        ),
        Op(4, "shutdown", 1, 4, 5, "ok", {"brokerEpoch": 1}, {"shouldShutDown": True}),
    ]


def run_check(
    records, ops=None, voter_logs=None, digests=None, roles=None, exits=(), findings=(), gone=()
):
    image = apply_records(EMPTY_IMAGE, [record_from_obj(r) for r in records])
    final = len(records) - 1
    status = {
        i: None
        if i in gone
        else {
            "lastAppliedOffset": final,
            "imageDigest": (digests or {}).get(i, image_digest(image)),
            "role": (roles or {}).get(i, "voter"),
        }
        for i in range(3)
    }
    logs = voter_logs or {i: (0, records) for i in range(3)}
    return check(records, acked_ops() if ops is None else ops, logs, status, exits, findings)


def test_a_healthy_history_passes():
    result = run_check(healthy())
    assert result.ok, (dict(result.violations), result.lost)


def test_an_acknowledged_registration_missing_from_the_log_is_lost():
    ops = acked_ops()
    ops[0].response = {"brokerEpoch": 7}
    result = run_check(healthy(), ops)
    assert len(result.lost) == 1 and "epoch 7" in result.lost[0]


def test_an_acknowledged_topic_missing_from_the_log_is_lost():
    ops = acked_ops()
    ops[2].request = {"name": "other"}
    result = run_check(healthy(), ops)
    assert any("topic other" in lost for lost in result.lost)


def test_an_alter_partition_committed_at_another_epoch_is_caught():
    ops = acked_ops()
    ops[3].response["topics"][0]["partitions"][0]["partitionEpoch"] = 2
    result = run_check(healthy(), ops)
    assert any("another epoch" in lost for lost in result.lost)


def test_an_unfence_answer_without_its_record_is_lost():
    records = healthy()
    del records[3:]  # broker 1 never unfenced in the log
    ops = [acked_ops()[1]]
    assert any("unfenced" in lost for lost in run_check(records, ops).lost)


def test_isr_inactive_a_fenced_broker_left_in_a_shared_isr():
    records = healthy()[:7]
    records.append(
        as_json(log_record_to_obj(7, 5_000, 1, change(2, 2, fenced=FENCE), 7))
    )  # ISR is [1, 2]
    result = run_check(records, [])
    assert result.counts.get("partition.inactive-leaves-isr") == 1, dict(result.violations)
    assert (
        "broker 2 (fenced) is in the ISR [1, 2]"
        in result.violations["partition.inactive-leaves-isr"][0]
    )


def test_a_second_epoch_for_one_incarnation_is_a_double_apply():
    records = healthy()
    records.append(
        as_json(log_record_to_obj(len(records), 9_000, 1, reg(1, len(records), I1), len(records)))
    )
    result = run_check(records, [])
    assert result.counts.get("double-apply") == 1


def test_a_diverging_voter_log_and_digest_are_caught():
    records = healthy()
    forked = [dict(r) for r in records]
    forked[4] = {**forked[4], "timestampMs": 1}
    result = run_check(
        records,
        voter_logs={0: (0, records), 1: (0, forked), 2: (3, records[3:])},
        digests={2: "0" * 64},
    )
    assert (
        result.counts.get("divergence") == 1
        and "voter 1 offset 4" in result.violations["divergence"][0]
    )
    assert result.counts.get("digest") == 1 and "voter 2" in result.violations["digest"][0]
    assert result.divergent == 1


def test_a_voter_without_a_status_or_log_at_the_end_is_divergent():
    records = healthy()
    logs = {0: (0, records), 1: (0, records), 2: None}
    result = run_check(records, voter_logs=logs, gone={2})
    assert result.divergent == 1 and not result.ok
    assert "voter 2 gave no status" in result.violations["digest"][0]
    assert "voter 2 did not answer" in result.violations["divergence"][0]


def test_a_voter_that_exited_on_its_own_is_reported():
    exit3 = "voter 1 exited with code 3 at 12.0s (it refused to serve: a diverged log)"
    result = run_check(healthy(), exits=[exit3])
    assert result.counts == {"voter-exit": 1} and result.violations["voter-exit"] == [exit3]
    assert not result.ok


def test_a_wiped_voter_not_readmitted_is_reported():
    result = run_check(healthy(), roles={1: "observer"}, findings=["voter 1 not re-admitted"])
    assert result.counts == {"readmission": 2}
    assert "voter 1 ends the run as 'observer'" in result.violations["readmission"][0]
    assert result.divergent == 0  # its image is the replay's: behind in role, not in data


def test_a_membership_change_not_done_is_reported_under_its_own_check():
    finding = ("membership", "add-voter of node 5 in slot 3 not done within 180 s")
    result = run_check(healthy(), findings=[finding])
    assert result.counts == {"membership": 1} and not result.ok
    assert result.violations["membership"] == [finding[1]]


def test_the_report_prints_leader_changes_of_watched_faults_and_change_durations():
    quiet = Fault("flapping-link", "link 0 x 1", 10.0, 25.0, 0, leaders=[(10.0, 0, 2)])
    moved = Fault("isolate-follower", "node 2", 30.0, 45.0, 0, leaders=[(30.0, 0, 2), (41.5, 1, 3)])
    added = Fault("add-voter", "slot 3 (node 5)", 50.0, 53.0, 0, took=3.0)
    lost = Fault("remove-voter", "node 1", 60.0, 240.0, 1, took=None)
    ops = [Op(0, "heartbeat", 1, 0.5, 1.0, "ok")]
    result = run_check(healthy())
    gap = longest_unavailability(ops, [quiet, moved, added, lost], end=250.0)
    text = RunReport(1, 240.0, [quiet, moved, added, lost], ops, result, gap, "/x", {}).format()
    assert "leader changes during flapping-link: 0 in 1 fault(s) (0)" in text
    assert "leader changes during isolate-follower: 1 in 1 fault(s) (1)" in text
    assert "(s, leader, term) [(30.0, 0, 2), (41.5, 1, 3)]" in text
    assert "membership changes: 2, done 1, 3.0-3.0 s" in text
    assert "remove-voter     NOT done" in text


def test_unavailability_is_the_longest_time_without_an_acknowledged_write():
    ops = [
        Op(i, "heartbeat", 1, t - 0.1, t, outcome)
        for i, (t, outcome) in enumerate(
            [(1.0, "ok"), (2.0, "ok"), (5.0, "unknown"), (8.0, "ok"), (9.0, "ok")]
        )
    ]
    faults = [Fault("pause", "voter 0", 2.5, 6.0), Fault("kill", "voter 1", 8.5, 9.5)]
    gap = longest_unavailability(ops, faults, end=12.5)
    assert (gap.seconds, gap.start, gap.end) == (6.0, 2.0, 8.0)
    assert gap.faults == ["pause on voter 0 at 2.5-6.0s"]


@pytest.mark.parametrize("log", CORPUS, ids=lambda log: log.name)
def test_the_planted_corpus_is_found_as_the_invariants_find_it(log):
    result = run_check(log.records, [])
    assert [(v.offset, v.rule) for v in result.invariants] == log.expected
    assert {rule for _, rule in log.expected} == set(result.counts) - {"digest", "divergence"}
