"""What must hold after a nemesis run, checked against the committed log.

The reference log is what the workload's follower read (every offset from 0,
from whichever voter answered). Checks:

* every voter's retained log equals the reference where they overlap, and
  every voter reaches the final offset with the same image digest, equal to
  the digest of replaying the reference log (so a voter that restarted from a
  snapshot holds the same state as one that applied every record);
* replay with metadata_records: no record ignored (``ignored_records`` 0);
* controller epochs never decrease and each LEADER_CHANGE raises it;
* broker epochs: a new incarnation's epoch is the offset of its
  RegisterBrokerRecord, so unique; per broker they increase; a retried
  (unknown-outcome) registration never gets a second epoch;
* KIP-841 at the end of every batch: an ISR of more than one broker holds only
  active brokers (registered, unfenced, not in controlled shutdown), a lone
  inactive ISR member has no leader, and every leader is active; partition
  and leader epochs never go backwards, a partition change adds exactly 1;
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

Batches: records of one Raft batch share (timestampMs, controllerEpoch); runs of
equal pairs are checked as one batch (coarser at worst, never finer).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from metadata_records.codec import record_from_obj
from metadata_records.delta import ImageDelta
from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import (
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    NO_LEADER,
    NO_LEADER_CHANGE,
    UNFENCE,
    BrokerRegistrationChangeRecord,
    LeaderChangeRecord,
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
    facts = LogFacts()
    delta = ImageDelta(EMPTY_IMAGE)
    isr_of: dict[int, set[tuple[str, int]]] = defaultdict(set)  # broker -> partitions
    last_epoch = 0
    batch_key = None
    touched_parts: set[tuple[str, int]] = set()
    touched_brokers: set[int] = set()
    broker_epochs: dict[int, int] = {}

    def check_batch(at: int) -> None:
        parts = set(touched_parts)
        for b in touched_brokers:
            parts |= isr_of[b]
        for key in parts:
            part = delta.partition(*key)
            if part is None:
                continue
            inactive = [m for m in part.isr if not delta.is_active(m)]
            if len(part.isr) > 1 and inactive:
                result.fail(
                    "kip841",
                    f"offset {at}: partition {key} ISR {list(part.isr)} holds inactive "
                    f"broker(s) {inactive}",
                )
            if part.leader != NO_LEADER and not delta.is_active(part.leader):
                result.fail(
                    "kip841", f"offset {at}: partition {key} is led by inactive {part.leader}"
                )
            if part.leader != NO_LEADER and part.leader not in part.isr:
                result.fail(
                    "kip841", f"offset {at}: partition {key} leader {part.leader} not in ISR"
                )
        touched_parts.clear()
        touched_brokers.clear()

    for obj in records:
        offset = obj["offset"]
        key = (obj["timestampMs"], obj["controllerEpoch"])
        if batch_key is not None and key != batch_key:
            check_batch(offset - 1)
        batch_key = key
        if obj["controllerEpoch"] < last_epoch:
            result.fail(
                "controller-epochs",
                f"offset {offset}: controller epoch {obj['controllerEpoch']} after {last_epoch}",
            )
        last_epoch = max(last_epoch, obj["controllerEpoch"])
        record = record_from_obj(obj, f"record {offset}")
        t = type(record)
        before = None
        if t is PartitionChangeRecord or t is PartitionRecord:
            pkey = (record.topic_id, record.partition_id)
            before = delta.partition(*pkey)
        if t is LeaderChangeRecord and record.controller_epoch <= delta.controller_epoch:
            result.fail(
                "controller-epochs",
                f"offset {offset}: LEADER_CHANGE to epoch {record.controller_epoch} "
                f"at epoch {delta.controller_epoch}",
            )
        ignored = delta.ignored_records
        delta.replay(record)
        if delta.ignored_records != ignored:
            result.fail("replay", f"offset {offset}: {obj['type']} could not apply: {obj['data']}")
            continue
        if t is RegisterBrokerRecord:
            b, epoch = record.broker_id, record.broker_epoch
            seen = facts.incarnations[record.incarnation_id]
            if not seen:
                if epoch != offset:
                    result.fail(
                        "broker-epochs",
                        f"offset {offset}: new incarnation of broker {b} got epoch {epoch}",
                    )
                if b in broker_epochs and epoch <= broker_epochs[b]:
                    result.fail(
                        "broker-epochs",
                        f"offset {offset}: broker {b} epoch {epoch} after {broker_epochs[b]}",
                    )
                broker_epochs[b] = epoch
            elif seen[0][1] != epoch or seen[0][0] != b:
                result.fail(
                    "double-apply",
                    f"offset {offset}: incarnation {record.incarnation_id} registered again "
                    f"as broker {b} epoch {epoch} (first: broker {seen[0][0]} epoch "
                    f"{seen[0][1]} at offset {seen[0][2]})",
                )
            seen.append((b, epoch, offset))
            touched_brokers.add(b)
        elif t is BrokerRegistrationChangeRecord:
            k = (record.broker_id, record.broker_epoch)
            if record.fenced == UNFENCE:
                facts.unfenced.add(k)
            if record.fenced == FENCE:
                facts.fenced.add(k)
            if record.in_controlled_shutdown == IN_CONTROLLED_SHUTDOWN:
                facts.shutdown_flagged.add(k)
            touched_brokers.add(record.broker_id)
        elif t is TopicRecord:
            facts.topic_records[record.name].append(record.topic_id)
            if len(facts.topic_records[record.name]) > 1:
                result.fail("double-apply", f"offset {offset}: topic {record.name} created again")
        elif t is PartitionRecord or t is PartitionChangeRecord:
            after = delta.partition(*pkey)
            if t is PartitionRecord:
                if before is not None:
                    result.fail("epochs", f"offset {offset}: partition {pkey} created again")
                facts.partition_counts[record.topic_id] += 1
            else:
                if after.partition_epoch != before.partition_epoch + 1:
                    result.fail("epochs", f"offset {offset}: partition epoch of {pkey} jumped")
                bumped = record.leader != NO_LEADER_CHANGE
                if after.leader_epoch != before.leader_epoch + (1 if bumped else 0):
                    result.fail("epochs", f"offset {offset}: leader epoch of {pkey} is off")
                for m in before.isr:
                    isr_of[m].discard(pkey)
            for m in after.isr:
                isr_of[m].add(pkey)
            facts.history[pkey][after.partition_epoch] = (
                tuple(after.isr),
                after.leader,
                after.leader_epoch,
            )
            touched_parts.add(pkey)
    if records:
        check_batch(records[-1]["offset"])
    facts.image = delta.apply()
    if facts.image.ignored_records:
        result.fail("replay", f"{facts.image.ignored_records} record(s) ignored in replay")
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


def check_processes(exits: list[str], findings: list[str], result: CheckResult) -> None:
    """Voters that exited on their own, and what the nemesis found, are violations."""
    for message in exits:
        result.fail("voter-exit", message)
    for message in findings:
        result.fail("readmission", message)


def check(
    records: list[dict],
    ops: list[Op],
    voter_logs: dict[int, tuple[int, list[dict]] | None],
    voter_status: dict[int, dict | None],
    exits: list[str] = (),
    findings: list[str] = (),
) -> CheckResult:
    result = CheckResult()
    facts = replay(records, result)
    check_acknowledged(ops, facts, result)
    check_voters(records, voter_logs, voter_status, facts, result)
    check_processes(list(exits), list(findings), result)
    result.counts = dict(result.counts)
    return result
