"""``metaquorum explain broker 7`` and ``metaquorum explain partition orders 3``
(GET /v1/explain/...): why a broker is fenced or shutting down, why a
partition is under-replicated, under min ISR or offline, printed for people,
the summary first, then the facts it rests on.

``explain``'s entry goes into the command table as it is (metaquorum/ops.py).
An unknown broker or partition is the cluster's answer (exit 1); a target that
does not parse is a bad command line (exit 2).
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from rich.console import Console

from brokers.client import MetaquorumClient
from brokers.tls import ClientTls

from .ops_command import OpCommand, fail
from .ops_render import dump

EVENTS_SHOWN = 10  # the newest; --json has them all
USAGE = "give `explain broker ID` or `explain partition TOPIC PARTITION`"


def _explain_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=("broker", "partition"), help="what to explain")
    p.add_argument(
        "target",
        nargs="+",
        metavar="ID | TOPIC PARTITION",
        help="the broker id, or the topic and the partition id",
    )


def target_of(kind: str, target: list[str]) -> tuple[int] | tuple[str, int]:
    """(broker id,) or (topic, partition); ValueError naming what is wrong."""
    wanted = 1 if kind == "broker" else 2
    if len(target) != wanted:
        raise ValueError(f"explain {kind} takes {wanted} argument(s), got {len(target)}: {USAGE}")
    number = target[-1]
    if not number.isdigit():
        what = "broker id" if kind == "broker" else "partition id"
        raise ValueError(f"{what} {number!r} is not a non-negative integer: {USAGE}")
    return (int(number),) if kind == "broker" else (target[0], int(number))


def _line(console: Console, text: str) -> None:
    # Not markup: the text holds lists and rule ids in brackets.
    console.print(text, markup=False, highlight=False)


def _when(ms: int | None) -> str:
    if ms is None:
        return "?"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _who(who: dict | None) -> str:
    if not who:
        return ""
    return f" by {who['principal']} ({who['api']})"


def _served(body: dict) -> str:
    s = body["servedBy"]
    role = "the active controller" if s["activeController"] else "not the active controller"
    return f"node {s['nodeId']} ({role}), image at offset {body['offset']}"


def print_broker(body: dict, console: Console) -> None:
    _line(console, f"broker {body['brokerId']}: {body['state'].upper()}   [{_served(body)}]")
    _line(console, body["summary"])
    reg = body["registration"]
    if reg is not None:
        rack = f", rack {reg['rack']}" if reg["rack"] else ""
        _line(
            console,
            f"registered at offset {reg['offset']} ({_when(reg['timeMs'])}){_who(reg['who'])}: "
            f"epoch {reg['brokerEpoch']}, incarnation {reg['incarnationId']}{rack}",
        )
    session = body["session"]
    if session is not None:
        expires = session["expiresInMs"]
        left = f"expires in {expires} ms" if expires >= 0 else f"expired {-expires} ms ago"
        _line(
            console,
            f"session: last heartbeat {session['sinceLastHeartbeatMs']} ms ago, timeout "
            f"{session['sessionTimeoutMs']} ms, {left}",
        )
    shutdown = body["controlledShutdown"]
    if shutdown is not None:
        led = ", ".join(f"{p['topic']}-{p['partition']}" for p in shutdown["leaderOf"])
        _line(console, f"controlled shutdown: {shutdown['why']}")
        if led:
            more = shutdown["leaderOfCount"] - len(shutdown["leaderOf"])
            _line(console, f"  still leads: {led}" + (f" and {more} more" if more else ""))
    if body["events"]:
        _line(console, "events, newest first:")
    for e in body["events"][:EVENTS_SHOWN]:
        _line(
            console,
            f"  {e['offset']:>8}  {_when(e['timeMs'])}  {e['event']:<18} "
            f"{e['cause']}{_who(e['who'])}",
        )
    _line(console, f"look-back: {body['lookBack']['why']}")
    _print_refusals(body, console)


def _print_refusals(body: dict, console: Console) -> None:
    refusals = body["refusals"]
    if refusals is None:
        _line(console, f"refusals: {body['refusalsFrom']}")
        return
    _line(console, f"refusals ({body['refusalsFrom']}): {len(refusals) or 'none'}")
    for r in refusals[:EVENTS_SHOWN]:
        where = f" {r['topic']}-{r['partition']}" if r["partition"] is not None else ""
        _line(
            console,
            f"  {_when(r['timeMs'])}  {r['api']}{where}  {r['rule']}  {r['errorName']}: "
            f"{r['errorMessage'] or ''}",
        )


def print_partition(body: dict, console: Console) -> None:
    _line(
        console,
        f"{body['topic']}-{body['partition']}: {', '.join(body['status'])}   [{_served(body)}]",
    )
    leader = "none" if body["leader"] < 0 else body["leader"]
    _line(
        console,
        f"leader {leader} (epoch {body['leaderEpoch']}), replicas {body['replicas']}, "
        f"ISR {body['isr']}, ELR {body['elr']}, min ISR {body['minIsr']}",
    )
    for reason in body["reasons"]:
        _line(console, f"  {reason}")
    _line(console, "replicas:")
    for r in body["replicaStates"]:
        rule = f"  [{r['rule']}]" if r["rule"] else ""
        _line(console, f"  {r['brokerId']:>6}  {r['brokerState']:<18} {r['why']}{rule}")
    if body["history"]:
        _line(console, "history, newest first:")
    for h in body["history"][:EVENTS_SHOWN]:
        _line(
            console,
            f"  {h['offset']:>8}  {_when(h['timeMs'])}  {h['change']:<8} leader {h['leader']}"
            f" ISR {h['isr']} ELR {h['elr']}{_who(h['who'])}",
        )
    _line(console, f"look-back: {body['lookBack']['why']}")
    refused = body["lastRefusedAlterPartition"]
    if refused is not None:
        _line(
            console,
            f"last refused AlterPartition: {_when(refused['timeMs'])} from broker "
            f"{refused['brokerId']}, {refused['rule']}: {refused['errorMessage'] or ''}",
        )
    _print_refusals(body, console)


async def _explain(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    target = target_of(args.kind, args.target)
    if args.kind == "broker":
        answer = await client.explain_broker(*target)
    else:
        answer = await client.explain_partition(*target)
    if args.json:
        dump(answer.body)
    if not answer.ok:
        return fail(f"{answer.error_name}: {answer.error_message}")
    if not args.json:
        (print_broker if args.kind == "broker" else print_partition)(answer.body, console)
    return 0


EXPLAIN_COMMANDS = {
    "explain": OpCommand(
        "why a broker is fenced or shutting down, or why a partition is under-replicated, "
        "under min ISR or offline (GET /v1/explain/...): `explain broker ID`, "
        "`explain partition TOPIC PARTITION`",
        _explain_flags,
        _explain,
    ),
}
