"""``metaquorum serve``: one voter. This module is the command: its flags, their
checks, and the QuorumNode built from them; voter/wiring.py then runs the
voter's processes (voter/__init__.py tells who talks to whom).

Every flag is also an environment variable (``--node-id`` = METAQUORUM_NODE_ID).
Exit codes: 0 clean stop, 2 bad configuration or an unusable environment (the
message names the flag, port or path: a Raft port in use, a data dir this user
cannot write), 3 the node refused to serve (a corrupt or missing snapshot or
journal). Every start-up failure is one line on stderr, never a traceback.
A start refused for its configuration writes nothing: every check that can
refuse it (flags, the Raft secret, TLS files, the principals and tokens
files, what the data dir says of itself, the ports) runs before the first
byte goes to the data dir, so the retry with the input fixed starts.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import socket
import sys

from controller.config import (
    DEFAULT_DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS,
    DEFAULT_DELEGATION_TOKEN_EXPIRY_TIME_MS,
    DEFAULT_DELEGATION_TOKEN_MAX_LIFETIME_MS,
)
from voter.http_server import build_tls
from voter.wiring import EXIT_CONFIG, EXIT_REFUSED, import_http_stack, serve_voter
from voter.worker_pool import parse_workers

log = logging.getLogger("metaquorum")


def _env(flag: str) -> str:
    return "METAQUORUM_" + flag.lstrip("-").replace("-", "_").upper()


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    from quorum.node_config import DEFAULT_ELECTION_TIMEOUT_MS

    def flag(name: str, **kw) -> None:
        env = _env(name)
        kw["help"] = f"{kw.get('help', '')} [env {env}]".strip()
        if env in os.environ:
            kw["default"] = os.environ[env]
            kw.pop("required", None)
        parser.add_argument(name, **kw)

    flag("--node-id", type=int, help="this voter's id (see --node-id-from-hostname)")
    flag(
        "--node-id-from-hostname",
        action="store_true",
        help="take the node id from the hostname's trailing ordinal (StatefulSet pod-N); "
        "the hostname is $HOSTNAME if set, else the system's",
    )
    flag(
        "--voters",
        required=True,
        help='the voters a new cluster starts with: "0@host:raftport,1@host:raftport,..."; '
        "once a data dir is a voter, the voter set in the log rules (metaquorum add-voter / "
        "remove-voter) and this only says where the cluster is",
    )
    flag(
        "--raft-address",
        help="this node's Raft HOST:PORT, as every voter spells it; needed for a node not in "
        "--voters, which then joins the running cluster as an observer until metaquorum "
        "add-voter names it (default: its entry in --voters)",
    )
    flag(
        "--observer",
        action="store_true",
        help="follow the log and serve reads, the log long-poll and snapshots without ever "
        "voting (a read-only Raft node: no Raft address, no add-voter); --voters names the "
        "cluster's voters and --node-id, outside them, labels it",
    )
    flag("--http-host", default="0.0.0.0", help="HTTP bind address")
    flag("--http-port", type=int, default=8080, help="HTTP port")
    flag(
        "--raft-bind",
        default="0.0.0.0",
        help="Raft bind address (the port is this node's: its --raft-address, or its --voters entry)",
    )
    flag("--advertised-url", help="the URL brokers and peers use to reach this node's HTTP API")
    flag("--data-dir", required=True, help="journal, snapshots and identity of this voter")
    flag("--cluster-id", help="first start only; later starts read it from the data dir")
    flag(
        "--tokens-file",
        help="bearer tokens (token role [brokerId] per line, a token or its hash from "
        "metaquorum hash-token); no file and no --tls-client-ca-file: auth off",
    )
    flag(
        "--tls-cert-file",
        help="serve HTTPS with this PEM certificate (chain: leaf first); re-read when it "
        "changes (docs/security.md)",
    )
    flag("--tls-key-file", help="the PEM private key of --tls-cert-file (unencrypted)")
    flag(
        "--tls-client-ca-file",
        help="PEM CA certificates that sign client certificates: a verified certificate "
        "authenticates its caller (--tls-principals-file); re-read when it changes",
    )
    flag(
        "--tls-client-auth",
        choices=["none", "optional", "required"],
        help="whether clients must send a certificate (default: optional with "
        "--tls-client-ca-file, else none; required also refuses kubelet's probes)",
    )
    flag(
        "--tls-principals-file",
        help="rules mapping client certificates to principals, 'FIELD=PATTERN role "
        "[brokerId]' per line (default: CN=broker-{id} broker {id}; CN=admin-* admin; "
        "CN=read-* read)",
    )
    flag(
        "--tls-reload-interval-ms",
        type=int,
        default=5000,
        help="how often the TLS files are checked for a change",
    )
    flag("--raft-secret-file", help="shared secret of the Raft port (required with >1 voter)")
    flag(
        "--delegation-token-secret-file",
        help="the delegation tokens' secret key (Kafka's delegation.token.secret.key), the "
        "same on every voter, mode 0600 or 0440; absent: delegation tokens are disabled",
    )
    flag(
        "--delegation-token-max-lifetime-ms",
        type=int,
        default=DEFAULT_DELEGATION_TOKEN_MAX_LIFETIME_MS,
        help="no delegation token lives longer, renewed or not (Kafka's "
        "delegation.token.max.lifetime.ms, 7 days)",
    )
    flag(
        "--delegation-token-expiry-time-ms",
        type=int,
        default=DEFAULT_DELEGATION_TOKEN_EXPIRY_TIME_MS,
        help="a token's life from its creation or renewal unless asked for less (Kafka's "
        "delegation.token.expiry.time.ms, 1 day)",
    )
    flag(
        "--delegation-token-expiry-check-interval-ms",
        type=int,
        default=DEFAULT_DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS,
        help="how often the active controller removes expired tokens (Kafka's "
        "delegation.token.expiry.check.interval.ms, 1 hour)",
    )
    flag("--session-timeout-ms", type=int, default=9000, help="broker session timeout")
    flag(
        "--election-timeout-ms",
        type=int,
        default=DEFAULT_ELECTION_TIMEOUT_MS,
        help="a leader not heard from this long is replaced (heartbeats every tenth of "
        "it); raise it on a network or machines slower than a LAN (docs/durability.md)",
    )
    flag(
        "--metadata-max-idle-interval-ms",
        type=int,
        default=500,
        help="the active controller writes a NoOpRecord this often, so that brokers can tell "
        "their lag in time on an idle cluster (Kafka's metadata.max.idle.interval.ms); 0: never",
    )
    flag(
        "--auto-leader-rebalance-enable",
        choices=["true", "false"],
        default="true",
        help="elect partitions' preferred leaders back once they are eligible again, "
        "--leader-imbalance-check-interval-seconds after they lost them (Kafka's "
        "auto.leader.rebalance.enable)",
    )
    flag(
        "--leader-imbalance-check-interval-seconds",
        type=int,
        default=300,
        help="how long after a partition stops being led by its preferred replica the "
        "active controller elects it back (Kafka's leader.imbalance.check.interval.seconds)",
    )
    flag("--fsync", choices=["always", "never"], default="always", help="sync the journal")
    flag(
        "--max-queued-requests",
        type=int,
        default=5000,
        help="admission control: writes queued beyond this are refused with 429",
    )
    flag(
        "--max-batches-in-flight",
        type=int,
        default=1,
        help="group commit: batches replicating at once, each decided on top of those "
        "before it (1, the design's default, or 2 to overlap replication and fsync)",
    )
    flag(
        "--max-pending-writes",
        type=int,
        default=256,
        help="admission control at the HTTP edge: writes being handled at once beyond this, "
        "in each of two pools (broker heartbeats and registrations; every other write), "
        "are refused with 429 before they are parsed; a token holds at most half a pool, "
        "a broker-bound token 4 of the brokers' pool (docs/limits.md)",
    )
    flag(
        "--max-connections",
        type=int,
        help="HTTP connections held at once (default: the open-file limit, raised to its "
        "hard limit at start, less 128); over it the longest-waiting idle connection is "
        "closed, or the new one refused with 503",
    )
    flag(
        "--max-connections-per-address",
        type=int,
        default=256,
        help="HTTP connections held at once from one client address (as --max-connections)",
    )
    flag(
        "--public-docs",
        action="store_true",
        help="serve /docs, /redoc and /openapi.json without a token (default: any token)",
    )
    flag(
        "--compaction-entries",
        type=int,
        default=20_000,
        help="take a snapshot and compact the Raft log after this many entries",
    )
    flag(
        "--history-retention-ms",
        type=int,
        default=24 * 3600 * 1000,
        help="GET /v1/image?atOffset= serves images of the last this many ms of batches "
        "(or of --history-retention-records, whichever is less; docs/durability.md)",
    )
    flag(
        "--history-retention-records",
        type=int,
        default=1_000_000,
        help="... and of the last this many records (the history kept in the data dir)",
    )
    # Removed (issue 42): pre-vote keeps a restarted voter from deposing the
    # leader. Still accepted, and ignored with a warning (build_config), so an
    # old manifest that passes it does not stop a voter from starting.
    parser.add_argument(
        "--startup-election-delay-ms",
        default=os.environ.get(_env("--startup-election-delay-ms")),
        help=argparse.SUPPRESS,
    )
    flag(
        "--no-pre-vote",
        dest="pre_vote",
        action="store_false",
        help="plain Raft elections, without pre-vote and the leader lease on votes "
        "(for measuring what pre-vote changes; docs/decisions.md 49)",
    )
    flag(
        "--http-workers",
        default="auto",
        help="serve HTTP from this many worker processes in front of the orderer process "
        "(the controller) and the core (Raft) (0: one process does it all; auto: one per CPU "
        "left after the core and the orderer, none below 3 CPUs); the connection and "
        "pending-write limits are shared among them (docs/decisions.md 95, 99, 119)",
    )
    flag(
        "--batch-ring-mib",
        default=str(RING_MIB),
        help="with HTTP workers: the shared memory the committed batches reach them and the "
        "orderer through, in MiB (1-4096); a worker that falls further behind, or a batch "
        "larger than a quarter of it, catches up over its link (docs/decisions.md 125); "
        "claimed whole at start, and refused there if the memory left (the container's "
        "limit) cannot hold it",
    )
    flag("--log-level", default="info", help="debug, info, warning, error")


RING_MIB = 64


def parse_ring_mib(value) -> int:
    """--batch-ring-mib, checked before anything starts."""
    try:
        mib = int(value)
    except (TypeError, ValueError):
        mib = 0
    if not 1 <= mib <= 4096:
        raise ValueError(
            f"--batch-ring-mib must be a whole number of MiB from 1 to 4096, got {value!r}"
        )
    return mib


def _die(code: int, message: str) -> int:
    print(f"metaquorum serve: {message}", file=sys.stderr)
    return code


def _read_secret(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            secret = f.read().strip()
    except OSError as e:
        raise ValueError(f"--raft-secret-file {path}: {e.strerror}") from None
    if len(secret) < 16:
        raise ValueError(f"--raft-secret-file {path}: the secret must be at least 16 characters")
    return secret


def node_id_from_hostname(hostname: str | None = None) -> int:
    # $HOSTNAME first: Kubernetes sets it to the pod name (the manifest also
    # sets it from the downward API), and a test can set it without a container.
    name = (hostname or os.environ.get("HOSTNAME") or socket.gethostname()).split(".")[0]
    head, _, ordinal = name.rpartition("-")
    if not head or not ordinal.isdigit():
        raise ValueError(f"--node-id-from-hostname: hostname {name!r} does not end in -<ordinal>")
    return int(ordinal)


def build_config(args: argparse.Namespace):
    """NodeConfig from flags; ValueError/ConfigError messages name the flag."""
    from quorum.history import Retention
    from quorum.node_config import NodeConfig, parse_voters
    from quorum.secret_files import read_secret_file

    if args.node_id_from_hostname in (True, "1", "true", "True"):
        node_id = node_id_from_hostname()
    elif args.node_id is None:
        raise ValueError("--node-id is required (or --node-id-from-hostname)")
    else:
        node_id = int(args.node_id)
    voters = parse_voters(args.voters)
    if getattr(args, "startup_election_delay_ms", None) is not None:
        log.warning(
            "--startup-election-delay-ms (METAQUORUM_STARTUP_ELECTION_DELAY_MS) is ignored: "
            "a restarted voter asks for a pre-vote, which the voters that hear the leader "
            "refuse, so it needs no delay (docs/kubernetes.md); remove it"
        )
    own = getattr(args, "raft_address", None) or None
    if own is not None:
        from quorum.membership import parse_address

        host, port = parse_address(own, "--raft-address")
        own = f"{host}:{port}"
    raft_port = (own or voters.get(node_id, "")).rpartition(":")[2]
    observer = getattr(args, "observer", False) in (True, "1", "true", "True")
    if observer:
        raft_port = ""  # a read-only node listens on no Raft port
    secret = _read_secret(args.raft_secret_file) if args.raft_secret_file else None
    token_file = getattr(args, "delegation_token_secret_file", None) or None
    token_secret = (
        read_secret_file(token_file, "--delegation-token-secret-file") if token_file else None
    )
    http_port = int(args.http_port)
    if not 1 <= http_port <= 65535:
        raise ValueError(f"--http-port {http_port} is not a port")
    tls = bool(getattr(args, "tls_cert_file", None))
    scheme = "https" if tls else "http"
    url = args.advertised_url or f"{scheme}://{socket.getfqdn()}:{http_port}"
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--advertised-url {url!r} must start with http:// or https://")
    if tls and url.startswith("http://"):
        # The leader's URL goes into LEADER_CHANGE and every 307: clients would
        # be sent to plain HTTP on a port that speaks only TLS.
        raise ValueError(
            f"--advertised-url {url}: this node serves HTTPS (--tls-cert-file), so it must "
            "advertise an https:// URL"
        )
    _positive(args.max_pending_writes, "--max-pending-writes")  # used by the API
    if args.max_connections is not None:
        _positive(args.max_connections, "--max-connections")
    _positive(args.max_connections_per_address, "--max-connections-per-address")
    if args.tokens_file and not os.path.isfile(args.tokens_file):
        raise ValueError(f"--tokens-file {args.tokens_file}: no such file")
    bind = str(args.raft_bind or "0.0.0.0").strip()
    if not bind or any(c in bind for c in " /@,"):
        raise ValueError(f"--raft-bind {args.raft_bind!r} is not a host or IP address")
    return NodeConfig(
        node_id=node_id,
        voters=voters,
        data_dir=args.data_dir,
        advertised_url=url.rstrip("/"),
        cluster_id=args.cluster_id,
        raft_secret=secret,
        delegation_token_secret=token_secret,
        delegation_token_secret_file=os.path.abspath(token_file) if token_file else None,
        delegation_token_max_lifetime_ms=_positive(
            getattr(
                args, "delegation_token_max_lifetime_ms", DEFAULT_DELEGATION_TOKEN_MAX_LIFETIME_MS
            ),
            "--delegation-token-max-lifetime-ms",
        ),
        delegation_token_expiry_time_ms=_positive(
            getattr(
                args, "delegation_token_expiry_time_ms", DEFAULT_DELEGATION_TOKEN_EXPIRY_TIME_MS
            ),
            "--delegation-token-expiry-time-ms",
        ),
        delegation_token_expiry_check_interval_ms=_positive(
            getattr(
                args,
                "delegation_token_expiry_check_interval_ms",
                DEFAULT_DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS,
            ),
            "--delegation-token-expiry-check-interval-ms",
        ),
        fsync=args.fsync == "always",
        session_timeout_ms=int(args.session_timeout_ms),
        raft_min_timeout=_election_timeout_ms(args.election_timeout_ms) / 1000,
        raft_max_timeout=_election_timeout_ms(args.election_timeout_ms) * 1.6 / 1000,
        metadata_max_idle_interval_ms=int(args.metadata_max_idle_interval_ms),
        leader_imbalance_check_interval_ms=(
            int(args.leader_imbalance_check_interval_seconds) * 1000
            if args.auto_leader_rebalance_enable == "true"
            else None
        ),
        max_queued_requests=_positive(args.max_queued_requests, "--max-queued-requests"),
        compaction_entries=_positive(args.compaction_entries, "--compaction-entries"),
        history=Retention(
            _positive(args.history_retention_ms, "--history-retention-ms"),
            _positive(args.history_retention_records, "--history-retention-records"),
        ),
        max_batches_in_flight=_positive(args.max_batches_in_flight, "--max-batches-in-flight"),
        pre_vote=bool(args.pre_vote),
        raft_bind=f"{bind}:{raft_port}" if raft_port else None,
        own_raft_address=own,
        observer=observer,
    )


def _election_timeout_ms(value: int) -> int:
    from quorum.node_config import DEFAULT_ELECTION_TIMEOUT_MS

    if not 100 <= value <= 60_000:
        raise ValueError(
            f"--election-timeout-ms {value} must be between 100 and 60000 (default "
            f"{DEFAULT_ELECTION_TIMEOUT_MS}; every voter should use the same)"
        )
    return value


def _os_problem(e: OSError, data_dir: str) -> str:
    """One line for a file the node could not use at start (no traceback)."""
    from quorum.startup_checks import explain_os_error

    where = f" ({e.filename})" if e.filename else ""
    return f"--data-dir {data_dir}{where}: {explain_os_error(e)}"


def _positive(value, flag: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(f"{flag} must be at least 1, got {number}")
    return number


def raise_open_file_limit() -> int:
    """Raises the soft open-file limit to the hard one (every client connection
    is a descriptor; distributions start services at 1,024); returns the soft
    limit in force."""
    import resource  # noqa: PLC0415 - POSIX only, and only serve needs it

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, e)
    return soft


def run_serve(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=str(args.log_level).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from api.auth import TokensFileError, load_tokens
    from quorum.node_config import ConfigError, claim_data_dir, inspect_data_dir
    from quorum.startup_checks import (
        check_data_dir,
        check_http_port,
        check_memory_room,
        check_raft_port,
        lock_data_dir,
        unlock_data_dir,
    )

    try:
        config = build_config(args)
        # Bad counts are refused before anything starts; the ring (with
        # workers) is claimed whole at start, so it must fit (voter/batch_ring.py).
        workers = parse_workers(args.http_workers)
        ring_mib = parse_ring_mib(args.batch_ring_mib)
        if workers:
            check_memory_room(ring_mib << 20, f"--batch-ring-mib {ring_mib}")
        tls, principals = build_tls(args)
        try:
            tokens = load_tokens(args.tokens_file) if args.tokens_file else None
        except TokensFileError as e:
            raise ValueError(f"--tokens-file: {e}") from None
        # What claiming the data dir would refuse (another node's, another
        # cluster's, a first start without a needed --cluster-id), read only.
        inspect_data_dir(config)
        if not config.observer:  # an observer has no Raft port of its own
            check_raft_port(config.raft_bind or config.raft_address, config.node_id)
        check_http_port(args.http_host, int(args.http_port))
        # Everything that can refuse a start ran above and wrote nothing: a
        # refused start leaves the data dir as it was, so the retry with the
        # input fixed is not refused for what it wrote (docs/security.md).
        check_data_dir(config.data_dir)
        data_dir_lock = lock_data_dir(config.data_dir)  # held until the process ends
        identity = claim_data_dir(config)
    except (ConfigError, ValueError) as e:
        return _die(EXIT_CONFIG, str(e))
    except OSError as e:
        return _die(EXIT_CONFIG, _os_problem(e, args.data_dir))

    from quorum.journal_format import JournalCorruptError
    from quorum.node import QuorumNode
    from quorum.runtime_tuning import tune_runtime, watch_pauses

    # The HTTP stack is imported before the Raft port opens, and with the collector
    # still off: imported after, it held the loop for 1-2 s (and its collections
    # 0.1-0.4 s) in which this voter could win an election but take no write.
    import_http_stack()
    # What the imports built lives as long as the process: frozen, it is not
    # walked by the collections of the start either (gen-2 ones took 0.1-0.4 s
    # of the loop a newly elected leader needs; runtime_tuning freezes the rest).
    gc.freeze()
    tune_runtime()
    watch_pauses()
    nofile = raise_open_file_limit()

    # The SyncObj is built here, in the main thread, before the loop starts.
    try:
        node = QuorumNode(config, identity)
    except JournalCorruptError as e:
        return _die(EXIT_REFUSED, f"refusing to serve: {e}")
    except ConfigError as e:
        return _die(EXIT_CONFIG, str(e))
    except OSError as e:
        return _die(EXIT_CONFIG, _os_problem(e, args.data_dir))
    if tokens is None and principals is None:
        log.warning(
            "auth is OFF: no --tokens-file nor --tls-client-ca-file was given; anyone who "
            "reaches the port may write"
        )
    if tls is None:
        log.warning(
            "TLS is OFF: tokens, requests and the metadata log cross the network in clear "
            "text (--tls-cert-file, docs/security.md)"
        )
    else:
        from api.tls import describe

        log.info("https: %s", describe(tls.settings))
    if principals is not None:
        log.info("client certificates map to principals by %s", principals.describe())
    log.info(
        "node %d of cluster %s: raft %s, http %s, data %s, fsync %s",
        config.node_id,
        identity.cluster_id,
        config.raft_address or "none (an observer)",
        config.advertised_url,
        config.data_dir,
        "always" if config.fsync else "never",
    )
    # uvloop: the event loop's own work per request (socket reads and writes,
    # callbacks) is C instead of Python, about a fifth of a request's CPU.
    import uvloop  # noqa: PLC0415

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        code = runner.run(serve_voter(node, args, tokens, nofile, ring_mib, tls, principals))
    unlock_data_dir(data_dir_lock)
    return code
