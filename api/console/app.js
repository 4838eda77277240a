// The metaquorum console: one read-only page per view, drawn from the API's
// own reads, kept live by GET /v1/log's long-poll.
//
// Everything the API returns is put into the page as text (textContent,
// attributes set one by one, URLs built with encodeURIComponent): never as
// HTML, so a hostile topic name or principal is shown, not run. The page's
// Content-Security-Policy (api/routes/console.py) forbids inline script too.
// When a view has drawn its first data it sets <body data-loaded="VIEW">:
// the browser test and bench/console.py wait on it.

const main = document.getElementById("main");
const statusBadge = document.getElementById("status");
const PAGE_SIZE = 100;
const WAIT_MS = 20000;

// ------------------------------------------------------------ DOM helpers

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const link = (href, ...children) => h("a", { href }, ...children);
const tag = (text, kind) => h("span", { class: "tag " + (kind || text) }, text);
const list = (xs) => (xs && xs.length ? xs.join(", ") : "none");
const time = (ms) => (ms === null || ms === undefined ? "" : new Date(ms).toISOString().replace("T", " ").replace("Z", ""));
const brokerHref = (id) => "/ui/brokers/" + encodeURIComponent(id);
const partitionHref = (topic, p) =>
  "/ui/partitions/" + encodeURIComponent(topic) + "/" + encodeURIComponent(p);

function table(headers, rows) {
  return h(
    "table",
    {},
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows),
  );
}

function card(label, value) {
  return h("div", { class: "card" }, h("div", { class: "value" }, value), h("div", { class: "label" }, label));
}

function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.filter(([, v]) => v !== undefined).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "")]));
}

function draw(view, ...children) {
  main.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  document.body.dataset.loaded = view;
  // When the first data was drawn, in ms since navigation began (bench/console.py).
  if (!document.body.dataset.drawnMs) document.body.dataset.drawnMs = performance.now().toFixed(1);
}

// ------------------------------------------------------------ the API

class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body || {};
  }
}

async function api(path) {
  const response = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (response.status === 401) {
    location.assign("/ui/login");
    throw new ApiError(401, "sign in first");
  }
  let body = null;
  try {
    body = await response.json();
  } catch (e) {
    throw new ApiError(response.status, `${path}: ${response.status} ${response.statusText}`);
  }
  if (!response.ok) throw new ApiError(response.status, body.errorMessage || `${path}: ${response.status}`, body);
  return body;
}

function failed(error) {
  draw("error", h("h1", {}, "Could not load"), h("p", { class: "error", id: "error" }, String(error.message || error)));
}

// ------------------------------------------------------------ the views

async function quorumView() {
  const s = await api("/v1/quorum/status");
  const e = s.elections || {};
  const counts = (obj) => Object.entries(obj || {}).map(([cause, n]) => `${cause}: ${n}`).join(", ") || "none";
  const voters = (s.voters || []).map((v) =>
    h(
      "tr",
      { dataset: { node: v.nodeId } },
      h("td", { class: "num" }, v.nodeId),
      h("td", {}, v.nodeId === s.leaderId ? tag("leader", "active") : v.role),
      h("td", {}, v.url || ""),
      h("td", {}, v.connected ? "yes" : tag("no", "fenced")),
      h("td", { class: "num" }, v.lagRecords ?? ""),
      h("td", { class: "num" }, v.logEndOffset ?? ""),
    ),
  );
  const workers = (s.httpWorkers || []).map((w) =>
    h(
      "tr",
      {},
      h("td", { class: "num" }, w.index),
      h("td", { class: "num" }, w.pid),
      h("td", {}, w.alive ? tag("alive", "active") : tag("down", "fenced")),
      h("td", { class: "num" }, Math.round(w.uptimeS)),
      h("td", { class: "num" }, w.restarts),
      h("td", { class: "num" }, w.requests ?? ""),
    ),
  );
  draw(
    "quorum",
    h("h1", {}, "Quorum"),
    h(
      "div",
      { class: "cards" },
      h("div", { class: "card", id: "leader-card" }, h("div", { class: "value", id: "leader-id" }, s.leaderId ?? "none"), h("div", { class: "label" }, "leader (node id)")),
      card("Raft term", s.raftTerm ?? ""),
      card("high watermark", s.highWatermark ?? ""),
      card("this voter", `${s.nodeId} (${s.role})`),
      card("auth", s.auth),
      card("state", s.status || (s.ready ? "ready" : "not ready")),
    ),
    h("h2", {}, "Voters"),
    table(["node", "role", "URL", "connected", "lag (records)", "log end"], voters),
    s.leaderId !== s.nodeId ? h("p", { class: "muted" }, "Lag and log ends are measured by the leader; open its console for them.") : null,
    h("h2", {}, "Elections"),
    facts([
      ["elections started, by cause", counts(e.electionsStarted)],
      ["leadership lost, by cause", counts(e.leadershipLost)],
      ["leader changes", e.leaderChanges ?? ""],
      ["pre-vote", e.preVote ? "on" : "off"],
    ]),
    h("h2", {}, "HTTP workers"),
    workers.length
      ? table(["worker", "pid", "state", "uptime (s)", "restarts", "requests"], workers)
      : h("p", { class: "muted" }, "this voter serves HTTP in one process (no --http-workers)"),
  );
}

const BROKER_STATES = [
  ["all", "All"],
  ["active", "Active"],
  ["fenced", "Fenced"],
  ["shuttingDown", "In controlled shutdown"],
];

async function brokersView(params) {
  const state = params.get("state") || "all";
  const from = Number(params.get("from") || 0);
  const d = await api(`/ui/data/brokers?state=${encodeURIComponent(state)}&from=${from}&limit=${PAGE_SIZE}`);
  const rows = d.brokers.map((b) =>
    h(
      "tr",
      { class: b.state === "fenced" ? "offline" : b.state === "shuttingDown" ? "under" : "", dataset: { broker: b.brokerId } },
      h("td", { class: "num" }, link(brokerHref(b.brokerId), b.brokerId)),
      h("td", {}, tag(b.state)),
      h("td", {}, b.rack ?? ""),
      h("td", { class: "num" }, b.brokerEpoch),
      h("td", { class: "num" }, b.registrationOffset),
      h("td", {}, link(brokerHref(b.brokerId), "explain")),
    ),
  );
  draw(
    "brokers",
    h("h1", {}, "Brokers"),
    h("div", { class: "cards" }, card("registered", d.counts.all), card("active", d.counts.active), card("fenced", d.counts.fenced), card("in controlled shutdown", d.counts.shuttingDown)),
    h(
      "div",
      { class: "toolbar" },
      BROKER_STATES.map(([key, label]) => h("a", { href: `/ui/brokers?state=${key}`, class: key === state ? "current" : "" }, label)),
    ),
    table(["broker", "state", "rack", "epoch", "registered at", ""], rows),
    pager(d, from, (f) => `/ui/brokers?state=${encodeURIComponent(state)}&from=${f}`),
  );
}

function pager(d, from, href) {
  const end = Math.min(from + d.limit, d.total);
  return h(
    "div",
    { class: "toolbar" },
    h("span", { class: "muted" }, d.total ? `${from + 1} to ${end} of ${d.total}` : "none"),
    from > 0 ? link(href(Math.max(0, from - d.limit)), "previous") : null,
    end < d.total ? link(href(end), "next") : null,
  );
}

async function partitionsView(params) {
  const only = params.get("only") || "all";
  const topic = params.get("topic") || "";
  const from = Number(params.get("from") || 0);
  const q = `only=${encodeURIComponent(only)}&topic=${encodeURIComponent(topic)}`;
  const d = await api(`/ui/data/partitions?${q}&from=${from}&limit=${PAGE_SIZE}`);
  const rows = d.partitions.map((p) =>
    h(
      "tr",
      { class: p.status.includes("offline") ? "offline" : p.status.includes("underReplicated") ? "under" : "", dataset: { partition: `${p.topic}/${p.partition}` } },
      h("td", {}, link(partitionHref(p.topic, p.partition), p.topic)),
      h("td", { class: "num" }, p.partition),
      h("td", { class: "num" }, p.leader),
      h("td", { class: "num" }, p.leaderEpoch),
      h("td", {}, list(p.replicas)),
      h("td", {}, list(p.isr)),
      h("td", {}, list(p.elr)),
      h("td", {}, p.status.length ? p.status.map((s) => tag(s)) : tag("ok")),
    ),
  );
  const filter = h(
    "form",
    { action: "/ui/partitions", method: "get", class: "toolbar" },
    h("input", { type: "hidden", name: "only", value: only }),
    h("input", { name: "topic", value: topic, placeholder: "topic name" }),
    h("button", { type: "submit" }, "Filter"),
  );
  draw(
    "partitions",
    h("h1", {}, "Topics and partitions"),
    h("div", { class: "cards" }, card("topics", d.counts.topics), card("partitions", d.counts.partitions), card("under-replicated", d.counts.underReplicated), card("offline", d.counts.offline)),
    h(
      "div",
      { class: "toolbar" },
      [["all", "All"], ["problems", "Under-replicated or offline"]].map(([key, label]) =>
        h("a", { href: `/ui/partitions?only=${key}&topic=${encodeURIComponent(topic)}`, class: key === only ? "current" : "" }, label),
      ),
      filter,
    ),
    table(["topic", "partition", "leader", "leader epoch", "replicas", "ISR", "ELR", "status"], rows),
    pager(d, from, (f) => `/ui/partitions?${q}&from=${f}`),
  );
}

function summary(sentences) {
  const items = Array.isArray(sentences) ? sentences : sentences ? [sentences] : [];
  return h("ul", { class: "summary", id: "summary" }, items.map((s) => h("li", {}, s)));
}

function whoText(who) {
  if (!who) return "";
  return [who.principal, who.api, who.requestId && `request ${who.requestId}`, who.rule && `rule ${who.rule}`].filter(Boolean).join(" · ");
}

function refusalsTable(refusals, from) {
  const note = from ? h("p", { class: "muted" }, from) : null;
  if (!refusals || !refusals.length) return [h("p", { class: "muted" }, "no recent refusals"), note];
  return [
    table(
      ["time", "API", "error", "rule", "message"],
      refusals.map((r) => h("tr", {}, h("td", {}, time(r.timeMs)), h("td", {}, r.api), h("td", {}, r.errorName), h("td", {}, h("code", {}, r.rule || "")), h("td", {}, r.errorMessage || ""))),
    ),
    note,
  ];
}

function servedBy(s) {
  if (!s) return "";
  return `voter ${s.nodeId}` + (s.activeController ? " (the active controller)" : ` (a follower; the active controller is ${s.leaderId ?? "unknown"})`);
}

const lookBack = (l) => (l ? h("p", { class: "muted" }, l.why) : null);

async function brokerExplainView(id) {
  const b = await api(`/v1/explain/brokers/${encodeURIComponent(id)}`);
  const reg = b.registration;
  const cs = b.controlledShutdown;
  const session = b.session;
  draw(
    "broker-explain",
    h("h1", {}, `Broker ${b.brokerId} `, tag(b.state, b.state === "unfenced" ? "active" : b.state === "controlledShutdown" ? "shutdown" : b.state)),
    summary(b.summary),
    h("h2", {}, "Registration"),
    reg
      ? facts([
          ["registered at offset", reg.offset ?? "before the look-back"],
          ["at", time(reg.timeMs)],
          ["broker epoch", reg.brokerEpoch],
          ["incarnation", reg.incarnationId],
          ["rack", reg.rack ?? "none"],
          ["by", whoText(reg.who)],
          ["answered by", servedBy(b.servedBy)],
          ["as of offset", b.offset],
        ])
      : h("p", { class: "muted" }, "not registered"),
    session
      ? [
          h("h2", {}, "Session"),
          facts([
            ["last heartbeat", `${time(session.lastHeartbeatMs)} (${session.sinceLastHeartbeatMs} ms ago)`],
            ["session timeout", `${session.sessionTimeoutMs} ms`],
            ["expires in", `${session.expiresInMs} ms`],
            ["reported offset", session.metadataOffset ?? ""],
          ]),
        ]
      : null,
    cs
      ? [
          h("h2", {}, "Controlled shutdown"),
          facts([
            ["since", cs.since ? `offset ${cs.since.offset}, ${time(cs.since.timeMs)}` : "before the look-back"],
            ["still leads", `${cs.leaderOfCount} partitions`],
            ["why", cs.why],
          ]),
        ]
      : null,
    h("h2", {}, "How it got here"),
    table(
      ["offset", "time", "event", "cause", "rule", "by"],
      (b.events || []).map((e) => h("tr", {}, h("td", { class: "num" }, e.offset), h("td", {}, time(e.timeMs)), h("td", {}, e.event), h("td", {}, e.cause || ""), h("td", {}, h("code", {}, e.rule || "")), h("td", {}, whoText(e.who)))),
    ),
    lookBack(b.lookBack),
    h("h2", {}, "Recent refusals"),
    refusalsTable(b.refusals, b.refusalsFrom),
  );
}

async function partitionExplainView(topic, partition) {
  const p = await api(`/v1/explain/partitions/${encodeURIComponent(topic)}/${encodeURIComponent(partition)}`);
  const refused = p.lastRefusedAlterPartition;
  draw(
    "partition-explain",
    h("h1", {}, `${p.topic} / ${p.partition} `, (p.status || []).map((s) => tag(s))),
    summary(p.reasons && p.reasons.length ? p.reasons : ["online, with every replica in the ISR"]),
    facts([
      ["leader", `${p.leader} (epoch ${p.leaderEpoch})`],
      ["replicas", list(p.replicas)],
      ["ISR", list(p.isr)],
      ["ELR", list(p.elr)],
      ["last known ELR", list(p.lastKnownElr)],
      ["min ISR", p.minIsr],
      ["adding / removing", `${list(p.addingReplicas)} / ${list(p.removingReplicas)}`],
      ["last refused AlterPartition", refused ? `${time(refused.timeMs)} ${refused.errorName} (${refused.rule || "no rule"}): ${refused.errorMessage || ""}` : "none"],
      ["answered by", servedBy(p.servedBy)],
      ["as of offset", p.offset],
    ]),
    h("h2", {}, "Replicas"),
    table(
      ["broker", "state", "in ISR", "in ELR", "eligible", "rule", "why"],
      (p.replicaStates || []).map((r) =>
        h("tr", { class: r.eligible ? "" : "under" }, h("td", { class: "num" }, link(brokerHref(r.brokerId), r.brokerId)), h("td", {}, r.brokerState), h("td", {}, r.inIsr ? "yes" : "no"), h("td", {}, r.inElr ? "yes" : "no"), h("td", {}, r.eligible ? "yes" : "no"), h("td", {}, h("code", {}, r.rule || "")), h("td", {}, r.why || "")),
      ),
    ),
    h("h2", {}, "History"),
    table(
      ["offset", "time", "change", "leader", "leader epoch", "ISR", "ELR", "by"],
      (p.history || []).map((x) => h("tr", {}, h("td", { class: "num" }, x.offset), h("td", {}, time(x.timeMs)), h("td", {}, x.change), h("td", { class: "num" }, x.leader ?? ""), h("td", { class: "num" }, x.leaderEpoch ?? ""), h("td", {}, x.isr ? list(x.isr) : ""), h("td", {}, x.elr ? list(x.elr) : ""), h("td", {}, whoText(x.who)))),
    ),
    lookBack(p.lookBack),
    h("h2", {}, "Recent refusals"),
    refusalsTable(p.refusals, p.refusalsFrom),
  );
}

const TAIL = 200; // records the log view shows
let logRows = null; // the log view's tbody, while it is shown

function logRow(r) {
  return h(
    "tr",
    { dataset: { offset: r.offset } },
    h("td", { class: "num" }, r.offset),
    h("td", { class: "num" }, r.batchOffset),
    h("td", {}, time(r.timestampMs)),
    h("td", {}, r.type),
    h("td", {}, r.who ? r.who.principal : ""),
    h("td", {}, r.who ? r.who.api : ""),
    h("td", { class: "mono" }, r.who ? r.who.requestId || "" : ""),
  );
}

// The log's end (the next offset to commit), from the status.
const logEnd = async () => (await api("/v1/quorum/status")).highWatermark;

async function logView() {
  const end = await logEnd();
  let d;
  try {
    d = await api(`/v1/log?fromOffset=${Math.max(0, end - TAIL)}&maxRecords=${TAIL}`);
  } catch (e) {
    if (e.status !== 410) throw e; // compacted past it: from the oldest record kept
    d = await api(`/v1/log?fromOffset=${e.body.oldestOffset}&maxRecords=${TAIL}`);
  }
  logRows = h("tbody", {}, d.records.reverse().map(logRow));
  draw(
    "log",
    h("h1", {}, "Log"),
    h("p", { class: "muted" }, "The newest records first; new batches appear as they commit, with who asked for each."),
    h("table", {}, h("thead", {}, h("tr", {}, ["offset", "batch", "time", "record", "principal", "API", "request id"].map((x) => h("th", {}, x)))), logRows),
  );
}

function tailLog(records) {
  if (!logRows || !logRows.isConnected) return false;
  for (const r of records) logRows.prepend(logRow(r));
  while (logRows.children.length > TAIL) logRows.lastChild.remove();
  return true;
}

async function whatIfView(params) {
  const losses = params.getAll("lose").filter((x) => x.trim());
  const form = h(
    "form",
    { action: "/ui/what-if", method: "get", class: "toolbar" },
    h("label", { for: "lose" }, "Lose"),
    h("input", { id: "lose", name: "lose", value: losses.join(" "), placeholder: "brokers:3,4 or racks:r1", size: 30 }),
    h("button", { type: "submit" }, "What if?"),
  );
  if (!losses.length) {
    draw("what-if", h("h1", {}, "What if"), h("p", { class: "muted" }, "Which partitions would go offline, fall under min ISR or lose their leader if these brokers or racks were lost, decided by the controller's own rules over this voter's image."), form);
    return;
  }
  const q = losses.flatMap((x) => x.split(/\s+/)).map((x) => "lose=" + encodeURIComponent(x)).join("&");
  let d;
  try {
    d = await api(`/v1/what-if?${q}`);
  } catch (e) {
    draw("what-if", h("h1", {}, "What if"), form, h("p", { class: "error" }, e.message));
    return;
  }
  const c = d.counts;
  draw(
    "what-if",
    h("h1", {}, "What if"),
    form,
    h("p", {}, `Losing brokers ${list(d.lost)} (of ${d.totalPartitions} partitions, as of offset ${d.offset}):`),
    h("div", { class: "cards" }, card("offline", c.offline), card("under min ISR", c.underMinIsr), card("leader moved", c.leaderMoved), card("ISR shrunk", c.isrShrunk), card("untouched", c.untouched)),
    table(
      ["topic", "partition", "outcome", "leader", "new leader", "ISR", "new ISR", "min ISR"],
      d.partitions.map((p) =>
        h("tr", { class: p.outcome === "offline" ? "offline" : p.outcome === "underMinIsr" ? "under" : "" }, h("td", {}, link(partitionHref(p.topic, p.partition), p.topic)), h("td", { class: "num" }, p.partition), h("td", {}, tag(p.outcome)), h("td", { class: "num" }, p.leader), h("td", { class: "num" }, p.newLeader), h("td", {}, list(p.isr)), h("td", {}, list(p.newIsr)), h("td", { class: "num" }, p.minIsr)),
      ),
    ),
  );
}

// ------------------------------------------------------------ routing and live updates

function route() {
  const path = location.pathname.replace(/\/+$/, "");
  const params = new URLSearchParams(location.search);
  let m;
  if (path === "/ui") return ["quorum", () => quorumView()];
  if (path === "/ui/brokers") return ["brokers", () => brokersView(params)];
  if ((m = path.match(/^\/ui\/brokers\/(-?\d+)$/))) return ["brokers", () => brokerExplainView(m[1])];
  if (path === "/ui/partitions") return ["partitions", () => partitionsView(params)];
  if ((m = path.match(/^\/ui\/partitions\/([^/]+)\/(\d+)$/))) return ["partitions", () => partitionExplainView(decodeURIComponent(m[1]), m[2])];
  if (path === "/ui/log") return ["log", () => logView()];
  if (path === "/ui/what-if") return ["what-if", () => whatIfView(params)];
  return ["", async () => draw("none", h("h1", {}, "No such page"), h("p", {}, link("/ui", "the quorum")))];
}

const [section, render] = route();
for (const a of document.querySelectorAll("nav a")) if (a.dataset.page === section) a.classList.add("current");

let drawing = null;
let again = false;

// Draws the view again; a refresh asked for while one runs runs once after it.
async function refresh() {
  if (drawing) {
    again = true;
    return;
  }
  drawing = render().catch(failed);
  await drawing;
  drawing = null;
  if (again) {
    again = false;
    refresh();
  }
}

async function showLeader() {
  try {
    const s = await api("/v1/quorum/status");
    statusBadge.textContent = `live · voter ${s.nodeId} · leader ${s.leaderId ?? "none"} · next offset ${s.highWatermark}`;
    statusBadge.className = "status live";
    statusBadge.dataset.leader = s.leaderId ?? "";
  } catch (e) {
    statusBadge.textContent = "not answering";
    statusBadge.className = "status down";
  }
}

// Follows the log with its long-poll: every new batch redraws the view (the
// log view adds the records instead), so a fencing, a new topic or a leader
// change (its LeaderChange record) shows without a reload.
async function follow() {
  let next = null;
  for (;;) {
    try {
      if (next === null) next = await logEnd();
      const d = await api(`/v1/log?fromOffset=${next}&waitMs=${WAIT_MS}&maxRecords=500`);
      if (d.records.length) {
        next = d.nextOffset;
        if (!tailLog(d.records)) refresh();
        showLeader();
      }
    } catch (e) {
      statusBadge.textContent = "reconnecting";
      statusBadge.className = "status down";
      next = null;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      showLeader();
      refresh();
    }
  }
}

refresh();
showLeader();
follow();
