"""``metaquorum what-if --lose brokers:3,4`` (GET /v1/what-if, for people:
what would go offline, fall under min ISR, and who would lead instead), and
the guard ``unregister-broker`` asks first: a broker whose loss takes
partitions offline is not unregistered unless forced, and the refusal names
them and what to do.

``what-if``'s entry goes into the command table as it is (metaquorum/ops.py).
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.markup import escape

from brokers.client import MetaquorumClient, RequestRejected
from brokers.tls import ClientTls

from .ops_command import OpCommand, fail
from .ops_render import dump

DEFAULT_LISTED = 20
GUARD_NAMED = 5  # offline partitions an unregister refusal names (and a count of the rest)

_LABELS = {
    "offline": "OFFLINE",
    "underMinIsr": "UNDER MIN ISR",
    "leaderMoved": "LEADER MOVED",
    "isrShrunk": "ISR SHRUNK",
}


def _what_if_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lose",
        action="append",
        required=True,
        metavar="brokers:ID,..|racks:RACK,..",
        help="the brokers to lose, or every broker of these racks; give it twice for both",
    )
    p.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LISTED,
        metavar="N",
        help=f"list at most N changed partitions, worst first (default {DEFAULT_LISTED}); "
        "the counts are always whole",
    )


def _leader(broker: int) -> str:
    return "none" if broker < 0 else str(broker)


def print_what_if(body: dict, console: Console) -> None:
    lost = ", ".join(map(str, body["lost"])) or "none"
    console.print(
        f"losing brokers {lost} (image at offset {body['offset']}), "
        f"of {body['totalPartitions']} partitions:"
    )
    if body["alreadyFenced"]:
        fenced = ", ".join(map(str, body["alreadyFenced"]))
        console.print(f"  (fenced already, nothing changes: {fenced})")
    counts = body["counts"]
    for key, label in (*_LABELS.items(), ("untouched", "UNTOUCHED")):
        console.print(f"  {label.lower():<14} {counts[key]}")
    for p in body["partitions"]:
        line = (
            f"{_LABELS[p['outcome']]:<14} {escape(p['topic'])}-{p['partition']}  "
            f"leader {_leader(p['leader'])} -> {_leader(p['newLeader'])}  "
            f"ISR {p['isr']} -> {p['newIsr']} (min {p['minIsr']})"
        )
        console.print(line + (f"  ELR {p['newElr']}" if p["newElr"] else ""))
    if body["truncated"]:
        console.print(f"... and {len_changed(counts) - len(body['partitions'])} more (--limit)")


def len_changed(counts: dict) -> int:
    return sum(counts[key] for key in _LABELS)


async def _what_if(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    if args.limit < 0:
        raise ValueError(f"--limit {args.limit}: give 0 or more")
    answer = await client.what_if(args.lose, args.limit)
    if args.json:
        dump(answer.body)
    if not answer.ok:
        return fail(f"{answer.error_name}: {answer.error_message}")
    if not args.json:
        print_what_if(answer.body, console)
    return 0


async def offline_refusal(client: MetaquorumClient, broker_id: int) -> str | None:
    """Why unregistering ``broker_id`` is refused (partitions it would take
    offline, and what to do), or None when it takes none offline."""
    try:
        answer = await client.what_if([f"brokers:{broker_id}"], GUARD_NAMED)
    except RequestRejected:  # not registered: the unregister itself answers that
        return None
    if not answer.ok:
        return (
            f"what-if could not be asked ({answer.error_name}: {answer.error_message}), so "
            f"whether unregistering broker {broker_id} takes partitions offline is unknown; "
            "give --force to unregister without asking"
        )
    offline = answer.body["counts"]["offline"]
    if not offline:
        return None
    named = [
        f"{p['topic']}-{p['partition']}"
        for p in answer.body["partitions"]
        if p["outcome"] == "offline"
    ]
    more = f" and {offline - len(named)} more" if offline > len(named) else ""
    return (
        f"unregistering broker {broker_id} would take {offline} partition(s) offline "
        f"({', '.join(named)}{more}): it is their last in-sync replica. Move those replicas "
        f"to other brokers first (POST /v1/reassignments), or give --force to unregister anyway "
        f"(see `metaquorum what-if --lose brokers:{broker_id}`)"
    )


WHAT_IF_COMMANDS = {
    "what-if": OpCommand(
        "what losing brokers or whole racks would do (GET /v1/what-if): partitions "
        "that would go offline, fall under min ISR or move their leader, by the "
        "controller's own rules; nothing is written",
        _what_if_flags,
        _what_if,
    ),
}
