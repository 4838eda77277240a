"""The SCRAM credential command (KIP-554), as kafka-configs' ``--entity-type
users --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'`` and
``--delete-config SCRAM-SHA-256`` do it: ``scram list``, ``scram set``,
``scram delete``.

``set`` salts the password here, as Kafka's Admin client does (a random salt
as ``ScramFormatter.secureRandomBytes`` makes one, then ``Hi``: PBKDF2-HMAC),
and sends only the salt and the salted password (metadata_records/scram.py).
The password is never a flag (a command line is in ``ps`` and the shell's
history): it is the first line of ``--password-file``, or of stdin with
``--password-file -``.

Its entry goes into the command table as it is (metaquorum/ops.py).
"""

from __future__ import annotations

import argparse
import base64
import sys

from rich.console import Console

from brokers.client import MetaquorumClient
from brokers.tls import ClientTls
from metadata_records.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    mechanism_name,
    random_salt,
    salted_password,
)

from .ops_command import WRITE_EXITS, OpCommand, fail
from .ops_render import dump
from .output import print_table

_ACTIONS = ("list", "set", "delete")


def _scram_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=_ACTIONS,
        help="list: users' mechanisms and iterations; set: a user's credential for a "
        "mechanism; delete: a user's credential for a mechanism",
    )
    p.add_argument(
        "--user",
        action="append",
        default=[],
        metavar="NAME",
        help="the user (list: repeat for several; none: every user)",
    )
    p.add_argument(
        "--mechanism",
        choices=sorted(MECHANISM_TYPES),
        default="SCRAM-SHA-256",
        help="set, delete: the mechanism (default SCRAM-SHA-256)",
    )
    p.add_argument(
        "--password-file",
        metavar="FILE",
        help='set: the password is this file\'s first line ("-": stdin); never a flag',
    )
    p.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        help=f"set: iterations of Hi, in [{MIN_ITERATIONS}, {MAX_ITERATIONS}] "
        f"(default {DEFAULT_ITERATIONS}, as kafka-configs)",
    )
    p.add_argument(
        "--linearizable", action="store_true", help="list: read through the active controller"
    )


def _password(path: str | None) -> bytes:
    """The first line of ``path`` (stdin for "-"), without its line end."""
    if path is None:
        raise ValueError("set needs --password-file FILE (or - for stdin): never a password flag")
    try:
        if path == "-":
            line = sys.stdin.buffer.readline()
        else:
            with open(path, "rb") as f:
                line = f.readline()
    except OSError as e:
        raise ValueError(f"--password-file {path}: cannot read it ({e.strerror})") from None
    password = line.rstrip(b"\r\n")
    if not password:
        raise ValueError(
            f"--password-file {path}: its first line is empty; write the password there"
        )
    return password


def _one_user(args: argparse.Namespace) -> str:
    if len(args.user) != 1:
        raise ValueError(f"{args.action} needs exactly one --user")
    return args.user[0]


async def _scram(
    client: MetaquorumClient, args: argparse.Namespace, console: Console, tls: ClientTls | None
) -> int:
    if args.action == "list":
        return await _list(client, args, console)
    user = _one_user(args)
    mechanism = MECHANISM_TYPES[args.mechanism]
    if args.action == "delete":
        answer = await client.alter_user_scram_credentials(
            deletions=[{"name": user, "mechanism": mechanism}]
        )
        done = f"deleted {args.mechanism} credential of user {user}"
    else:
        if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
            raise ValueError(
                f"--iterations {args.iterations} is outside [{MIN_ITERATIONS}, {MAX_ITERATIONS}]"
            )
        salt = random_salt()
        salted = salted_password(_password(args.password_file), salt, args.iterations, mechanism)
        answer = await client.alter_user_scram_credentials(
            upsertions=[
                {
                    "name": user,
                    "mechanism": mechanism,
                    "iterations": args.iterations,
                    "salt": base64.b64encode(salt).decode(),
                    "saltedPassword": base64.b64encode(salted).decode(),
                }
            ]
        )
        done = f"set {args.mechanism} credential of user {user} ({args.iterations} iterations)"
    result = (answer.body.get("results") or [answer.body])[0]
    if args.json:
        dump(result)
    if result.get("errorCode", answer.error_code) != 0:
        return fail(f"{result.get('errorName')}: {result.get('errorMessage')}")
    if not args.json:
        console.print(done)
    return 0


async def _list(client: MetaquorumClient, args: argparse.Namespace, console: Console) -> int:
    answer = await client.describe_user_scram_credentials(args.user, linearizable=args.linearizable)
    results = answer.body.get("results", [])
    if args.json:
        dump(answer.body)
    else:
        rows = [
            [r["user"], mechanism_name(i["mechanism"]), str(i["iterations"])]
            for r in results
            for i in r.get("credentialInfos", [])
        ]
        print_table(
            console,
            f"SCRAM credentials at offset {answer.metadata_offset}",
            ["User", "Mechanism", "Iterations"],
            rows,
        )
    missing = [r for r in results if r.get("errorCode")]
    for r in missing:
        fail(f"{r.get('errorName')}: {r.get('errorMessage')}")
    return 1 if missing else 0


SCRAM_COMMANDS = {
    "scram": OpCommand(
        "users' SCRAM credentials (KIP-554, like kafka-configs --entity-type users "
        "--add-config/--delete-config SCRAM-SHA-256=...): list them (mechanisms and "
        "iterations only), set one from a password file (salted here, never sent), or delete one",
        _scram_flags,
        _scram,
        WRITE_EXITS + " list: 1 when a named user has no credential.",
    )
}
