"""Operator commands: ``status``, ``brokers``, ``topics``, ``log``,
``create-topic``, ``transfer-leadership``, ``add-voter``, ``remove-voter``.

Rich tables for people, ``--json`` for scripts. A failure is one clear line
with the error name, and exit code 1. ``--url`` and ``--token`` default to
METAQUORUM_URL and METAQUORUM_TOKEN; ``--cacert``, ``--cert`` and ``--key`` to METAQUORUM_CACERT,
METAQUORUM_CERT and METAQUORUM_KEY (https URLs; brokers/tls.py). A TLS
failure is one line saying why (unknown CA, name mismatch, expired, a
refused client certificate).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

from brokers.client import ClientError, MetaquorumClient, RequestRejected, TlsFailure
from brokers.tls import ClientTls, ClientTlsError, load_client_tls

DEFAULT_URL = "http://127.0.0.1:7070"
# A voter this close to the leader catches up within the transfer (the leader
# pauses new batches meanwhile); the same bound as readiness (NodeConfig).
READY_LAG_ENTRIES = 100


def add_tls_flags(p: argparse.ArgumentParser) -> None:
    """--cacert, --cert and --key (brokers/tls.py)."""
    p.add_argument(
        "--cacert",
        default=os.environ.get("METAQUORUM_CACERT"),
        help="PEM CA certificates to trust for https URLs (default: the system's) "
        "[env METAQUORUM_CACERT]",
    )
    p.add_argument(
        "--cert",
        default=os.environ.get("METAQUORUM_CERT"),
        help="this client's PEM certificate, for servers that take client certificates "
        "[env METAQUORUM_CERT]",
    )
    p.add_argument(
        "--key",
        default=os.environ.get("METAQUORUM_KEY"),
        help="the PEM private key of --cert [env METAQUORUM_KEY]",
    )


def tls_from_args(args: argparse.Namespace) -> ClientTls | None:
    """ClientTlsError (a ValueError) names the flag."""
    return load_client_tls(args.cacert, args.cert, args.key)


def add_connection_flags(p: argparse.ArgumentParser, token_help: str = "bearer token") -> None:
    """--url, --token and the TLS flags, as every command that talks to a cluster takes them."""
    p.add_argument(
        "--url",
        default=os.environ.get("METAQUORUM_URL", DEFAULT_URL),
        help="any voter's HTTP URL; several, comma-separated, are tried in turn [env METAQUORUM_URL]",
    )
    p.add_argument(
        "--token",
        default=os.environ.get("METAQUORUM_TOKEN"),
        help=f"{token_help} [env METAQUORUM_TOKEN]",
    )
    add_tls_flags(p)


def add_ops_commands(commands: argparse._SubParsersAction) -> None:
    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = commands.add_parser(name, help=help_text, description=help_text)
        add_connection_flags(p)
        p.add_argument(
            "--token-file",
            default=os.environ.get("METAQUORUM_TOKEN_FILE"),
            help="read the bearer token from this file (e.g. a mounted Secret) "
            "[env METAQUORUM_TOKEN_FILE]",
        )
        p.add_argument("--json", action="store_true", help="print JSON instead of tables")
        return p

    p = command("status", "the quorum: who leads, epochs, offsets, voters and their lag")
    p.add_argument("--linearizable", action="store_true", help=argparse.SUPPRESS)
    p = command("brokers", "registered brokers and their state")
    p.add_argument("--linearizable", action="store_true", help="read through the log first")
    p = command("topics", "topics and their partitions")
    p.add_argument("name", nargs="?", help="one topic")
    p.add_argument("--linearizable", action="store_true", help="read through the log first")
    p = command("log", "the decoded metadata log (like kafka-dump-log --cluster-metadata-decoder)")
    p.add_argument("--from", dest="from_offset", type=int, default=0, help="first offset")
    p.add_argument("--max", dest="max_records", type=int, default=100, help="records per page")
    p.add_argument("--follow", action="store_true", help="keep printing new records")
    p = command("create-topic", "create a topic")
    p.add_argument("name")
    p.add_argument("--partitions", type=int, default=-1)
    p.add_argument("--replication-factor", type=int, default=-1)
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    p = command("transfer-leadership", "move the active controller to another voter")
    p.add_argument("--to", dest="target", type=int, help="target node id (default: most caught up)")
    p.add_argument(
        "--if-leader",
        action="store_true",
        help="only if the voter at --url leads; otherwise do nothing and exit 0 (a preStop hook)",
    )

    p = command(
        "add-voter",
        "add a running node (serve --node-id N --raft-address HOST:PORT) to the voters, "
        "once it has caught up (Kafka's AddRaftVoter); one change at a time",
    )
    p.add_argument("--node-id", dest="node_id", type=int, required=True, help="its node id")
    p.add_argument(
        "--address", required=True, help="its Raft HOST:PORT, spelled as every voter will"
    )
    p.add_argument(
        "--timeout", type=float, default=30.0, help="seconds it may take to connect and catch up"
    )
    p = command(
        "remove-voter",
        "remove a voter (Kafka's RemoveRaftVoter); it stops voting and standing for "
        "election; the active controller hands leadership over first",
    )
    p.add_argument("--node-id", dest="node_id", type=int, required=True, help="its node id")


OPS = {
    "status",
    "brokers",
    "topics",
    "log",
    "create-topic",
    "transfer-leadership",
    "add-voter",
    "remove-voter",
}


def run_op(args: argparse.Namespace) -> int:
    console = Console()
    try:
        if args.token_file:
            args.token = _read_token(args.token_file)
        tls = tls_from_args(args)
        if args.command == "transfer-leadership" and args.if_leader:
            return asyncio.run(transfer_if_leader(args.url, args.token, args.target, tls))
        return asyncio.run(_run(args, console, tls))
    except ClientTlsError as e:
        return _fail(str(e))
    except ValueError as e:
        return _fail(f"INVALID_REQUEST: {e}")
    except RequestRejected as e:
        return _fail(
            f"{e.body.get('errorName', 'ERROR')}: {e.body.get('errorMessage')} (HTTP {e.status})"
        )
    except TlsFailure as e:
        return _fail(str(e))
    except ClientError as e:
        return _fail(f"UNAVAILABLE: {e}")
    except KeyboardInterrupt:
        return 130


def _read_token(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--token-file {path}: cannot read it ({e})") from None
    if not token or len(token.split()) != 1:
        raise ValueError(f"--token-file {path}: expected one token, alone in the file")
    return token


async def transfer_if_leader(
    url: str, token: str | None, target: int | None, tls: ClientTls | None = None
) -> int:
    """The preStop hook: if the voter at ``url`` (this pod) leads, hand
    leadership over; if it does not, there is nothing to do.

    Never follows a redirect: a follower's hook must not move the leadership
    of another voter (it could even pick the voter that is about to stop)."""
    if "," in url:
        raise ValueError("--if-leader takes one --url: the voter that is about to stop")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    base = url.rstrip("/")
    import httpx  # noqa: PLC0415 - only this path talks HTTP without the client

    from brokers.tls import explain  # noqa: PLC0415

    verify = tls.context if tls is not None else True
    async with httpx.AsyncClient(
        timeout=15.0, headers=headers, follow_redirects=False, verify=verify
    ) as http:
        try:
            r = await http.get(base + "/v1/quorum/status")
            status = r.json()
        except (httpx.HTTPError, ValueError) as e:
            tls_problem = explain(e, base)
            if tls_problem is not None:
                return _fail(tls_problem)
            return _fail(f"UNAVAILABLE: cannot read {base}/v1/quorum/status ({e!r})")
        if r.status_code != 200:
            return _fail(
                f"{status.get('errorName', 'ERROR')}: {status.get('errorMessage')} "
                f"(HTTP {r.status_code} from {base}/v1/quorum/status; check --token-file)"
            )
        me, leader = status.get("nodeId"), status.get("leaderId")
        if me is None or leader != me:
            print(f"node {me} is not the leader (leader: {leader}): nothing to transfer")
            return 0
        if len([v for v in status.get("voters", []) if v.get("voter", True)]) < 2:
            print(f"node {me} is the only voter: nothing to transfer")
            return 0
        if target is None:
            target = rollout_target(me, status.get("voters", []))
        body = {} if target is None else {"targetNodeId": target}
        try:
            r = await http.post(base + "/v1/quorum/transfer-leadership", json=body)
        except httpx.HTTPError as e:
            return _fail(f"UNAVAILABLE: {base}: {e!r} (the node hands over on SIGTERM too)")
        answer = (
            r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        )
        if r.status_code == 307:
            print(f"node {me} stopped leading before the transfer: nothing to transfer")
            return 0
        if r.status_code != 200 or answer.get("errorCode", 0) != 0:
            return _fail(
                f"{answer.get('errorName', 'ERROR')}: {answer.get('errorMessage', r.text)} "
                f"(HTTP {r.status_code}; the node hands over on SIGTERM too)"
            )
        print(f"leadership moved from node {me} to node {answer.get('leaderId')}")
        return 0


def rollout_target(me: int, voters: list[dict]) -> int | None:
    """The voter a StatefulSet rolling update restarts last, among those
    connected and caught up: it goes from the highest ordinal down, so a
    higher ordinal than ours is already updated (take the highest), else the
    lowest is updated last. None: let the leader pick the most caught up."""
    ready = [
        v["nodeId"]
        for v in voters
        if v.get("nodeId") != me
        and v.get("voter", True)  # a joiner streamed to is listed, but cannot lead
        and v.get("connected")
        and v.get("lagRecords") is not None
        and v["lagRecords"] <= READY_LAG_ENTRIES
    ]
    if not ready:
        return None
    higher = [n for n in ready if n > me]
    return max(higher) if higher else min(ready)


def _fail(line: str) -> int:
    print(f"metaquorum: {line}", file=sys.stderr)
    return 1


def _dump(obj: Any) -> None:
    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")


async def _run(args: argparse.Namespace, console: Console, tls: ClientTls | None = None) -> int:
    seeds = [u.strip() for u in args.url.split(",") if u.strip()]
    cmd = args.command
    # An add waits for the node to catch up: the HTTP call may take that long.
    timeout_s = args.timeout + 15 if cmd == "add-voter" else 10.0
    async with MetaquorumClient(seeds, token=args.token, timeout_s=timeout_s, tls=tls) as client:
        if cmd == "status":
            body = (await client.status()).body
            if args.json:
                _dump(body)
            else:
                _print_status(console, body)
            return 0
        if cmd == "brokers":
            answer = await client.brokers(linearizable=args.linearizable)
            items = _items(answer.body, "brokers")
            if args.json:
                _dump(items)
            else:
                _print_brokers(console, items, answer.metadata_offset)
            return 0
        if cmd == "topics":
            if args.name:
                answer = await client.topic(args.name, linearizable=args.linearizable)
                if answer.body.get("errorCode", 0) != 0 and "name" not in answer.body:
                    return _fail(f"{answer.error_name}: {answer.error_message}")
                items = [answer.body]
            else:
                answer = await client.topics(linearizable=args.linearizable)
                items = _items(answer.body, "topics")
            if args.json:
                _dump(items if not args.name else items[0])
            else:
                _print_topics(console, items, answer.metadata_offset)
            return 0
        if cmd == "log":
            return await _log(client, args, console)
        if cmd == "create-topic":
            configs = {}
            for item in args.config:
                name, sep, value = item.partition("=")
                if not sep:
                    return _fail(f"INVALID_REQUEST: --config {item!r} is not NAME=VALUE")
                configs[name] = value
            answer = await client.create_topic(
                args.name, args.partitions, args.replication_factor, configs or None
            )
            topic = (answer.body.get("topics") or [{}])[0]
            if args.json:
                _dump(topic)
            if topic.get("errorCode", answer.error_code) != 0:
                return _fail(f"{topic.get('errorName')}: {topic.get('errorMessage')}")
            if not args.json:
                console.print(
                    f"created topic [bold]{args.name}[/] ({topic.get('topicId')}): "
                    f"{topic.get('numPartitions')} partitions x {topic.get('replicationFactor')} replicas"
                )
            return 0
        if cmd == "transfer-leadership":
            answer = await client.transfer_leadership(args.target)
            if args.json:
                _dump(answer.body)
            if not answer.ok:
                return _fail(f"{answer.error_name}: {answer.error_message}")
            if not args.json:
                console.print(f"leadership moved: {answer.body}")
            return 0
        if cmd in ("add-voter", "remove-voter"):
            if cmd == "add-voter":
                if not 0 < args.timeout <= 600:
                    raise ValueError(f"--timeout {args.timeout} must be within (0, 600] seconds")
                answer = await client.add_voter(
                    args.node_id, args.address, int(args.timeout * 1000)
                )
            else:
                # The active controller is not removed: it hands over first.
                leader = (await client.status()).body.get("leaderId")
                if leader == args.node_id:
                    moved = await client.transfer_leadership(None)
                    if not moved.ok:
                        return _fail(f"{moved.error_name}: {moved.error_message}")
                    if not args.json:
                        console.print(
                            f"node {leader} led: leadership moved to node "
                            f"{moved.body.get('leaderId')} first"
                        )
                    client.leader = None  # ask again who leads
                answer = await client.remove_voter(args.node_id)
            if args.json:
                _dump(answer.body)
            if not answer.ok:
                return _fail(f"{answer.error_name}: {answer.error_message}")
            if not args.json:
                voters = ", ".join(
                    f"{v['nodeId']}@{v['raftAddress']} ({v['directoryId']})"
                    for v in answer.body.get("voters", [])
                )
                done = (
                    "" if answer.body.get("changed", True) else " (it already was: nothing to do)"
                )
                console.print(f"voters now: {voters}{done}")
            return 0
    raise AssertionError(cmd)


def _items(body: dict, key: str) -> list:
    if key in body:
        return body[key]
    return body.get("items", [])


async def _log(client: MetaquorumClient, args, console: Console) -> int:
    offset = args.from_offset
    while True:
        answer = await client.log(offset, args.max_records, wait_ms=5000 if args.follow else 0)
        if "oldestOffset" in answer.body and not answer.body.get("records"):
            return _fail(
                f"OFFSET_OUT_OF_RANGE: offset {offset} is no longer retained; the oldest is "
                f"{answer.body['oldestOffset']} (use --from {answer.body['oldestOffset']})"
            )
        for record in answer.body.get("records", []):
            if args.json:
                sys.stdout.write(orjson.dumps(record).decode() + "\n")
            else:
                console.print(
                    f"[dim]{record['offset']:>8}[/] [bold]{record['type']}[/] v{record['version']} "
                    f"epoch={record.get('controllerEpoch')} batch={record.get('batchOffset')} ",
                    end="",
                )
                console.print(orjson.dumps(record["data"]).decode(), markup=False, soft_wrap=True)
        sys.stdout.flush()
        offset = answer.body.get("nextOffset", offset)
        if not args.follow and not answer.body.get("records"):
            return 0
        if not args.follow and offset >= answer.body.get("highWatermark", offset):
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


def _print_status(console: Console, s: dict) -> None:
    console.print(
        f"cluster [bold]{s.get('clusterId')}[/]  node {s.get('nodeId')}  "
        f"leader [bold]{s.get('leaderId')}[/] ({s.get('leaderUrl')})  "
        f"controller epoch {s.get('controllerEpoch')}  raft term {s.get('raftTerm')}  "
        f"high watermark {s.get('highWatermark')}  applied {s.get('lastAppliedOffset')}  "
        f"metadata.version {s.get('metadataVersion')}  auth {s.get('auth')}"
        f"  role {s.get('role')}{' (observer)' if s.get('observer') else ''}"
        f"  observers connected {s.get('observersConnected', 0)}"
    )
    elections = s.get("elections") or {}
    if elections.get("preVote"):
        console.print(
            f"elections (pre-vote on): rounds {elections.get('preVoteRounds')}, won "
            f"{elections.get('preVoteRoundsWon')}; pre-votes granted "
            f"{elections.get('preVotesGranted')}, refused {elections.get('preVotesRefused')}; "
            f"votes dropped in a leader's lease {elections.get('votesRefusedInLease')}; "
            f"leader connections lost {elections.get('leaderConnectionsLost')}"
        )
    elif elections:
        console.print("elections: plain Raft (serve --no-pre-vote)")
    if "leaderChanges" in elections:
        console.print(_leadership_line(elections))
    table = Table(title="voters and observers")
    for col in (
        "node",
        "voter",
        "role",
        "directory",
        "url",
        "connected",
        "lag (records)",
        "last caught up (ms ago)",
    ):
        table.add_column(col)
    for v in s.get("voters", []):
        directory = v.get("directoryId")
        connected_as = v.get("connectedDirectoryId")
        if connected_as and connected_as != directory:
            directory = f"{directory} (connected: {connected_as})"
        table.add_row(
            str(v.get("nodeId")),
            "yes" if v.get("voter", True) else "no",
            str(v.get("role")),
            str(directory),
            str(v.get("url")),
            str(v.get("connected")),
            str(v.get("lagRecords")),
            str(v.get("lastCaughtUpMs")),
        )
    console.print(table)


def _print_brokers(console: Console, items: list, offset: int | None) -> None:
    table = Table(title=f"brokers at offset {offset}")
    for col in ("id", "epoch", "state", "rack", "listeners", "registered at"):
        table.add_column(col)
    for b in items:
        state = (
            "fenced"
            if b.get("fenced")
            else "controlled shutdown"
            if b.get("inControlledShutdown")
            else "active"
        )
        if b.get("fenced") and b.get("inControlledShutdown"):
            state = "fenced (shut down)"
        listeners = ", ".join(
            f"{e['name']}://{e['host']}:{e['port']}" for e in b.get("listeners", [])
        )
        table.add_row(
            str(b.get("brokerId")),
            str(b.get("brokerEpoch")),
            state,
            str(b.get("rack") or ""),
            listeners,
            str(b.get("registrationOffset")),
        )
    console.print(table)


def _print_topics(console: Console, items: list, offset: int | None) -> None:
    table = Table(title=f"topics at offset {offset}")
    for col in (
        "topic",
        "partition",
        "leader",
        "replicas",
        "isr",
        "leader epoch",
        "partition epoch",
    ):
        table.add_column(col)
    for t in items:
        for p in t.get("partitions", []):
            table.add_row(
                t.get("name"),
                str(p.get("partitionIndex")),
                str(p.get("leader")),
                str(p.get("replicas")),
                str(p.get("isr")),
                str(p.get("leaderEpoch")),
                str(p.get("partitionEpoch")),
            )
    console.print(table)
