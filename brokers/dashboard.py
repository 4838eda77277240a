"""The simulator's live terminal dashboard and its end-of-run summary (rich)."""

from __future__ import annotations

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .sim import Simulation
from .sim_report import SimResult


def render(sim: Simulation, header: str | None = None) -> Group:
    snap = sim.snapshot()
    c = sim.config
    parts = []
    if header:
        parts.append(Text(header, style="dim"))

    ctl = sim.controller
    leader = ctl.get("leaderId", -1)
    controller = Text.assemble(
        ("controller ", "bold"),
        (f"node {leader}" if leader is not None and leader >= 0 else "none", "cyan"),
        f"  epoch {ctl.get('controllerEpoch', '?')}",
        f"  log offset {snap.offset}",
        f"  hwm {ctl.get('highWatermark', '?')}",
        ("   " + sim.phase, "yellow"),
        f"   {snap.at_s:,.0f} s" + (f" / {c.duration_s:,.0f} s" if c.duration_s else ""),
    )
    parts.append(controller)

    brokers = Table(title="brokers (metadata log)", title_justify="left", expand=True)
    for col in ("active", "fenced", "controlled shutdown", "agents"):
        brokers.add_column(col, justify="right")
    agents = "  ".join(f"{k} {v}" for k, v in sorted(snap.agent_states.items()))
    brokers.add_row(
        Text(str(snap.brokers_active), style="green"),
        Text(str(snap.brokers_fenced), style="red" if snap.brokers_fenced else ""),
        Text(str(snap.brokers_shutting_down), style="yellow" if snap.brokers_shutting_down else ""),
        agents,
    )

    shrink_rate, expand_rate = sim.isr_rates()
    cache = sim.follower.cache if sim.follower else None
    partitions = Table(title="partitions", title_justify="left", expand=True)
    for col in (
        "total",
        "under-replicated",
        "offline",
        "not preferred leader",
        "ISR shrinks/s",
        "expands/s",
        "total ±",
    ):
        partitions.add_column(col, justify="right")
    partitions.add_row(
        str(snap.partitions),
        Text(str(snap.under_replicated), style="yellow" if snap.under_replicated else "green"),
        Text(str(snap.offline), style="red" if snap.offline else "green"),
        # Leader balancing brings it back to 0 (serve --leader-imbalance-check-interval-seconds).
        Text(str(snap.not_preferred), style="yellow" if snap.not_preferred else "green"),
        f"{shrink_rate:.1f}",
        f"{expand_rate:.1f}",
        f"-{cache.isr_shrinks} +{cache.isr_expands}" if cache else "",
    )

    requests = Table(title="requests (last 5 s)", title_justify="left", expand=True)
    for col in ("endpoint", "req/s", "p50 ms", "p99 ms", "errors (whole run)"):
        requests.add_column(col, justify="right" if col != "endpoint" else "left")
    for name in sorted(sim.stats.endpoints):
        rate, h = sim.stats.recent(name)
        errors = sim.stats.endpoints[name].errors
        requests.add_row(
            name,
            f"{rate:,.0f}",
            _fmt(h.quantile(0.5)),
            _fmt(h.quantile(0.99)),
            ", ".join(f"{k} {v}" for k, v in errors.most_common(3)),
        )

    chaos = Text("\n".join(sim.recent_chaos) or "(none yet)")
    done = ", ".join(f"{k} {v}" for k, v in sorted(sim.chaos_done.items())) or "none"
    parts += [
        brokers,
        partitions,
        requests,
        Panel(chaos, title=f"chaos: {done}", title_align="left"),
    ]
    lag = sim.lag_now()
    parts.append(
        Text.assemble(
            ("simulator ", "bold"),
            f"{lag['processes']} process(es)  event-loop lag now ",
            (f"{lag['now_s'] * 1000:,.0f} ms", "red" if lag["warning"] else ""),
            f"  worst {lag['worst_s']:.2f} s  heartbeats late p99 "
            f"{lag['heartbeat_late_p99_ms'] or 0:,.0f} ms   fencings: late heartbeats ",
            (
                str(lag["fencings_late_heartbeats"]),
                "red" if lag["fencings_late_heartbeats"] else "",
            ),
            ", fenced while on time ",
            (str(lag["fencings_on_time"]), "red" if lag["fencings_on_time"] else ""),
        )
    )
    if lag["warning"]:
        parts.append(Text(f"warning: {lag['warning']}", style="bold red"))
    if sim.follower is not None and sim.follower.problem:
        parts.append(Text(f"metadata log: {sim.follower.problem}", style="red"))
    count, example = sim.troubles()
    if count:
        parts.append(Text(f"{count} broker(s) report a problem; {example}", style="red"))
    return Group(*parts)


def summary(result: SimResult) -> Group:
    t = Table(title="simulation summary", title_justify="left")
    t.add_column("")
    t.add_column("", justify="right")
    t.add_row("brokers / partitions", f"{result.brokers} / {result.partitions}")
    t.add_row("seed / duration", f"{result.seed} / {result.duration_s} s")
    t.add_row(
        "chaos injected", ", ".join(f"{k} {v}" for k, v in sorted(result.chaos.items())) or "none"
    )
    t.add_row("ISR shrinks / expands committed", f"{result.isr_shrinks} / {result.isr_expands}")
    for key in ("registrations", "unfencings", "unexpected_fencings"):
        t.add_row(key.replace("_", " "), str(result.events.get(key, 0)))
    if "decommission" in result.chaos:
        t.add_row(
            "decommissions: unregistered / abandoned",
            f"{result.events.get('brokers_unregistered', 0)} / "
            f"{result.events.get('decommissions_abandoned', 0)}",
        )
    lag = result.lag
    if lag:
        t.add_row(
            "  of them: late heartbeats (the simulator's) / fenced while on time (the cluster's)",
            f"{lag['fencings_late_heartbeats']} / {lag['fencings_on_time']}",
        )
        t.add_row(
            f"simulator event-loop lag p50 / p99 / max ({lag['processes']} process(es))",
            f"{lag['loop_p50_ms']} / {lag['loop_p99_ms']} / {lag['loop_max_ms']} ms",
        )
        t.add_row(
            "heartbeats sent late p50 / p99 / max",
            f"{lag['heartbeat_late_p50_ms']} / {lag['heartbeat_late_p99_ms']} / "
            f"{lag['heartbeat_late_max_ms']} ms",
        )
    t.add_row(
        "settled after chaos",
        f"yes, in {result.settle_s} s"
        if result.settled
        else "NO (brokers or ISRs did not recover)",
    )
    t.add_row("records checked", str(result.records_checked))
    t.add_row("violations", str(len(result.violations)))
    t.add_row("stuck ISR changes", str(len(result.stuck)))
    req = Table(title="requests", title_justify="left")
    for col in ("endpoint", "count", "p50 ms", "p99 ms", "max ms", "errors"):
        req.add_column(col, justify="left" if col in ("endpoint", "errors") else "right")
    for name, r in result.requests.items():
        req.add_row(
            name,
            str(r["count"]),
            str(r["p50_ms"]),
            str(r["p99_ms"]),
            str(r["max_ms"]),
            ", ".join(f"{k} {v}" for k, v in r["errors"].items()),
        )
    parts = [t, req]
    for line in (result.violations + result.stuck + result.problems)[:20]:
        parts.append(Text(line, style="red"))
    for line in result.warnings:
        parts.append(Text(f"warning: {line}", style="bold yellow"))
    verdict = "OK: no invariant violated" if result.ok else "FAILED: see above"
    parts.append(Text(verdict, style="bold green" if result.ok else "bold red"))
    return Group(*parts)


def _fmt(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"
