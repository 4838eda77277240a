"""The audit report: one self-contained HTML file, charts embedded as PNGs.

Takes only small, already aggregated data (built by ``run.py``), so it never
touches Spark and renders in a second.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from datetime import UTC, datetime

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402

from metadata_records.log_invariants import RULES  # noqa: E402

STATE_COLORS = {
    "active": "#2ca02c",
    "fenced": "#d62728",
    "controlled shutdown": "#ff7f0e",
    "unregistered": "#bbbbbb",
}


@dataclass
class ReportData:
    input_dir: str
    summary: dict  # figure name -> value, in display order
    broker_intervals: list[tuple]  # (broker_id, state, start_ms, end_ms | None)
    minutes: list[tuple]  # (minute, shrinks, expands, urp_delta, offline_delta), sorted
    controller_changes: list[tuple]  # (offset, timestamp_ms, epoch, leader_id)
    violations: list[tuple]  # (offset, timestamp_ms, check, entity, explanation), first rows
    violation_counts: dict[str, int]
    total_violations: int
    first_ms: int
    last_ms: int
    images: dict[str, bytes] = field(default_factory=dict)


def _when(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _minutes(ms: int, first_ms: int) -> float:
    return (ms - first_ms) / 60_000


def broker_chart(data: ReportData) -> bytes:
    brokers = sorted({row[0] for row in data.broker_intervals})
    fig, ax = plt.subplots(figsize=(11, max(2.5, 0.35 * len(brokers) + 1.2)))
    bars: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for broker, state, start, end in data.broker_intervals:
        x0 = _minutes(start, data.first_ms)
        x1 = _minutes(end if end is not None else data.last_ms, data.first_ms)
        bars.setdefault((broker, state), []).append((x0, max(x1 - x0, 1e-3)))
    row = {b: i for i, b in enumerate(brokers)}
    for (broker, state), spans in bars.items():
        i = row[broker]
        ax.broken_barh(spans, (i - 0.4, 0.8), facecolors=STATE_COLORS[state], linewidth=0)
    for _, ts, _epoch, _leader in data.controller_changes[1:]:
        ax.axvline(_minutes(ts, data.first_ms), color="#555", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(brokers)), [f"broker {b}" for b in brokers])
    ax.set_xlabel(f"minutes since {_when(data.first_ms)} UTC (dashed: controller failover)")
    ax.set_title("Broker states")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in STATE_COLORS.values()]
    ax.legend(handles, STATE_COLORS.keys(), loc="upper right", ncols=3, fontsize="small")
    ax.set_xlim(0, max(_minutes(data.last_ms, data.first_ms), 1e-3))
    ax.set_ylim(-0.7, len(brokers) - 0.3 + 0.8)
    return _png(fig)


def rates_chart(data: ReportData) -> bytes:
    first_minute = data.first_ms // 60_000
    xs = [m - first_minute for m, *_ in data.minutes]
    fig, ax = plt.subplots(figsize=(11, 3.2))
    ax.plot(xs, [r[1] for r in data.minutes], label="ISR shrinks", color="#d62728", linewidth=1)
    ax.plot(xs, [r[2] for r in data.minutes], label="ISR expands", color="#1f77b4", linewidth=1)
    ax.set_xlabel(f"minute since {_when(first_minute * 60_000)} UTC")
    ax.set_ylabel("per minute")
    ax.set_title("ISR shrinks and expands per minute")
    ax.legend(loc="upper right", fontsize="small")
    ax.grid(alpha=0.3)
    return _png(fig)


def urp_chart(data: ReportData) -> bytes:
    first_minute = data.first_ms // 60_000
    xs, urp, offline = [], [], []
    u = o = 0
    for m, _s, _e, du, do in data.minutes:
        u += du
        o += do
        xs.append(m - first_minute)
        urp.append(u)
        offline.append(o)
    fig, ax = plt.subplots(figsize=(11, 3.2))
    ax.step(xs, urp, where="post", label="under-replicated", color="#ff7f0e", linewidth=1)
    ax.step(xs, offline, where="post", label="offline (no leader)", color="#d62728", linewidth=1)
    ax.set_xlabel(f"minute since {_when(first_minute * 60_000)} UTC (count at each minute's end)")
    ax.set_ylabel("partitions")
    ax.set_title("Under-replicated and offline partitions over time")
    ax.legend(loc="upper right", fontsize="small")
    ax.grid(alpha=0.3)
    return _png(fig)


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1250px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f4f4f4}.ok{color:#2ca02c;font-weight:bold}
.bad{color:#d62728;font-weight:bold}img{max-width:100%}.num{text-align:right}
"""


def render(data: ReportData) -> str:
    data.images = {
        "broker-states": broker_chart(data),
        "isr-rates": rates_chart(data),
        "under-replicated": urp_chart(data),
    }
    e = html.escape
    out = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>metaquorum audit: {e(data.input_dir)}</title><style>{_CSS}</style></head><body>",
        f"<h1>metaquorum metadata-log audit</h1><p>Input: <code>{e(data.input_dir)}</code>, "
        f"{e(_when(data.first_ms))} to {e(_when(data.last_ms))} UTC.</p>",
    ]
    if data.total_violations:
        out.append(f"<p class='bad'>{data.total_violations} violation(s) found.</p>")
    else:
        out.append("<p class='ok'>Every invariant held at every offset.</p>")
    out.append("<h2>Summary</h2><table>")
    for name, value in data.summary.items():
        out.append(f"<tr><th>{e(name)}</th><td class='num'>{e(str(value))}</td></tr>")
    out.append("</table>")
    for key, title in (
        ("broker-states", "Broker states"),
        ("isr-rates", "ISR shrinks and expands"),
        ("under-replicated", "Under-replicated partitions"),
    ):
        b64 = base64.b64encode(data.images[key]).decode()
        out.append(f"<h2>{title}</h2><img alt='{e(title)}' src='data:image/png;base64,{b64}'>")
    out.append(
        "<h2>Checks</h2><table><tr><th>check</th><th>what must hold</th><th>violations</th></tr>"
    )
    for check, rule in RULES.items():
        meaning = rule.holds
        n = data.violation_counts.get(check, 0)
        cls = "bad" if n else "ok"
        out.append(
            f"<tr><td>{e(check)}</td><td>{e(meaning)}</td><td class='num {cls}'>{n}</td></tr>"
        )
    out.append("</table><h2>Violations</h2>")
    if data.violations:
        shown = len(data.violations)
        if shown < data.total_violations:
            out.append(f"<p>The first {shown} of {data.total_violations}, in offset order.</p>")
        out.append(
            "<table><tr><th>offset</th><th>time (UTC)</th><th>check</th><th>entity</th>"
            "<th>explanation</th></tr>"
        )
        for offset, ts, check, entity, explanation in data.violations:
            out.append(
                f"<tr><td class='num'>{offset}</td><td>{e(_when(ts))}</td><td>{e(check)}</td>"
                f"<td>{e(entity)}</td><td>{e(explanation)}</td></tr>"
            )
        out.append("</table>")
    else:
        out.append("<p class='ok'>None.</p>")
    out.append("<h2>Controller elections</h2><table><tr><th>offset</th><th>time (UTC)</th>"
               "<th>controller epoch</th><th>leader</th></tr>")  # fmt: skip
    for offset, ts, epoch, leader in data.controller_changes:
        out.append(
            f"<tr><td class='num'>{offset}</td><td>{e(_when(ts))}</td>"
            f"<td class='num'>{epoch}</td><td class='num'>{leader}</td></tr>"
        )
    out.append("</table></body></html>")
    return "\n".join(out)
