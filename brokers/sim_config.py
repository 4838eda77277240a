"""What a simulator run is asked to do (``metaquorum sim``'s flags, bench/sim.py's
runs), and the one place that says which asks make no sense: ``problems`` is
checked before anything starts, so a bad flag is one line, not a half-started run.
"""

from __future__ import annotations

from dataclasses import dataclass

from .tls import ClientTls

CHAOS_KINDS = ("crash", "bounce", "slow", "blip", "decommission")
HTTP_CLIENTS = ("lean", "httpx")


@dataclass
class SimConfig:
    urls: list[str]
    brokers: int = 20
    topics: int = 4
    partitions: int = 50  # per topic
    replication_factor: int = 3
    duration_s: float = 60.0  # 0: until cancelled (Ctrl-C)
    chaos: tuple[str, ...] = ()
    seed: int = 0
    token: str | None = None
    first_broker_id: int = 1
    topic_prefix: str = "sim-"
    heartbeat_interval_s: float = 1.0
    session_timeout_s: float = 9.0  # the cluster's (serve --session-timeout-ms)
    replica_lag_time_max_ms: int = 3000
    chaos_interval_s: float = 3.0  # one chaos event every this many seconds
    crash_downtime_s: float = 4.0
    slow_s: float = 8.0
    blip_s: float = 2.0
    settle_timeout_s: float = 60.0
    stuck_after_s: float = 15.0  # an ISR change in flight this long at the end is stuck
    move_timeout_s: float = 30.0  # a decommission gives up if the replicas have not moved by then
    # Per process and voter. httpx: httpcore scans its whole pool per request
    # queued, so BoundedClient queues the rest in front of it.
    max_connections: int = 64
    http: str = "lean"  # the brokers' requests: "lean" (brokers/lean_http.py) or "httpx"
    check_log: bool = True
    log_wait_ms: int = 500
    tls: ClientTls | None = None  # the CA to trust and a client certificate (https URLs)
    # (cacert, cert, key): how a worker process builds ``tls`` again (a context
    # does not pickle)
    tls_files: tuple[str | None, str | None, str | None] | None = None
    processes: int = 1  # worker processes for the brokers (brokers/sim_workers.py); 1: this one

    def problems(self) -> list[str]:
        out = []
        if not self.urls:
            out.append("--url: at least one voter URL is needed")
        if self.brokers < 1:
            out.append(f"--brokers must be at least 1, got {self.brokers}")
        if self.topics < 0 or self.partitions < 1:
            out.append("--topics must be >= 0 and --partitions >= 1")
        if not 1 <= self.replication_factor <= max(1, self.brokers):
            out.append(
                f"--replication-factor {self.replication_factor} needs at least as many brokers"
            )
        unknown = set(self.chaos) - set(CHAOS_KINDS)
        if unknown:
            out.append(
                f"--chaos: unknown kind(s) {', '.join(sorted(unknown))}; "
                f"choose from {','.join(CHAOS_KINDS)}"
            )
        if self.duration_s < 0:
            out.append("--duration must not be negative")
        if not 1 <= self.processes <= max(1, self.brokers):
            out.append(f"--processes must be between 1 and --brokers, got {self.processes}")
        if self.http not in HTTP_CLIENTS:
            out.append(f"--http: {self.http!r}; choose from {', '.join(HTTP_CLIENTS)}")
        return out
