"""Who asked for each batch of a synthetic log, as a real cluster's voters
would record it (issue 43's shared contract: docs/pipeline.md "Who changed
what").

Brokers speak as ``broker:`` principals (most with a client certificate, some
with a token), from their own address and a new source port per connection;
two admins write topics and configs; the controller's own work (fencing,
elections, NoOps, its first batches) is principal ``controller`` with the rule
that made it. Request ids are made as a voter makes them for a caller that
sent none.

Drawn from a random stream of its own, seeded by the log's seed, so it never
changes which records a seed gives, and each seed gives the same who.
A who is a tuple in ``pipeline.schema.WHO_COLUMNS`` order (empty fields
None), as the export writes it.
"""

from __future__ import annotations

import itertools
import random

CONTROLLER = "controller"
# The two operators of the synthetic cluster: (principal, address).
TOPIC_ADMIN = ("admin:token/ops-alice", "10.1.0.5")
CONFIG_ADMIN = ("admin:cert/CN=ops-bob", "10.1.0.9")

# The controller's rules, by the sweep's API name (the voters' own: quorum/callers.py).
RULES = {
    "Bootstrap": "cluster.bootstrap",
    "LeaderChange": "raft.leader-elected",
    "FenceExpiredSessions": "kip-631.session-expired",
    "ElectUncleanLeaders": "kip-966.unclean-election",
    "WriteNoOp": "metadata.max.idle.interval.noop",
}


class SynthWho:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"who-{seed}")
        self._ports: dict[int, int] = {}  # broker id -> its connection's source port
        self._admin_requests = 0
        # A voter's request ids: a random prefix and a counter (api/edge.py).
        self._id_prefix = f"{self.rng.getrandbits(48):012x}"
        self._ids = itertools.count(1)

    @staticmethod
    def broker_principal(broker_id: int) -> str:
        """Every fourth broker authenticates with a token, the others with a certificate."""
        if broker_id % 4 == 0:
            return f"broker:token/kafka-{broker_id}"
        return f"broker:cert/CN=kafka-{broker_id}"

    def _request_id(self) -> str:
        return f"{self._id_prefix}-{next(self._ids):x}"

    def connect(self, broker_id: int) -> None:
        """The broker (re)connects: a new source port."""
        self._ports[broker_id] = self.rng.randrange(32768, 61000)

    def broker(self, broker_id: int, api: str) -> tuple:
        port = self._ports.get(broker_id)
        if port is None:
            self.connect(broker_id)
            port = self._ports[broker_id]
        address = f"10.0.{broker_id % 3}.{10 + broker_id % 240}:{port}"
        return (self.broker_principal(broker_id), api, address, self._request_id(), None)

    def admin(self, who: tuple[str, str], api: str) -> tuple:
        """An operator's request: its own X-Request-Id, as a tool sends it."""
        self._admin_requests += 1
        principal, host = who
        name = principal.rsplit("-", 1)[-1]
        request_id = f"{name}-{self._admin_requests:04d}"
        return (principal, api, f"{host}:{self.rng.randrange(32768, 61000)}", request_id, None)

    @staticmethod
    def controller(api: str) -> tuple:
        return (CONTROLLER, api, None, None, RULES[api])


def as_json(who: tuple) -> dict:
    """A who tuple as GET /v1/log shows it (PLANTED.json keeps this form)."""
    keys = ("principal", "api", "address", "requestId", "rule")
    return {k: v for k, v in zip(keys, who, strict=True) if v}
