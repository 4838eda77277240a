"""A voter's configuration, and the identity its data dir remembers."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import orjson

from controller.config import (
    DEFAULT_DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS,
    DEFAULT_DELEGATION_TOKEN_EXPIRY_TIME_MS,
    DEFAULT_DELEGATION_TOKEN_MAX_LIFETIME_MS,
    DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_MS,
    DEFAULT_SESSION_TIMEOUT_MS,
)
from metadata_records.uuids import random_uuid

from .history import HISTORY_DIR, Retention
from .raft.election_timing import ElectionTimeouts

# serve --election-timeout-ms: a hung leader is replaced about this long after its
# last heartbeat (docs/durability.md "Elections" says how it was chosen).
DEFAULT_ELECTION_TIMEOUT_MS = 500

IDENTITY_FILE = "metaquorum.json"
# Left by a ``metaquorum recover`` until it is finished (metaquorum/recover.py).
RECOVER_MARKER = "recover-in-progress.json"


class ConfigError(Exception):
    """A configuration problem; the message names the flag to fix (exit code 2)."""


def parse_voters(text: str) -> dict[int, str]:
    """``"0@host:port,1@host:port"`` -> {0: "host:port", 1: "host:port"}."""
    voters: dict[int, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        node, sep, address = part.partition("@")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not host:
            raise ConfigError(f"--voters: {part!r} is not ID@HOST:PORT")
        try:
            node_id, port_number = int(node), int(port)
        except ValueError:
            raise ConfigError(f"--voters: {part!r} is not ID@HOST:PORT") from None
        if not 0 <= node_id <= 2**31 - 1 or not 1 <= port_number <= 65535:
            raise ConfigError(f"--voters: {part!r} has an out-of-range id or port")
        if node_id in voters:
            raise ConfigError(f"--voters: node id {node_id} appears twice")
        if address in voters.values():
            raise ConfigError(f"--voters: address {address} appears twice")
        voters[node_id] = address
    if not voters:
        raise ConfigError("--voters: no voters given")
    return voters


@dataclass(frozen=True)
class NodeConfig:
    node_id: int
    voters: dict[int, str]  # node id -> Raft "host:port", spelled the same on every voter
    data_dir: str
    advertised_url: str
    cluster_id: str | None = None  # first start only; later read from the data dir
    raft_secret: str | None = None
    # Delegation tokens' secret key (--delegation-token-secret-file, read by
    # quorum/secret_files.py) and the file it came from (the orderer and the
    # HTTP workers read it themselves). None: delegation tokens are disabled.
    delegation_token_secret: str | None = field(default=None, repr=False)
    delegation_token_secret_file: str | None = None
    # Kafka's delegation.token.max.lifetime.ms, .expiry.time.ms, .expiry.check.interval.ms.
    delegation_token_max_lifetime_ms: int = DEFAULT_DELEGATION_TOKEN_MAX_LIFETIME_MS
    delegation_token_expiry_time_ms: int = DEFAULT_DELEGATION_TOKEN_EXPIRY_TIME_MS
    delegation_token_expiry_check_interval_ms: int = (
        DEFAULT_DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS
    )
    fsync: bool = True
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    max_queued_requests: int = 5000
    max_batch_records: int = 20_000
    # Batches proposed and not yet applied. The group commit's default is one;
    # with more, each is decided on top of those in flight (base offsets chain),
    # so replication and fsync of one overlap the next, and a batch that fails
    # makes every later one a no-op (docs/decisions.md).
    max_batches_in_flight: int = 1
    # A heartbeat queued longer than this is answered REQUEST_TIMED_OUT (half of
    # Kafka's default broker heartbeat interval, as Kafka does).
    heartbeat_deadline_s: float = 1.0
    # Ready while at most this many committed Raft entries are not yet applied.
    ready_lag_entries: int = 100
    # The active controller writes a NoOpRecord this often, so that brokers and
    # voters can tell their lag in time on an idle cluster (Kafka's
    # metadata.max.idle.interval.ms, 500 ms by default); 0: never.
    metadata_max_idle_interval_ms: int = 500
    # Kafka's auto.leader.rebalance.enable and leader.imbalance.check.interval.seconds:
    # partitions not led by their preferred replica get it back this long after
    # they became so (None: never, only by ElectLeaders).
    leader_imbalance_check_interval_ms: int | None = DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_MS
    log_retention: int = 200_000
    compaction_entries: int = 20_000
    # The history window GET /v1/image?atOffset= serves (quorum/history.py);
    # None: no history kept.
    history: Retention | None = Retention()
    raft_bind: str | None = None  # default: 0.0.0.0 on the voter's port
    # Election timing (quorum/raft/election_timing.py; docs/durability.md "Elections"):
    # a follower of a silent leader stands after raft_min_timeout (in turns), a
    # voter with no leader at a random point up to raft_max_timeout.
    raft_min_timeout: float = DEFAULT_ELECTION_TIMEOUT_MS / 1000
    raft_max_timeout: float = DEFAULT_ELECTION_TIMEOUT_MS * 1.6 / 1000
    # Pre-vote and the leader lease on votes (quorum/raft/pre_vote.py); off only to
    # measure what they change.
    pre_vote: bool = True
    # --raft-address: this node's Raft "host:port" as every voter spells it;
    # required for a node outside --voters (a joiner), else its --voters entry.
    own_raft_address: str | None = None
    # --observer: a pysyncobj read-only node; it follows the log and serves
    # reads, never votes and never becomes a voter (no Raft address).
    observer: bool = False

    def __post_init__(self) -> None:
        listed = self.voters.get(self.node_id)
        if self.observer and (listed is not None or self.own_raft_address is not None):
            raise ConfigError(
                f"--observer: node {self.node_id} must not be among --voters nor have "
                "--raft-address (an observer has no Raft address; to add a voter, "
                "start it with --raft-address and run metaquorum add-voter)"
            )
        if listed is None and self.own_raft_address is None and not self.observer:
            raise ConfigError(
                f"--node-id {self.node_id} is not among --voters ({sorted(self.voters)}): "
                "to add a voter to a running cluster, start it with --raft-address "
                "HOST:PORT (it waits as an observer) and run metaquorum add-voter"
            )
        if listed is not None and self.own_raft_address not in (None, listed):
            raise ConfigError(
                f"--raft-address {self.own_raft_address} differs from node {self.node_id}'s "
                f"entry in --voters ({listed}): every voter must spell it the same way"
            )
        if self.joining and not self.observer and self.raft_address in self.voters.values():
            raise ConfigError(f"--raft-address {self.raft_address} is another voter's in --voters")
        if (len(self.voters) > 1 or self.joining) and not self.raft_secret:
            raise ConfigError(
                "--raft-secret-file is required with more than one voter: the Raft port "
                "speaks pickle and the secret is its only authentication"
            )
        if self.session_timeout_ms <= 0:
            raise ConfigError("--session-timeout-ms must be positive")
        if self.metadata_max_idle_interval_ms < 0:
            raise ConfigError("--metadata-max-idle-interval-ms must be 0 (never) or positive")
        if (
            self.leader_imbalance_check_interval_ms is not None
            and self.leader_imbalance_check_interval_ms <= 0
        ):
            raise ConfigError(
                "--leader-imbalance-check-interval-seconds must be positive "
                "(to turn leader balancing off: --auto-leader-rebalance-enable false)"
            )
        if not 0.1 <= self.raft_min_timeout < self.raft_max_timeout:
            raise ConfigError(
                f"Raft election timeouts {self.raft_min_timeout}-{self.raft_max_timeout} s: "
                "the minimum must be 0.1 s or more and below the maximum"
            )

    @property
    def election_timeouts(self) -> ElectionTimeouts:
        return ElectionTimeouts(self.raft_min_timeout, self.raft_max_timeout)

    @property
    def raft_address(self) -> str | None:
        """None for an observer."""
        if self.observer:
            return None
        return self.own_raft_address or self.voters[self.node_id]

    @property
    def joining(self) -> bool:
        """Started outside --voters: it joins a running cluster (metaquorum add-voter)."""
        return self.node_id not in self.voters

    @property
    def journal_file(self) -> str:
        return os.path.join(self.data_dir, "raft.journal")

    @property
    def dump_file(self) -> str:
        return os.path.join(self.data_dir, "raft.snapshot")

    @property
    def history_dir(self) -> str:
        return os.path.join(self.data_dir, HISTORY_DIR)


@dataclass(frozen=True)
class DataDirIdentity:
    """What a data dir remembers about itself (``metaquorum.json``).

    ``directory_id`` is drawn when the dir is formatted and never changes: it
    is how the cluster tells this disk from the one a replaced PVC had
    (quorum/voter_guard.py). ``formed``: this dir has been a voter of the
    cluster (it formed it, or a committed voter set named it); ``bootstrap``:
    the voter set agreed when the cluster formed, by node id."""

    node_id: int
    cluster_id: str
    directory_id: str
    formed: bool
    bootstrap: dict[int, str | None] | None


def inspect_data_dir(config: NodeConfig) -> tuple[DataDirIdentity, bool]:
    """The identity the data dir has, or would get on this start, and whether
    claiming it writes ``metaquorum.json``; ConfigError for whatever
    ``claim_data_dir`` refuses. Reads only (a missing dir is a new one): serve
    calls it before anything is written, so that a refused start leaves the
    data dir as it was."""
    path = os.path.join(config.data_dir, IDENTITY_FILE)
    if os.path.exists(os.path.join(config.data_dir, RECOVER_MARKER)):
        raise ConfigError(
            f"--data-dir {config.data_dir}: a metaquorum recover was cut short here "
            f"({RECOVER_MARKER}): run metaquorum recover --data-dir {config.data_dir} "
            "again to finish it, or undo it (docs/durability.md)"
        )
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                identity = orjson.loads(f.read())
            node_id, cluster_id = identity["nodeId"], identity["clusterId"]
            version = identity.get("version", 1)
            bootstrap = identity.get("bootstrapVoters")
            if bootstrap is not None:
                bootstrap = {int(k): v for k, v in bootstrap.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise ConfigError(
                f"--data-dir: {path} is unreadable ({e}); restore it or use an empty dir"
            ) from None
        if node_id != config.node_id:
            raise ConfigError(
                f"--node-id {config.node_id} does not match --data-dir {config.data_dir}, "
                f"which belongs to node {node_id}"
            )
        if config.cluster_id is not None and config.cluster_id != cluster_id:
            raise ConfigError(
                f"--cluster-id {config.cluster_id} does not match --data-dir {config.data_dir}, "
                f"which belongs to cluster {cluster_id}"
            )
        if version < 2:
            # Made before directory ids: it holds this cluster's log, so it is
            # formed; its voters' directories are learned from their hellos.
            return DataDirIdentity(node_id, cluster_id, random_uuid(), True, None), True
        found = DataDirIdentity(
            node_id, cluster_id, identity["directoryId"], bool(identity["formed"]), bootstrap
        )
        return found, False
    if os.path.isdir(config.data_dir) and any(os.scandir(config.data_dir)):
        raise ConfigError(
            f"--data-dir {config.data_dir} is not empty and has no {IDENTITY_FILE}: "
            "refusing to use a directory that may hold another service's files"
        )
    cluster_id = config.cluster_id
    if cluster_id is None:
        if len(config.voters) > 1 or config.joining:
            raise ConfigError(
                "--cluster-id is required on the first start of a multi-voter cluster "
                "or of a node that joins one (every voter must be given the same one)"
            )
        cluster_id = random_uuid()
    return DataDirIdentity(config.node_id, cluster_id, random_uuid(), False, None), True


def claim_data_dir(config: NodeConfig) -> DataDirIdentity:
    """Creates or checks the data dir; returns what it remembers.

    The data dir remembers its node and cluster: starting it as another node,
    or with another cluster id, is refused (a voter must never mix logs)."""
    os.makedirs(config.data_dir, exist_ok=True)
    identity, new = inspect_data_dir(config)
    if new:
        _write_identity(os.path.join(config.data_dir, IDENTITY_FILE), identity)
    return identity


def record_formation(data_dir: str, identity: DataDirIdentity, voters: dict) -> DataDirIdentity:
    """Stores that this dir is a voter of its cluster, with the bootstrap set."""
    out = DataDirIdentity(
        identity.node_id, identity.cluster_id, identity.directory_id, True, dict(voters)
    )
    _write_identity(os.path.join(data_dir, IDENTITY_FILE), out)
    return out


def store_identity(data_dir: str, identity: DataDirIdentity) -> None:
    """Writes ``metaquorum.json`` of ``data_dir`` (a seeded data dir's:
    quorum/seeded_data_dir.py)."""
    _write_identity(os.path.join(data_dir, IDENTITY_FILE), identity)


def _write_identity(path: str, identity: DataDirIdentity) -> None:
    """Atomically and durably: written, synced, renamed, directory synced."""
    obj = {
        "version": 2,
        "nodeId": identity.node_id,
        "clusterId": identity.cluster_id,
        "directoryId": identity.directory_id,
        "formed": identity.formed,
    }
    if identity.bootstrap is not None:
        obj["bootstrapVoters"] = {str(k): v for k, v in sorted(identity.bootstrap.items())}
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(orjson.dumps(obj))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
