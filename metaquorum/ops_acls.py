"""The ACL commands (issue 21 item 5), with kafka-acls.sh's flags: ``acls``
lists what a filter matches, ``create-acl`` adds each principal x host x
operation on a resource (one that exists already is kept), ``delete-acls``
removes those of a resource, all of its ACLs when no principal is named.

Their entries go into the command table as they are (metaquorum/ops.py).
"""

from __future__ import annotations

import argparse

from rich.console import Console

from brokers.client import MetaquorumClient
from brokers.tls import ClientTls

from .ops_command import WRITE_EXITS, OpCommand, fail
from .ops_history import acl_resources, add_at_flags, at_given, history_timeout_s, image_at
from .ops_render import dump, print_acls


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


def _fail_results(results: list, error_code: int) -> int | None:
    """The exit of a write whose results refused some of it (named on stderr);
    None when every one applied."""
    failed = [r for r in results if r.get("errorCode", error_code) != 0]
    if failed:
        return fail("; ".join(f"{r.get('errorName')}: {r.get('errorMessage')}" for r in failed))
    return None


def _acls_flags(p: argparse.ArgumentParser) -> None:
    _acl_resource_flags(p, required=False, default_pattern="ANY")
    p.add_argument("--principal", help='only this principal, e.g. "User:alice"')
    p.add_argument("--host", help="only this host")
    p.add_argument("--operation", help="only this operation (READ, WRITE, ...)")
    p.add_argument("--permission-type", help="only ALLOW or DENY")
    p.add_argument("--linearizable", action="store_true", help="read through the log first")
    add_at_flags(p)


async def _acls(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    kind, name = _acl_resource(args)
    if at_given(args):
        return await _acls_at(client, args, console, kind, name)
    answer = await client.describe_acls(
        linearizable=args.linearizable, resourceType=kind, resourceName=name,
        patternType=args.resource_pattern_type, principal=args.principal, host=args.host,
        operation=args.operation, permissionType=args.permission_type,
    )  # fmt: skip
    if answer.error_code != 0:
        return fail(f"{answer.error_name}: {answer.error_message}")
    if args.json:
        dump(answer.body)
    else:
        print_acls(console, answer.body.get("resources", []), answer.metadata_offset)
    return 0


async def _acls_at(
    client: MetaquorumClient,
    args: argparse.Namespace,
    console: Console,
    kind: str | None,
    name: str | None,
) -> int:
    """The bindings at --at-offset / --at-time; the filter's values match
    exactly (ANY pattern type: any)."""
    answer = await image_at(client, args, "acls")
    if isinstance(answer, int):
        return answer
    pattern = args.resource_pattern_type.upper()
    wanted = {
        "resourceType": kind and kind.upper(), "resourceName": name,
        "patternType": None if pattern in ("ANY", "MATCH") else pattern,
        "principal": args.principal, "host": args.host,
        "operation": args.operation and args.operation.upper(),
        "permissionType": args.permission_type and args.permission_type.upper(),
    }  # fmt: skip
    resources = acl_resources(answer.body.get("acls", []), wanted)
    if args.json:
        dump({"resources": resources, "offset": answer.body.get("offset")})
    else:
        print_acls(console, resources, answer.body.get("offset"))
    return 0


def _acl_change_flags(p: argparse.ArgumentParser) -> None:
    """create-acl's and delete-acls': a resource, and who may or may not do what."""
    _acl_resource_flags(p, required=True, default_pattern="LITERAL")
    for flag, text in (
        ("--allow-principal", 'a principal to allow, e.g. "User:alice" (repeatable)'),
        ("--deny-principal", "a principal to deny (repeatable)"),
        ("--allow-host", "a host the allowed principals may come from (default *)"),
        ("--deny-host", "a host the denied principals are denied from (default *)"),
        ("--operation", "READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, ALL, ... (repeatable)"),
    ):
        p.add_argument(flag, action="append", default=[], help=text)


async def _create_acl(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    kind, name = _acl_resource(args)
    pattern = args.resource_pattern_type
    entries = _acl_entries(args, args.operation)
    if not entries:
        raise ValueError(
            "nothing to create (give --allow-principal or --deny-principal, and --operation)"
        )
    answer = await client.create_acls(
        [
            {"resourceType": kind, "resourceName": name, "resourcePatternType": pattern,
             "principal": p, "host": h, "operation": op, "permissionType": perm}
            for p, h, op, perm in entries
        ]
    )  # fmt: skip
    if args.json:
        dump(answer.body)
    refused = _fail_results(answer.body.get("results") or [answer.body], answer.error_code)
    if refused is not None:
        return refused
    if not args.json:
        console.print(f"created {len(entries)} ACL(s) on {kind}:{pattern}:{name}")
    return 0


async def _delete_acls(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    kind, name = _acl_resource(args)
    pattern = args.resource_pattern_type
    # Deleting a principal's ACLs without --operation: all of its operations.
    entries = _acl_entries(args, args.operation or ["ANY"])
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
        dump(answer.body)
    refused = _fail_results(results, answer.error_code)
    if refused is not None:
        return refused
    if not args.json:
        deleted = {tuple(sorted(a.items())) for r in results for a in r.get("matchingAcls", [])}
        console.print(f"deleted {len(deleted)} ACL(s)")
    return 0


ACL_COMMANDS = {
    "acls": OpCommand(
        "the ACLs a filter matches (like kafka-acls --list): every one, or those of a "
        "resource (--resource-pattern-type MATCH: every pattern that applies to it)",
        _acls_flags,
        _acls,
        http_timeout_s=history_timeout_s,
    ),
    "create-acl": OpCommand(
        "create ACLs (like kafka-acls --add): each principal x host x operation on the "
        "resource; one that exists already is kept",
        _acl_change_flags,
        _create_acl,
        WRITE_EXITS,
    ),
    "delete-acls": OpCommand(
        "delete ACLs (like kafka-acls --remove): those of the resource with the given "
        "principals, hosts and operations, or every one of the resource without them",
        _acl_change_flags,
        _delete_acls,
        WRITE_EXITS,
    ),
}
