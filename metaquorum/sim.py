"""``metaquorum sim``: many simulated brokers against a running cluster, with a
live dashboard, chaos from a seed, and an invariant check of the log at the end.

Exit codes: 0 the run ended with no violation; 1 a violation, a stuck ISR change
or a cluster that did not settle; 2 bad flags or no cluster to talk to.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import signal
import sys

import orjson
from rich.console import Console
from rich.live import Live

from brokers.client import ClientError
from brokers.dashboard import render, summary
from brokers.sim_config import CHAOS_KINDS, HTTP_CLIENTS, SimConfig
from brokers.sim_report import SimResult
from brokers.sim_workers import BROKERS_PER_PROCESS, auto_processes, make_simulation
from brokers.tls import ClientTlsError

from .connection_flags import add_connection_flags, tls_from_args


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``1h``; ``0`` runs until Ctrl-C."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (examples: 30s, 10m, 0)")
    value, unit = float(m.group(1)), m.group(2) or "s"
    return value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


def parse_chaos(text: str) -> tuple[str, ...]:
    if text in ("", "none"):
        return ()
    if text == "all":
        return CHAOS_KINDS
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in CHAOS_KINDS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown chaos kind {', '.join(unknown)}; choose from {','.join(CHAOS_KINDS)} or all"
        )
    return kinds


def parse_processes(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of processes, or auto") from None


def add_sim_flags(p: argparse.ArgumentParser) -> None:
    add_connection_flags(p, "an admin token when auth is on")
    p.add_argument("--brokers", type=int, default=20, help="simulated brokers")
    p.add_argument("--topics", type=int, default=4, help="topics to create (replication factor 3)")
    p.add_argument("--partitions", type=int, default=50, help="partitions per topic")
    p.add_argument(
        "--duration",
        type=parse_duration,
        default=parse_duration("60s"),
        help="how long to run: 30s, 10m; 0 = until Ctrl-C",
    )
    p.add_argument(
        "--chaos",
        type=parse_chaos,
        default=(),
        help=f"comma-separated chaos kinds: {','.join(CHAOS_KINDS)}, or all",
    )
    p.add_argument("--seed", type=int, default=0, help="the chaos schedule's seed")
    p.add_argument(
        "--heartbeat-interval",
        type=parse_duration,
        default=1.0,
        help="broker heartbeat interval (Kafka's default is 2s)",
    )
    p.add_argument(
        "--replica-lag-ms",
        type=int,
        default=3000,
        help="replica.lag.time.max.ms of the simulated leaders",
    )
    p.add_argument(
        "--session-timeout",
        type=parse_duration,
        default=9.0,
        help="the cluster's broker session timeout (serve --session-timeout-ms), to "
        "judge whether a fencing was the simulator's doing (default 9s)",
    )
    p.add_argument("--first-broker-id", type=int, default=1)
    p.add_argument(
        "--topic-prefix",
        default="sim-",
        help="the run's topics are named PREFIX0, PREFIX1, ... (an existing one is reused)",
    )
    p.add_argument(
        "--processes",
        type=parse_processes,
        default="auto",
        help="worker processes to run the brokers in, each with its own event loop; "
        f"auto (the default): one per {BROKERS_PER_PROCESS:,} brokers, at most one per core",
    )
    p.add_argument(
        "--http",
        choices=HTTP_CLIENTS,
        default="lean",
        help="the brokers' HTTP client: lean (keep-alive, a tenth of httpx's CPU) or httpx",
    )
    p.add_argument("--no-check", action="store_true", help="skip the log check at the end")
    p.add_argument(
        "--json",
        action="store_true",
        help="no dashboard; progress on stderr, the summary as JSON on stdout",
    )


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """ClientTlsError (a ValueError) names a bad TLS flag."""
    return SimConfig(
        urls=[u.strip().rstrip("/") for u in args.url.split(",") if u.strip()],
        brokers=args.brokers,
        topics=args.topics,
        partitions=args.partitions,
        replication_factor=min(3, args.brokers),
        duration_s=args.duration,
        chaos=args.chaos,
        seed=args.seed,
        token=args.token,
        first_broker_id=args.first_broker_id,
        topic_prefix=args.topic_prefix,
        heartbeat_interval_s=args.heartbeat_interval,
        session_timeout_s=args.session_timeout,
        replica_lag_time_max_ms=args.replica_lag_ms,
        check_log=not args.no_check,
        http=args.http,
        processes=(auto_processes(args.brokers) if args.processes == "auto" else args.processes),
        tls_files=(args.cacert, args.cert, args.key) if args.cacert or args.cert else None,
        tls=tls_from_args(args),
    )


def run_sim(args: argparse.Namespace, header: str | None = None) -> int:
    try:
        config = config_from_args(args)
    except ClientTlsError as e:
        print(f"metaquorum sim: {e}", file=sys.stderr)
        return 2
    bad = config.problems()
    if bad:
        for line in bad:
            print(f"metaquorum sim: {line}", file=sys.stderr)
        return 2
    try:
        result = run_loop(simulate(config, as_json=args.json, header=header))
    except ClientError as e:
        print(f"metaquorum sim: {e}", file=sys.stderr)
        return 2
    if result is None:
        return 130
    if args.json:
        sys.stdout.write(orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        Console().print(summary(result))
    return 0 if result.ok else 1


def run_loop(main):
    """Runs ``main`` on uvloop, as ``serve`` does: its timers and sockets are C,
    a third of the default loop's CPU per heartbeat."""
    import uvloop  # noqa: PLC0415

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


async def simulate(
    config: SimConfig, *, as_json: bool = False, header: str | None = None
) -> SimResult | None:
    """Runs the simulation with the dashboard (or progress lines on stderr).

    The first Ctrl-C ends the run early but cleanly (settle, controlled
    shutdown, log check); a second one aborts (None)."""
    err = Console(stderr=True)
    sim = make_simulation(config, log=lambda line: err.print(line, style="dim"))
    run = asyncio.create_task(sim.run())
    loop = asyncio.get_running_loop()

    def on_interrupt() -> None:
        if sim.stop_requested:
            run.cancel()
        else:
            sim.request_stop()

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
    live = None
    if not as_json and sys.stdout.isatty():
        live = Live(render(sim, header), refresh_per_second=4, transient=False)
        live.start()
    try:
        last_line = -5.0
        warned = False
        while not run.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(run), 0.5)
            warning = sim.lag_now()["warning"]
            if warning and not warned and live is None:
                warned = True
                err.print(f"warning: {warning}", style="bold red", highlight=False)
            if live is not None:
                live.update(render(sim, header))
            elif sim.elapsed_s - last_line >= 5:
                last_line = sim.elapsed_s
                s = sim.snapshot()
                err.print(
                    f"[{s.at_s:5.0f}s] {sim.phase}: brokers active {s.brokers_active} "
                    f"fenced {s.brokers_fenced} shutting down {s.brokers_shutting_down}; "
                    f"partitions {s.partitions} under-replicated {s.under_replicated} "
                    f"offline {s.offline} not led by their preferred replica "
                    f"{s.not_preferred}; offset {s.offset}",
                    highlight=False,
                )
        try:
            return run.result()
        except asyncio.CancelledError:
            return None
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        if live is not None:
            live.update(render(sim, header))
            live.stop()


# ---------------------------------------------------------------- one real broker


def add_broker_flags(p: argparse.ArgumentParser) -> None:
    add_connection_flags(p, "this broker's token when auth is on")
    p.add_argument("--broker-id", type=int, required=True)
    p.add_argument("--rack", default=None)
    p.add_argument(
        "--heartbeat-interval",
        type=parse_duration,
        default=2.0,
        help="Kafka's broker.heartbeat.interval.ms (default 2s)",
    )
    p.add_argument(
        "--replica-lag-ms", type=int, default=30000, help="replica.lag.time.max.ms (default 30000)"
    )


def run_broker(args: argparse.Namespace) -> int:
    """One broker agent until SIGTERM or Ctrl-C, then a controlled shutdown.
    Its followers are the cluster's registered, unfenced brokers, fetching in step."""
    from brokers.agent import AgentConfig, BrokerAgent
    from brokers.client import MetaquorumClient
    from brokers.metadata_cache import LogFollower

    urls = [u.strip().rstrip("/") for u in args.url.split(",") if u.strip()]
    err = Console(stderr=True)
    try:
        tls = tls_from_args(args)
    except ClientTlsError as e:
        print(f"metaquorum broker: {e}", file=sys.stderr)
        return 2

    async def main() -> int:
        async with MetaquorumClient(urls, token=args.token, tls=tls) as client:
            status = await client.status()
            if not status.ok:
                raise ClientError(f"{status.error_name}: {status.error_message}")
            follower = LogFollower(client)
            following = asyncio.create_task(follower.run())
            agent = BrokerAgent(
                args.broker_id,
                status.body["clusterId"],
                client,
                follower,
                config=AgentConfig(
                    heartbeat_interval_s=args.heartbeat_interval,
                    replica_lag_time_max_ms=args.replica_lag_ms,
                ),
                rack=args.rack,
            )
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            agent.start()
            err.print(f"broker {args.broker_id}: registering with {', '.join(urls)}")
            last = None
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
                now = (agent.state, agent.epoch, agent.problem)
                if now != last:
                    last = now
                    err.print(
                        f"broker {args.broker_id}: {agent.state.value}, epoch {agent.epoch}, "
                        f"metadata offset {follower.image.last_offset}"
                        + (f"; {agent.problem}" if agent.problem else ""),
                        highlight=False,
                    )
            err.print(f"broker {args.broker_id}: controlled shutdown")
            clean = await agent.stop()
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
            err.print(
                f"broker {args.broker_id}: "
                + ("stopped cleanly" if clean else "controlled shutdown timed out; stopped")
            )
            return 0 if clean else 1

    try:
        return asyncio.run(main())
    except ClientError as e:
        print(f"metaquorum broker: {e}", file=sys.stderr)
        return 2
