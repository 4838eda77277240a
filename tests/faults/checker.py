"""What must hold after a nemesis run, checked against the committed log.

The reference log is what the workload's follower read (every offset from 0,
from whichever voter answered). Checks:

* every voter's retained log equals the reference where they overlap, and
  every voter reaches the final offset with the same image digest, equal to
  the digest of replaying the reference log (so a voter that restarted from a
  snapshot holds the same state as one that applied every record);
* the log's invariants, each rule of ``metadata_records.log_invariants``
  (dense offsets, controller and broker epochs, records the image refuses,
  KIP-841 eligibility, leaders active and in their ISR at batch ends, ...),
  reported under the rule's name; and a retried (unknown-outcome)
  registration never gets a second epoch;
* every acknowledged write is in the log, as answered (lost otherwise);
* no write is applied twice: one TOPIC_RECORD per name, one epoch per
  incarnation, an acknowledged AlterPartition commits exactly as the change
  from the partition epoch it named;
* every voter ends as a voter (a voter whose disk was replaced was
  re-admitted), and no voter exited on its own during the run (exit code 3:
  it refused to serve, e.g. its applied log diverged from the leader's); the
  nemesis's own findings (a wiped voter not re-admitted in time) count too.

``CheckResult.divergent`` counts the voters whose image at the end is not the
replay's (another digest, another offset, or no answer).

Batches are what each record's ``batchOffset`` says.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from metadata_records.codec import record_from_obj
from metadata_records.delta import ImageDelta
from metadata_records.image import EMPTY_IMAGE
from metadata_records.log_invariants import LogInvariants, Violation
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
from metadata_records.snapshot import image_digest
from metadata_records.uuids import parse_uuid

from .workload import Op

MAX_EXAMPLES = 10  # violations kept per check (the count is exact)


@dataclass
class CheckResult:
    final_offset: int = -1
    replay_digest: str = ""
    voter_digests: dict[int, str | None] = field(default_factory=dict)
    divergent: int = 0  # voters without the replay's image at the final offset
    violations: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    lost: list[str] = field(default_factory=list)
    unknown_resolution: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int))
    )
    checks: list[str] = field(default_factory=list)
    invariants: list[Violation] = field(default_factory=list)  # of the log's rules

    def fail(self, check: str, message: str) -> None:
        self.counts[check] += 1
        if len(self.violations[check]) < MAX_EXAMPLES:
            self.violations[check].append(message)

    @property
    def ok(self) -> bool:
        return not self.counts and not self.lost


class LogFacts:
    """What the checks need from the log, gathered in one replay."""

    def __init__(self) -> None:
        self.incarnations: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
        # (broker, epoch) -> offsets of unfence / controlled-shutdown / fence records
        self.unfenced: set[tuple[int, int]] = set()
        self.shutdown_flagged: set[tuple[int, int]] = set()
        self.fenced: set[tuple[int, int]] = set()
        self.topic_records: dict[str, list[str]] = defaultdict(list)  # name -> ids
        self.partition_counts: dict[str, int] = defaultdict(int)  # topic id -> partitions
        # (topic id, partition) -> partition epoch -> (isr, leader, leader epoch)
        self.history: dict[tuple[str, int], dict[int, tuple[tuple[int, ...], int, int]]] = (
            defaultdict(dict)
        )
        self.image = EMPTY_IMAGE


def replay(records: list[dict], result: CheckResult) -> LogFacts:
    """The log's invariants (``metadata_records.log_invariants``, one violation
    type per rule), and what the other checks need from the log."""
    facts = LogFacts()
    invariants = LogInvariants()
    for obj in records:
        invariants.check_obj(obj)
    for v in invariants.finish():
        result.invariants.append(v)
        result.fail(v.rule, str(v))
    delta = invariants.delta
    facts.image = delta.apply()
    # Facts for the acknowledged writes, and writes applied twice.
    for obj in records:
        offset = obj["offset"]
        record = record_from_obj(obj, f"record {offset}")
        t = type(record)
        if t is RegisterBrokerRecord:
            b, epoch = record.broker_id, record.broker_epoch
            seen = facts.incarnations[record.incarnation_id]
            if seen and (seen[0][1] != epoch or seen[0][0] != b):
                result.fail(
                    "double-apply",
                    f"offset {offset}: incarnation {record.incarnation_id} registered again "
                    f"as broker {b} epoch {epoch} (first: broker {seen[0][0]} epoch "
                    f"{seen[0][1]} at offset {seen[0][2]})",
                )
            seen.append((b, epoch, offset))
        elif t is BrokerRegistrationChangeRecord:
            k = (record.broker_id, record.broker_epoch)
            if record.fenced == UNFENCE:
                facts.unfenced.add(k)
            if record.fenced == FENCE:
                facts.fenced.add(k)
            if record.in_controlled_shutdown == IN_CONTROLLED_SHUTDOWN:
                facts.shutdown_flagged.add(k)
        elif t is TopicRecord:
            facts.topic_records[record.name].append(record.topic_id)
            if len(facts.topic_records[record.name]) > 1:
                result.fail("double-apply", f"offset {offset}: topic {record.name} created again")
        elif t is PartitionRecord:
            facts.partition_counts[record.topic_id] += 1
    # Each partition's states by partition epoch, from a second replay that
    # keeps them (the invariants' replay keeps only the latest).
    history_delta = ImageDelta(EMPTY_IMAGE)
    for obj in records:
        history_delta.next_offset = obj["offset"]
        record = record_from_obj(obj, f"record {obj['offset']}")
        history_delta.replay(record)
        if type(record) is PartitionRecord or type(record) is PartitionChangeRecord:
            key = (record.topic_id, record.partition_id)
            after = history_delta.partition(*key)
            if after is not None:
                facts.history[key][after.partition_epoch] = (
                    tuple(after.isr),
                    after.leader,
                    after.leader_epoch,
                )
    return facts


def check_acknowledged(ops: list[Op], facts: LogFacts, result: CheckResult) -> None:
    """Every acknowledged write is in the log as answered; unknown ones resolved."""
    brokers = facts.image.brokers
    for op in ops:
        rq, rs = op.request, op.response or {}
        if op.kind == "register":
            incarnation = parse_uuid(rq["incarnationId"])  # the log's base64url form
            epochs = {e for _, e, _ in facts.incarnations.get(incarnation, [])}
            if op.outcome == "ok" and epochs != {rs.get("brokerEpoch")}:
                result.lost.append(
                    f"op {op.id}: broker {op.broker} registration acknowledged with epoch "
                    f"{rs.get('brokerEpoch')}, the log has {sorted(epochs) or 'none'}"
                )
            elif op.outcome == "unknown":
                result.unknown_resolution["register"]["applied" if epochs else "not applied"] += 1
        elif op.kind in ("heartbeat", "shutdown") and op.outcome == "ok":
            k = (op.broker, rq["brokerEpoch"])
            if not rs.get("isFenced", True) and k not in facts.unfenced:
                result.lost.append(
                    f"op {op.id}: broker {op.broker} epoch {k[1]} told it is unfenced, "
                    "no unfence record in the log"
                )
            if op.kind == "shutdown" and not rs.get("isFenced") and not rs.get("shouldShutDown"):
                if k not in facts.shutdown_flagged:
                    result.lost.append(
                        f"op {op.id}: broker {op.broker} epoch {k[1]} told it is in "
                        "controlled shutdown, no InControlledShutdown record in the log"
                    )
            if op.kind == "shutdown" and rs.get("shouldShutDown"):
                reg = brokers.get(op.broker)
                if reg is not None and reg.epoch == k[1] and not reg.fenced:
                    result.lost.append(
                        f"op {op.id}: broker {op.broker} epoch {k[1]} told to shut down, "
                        "still unfenced at the end of the log"
                    )
        elif op.kind == "create_topic":
            ids = facts.topic_records.get(rq["name"], [])
            if op.outcome == "ok":
                topic = rs["topics"][0]
                if ids != [topic["topicId"]]:
                    result.lost.append(
                        f"op {op.id}: topic {rq['name']} acknowledged as {topic['topicId']}, "
                        f"the log has {ids or 'none'}"
                    )
                elif facts.partition_counts[topic["topicId"]] != topic["numPartitions"]:
                    result.lost.append(
                        f"op {op.id}: topic {rq['name']} acknowledged with "
                        f"{topic['numPartitions']} partitions, the log has "
                        f"{facts.partition_counts[topic['topicId']]}"
                    )
            elif op.outcome == "unknown":
                result.unknown_resolution["create_topic"]["applied" if ids else "not applied"] += 1
        elif op.kind == "alter_partition":
            _check_alter(op, facts, result)


def _check_alter(op: Op, facts: LogFacts, result: CheckResult) -> None:
    topic = op.request["topics"][0]
    asked = topic["partitions"][0]
    key = (topic["topicId"], asked["partitionIndex"])
    want_isr = tuple(e["brokerId"] for e in asked["newIsrWithEpochs"])
    from_epoch = asked["partitionEpoch"]
    history = facts.history.get(key, {})
    if op.outcome == "unknown":
        applied = history.get(from_epoch + 1, (None,))[0] == want_isr
        result.unknown_resolution["alter_partition"]["applied" if applied else "not applied"] += 1
        return
    if op.outcome != "ok":
        return
    got = op.response["topics"][0]["partitions"][0]
    epoch = got["partitionEpoch"]
    state = history.get(epoch)
    if epoch not in (from_epoch, from_epoch + 1):
        result.lost.append(
            f"op {op.id}: AlterPartition on {key} from partition epoch {from_epoch} answered "
            f"epoch {epoch} (applied at another epoch than it named)"
        )
    elif state is None or state[0] != tuple(got["isr"]) or state[2] != got["leaderEpoch"]:
        result.lost.append(
            f"op {op.id}: AlterPartition on {key} acknowledged ISR {got['isr']} at partition "
            f"epoch {epoch}, the log has {state}"
        )


def check_voters(
    records: list[dict],
    voter_logs: dict[int, tuple[int, list[dict]] | None],
    voter_status: dict[int, dict | None],
    facts: LogFacts,
    result: CheckResult,
) -> None:
    """Every voter's log agrees with the reference; digests agree with the
    replay; every voter ends as a voter."""
    final = len(records) - 1
    result.final_offset = final
    result.replay_digest = image_digest(facts.image)
    for i, got in sorted(voter_logs.items()):
        if got is None:
            result.fail("divergence", f"voter {i} did not answer for its log")
            continue
        oldest, log = got
        if oldest > 0:
            result.checks.append(f"voter {i} retains its log from offset {oldest} (snapshot)")
        for rec in log:
            off = rec["offset"]
            if off > final:
                break
            if rec != records[off]:
                result.fail(
                    "divergence",
                    f"voter {i} offset {off}: {rec} but the reference has {records[off]}",
                )
        end = log[-1]["offset"] if log else oldest - 1
        if end < final:
            result.fail("divergence", f"voter {i}'s log ends at {end}, before {final}")
    for i, status in sorted(voter_status.items()):
        if status is None:
            result.voter_digests[i] = None
            result.divergent += 1
            result.fail("digest", f"voter {i} gave no status at the end")
            continue
        result.voter_digests[i] = status["imageDigest"]
        if status["lastAppliedOffset"] != final:
            result.divergent += 1
            result.fail(
                "digest", f"voter {i} is at offset {status['lastAppliedOffset']}, not {final}"
            )
        elif status["imageDigest"] != result.replay_digest:
            result.divergent += 1
            result.fail(
                "digest",
                f"voter {i} image digest {status['imageDigest']} at offset {final} differs from "
                f"the replay's {result.replay_digest}",
            )
        role = status.get("role", "voter")
        if role != "voter":
            result.fail("readmission", f"voter {i} ends the run as {role!r}, not a voter")


def check_processes(
    exits: list[str], findings: list[str | tuple[str, str]], result: CheckResult
) -> None:
    """Voters that exited on their own, and what the nemesis found (a message:
    a re-admission; or (check, message): a membership change not done), are
    violations."""
    for message in exits:
        result.fail("voter-exit", message)
    for finding in findings:
        check, message = ("readmission", finding) if isinstance(finding, str) else finding
        result.fail(check, message)


def check(
    records: list[dict],
    ops: list[Op],
    voter_logs: dict[int, tuple[int, list[dict]] | None],
    voter_status: dict[int, dict | None],
    exits: list[str] = (),
    findings: list[str | tuple[str, str]] = (),
) -> CheckResult:
    result = CheckResult()
    facts = replay(records, result)
    check_acknowledged(ops, facts, result)
    check_voters(records, voter_logs, voter_status, facts, result)
    check_processes(list(exits), list(findings), result)
    result.counts = dict(result.counts)
    return result
