// The ledger console: a static page over the HTTP API.  It shows what the server returns
// for the signed-in token's layer and nothing else; data is only ever put into the page
// as text (textContent), never as markup.
import { verifyProof } from "./verify.js";
import { stackedBars, dataTable, bucketByTime } from "./charts.js";

const KEY = "ledger-console-token";
const $ = (id) => document.getElementById(id);
const state = { token: null, role: null, layer: null, pages: [], jwks: null };

// -- small DOM helpers --------------------------------------------------------------
function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
const fmt = (v) => (v === null || v === undefined ? "—" : typeof v === "object" ? JSON.stringify(v, null, 2) : String(v));
function fields(obj, names) {
  const dl = h("dl", { class: "fields" });
  for (const n of names) {
    if (!(n in obj)) continue;
    const v = obj[n];
    const big = typeof v === "object" && v !== null || typeof v === "string" && v.length > 80;
    dl.append(h("dt", { text: n }), h("dd", {}, big ? h("pre", { text: fmt(v) }) : h("span", { class: "mono", text: fmt(v) })));
  }
  return dl;
}

// -- API ----------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}
async function api(path, params) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    for (const one of Array.isArray(v) ? v : [v]) if (one !== "" && one !== null && one !== undefined) url.searchParams.append(k, one);
  }
  const r = await fetch(url, { headers: { Authorization: `Bearer ${state.token}` }, cache: "no-store" });
  const type = r.headers.get("content-type") || "";
  const body = type.includes("json") ? await r.json() : await r.text();
  if (!r.ok) {
    const code = body && body.code || `http_${r.status}`;
    throw new ApiError(r.status, code, body && body.detail || String(body));
  }
  return body;
}
async function jwks() {
  if (!state.jwks) state.jwks = await (await fetch("/.well-known/jwks.json", { cache: "no-store" })).json();
  return state.jwks;
}
function problem(e) {
  return h("p", { class: "error", role: "alert", text: e instanceof ApiError ? `${e.status} ${e.code}: ${e.message}` : String(e) });
}

// -- sign-in ------------------------------------------------------------------------
function claimsOf(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part + "=".repeat((4 - part.length % 4) % 4)));
  } catch (e) { return null; }
}
async function signIn(token) {
  token = token.trim();
  const claims = claimsOf(token);
  if (!claims) throw new Error("this is not a JWT (three base64url parts separated by dots)");
  state.token = token;
  state.role = claims.role || "?";
  state.layer = null;
  try {
    const r = await api("/v1/entries", { limit: 1 });
    state.layer = r.layer;
  } catch (e) {
    if (e.status === 401) { state.token = null; throw e; }
    if (!(e.status === 403 && e.code === "forbidden")) throw e;  // producer, custodian: no layer
  }
  sessionStorage.setItem(KEY, token);
  $("identity").textContent = `Signed in as ${claims.sub || "?"} — role ${state.role}` +
    (state.layer ? `, layer ${state.layer}` : ", no reading layer");
  $("signin").hidden = true;
  $("nav").hidden = false;
  $("view").hidden = false;
}
function signOut() {
  sessionStorage.removeItem(KEY);
  Object.assign(state, { token: null, role: null, layer: null, pages: [], jwks: null });
  $("identity").textContent = "";
  $("nav").hidden = true;
  $("view").hidden = true;
  $("view").replaceChildren();
  $("signin").hidden = false;
  $("token").value = "";
  location.hash = "";
  $("token").focus();
}

// -- views --------------------------------------------------------------------------
const FILTERS = {
  agent: ["status", "since", "until"],
  developer: ["kind", "status", "engine", "constraint_id", "subject", "since", "until"],
  auditor: ["kind", "status", "engine", "constraint_id", "subject", "producer", "proof_ref", "att_verdict", "since", "until"],
};
const COLUMNS = {
  agent: ["seq", "recorded_at", "status", "agent_message"],
  developer: ["seq", "recorded_at", "kind", "status", "engine", "constraint_id", "agent_message"],
  auditor: ["seq", "recorded_at", "kind", "status", "engine", "constraint_id", "att_verdict", "agent_message"],
};
const CHOICES = { status: ["", "VERIFIED", "UNVERIFIABLE", "BLOCKED"], kind: ["", "result", "key_event", "audit_run", "redaction", "hold", "import"] };

function noLayer(what) {
  return h("p", { class: "muted", text: `Your role (${state.role}) has no reading layer: ${what} is not shown to it.` });
}

function parseQuery(q) {
  const p = new URLSearchParams(q || "");
  const out = {};
  for (const [k, v] of p) out[k] = v;
  return out;
}

async function entriesView(view, query) {
  view.append(h("h2", { text: "Entries" }));
  if (!state.layer) { view.append(noLayer("the entries")); return; }
  const q = parseQuery(query);
  const form = h("form", { class: "filters", id: "filters", "aria-label": "Filters" });
  for (const name of FILTERS[state.layer]) {
    const id = `f-${name}`;
    let input;
    if (CHOICES[name]) {
      input = h("select", { id, name }, CHOICES[name].map((c) => h("option", { value: c, text: c || "any", selected: q[name] === c })));
    } else {
      input = h("input", { id, name, type: "text", value: q[name] || "", placeholder: name === "since" || name === "until" ? "2026-01-01T00:00:00Z" : "" });
    }
    form.append(h("div", {}, h("label", { for: id, text: name.replace("_", " ") }), input));
  }
  form.append(h("div", {}, h("label", { for: "f-limit", text: "per page" }),
    h("select", { id: "f-limit", name: "limit" }, ["10", "25", "100", "500"].map((n) => h("option", { value: n, text: n, selected: (q.limit || "25") === n })))));
  form.append(h("div", { class: "actions" }, h("button", { type: "submit", text: "Apply filters" }),
    h("button", { type: "reset", class: "secondary", text: "Clear" })));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.append(k, v);
    location.hash = `#/entries?${p}`;
  });
  form.addEventListener("reset", () => setTimeout(() => { location.hash = "#/entries"; }, 0));
  view.append(form);
  const out = h("div", { id: "entries" });
  view.append(out);
  const after = Number(q.after ?? -1);
  const params = {};
  for (const n of FILTERS[state.layer]) if (q[n]) params[n] = q[n];
  params.limit = q.limit || "25";
  try {
    const r = await api("/v1/entries", { ...params, after });
    const cols = COLUMNS[state.layer];
    const table = h("table", { id: "entries-table" }, h("caption", { text: `Entries after seq ${after} (${r.entries.length} shown, layer ${r.layer})` }));
    const head = table.createTHead().insertRow();
    for (const c of cols) head.append(h("th", { scope: "col", text: c.replace("_", " ") }));
    const body = table.createTBody();
    for (const e of r.entries) {
      const tr = body.insertRow();
      tr.dataset.seq = e.seq;
      for (const c of cols) {
        const td = tr.insertCell();
        if (c === "seq") td.append(h("a", { href: `#/entry/${e.seq}`, text: String(e.seq) }));
        else if (c === "status") td.append(h("span", { class: `status-${e.status}`, text: fmt(e.status) }));
        else td.textContent = fmt(e[c]);
      }
    }
    if (!r.entries.length) out.append(h("p", { class: "muted", text: "No entries match." }));
    else out.append(table);
    const base = new URLSearchParams(params);
    const prevAfter = q.prev ? q.prev.split(",").map(Number) : [];
    const pager = h("div", { class: "pager" });
    if (prevAfter.length) {
      const p = new URLSearchParams(base);
      const back = prevAfter.slice(0, -1);
      p.set("after", String(prevAfter[prevAfter.length - 1]));
      if (back.length) p.set("prev", back.join(","));
      pager.append(h("a", { href: `#/entries?${p}`, id: "prev-page", text: "← Previous page" }));
    }
    if (r.next_after !== null && r.next_after !== undefined) {
      const p = new URLSearchParams(base);
      p.set("after", String(r.next_after));
      p.set("prev", [...prevAfter, after].join(","));
      pager.append(h("a", { href: `#/entries?${p}`, id: "next-page", text: "Next page →" }));
    }
    out.append(pager);
  } catch (e) { out.append(problem(e)); }
}

const LAYER_SETS = [
  ["Layer 1 — agent", "agent", ["seq", "recorded_at", "kind", "status", "agent_message"]],
  ["Layer 2 — developer", "developer", ["engine", "constraint_id", "subject", "admission", "developer_fields"]],
  ["Layer 3 — auditor", "auditor", ["producer", "idempotency_key", "proof_ref", "att_verdict", "att_kid", "att_iss", "meta", "document", "payloads", "body_hash", "prev_hash", "entry_hash", "envelope"]],
];
const RANK = { agent: 1, developer: 2, auditor: 3 };

function decodeJwt(token) {
  const parts = String(token).split(".");
  const dec = (p) => { try { return JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(p.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - p.length % 4) % 4)), (c) => c.charCodeAt(0)))); } catch (e) { return null; } };
  return parts.length === 3 ? { header: dec(parts[0]), claims: dec(parts[1]) } : null;
}

async function entryView(view, seq) {
  view.append(h("h2", { text: `Entry ${seq}` }), h("p", {}, h("a", { href: "#/entries", text: "← Back to entries" })));
  if (!state.layer) { view.append(noLayer("an entry")); return; }
  let entry;
  try { entry = (await api(`/v1/entries/${seq}`)).entry; } catch (e) { view.append(problem(e)); return; }
  for (const [title, layer, names] of LAYER_SETS) {
    const box = h("section", { class: "layer", "aria-label": title }, h("h3", { text: title }));
    if (RANK[layer] > RANK[state.layer]) box.append(h("p", { class: "muted", text: `Not disclosed at your layer (${state.layer}).` }));
    else box.append(fields(entry, names));
    view.append(box);
  }
  if (state.layer === "auditor") {
    const box = h("section", { class: "layer", id: "payloads", "aria-label": "Payloads" }, h("h3", { text: "Payloads" }));
    for (const n of ["preimage", "query"]) {
      box.append(h("h4", { text: n === "preimage" ? "Evidence preimage" : "Query" }),
        entry[n] === null || entry[n] === undefined ? h("p", { class: "muted", text: "none (or erased)" }) : h("pre", { text: entry[n] }));
    }
    box.append(h("h4", { text: "Attestation" }));
    if (entry.attestation) {
      const d = decodeJwt(entry.attestation);
      box.append(h("p", {}, "Verdict recorded: ", h("strong", { text: fmt(entry.att_verdict) })));
      if (d) box.append(h("p", { text: "Header" }), h("pre", { text: fmt(d.header) }), h("p", { text: "Claims" }), h("pre", { text: fmt(d.claims) }));
      box.append(h("details", {}, h("summary", { text: "Token" }), h("pre", { text: entry.attestation })));
    } else box.append(h("p", { class: "muted", text: "none" }));
    view.append(box);
  }
  const proofBox = h("section", { class: "layer", id: "proof", "aria-label": "Inclusion proof" }, h("h3", { text: "Inclusion proof (checked in this browser)" }));
  const status = h("div", { id: "proof-result", "aria-live": "polite" }, h("p", { class: "muted", text: "Fetching the proof…" }));
  const again = h("button", { type: "button", class: "secondary", id: "verify-again", text: "Verify again" });
  proofBox.append(status, again);
  view.append(proofBox);
  const run = async () => {
    status.replaceChildren(h("p", { class: "muted", text: "Verifying…" }));
    try {
      const [r, keys] = await Promise.all([api(`/v1/entries/${seq}`, { proof: "true" }), jwks()]);
      const res = await verifyProof(r.proof, keys);
      const verdict = h("p", { class: `verdict ${res.ok ? "valid" : "invalid"}`, id: "proof-verdict",
        text: res.ok ? `Valid: entry ${seq} is in the signed tree of size ${res.treeSize}` : `Invalid: ${res.code} — ${res.message}` });
      const list = h("ol", { class: "steps", "aria-label": "Checks" },
        res.steps.map((s) => h("li", { class: s.ok ? "ok" : "bad", text: `${s.ok ? "pass" : "FAIL"} ${s.check}: ${s.detail}` })));
      status.replaceChildren(verdict, list);
      if (state.layer !== "agent") status.append(h("details", {}, h("summary", { text: "The proof as served" }), h("pre", { text: JSON.stringify(r.proof, null, 2) })));
    } catch (e) { status.replaceChildren(problem(e)); }
  };
  again.addEventListener("click", run);
  await run();
}

async function checkpointsView(view) {
  view.append(h("h2", { text: "Checkpoints" }));
  if (!state.layer) { view.append(noLayer("the checkpoints")); return; }
  let all = [];
  try {
    let after = -1;
    for (let i = 0; i < 10; i++) {
      const r = await api("/v1/checkpoints", { after, limit: 1000 });
      all = all.concat(r.checkpoints);
      if (r.next_after === null) break;
      after = r.next_after;
    }
  } catch (e) { view.append(problem(e)); return; }
  if (!all.length) { view.append(h("p", { class: "muted", text: "No checkpoint has been signed yet." })); return; }
  const buckets = all.slice(-40).map((c) => ({ label: String(c.size), values: { "tree size": c.size } }));
  view.append(h("figure", {}, stackedBars("Tree size of each checkpoint (latest 40)", buckets, ["tree size"]),
    h("figcaption", { text: `${all.length} checkpoint(s); latest size ${all[all.length - 1].size}` })));
  const list = h("ol", { class: "timeline", id: "checkpoint-list", reversed: true });
  for (const c of [...all].reverse()) {
    const li = h("li", {}, h("strong", { text: `size ${c.size}` }), ` — signed ${c.created_at}`);
    const dl = { signers: c.signers.join(", ") || "none readable",
      cosigners: c.cosigners.length ? c.cosigners.map((x) => `${x.name} (${x.created_at})`).join(", ") : "none",
      timestamps: c.timestamps.length ? c.timestamps.map((x) => `${x.tsa} (${x.created_at})`).join(", ") : "none" };
    if (state.layer !== "agent") dl.root = c.root_b64;
    li.append(fields(dl, Object.keys(dl)));
    if (state.layer !== "agent") li.append(h("details", {}, h("summary", { text: "Signed note" }), h("pre", { text: c.note })));
    list.append(li);
  }
  view.append(list);
}

async function allRuns() {
  let runs = [], before = null;
  for (let i = 0; i < 5; i++) {
    const r = await api("/v1/audits", { limit: 1000, before });
    runs = runs.concat(r.runs);
    if (r.next_before === null) break;
    before = r.next_before;
  }
  return runs;
}

async function auditsView(view, query) {
  view.append(h("h2", { text: "Audits" }));
  const q = parseQuery(query);
  let runs;
  try { runs = await allRuns(); } catch (e) {
    if (e.status === 403) { view.append(h("p", { class: "muted", id: "audits-denied", text: `Recorded audit runs and their findings are shown to auditors only (your role: ${state.role}).` })); return; }
    view.append(problem(e)); return;
  }
  if (!runs.length) { view.append(h("p", { class: "muted", text: "No audit run is recorded (ledger audit)." })); return; }
  const trend = [...runs].reverse().map((r) => ({ label: `#${r.run_id}`, values: { failed: r.summary.failed || 0, unverified: r.summary.unverified || 0, verified: r.summary.verified || 0 } }));
  const series = ["failed", "unverified", "verified"];
  view.append(h("figure", {}, stackedBars("Rows by disposition per audit run (trend)", trend.slice(-30), series),
    h("details", {}, h("summary", { text: "Data" }), dataTable("Rows by disposition per run", trend, series))));
  const table = h("table", { id: "runs-table" }, h("caption", { text: "Recorded audit runs, newest first" }));
  const head = table.createTHead().insertRow();
  for (const c of ["run", "state", "started", "range", "rows", "verified", "failed", "unverified", "findings", "abstentions"]) head.append(h("th", { scope: "col", text: c }));
  const body = table.createTBody();
  for (const r of runs) {
    const tr = body.insertRow();
    tr.insertCell().append(h("a", { href: `#/audits?run=${r.run_id}`, text: `#${r.run_id}` }));
    for (const v of [r.state, r.started_at, `[${r.range.start}, ${r.range.end})`, r.summary.rows, r.summary.verified, r.summary.failed, r.summary.unverified, r.findings, r.abstentions]) tr.insertCell().textContent = fmt(v);
  }
  view.append(table);
  const pick = q.run ? Number(q.run) : runs[0].run_id;
  const sec = h("section", { id: "run-detail", "aria-label": `Audit run ${pick}` }, h("h3", { text: `Run #${pick}: findings` }));
  view.append(sec);
  try {
    const run = await api(`/v1/audits/${pick}`);
    if (!run.finding_list.length) sec.append(h("p", { class: "muted", text: "No row findings." }));
    else {
      const t = h("table", { id: "findings-table" }, h("caption", { text: `${run.finding_list.length} finding(s)` }));
      const hr = t.createTHead().insertRow();
      for (const c of ["seq", "code", "class", "message", "expected", "actual"]) hr.append(h("th", { scope: "col", text: c }));
      const tb = t.createTBody();
      for (const f of run.finding_list) {
        const tr = tb.insertRow();
        tr.insertCell().append(f.seq === null ? "—" : h("a", { href: `#/entry/${f.seq}`, text: String(f.seq) }));
        for (const v of [f.code, f.class, f.message, f.expected, f.actual]) { const td = tr.insertCell(); td.className = "mono"; td.textContent = fmt(v); }
      }
      sec.append(t);
    }
    if (run.abstention_list.length) {
      const t = h("table", { id: "abstentions-table" }, h("caption", { text: `${run.abstention_list.length} abstention(s)` }));
      const hr = t.createTHead().insertRow();
      for (const c of ["seq", "check", "reason", "message"]) hr.append(h("th", { scope: "col", text: c }));
      const tb = t.createTBody();
      for (const a of run.abstention_list) { const tr = tb.insertRow(); for (const v of [a.seq, a.check, a.reason, a.message]) tr.insertCell().textContent = fmt(v); }
      sec.append(t);
    }
  } catch (e) { sec.append(problem(e)); }
}

async function chartsView(view) {
  view.append(h("h2", { text: "Charts" }));
  if (!state.layer) { view.append(noLayer("the charts")); return; }
  let rows = [];
  try {
    let after = -1;
    for (let i = 0; i < 5; i++) {
      const r = await api("/v1/entries", { kind: "result", limit: 1000, after });
      rows = rows.concat(r.entries);
      if (r.next_after === null) break;
      after = r.next_after;
    }
  } catch (e) { view.append(problem(e)); return; }
  view.append(h("p", { class: "muted", text: `${rows.length} result entries (the first 5000 at most), at layer ${state.layer}.` }));
  const add = (id, title, { buckets, series }) => {
    const fig = h("figure", { id });
    if (!buckets.length) fig.append(h("p", { class: "muted", text: `${title}: no data.` }));
    else fig.append(stackedBars(title, buckets, series), h("details", {}, h("summary", { text: "Data" }), dataTable(title, buckets, series)));
    view.append(h("h3", { text: title }), fig);
  };
  const byStatusEngine = state.layer === "agent" ? (r) => r.status : (r) => `${r.status} · ${r.engine ?? "?"}`;
  add("chart-status", state.layer === "agent" ? "Results by status over time" : "Results by status × engine over time",
    bucketByTime(rows, "recorded_at", byStatusEngine));
  if (state.layer === "auditor") {
    add("chart-attestations", "Attestation verdicts over time",
      bucketByTime(rows.filter((r) => r.att_verdict !== null || r.status === "VERIFIED"), "recorded_at", (r) => r.att_verdict ?? "no attestation"));
    let runs = [];
    try { runs = await allRuns(); } catch (e) { view.append(problem(e)); return; }
    const done = runs.filter((r) => r.state === "complete");
    const f = bucketByTime(done, "updated_at", (r) => [["findings", r.findings], ["abstentions", r.abstentions]]);
    add("chart-findings", "Audit findings over time", { buckets: f.buckets, series: ["findings", "abstentions"] });
  } else {
    view.append(h("p", { class: "muted", text: "Attestation verdicts and audit findings are shown to auditors only." }));
  }
}

// -- routing ------------------------------------------------------------------------
async function route() {
  const hash = location.hash || "";
  if (hash.startsWith("#token=")) {
    const token = decodeURIComponent(hash.slice(7));
    history.replaceState(null, "", location.pathname + "#/entries");  // the token leaves the URL
    try { await signIn(token); } catch (e) { $("signin-error").textContent = `Sign-in failed: ${e.message}`; return; }
  }
  if (!state.token) return;
  const view = $("view");
  const [path, query] = (hash.replace(/^#\/?/, "") || "entries").split("?");
  const [name, arg] = path.split("/");
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.view === (name === "entry" ? "entries" : name)) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  view.replaceChildren();
  view.dataset.view = name;
  view.dataset.ready = "false";
  try {
    if (name === "entry" && /^\d+$/.test(arg || "")) await entryView(view, Number(arg));
    else if (name === "checkpoints") await checkpointsView(view);
    else if (name === "audits") await auditsView(view, query);
    else if (name === "charts") await chartsView(view);
    else await entriesView(view, query);
  } finally {
    view.dataset.ready = "true";
  }
  const h2 = view.querySelector("h2");
  if (h2) { h2.tabIndex = -1; h2.focus(); }
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", async () => {
  $("signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("signin-error").textContent = "";
    try {
      await signIn($("token").value);
      if (location.hash === "#/entries") await route(); else location.hash = "#/entries";
    } catch (e) {
      $("signin-error").textContent = `Sign-in failed: ${e instanceof ApiError ? `${e.code}: ${e.message}` : e.message}`;
    }
  });
  $("signout").addEventListener("click", signOut);
  const saved = sessionStorage.getItem(KEY);
  if (saved && !location.hash.startsWith("#token=")) {
    try { await signIn(saved); } catch (e) { sessionStorage.removeItem(KEY); }
  }
  await route();
});
