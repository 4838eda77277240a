"""How the operator commands show what they read and wrote: tables for people
(plain text when stdout is no terminal or NO_COLOR is set: output.py), and
``--json`` for scripts, what the command read, on stdout. A write's refusal is
one line on stderr (ops_command.fail), whichever of the two was asked for.

The tables are Kafka's tools' own columns (kafka-metadata-quorum describe,
kafka-topics --describe, kafka-configs, kafka-acls), so a runbook written for
Kafka reads here too.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
from rich.console import Console

from metadata_records.client_quotas import entity_text

from .ops_command import fail
from .output import print_table


def dump(obj: Any) -> None:
    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")


def report(answer, as_json: bool, console: Console, done: Callable[[], str]) -> int:
    """A write command's end: the answer as JSON (refused or not), the refusal
    on stderr, or ``done()`` for a person."""
    if as_json:
        dump(answer.body)
    if not answer.ok:
        return fail(f"{answer.error_name}: {answer.error_message}")
    if not as_json:
        console.print(done())
    return 0


def report_entry(
    answer, entries: str, as_json: bool, console: Console, done: Callable[[], str]
) -> int:
    """``report`` of a write of one entry (alter-configs, alter-client-quotas):
    the entry under ``entries`` decides, or the request's own error when it
    was refused whole."""
    result = (answer.body.get(entries) or [answer.body])[0]
    if as_json:
        dump(result)
    if result.get("errorCode", answer.error_code) != 0:
        return fail(f"{result.get('errorName')}: {result.get('errorMessage')}")
    if not as_json:
        console.print(done())
    return 0


def _leadership_line(elections: dict) -> str:
    """Leader changes with their causes, and the heartbeat gaps (issue 25)."""

    def causes(counts: dict) -> str:
        named = [f"{cause.replace('_', ' ')} {n}" for cause, n in counts.items() if n]
        return ", ".join(named) or "none"

    gaps = elections.get("heartbeatGaps") or {}
    heard = (
        f"p50 <= {gaps.get('p50Ms')} ms, p99 <= {gaps.get('p99Ms')} ms, max {gaps.get('maxMs')} ms"
        if gaps.get("count")
        else "none measured"
    )
    return (
        f"leader changes {elections.get('leaderChanges')}; elections started: "
        f"{causes(elections.get('electionsStarted') or {})}; leaderships lost: "
        f"{causes(elections.get('leadershipLost') or {})}; leader heartbeat gaps: {heard}"
    )


def _leadership_won_line(won: dict, now: int, human: bool) -> str:
    """One leadership the node won: from whom, why, and the write outage
    measured from the old leader's last AppendEntries (issue 42)."""

    def ms(key: str) -> str:
        value = won.get(key)
        return "-" if value is None else f"{value:g} ms"

    previous = won.get("previousLeaderId")
    since = (
        "since it stood (no leader heard):"
        if previous is None
        else f"after node {previous} last heard: stood {ms('silenceMs')},"
    )
    return (
        f"  term {won.get('term')} won {_when(won.get('atMs'), now, human)}, cause "
        f"{str(won.get('cause') or 'unknown').replace('_', ' ')}; {since} elected "
        f"{ms('electedMs')}, active {ms('activeMs')}, first write {ms('firstWriteMs')}"
    )


def print_status(console: Console, s: dict, leader: dict | None, human: bool) -> None:
    """kafka-metadata-quorum describe --status, then --replication, from the
    leader's answer (``leader``; the node's own when that is unknown), then
    what the node at --url says of itself."""
    view = leader if leader is not None else s
    replicas = view.get("voters", [])
    voters = [v for v in replicas if v.get("voter", True)]
    observers = [v for v in replicas if not v.get("voter", True)]
    lag, lag_ms = max_follower_lag(view)
    status = [
        ("ClusterId", s.get("clusterId")),
        ("LeaderId", s.get("leaderId") if s.get("leaderId") is not None else -1),
        ("LeaderEpoch", view.get("raftTerm")),
        ("HighWatermark", view.get("highWatermark")),
        ("MaxFollowerLag", _or_dash(lag)),
        ("MaxFollowerLagTimeMs", _or_dash(lag_ms)),
        ("CurrentVoters", json.dumps([_member(v, endpoints=True) for v in voters])),
        ("CurrentObservers", json.dumps([_member(v) for v in observers])),
    ]
    for name, value in status:
        console.print(f"{name + ':':<24}{value}", markup=False, highlight=False)
    console.print()
    now = int(time.time() * 1000)
    rows = [
        [
            str(v.get("nodeId")),
            str(v.get("directoryId") or "-"),
            _or_dash(v.get("logEndOffset")),
            _or_dash(v.get("lagRecords")),
            _when(v.get("lastFetchMs"), now, human),
            _when(v.get("lastCaughtUpMs"), now, human),
            replica_status(v, s.get("leaderId")),
            "yes" if v.get("connected") else "no",
            str(v.get("role")),
            str(v.get("url") or "-"),
        ]
        for v in replicas
    ]
    headers = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp"]
    headers += ["LastCaughtUpTimestamp", "Status", "Connected", "Role", "Url"]
    title = (
        None if leader is None or leader is s else f"as the leader (node {s['leaderId']}) sees it"
    )
    print_table(console, title, headers, rows)
    console.print()
    console.print(
        f"node {s.get('nodeId')}: role {s.get('role')}{' (observer)' if s.get('observer') else ''}"
        f", leader {s.get('leaderId')} ({s.get('leaderUrl')}), controller epoch "
        f"{s.get('controllerEpoch')}, raft term {s.get('raftTerm')}, high watermark "
        f"{s.get('highWatermark')}, applied {s.get('lastAppliedOffset')}, metadata.version "
        f"{s.get('metadataVersion')}, auth {s.get('auth')}, ready {s.get('ready')}, "
        f"observers connected {s.get('observersConnected', 0)}, features "
        + (", ".join(f"{k}={v}" for k, v in (s.get("finalizedFeatures") or {}).items()) or "none"),
        markup=False,
        highlight=False,
    )
    if s.get("role") == "removed":
        console.print(removed_line(s.get("nodeId")), markup=False, highlight=False)
    orderer = s.get("ordererProcess")
    if orderer:
        console.print(
            f"orderer process: pid {orderer['pid']} {'up' if orderer['alive'] else 'DOWN'} "
            f"{orderer['uptimeS']:.0f} s, restarts {orderer['restarts']}",
            markup=False,
            highlight=False,
        )
    workers = s.get("httpWorkers") or []
    if workers:
        console.print(
            f"http workers: {len(workers)}: "
            + "; ".join(
                f"{w['index']} pid {w['pid']} {'up' if w['alive'] else 'DOWN'} "
                f"{w['uptimeS']:.0f} s, restarts {w['restarts']}, requests {w['requests']}"
                for w in workers
            ),
            markup=False,
            highlight=False,
        )
    elections = s.get("elections") or {}
    if elections.get("preVote"):
        console.print(
            f"elections (pre-vote on): rounds {elections.get('preVoteRounds')}, won "
            f"{elections.get('preVoteRoundsWon')}; pre-votes granted "
            f"{elections.get('preVotesGranted')}, refused {elections.get('preVotesRefused')}; "
            f"votes dropped in a leader's lease {elections.get('votesRefusedInLease')}; "
            f"leader connections lost {elections.get('leaderConnectionsLost')}",
            markup=False,
        )
        beacons = elections.get("beacons")
        if beacons:
            console.print(
                f"liveness beacons: sent {beacons['sent']}, withheld {beacons['withheld']} "
                f"(Raft thread stuck), received {beacons['received']}, dropped "
                f"{beacons['dropped']}",
                markup=False,
            )
    elif elections:
        console.print("elections: plain Raft (serve --no-pre-vote)")
    if "leaderChanges" in elections:
        console.print(_leadership_line(elections), markup=False)
    # The leader's own record says how the last change went: shown too when
    # the node at --url is a follower.
    for node in (s, leader) if leader is not None and leader is not s else (s,):
        won = (node.get("elections") or {}).get("leadershipsWon") or []
        if won:
            whose = " (the leader)" if node is not s else ""
            console.print(
                f"leaderships won by node {node.get('nodeId')}{whose} (oldest first):", markup=False
            )
            for one in won:
                console.print(_leadership_won_line(one, now, human), markup=False, highlight=False)


def removed_line(node_id) -> str:
    """What an operator does with a node the voter set no longer names (its
    log line and /readyz say the same, with its voter set)."""
    return (
        f"node {node_id} was removed from the voter set: it never votes or stands for "
        "election and is never ready; stop it and clear its data dir, or add it again "
        f"with metaquorum add-voter --node-id {node_id} --address HOST:PORT"
    )


def max_follower_lag(status: dict) -> tuple[int | None, int | None]:
    """Kafka's MaxFollowerLag and MaxFollowerLagTimeMs from a leader's status:
    the largest voter lag in records, and how long before the leader's own
    last caught-up time that voter was last caught up (0 when every voter is
    caught up). None where the status does not know (not the leader's)."""
    voters = [v for v in status.get("voters", []) if v.get("voter", True)]
    lags = [v.get("lagRecords") for v in voters]
    if not voters or any(lag is None for lag in lags):
        return None, None
    laggard = max(voters, key=lambda v: v["lagRecords"])
    if laggard["lagRecords"] == 0:
        return 0, 0
    me = next((v for v in voters if v.get("nodeId") == status.get("nodeId")), None)
    mine = me.get("lastCaughtUpMs") if me else None
    theirs = laggard.get("lastCaughtUpMs")
    if mine is None or theirs is None:
        return laggard["lagRecords"], None
    return laggard["lagRecords"], max(0, mine - theirs)


def replica_status(v: dict, leader_id: int | None) -> str:
    """The Status column of kafka-metadata-quorum describe --replication."""
    if not v.get("voter", True):
        return "Observer"
    return "Leader" if v.get("nodeId") == leader_id else "Follower"


def _member(v: dict, endpoints: bool = False) -> dict:
    member: dict[str, Any] = {"id": v.get("nodeId"), "directoryId": v.get("directoryId")}
    if endpoints:
        member["endpoints"] = [e for e in (v.get("url"), f"raft://{v.get('raftAddress')}") if e]
    return member


def _or_dash(value) -> str:
    return "-" if value is None else str(value)


def _when(ms: int | None, now: int, human: bool) -> str:
    if ms is None:
        return "-"
    return f"{max(0, now - ms)} ms ago" if human else str(ms)


def print_brokers(console: Console, items: list, offset: int | None) -> None:
    rows = []
    for b in items:
        state = (
            "fenced"
            if b.get("fenced")
            else "controlled-shutdown"
            if b.get("inControlledShutdown")
            else "active"
        )
        if b.get("fenced") and b.get("inControlledShutdown"):
            state = "fenced-shut-down"
        listeners = ",".join(
            f"{e['name']}://{e['host']}:{e['port']}" for e in b.get("listeners", [])
        )
        rows.append(
            [
                str(b.get("brokerId")),
                str(b.get("brokerEpoch")),
                state,
                str(b.get("rack") or "-"),
                listeners or "-",
                str(b.get("registrationOffset")),
            ]
        )
    headers = ["BrokerId", "BrokerEpoch", "State", "Rack", "Listeners", "RegistrationOffset"]
    print_table(console, f"brokers at offset {offset}", headers, rows)


def print_topics(console: Console, items: list, offset: int | None) -> None:
    # KIP-966's columns only where a partition has an ELR or a last known one.
    elr = any(
        p.get("eligibleLeaderReplicas") or p.get("lastKnownElr")
        for t in items
        for p in t.get("partitions", [])
    )
    rows = [
        [
            str(t.get("name")),
            str(p.get("partitionIndex")),
            _or_dash(p.get("leader")),
            _ids(p.get("replicas")),
            _ids(p.get("isr")),
            str(p.get("leaderEpoch")),
            str(p.get("partitionEpoch")),
        ]
        + ([_ids(p.get("eligibleLeaderReplicas")), _ids(p.get("lastKnownElr"))] if elr else [])
        for t in items
        for p in t.get("partitions", [])
    ]
    headers = ["Topic", "Partition", "Leader", "Replicas", "Isr", "LeaderEpoch", "PartitionEpoch"]
    if elr:
        headers += ["Elr", "LastKnownElr"]
    print_table(console, f"topics at offset {offset}", headers, rows)


def print_configs(
    console: Console, what: str, synonyms: bool, configs: list, offset: int | None
) -> None:
    """The configs of ``what`` (a topic, a broker, the cluster-wide default)."""
    headers = ["Name", "Value", "Source"] + (["Synonyms"] if synonyms else [])
    rows = [
        [str(c.get("name")), _or_dash(c.get("value")), str(c.get("configSourceName"))]
        + (
            [
                " ".join(
                    f"{s.get('sourceName')}:{s.get('name')}={s.get('value')}"
                    for s in c.get("synonyms", [])
                )
            ]
            if synonyms
            else []
        )
        for c in configs
    ]
    print_table(console, f"configs of {what} at offset {offset}", headers, rows)


def print_acls(console: Console, resources: list, offset: int | None) -> None:
    headers = ["Resource", "Pattern", "Principal", "Host", "Operation", "Permission"]
    rows = [
        [f"{r.get('resourceType')}:{r.get('resourceName')}", str(r.get("patternType")),
         str(a.get("principal")), str(a.get("host")), str(a.get("operation")),
         str(a.get("permissionType"))]
        for r in resources
        for a in r.get("acls", [])
    ]  # fmt: skip
    print_table(console, f"ACLs at offset {offset}", headers, rows)


def _ids(ids: list | None) -> str:
    """Broker ids as kafka-topics --describe prints them: 1,2,3 (one field for awk)."""
    return ",".join(str(i) for i in ids) if ids else "-"


def print_client_quotas(console: Console, entries: list, offset: int | None) -> None:
    rows = [
        [quota_entity_text(e.get("entity", [])), str(v.get("key")), f"{v.get('value'):g}"]
        for e in entries
        for v in e.get("values", [])
    ]
    print_table(console, f"client quotas at offset {offset}", ["Entity", "Key", "Value"], rows)


def quota_entity_text(components: list) -> str:
    """An answer's entity components, as metadata_records.client_quotas writes them."""
    return entity_text((c.get("entityType"), c.get("entityName")) for c in components)


def print_log_record(console: Console, record: dict, as_json: bool) -> None:
    """One record of the metadata log: an NDJSON line, or a line for people
    (who asked for it at its end: ``by principal API``)."""
    if as_json:
        sys.stdout.write(orjson.dumps(record).decode() + "\n")
    else:
        console.print(
            f"[dim]{record['offset']:>8}[/] [bold]{record['type']}[/] v{record['version']} "
            f"epoch={record.get('controllerEpoch')} batch={record.get('batchOffset')} ",
            end="",
        )
        who = record.get("who")
        by = f" by {who['principal']} {who['api']}" if who else ""
        console.print(orjson.dumps(record["data"]).decode() + by, markup=False, soft_wrap=True)


def log_time(timestamp_ms: int) -> str:
    """A batch's timestamp as an operator reads it: UTC, to the millisecond."""
    stamp = datetime.fromtimestamp(timestamp_ms / 1000, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{timestamp_ms % 1000:03d}Z"


class WhoLines:
    """``metaquorum log --who``: one line per run of consecutive records one
    Who covers in one batch (time, offsets, principal, address, API, request
    id, rule), or one NDJSON object per run with ``--json``. Records of
    batches from before who was recorded show as ``(unknown)``."""

    def __init__(self, console: Console, as_json: bool) -> None:
        self.console = console
        self.as_json = as_json
        self.run: dict | None = None

    def add(self, record: dict) -> None:
        who = record.get("who") or {}
        key = (record.get("batchOffset"), tuple(sorted(who.items())))
        run = self.run
        if run is not None and run["key"] == key and run["lastOffset"] + 1 == record["offset"]:
            run["lastOffset"] = record["offset"]
            run["records"] += 1
            return
        self.flush()
        self.run = {
            "key": key,
            "timestampMs": record["timestampMs"],
            "batchOffset": record.get("batchOffset"),
            "firstOffset": record["offset"],
            "lastOffset": record["offset"],
            "records": 1,
            "who": who,
        }

    def flush(self) -> None:
        run, self.run = self.run, None
        if run is None:
            return
        who = run["who"]
        if self.as_json:
            obj = {
                "time": log_time(run["timestampMs"]),
                **{k: run[k] for k in ("timestampMs", "batchOffset", "firstOffset", "lastOffset")},
                "records": run["records"],
                **who,
            }
            sys.stdout.write(orjson.dumps(obj).decode() + "\n")
            return
        first, last = run["firstOffset"], run["lastOffset"]
        offsets = f"{first}" if first == last else f"{first}-{last}"
        parts = [
            log_time(run["timestampMs"]),
            f"{offsets:>15}",
            who.get("principal", "(unknown)"),
            who.get("address") or "-",
            who.get("api", "-"),
        ]
        if who.get("requestId"):
            parts.append(f"request={who['requestId']}")
        if who.get("rule"):
            parts.append(f"rule={who['rule']}")
        self.console.print("  ".join(parts), markup=False, soft_wrap=True)
