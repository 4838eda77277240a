"""Kafka's test ``MockRandom`` (server-common's
``org.apache.kafka.server.util.MockRandom``: a fixed-seed ``java.util.Random``
with its own generator), so that placement tests get Kafka's exact lists."""

from __future__ import annotations

_MASK_64 = (1 << 64) - 1


class KafkaMockRandom:
    def __init__(self, state: int = 17) -> None:
        self.state = state

    def _next(self, bits: int) -> int:
        self.state = (self.state * 2862933555777941757 + 3037000493) & _MASK_64
        return self.state >> (64 - bits)

    def randrange(self, bound: int) -> int:
        """``java.util.Random.nextInt(bound)``, rejection loop included."""
        r = self._next(31)
        m = bound - 1
        if bound & m == 0:  # a power of two
            return (bound * r) >> 31
        u = r
        while True:
            r = u % bound
            if u - r + m < 1 << 31:  # Java's int overflow check
                return r
            u = self._next(31)
