"""What delegation tokens cost (figures, not asserts): one HMAC (HmacSHA512
of the id); the pure controller deciding a Create, and a Renew that finds
its token by HMAC among N tokens (each token's HMAC computed once per
controller, then compared: a new leader's first Renew computes them all);
the sweep over N tokens; and an admin's describe of N tokens, its HMACs
computed, then cached.

    python bench/delegation_tokens.py [--tokens 10000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from api.auth import ANONYMOUS_ADMIN, Role  # noqa: E402
from api.routes.delegation_tokens import described  # noqa: E402
from bench.scram import median_ms  # noqa: E402
from controller.messages import (  # noqa: E402 - after the path is set
    CreateDelegationTokenRequest,
    RenewDelegationTokenRequest,
)
from metadata_records.delegation_tokens import token_hmac  # noqa: E402
from tests.harness import ControllerHarness  # noqa: E402

SECRET = "bench-delegation-token-secret-0123456789"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}, {args.tokens} tokens")
    print(f"one HMAC: {median_ms(lambda: token_hmac(SECRET, 'x' * 22), 1000) * 1000:.1f} us")

    h = ControllerHarness(config_options={"delegation_token_secret": SECRET})
    made = []

    def create_all():
        for _ in range(args.tokens):
            made.append(h.run(CreateDelegationTokenRequest("User:a", h.wall_ms)).hmac)

    ms = median_ms(create_all, 1)
    print(f"create: {ms / args.tokens * 1000:.0f} us a token (decided and committed)")
    last = made[-1]
    h.new_leader()  # a new controller: no HMAC computed yet

    def renew():
        h.run(RenewDelegationTokenRequest("User:a", h.wall_ms, last))

    print(f"a new leader's first renew (every HMAC computed): {median_ms(renew, 1):.1f} ms")
    print(f"renew after that (HMACs cached): {median_ms(renew, args.rounds):.2f} ms")
    h.advance(8 * 24 * 3600 * 1000)
    h.now_ms += 3600 * 1000

    def sweep():
        h.controller.maybe_sweep_delegation_tokens(h.now_ms, h.wall_ms)

    print(f"the sweep, every token expired (1,000 a run): {median_ms(sweep, 1):.1f} ms")
    h2 = ControllerHarness(config_options={"delegation_token_secret": SECRET})
    for _ in range(args.tokens):
        h2.run(CreateDelegationTokenRequest("User:a", h2.wall_ms))
    cache: dict[str, bytes] = {}

    def describe():
        described(h2.image, ANONYMOUS_ADMIN.__class__(Role.ADMIN, token="token/ops"), SECRET,
                  None, cache)  # fmt: skip

    cold = median_ms(describe, 1)
    warm = median_ms(describe, args.rounds)
    print(f"an admin's describe of {args.tokens} tokens: {cold:.1f} ms (HMACs computed), "
          f"{warm:.1f} ms (HMACs cached)")  # fmt: skip


if __name__ == "__main__":
    main()
