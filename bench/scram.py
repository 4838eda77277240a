"""What SCRAM credentials cost (figures, not asserts): the client's salting
(``Hi``, PBKDF2) at the iteration bounds, which ``metaquorum scram set``
pays once; the controller's key derivation per upsertion; and the pure
controller deciding an AlterUserScramCredentials of 1,000 upsertions (the
request's limit), as the orderer decides it, on the loop.

    python bench/scram.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.messages import (  # noqa: E402 - after the path is set
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from metadata_records.limits import MAX_SCRAM_ALTERATIONS  # noqa: E402
from metadata_records.scram import derived_keys, random_salt, salted_password  # noqa: E402
from tests.harness import ControllerHarness  # noqa: E402


def median_ms(fn, rounds: int) -> float:
    """The median milliseconds of ``rounds`` calls of ``fn`` (bench/delegation_tokens.py too)."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    salt = random_salt()
    for mechanism, name in ((1, "SCRAM-SHA-256"), (2, "SCRAM-SHA-512")):
        for iterations in (4096, 16384):
            ms = median_ms(
                lambda i=iterations, m=mechanism: salted_password(b"pencil", salt, i, m), rounds
            )
            print(f"client Hi {name} {iterations} iterations: {ms:.2f} ms")
        salted = salted_password(b"pencil", salt, 4096, mechanism)
        us = median_ms(
            lambda m=mechanism, p=salted: [derived_keys(m, p) for _ in range(1000)], rounds
        )
        print(f"controller keys {name}: {us:.2f} us per upsertion")
    upsertions = tuple(
        ScramCredentialUpsertion(f"user-{i}", 1 + i % 2, 4096, salt, b"x" * 32)
        for i in range(MAX_SCRAM_ALTERATIONS)
    )
    times = []
    for _ in range(rounds):
        h = ControllerHarness()
        start = time.perf_counter()
        h.controller.handle(AlterUserScramCredentialsRequest((), upsertions), h.now_ms)
        times.append((time.perf_counter() - start) * 1000)
    print(
        f"controller decides {MAX_SCRAM_ALTERATIONS} upsertions: "
        f"{statistics.median(times):.2f} ms (median of {rounds})"
    )


if __name__ == "__main__":
    main()
