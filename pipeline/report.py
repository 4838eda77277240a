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
    controller_changes: list[tuple]  # (offset, timestamp_ms, epoch, leader_id, batch_offset)
    # The first rows: (offset, timestamp_ms, check, entity, explanation, then
    # who.VIOLATION_WHO: principal, api, address, request id, rule, batch_offset).
    violations: list[tuple]
    violation_counts: dict[str, int]
    total_violations: int
    first_ms: int
    last_ms: int
    # (bucket start ms, principal, api, records, requests): who.writes.
    writes: list[tuple] = field(default_factory=list)
    bucket_ms: int = 60_000
    # batch offset -> who.batch_whos's entry: the batches the events link to.
    batches: dict[int, dict] = field(default_factory=dict)
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
    for _, ts, *_ in data.controller_changes[1:]:
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


CHART_SERIES = 8  # principals (or APIs) drawn each on its own; the rest as "others"


def _stack(ax, data: ReportData, column: int, title: str) -> None:
    """Records per time bucket, stacked by ``data.writes[column]`` (1 the
    principal, 2 the API)."""
    totals: dict[str, int] = {}
    for row in data.writes:
        totals[row[column]] = totals.get(row[column], 0) + row[3]
    top = sorted(totals, key=lambda k: (-totals[k], k))[:CHART_SERIES]
    names = top + (["others"] if len(totals) > len(top) else [])
    buckets = sorted({w[0] for w in data.writes})
    index = {b: i for i, b in enumerate(buckets)}
    series = {name: [0] * len(buckets) for name in names}
    for row in data.writes:
        series[row[column] if row[column] in top else "others"][index[row[0]]] += row[3]
    xs = [_minutes(b, data.first_ms) for b in buckets]
    width = data.bucket_ms / 60_000 * 0.9
    bottom = [0] * len(buckets)
    for name in names:
        ax.bar(xs, series[name], width, bottom=bottom, label=name, align="edge", linewidth=0)
        bottom = [a + b for a, b in zip(bottom, series[name], strict=True)]
    ax.set_ylabel("records written")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    ax.grid(alpha=0.3, axis="y")


def who_chart(data: ReportData) -> bytes:
    """Records written per time bucket, by principal and by API."""
    fig, (by_principal, by_api) = plt.subplots(2, 1, figsize=(11, 6.4), sharex=True)
    _stack(by_principal, data, 1, "Writes by principal")
    _stack(by_api, data, 2, "Writes by API")
    minutes = data.bucket_ms // 60_000
    by_api.set_xlabel(f"minutes since {_when(data.first_ms)} UTC ({minutes}-minute buckets)")
    return _png(fig)


def who_totals(writes: list[tuple]) -> list[dict]:
    """Records and requests per principal and API (summed over the time
    buckets of ``who.writes``), most records first."""
    totals: dict[tuple[str, str], list[int]] = {}
    for _bucket, principal, api, n, requests in writes:
        t = totals.setdefault((principal, api), [0, 0])
        t[0] += n
        t[1] += min(requests, n)  # an estimate; a request writes one record at least
    return [
        {"principal": p, "api": a, "records": n, "requests": r}
        for (p, a), (n, r) in sorted(totals.items(), key=lambda kv: (-kv[1][0], kv[0]))
    ]


def _batch_link(batch: int | None, text: str) -> str:
    """``text`` linking to the batch's row in the report's batch table."""
    if batch is None:
        return text
    return f"<a href='#batch-{batch}'>{text}</a>"


def _who_cells(who: tuple) -> str:
    """Principal (and the controller's rule), API, address, request id."""
    e = html.escape
    principal, api, address, request_id, rule = (v or "" for v in who)
    if rule:
        principal = f"{e(principal)}<br><small>{e(rule)}</small>"
    else:
        principal = e(principal)
    return f"<td>{principal}</td><td>{e(api)}</td><td>{e(address)}</td><td>{e(request_id)}</td>"


def _who_section(data: ReportData) -> list[str]:
    e = html.escape
    out = ["<h2 id='who'>Who changed what</h2>"]
    if not data.writes:
        out.append(
            "<p>No record of this export carries a who (it was written before the log "
            "recorded one): export again from a current node.</p>"
        )
        return out
    b64 = base64.b64encode(data.images["who"]).decode()
    out.append(f"<img alt='Writes by principal and by API' src='data:image/png;base64,{b64}'>")
    totals = who_totals(data.writes)
    everything = sum(t["records"] for t in totals)
    out.append(
        "<table><tr><th>principal</th><th>API</th><th>records</th><th>share</th>"
        "<th>requests (approx.)</th></tr>"
    )
    for t in totals:
        out.append(
            f"<tr><td>{e(t['principal'])}</td><td>{e(t['api'])}</td>"
            f"<td class='num'>{t['records']:,}</td>"
            f"<td class='num'>{100 * t['records'] / everything:.1f}%</td>"
            f"<td class='num'>{t['requests']:,}</td></tr>"
        )
    out.append("</table>")
    behind: dict[tuple[str, str], int] = {}
    for v in data.violations:
        key = (v[5] or "(no who)", v[6] or "")
        behind[key] = behind.get(key, 0) + 1
    if behind:
        out.append("<p>Behind the violations listed below:</p><table><tr><th>principal</th>"
                   "<th>API</th><th>violations</th></tr>")  # fmt: skip
        for (principal, api), n in sorted(behind.items(), key=lambda kv: (-kv[1], kv[0])):
            out.append(
                f"<tr><td>{e(principal)}</td><td>{e(api)}</td><td class='num bad'>{n}</td></tr>"
            )
        out.append("</table>")
    return out


def _batch_section(data: ReportData) -> list[str]:
    """The batches the events link to: who asked for each run of their records,
    and where to read the batch on a node that still holds it."""
    e = html.escape
    out = [
        "<h2 id='batches'>Batches</h2><p>The batches the violations and elections above link "
        "to, with who asked for their records. On a node that still holds the offset, "
        "<code>GET /v1/log</code> with the path shown returns the batch "
        "(<code>metaquorum log --from N</code> prints the log from there).</p>",
        "<table><tr><th>batch</th><th>time (UTC)</th><th>records</th><th>from</th>"
        "<th>records of the run</th><th>principal</th><th>API</th><th>address</th>"
        "<th>request id</th><th>on a node</th></tr>",
    ]
    for batch, entry in sorted(data.batches.items()):
        runs = entry["runs"]
        path = f"/v1/log?fromOffset={batch}&amp;maxRecords={entry['records']}"
        for i, (first, n, who) in enumerate(runs):
            head = ""
            if i == 0:
                span = len(runs)
                head = (
                    f"<td rowspan='{span}' id='batch-{batch}' class='num'>{batch}</td>"
                    f"<td rowspan='{span}'>{e(_when(entry['timestamp_ms']))}</td>"
                    f"<td rowspan='{span}' class='num'>{entry['records']}</td>"
                )
            cells = _who_cells(who) if who[0] else "<td colspan='4'>(no who)</td>"
            tail = f"<td rowspan='{len(runs)}'><code>{path}</code></td>" if i == 0 else ""
            out.append(
                f"<tr>{head}<td class='num'>{first}</td><td class='num'>{n}</td>{cells}{tail}</tr>"
            )
    out.append("</table>")
    return out


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
    if data.writes:
        data.images["who"] = who_chart(data)
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
    out += _who_section(data)
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
            "<th>explanation</th><th>principal</th><th>API</th><th>address</th>"
            "<th>request id</th></tr>"
        )
        for offset, ts, check, entity, explanation, *who, batch in data.violations:
            out.append(
                f"<tr><td class='num'>{_batch_link(batch, str(offset))}</td>"
                f"<td>{e(_when(ts))}</td><td>{e(check)}</td>"
                f"<td>{e(entity)}</td><td>{e(explanation)}</td>{_who_cells(tuple(who))}</tr>"
            )
        out.append("</table>")
    else:
        out.append("<p class='ok'>None.</p>")
    out.append("<h2>Controller elections</h2><table><tr><th>offset</th><th>time (UTC)</th>"
               "<th>controller epoch</th><th>leader</th></tr>")  # fmt: skip
    for offset, ts, epoch, leader, batch in data.controller_changes:
        out.append(
            f"<tr><td class='num'>{_batch_link(batch, str(offset))}</td><td>{e(_when(ts))}</td>"
            f"<td class='num'>{epoch}</td><td class='num'>{leader}</td></tr>"
        )
    out.append("</table>")
    if data.batches:
        out += _batch_section(data)
    out.append("</body></html>")
    return "\n".join(out)
