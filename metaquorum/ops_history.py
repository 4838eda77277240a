"""The cluster as it was, for operators: ``--at-offset N`` / ``--at-time T``
on ``brokers``, ``topics``, ``configs`` and ``acls`` (the same tables, from
GET /v1/image at that point), and ``diff A B`` (GET /v1/image/diff: what
changed between two offsets, one line an entity).

``diff``'s entry goes into the command table as it is (metaquorum/ops.py).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.markup import escape

from brokers.client import Answer, MetaquorumClient
from brokers.tls import ClientTls

from .ops_command import OpCommand, default_http_timeout_s, fail
from .ops_render import dump

CONFIG_SOURCES = {2: "DYNAMIC_TOPIC_CONFIG", 4: "DYNAMIC_BROKER_CONFIG"}


def add_at_flags(p: argparse.ArgumentParser) -> None:
    at = p.add_mutually_exclusive_group()
    at.add_argument(
        "--at-offset",
        type=int,
        metavar="N",
        help="as the cluster stood after offset N (from the voter's history window)",
    )
    at.add_argument(
        "--at-time",
        metavar="T",
        help="as it stood at time T: ISO-8601 (2026-12-04T03:12:00Z) or epoch ms",
    )


HISTORY_HTTP_TIMEOUT_S = (
    120.0  # a process's first image of a million partitions decodes a checkpoint
)


def history_timeout_s(args: argparse.Namespace) -> float:
    """How long a call may take: building a past image (``--at-offset``,
    ``diff``) can take seconds; everything else is answered at once."""
    if at_given(args) or args.command == "diff":
        return HISTORY_HTTP_TIMEOUT_S
    return default_http_timeout_s(args)


def at_given(args: argparse.Namespace) -> bool:
    return (
        getattr(args, "at_offset", None) is not None or getattr(args, "at_time", None) is not None
    )


async def image_at(
    client: MetaquorumClient, args: argparse.Namespace, only: str, topics: str | None = None
) -> Answer | int:
    """The image's parts ``only`` at the flags' offset or time, or the exit
    code of the failure (said on stderr, with what to ask for instead)."""
    if args.at_offset is not None and args.at_offset < 0:
        raise ValueError(f"--at-offset {args.at_offset}: offsets start at 0")
    answer = await client.image(args.at_offset, args.at_time, only, topics)
    if answer.ok:
        return answer
    body = answer.body
    if "oldestOffset" in body:
        return fail(
            f"{answer.error_name}: {answer.error_message} (use --at-offset "
            f"{body['oldestOffset']} or later)"
        )
    return fail(f"{answer.error_name}: {answer.error_message}")


def config_entries(body: dict, resource_type: int, resource_name: str) -> list[dict]:
    """The dynamic configs of one resource in an image, as DescribeConfigs'
    entries (name, value, configSourceName)."""
    source = CONFIG_SOURCES[resource_type]
    if resource_type == 4 and resource_name == "":
        source = "DYNAMIC_DEFAULT_BROKER_CONFIG"
    for resource in body.get("configs", []):
        if (resource["resourceType"], resource["resourceName"]) == (resource_type, resource_name):
            return [
                {"name": k, "value": v, "configSourceName": source}
                for k, v in resource["configs"].items()
            ]
    return []


def acl_resources(bindings: list[dict], wanted: dict[str, str | None]) -> list[dict]:
    """Bindings matching ``wanted`` exactly (None: any), grouped by resource
    as DescribeAcls answers."""
    groups: dict[tuple, dict] = {}
    for b in bindings:
        if any(v is not None and b.get(k) != v for k, v in wanted.items()):
            continue
        key = (b["resourceType"], b["resourceName"], b["patternType"])
        group = groups.setdefault(
            key,
            {"resourceType": key[0], "resourceName": key[1], "patternType": key[2], "acls": []},
        )
        group["acls"].append(
            {k: b[k] for k in ("principal", "host", "operation", "permissionType")}
        )
    return [groups[k] for k in sorted(groups)]


# ---------------------------------------------------------------- diff


def _diff_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("from_offset", type=int, metavar="A", help="the first offset")
    p.add_argument("to_offset", type=int, metavar="B", help="the second offset")
    p.add_argument(
        "--max-changes",
        type=int,
        default=10_000,
        help="list at most this many changes (1..100000; the total is counted)",
    )


async def _diff(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    if args.from_offset < 0 or args.to_offset < 0:
        raise ValueError("offsets start at 0")
    if not 1 <= args.max_changes <= 100_000:
        raise ValueError(f"--max-changes {args.max_changes} must be within 1..100000")
    answer = await client.image_diff(args.from_offset, args.to_offset, args.max_changes)
    if not answer.ok:
        hint = answer.body.get("oldestOffset")
        more = f" (the oldest offset served is {hint})" if hint is not None else ""
        return fail(f"{answer.error_name}: {answer.error_message}{more}")
    body = answer.body
    if args.json:
        dump(body)
        return 0
    changes = body.get("changes", [])
    shown = f" ({len(changes)} shown)" if body.get("truncated") else ""
    console.print(
        f"{body.get('total')} changes from offset {body.get('from')} to offset "
        f"{body.get('to')}{shown}",
        highlight=False,
    )
    for change in changes:
        console.print(escape(change_line(change)), highlight=False, soft_wrap=True)
    return 0


def change_line(change: dict[str, Any]) -> str:
    """One change as an operator reads it: what, then how (+ created, - gone,
    ~ the fields that changed, old -> new)."""
    what = _what(change["kind"], change["key"])
    before, after = change["before"], change["after"]
    if before is None:
        return f"+ {what}: {_brief(after)}"
    if after is None:
        return f"- {what}: {_brief(before)}"
    if isinstance(before, dict) and isinstance(after, dict):
        fields = [
            f"{k} {_brief(before.get(k))} -> {_brief(after.get(k))}"
            for k in sorted(before.keys() | after.keys())
            if before.get(k) != after.get(k)
        ]
        return f"~ {what}: {', '.join(fields)}"
    return f"~ {what}: {_brief(before)} -> {_brief(after)}"


def _what(kind: str, key: dict) -> str:
    if kind == "broker":
        return f"broker {key['brokerId']}"
    if kind == "topic":
        return f"topic {key['topic']}"
    if kind == "partition":
        return f"partition {key['topic']}-{key['partition']}"
    if kind == "config":
        where = {2: "topic ", 4: "broker "}.get(key["resourceType"], "")
        name = key["resourceName"] or "(cluster default)"
        return (
            f"config {key['name']} of {where}{name}"
            if name != "(cluster default)"
            else (f"config {key['name']} of the cluster default")
        )
    if kind == "acl":
        return f"acl {key['id']}"
    if kind == "clientQuota":
        return "client quota " + ",".join(
            f"{c['entityType']}={c['entityName'] if c['entityName'] is not None else '<default>'}"
            for c in key["entity"]
        )
    if kind == "feature":
        return f"feature {key['name']}"
    return kind


def _brief(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(_brief(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_brief(v)}" for k, v in value.items()) + "}"
    return "-" if value is None else str(value)


HISTORY_COMMANDS = {
    "diff": OpCommand(
        "what changed between the cluster after offset A and after offset B: brokers, "
        "topics, partitions, configs, ACLs, client quotas, features, voters (from the "
        "voter's history window)",
        _diff_flags,
        _diff,
        http_timeout_s=history_timeout_s,
    ),
}
