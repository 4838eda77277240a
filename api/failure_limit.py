"""Failed hashed-token checks, limited per client address.

A hashed token's id is public (api/token_hashes.py), so anyone who knows one
makes the server run that entry's scrypt with a secret of their choosing,
unauthenticated: up to 32 MiB and 130 ms of a core each. The token table
(api/auth.py) asks ``wait`` before it runs a check, and reports a check that
failed with ``failed``; an address whose failures ran out of room is refused
(429 with ``Retry-After``) before any scrypt is done for it.

* **What counts**: only a check that ran scrypt and failed (a wrong secret
  for a known id). Everything else that fails costs a dict lookup (an unknown
  id, a plain token, a wrong secret already refused once) and is not counted;
  a success is never counted and never waits.
* **What waits**: only a request that needs a scrypt, i.e. a hashed token
  seen for the first time. A token already verified, a plain token and a
  certificate are answered as always, from a limited address too.
* **The numbers**: a token bucket per address, ``FAILURE_BURST`` (10)
  failures at once, then ``FAILURES_PER_S`` (1) a second. Checks that were
  already running when the bucket ran out are still charged (the level goes
  below zero), so an address that sent 64 wrong secrets at once waits for
  them all. One address can so make an HTTP process spend at most about 7% of
  a core on scrypt at the default parameters (67 ms a check), 13% at the
  costliest allowed.
* **A fleet behind one NAT address**: brokers whose tokens are right never
  fail, so they never use the bucket; their first checks after a restart pass
  whatever their number (bounded only by the table's 64 waiting checks). A
  broker with a wrong token fails once per start (its wrong token is then
  remembered): ten misconfigured brokers restarting at once use the burst,
  and the first checks of the others behind that address wait a second per
  failure past it.
* **Memory**: at most ``MAX_ADDRESSES`` (4096) addresses, the least recently
  failed dropped first (about 1 MiB with IPv6 addresses, measured); an
  address whose bucket is full again is forgotten.
* **Per process**: each HTTP process (each worker of ``--http-workers``)
  keeps its own table, and the kernel spreads one address's connections over
  them, so an address gets the numbers above once per worker.

It does not stop an attacker with many addresses (an IPv6 prefix); the
token table's two checking threads and 64 waiting checks bound what the
server spends at once whatever the addresses.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

FAILURES_PER_S = 1.0
FAILURE_BURST = 10
MAX_ADDRESSES = 4096


class FailureLimit:
    """A token bucket of failed checks per client address (the docstring)."""

    def __init__(
        self,
        rate: float = FAILURES_PER_S,
        burst: int = FAILURE_BURST,
        max_addresses: int = MAX_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.max_addresses = max_addresses
        self.clock = clock
        # address -> [level, when]: the bucket's level (failures it still
        # takes, below 0 when owed) as of ``when``; absent means full.
        self._buckets: OrderedDict[Hashable, list[float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def _level(self, address: Hashable, now: float) -> float:
        bucket = self._buckets.get(address)
        if bucket is None:
            return float(self.burst)
        level = min(float(self.burst), bucket[0] + (now - bucket[1]) * self.rate)
        if level >= self.burst:
            del self._buckets[address]  # full again: nothing to remember
        return level

    def wait(self, address: Hashable) -> float:
        """Seconds before ``address`` may have a check run; 0 if now."""
        level = self._level(address, self.clock())
        return 0.0 if level >= 1 else (1 - level) / self.rate

    def failed(self, address: Hashable) -> None:
        """A check for ``address`` ran and failed."""
        now = self.clock()
        level = self._level(address, now)
        self._buckets[address] = [level - 1, now]
        self._buckets.move_to_end(address)
        while len(self._buckets) > self.max_addresses:
            self._buckets.popitem(last=False)
