"""The delegation token command (KIP-48), as kafka-delegation-tokens.sh's
``--create``, ``--renew``, ``--expire`` and ``--describe``:
``delegation-tokens create|renew|expire|describe``.

An HMAC is a token's password, so it is never a flag (a command line is in
``ps`` and the shell's history): renew and expire read it from the first
line of ``--hmac-file`` (stdin with ``-``), and create prints it, as Kafka's
tool does, or writes it to ``--hmac-file`` (created 0600) and prints only
the token's id. ``describe`` prints no HMAC in its table; ``--json`` prints
the answer as it came (with the HMACs the caller may see).

Its entry goes into the command table as it is (metaquorum/ops.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys

from rich.console import Console

from brokers.client import MetaquorumClient
from brokers.tls import ClientTls

from .ops_command import WRITE_EXITS, OpCommand, fail
from .ops_render import dump
from .output import print_table

_ACTIONS = ("create", "renew", "expire", "describe")


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=_ACTIONS,
        help="create: a token; renew: move its expiry on; expire: end it (now, or after "
        "--expiry-time-period-ms); describe: the tokens this caller may see",
    )
    p.add_argument(
        "--owner",
        metavar="TYPE:NAME",
        help="create: the token's owner (default: the caller); describe: an owner or renewer "
        "to match (repeat for several)",
        action="append",
        default=[],
    )
    p.add_argument(
        "--renewer",
        metavar="User:NAME",
        action="append",
        default=[],
        help="create: a principal that may renew or expire it (repeat for several)",
    )
    p.add_argument(
        "--max-life-time-period",
        dest="max_lifetime_ms",
        type=int,
        default=-1,
        metavar="MS",
        help="create: its max lifetime in ms (default, or more than the cluster's: the "
        "cluster's delegation.token.max.lifetime.ms)",
    )
    p.add_argument(
        "--renew-time-period",
        dest="renew_period_ms",
        type=int,
        default=-1,
        metavar="MS",
        help="renew: how long from now (default: the cluster's delegation.token.expiry.time.ms)",
    )
    p.add_argument(
        "--expiry-time-period",
        dest="expiry_period_ms",
        type=int,
        default=-1,
        metavar="MS",
        help="expire: expire it this long from now (default -1: now, and remove it)",
    )
    p.add_argument(
        "--hmac-file",
        metavar="FILE",
        help="renew, expire: the token's HMAC (base64) is this file's first line (\"-\": "
        "stdin); create: write the new HMAC here (mode 0600) instead of printing it",
    )
    p.add_argument(
        "--linearizable", action="store_true", help="describe: read through the active controller"
    )


def _read_hmac(path: str | None) -> str:
    if path is None:
        raise ValueError("renew and expire need --hmac-file FILE (or - for stdin): never a flag")
    try:
        if path == "-":
            line = sys.stdin.readline()
        else:
            with open(path, encoding="utf-8") as f:
                line = f.readline()
    except OSError as e:
        raise ValueError(f"--hmac-file {path}: cannot read it ({e.strerror})") from None
    except UnicodeDecodeError:
        raise ValueError(f"--hmac-file {path}: not text (write the HMAC in base64)") from None
    hmac = line.strip()
    if not hmac:
        raise ValueError(f"--hmac-file {path}: its first line is empty; write the HMAC there")
    return hmac


def _write_hmac(path: str, hmac: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ValueError(f"--hmac-file {path}: exists already; name a new file") from None
    except OSError as e:
        raise ValueError(f"--hmac-file {path}: cannot create it ({e.strerror})") from None
    with os.fdopen(fd, "w") as f:
        f.write(hmac + "\n")


def _time(ms: int) -> str:
    if ms < 0:
        return str(ms)
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def _delegation_tokens(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    if args.action == "describe":
        return await _describe(client, args, console)
    if args.action == "create":
        if len(args.owner) > 1:
            raise ValueError("create takes at most one --owner")
        if args.hmac_file is not None and os.path.exists(args.hmac_file):
            raise ValueError(f"--hmac-file {args.hmac_file}: exists already; name a new file")
        answer = await client.create_delegation_token(
            args.renewer, args.owner[0] if args.owner else None, args.max_lifetime_ms
        )
    elif args.action == "renew":
        answer = await client.renew_delegation_token(
            _read_hmac(args.hmac_file), args.renew_period_ms
        )
    else:
        answer = await client.expire_delegation_token(
            _read_hmac(args.hmac_file), args.expiry_period_ms
        )
    body = answer.body
    failed = body.get("errorCode", answer.error_code) != 0
    if args.action == "create" and not failed and args.hmac_file is not None:
        _write_hmac(args.hmac_file, body["hmac"])
        body = {**body, "hmac": f"(written to {args.hmac_file})"}
    if args.json:
        dump(body)
    if failed:
        return fail(f"{body.get('errorName')}: {body.get('errorMessage')}")
    if args.json:
        return 0
    if args.action == "create":
        print_table(
            console,
            "Delegation token",
            ["Token id", "HMAC", "Owner", "Issued", "Expires", "Max"],
            [
                [
                    body["tokenId"],
                    body["hmac"],
                    f"{body['principalType']}:{body['principalName']}",
                    _time(body["issueTimestampMs"]),
                    _time(body["expiryTimestampMs"]),
                    _time(body["maxTimestampMs"]),
                ]
            ],
        )
    elif args.action == "expire" and body["expiryTimestampMs"] < 0:
        console.print("expired the token (removed)")
    else:
        verb = "renewed" if args.action == "renew" else "expires"
        console.print(f"{verb}: the token expires at {_time(body['expiryTimestampMs'])}")
    return 0


async def _describe(client: MetaquorumClient, args: argparse.Namespace, console: Console) -> int:
    answer = await client.describe_delegation_tokens(args.owner, linearizable=args.linearizable)
    body = answer.body
    if args.json:
        dump(body)
    if body.get("errorCode"):
        return fail(f"{body.get('errorName')}: {body.get('errorMessage')}")
    if not args.json:
        rows = [
            [
                t["tokenId"],
                f"{t['principalType']}:{t['principalName']}",
                ", ".join(f"{r['principalType']}:{r['principalName']}" for r in t["renewers"]),
                _time(t["issueTimestamp"]),
                _time(t["expiryTimestamp"]),
                _time(t["maxTimestamp"]),
            ]
            for t in body.get("tokens", [])
        ]
        print_table(
            console,
            f"Delegation tokens at offset {answer.metadata_offset} (HMACs with --json)",
            ["Token id", "Owner", "Renewers", "Issued", "Expires", "Max"],
            rows,
        )
    return 0


DELEGATION_TOKEN_COMMANDS = {
    "delegation-tokens": OpCommand(
        "delegation tokens (KIP-48, like kafka-delegation-tokens.sh): create one (its HMAC "
        "printed or written to --hmac-file), renew or expire one by its HMAC (read from "
        "--hmac-file, never a flag), describe those this caller may see",
        _flags,
        _delegation_tokens,
        WRITE_EXITS,
    )
}
