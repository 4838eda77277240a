"""``metaquorum serve``: one voter, i.e. the Raft quorum and the HTTP API in one
process with one uvicorn worker (each worker would build its own SyncObj).

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
import logging
import os
import signal
import socket
import sys

from .http_workers import parse_workers

EXIT_CONFIG = 2
EXIT_REFUSED = 3

log = logging.getLogger("metaquorum")


def _env(flag: str) -> str:
    return "METAQUORUM_" + flag.lstrip("-").replace("-", "_").upper()


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
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
    flag("--session-timeout-ms", type=int, default=9000, help="broker session timeout")
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
        "--startup-election-delay-ms",
        type=int,
        default=0,
        help="a restarted voter waits this long before its first election, so that a "
        "rolling restart does not depose the leader (Kubernetes: 5000)",
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
    from quorum.node_config import NodeConfig, parse_voters

    if args.node_id_from_hostname in (True, "1", "true", "True"):
        node_id = node_id_from_hostname()
    elif args.node_id is None:
        raise ValueError("--node-id is required (or --node-id-from-hostname)")
    else:
        node_id = int(args.node_id)
    voters = parse_voters(args.voters)
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
        fsync=args.fsync == "always",
        session_timeout_ms=int(args.session_timeout_ms),
        metadata_max_idle_interval_ms=int(args.metadata_max_idle_interval_ms),
        leader_imbalance_check_interval_ms=(
            int(args.leader_imbalance_check_interval_seconds) * 1000
            if args.auto_leader_rebalance_enable == "true"
            else None
        ),
        max_queued_requests=_positive(args.max_queued_requests, "--max-queued-requests"),
        compaction_entries=_positive(args.compaction_entries, "--compaction-entries"),
        max_batches_in_flight=_positive(args.max_batches_in_flight, "--max-batches-in-flight"),
        startup_election_delay_s=int(args.startup_election_delay_ms) / 1000,
        pre_vote=bool(args.pre_vote),
        raft_bind=f"{bind}:{raft_port}" if raft_port else None,
        own_raft_address=own,
        observer=observer,
    )


def build_tls(args: argparse.Namespace):
    """(the reloading server context, the certificate principal rules), each
    None when off; TlsConfigError / PrincipalsFileError name the flag."""
    from api.cert_principals import CertPrincipals, load_rules
    from api.tls import ReloadingContext, TlsConfigError, settings_from_flags

    interval = getattr(args, "tls_reload_interval_ms", None)
    settings = settings_from_flags(
        getattr(args, "tls_cert_file", None) or None,
        getattr(args, "tls_key_file", None) or None,
        getattr(args, "tls_client_ca_file", None) or None,
        getattr(args, "tls_client_auth", None) or None,
        None if interval is None else int(interval),
    )
    principals_file = getattr(args, "tls_principals_file", None) or None
    if settings is None or settings.client_ca_file is None:
        if principals_file:
            raise TlsConfigError(
                "--tls-principals-file needs --tls-client-ca-file (no client certificates "
                "are asked for without it)"
            )
        return (None if settings is None else ReloadingContext(settings)), None
    if principals_file:
        try:
            principals = CertPrincipals(load_rules(principals_file), principals_file)
        except ValueError as e:
            raise TlsConfigError(f"--tls-principals-file: {e}") from None
    else:
        principals = CertPrincipals.default()
    return ReloadingContext(settings), principals


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
        # workers) is claimed whole at start, so it must fit (api/batch_ring.py).
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
        code = runner.run(_serve(node, args, tokens, nofile, tls, principals))
    unlock_data_dir(data_dir_lock)
    return code


async def _manage_collector(node) -> None:
    """The collector's freezes (quorum/runtime_tuning.py), once replayed."""
    from quorum.runtime_tuning import long_lived_entries, manage_collector

    await manage_collector(lambda: not node.replaying, lambda: long_lived_entries(node.image))


def _reserve(host: str, port: int) -> socket.socket:
    """The API port, bound but not listening: the HTTP workers each listen on
    it with SO_REUSEPORT (the kernel spreads connections evenly among them;
    one inherited socket gave nearly all of them to one worker), and nobody
    else can take it while a worker restarts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


async def _serve_with_workers(node, args, tokens, limits, workers, tls, principals) -> int:
    """The core of a voter with HTTP workers (metaquorum/http_workers.py): it
    serves no HTTP itself; it orders writes, streams the committed batches to
    the workers, and answers what they forward with its own app."""
    from api.app import create_app
    from api.batch_ring import BatchRing
    from api.core_link import CoreLinks, RemoteOrderer, SummedConnections, SummedRequests
    from quorum.orderer import OrderingConfig

    from .http_workers import WorkerPool, share

    reserved = _reserve(args.http_host, int(args.http_port))
    summed, requests = SummedConnections(), SummedRequests()
    public_docs = args.public_docs in (True, "1", "true", "True")
    core_app = create_app(
        node,
        tokens=tokens,
        max_pending_writes=int(args.max_pending_writes),
        public_docs=public_docs,
        connections=summed,
        certificates=principals,
        tls=tls,
        require_certificate=tls is not None and tls.settings.client_auth == "required",
        workers=requests,
    )
    # The committed batches go to the workers and the orderer through shared
    # memory, written once (api/batch_ring.py, decision 125).
    ring = BatchRing(parse_ring_mib(args.batch_ring_mib) << 20)
    links = CoreLinks(node, core_app, summed, requests, ring, workers)
    # The controller and group commit in a process of their own
    # (metaquorum/orderer_process.py): Raft's work stays here.
    node.orderer = RemoteOrderer(links)
    ordering = OrderingConfig.of(node.config)
    orderer = {
        "nodeId": node.node_id,
        "clusterId": node.cluster_id,
        "sessionTimeoutMs": node.controller_config.session_timeout_ms,
        "leaderImbalanceCheckIntervalMs": (
            node.controller_config.leader_imbalance_check_interval_ms
        ),
        "ordering": {f: getattr(ordering, f) for f in OrderingConfig.__dataclass_fields__},
        "logLevel": str(args.log_level),
    }
    config = {
        "nodeId": node.node_id,
        "logRetention": node.config.log_retention,
        "host": args.http_host,
        "port": int(args.http_port),
        "tokensFile": args.tokens_file or None,
        "tls": {
            name: getattr(args, name, None)
            for name in (
                "tls_cert_file",
                "tls_key_file",
                "tls_client_ca_file",
                "tls_client_auth",
                "tls_principals_file",
                "tls_reload_interval_ms",
            )
        },
        "maxPendingWrites": share(int(args.max_pending_writes), workers),
        "maxConnections": share(limits.max_connections, workers),
        "maxConnectionsPerAddress": share(limits.max_per_address, workers),
        "publicDocs": public_docs,
        "logLevel": str(args.log_level),
    }
    pool = WorkerPool(workers, links, config, orderer)
    core_app.state.http_workers = pool
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await node.start()
    links.start()
    await pool.start()
    log.info("http: %d worker process(es) on %s:%s", workers, args.http_host, args.http_port)
    collector = asyncio.ensure_future(_manage_collector(node))
    reloader = None if tls is None else asyncio.ensure_future(tls.watch())
    code = 0
    while not stopping.is_set():
        if node.sm.fatal is not None:
            log.error("refusing to serve: %s", node.sm.fatal)
            code = EXIT_REFUSED
            break
        try:
            await asyncio.wait_for(stopping.wait(), 0.5)
        except TimeoutError:
            pass
    collector.cancel()
    if reloader is not None:
        reloader.cancel()
    # The workers keep answering (307 to the new leader) while leadership moves.
    log.info("stopping: transferring leadership if leading")
    try:
        await node.stop(transfer=code == 0)
    finally:
        await pool.stop()
        reserved.close()
    log.info("stopped")
    return code


def http_config(app, host: str, port: int, limits, stats, tls):
    """The uvicorn configuration of the API, in one process or in each HTTP worker."""
    import uvicorn

    from api.connections import guarded_protocol

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        workers=1,
        timeout_graceful_shutdown=5,
        # Brokers and operators connect directly (a Kubernetes Service is
        # not a proxy): no X-Forwarded-* rewriting on every request.
        proxy_headers=False,
        # Deadlines, head limits and connection caps (api/connections.py).
        # Over TLS the protocol starts TLS itself, once the connection is
        # counted, with our context, which is swapped under the listening
        # socket when the files change (api/tls.py): uvicorn listens for TCP.
        http=guarded_protocol(limits, stats, None if tls is None else tls.listening),
        timeout_keep_alive=5,
    )


async def _serve(node, args, tokens, nofile: int, tls=None, principals=None) -> int:
    import uvicorn

    from api.app import create_app
    from api.connections import ConnectionLimits, ConnectionStats, connection_capacity

    capacity = connection_capacity(nofile)
    max_connections = int(args.max_connections or capacity)
    if max_connections > capacity:
        log.warning(
            "--max-connections %d is more than the open-file limit %d leaves room for (%d): "
            "raise the limit (ulimit -n, or the container runtime's) or lower the flag",
            max_connections,
            nofile,
            capacity,
        )
    limits = ConnectionLimits(
        max_connections=max_connections,
        max_per_address=int(args.max_connections_per_address),
    )
    log.info(
        "http: up to %d connections (%d per client address; open-file limit %d); "
        "request heads within %g s, bodies within %g s + 1 s per %d bytes",
        limits.max_connections,
        limits.max_per_address,
        nofile,
        limits.head_timeout_s,
        limits.body_grace_s,
        limits.min_body_rate,
    )
    workers = parse_workers(args.http_workers)
    if workers:
        return await _serve_with_workers(node, args, tokens, limits, workers, tls, principals)
    stats = ConnectionStats()
    app = create_app(
        node,
        tokens=tokens,
        max_pending_writes=int(args.max_pending_writes),
        public_docs=args.public_docs in (True, "1", "true", "True"),
        connections=stats,
        certificates=principals,
        tls=tls,
        require_certificate=tls is not None and tls.settings.client_auth == "required",
    )

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):  # noqa: ANN001 - uvicorn's signature
            # Hand leadership over first, then stop serving; never re-raise the
            # signal afterwards (uvicorn would, and the exit code would not be 0).
            if not self.should_exit and not stopping.is_set():
                loop.call_soon_threadsafe(stopping.set)
            else:
                self.should_exit = True

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    server = Server(http_config(app, args.http_host, int(args.http_port), limits, stats, tls))

    async def serve_http() -> None:
        try:
            await server.serve()
        except SystemExit:  # uvicorn exits when it cannot bind (the port taken since the check)
            raise RuntimeError(
                f"the HTTP server could not listen on {args.http_host}:{args.http_port} "
                "(uvicorn's error is logged above)"
            ) from None

    await node.start()
    serving = asyncio.ensure_future(serve_http())
    collector = asyncio.ensure_future(_manage_collector(node))
    reloader = None if tls is None else asyncio.ensure_future(tls.watch())

    async def watch() -> int:
        while not stopping.is_set():
            if node.sm.fatal is not None:
                log.error("refusing to serve: %s", node.sm.fatal)
                return EXIT_REFUSED
            if serving.done():
                return 0 if serving.exception() is None else EXIT_CONFIG
            try:
                await asyncio.wait_for(stopping.wait(), 0.5)
            except TimeoutError:
                pass
        return 0

    code = await watch()
    collector.cancel()
    if reloader is not None:
        reloader.cancel()
    if serving.done() and serving.exception() is not None:
        log.error("the HTTP server failed: %s", serving.exception())
        await node.stop(transfer=False)
        return EXIT_CONFIG
    log.info("stopping: transferring leadership if leading")
    try:
        await node.stop(transfer=code == 0)
    finally:
        server.should_exit = True
        await serving
    log.info("stopped")
    return code
