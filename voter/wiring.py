"""A voter's processes, started and linked: what ``metaquorum serve`` runs
once its flags are checked and its QuorumNode is built (metaquorum/serve.py).

Without HTTP workers, one process serves the API over the node (uvicorn).
With them (``_serve_with_workers``), this process is the core: it reserves
the API port, keeps Raft and answers what the workers forward with its own
app; the batch ring and the links (voter/core_link.py) join it to the
orderer process and the workers, which the pool (voter/worker_pool.py)
starts, watches and restarts. Either way the voter runs until SIGTERM (or a
fatal refusal), then hands leadership over before it stops serving.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket

from .http_server import http_config
from .worker_pool import parse_workers

# Exit codes of a voter (metaquorum/serve.py documents them): the HTTP
# server could not listen, and the node refused to serve (corrupt data).
EXIT_CONFIG = 2
EXIT_REFUSED = 3

log = logging.getLogger("metaquorum")


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


async def _serve_with_workers(
    node, args, tokens, limits, workers, ring_mib, tls, principals
) -> int:
    """The core of a voter with HTTP workers (voter/worker_pool.py): it
    serves no HTTP itself; it orders writes, streams the committed batches to
    the workers, and answers what they forward with its own app."""
    from api.app import create_app
    from quorum.orderer import OrderingConfig

    from .batch_ring import BatchRing
    from .core_link import CoreLinks, RemoteOrderer, SummedConnections, SummedRequests
    from .worker_pool import WorkerPool, share

    reserved = _reserve(args.http_host, int(args.http_port))
    summed, requests = SummedConnections(), SummedRequests()
    public_docs = args.public_docs in (True, "1", "true", "True")
    core_app = create_app(
        node,
        tokens=tokens,
        delegation_token_secret=node.config.delegation_token_secret,
        max_pending_writes=int(args.max_pending_writes),
        public_docs=public_docs,
        connections=summed,
        certificates=principals,
        tls=tls,
        require_certificate=tls is not None and tls.settings.client_auth == "required",
        workers=requests,
    )
    # The committed batches go to the workers and the orderer through shared
    # memory, written once (voter/batch_ring.py, decision 125).
    ring = BatchRing(ring_mib << 20)
    links = CoreLinks(node, core_app, summed, requests, ring, workers)
    # The controller and group commit in a process of their own
    # (voter/orderer_process.py): Raft's work stays here.
    node.orderer = RemoteOrderer(links)
    ordering = OrderingConfig.of(node.config)
    orderer = {
        "nodeId": node.node_id,
        "clusterId": node.cluster_id,
        "sessionTimeoutMs": node.controller_config.session_timeout_ms,
        "leaderImbalanceCheckIntervalMs": (
            node.controller_config.leader_imbalance_check_interval_ms
        ),
        # The path, never the secret: this dict is the orderer's command line.
        "delegationTokenSecretFile": node.config.delegation_token_secret_file,
        "delegationTokens": {
            "maxLifetimeMs": node.controller_config.delegation_token_max_lifetime_ms,
            "expiryTimeMs": node.controller_config.delegation_token_expiry_time_ms,
            "expiryCheckIntervalMs": (
                node.controller_config.delegation_token_expiry_check_interval_ms
            ),
        },
        "ordering": {f: getattr(ordering, f) for f in OrderingConfig.__dataclass_fields__},
        "logLevel": str(args.log_level),
    }
    config = {
        "nodeId": node.node_id,
        "clusterId": node.cluster_id,
        "logRetention": node.config.log_retention,
        # The history store the core writes, read by each worker itself.
        "history": None
        if node.config.history is None
        else {
            "path": node.config.history_dir,
            "retentionMs": node.config.history.ms,
            "retentionRecords": node.config.history.records,
        },
        "host": args.http_host,
        "port": int(args.http_port),
        "tokensFile": args.tokens_file or None,
        "delegationTokenSecretFile": node.config.delegation_token_secret_file,
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


def import_http_stack() -> None:
    """Imports what ``serve_voter`` builds the HTTP server from, so that a
    caller can do it before the voter's Raft port opens."""
    import uvicorn  # noqa: F401, PLC0415

    import api.app  # noqa: F401, PLC0415
    import api.connections  # noqa: F401, PLC0415


async def serve_voter(
    node, args, tokens, nofile: int, ring_mib: int, tls=None, principals=None
) -> int:
    """Serves ``node`` as the flags in ``args`` say until SIGTERM; returns the exit
    code. ``nofile``: the open-file limit; ``ring_mib``: the batch ring's size,
    with HTTP workers."""
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
        return await _serve_with_workers(
            node, args, tokens, limits, workers, ring_mib, tls, principals
        )
    stats = ConnectionStats()
    app = create_app(
        node,
        tokens=tokens,
        delegation_token_secret=node.config.delegation_token_secret,
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
