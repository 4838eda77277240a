"""``metaquorum hash-token``: a tokens-file line that holds a token's salted
scrypt hash instead of the token (api/token_hashes.py).

Without ``--token-file``, a new ``ID.SECRET`` token is made and shown once on
stderr; stdout gets only the line, so ``metaquorum hash-token --role admin >>
tokens`` appends it. With ``--token-file FILE`` (``-`` for stdin) the token in
the file is hashed; it must be ``ID.SECRET``. ``--log-n`` outside the safe
range (api/token_hashes.py: 10 to 15) is refused (exit 2); no token is
shown.
"""

from __future__ import annotations

import argparse
import sys

ROLES = ("admin", "broker", "read")


def add_hash_token_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--role", required=True, choices=ROLES, help="the token's role")
    p.add_argument(
        "--broker-id", type=int, help="bind a broker token to this broker id (as in the file)"
    )
    p.add_argument(
        "--log-n",
        type=int,
        default=14,
        help="scrypt's cost, log2 N: 10 to 15 (15: 32 MiB and about twice the time of the "
        "default 14 per check, on every voter, once per token and start)",
    )
    p.add_argument(
        "--token-file",
        help="hash the ID.SECRET token in this file (- for stdin) instead of making one",
    )


def _read_token(path: str) -> str:
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--token-file {path}: cannot read it ({e})") from None
    words = text.split()
    if len(words) != 1:
        raise ValueError(f"--token-file {path}: expected one token, alone in the file")
    return words[0]


def run_hash_token(args: argparse.Namespace) -> int:
    from api.auth import INT32_MAX
    from api.token_hashes import TokenHashError, hash_token, new_token

    try:
        if args.broker_id is not None:
            if args.role != "broker":
                raise ValueError("--broker-id binds a broker token: use it with --role broker")
            if not 0 <= args.broker_id <= INT32_MAX:
                raise ValueError(f"--broker-id {args.broker_id} is not in [0, {INT32_MAX}]")
        made = args.token_file is None
        token = new_token() if made else _read_token(args.token_file)
        hashed = hash_token(token, args.log_n)
    except (ValueError, TokenHashError) as e:
        print(f"metaquorum hash-token: {e}", file=sys.stderr)
        return 2
    bound = f" {args.broker_id}" if args.broker_id is not None else ""
    if made:
        print(
            f"token (give it to the client; only its hash is kept): {token}",
            file=sys.stderr,
        )
    print(f"{hashed} {args.role}{bound}")
    return 0
