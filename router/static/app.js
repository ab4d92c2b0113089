// The playground: Tab ghost text over CodeMirror, the apply and retrieve panes, and the
// dashboard drawn from /v1/dashboard. Plain JavaScript, no build step (CodeMirror is the
// vendored bundle, global CM).
"use strict";

const post = async (path, body) => {
  const r = await fetch(path, {method: "POST", headers: {"content-type": "application/json"},
                               body: JSON.stringify(body)});
  const data = await r.json().catch(() => ({}));
  return {ok: r.ok, status: r.status, data};
};

// -- Tab ---------------------------------------------------------------------------------
// The shown suggestion: {from, to, text, id}; drawn as a grey widget at the cursor.
const setGhost = CM.StateEffect.define();
class GhostWidget extends CM.WidgetType {
  constructor(text) { super(); this.text = text; }
  eq(other) { return other.text === this.text; }
  toDOM() { const s = document.createElement("span"); s.className = "cm-ghost"; s.textContent = this.text; return s; }
}
const ghostField = CM.StateField.define({
  create: () => null,
  update(value, tr) {
    for (const e of tr.effects) if (e.is(setGhost)) return e.value;
    return tr.docChanged ? null : value;
  },
  provide: f => CM.EditorView.decorations.from(f, g => g
    ? CM.Decoration.set([CM.Decoration.widget({widget: new GhostWidget(g.text), side: 1}).range(g.to)])
    : CM.Decoration.none),
});

// One Tab session per page load: a reload (whose seq counts from 1 again) or a second tab
// is a session of its own, so neither is answered "cancelled" because of the other.
const tabSession = "playground-" + Math.random().toString(36).slice(2) + Date.now().toString(36);
const tabState = {seq: 0, answeredSeq: 0, timer: null, typedAt: 0, latencies: [], shown: 0,
                  accepted: 0, session: tabSession};
window.complementTab = tabState;  // read by the browser test: latencies, counts, answeredSeq

function feedback(id, outcome, chars) {
  const body = {request_id: id, outcome};
  if (chars !== undefined) body.chars_accepted = chars;
  return post("/v1/feedback", body);
}

async function suggest(view) {
  const seq = ++tabState.seq;
  try {
    await suggestFor(view, seq);
  } finally {  // this request's answer is handled (shown, dropped or an error)
    tabState.answeredSeq = Math.max(tabState.answeredSeq, seq);
  }
}

async function suggestFor(view, seq) {
  const doc = view.state.doc.toString();
  const cursor = view.state.selection.main.head;
  const r = await post("/v1/tab", {file: doc, cursor, language: "python", path: "playground.py",
                                   session: tabSession, seq});
  if (!r.ok) { document.getElementById("tab-last").textContent = `error ${r.status}`; return; }
  document.getElementById("tab-version").textContent = r.data.policy_version;
  const s = r.data.suggestion;
  // a later keystroke made this answer stale: drop it
  if (seq !== tabState.seq || view.state.doc.toString() !== doc) return;
  if (!s) { document.getElementById("tab-last").textContent = r.data.reason || "nothing to suggest"; return; }
  // a jump names the next edit's line: a marker there, and Tab moves the cursor to it
  const ghost = s.kind === "jump"
    ? {from: s.range.start, to: s.range.start, text: "\u21e5 next edit", id: r.data.request_id, jump: true}
    : {from: s.range.start, to: s.range.end, text: s.text, id: r.data.request_id};
  view.dispatch({effects: setGhost.of(ghost)});
  tabState.shown += 1;
  tabState.latencies.push(performance.now() - tabState.typedAt);
  document.getElementById("tab-last").textContent = `showing a ${s.kind} (${s.source})`;
}

function acceptGhost(view) {
  const g = view.state.field(ghostField);
  if (!g) return false;
  if (g.jump) {  // nothing to type: move there
    view.dispatch({selection: {anchor: g.from}, effects: setGhost.of(null), scrollIntoView: true});
    tabState.accepted += 1;
    feedback(g.id, "accepted", 0);
    document.getElementById("tab-last").textContent = "jumped";
    return true;
  }
  view.dispatch({changes: {from: g.from, to: g.to, insert: g.text},
                 selection: {anchor: g.from + g.text.length}, userEvent: "complement.accept"});
  tabState.accepted += 1;
  feedback(g.id, "accepted", g.text.length);
  document.getElementById("tab-last").textContent = "accepted";
  return true;
}

function rejectGhost(view) {
  const g = view.state.field(ghostField);
  if (!g) return false;
  view.dispatch({effects: setGhost.of(null)});
  feedback(g.id, "rejected");
  document.getElementById("tab-last").textContent = "rejected";
  return true;
}

const typingWatcher = CM.EditorView.updateListener.of(update => {
  if (!update.docChanged) return;
  const accepted = update.transactions.some(tr => tr.isUserEvent("complement.accept"));
  const before = update.startState.field(ghostField);
  if (before && !accepted) feedback(before.id, "rejected");  // typed on past it
  if (accepted) return;
  tabState.typedAt = performance.now();
  clearTimeout(tabState.timer);
  tabState.timer = setTimeout(() => suggest(update.view), 40);  // debounce keystrokes
});

const editor = new CM.EditorView({
  parent: document.getElementById("editor"),
  state: CM.EditorState.create({
    doc: "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n",
    extensions: [CM.Prec.highest(CM.keymap.of([{key: "Tab", run: acceptGhost},
                                                {key: "Escape", run: rejectGhost}])),
                 CM.basicSetup, CM.python(), CM.indentUnit.of("    "),  // PEP 8: 4 spaces
                 ghostField, typingWatcher],
  }),
});
window.complementEditor = editor;

// -- Apply and retrieve --------------------------------------------------------------------
document.getElementById("apply-run").onclick = async () => {
  const out = document.getElementById("apply-out");
  const r = await post("/v1/apply", {original: document.getElementById("apply-original").value,
                                      sketch: document.getElementById("apply-sketch").value,
                                      path: "playground.py"});
  if (!r.ok) { out.className = "out error"; out.textContent = r.data.error?.message || `error ${r.status}`; return; }
  out.className = "out";
  out.textContent = r.data.status === "applied" ? r.data.diff || "(no change)"
    : `abstained: ${r.data.reason}`;
};

document.getElementById("retrieve-index").onclick = async () => {
  const table = document.getElementById("retrieve-out");
  table.textContent = "indexing…";
  const r = await post("/v1/index", {path: document.getElementById("retrieve-repo").value});
  table.textContent = r.ok ? `indexed ${r.data.files_seen} files, ${r.data.chunks_total} chunks`
    : (r.data.error?.message || `error ${r.status}`);
};

document.getElementById("retrieve-run").onclick = async () => {
  const table = document.getElementById("retrieve-out");
  const r = await post("/v1/retrieve", {query: document.getElementById("retrieve-query").value,
                                         repo: document.getElementById("retrieve-repo").value, k: 8});
  if (!r.ok) { table.textContent = r.data.error?.message || `error ${r.status}`; return; }
  table.innerHTML = "<tr><th>score</th><th>where</th><th>symbol</th></tr>";
  for (const hit of r.data.results) {
    const row = table.insertRow();
    for (const v of [hit.score.toFixed(3), `${hit.path}:${hit.start_line}`, hit.symbol || ""])
      row.insertCell().textContent = v;
  }
};

// -- Dashboard -----------------------------------------------------------------------------
function bars(canvas, labels, series, colors, max, legend = []) {
  // a bar chart with its scale, a legend, and each label fitted to its bars (the full
  // route/model names are in the table below the charts)
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, left = 34, top = 22, bottom = 26;
  ctx.clearRect(0, 0, w, h);
  ctx.font = "11px system-ui"; ctx.fillStyle = "#5b6475";
  const peak = max ?? Math.max(1e-9, ...series.flat());
  const group = (w - left - 8) / Math.max(1, labels.length);
  const bw = Math.max(2, (group - 8) / Math.max(1, series.length));
  const plot = h - top - bottom;
  labels.forEach((label, i) => {
    series.forEach((values, k) => {
      const v = values[i] || 0, bh = plot * v / peak;
      ctx.fillStyle = colors[k];
      ctx.fillRect(left + i * group + k * bw, h - bottom - bh, bw - 1, bh);
    });
    ctx.fillStyle = "#5b6475";
    const room = group - 6;
    let text = String(label);
    if (ctx.measureText(text).width > room) {  // fitted to its bar group, with an ellipsis
      while (text.length > 1 && ctx.measureText(text + "…").width > room) text = text.slice(0, -1);
      text += "…";
    }
    ctx.fillText(text, left + i * group, h - bottom + 14);
  });
  ctx.fillStyle = "#5b6475"; ctx.textAlign = "left";
  ctx.fillText(String(+peak.toFixed(3)), 2, top + 4);
  ctx.fillText("0", 2, h - bottom);
  let x = w - 8;
  for (let k = legend.length - 1; k >= 0; k--) {  // right-aligned, one entry per series
    const width = ctx.measureText(legend[k]).width;
    x -= width;
    ctx.fillStyle = "#5b6475"; ctx.fillText(legend[k], x, 12);
    x -= 14; ctx.fillStyle = colors[k]; ctx.fillRect(x, 3, 10, 10);
    x -= 12;
  }
  if (!labels.length) { ctx.fillStyle = "#5b6475"; ctx.fillText("no requests yet", left + 8, top + plot / 2); }
}

async function refreshDashboard() {
  const r = await fetch("/v1/dashboard");
  if (!r.ok) return;
  const d = await r.json();
  const names = d.routes.map(x => `${x.route}/${x.model}`);
  bars(document.getElementById("chart-requests"), names, [d.routes.map(x => x.requests)], ["#4c6ef5"],
       undefined, ["requests"]);
  const buckets = {};
  for (const row of d.routes) {
    let prev = 0;
    for (const b of row.latency_buckets) { buckets[b.le] = (buckets[b.le] || 0) + b.count - prev; prev = b.count; }
  }
  const les = Object.keys(buckets).filter(le => buckets[le] > 0);
  bars(document.getElementById("chart-latency"), les.map(le => `≤${le}s`), [les.map(le => buckets[le])], ["#12b886"],
       undefined, ["requests"]);
  const v = d.tab.versions;
  bars(document.getElementById("chart-tab"), v.map(x => `v${x.version}`),
       [v.map(x => x.show_rate), v.map(x => x.accept_rate)], ["#fab005", "#4c6ef5"], 1,
       ["show rate", "accept rate"]);
  const routes = document.getElementById("routes-table");
  routes.innerHTML = "<tr><th>route</th><th>model</th><th>requests</th><th>mean latency</th><th>cost (USD)</th><th>escalations</th></tr>";
  for (const x of d.routes) {
    const row = routes.insertRow();
    const mean = x.requests ? `${(1000 * x.latency_sum_s / x.requests).toFixed(1)} ms` : "–";
    for (const val of [x.route, x.model, x.requests, mean, x.cost_usd.toFixed(6), x.escalations])
      row.insertCell().textContent = val;
  }
  const tab = document.getElementById("tab-table");
  tab.innerHTML = "<tr><th>policy version</th><th>events</th><th>show rate</th><th>accept rate</th><th>reward per request</th></tr>";
  for (const x of v) {
    const row = tab.insertRow();
    row.dataset.version = x.version;
    for (const val of [x.version + (String(x.version) === String(d.tab.deployed) ? " (deployed)" : ""),
                       x.events, x.show_rate.toFixed(3), x.accept_rate.toFixed(3), x.reward_per_request.toFixed(4)])
      row.insertCell().textContent = val;
  }
  const kinds = document.getElementById("tab-kinds");
  kinds.innerHTML = "<tr><th>shown kind</th><th>chosen by</th><th>shown</th><th>accepted</th><th>characters accepted</th></tr>";
  for (const x of d.tab.kinds || []) {
    const row = kinds.insertRow();
    for (const val of [x.kind, x.by, x.shown, x.accepted, x.chars_accepted]) row.insertCell().textContent = val;
  }
  const evals = document.getElementById("evals-table");
  evals.innerHTML = "<tr><th>run</th><th>suite</th><th>route</th><th>tasks</th><th>exact</th><th>cost per task (USD)</th></tr>";
  if (!d.evals.length) {
    const cell = evals.insertRow().insertCell();
    cell.colSpan = 6;
    cell.className = "empty";
    cell.textContent = `no eval runs in ${d.eval_dir || "runs/eval"} yet: ` +
      "complement eval configs/eval/edit.yaml writes one (README, \"Editing and evaluating routes\")";
  }
  for (const run of d.evals) {
    for (const [route, x] of Object.entries(run.routes)) {
      const row = evals.insertRow();
      for (const val of [run.file, run.suite, route, x.n, x.exact, x.cost_usd]) row.insertCell().textContent = val ?? "–";
    }
  }
  document.getElementById("dashboard").dataset.refreshed = String(Date.now());
}
refreshDashboard();
setInterval(refreshDashboard, 3000);
