"""The audit's checks as one sequential Python replay over an export directory.

The reference for the Spark audit (the tests hold the two to the same
answers) and its baseline in ``bench/pipeline.py``. It keeps the current state
of every broker and partition in dicts and walks the records in offset order,
so it is as simple as the checks are, and bound to one core.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pyarrow.parquet as pq

from .export_files import export_files, input_format
from .violations import broker_label, partition_entity

COLUMNS = [
    "offset",
    "timestamp_ms",
    "controller_epoch",
    "type",
    "from_snapshot",
    "broker_id",
    "broker_epoch",
    "fenced",
    "in_controlled_shutdown",
    "fenced_change",
    "in_controlled_shutdown_change",
    "name",
    "topic_id",
    "partition_id",
    "replicas",
    "isr",
    "leader",
    "leader_epoch",
    "partition_epoch",
]


def read_rows(directory: str) -> Iterator[tuple]:
    """Rows as tuples in COLUMNS order, file by file in offset order."""
    fmt = input_format(directory)
    for f in export_files(directory):
        if fmt == "parquet":
            for batch in pq.ParquetFile(f.path).iter_batches(batch_size=65536, columns=COLUMNS):
                yield from zip(*(batch.column(c).to_pylist() for c in COLUMNS), strict=True)
        else:
            with open(f.path, "rb") as fh:
                for line in fh:
                    obj = orjson.loads(line)
                    yield tuple(obj.get(c) for c in COLUMNS)


def _isr_text(isr) -> str:
    return "[" + ", ".join(str(b) for b in isr) + "]"


def replay_audit(directory: str) -> tuple[list[tuple], int]:
    """(violations as (offset, timestamp_ms, check, entity, explanation), records read)."""
    out: list[tuple] = []
    brokers: dict[int, list] = {}  # id -> [epoch, fenced, shutdown]
    parts: dict[tuple[str, int], list] = {}  # -> [isr, leader, leader_epoch, partition_epoch]
    topics: dict[str, str] = {}
    seen: dict[int, int] = {}  # offset -> log records at it, where more than one
    dup_ts: dict[int, int] = {}
    cur_offset = cur_epoch = None  # this offset, the highest controller epoch at it
    last_offset = last_epoch = None  # the same for the offset before
    log_rows_here = 0
    first_ts_here = 0  # the timestamp of the first log record at this offset
    n = 0
    for row in read_rows(directory):
        (
            offset, ts, cepoch, rtype, snap, broker_id, broker_epoch, fenced, shutdown,
            fenced_change, shutdown_change, name, topic_id, pid, replicas, isr, leader,
            leader_epoch, partition_epoch,
        ) = row  # fmt: skip
        n += 1
        new_offset = offset != cur_offset
        if new_offset:
            last_offset, last_epoch = cur_offset, cur_epoch
            cur_offset, cur_epoch, log_rows_here = offset, cepoch, 0
        else:
            cur_epoch = max(cur_epoch, cepoch)
        if not snap:
            log_rows_here += 1
            if log_rows_here > 1:
                seen[offset] = log_rows_here
                dup_ts[offset] = min(first_ts_here, ts)
            else:
                first_ts_here = ts
                if last_offset is not None and offset != last_offset + 1:
                    out.append(
                        (offset, ts, "offsets-dense", "log",
                         f"offset {offset - 1} is missing: no record precedes offset {offset}")
                    )  # fmt: skip
            if last_offset == offset - 1 and cepoch < last_epoch:
                out.append(
                    (offset, ts, "controller-epoch", "controller",
                     f"controller epoch {cepoch} at offset {offset} is below {last_epoch}, "
                     f"the epoch at offset {offset - 1}")
                )  # fmt: skip

        if rtype == "REGISTER_BROKER_RECORD":
            old = brokers.get(broker_id)
            if not snap:
                problems = []
                if broker_epoch != offset:
                    problems.append(
                        f"which is not the offset of its RegisterBrokerRecord ({offset})"
                    )
                if old is not None and broker_epoch <= old[0]:
                    problems.append(f"which does not increase on its previous epoch {old[0]}")
                if problems:
                    out.append(
                        (offset, ts, "broker-epoch", f"broker {broker_id}",
                         f"registered with epoch {broker_epoch} " + " and ".join(problems))
                    )  # fmt: skip
            brokers[broker_id] = [broker_epoch, bool(fenced), bool(shutdown)]
        elif rtype == "BROKER_REGISTRATION_CHANGE_RECORD":
            state = brokers.get(broker_id)
            if not snap:
                if state is None:
                    out.append(
                        (offset, ts, "change-epoch", f"broker {broker_id}",
                         f"change record for broker {broker_id}, which is not registered")
                    )  # fmt: skip
                elif broker_epoch != state[0]:
                    out.append(
                        (offset, ts, "change-epoch", f"broker {broker_id}",
                         f"change record carries epoch {broker_epoch}, but the broker's "
                         f"current epoch is {state[0]}")
                    )  # fmt: skip
            code_cs = shutdown_change if shutdown_change is not None else 0
            if (
                state is not None
                and broker_epoch == state[0]
                and fenced_change in (-1, 0, 1)
                and code_cs in (0, 1)
            ):
                if fenced_change == 1:
                    state[1] = True
                elif fenced_change == -1:
                    state[1] = False
                if code_cs == 1:
                    state[2] = True
        elif rtype == "TOPIC_RECORD":
            topics.setdefault(topic_id, name)
        elif rtype in ("PARTITION_RECORD", "PARTITION_CHANGE_RECORD"):
            key = (topic_id, pid)
            old = parts.get(key)
            is_pr = rtype == "PARTITION_RECORD"
            if old is None and not is_pr:
                continue  # a change to a partition that does not exist: replay ignores it
            entity = partition_entity(topics.get(topic_id, topic_id), pid)
            if is_pr:
                new = [list(isr), leader, leader_epoch, partition_epoch]
            else:
                new = [
                    old[0] if isr is None else list(isr),
                    old[1] if leader == -2 else leader,
                    old[2] if leader == -2 else old[2] + 1,
                    old[3] + 1,
                ]
            parts[key] = new
            if snap:
                continue
            if isr is not None:
                before = set(old[0]) if old is not None else set()
                added = []
                for b in isr:
                    if b in before:
                        continue
                    s = brokers.get(b)
                    label = broker_label(s is not None, s and s[1], s and s[2])
                    if label:
                        added.append(f"broker {b} ({label})")
                if added:
                    out.append(
                        (offset, ts, "kip-841", entity,
                         f"ISR {_isr_text(isr)} adds " + ", ".join(added))
                    )  # fmt: skip
                if not isr:
                    out.append((offset, ts, "isr-empty", entity, "the ISR is empty"))
            lead = new[1]
            if lead != -1:
                problems = []
                if lead not in new[0]:
                    problems.append(f"not in the ISR {_isr_text(new[0])}")
                s = brokers.get(lead)
                label = broker_label(s is not None, s and s[1], s and s[2])
                if label:
                    problems.append(label)
                if problems:
                    out.append(
                        (offset, ts, "leader", entity,
                         f"leader {lead} is " + " and ".join(problems))
                    )  # fmt: skip
            if is_pr and old is not None:
                if partition_epoch != old[3] + 1:
                    out.append(
                        (offset, ts, "partition-epoch", entity,
                         f"partition epoch {partition_epoch} follows {old[3]}: "
                         f"expected {old[3] + 1}")
                    )  # fmt: skip
                if leader_epoch < old[2]:
                    out.append(
                        (offset, ts, "leader-epoch", entity,
                         f"leader epoch {leader_epoch} is below the previous {old[2]}")
                    )  # fmt: skip
    for offset, count in seen.items():
        out.append((offset, dup_ts[offset], "offsets-dense", "log",
                    f"offset {offset} appears {count} times"))  # fmt: skip
    out.sort(key=lambda v: (v[0], v[2], v[3]))
    return out, n


def main() -> None:  # python -m pipeline.replay_audit DIR
    import sys
    import time

    start = time.perf_counter()
    violations, n = replay_audit(sys.argv[1])
    for v in violations:
        print(*v, sep="\t")
    print(f"{n} records, {len(violations)} violations, {time.perf_counter() - start:.1f} s",
          file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
