"""The controller's settings (Kafka's controller configs that metaquorum keeps)."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_SESSION_TIMEOUT_MS = 9000  # broker.session.timeout.ms
# unclean.leader.election.interval.ms: how often the controller looks for
# leaderless partitions it may elect uncleanly.
DEFAULT_UNCLEAN_ELECTION_INTERVAL_MS = 5 * 60 * 1000
# ReplicationControlManager.MAX_ELECTIONS_PER_IMBALANCE: the most records one
# run of the unclean-election sweep writes; a run that reaches it runs again.
MAX_ELECTIONS_PER_IMBALANCE = 1_000
# leader.imbalance.check.interval.seconds (300): how long after partitions
# stop being led by their preferred replica the controller elects it back
# (auto.leader.rebalance.enable, true by default; None here when false).
DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_MS = 300 * 1000
# An unclean sweep or a balancing run that stopped at MAX_ELECTIONS_PER_IMBALANCE
# runs again this soon: Kafka's "immediately", 10 ms on, so that requests
# queued meanwhile are not starved (QuorumController).
RUN_AGAIN_MS = 10
# Kafka's delegation.token.max.lifetime.ms (7 days): no token lives longer,
# renewed or not; delegation.token.expiry.time.ms (1 day): how long a token
# lives from its creation or last renewal by default; and
# delegation.token.expiry.check.interval.ms (1 hour): how often the active
# controller sweeps expired tokens away.
DEFAULT_DELEGATION_TOKEN_MAX_LIFETIME_MS = 7 * 24 * 3600 * 1000
DEFAULT_DELEGATION_TOKEN_EXPIRY_TIME_MS = 24 * 3600 * 1000
DEFAULT_DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS = 3600 * 1000


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    cluster_id: str
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    default_num_partitions: int = 1  # num.partitions
    max_default_replication_factor: int = 3  # default RF = min(this, registered brokers)
    unclean_election_interval_ms: int = DEFAULT_UNCLEAN_ELECTION_INTERVAL_MS
    max_elections_per_imbalance: int = MAX_ELECTIONS_PER_IMBALANCE
    leader_imbalance_check_interval_ms: int | None = DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_MS
    # The delegation tokens' secret key (Kafka's delegation.token.secret.key):
    # None disables delegation tokens. The same on every voter. Never printed.
    delegation_token_secret: str | None = field(default=None, repr=False)
    delegation_token_max_lifetime_ms: int = DEFAULT_DELEGATION_TOKEN_MAX_LIFETIME_MS
    delegation_token_expiry_time_ms: int = DEFAULT_DELEGATION_TOKEN_EXPIRY_TIME_MS
    delegation_token_expiry_check_interval_ms: int = (
        DEFAULT_DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS
    )
