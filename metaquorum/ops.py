"""The operator commands: ``status``, ``brokers``, ``topics``, ``log``,
``create-topic``, ``configs``, ``alter-configs``, ``acls``, ``create-acl``,
``delete-acls``, ``client-quotas``, ``alter-client-quotas``, ``scram``,
``delegation-tokens``,
``update-features``, ``unregister-broker``, ``transfer-leadership``,
``add-voter``, ``remove-voter``, ``update-voter``, ``diff``, ``what-if``, ``explain``.

They are one table, ``OPS``: each command's entry names its help, how its own
flags are added and the call that does it, so that one command is read in one
place; the parser (``add_ops_commands``) and the dispatch (``run_op``) only
walk the table, and every command takes the same connection flags, ``--json``
and exit codes. Tables for people and ``--json`` for scripts: ops_render.py.
A failure is one clear line on stderr with the error name; the exit code says
which kind (ops_command.py, docs/cli.md). A TLS failure is one line saying why
(unknown CA, name mismatch, expired, a refused client certificate).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from rich.console import Console

from brokers.client import (
    ClientError,
    MetaquorumClient,
    OutcomeUnknown,
    RequestRejected,
    TlsFailure,
)
from brokers.tls import ClientTls, ClientTlsError

from .connection_flags import add_connection_flags, tls_from_args
from .ops_acls import ACL_COMMANDS
from .ops_command import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_NO_ANSWER,
    EXIT_UNKNOWN_OUTCOME,
    WRITE_EXITS,
    OpCommand,
    fail,
)
from .ops_delegation_tokens import DELEGATION_TOKEN_COMMANDS
from .ops_explain import EXPLAIN_COMMANDS
from .ops_history import (
    HISTORY_COMMANDS,
    add_at_flags,
    at_given,
    config_entries,
    history_timeout_s,
    image_at,
)
from .ops_partitions import PARTITION_COMMANDS
from .ops_render import (
    WhoLines,
    dump,
    print_brokers,
    print_client_quotas,
    print_configs,
    print_log_record,
    print_status,
    print_topics,
    quota_entity_text,
    report,
    report_entry,
)
from .ops_scram import SCRAM_COMMANDS
from .ops_what_if import WHAT_IF_COMMANDS, offline_refusal
from .output import make_console
from .prestop import transfer_if_leader


def add_ops_commands(commands: argparse._SubParsersAction) -> None:
    """Every command of the table, with the flags they all take before its own."""
    for name, op in OPS.items():
        p = commands.add_parser(name, help=op.help, description=f"{op.help}. {op.exits}")
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
        op.add_flags(p)


def run_op(args: argparse.Namespace) -> int:
    console = make_console()
    try:
        if args.token_file:
            args.token = _read_token(args.token_file)
        tls = tls_from_args(args)
        if args.command == "transfer-leadership" and args.if_leader:
            # The preStop hook asks the voter at --url alone, without the client
            # (which follows redirects to the leader): prestop.py.
            return asyncio.run(transfer_if_leader(args.url, args.token, args.target, tls))
        return asyncio.run(_run(args, console, tls))
    except ClientTlsError as e:
        return fail(str(e), EXIT_BAD_INPUT)
    except ValueError as e:
        return fail(f"INVALID_REQUEST: {e}", EXIT_BAD_INPUT)
    except RequestRejected as e:
        return fail(
            f"{e.body.get('errorName', 'ERROR')}: {e.body.get('errorMessage')} (HTTP {e.status})"
        )
    except TlsFailure as e:
        return fail(str(e), EXIT_NO_ANSWER)
    except OutcomeUnknown as e:
        return fail(
            f"UNKNOWN_OUTCOME: {e} (it may still apply: read before retrying)",
            EXIT_UNKNOWN_OUTCOME,
        )
    except ClientError as e:
        return fail(f"UNAVAILABLE: {e}", EXIT_NO_ANSWER)
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


async def _run(args: argparse.Namespace, console: Console, tls: ClientTls | None = None) -> int:
    """The command's entry, looked up in the table, run with a client."""
    op = OPS[args.command]
    seeds = [u.strip() for u in args.url.split(",") if u.strip()]
    async with MetaquorumClient(
        seeds, token=args.token, timeout_s=op.http_timeout_s(args), tls=tls
    ) as client:
        return await op.run(client, args, console, tls)


def _linearizable_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--linearizable", action="store_true", help="read through the log first")


def _validate_only_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--validate-only", action="store_true", help="check everything, write nothing")


def _items(body: dict, key: str) -> list:
    if key in body:
        return body[key]
    return body.get("items", [])


# ---------------------------------------------------------------- status


def _status_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--linearizable", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--human-readable",
        action="store_true",
        help="timestamps as 'N ms ago' instead of epoch milliseconds",
    )


async def _status(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    body = (await client.status()).body
    leader = await _leader_status(body, args, tls)
    if args.json:
        dump(body if leader is body or leader is None else {**body, "leaderStatus": leader})
    else:
        print_status(console, body, leader, args.human_readable)
    return 0


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


# ---------------------------------------------------------------- brokers, topics, log


def _brokers_flags(p: argparse.ArgumentParser) -> None:
    _linearizable_flag(p)
    add_at_flags(p)


async def _brokers(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    if at_given(args):
        answer = await image_at(client, args, "brokers")
        if isinstance(answer, int):
            return answer
    else:
        answer = await client.brokers(linearizable=args.linearizable)
    items = _items(answer.body, "brokers")
    if args.json:
        dump(items)
    else:
        print_brokers(console, items, answer.metadata_offset)
    return 0


def _topics_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="one topic")
    _linearizable_flag(p)
    add_at_flags(p)


async def _topics(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    if at_given(args):
        answer = await image_at(client, args, "topics", args.name)
        if isinstance(answer, int):
            return answer
        items = answer.body.get("topics", [])
        if args.name and not items:
            return fail(
                f"UNKNOWN_TOPIC_OR_PARTITION: topic {args.name!r} did not exist after offset "
                f"{answer.body.get('offset')}"
            )
    elif args.name:
        answer = await client.topic(args.name, linearizable=args.linearizable)
        if answer.body.get("errorCode", 0) != 0 and "name" not in answer.body:
            return fail(f"{answer.error_name}: {answer.error_message}")
        items = [answer.body]
    else:
        answer = await client.topics(linearizable=args.linearizable)
        items = _items(answer.body, "topics")
    if args.json:
        dump(items if not args.name else items[0])
    else:
        print_topics(console, items, answer.metadata_offset)
    return 0


def _log_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="from_offset", type=int, default=0, help="first offset")
    p.add_argument("--max", dest="max_records", type=int, default=100, help="records per page")
    p.add_argument("--follow", action="store_true", help="keep printing new records")
    p.add_argument(
        "--who",
        action="store_true",
        help="print who asked for each run of records (time, offsets, principal, address, "
        "API, request id, rule) instead of the records",
    )
    p.add_argument("--principal", help="only records this principal asked for (broker:cert/CN=…)")
    p.add_argument("--api", help="only records of this API (AlterPartition, CreateTopics, …)")
    p.add_argument("--broker", type=int, metavar="N", help="only records that name broker N")
    p.add_argument("--topic", metavar="T", help="only records of topic T")
    p.add_argument("--since", help="only batches at or after this time (ISO-8601 or epoch ms)")
    p.add_argument("--until", help="only batches before this time (ISO-8601 or epoch ms)")


def _log_filters(args: argparse.Namespace) -> dict[str, str | int]:
    """GET /v1/log's filters from the flags (the server checks their values)."""
    flags = {
        "principal": args.principal,
        "api": args.api,
        "brokerId": args.broker,
        "topic": args.topic,
        "since": args.since,
        "until": args.until,
    }
    return {k: v for k, v in flags.items() if v is not None}


async def _log(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    if args.from_offset < 0:
        raise ValueError(f"--from {args.from_offset}: offsets start at 0")
    if not 1 <= args.max_records <= 10_000:
        raise ValueError(f"--max {args.max_records} must be within 1..10000 records per page")
    filters = _log_filters(args)
    runs = WhoLines(console, args.json) if args.who else None
    offset = args.from_offset
    try:
        while True:
            answer = await client.log(
                offset, args.max_records, wait_ms=5000 if args.follow else 0, filters=filters
            )
            body = answer.body
            if "oldestOffset" in body and not body.get("records") and "nextOffset" not in body:
                return fail(
                    f"OFFSET_OUT_OF_RANGE: offset {offset} is no longer retained; the oldest "
                    f"is {body['oldestOffset']} (use --from {body['oldestOffset']})"
                )
            records = body.get("records", [])
            for record in records:
                if runs is not None:
                    runs.add(record)
                else:
                    print_log_record(console, record, args.json)
            sys.stdout.flush()
            before, offset = offset, body.get("nextOffset", offset)
            if args.follow:
                continue
            # A filtered page may be empty with the scan gone on: ask again from there.
            if offset >= body.get("highWatermark", offset) or (not records and offset == before):
                return 0
    finally:
        if runs is not None:
            runs.flush()
            sys.stdout.flush()


# ---------------------------------------------------------------- topics: create


def _create_topic_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("name")
    p.add_argument("--partitions", type=int, default=-1)
    p.add_argument("--replication-factor", type=int, default=-1)
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")


async def _create_topic(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    configs = {}
    for item in args.config:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--config {item!r} is not NAME=VALUE")
        configs[name] = value
    answer = await client.create_topic(
        args.name, args.partitions, args.replication_factor, configs or None
    )
    topic = (answer.body.get("topics") or [{}])[0]
    if args.json:
        dump(topic)
    if topic.get("errorCode", answer.error_code) != 0:
        return fail(f"{topic.get('errorName')}: {topic.get('errorMessage')}")
    if not args.json:
        console.print(
            f"created topic [bold]{args.name}[/] ({topic.get('topicId')}): "
            f"{topic.get('numPartitions')} partitions x {topic.get('replicationFactor')} replicas"
        )
    return 0


# ---------------------------------------------------------------- configs


def _config_resource_flags(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", metavar="NAME", help="a topic")
    which.add_argument("--broker", type=int, metavar="ID", help="a broker id")
    which.add_argument(
        "--cluster", action="store_true", help="the default for every broker (and topic)"
    )


def _resource(args: argparse.Namespace) -> tuple[int, str, str]:
    """(resourceType, resourceName, how to name it to a person)."""
    if args.topic is not None:
        return 2, args.topic, f"topic {args.topic}"
    if args.broker is not None:
        return 4, str(args.broker), f"broker {args.broker}"
    return 4, "", "the cluster-wide default"


def _configs_flags(p: argparse.ArgumentParser) -> None:
    _config_resource_flags(p)
    p.add_argument("--all", action="store_true", help="every config, defaults included")
    p.add_argument("--synonyms", action="store_true", help="every level that sets each config")
    _linearizable_flag(p)
    add_at_flags(p)


async def _configs(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    if at_given(args):
        return await _configs_at(client, args, console)
    answer = await client.describe_configs(
        args.topic, args.broker, args.synonyms, linearizable=args.linearizable
    )
    if answer.error_code != 0:
        return fail(f"{answer.error_name}: {answer.error_message}")
    configs = answer.body.get("configs", [])
    if not args.all:
        configs = [c for c in configs if c.get("configSourceName") != "DEFAULT_CONFIG"]
    if args.json:
        dump({**answer.body, "configs": configs})
    else:
        _, _, what = _resource(args)
        print_configs(console, what, args.synonyms, configs, answer.metadata_offset)
    return 0


async def _configs_at(client: MetaquorumClient, args: argparse.Namespace, console: Console) -> int:
    """The dynamic configs set on the resource at --at-offset / --at-time."""
    if args.all or args.synonyms:
        raise ValueError(
            "--all and --synonyms resolve every level now: with --at-offset / --at-time "
            "the configs set on the resource are shown"
        )
    kind, name, what = _resource(args)
    answer = await image_at(client, args, "configs", args.topic)
    if isinstance(answer, int):
        return answer
    configs = config_entries(answer.body, kind, name)
    if args.json:
        dump({"resourceType": kind, "resourceName": name, "configs": configs})
    else:
        print_configs(console, what, False, configs, answer.body.get("offset"))
    return 0


_CONFIG_CHANGES = (  # flag, metavar, help; the flag's index is its configOperation
    ("--set", "NAME=VALUE", "set a config"),
    ("--delete", "NAME", "delete a config (back to the next level's value)"),
    ("--append", "NAME=VALUE", "add elements to a LIST config (comma-separated)"),
    ("--subtract", "NAME=VALUE", "remove elements from a LIST config"),
)


def _alter_configs_flags(p: argparse.ArgumentParser) -> None:
    _config_resource_flags(p)
    for flag, meta, text in _CONFIG_CHANGES:
        p.add_argument(flag, action="append", default=[], metavar=meta, help=text)
    _validate_only_flag(p)


async def _alter_configs(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    changes = []
    for op, items in enumerate((args.set, args.delete, args.append, args.subtract)):
        for item in items:
            if op == 1:
                changes.append({"name": item, "configOperation": op, "value": None})
                continue
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise ValueError(f"{_CONFIG_CHANGES[op][0]} {item!r} is not NAME=VALUE")
            changes.append({"name": name, "configOperation": op, "value": value})
    if not changes:
        raise ValueError("nothing to change (give --set, --delete, --append or --subtract)")
    kind, name, what = _resource(args)
    answer = await client.alter_configs(
        [{"resourceType": kind, "resourceName": name, "configs": changes}], args.validate_only
    )
    done = "would change" if args.validate_only else "changed"
    return report_entry(
        answer,
        "responses",
        args.json,
        console,
        lambda: f"{done} {len(changes)} config(s) of {what}",
    )


# ---------------------------------------------------------------- client quotas


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


def _client_quotas_flags(p: argparse.ArgumentParser) -> None:
    _quota_entity_flags(p, describe=True)
    p.add_argument("--strict", action="store_true", help="only entities with no other component")
    _linearizable_flag(p)


async def _client_quotas(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    any_of = [t for t, attr in _QUOTA_TYPES if getattr(args, "any_" + attr)]
    answer = await client.describe_client_quotas(
        _quota_entity(args), any_of, args.strict, linearizable=args.linearizable
    )
    if args.json:
        dump(answer.body)
    else:
        print_client_quotas(console, answer.body.get("entries", []), answer.metadata_offset)
    return 0


def _alter_client_quotas_flags(p: argparse.ArgumentParser) -> None:
    _quota_entity_flags(p, describe=False)
    p.add_argument(
        "--add", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]", help="set quotas"
    )
    p.add_argument(
        "--delete", action="append", default=[], metavar="KEY[,KEY]", help="remove quotas"
    )
    _validate_only_flag(p)


async def _alter_client_quotas(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    entity = _quota_entity(args)
    if not entity:
        raise ValueError("no entity (give --user, --client-id or --ip, or a -default)")
    ops = []
    for item in (part for arg in args.add for part in arg.split(",") if part):
        key, sep, text = item.partition("=")
        try:
            value = float(text)
        except ValueError:
            value = None
        if not sep or not key or value is None or value != value or abs(value) == float("inf"):
            raise ValueError(f"--add {item!r} is not KEY=NUMBER")
        ops.append({"key": key, "value": value, "remove": False})
    for key in (part for arg in args.delete for part in arg.split(",") if part):
        ops.append({"key": key, "remove": True})
    if not ops:
        raise ValueError("nothing to change (give --add or --delete)")
    components = [{"entityType": t, "entityName": n} for t, n in entity.items()]
    answer = await client.alter_client_quotas(
        [{"entity": components, "ops": ops}], args.validate_only
    )
    done = "would change" if args.validate_only else "changed"
    return report_entry(
        answer,
        "entries",
        args.json,
        console,
        lambda: f"{done} {len(ops)} quota(s) of {quota_entity_text(components)}",
    )


# ---------------------------------------------------------------- features, brokers


def _update_features_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("feature", metavar="NAME=LEVEL", help="e.g. eligible.leader.replicas.version=1")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--downgrade", action="store_true", help="a safe downgrade to a lower level")
    kind.add_argument(
        "--unsafe-downgrade", action="store_true", help="an unsafe downgrade (may lose metadata)"
    )
    _validate_only_flag(p)


async def _update_features(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    name, sep, level = args.feature.partition("=")
    if not sep or not name or not level.strip().lstrip("-").isdigit():
        raise ValueError(f"{args.feature!r} is not NAME=LEVEL (a whole number)")
    upgrade_type = 3 if args.unsafe_downgrade else 2 if args.downgrade else 1
    answer = await client.update_features(name, int(level), upgrade_type, args.validate_only)
    verb = "would finalize" if args.validate_only else "finalized"
    return report(answer, args.json, console, lambda: f"{verb} {name} at level {level}")


def _unregister_broker_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("broker_id", type=int, metavar="ID", help="the broker id")
    p.add_argument(
        "--force",
        action="store_true",
        help="unregister even if that takes partitions offline (what-if is not asked)",
    )


async def _unregister_broker(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    refusal = None if args.force else await offline_refusal(client, args.broker_id)
    if refusal is not None:
        return fail(f"REFUSED: {refusal}")
    answer = await client.unregister_broker(args.broker_id)
    return report(
        answer, args.json, console, lambda: f"unregistered broker [bold]{args.broker_id}[/]"
    )


# ---------------------------------------------------------------- the quorum


def _transfer_leadership_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--to", dest="target", type=int, help="target node id (default: most caught up)")
    p.add_argument(
        "--if-leader",
        action="store_true",
        help="only if the voter at --url leads; otherwise do nothing and exit 0 (a preStop hook)",
    )


async def _transfer_leadership(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    # --if-leader (the preStop hook) never gets here: run_op hands it to prestop.py.
    moved, body = await _hand_over(client, args.target)
    if args.json:
        dump(body)
    if moved is None:
        return fail(f"{body.get('errorName')}: {body.get('errorMessage')}")
    if not args.json:
        console.print(f"leadership moved to node [bold]{moved}[/]")
    return 0


# remove-voter of the leader asks for a handover this many times: a target
# that loses its election is usually elected at the next attempt.
HANDOVER_ATTEMPTS = 3


async def _hand_over(client: MetaquorumClient, target: int | None) -> tuple[int | None, dict]:
    """One handover: (the new leader, the answer), or (None, the answer)
    when leadership did not move (409 PREFERRED_LEADER_NOT_AVAILABLE: the
    voter that leads takes writes, so asking again is safe)."""
    try:
        answer = await client.transfer_leadership(target)
    except RequestRejected as e:
        if e.status != 409 or e.body.get("errorName") != "PREFERRED_LEADER_NOT_AVAILABLE":
            raise
        return None, e.body
    return answer.body.get("leaderId"), answer.body


def _add_voter_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node-id", dest="node_id", type=int, required=True, help="its node id")
    p.add_argument(
        "--address", required=True, help="its Raft HOST:PORT, spelled as every voter will"
    )
    p.add_argument(
        "--timeout", type=float, default=30.0, help="seconds it may take to connect and catch up"
    )


def _add_voter_http_timeout_s(args: argparse.Namespace) -> float:
    # An add waits for the node to catch up: the HTTP call may take that long.
    return args.timeout + 15


async def _add_voter(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    if not 0 < args.timeout <= 600:
        raise ValueError(f"--timeout {args.timeout} must be within (0, 600] seconds")
    answer = await client.add_voter(args.node_id, args.address, int(args.timeout * 1000))
    return report(answer, args.json, console, lambda: _voters_now(answer))


def _remove_voter_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node-id", dest="node_id", type=int, required=True, help="its node id")


async def _remove_voter(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    # The active controller is not removed: it hands over first, as many
    # times as an operator would try (each handover that does not move it
    # leaves it leading and taking writes).
    leader = (await client.status()).body.get("leaderId")
    attempts = 0
    while leader == args.node_id:
        if attempts == HANDOVER_ATTEMPTS:
            return fail(
                f"PREFERRED_LEADER_NOT_AVAILABLE: leadership did not move off node "
                f"{args.node_id} in {HANDOVER_ATTEMPTS} handovers; it still leads and takes "
                "writes, and nothing was removed: run remove-voter again, or move leadership "
                "first with transfer-leadership --to <another voter>"
            )
        attempts += 1
        moved, body = await _hand_over(client, None)
        client.leader = None  # ask again who leads
        if moved is not None:
            _progress(f"node {leader} led: leadership moved to node {moved} first")
            leader = moved
        else:
            _progress(f"handover {attempts} of {HANDOVER_ATTEMPTS}: {body.get('errorMessage')}")
            # The answer names who leads: asked again only while that is the node to remove.
            leader = body.get("leaderId")
    answer = await client.remove_voter(args.node_id)
    return report(answer, args.json, console, lambda: _voters_now(answer))


def _progress(line: str) -> None:
    """A step of a command that takes several (stderr: --json keeps stdout to the answer)."""
    print(f"metaquorum: {line}", file=sys.stderr)


def _update_voter_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node-id", dest="node_id", type=int, required=True, help="its node id")
    p.add_argument(
        "--directory-id",
        dest="directory_id",
        required=True,
        help="the directory id the voter set names for it (metaquorum status shows it)",
    )
    p.add_argument(
        "--raft-address",
        dest="raft_address",
        required=True,
        help="its new Raft HOST:PORT, as it calls itself (its --raft-address)",
    )


async def _update_voter(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    try:
        answer = await client.update_voter(args.node_id, args.directory_id, args.raft_address)
    except RequestRejected as e:
        if e.status != 409:
            raise
        # A refusal (nothing written): the answer with --json, and its rule.
        if args.json:
            dump(e.body)
        return fail(
            f"{e.body.get('errorName')}: {e.body.get('errorMessage')} "
            f"(rule {e.body.get('rule')}; docs/rules.md)"
        )
    return report(answer, args.json, console, lambda: _voters_now(answer))


def _voters_now(answer) -> str:
    """A voter change's answer, for a person: the voters it left."""
    voters = ", ".join(
        f"{v['nodeId']}@{v['raftAddress']} ({v['directoryId']})"
        for v in answer.body.get("voters", [])
    )
    done = "" if answer.body.get("changed", True) else " (it already was: nothing to do)"
    return f"voters now: {voters}{done}"


# The commands, in the order `metaquorum --help` lists them.
OPS: dict[str, OpCommand] = {
    "status": OpCommand(
        "the quorum as kafka-metadata-quorum describe --status --replication shows it: "
        "who leads, epochs, offsets, voters, observers and their lag, as the leader sees them",
        _status_flags,
        _status,
    ),
    "brokers": OpCommand(
        "registered brokers and their state",
        _brokers_flags,
        _brokers,
        http_timeout_s=history_timeout_s,
    ),
    "topics": OpCommand(
        "topics and their partitions", _topics_flags, _topics, http_timeout_s=history_timeout_s
    ),
    "log": OpCommand(
        "the decoded metadata log (like kafka-dump-log --cluster-metadata-decoder)",
        _log_flags,
        _log,
    ),
    "create-topic": OpCommand("create a topic", _create_topic_flags, _create_topic, WRITE_EXITS),
    **PARTITION_COMMANDS,
    "configs": OpCommand(
        "the configs of a topic, a broker or the cluster-wide default, resolved as Kafka "
        "does (like kafka-configs --describe): what is set, or every config with --all",
        _configs_flags,
        _configs,
        http_timeout_s=history_timeout_s,
    ),
    "alter-configs": OpCommand(
        "set, delete, append to or subtract from the configs of a topic, a broker or "
        "the cluster-wide default (Kafka's IncrementalAlterConfigs); all or nothing",
        _alter_configs_flags,
        _alter_configs,
        WRITE_EXITS,
    ),
    **ACL_COMMANDS,
    **HISTORY_COMMANDS,
    **WHAT_IF_COMMANDS,
    **EXPLAIN_COMMANDS,
    "client-quotas": OpCommand(
        "client quotas of users, client ids and ips (like kafka-configs --describe "
        "--entity-type users/clients/ips): every entity the filter matches",
        _client_quotas_flags,
        _client_quotas,
    ),
    "alter-client-quotas": OpCommand(
        "set or delete the client quotas of a user, a client id, both, or an ip (like "
        "kafka-configs --alter --add-config producer_byte_rate=1024); all or nothing",
        _alter_client_quotas_flags,
        _alter_client_quotas,
        WRITE_EXITS,
    ),
    **SCRAM_COMMANDS,
    **DELEGATION_TOKEN_COMMANDS,
    "update-features": OpCommand(
        "finalize a feature at a level (Kafka's UpdateFeatures, as kafka-features "
        "upgrade/downgrade): metadata.version, or eligible.leader.replicas.version "
        "(KIP-966's ELR: 1 on, 0 off)",
        _update_features_flags,
        _update_features,
        WRITE_EXITS,
    ),
    "unregister-broker": OpCommand(
        "decommission a broker id for good (Kafka's UnregisterBroker): its registration "
        "is removed and it leaves every ISR; stop the broker first. Refused when that "
        "would take partitions offline (what-if), unless --force",
        _unregister_broker_flags,
        _unregister_broker,
        WRITE_EXITS,
    ),
    "transfer-leadership": OpCommand(
        "move the active controller to another voter",
        _transfer_leadership_flags,
        _transfer_leadership,
        WRITE_EXITS + " With --if-leader, 0 also when there is nothing to do.",
    ),
    "add-voter": OpCommand(
        "add a running node (serve --node-id N --raft-address HOST:PORT) to the voters, "
        "once it has caught up (Kafka's AddRaftVoter); one change at a time",
        _add_voter_flags,
        _add_voter,
        WRITE_EXITS,
        http_timeout_s=_add_voter_http_timeout_s,
    ),
    "remove-voter": OpCommand(
        "remove a voter (Kafka's RemoveRaftVoter); it stops voting and standing for "
        "election; the active controller hands leadership over first",
        _remove_voter_flags,
        _remove_voter,
        WRITE_EXITS,
    ),
    "update-voter": OpCommand(
        "move a voter to a new Raft address, its node id and directory id kept (Kafka's "
        "UpdateRaftVoter; a voter restarted with a new --raft-address sends it itself)",
        _update_voter_flags,
        _update_voter,
        WRITE_EXITS,
    ),
}
