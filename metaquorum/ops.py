"""Operator commands: ``status``, ``brokers``, ``topics``, ``log``,
``configs``, ``alter-configs``, ``client-quotas``, ``alter-client-quotas``,
``acls``, ``create-acl``, ``delete-acls``, ``update-features``, ``create-topic``,
``unregister-broker``,
``transfer-leadership``, ``add-voter``,
``remove-voter``.

Tables for people (plain text when stdout is no terminal or NO_COLOR is set:
output.py), ``--json`` for scripts: what the command read, on stdout. A
failure is one clear line on stderr with the error name; the exit code says
which kind (``EXIT_*`` below, docs/cli.md). ``--url`` and ``--token`` default to
METAQUORUM_URL and METAQUORUM_TOKEN; ``--cacert``, ``--cert`` and ``--key`` to METAQUORUM_CACERT,
METAQUORUM_CERT and METAQUORUM_KEY (https URLs; brokers/tls.py). A TLS
failure is one line saying why (unknown CA, name mismatch, expired, a
refused client certificate).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
from rich.console import Console

from brokers.client import (
    ClientError,
    MetaquorumClient,
    OutcomeUnknown,
    RequestRejected,
    TlsFailure,
)
from brokers.tls import ClientTls, ClientTlsError, load_client_tls
from metadata_records.client_quotas import entity_text

from .output import make_console, print_table

DEFAULT_URL = "http://127.0.0.1:7070"
# A voter this close to the leader catches up within the transfer (the leader
# pauses new batches meanwhile); the same bound as readiness (NodeConfig).
READY_LAG_ENTRIES = 100

# Exit codes of the operator commands (docs/cli.md); 2 is also argparse's own.
EXIT_REFUSED = 1  # the cluster answered with an error (named on stderr)
EXIT_BAD_INPUT = 2  # a bad flag or file: fix the command line
EXIT_NO_ANSWER = 2  # no voter answered (down, unreachable, no leader, TLS refused)
EXIT_UNKNOWN_OUTCOME = 3  # a write was sent but its answer lost: read to see if it applied
EXIT_INTERRUPTED = 130
READ_EXITS = (
    "Exit codes: 0 done; 1 the cluster answered with an error (named on stderr); "
    "2 a bad flag or file, or no voter answered (down, unreachable, no leader, TLS refused)."
)
WRITE_EXITS = (
    READ_EXITS.removesuffix(".") + "; 3 the write was sent but its answer was lost: it may "
    "have applied (read before retrying)."
)


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
    def command(name: str, help_text: str, exits: str = READ_EXITS) -> argparse.ArgumentParser:
        p = commands.add_parser(name, help=help_text, description=f"{help_text}. {exits}")
        add_connection_flags(p)
        p.add_argument(
            "--token-file",
            default=os.environ.get("METAQUORUM_TOKEN_FILE"),
            help="read the bearer token from this file (e.g. a mounted Secret) "
            "[env METAQUORUM_TOKEN_FILE]",
        )
        p.add_argument(
            "--json", action="store_true", help="print what was read as JSON (docs/cli.md)"
        )
        return p

    p = command(
        "status",
        "the quorum as kafka-metadata-quorum describe --status --replication shows it: "
        "who leads, epochs, offsets, voters, observers and their lag, as the leader sees them",
    )
    p.add_argument("--linearizable", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--human-readable",
        action="store_true",
        help="timestamps as 'N ms ago' instead of epoch milliseconds",
    )
    p = command("brokers", "registered brokers and their state")
    p.add_argument("--linearizable", action="store_true", help="read through the log first")
    p = command("topics", "topics and their partitions")
    p.add_argument("name", nargs="?", help="one topic")
    p.add_argument("--linearizable", action="store_true", help="read through the log first")
    p = command("log", "the decoded metadata log (like kafka-dump-log --cluster-metadata-decoder)")
    p.add_argument("--from", dest="from_offset", type=int, default=0, help="first offset")
    p.add_argument("--max", dest="max_records", type=int, default=100, help="records per page")
    p.add_argument("--follow", action="store_true", help="keep printing new records")
    p = command("create-topic", "create a topic", WRITE_EXITS)
    p.add_argument("name")
    p.add_argument("--partitions", type=int, default=-1)
    p.add_argument("--replication-factor", type=int, default=-1)
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    p = command(
        "configs",
        "the configs of a topic, a broker or the cluster-wide default, resolved as Kafka "
        "does (like kafka-configs --describe): what is set, or every config with --all",
    )
    _config_resource_flags(p)
    p.add_argument("--all", action="store_true", help="every config, defaults included")
    p.add_argument("--synonyms", action="store_true", help="every level that sets each config")
    p.add_argument("--linearizable", action="store_true", help="read through the log first")
    p = command(
        "alter-configs",
        "set, delete, append to or subtract from the configs of a topic, a broker or "
        "the cluster-wide default (Kafka's IncrementalAlterConfigs); all or nothing",
        WRITE_EXITS,
    )
    _config_resource_flags(p)
    for flag, meta, text in (
        ("--set", "NAME=VALUE", "set a config"),
        ("--delete", "NAME", "delete a config (back to the next level's value)"),
        ("--append", "NAME=VALUE", "add elements to a LIST config (comma-separated)"),
        ("--subtract", "NAME=VALUE", "remove elements from a LIST config"),
    ):
        p.add_argument(flag, action="append", default=[], metavar=meta, help=text)
    p.add_argument("--validate-only", action="store_true", help="check everything, write nothing")
    _add_acl_commands(command)
    p = command(
        "client-quotas",
        "client quotas of users, client ids and ips (like kafka-configs --describe "
        "--entity-type users/clients/ips): every entity the filter matches",
    )
    _quota_entity_flags(p, describe=True)
    p.add_argument("--strict", action="store_true", help="only entities with no other component")
    p.add_argument("--linearizable", action="store_true", help="read through the log first")
    p = command(
        "alter-client-quotas",
        "set or delete the client quotas of a user, a client id, both, or an ip (like "
        "kafka-configs --alter --add-config producer_byte_rate=1024); all or nothing",
        WRITE_EXITS,
    )
    _quota_entity_flags(p, describe=False)
    p.add_argument(
        "--add", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]", help="set quotas"
    )
    p.add_argument(
        "--delete", action="append", default=[], metavar="KEY[,KEY]", help="remove quotas"
    )
    p.add_argument("--validate-only", action="store_true", help="check everything, write nothing")
    p = command(
        "update-features",
        "finalize a feature at a level (Kafka's UpdateFeatures, as kafka-features "
        "upgrade/downgrade): metadata.version, or eligible.leader.replicas.version "
        "(KIP-966's ELR: 1 on, 0 off)",
        WRITE_EXITS,
    )
    p.add_argument("feature", metavar="NAME=LEVEL", help="e.g. eligible.leader.replicas.version=1")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--downgrade", action="store_true", help="a safe downgrade to a lower level")
    kind.add_argument(
        "--unsafe-downgrade", action="store_true", help="an unsafe downgrade (may lose metadata)"
    )
    p.add_argument("--validate-only", action="store_true", help="check everything, write nothing")
    p = command(
        "unregister-broker",
        "decommission a broker id for good (Kafka's UnregisterBroker): its registration "
        "is removed and it leaves every ISR; stop the broker first",
        WRITE_EXITS,
    )
    p.add_argument("broker_id", type=int, metavar="ID", help="the broker id")
    p = command(
        "transfer-leadership",
        "move the active controller to another voter",
        WRITE_EXITS + " With --if-leader, 0 also when there is nothing to do.",
    )
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
        WRITE_EXITS,
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
        WRITE_EXITS,
    )
    p.add_argument("--node-id", dest="node_id", type=int, required=True, help="its node id")


def _config_resource_flags(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", metavar="NAME", help="a topic")
    which.add_argument("--broker", type=int, metavar="ID", help="a broker id")
    which.add_argument(
        "--cluster", action="store_true", help="the default for every broker (and topic)"
    )


_QUOTA_TYPES = (("user", "user"), ("client-id", "client_id"), ("ip", "ip"))


def _quota_entity_flags(p: argparse.ArgumentParser, describe: bool) -> None:
    for entity_type, attr in _QUOTA_TYPES:
        flag = "--" + entity_type
        which = p.add_mutually_exclusive_group()
        which.add_argument(flag, dest=attr, metavar="NAME", help=f"the {entity_type} NAME")
        which.add_argument(
            flag + "-default",
            dest=attr + "_default",
            action="store_true",
            help=f"the default {entity_type} (every {entity_type} without its own quota)",
        )
        if describe:
            which.add_argument(
                "--any-" + entity_type,
                dest="any_" + attr,
                action="store_true",
                help=f"any {entity_type}, the default too",
            )


def _quota_entity(args: argparse.Namespace) -> dict[str, str | None]:
    """entity type -> name (None: the default), from the flags given."""
    entity: dict[str, str | None] = {}
    for entity_type, attr in _QUOTA_TYPES:
        if getattr(args, attr) is not None:
            entity[entity_type] = getattr(args, attr)
        elif getattr(args, attr + "_default"):
            entity[entity_type] = None
    return entity


def _entity_text(components: list) -> str:
    """An answer's entity components, as metadata_records.client_quotas writes them."""
    return entity_text((c.get("entityType"), c.get("entityName")) for c in components)


OPS = {
    "status",
    "brokers",
    "topics",
    "log",
    "configs",
    "alter-configs",
    "client-quotas",
    "alter-client-quotas",
    "acls",
    "create-acl",
    "delete-acls",
    "update-features",
    "create-topic",
    "unregister-broker",
    "transfer-leadership",
    "add-voter",
    "remove-voter",
}


def run_op(args: argparse.Namespace) -> int:
    console = make_console()
    try:
        if args.token_file:
            args.token = _read_token(args.token_file)
        tls = tls_from_args(args)
        if args.command == "transfer-leadership" and args.if_leader:
            return asyncio.run(transfer_if_leader(args.url, args.token, args.target, tls))
        return asyncio.run(_run(args, console, tls))
    except ClientTlsError as e:
        return _fail(str(e), EXIT_BAD_INPUT)
    except ValueError as e:
        return _fail(f"INVALID_REQUEST: {e}", EXIT_BAD_INPUT)
    except RequestRejected as e:
        return _fail(
            f"{e.body.get('errorName', 'ERROR')}: {e.body.get('errorMessage')} (HTTP {e.status})"
        )
    except TlsFailure as e:
        return _fail(str(e), EXIT_NO_ANSWER)
    except OutcomeUnknown as e:
        return _fail(
            f"UNKNOWN_OUTCOME: {e} (it may still apply: read before retrying)",
            EXIT_UNKNOWN_OUTCOME,
        )
    except ClientError as e:
        return _fail(f"UNAVAILABLE: {e}", EXIT_NO_ANSWER)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


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
                return _fail(tls_problem, EXIT_NO_ANSWER)
            return _fail(
                f"UNAVAILABLE: cannot read {base}/v1/quorum/status ({e!r})", EXIT_NO_ANSWER
            )
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
            sent = not isinstance(e, httpx.ConnectError | httpx.ConnectTimeout)
            return _fail(
                f"{'UNKNOWN_OUTCOME' if sent else 'UNAVAILABLE'}: {base}: {e!r} "
                "(the node hands over on SIGTERM too)",
                EXIT_UNKNOWN_OUTCOME if sent else EXIT_NO_ANSWER,
            )
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


def _fail(line: str, code: int = EXIT_REFUSED) -> int:
    print(f"metaquorum: {line}", file=sys.stderr)
    return code


def _dump(obj: Any) -> None:
    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")


def _report(answer, as_json: bool, console: Console, done: Callable[[], str]) -> int:
    """A write command's end: the answer as JSON (refused or not), the refusal
    on stderr, or ``done()`` for a person."""
    if as_json:
        _dump(answer.body)
    if not answer.ok:
        return _fail(f"{answer.error_name}: {answer.error_message}")
    if not as_json:
        console.print(done())
    return 0


def _report_entry(
    answer, entries: str, as_json: bool, console: Console, done: Callable[[], str]
) -> int:
    """``_report`` of a write of one entry (alter-configs, alter-client-quotas):
    the entry under ``entries`` decides, or the request's own error when it
    was refused whole."""
    result = (answer.body.get(entries) or [answer.body])[0]
    if as_json:
        _dump(result)
    if result.get("errorCode", answer.error_code) != 0:
        return _fail(f"{result.get('errorName')}: {result.get('errorMessage')}")
    if not as_json:
        console.print(done())
    return 0


async def _run(args: argparse.Namespace, console: Console, tls: ClientTls | None = None) -> int:
    seeds = [u.strip() for u in args.url.split(",") if u.strip()]
    cmd = args.command
    # An add waits for the node to catch up: the HTTP call may take that long.
    timeout_s = args.timeout + 15 if cmd == "add-voter" else 10.0
    async with MetaquorumClient(seeds, token=args.token, timeout_s=timeout_s, tls=tls) as client:
        if cmd == "status":
            body = (await client.status()).body
            leader = await _leader_status(body, args, tls)
            if args.json:
                _dump(
                    body if leader is body or leader is None else {**body, "leaderStatus": leader}
                )
            else:
                _print_status(console, body, leader, args.human_readable)
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
                    return _fail(
                        f"INVALID_REQUEST: --config {item!r} is not NAME=VALUE", EXIT_BAD_INPUT
                    )
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
        if cmd == "configs":
            answer = await client.describe_configs(
                args.topic, args.broker, args.synonyms, linearizable=args.linearizable
            )
            if answer.error_code != 0:
                return _fail(f"{answer.error_name}: {answer.error_message}")
            configs = answer.body.get("configs", [])
            if not args.all:
                configs = [c for c in configs if c.get("configSourceName") != "DEFAULT_CONFIG"]
            if args.json:
                _dump({**answer.body, "configs": configs})
            else:
                _print_configs(console, args, configs, answer.metadata_offset)
            return 0
        if cmd == "alter-configs":
            return await _alter_configs(client, args, console)
        if cmd == "client-quotas":
            any_of = [t for t, attr in _QUOTA_TYPES if getattr(args, "any_" + attr)]
            answer = await client.describe_client_quotas(
                _quota_entity(args), any_of, args.strict, linearizable=args.linearizable
            )
            entries = answer.body.get("entries", [])
            if args.json:
                _dump(answer.body)
            else:
                rows = [
                    [_entity_text(e.get("entity", [])), str(v.get("key")), f"{v.get('value'):g}"]
                    for e in entries
                    for v in e.get("values", [])
                ]
                print_table(
                    console,
                    f"client quotas at offset {answer.metadata_offset}",
                    ["Entity", "Key", "Value"],
                    rows,
                )
            return 0
        if cmd == "alter-client-quotas":
            return await _alter_client_quotas(client, args, console)
        if cmd in ("acls", "create-acl", "delete-acls"):
            return await _acl_command(cmd, client, args, console)
        if cmd == "update-features":
            name, sep, level = args.feature.partition("=")
            if not sep or not name or not level.strip().lstrip("-").isdigit():
                return _fail(
                    f"INVALID_REQUEST: {args.feature!r} is not NAME=LEVEL (a whole number)",
                    EXIT_BAD_INPUT,
                )
            upgrade_type = 3 if args.unsafe_downgrade else 2 if args.downgrade else 1
            answer = await client.update_features(
                name, int(level), upgrade_type, args.validate_only
            )
            verb = "would finalize" if args.validate_only else "finalized"
            return _report(answer, args.json, console, lambda: f"{verb} {name} at level {level}")
        if cmd == "unregister-broker":
            answer = await client.unregister_broker(args.broker_id)
            return _report(
                answer, args.json, console, lambda: f"unregistered broker [bold]{args.broker_id}[/]"
            )
        if cmd == "transfer-leadership":
            answer = await client.transfer_leadership(args.target)
            return _report(answer, args.json, console, lambda: f"leadership moved: {answer.body}")
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

            def voters_now() -> str:
                voters = ", ".join(
                    f"{v['nodeId']}@{v['raftAddress']} ({v['directoryId']})"
                    for v in answer.body.get("voters", [])
                )
                done = (
                    "" if answer.body.get("changed", True) else " (it already was: nothing to do)"
                )
                return f"voters now: {voters}{done}"

            return _report(answer, args.json, console, voters_now)
    raise AssertionError(cmd)


def _items(body: dict, key: str) -> list:
    if key in body:
        return body[key]
    return body.get("items", [])


async def _leader_status(
    body: dict, args: argparse.Namespace, tls: ClientTls | None
) -> dict | None:
    """The leader's status: lag and fetch figures are known only there, and
    kafka-metadata-quorum shows the leader's view too. ``body`` itself when
    the node at --url leads; None when no leader is known (LeaderId -1 says
    so) or it cannot be asked (stderr says why): the lag figures are then
    unknown."""
    if body.get("leaderId") is None:
        return None
    if body.get("leaderId") == body.get("nodeId"):
        return body
    url = body.get("leaderUrl")
    if not url:
        print(
            f"metaquorum: node {body.get('nodeId')} knows no URL of its leader "
            f"{body.get('leaderId')}: lag figures unknown",
            file=sys.stderr,
        )
        return None
    try:
        async with MetaquorumClient([url], token=args.token, tls=tls, max_attempts=2) as leader:
            return (await leader.status()).body
    except ClientError as e:
        print(
            f"metaquorum: the leader at {url} did not answer ({e}): lag figures unknown",
            file=sys.stderr,
        )
        return None


async def _log(client: MetaquorumClient, args, console: Console) -> int:
    if args.from_offset < 0:
        raise ValueError(f"--from {args.from_offset}: offsets start at 0")
    if not 1 <= args.max_records <= 10_000:
        raise ValueError(f"--max {args.max_records} must be within 1..10000 records per page")
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


def _print_status(console: Console, s: dict, leader: dict | None, human: bool) -> None:
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
    elif elections:
        console.print("elections: plain Raft (serve --no-pre-vote)")
    if "leaderChanges" in elections:
        console.print(_leadership_line(elections), markup=False)


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


def _print_brokers(console: Console, items: list, offset: int | None) -> None:
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


def _print_topics(console: Console, items: list, offset: int | None) -> None:
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


def _resource(args: argparse.Namespace) -> tuple[int, str, str]:
    """(resourceType, resourceName, how to name it to a person)."""
    if args.topic is not None:
        return 2, args.topic, f"topic {args.topic}"
    if args.broker is not None:
        return 4, str(args.broker), f"broker {args.broker}"
    return 4, "", "the cluster-wide default"


async def _alter_configs(client, args: argparse.Namespace, console: Console) -> int:
    changes = []
    for op, items in enumerate((args.set, args.delete, args.append, args.subtract)):
        for item in items:
            if op == 1:
                changes.append({"name": item, "configOperation": op, "value": None})
                continue
            name, sep, value = item.partition("=")
            if not sep or not name:
                flag = ("--set", "--delete", "--append", "--subtract")[op]
                return _fail(f"INVALID_REQUEST: {flag} {item!r} is not NAME=VALUE", EXIT_BAD_INPUT)
            changes.append({"name": name, "configOperation": op, "value": value})
    if not changes:
        return _fail(
            "INVALID_REQUEST: nothing to change (give --set, --delete, --append or --subtract)",
            EXIT_BAD_INPUT,
        )
    kind, name, what = _resource(args)
    answer = await client.alter_configs(
        [{"resourceType": kind, "resourceName": name, "configs": changes}], args.validate_only
    )
    done = "would change" if args.validate_only else "changed"
    return _report_entry(
        answer,
        "responses",
        args.json,
        console,
        lambda: f"{done} {len(changes)} config(s) of {what}",
    )


async def _alter_client_quotas(client, args: argparse.Namespace, console: Console) -> int:
    entity = _quota_entity(args)
    if not entity:
        return _fail(
            "INVALID_REQUEST: no entity (give --user, --client-id or --ip, or a -default)",
            EXIT_BAD_INPUT,
        )
    ops = []
    for item in (part for arg in args.add for part in arg.split(",") if part):
        key, sep, text = item.partition("=")
        try:
            value = float(text)
        except ValueError:
            value = None
        if not sep or not key or value is None or value != value or abs(value) == float("inf"):
            return _fail(f"INVALID_REQUEST: --add {item!r} is not KEY=NUMBER", EXIT_BAD_INPUT)
        ops.append({"key": key, "value": value, "remove": False})
    for key in (part for arg in args.delete for part in arg.split(",") if part):
        ops.append({"key": key, "remove": True})
    if not ops:
        return _fail("INVALID_REQUEST: nothing to change (give --add or --delete)", EXIT_BAD_INPUT)
    components = [{"entityType": t, "entityName": n} for t, n in entity.items()]
    answer = await client.alter_client_quotas(
        [{"entity": components, "ops": ops}], args.validate_only
    )
    done = "would change" if args.validate_only else "changed"
    return _report_entry(
        answer,
        "entries",
        args.json,
        console,
        lambda: f"{done} {len(ops)} quota(s) of {_entity_text(components)}",
    )


def _print_configs(console: Console, args, configs: list, offset: int | None) -> None:
    _, _, what = _resource(args)
    headers = ["Name", "Value", "Source"] + (["Synonyms"] if args.synonyms else [])
    rows = [
        [str(c.get("name")), _or_dash(c.get("value")), str(c.get("configSourceName"))]
        + (
            [
                " ".join(
                    f"{s.get('sourceName')}:{s.get('name')}={s.get('value')}"
                    for s in c.get("synonyms", [])
                )
            ]
            if args.synonyms
            else []
        )
        for c in configs
    ]
    print_table(console, f"configs of {what} at offset {offset}", headers, rows)


# ---------------------------------------------------------------- ACLs (issue 21 item 5)


def _add_acl_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``acls``, ``create-acl`` and ``delete-acls``, with kafka-acls.sh's flags."""
    p = command(
        "acls",
        "the ACLs a filter matches (like kafka-acls --list): every one, or those of a "
        "resource (--resource-pattern-type MATCH: every pattern that applies to it)",
    )
    _acl_resource_flags(p, required=False, default_pattern="ANY")
    p.add_argument("--principal", help='only this principal, e.g. "User:alice"')
    p.add_argument("--host", help="only this host")
    p.add_argument("--operation", help="only this operation (READ, WRITE, ...)")
    p.add_argument("--permission-type", help="only ALLOW or DENY")
    p.add_argument("--linearizable", action="store_true", help="read through the log first")
    for name, text, default_pattern in (
        (
            "create-acl",
            "create ACLs (like kafka-acls --add): each principal x host x operation on the "
            "resource; one that exists already is kept",
            "LITERAL",
        ),
        (
            "delete-acls",
            "delete ACLs (like kafka-acls --remove): those of the resource with the given "
            "principals, hosts and operations, or every one of the resource without them",
            "LITERAL",
        ),
    ):
        p = command(name, text, WRITE_EXITS)
        _acl_resource_flags(p, required=True, default_pattern=default_pattern)
        for flag, text in (
            ("--allow-principal", 'a principal to allow, e.g. "User:alice" (repeatable)'),
            ("--deny-principal", "a principal to deny (repeatable)"),
            ("--allow-host", "a host the allowed principals may come from (default *)"),
            ("--deny-host", "a host the denied principals are denied from (default *)"),
            ("--operation", "READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, ALL, ... (repeatable)"),
        ):
            p.add_argument(flag, action="append", default=[], help=text)


def _acl_resource_flags(p: argparse.ArgumentParser, required: bool, default_pattern: str) -> None:
    which = p.add_mutually_exclusive_group(required=required)
    which.add_argument("--topic", metavar="NAME", help='a topic ("*" for all)')
    which.add_argument("--group", metavar="NAME", help='a consumer group ("*" for all)')
    which.add_argument("--transactional-id", metavar="ID", help="a transactional id")
    which.add_argument("--cluster", action="store_true", help="the cluster (kafka-cluster)")
    which.add_argument("--resource", metavar="TYPE:NAME", help="any resource type, e.g. USER:alice")
    p.add_argument(
        "--resource-pattern-type",
        default=default_pattern,
        help=f"LITERAL, PREFIXED, ANY or MATCH (default {default_pattern})",
    )


def _acl_resource(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(resource type, resource name) from the flags; (None, None) for none."""
    if args.topic is not None:
        return "TOPIC", args.topic
    if args.group is not None:
        return "GROUP", args.group
    if args.transactional_id is not None:
        return "TRANSACTIONAL_ID", args.transactional_id
    if args.cluster:
        return "CLUSTER", "kafka-cluster"
    if args.resource is not None:
        kind, sep, name = args.resource.partition(":")
        if not sep:
            raise ValueError(f"--resource {args.resource!r} is not TYPE:NAME")
        return kind, name
    return None, None


def _acl_entries(args: argparse.Namespace, ops: list[str]) -> list[tuple[str, str, str, str]]:
    """(principal, host, operation, permission) for each principal x host x
    operation, as kafka-acls builds them."""
    entries = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host or ["*"], "ALLOW"),
        (args.deny_principal, args.deny_host or ["*"], "DENY"),
    ):
        for principal in principals:
            for host in hosts:
                entries += [(principal, host, op, permission) for op in ops]
    return entries


async def _acl_command(cmd: str, client, args: argparse.Namespace, console: Console) -> int:
    try:
        kind, name = _acl_resource(args)
    except ValueError as e:
        return _fail(f"INVALID_REQUEST: {e}", EXIT_BAD_INPUT)
    pattern = args.resource_pattern_type
    if cmd == "acls":
        answer = await client.describe_acls(
            linearizable=args.linearizable, resourceType=kind, resourceName=name,
            patternType=pattern, principal=args.principal, host=args.host,
            operation=args.operation, permissionType=args.permission_type,
        )  # fmt: skip
        if answer.error_code != 0:
            return _fail(f"{answer.error_name}: {answer.error_message}")
        if args.json:
            _dump(answer.body)
        else:
            _print_acls(console, answer.body.get("resources", []), answer.metadata_offset)
        return 0
    # Deleting a principal's ACLs without --operation: all of its operations.
    ops = args.operation or (["ANY"] if cmd == "delete-acls" else [])
    entries = _acl_entries(args, ops)
    if cmd == "create-acl":
        if not entries:
            return _fail(
                "INVALID_REQUEST: nothing to create (give --allow-principal or --deny-principal, "
                "and --operation)",
                EXIT_BAD_INPUT,
            )
        answer = await client.create_acls(
            [
                {"resourceType": kind, "resourceName": name, "resourcePatternType": pattern,
                 "principal": p, "host": h, "operation": op, "permissionType": perm}
                for p, h, op, perm in entries
            ]
        )  # fmt: skip
        results = answer.body.get("results") or [answer.body]
        if args.json:
            _dump(answer.body)
        failed = [r for r in results if r.get("errorCode", answer.error_code) != 0]
        if failed:
            return _fail(
                "; ".join(f"{r.get('errorName')}: {r.get('errorMessage')}" for r in failed)
            )
        if not args.json:
            console.print(f"created {len(entries)} ACL(s) on {kind}:{pattern}:{name}")
        return 0
    filters = [
        {"resourceTypeFilter": kind, "resourceNameFilter": name, "patternTypeFilter": pattern,
         "principalFilter": p, "hostFilter": h, "operation": op, "permissionType": perm}
        for p, h, op, perm in entries
    ] or [
        {"resourceTypeFilter": kind, "resourceNameFilter": name, "patternTypeFilter": pattern,
         "operation": op}
        for op in (args.operation or [None])
    ]  # fmt: skip
    answer = await client.delete_acls(filters)
    results = answer.body.get("filterResults") or [answer.body]
    if args.json:
        _dump(answer.body)
    failed = [r for r in results if r.get("errorCode", answer.error_code) != 0]
    if failed:
        return _fail("; ".join(f"{r.get('errorName')}: {r.get('errorMessage')}" for r in failed))
    if not args.json:
        deleted = {tuple(sorted(a.items())) for r in results for a in r.get("matchingAcls", [])}
        console.print(f"deleted {len(deleted)} ACL(s)")
    return 0


def _print_acls(console: Console, resources: list, offset: int | None) -> None:
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
