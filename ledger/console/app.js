// The ledger console: a static page over the HTTP API.  It shows what the server returns
// for the signed-in token's layer and nothing else; data is only ever put into the page
// as text (textContent), never as markup.
import { verifyProof, verifyCheckpointPair } from "./verify.js";
import { stackedBars, dataTable, FLAGGED } from "./charts.js";

const KEY = "ledger-console-token";
const $ = (id) => document.getElementById(id);
const state = { token: null, role: null, tenant: null, layer: null, pages: [], jwks: null };

// -- small DOM helpers --------------------------------------------------------------
function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  if (tag === "pre") e.tabIndex = 0;  // a <pre> may scroll: the keyboard must reach it
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
// The indexed columns: a flagged one is shown with its envelope value, not the column's.
const COLUMN_NAMES = new Set(["engine", "status", "constraint_id", "proof_ref", "subject", "producer",
  "idempotency_key", "admission", "att_verdict", "att_kid", "att_iss"]);
// `bad`: names whose value did not check (marked in text, not by colour alone).
function fields(obj, names, bad = new Set()) {
  const dl = h("dl", { class: "fields" });
  for (const n of names) {
    if (!(n in obj)) continue;
    const v = obj[n];
    const big = typeof v === "object" && v !== null || typeof v === "string" && v.length > 80;
    const dd = h("dd", {}, big ? h("pre", { text: fmt(v) }) : h("span", { class: "mono", text: fmt(v) }));
    if (bad.has(n)) {
      dd.classList.add("bad-field");
      dd.append(h("span", { class: "flag", text: v === null || v === undefined ? " \u26a0 did not check: not shown"
        : COLUMN_NAMES.has(n) ? " \u26a0 did not check: this is the envelope's value, the stored column differs" : " \u26a0 did not check (see the banner)" }));
    }
    dl.append(h("dt", { text: n }), dd);
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
// Downloads: the API's own answer, saved as a file (fetched with the bearer token, handed
// to the browser as a blob; nothing is rebuilt in the page).
function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = h("a", { href: url, download: filename, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
async function download(path, params, filename, status) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    for (const one of Array.isArray(v) ? v : [v]) if (one !== "" && one !== null && one !== undefined) url.searchParams.append(k, one);
  }
  status.textContent = `Preparing ${filename}…`;
  try {
    const r = await fetch(url, { headers: { Authorization: `Bearer ${state.token}` }, cache: "no-store" });
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      throw new ApiError(r.status, body.code || `http_${r.status}`, body.detail || r.statusText);
    }
    const blob = await r.blob();
    saveBlob(blob, filename);
    status.textContent = `Saved ${filename} (${blob.size} bytes).`;
  } catch (e) {
    status.textContent = `Download failed: ${e instanceof ApiError ? `${e.status} ${e.code}: ${e.message}` : e}`;
  }
}
function downloadButton(id, text, run) {
  return h("button", { type: "button", class: "secondary", id, text, onclick: run });
}

async function jwks() {
  if (!state.jwks) state.jwks = await (await fetch("/.well-known/jwks.json", { cache: "no-store" })).json();
  return state.jwks;
}
// -- the read verdict (docs/reads.md) ------------------------------------------------
// Every row the server returns carries `integrity` ({verified, codes} for agents, plus
// fields and redacted for developers, plus problems for auditors).  A row without one is
// treated as not verified: nothing is shown as checked that the server did not check.
const isVerified = (row) => !!(row && row.integrity && row.integrity.verified === true);
const flaggedFields = (row) => new Set((row && row.integrity && row.integrity.fields) || []);
function flagText(row) {
  const i = (row && row.integrity) || {};
  const codes = (i.codes || []).join(", ") || "no verdict from the server";
  const where = (i.fields || []).length ? ` (${i.fields.join(", ")})` : "";
  return `not verified: ${codes}${where}`;
}
const findingCount = (row) => (Array.isArray(row && row.findings) ? row.findings.length : 0);

function problem(e) {
  if (e instanceof ApiError && e.code === "tenant_scope") {
    // refused as spanning every tenant: said as a refusal, never shown as an empty view
    return h("p", { class: "error", role: "alert", id: "tenant-scope", text: `Not shown: this view spans every tenant and needs an operator-level token (one without a tenant); your token is scoped to tenant ${state.tenant ?? "?"}. The server refused it (403 tenant_scope): nothing here is a count of zero.` });
  }
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
  // a token with a tenant reads that tenant's entries only (the server scopes every read;
  // this is only for the labels)
  state.tenant = typeof claims.tenant === "string" ? claims.tenant : null;
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
    (state.layer ? `, layer ${state.layer}` : ", no reading layer") +
    (state.tenant ? `, tenant ${state.tenant} (its entries only)` : "");
  $("signin").hidden = true;
  $("nav").hidden = false;
  $("view").hidden = false;
}
function signOut() {
  sessionStorage.removeItem(KEY);
  Object.assign(state, { token: null, role: null, tenant: null, layer: null, pages: [], jwks: null });
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
const CHOICES = { status: ["", "VERIFIED", "UNVERIFIABLE", "BLOCKED"], kind: ["", "result", "key_event", "audit_run", "redaction", "hold", "import", "reverify_run"] };

function noLayer(what) {
  return h("p", { class: "muted", text: `Your role (${state.role}) has no reading layer: nothing of ${what} is shown to it.` });
}

function parseQuery(q) {
  const p = new URLSearchParams(q || "");
  const out = {};
  for (const [k, v] of p) out[k] = v;
  return out;
}

// Filters offered as pick-lists: the values come from the server (GET /v1/entries/values,
// what the index holds), several may be chosen (any of them matches).
const PICKED = new Set(["kind", "status", "engine", "producer", "att_verdict"]);
async function pickList(name) {
  state.picks = state.picks || {};
  if (!state.picks[name]) {
    try { state.picks[name] = (await api("/v1/entries/values", { field: name })).values; } catch (e) { state.picks[name] = CHOICES[name] ? CHOICES[name].filter(Boolean) : null; }
  }
  return state.picks[name];
}
function parseMulti(q) {
  const out = {};
  for (const [k, v] of new URLSearchParams(q || "")) (out[k] = out[k] || []).push(v);
  return out;
}
const HASH_RE = /^(sha256:)?[0-9a-fA-F]{64}$/;

async function entriesView(view, query) {
  view.append(h("h2", { text: "Entries" }));
  if (!state.layer) { view.append(noLayer("the entries")); return; }
  const m = parseMulti(query);
  const q = parseQuery(query);
  const jump = h("form", { class: "filters", id: "jump", "aria-label": "Go to an entry" },
    h("div", {}, h("label", { for: "f-jump", text: state.layer === "auditor" ? "go to seq or entry hash" : "go to seq" }),
      h("input", { id: "f-jump", name: "jump", type: "text", inputmode: "text", autocomplete: "off", spellcheck: "false", size: 30 })),
    h("div", { class: "actions" }, h("button", { type: "submit", text: "Go" })),
    h("p", { id: "jump-error", class: "error", role: "alert" }));
  jump.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const v = jump.elements.jump.value.trim();
    $("jump-error").textContent = "";
    if (/^\d{1,16}$/.test(v)) { location.hash = `#/entry/${Number(v)}`; return; }
    if (state.layer === "auditor" && HASH_RE.test(v)) {
      const hashText = v.toLowerCase();
      try { location.hash = `#/entry/${(await api(`/v1/entries/by-hash/${hashText}`)).seq}`; } catch (e) {
        $("jump-error").textContent = e.status === 404 ? `No entry has the entry hash ${v}.` : `${e.code || ""} ${e.message}`;
      }
      return;
    }
    $("jump-error").textContent = state.layer === "auditor" ? "Type a seq (digits) or an entry hash (64 hex digits, optionally sha256:)." : "Type a seq (digits).";
  });
  view.append(jump);
  const form = h("form", { class: "filters", id: "filters", "aria-label": "Filters" });
  const names = FILTERS[state.layer];
  const lists = await Promise.all(names.map((n) => (PICKED.has(n) ? pickList(n) : null)));
  names.forEach((name, i) => {
    const id = `f-${name}`;
    const chosen = m[name] || [];
    let input;
    const list = lists[i];
    if (list) {
      const values = [...new Set([...list, ...chosen])];
      input = h("select", { id, name, multiple: true, size: Math.min(4, Math.max(2, values.length)) },
        values.map((c) => h("option", { value: c, text: c, selected: chosen.includes(c) })));
    } else {
      input = h("input", { id, name, type: "text", value: chosen[0] || "", placeholder: name === "since" || name === "until" ? "2026-01-01T00:00:00Z" : "" });
    }
    form.append(h("div", {}, h("label", { for: id, text: name.replace("_", " ") + (list ? " (any of)" : "") }), input));
  });
  if (state.layer !== "agent") {  // agents see no audit findings (403 forbidden_filter)
    form.append(h("div", { class: "toggle" }, h("label", { for: "f-has_findings", text: "with findings" }),
      h("input", { id: "f-has_findings", name: "has_findings", type: "checkbox", value: "true", checked: q.has_findings === "true" })));
  }
  const order = q.order === "desc" ? "desc" : "asc";
  form.append(h("div", {}, h("label", { for: "f-order", text: "order" }),
    h("select", { id: "f-order", name: "order" }, [["asc", "oldest first"], ["desc", "newest first"]].map(([v, t]) => h("option", { value: v, text: t, selected: order === v })))));
  form.append(h("div", {}, h("label", { for: "f-limit", text: "per page" }),
    h("select", { id: "f-limit", name: "limit" }, ["10", "25", "100", "500"].map((n) => h("option", { value: n, text: n, selected: (q.limit || "25") === n })))));
  form.append(h("div", { class: "actions" }, h("button", { type: "submit", text: "Apply filters" }),
    h("button", { type: "reset", class: "secondary", text: "Clear" })));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v && !(k === "order" && v === "asc")) p.append(k, v);
    location.hash = `#/entries?${p}`;
  });
  form.addEventListener("reset", () => setTimeout(() => { location.hash = "#/entries"; }, 0));
  // on a narrow screen the filters start folded, unless some are set
  const narrow = window.matchMedia("(max-width: 640px)").matches;
  const anySet = names.some((n) => m[n]) || q.has_findings === "true";
  view.append(h("details", { class: "fold", open: !narrow || anySet }, h("summary", { text: anySet ? "Filters (some set)" : "Filters" }), form));
  const out = h("div", { id: "entries" });
  view.append(out);
  const params = {};
  for (const n of names) if (m[n]) params[n] = m[n];
  if (state.layer !== "agent" && q.has_findings === "true") params.has_findings = "true";
  params.limit = q.limit || "25";
  // the page anchor: after=X (read oldest first from X), before=X (newest first below X),
  // end=1 (the far end of the display order), none (its start)
  const anchor = q.after !== undefined ? { after: Number(q.after) } : q.before !== undefined ? { order: "desc", before: Number(q.before) }
    : (q.end === "1") === (order === "asc") ? { order: "desc" } : { after: -1 };
  const fetchedDesc = anchor.order === "desc";
  try {
    const r = await api("/v1/entries", { ...params, ...anchor, count: "true" });
    const rows = [...r.entries];
    if (fetchedDesc !== (order === "desc")) rows.reverse();
    const seqs = rows.map((e) => e.seq);
    const lo = seqs.length ? Math.min(...seqs) : null, hi = seqs.length ? Math.max(...seqs) : null;
    const moreAbove = fetchedDesc ? anchor.before !== undefined : r.next_after !== null && r.next_after !== undefined;
    const moreBelow = fetchedDesc ? r.next_before !== null && r.next_before !== undefined : anchor.after >= 0;
    const cols = [...COLUMNS[state.layer], "integrity", ...(state.layer === "agent" ? [] : ["findings"])];
    const span = rows.length ? `seqs ${lo}–${hi}` : "no entries";
    const table = h("table", { id: "entries-table" }, h("caption", { text: `Entries, ${order === "desc" ? "newest" : "oldest"} first: ${span} (${rows.length} shown, layer ${r.layer})` }));
    const head = table.createTHead().insertRow();
    for (const c of cols) head.append(h("th", { scope: "col", text: c.replace("_", " ") }));
    const body = table.createTBody();
    for (const e of rows) {
      const tr = body.insertRow();
      tr.dataset.seq = e.seq;
      const ok = isVerified(e);
      if (!ok) tr.classList.add("flagged");
      const bad = flaggedFields(e);
      for (const c of cols) {
        const td = tr.insertCell();
        if (c === "seq") td.append(h("a", { href: `#/entry/${e.seq}`, text: String(e.seq) }));
        else if (c === "status") {
          td.append(h("span", { class: ok ? `status-${e.status}` : "", text: fmt(e.status) }));
          if (bad.has(c)) td.classList.add("bad-field");
        }
        else if (c === "integrity") {
          td.className = "integrity";
          if (ok) td.append(h("span", { class: "muted", text: "verified" }));
          else td.append(h("span", { class: "flag", text: `\u26a0 ${flagText(e)}` }));
          if (e.integrity && e.integrity.filter_match === false) {
            td.append(h("span", { class: "flag nomatch", text: " \u2014 its proven values do not match the filters (found through a rewritten column)" }));
          }
        } else if (c === "findings") {
          const n = findingCount(e);
          if (n) td.append(h("a", { class: "badge", href: `#/entry/${e.seq}`, "aria-label": `${n} finding${n === 1 ? "" : "s"} of the audit on entry ${e.seq}`, text: `${n} finding${n === 1 ? "" : "s"}` }));
        } else {
          td.textContent = fmt(e[c]);
          if (bad.has(c)) td.classList.add("bad-field");
        }
      }
    }
    if (r.index_total !== undefined) {
      out.append(h("p", { id: "index-total", class: "counts", text: `${r.index_total} ${r.index_total === 1 ? "entry is" : "entries are"} selected by the filters on the stored (indexed) columns: candidates, not a count of verified matches — each row shown is checked against what was hashed, and a flagged one is marked and not counted as a match below.` }));
    }
    const counts = [`${rows.length} shown`, `${r.flagged ?? "?"} not verified (flagged)`,
      `${r.matched ?? "?"} match the filters by their proven values`];
    if (state.layer !== "agent") counts.push(`${r.with_findings ?? "?"} with audit findings`);
    out.append(h("p", { id: "page-counts", class: r.flagged ? "counts flagged" : "counts", text: `This page: ${counts.join(" · ")}.` }));
    if (!rows.length) out.append(h("p", { class: "muted", text: "No entries match." }));
    else out.append(h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Entries table" }, table));
    const base = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) for (const one of [].concat(v)) base.append(k, one);
    if (order === "desc") base.set("order", "desc");
    const to = (id, text, extra) => {
      const p = new URLSearchParams(base);
      for (const [k, v] of Object.entries(extra)) p.set(k, String(v));
      return h("a", { href: `#/entries?${p}`, id, text });
    };
    const asc = order === "asc";
    const [startMore, endMore] = asc ? [moreBelow, moreAbove] : [moreAbove, moreBelow];
    const pager = h("nav", { class: "pager", "aria-label": "Pages" });
    if (rows.length && startMore) {
      pager.append(to("first-page", asc ? "⇤ First page (oldest)" : "⇤ First page (newest)", {}));
      pager.append(asc ? to("prev-page", "← Previous page", { before: lo }) : to("prev-page", "← Previous page", { after: hi }));
    }
    if (rows.length && endMore) {
      pager.append(asc ? to("next-page", "Next page →", { after: hi }) : to("next-page", "Next page →", { before: lo }));
      pager.append(to("last-page", asc ? "Last page (newest) ⇥" : "Last page (oldest) ⇥", { end: 1 }));
    }
    out.append(pager);
    // what is on screen, as files: every entry of this filter (all pages), as the API
    // serves it at this layer; auditors also the signed export bundle of the filter
    const status = h("p", { id: "download-status", class: "muted", "aria-live": "polite" });
    const exp = { ...params };
    delete exp.limit;
    const bar = h("div", { class: "downloads", role: "group", "aria-label": "Download the entries of this filter" },
      h("span", { text: "Download this filter (every page): " }),
      downloadButton("download-csv", "CSV", () => download("/v1/export", { ...exp, format: "csv" }, "ledger-entries.csv", status)),
      downloadButton("download-json", "JSON", () => download("/v1/export", { ...exp, format: "json" }, "ledger-entries.json", status)));
    if (state.layer === "auditor" && exp.has_findings) {
      bar.append(h("span", { class: "muted", text: " (no signed bundle of the \u201cwith findings\u201d selection: a bundle is verified offline against its filters, and the audit runs behind it are not in it)" }));
    } else if (state.layer === "auditor") {
      bar.append(downloadButton("download-bundle", "Signed export bundle (zip)", () => download("/v1/export/bundle", exp, "ledger-export.zip", status)));
    }
    out.append(bar, status);
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
  const verified = isVerified(entry);
  const bad = flaggedFields(entry);
  if (!verified) view.append(integrityBanner(entry));
  const redacted = (entry.integrity && entry.integrity.redacted) || [];
  if (redacted.length) view.append(h("p", { id: "redacted-note", class: "muted", text: `Erased by a redaction (absent, not a flag): ${redacted.join(", ")}.` }));
  if (findingCount(entry)) view.append(findingsBox(entry));
  for (const [title, layer, names] of LAYER_SETS) {
    const box = h("section", { class: "layer", "aria-label": title }, h("h3", { text: title }));
    if (RANK[layer] > RANK[state.layer]) box.append(h("p", { class: "muted", text: `Not disclosed at your layer (${state.layer}).` }));
    else box.append(fields(entry, names, bad));
    view.append(box);
  }
  if (state.layer === "auditor") {
    const box = h("section", { class: "layer", id: "payloads", "aria-label": "Payloads" }, h("h3", { text: "Payloads" }));
    const absent = (n) => bad.has(n) ? h("p", { class: "flag bad-field", text: `\u26a0 not shown: the stored ${n} did not check against the envelope's commitment` })
      : redacted.includes(n) ? h("p", { class: "muted", text: "erased by a redaction" }) : h("p", { class: "muted", text: "none" });
    for (const n of ["preimage", "query"]) {
      box.append(h("h4", { text: n === "preimage" ? "Evidence preimage" : "Query" }),
        entry[n] === null || entry[n] === undefined ? absent(n) : h("pre", { text: entry[n] }));
    }
    box.append(h("h4", { text: "Attestation" }));
    if (!entry.attestation) box.append(absent("attestation"));
    else {
      const d = decodeJwt(entry.attestation);
      box.append(h("p", {}, "Verdict recorded: ", h("strong", { text: fmt(entry.att_verdict) })));
      if (d) box.append(h("p", { text: "Header" }), h("pre", { text: fmt(d.header) }), h("p", { text: "Claims" }), h("pre", { text: fmt(d.claims) }));
      box.append(h("details", {}, h("summary", { text: "Token" }), h("pre", { text: entry.attestation })));
    }
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
      const verdict = h("p", { class: `verdict ${!res.ok ? "invalid" : verified ? "valid" : "flagged"}`, id: "proof-verdict",
        text: headline(res, verified, entry) });
      const list = h("ol", { class: "steps", "aria-label": "Checks" },
        res.steps.map((s) => h("li", { class: s.ok ? "ok" : "bad", text: `${s.ok ? "pass" : "FAIL"} ${s.check}: ${s.detail}` })));
      status.replaceChildren(verdict, list);
      if (state.layer !== "agent") status.append(h("details", {}, h("summary", { text: "The proof as served" }), h("pre", { text: JSON.stringify(r.proof, null, 2) })));
    } catch (e) { status.replaceChildren(problem(e)); }
  };
  again.addEventListener("click", run);
  await run();
}

// What the proof verdict covers, exactly: the browser proves that the entry hash is in a
// signed tree; the values on the page were checked against that hash by the server (its
// integrity verdict).  Never a plain "valid" beside values that did not check.
function headline(res, verified, entry) {
  if (!res.ok) return `Invalid: ${res.code} — ${res.message}`;
  const proven = `This entry's hash is in the signed tree of size ${res.treeSize} (checkpoint verified in your browser)`;
  if (verified) return `${proven}; the values below were checked against it by the server`;
  const i = entry.integrity || {};
  const what = (i.fields || []).length ? i.fields.join(", ") : (i.codes || []).join(", ") || "some values";
  return `${proven}, but the values shown are flagged: ${what} did not check against it (see the banner above); the inclusion of the hash does not prove them`;
}

// The red banner of an entry whose integrity verdict is false: what did not check, at the
// caller's layer (auditors: each field with the hashed and the stored value; developers:
// the fields; agents: the codes).  The values on the page are the envelope's.
function integrityBanner(entry) {
  const i = entry.integrity || {};
  const box = h("section", { class: "banner bad", id: "integrity-banner", role: "alert", "aria-labelledby": "integrity-h" },
    h("h3", { id: "integrity-h", text: "\u26a0 Not verified: the stored entry does not match what was hashed" }));
  box.append(h("p", { text: `Codes: ${(i.codes || []).join(", ") || "none given (the server sent no verdict)"}.` }));
  if (Array.isArray(i.problems) && i.problems.length) {
    const t = h("table", { id: "integrity-problems" }, h("caption", { text: "What did not check (expected: the envelope's hashed value; stored: what the row holds)" }));
    const hr = t.createTHead().insertRow();
    for (const c of ["field", "code", "expected (hashed)", "stored"]) hr.append(h("th", { scope: "col", text: c }));
    const tb = t.createTBody();
    for (const p of i.problems) {
      const tr = tb.insertRow();
      for (const v of [p.field, p.code, p.expected, p.actual]) { const td = tr.insertCell(); td.className = "mono"; td.textContent = fmt(v); }
    }
    box.append(h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "What did not check" }, t));
  } else if (Array.isArray(i.fields) && i.fields.length) {
    const ul = h("ul", { id: "integrity-fields" });
    for (const f of i.fields) {
      ul.append(h("li", {}, h("strong", { text: f }), COLUMN_NAMES.has(f) && f in entry && entry[f] !== null
        ? ` — shown below: the envelope's (hashed) value ${fmt(entry[f])}; the stored value differs` : " — did not check"));
    }
    box.append(h("p", { text: "Fields that did not check:" }), ul);
  }
  box.append(h("p", { text: "The values on this page are the server's: the envelope's, never the indexed columns', and no payload that did not check. Where the envelope or the entry hash itself did not check, none of them is proven." }));
  return box;
}

// The audit findings about an entry (auditors: each with the run that found it, linked;
// developers: their codes), from the latest complete audit run and later partial runs.
function findingsBox(entry) {
  const box = h("section", { class: "banner bad", id: "entry-findings", "aria-labelledby": "entry-findings-h" },
    h("h3", { id: "entry-findings-h", text: `\u26a0 ${findingCount(entry)} audit finding(s) on this entry` }));
  const objs = entry.findings.filter((f) => f && typeof f === "object");
  if (!objs.length) { box.append(h("p", { text: `Codes: ${entry.findings.join(", ")} (the runs and their details are shown to auditors).` })); return box; }
  const t = h("table", { id: "entry-findings-table" }, h("caption", { text: "Findings of the latest complete audit run and of later partial runs" }));
  const hr = t.createTHead().insertRow();
  for (const c of ["run", "code", "class", "message", "expected", "actual"]) hr.append(h("th", { scope: "col", text: c }));
  const tb = t.createTBody();
  for (const f of objs) {
    const tr = tb.insertRow();
    tr.insertCell().append(h("a", { href: `#/audits?run=${f.run_id}`, text: `run #${f.run_id}` }));
    for (const v of [f.code, f.class, f.message, f.expected, f.actual]) { const td = tr.insertCell(); td.className = "mono"; td.textContent = fmt(v); }
  }
  box.append(h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Audit findings on this entry" }, t));
  return box;
}

async function checkpointsView(view) {
  view.append(h("h2", { text: "Checkpoints" }));
  if (!state.layer) { view.append(noLayer("the checkpoints")); return; }
  const full = state.layer !== "agent";  // agents are shown no roots and no notes
  let all = [];
  try {
    let after = -1;
    for (let i = 0; i < 10; i++) {
      const r = await api("/v1/checkpoints", { after, limit: 1000, consistency: full ? "true" : "" });
      all = all.concat(r.checkpoints);
      if (r.next_after === null) break;
      after = r.next_after;
    }
  } catch (e) { view.append(problem(e)); return; }
  if (!all.length) { view.append(h("p", { class: "muted", text: "No checkpoint has been signed yet." })); return; }
  // each checkpoint against the one before it: both signed notes and the RFC 9162
  // consistency proof, checked here (verify.js), like an entry's inclusion proof
  const verdicts = new Map();
  if (full) {
    let keys;
    try { keys = await jwks(); } catch (e) { view.append(problem(e)); return; }
    for (let i = 1; i < all.length; i++) {
      verdicts.set(all[i].size, await verifyCheckpointPair(all[i - 1].note, all[i].note, all[i].consistency, keys, all[i].origin));
    }
  }
  const bad = [...verdicts.values()].filter((v) => !v.ok).length;
  const lonely = all.filter((c) => !c.cosigners.length).length;
  const summary = [];
  if (full) summary.push(bad ? `\u26a0 ${bad} of ${verdicts.size} consecutive checkpoint pair(s) are NOT consistent: the ledger showed two histories`
    : `${verdicts.size} consecutive checkpoint pair(s), each verified consistent in your browser`);
  summary.push(lonely ? `\u26a0 ${lonely} of ${all.length} checkpoint(s) cosigned by no witness: only the ledger's own signature vouches for them` : "every checkpoint cosigned by a witness");
  view.append(h("p", { id: "checkpoint-summary", class: bad || lonely ? "counts flagged" : "counts", role: bad ? "alert" : null, text: summary.join(" · ") + "." }));
  const shown = all.slice(-60);
  const buckets = shown.map((c) => ({ label: c.created_at.slice(0, 16).replace("T", " "), values: { "tree size": c.size } }));
  view.append(h("figure", {}, stackedBars(`Tree size over time (signing time of each checkpoint${all.length > 60 ? ", the latest 60" : ""})`, buckets, ["tree size"]),
    h("figcaption", { text: `${all.length} checkpoint(s); latest size ${all[all.length - 1].size}, signed ${all[all.length - 1].created_at}` +
      (state.tenant ? " — the tree holds every tenant's entries: its size is not your tenant's count" : "") }),
    h("details", {}, h("summary", { text: "Data" }), dataTable("Tree size per checkpoint", buckets, ["tree size"]))));
  const list = h("ol", { class: "timeline", id: "checkpoint-list", reversed: true });
  for (const c of [...all].reverse()) {
    const li = h("li", { "data-size": c.size }, h("strong", { text: `size ${c.size}` }), ` — signed ${c.created_at}`);
    if (!c.cosigners.length) li.append(h("p", { class: "flag unwitnessed", text: "\u26a0 No witness cosigned this checkpoint: nothing outside the ledger vouches that it saw this tree (docs/anchoring.md)." }));
    const dl = { signers: c.signers.join(", ") || "none readable",
      cosigners: c.cosigners.length ? c.cosigners.map((x) => `${x.name} (${x.created_at})`).join(", ") : "none",
      timestamps: c.timestamps.length ? c.timestamps.map((x) => `${x.tsa} (${x.created_at})`).join(", ") : "none" };
    if (full) dl["root (hex, as ledger checkpoint prints it)"] = c.root_hex || `not readable (${c.root_b64})`;
    li.append(fields(dl, Object.keys(dl)));
    if (full) {
      const v = verdicts.get(c.size);
      li.append(h("p", { id: `consistency-${c.size}`, class: v ? (v.ok ? "verdict valid" : "verdict invalid") : "muted",
        text: v ? (v.ok ? `\u2713 ${v.message}` : `\u2717 Not consistent with the checkpoint before it: ${v.code} — ${v.message}`)
          : "The first stored checkpoint: nothing before it to be consistent with." }));
      li.append(h("details", {}, h("summary", { text: "Signed note" }), h("pre", { text: c.note })),
        downloadButton(`note-${c.size}`, `Download the signed note (checkpoint-${c.size}.txt)`,
          () => saveBlob(new Blob([c.note], { type: "text/plain" }), `checkpoint-${c.size}.txt`)));
    }
    list.append(li);
  }
  view.append(list);
}

// -- re-verification runs recorded in the ledger (GET /v1/reverify-runs) ---------------------
// Disagreements are their own class, next to the integrity findings: the entry is what its
// producer wrote, and its engine, re-run on the stored inputs, decided otherwise.  A run's
// document is shown only when the server's read check verified its entry, and its
// disagreements are marked unproven unless their digest is the one the entry records.
const REEXEC = ["agrees", "disagrees", "not_reexecutable", "engine_error"];
async function reverifyView(view) {
  view.append(h("h2", { text: "Re-verification" }),
    h("p", { class: "muted", text: "Runs of ledger reverify --record, committed in the ledger as reverify_run entries. A disagreement is not an integrity finding: the entry is what its producer wrote, and its engine, re-run on the stored inputs, decided otherwise (a wrong or forged result, or engine drift)." }));
  let r;
  try { r = await api("/v1/reverify-runs", { limit: 20 }); } catch (e) { view.append(problem(e)); return; }
  if (!r.runs.length) { view.append(h("p", { class: "muted", id: "no-reverify-runs", text: "No re-verification run is recorded in the ledger (ledger reverify --record)." })); return; }
  const table = h("table", { id: "reverify-runs-table" }, h("caption", { text: "Recorded re-verification runs, newest first (times RFC 3339, UTC)" }));
  const head = table.createTHead().insertRow();
  for (const c of ["entry", "recorded", "read check", "outcome", "range", "entries", ...REEXEC, "outcomes"]) head.append(h("th", { scope: "col", text: c }));
  const body = table.createTBody();
  for (const run of r.runs) {
    const tr = body.insertRow();
    tr.dataset.seq = run.seq;
    const ok = isVerified(run);
    tr.insertCell().append(h("a", { href: `#/entry/${run.seq}`, text: `#${run.seq}` }));
    tr.insertCell().textContent = fmt(run.recorded_at);
    const rc = tr.insertCell();
    rc.append(ok ? h("span", { text: "verified" }) : h("span", { class: "flag", text: `\u26a0 ${flagText(run)}` }));
    const s = (ok && run.summary) || {};
    for (const v of [ok ? run.outcome : null, ok && run.range ? `[${run.range.start}, ${run.range.end})` : null, s.entries, ...REEXEC.map((k) => s[k])]) tr.insertCell().textContent = fmt(v);
    tr.insertCell().append(h("span", { class: run.outcomes_proven ? null : "flag", text: run.outcomes_proven ? "proven by the entry's digest" : "\u26a0 NOT proven" }));
  }
  view.append(h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Recorded re-verification runs" }, table));
  for (const run of r.runs) {
    const sec = h("section", { id: `reverify-run-${run.seq}`, class: "reverify-run", "aria-labelledby": `reverify-run-${run.seq}-h` });
    sec.append(h("h3", { id: `reverify-run-${run.seq}-h`, text: `Run recorded as entry ${run.seq}: disagreements` }));
    view.append(sec);
    if (!isVerified(run)) {
      sec.append(h("p", { class: "banner bad", role: "alert", text: `This reverify_run entry is ${flagText(run)}: nothing of its run is shown (see ledger audit).` }));
      continue;
    }
    if (!run.outcomes_proven) sec.append(h("p", { class: "banner bad", role: "alert", id: `reverify-unproven-${run.seq}`, text: "NOT PROVEN: the outcomes kept beside the ledger for this run do not match the digest its entry records (changed, removed or added since). The disagreements below come from them and are not proven." }));
    const dis = run.disagreements || [];
    if (!dis.length) { sec.append(h("p", { class: "muted", text: "No disagreement." })); continue; }
    const t = h("table", { class: "reverify-disagreements" }, h("caption", { text: `${dis.length} disagreement(s)` + (run.outcomes_proven ? "" : " (NOT proven)") }));
    const agent = state.layer === "agent" || dis.every((d) => !("differences" in d));
    const cols = agent ? ["seq"] : ["seq", "engine", "field", "stored", "fresh", "re-executor"];
    const hr = t.createTHead().insertRow();
    for (const c of cols) hr.append(h("th", { scope: "col", text: c }));
    const tb = t.createTBody();
    for (const d of dis) {
      const rows = agent ? [null] : (d.differences && d.differences.length ? d.differences : [{}]);
      for (const x of rows) {
        const tr = tb.insertRow();
        tr.dataset.seq = d.seq;
        tr.insertCell().append(h("a", { href: `#/entry/${d.seq}`, text: String(d.seq) }));
        if (agent) continue;
        const who = d.reexecutor || {};
        const withheld = x && x.withheld ? `withheld (${x.withheld})` : null;
        for (const v of [d.engine, x.field, withheld || x.stored, withheld || x.fresh, `${who.name || "—"} ${who.version || ""}`.trim()]) {
          const td = tr.insertCell(); td.className = "mono"; td.textContent = typeof v === "string" ? v : fmt(v);
        }
      }
    }
    sec.append(h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": `Disagreements of the run recorded as entry ${run.seq}` }, t));
  }
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

// The run shown when none is picked: the latest complete run that an audit command made
// (a `ledger report` run covers a report's period only; a run with no command is a library
// call or predates labels) of the whole ledger -- a tenant's audit (`r.tenant`) covers one
// tenant's chain, so it is the default only when no whole-ledger audit is listed (a tenant
// token lists its tenant's runs only) -- else the latest complete run, else the newest.
const byCommand = (r) => r.label && r.label.command && r.label.command !== "ledger report";
function defaultRun(runs) {
  const done = runs.filter((r) => r.state === "complete");
  const audit = done.find((r) => byCommand(r) && !r.tenant) || done.find(byCommand);
  return audit || done[0] || runs[0];
}
const runCommand = (r) => (r.label && r.label.command) || "no command recorded";
// A finding's expected/actual of a time check are microseconds since the epoch: shown as
// RFC 3339 (UTC, microseconds), the raw number after it.
function rfc3339us(us) {
  if (typeof us !== "number" || !Number.isFinite(us)) return fmt(us);
  const ms = Math.floor(us / 1000), frac = String(((us % 1e6) + 1e6) % 1e6).padStart(6, "0");
  return `${new Date(ms).toISOString().slice(0, 19)}.${frac}Z (${us} µs)`;
}
const findingValue = (f, v) => (f.code === "time_reversed" ? rfc3339us(v) : fmt(v));
const SEVERITY_CHOICES = ["", "critical", "high", "medium", "review", "info"];
function explainCells(tr, x) {
  tr.insertCell().append(h("span", { class: `sev sev-${x.severity}`, text: x.severity }));
  return tr;
}

async function auditsView(view, query) {
  view.append(h("h2", { text: "Audits" }));
  const q = parseQuery(query);
  let runs;
  try { runs = await allRuns(); } catch (e) {
    if (e.status === 403 && e.code !== "tenant_scope") { view.append(h("p", { class: "muted", id: "audits-denied", text: `Recorded audit runs and their findings are shown to auditors only (your role: ${state.role}).` })); return; }
    view.append(problem(e)); return;
  }
  if (!runs.length) { view.append(h("p", { class: "muted", text: "No audit run is recorded (ledger audit)." })); return; }
  const trend = [...runs].reverse().map((r) => ({ label: `#${r.run_id}`, values: { failed: r.summary.failed || 0, unverified: r.summary.unverified || 0, verified: r.summary.verified || 0 } }));
  const series = ["failed", "unverified", "verified"];
  view.append(h("figure", {}, stackedBars("Rows by disposition per audit run (trend)", trend.slice(-30), series),
    h("details", {}, h("summary", { text: "Data" }), dataTable("Rows by disposition per run", trend, series))));
  const chosen = q.run ? runs.find((r) => r.run_id === Number(q.run)) || { run_id: Number(q.run) } : defaultRun(runs);
  const pick = chosen.run_id;
  const table = h("table", { id: "runs-table" }, h("caption", { text: "Recorded audit runs, newest first (times RFC 3339, UTC)" }));
  const head = table.createTHead().insertRow();
  for (const c of ["run", "state", "started", "command", "by", "scope", "checkpoints", "rows", "verified", "failed", "unverified", "findings", "abstentions"]) head.append(h("th", { scope: "col", text: c }));
  const body = table.createTBody();
  for (const r of runs) {
    const tr = body.insertRow();
    tr.dataset.run = r.run_id;
    if (r.run_id === pick) tr.classList.add("current");
    const l = r.label || {};
    tr.insertCell().append(h("a", { href: `#/audits?run=${r.run_id}`, "aria-current": r.run_id === pick ? "true" : null, text: `#${r.run_id}` }));
    const scope = l.scope || `seqs [${r.range.start}, ${r.range.end})`;
    for (const v of [r.state, r.started_at, runCommand(r), l.actor || "—", r.tenant ? `tenant ${r.tenant} only: ${scope}` : scope,
      (l.checkpoints || []).join(", ") || "none", r.summary.rows, r.summary.verified, r.summary.failed, r.summary.unverified, r.findings, r.abstentions]) tr.insertCell().textContent = fmt(v);
  }
  view.append(h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Recorded audit runs" }, table));
  const sec = h("section", { id: "run-detail", "aria-labelledby": "run-detail-h" });
  view.append(sec);
  const byAudit = byCommand(chosen);
  const why = q.run ? "picked" : chosen.state === "complete" ? (byAudit ? (chosen.tenant ? `the latest complete audit of tenant ${chosen.tenant}'s chain` : "the latest complete audit")
    : "the latest complete run; no complete run of an audit command is recorded") : "the newest run; none is complete";
  sec.append(h("h3", { id: "run-detail-h", text: `Run #${pick}: findings` }),
    h("p", { id: "run-label", class: "muted", text: `Showing run #${pick} (${why})` + (chosen.label ? ` — ${runCommand(chosen)}, ${chosen.label.scope}, by ${chosen.label.actor || "unknown"}, checkpoints: ${(chosen.label.checkpoints || []).join(", ") || "none"}, started ${chosen.started_at}.` : ".") }));
  const PAGE = 50;
  const offset = Math.max(0, Number(q.offset || 0));
  const sel = { code: q.code, class: q.class, field: q.field, sort: q.sort || "seq", offset, limit: PAGE };
  let run;
  try { run = await api(`/v1/audits/${pick}`, sel); } catch (e) { sec.append(problem(e)); return; }
  const incidents = (run.incidents || []).filter((g) => !q.severity || g.explain.severity === q.severity);
  const link = (over) => {
    const p = new URLSearchParams({ run: String(pick) });
    for (const [k, v] of Object.entries({ severity: q.severity, code: q.code, class: q.class, field: q.field, sort: q.sort, ...over })) if (v) p.set(k, v);
    return `#/audits?${p}`;
  };
  // the incidents: one per code, class and field
  const total = (run.incidents || []).reduce((a, g) => a + g.count, 0);
  const ih = h("h4", { id: "incidents-h", text: `Incidents: ${(run.incidents || []).length} from ${total} finding(s), grouped by code, class and field` });
  const sevForm = h("form", { class: "filters", id: "incident-filter", "aria-label": "Incident filter" },
    h("div", {}, h("label", { for: "f-severity", text: "severity" }),
      h("select", { id: "f-severity", name: "severity" }, SEVERITY_CHOICES.map((c) => h("option", { value: c, text: c || "any", selected: (q.severity || "") === c })))),
    h("div", { class: "actions" }, h("button", { type: "submit", text: "Show" })));
  sevForm.addEventListener("submit", (ev) => { ev.preventDefault(); location.hash = link({ severity: sevForm.elements.severity.value, code: "", class: "", field: "" }); });
  sec.append(ih, sevForm);
  if (!incidents.length) sec.append(h("p", { class: "muted", id: "no-incidents", text: (run.incidents || []).length ? "No incident of this severity." : "No row findings." }));
  else {
    const t = h("table", { id: "incidents-table" }, h("caption", { text: "Incidents, most severe first; the explanation and next step of each code are those of docs/audit.md (Triage)" }));
    const hr = t.createTHead().insertRow();
    for (const c of ["severity", "code", "class", "field", "findings", "seqs", "what it means", "next step", "findings list"]) hr.append(h("th", { scope: "col", text: c }));
    const tb = t.createTBody();
    for (const g of incidents) {
      const tr = explainCells(tb.insertRow(), g.explain);
      tr.dataset.code = g.code;
      tr.insertCell().append(h("span", { class: "mono code", text: g.code }));
      for (const v of [g.class, g.field || "—", g.count]) tr.insertCell().textContent = fmt(v);
      const seqs = tr.insertCell();
      seqs.className = "seq-ranges";
      for (const [i, [a, b]] of (g.ranges || []).entries()) {
        if (i) seqs.append(", ");
        seqs.append(h("a", { href: `#/entry/${a}`, "aria-label": `entry ${a}${a === b ? "" : ` (first of ${a}–${b})`}`, text: a === b ? `${a}` : `${a}–${b}` }));
      }
      if ((g.range_count || 0) > (g.ranges || []).length) seqs.append(` and ${g.range_count - g.ranges.length} more range(s)`);
      if (!(g.ranges || []).length) seqs.textContent = "— (ledger-level)";
      tr.insertCell().textContent = g.explain.explanation;
      tr.insertCell().append(h("span", { text: g.explain.next_step }), h("br"), h("span", { class: "muted", text: `See ${g.explain.doc}` }));
      tr.insertCell().append(h("a", { href: link({ code: g.code, class: g.class, field: g.field || "", severity: q.severity }), text: "show these", "aria-label": `show these: the ${g.count} finding(s) of ${g.code}${g.field ? ` on ${g.field}` : ""}` }));
    }
    sec.append(h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Incidents" }, t));
  }
  // the findings themselves: filtered by an incident, sorted, a page at a time
  const what = [q.code && `code ${q.code}`, q.class && `class ${q.class}`, q.field && `field ${q.field}`].filter(Boolean).join(", ");
  sec.append(h("h4", { id: "findings-h", text: `Findings${what ? ` (${what})` : ""}: ${run.finding_total} in all` }));
  const sortForm = h("form", { class: "filters", id: "findings-sort", "aria-label": "Sort findings" },
    h("div", {}, h("label", { for: "f-sort", text: "sort by" }),
      h("select", { id: "f-sort", name: "sort" }, [["seq", "seq, oldest first"], ["-seq", "seq, newest first"], ["code", "code"], ["severity", "severity"]]
        .map(([v, t]) => h("option", { value: v, text: t, selected: (q.sort || "seq") === v })))),
    h("div", { class: "actions" }, h("button", { type: "submit", text: "Sort" }),
      what ? h("a", { href: link({ code: "", class: "", field: "" }), id: "all-findings", text: "all findings" }) : null));
  sortForm.addEventListener("submit", (ev) => { ev.preventDefault(); location.hash = link({ sort: sortForm.elements.sort.value }); });
  sec.append(sortForm);
  const fsel = { code: q.code, class: q.class, field: q.field, sort: q.sort || "seq" };
  const fstatus = h("p", { id: "findings-download-status", class: "muted", "aria-live": "polite" });
  sec.append(h("div", { class: "downloads", role: "group", "aria-label": "Download these findings" },
    h("span", { text: `Download ${what ? "these" : "all"} ${run.finding_total} finding(s): ` }),
    downloadButton("findings-csv", "CSV", () => download(`/v1/audits/${pick}`, { ...fsel, format: "csv" }, `audit-run-${pick}-findings.csv`, fstatus)),
    downloadButton("findings-json", "JSON", () => download(`/v1/audits/${pick}`, fsel, `audit-run-${pick}.json`, fstatus))), fstatus);
  if (!run.finding_list.length) sec.append(h("p", { class: "muted", text: "No row findings." }));
  else {
    const t = h("table", { id: "findings-table" }, h("caption", { text: `Findings ${offset + 1}–${offset + run.finding_list.length} of ${run.finding_total}` }));
    const hr = t.createTHead().insertRow();
    for (const c of ["seq", "code", "class", "message", "expected", "actual"]) hr.append(h("th", { scope: "col", text: c }));
    const tb = t.createTBody();
    for (const f of run.finding_list) {
      const tr = tb.insertRow();
      tr.insertCell().append(f.seq === null || f.seq === undefined ? "—" : h("a", { href: `#/entry/${f.seq}`, "aria-label": `entry ${f.seq}`, text: String(f.seq) }));
      for (const v of [f.code, f.class, f.message, findingValue(f, f.expected), findingValue(f, f.actual)]) { const td = tr.insertCell(); td.className = "mono"; td.textContent = v === undefined ? "—" : typeof v === "string" ? v : fmt(v); }
    }
    sec.append(h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Findings" }, t));
    const pager = h("div", { class: "pager", id: "findings-pager" });
    if (offset > 0) pager.append(h("a", { id: "findings-prev", href: link({ offset: String(Math.max(0, offset - PAGE)) }), text: "← Previous findings" }));
    if (offset + run.finding_list.length < run.finding_total) pager.append(h("a", { id: "findings-next", href: link({ offset: String(offset + PAGE) }), text: "Next findings →" }));
    sec.append(pager, h("p", {}, h("a", { id: "entries-with-findings", href: "#/entries?has_findings=true",
      text: "The entries with findings (of the latest complete run and later running runs) in the entries list" })));
  }
  if (run.abstention_list.length) {
    const t = h("table", { id: "abstentions-table" }, h("caption", { text: `${run.abstention_list.length} abstention(s)` }));
    const hr = t.createTHead().insertRow();
    for (const c of ["seq", "check", "reason", "severity", "message", "what it means"]) hr.append(h("th", { scope: "col", text: c }));
    const tb = t.createTBody();
    for (const a of run.abstention_list) {
      const x = (run.abstention_explain || {})[a.reason] || {};
      const tr = tb.insertRow();
      for (const v of [a.seq, a.check, a.reason]) tr.insertCell().textContent = fmt(v);
      explainCells(tr, { severity: x.severity || "review" });
      for (const v of [a.message, x.explanation]) tr.insertCell().textContent = fmt(v);
    }
    sec.append(h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Abstentions" }, t));
  }
}

// Charts over the whole ledger from the server's counts (GET /v1/aggregates: the latest
// complete audit run's counts plus the entries after it checked now).  A row that did not
// verify is counted in its own series, never under its status, engine or verdict.
const TOP_SERIES = 8;
function topSeries(buckets, series) {
  const total = new Map(series.map((x) => [x, 0]));
  for (const b of buckets) for (const x of series) total.set(x, total.get(x) + (b.values[x] || 0));
  const ranked = series.filter((x) => x !== FLAGGED).sort((x, y) => total.get(y) - total.get(x) || (x < y ? -1 : 1));
  if (ranked.length <= TOP_SERIES) return { buckets, series: [...ranked.sort(), ...(series.includes(FLAGGED) ? [FLAGGED] : [])] };
  const keep = new Set(ranked.slice(0, TOP_SERIES - 1));
  const OTHER = `other (${ranked.length - keep.size} series)`;
  const out = buckets.map((b) => {
    const values = {};
    for (const [k, v] of Object.entries(b.values)) {
      const name = k === FLAGGED || keep.has(k) ? k : OTHER;
      values[name] = (values[name] || 0) + v;
    }
    return { label: b.label, values };
  });
  return { buckets: out, series: [...[...keep].sort(), OTHER, ...(series.includes(FLAGGED) ? [FLAGGED] : [])] };
}
const bucketLabel = (start, width) => (width === "hour" ? start.slice(0, 13).replace("T", " ") + "h" : width === "week" ? `week of ${start.slice(0, 10)}` : start.slice(0, 10));

async function chartsView(view, query) {
  view.append(h("h2", { text: "Charts" }));
  if (!state.layer) { view.append(noLayer("the charts")); return; }
  const m = parseMulti(query);
  const q = parseQuery(query);
  const form = h("form", { class: "filters", id: "chart-filters", "aria-label": "Chart range and selection" });
  form.append(h("div", {}, h("label", { for: "c-since", text: "from (RFC 3339 or date)" }), h("input", { id: "c-since", name: "since", type: "text", value: q.since || "", placeholder: "2026-09-01" })),
    h("div", {}, h("label", { for: "c-until", text: "until (exclusive)" }), h("input", { id: "c-until", name: "until", type: "text", value: q.until || "", placeholder: "2027-01-01" })),
    h("div", {}, h("label", { for: "c-bucket", text: "bucket" }), h("select", { id: "c-bucket", name: "bucket" }, ["auto", "hour", "day", "week"].map((x) => h("option", { value: x, text: x, selected: (q.bucket || "auto") === x })))));
  const picks = state.layer === "agent" ? [] : state.layer === "developer" ? ["engine"] : ["engine", "producer"];
  for (const name of picks) {
    const list = (await pickList(name)) || [];
    const chosen = m[name] || [];
    form.append(h("div", {}, h("label", { for: `c-${name}`, text: `${name} (any of)` }),
      h("select", { id: `c-${name}`, name, multiple: true, size: Math.min(4, Math.max(2, list.length)) },
        [...new Set([...list, ...chosen])].map((x) => h("option", { value: x, text: x, selected: chosen.includes(x) })))));
  }
  form.append(h("div", { class: "actions" }, h("button", { type: "submit", text: "Show" })));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v && !(k === "bucket" && v === "auto")) p.append(k, /^\d{4}-\d{2}-\d{2}$/.test(v) ? `${v}T00:00:00Z` : v);
    location.hash = `#/charts?${p}`;
  });
  view.append(h("details", { class: "fold", open: true }, h("summary", { text: "Range and selection" }), form));
  const params = { bucket: q.bucket || "auto" };
  for (const k of ["since", "until"]) if (q[k]) params[k] = q[k];
  for (const k of picks) if (m[k]) params[k] = m[k];
  let agg;
  try { agg = await api("/v1/aggregates", params); } catch (e) { view.append(problem(e)); return; }
  const c = agg.covers;
  if (c.tenant) { chartsBody(view, agg, c, `Counts over the entries of tenant ${c.tenant} only (the token's tenant): ${c.live.rows ? `${c.live.rows} entr${c.live.rows === 1 ? "y" : "ies"} checked now by the server's ${c.live.checked}` : "no entries"}${c.live.truncated ? `; only the first ${c.live.rows} of this range are counted (choose a shorter range)` : ""}${c.run_id !== null ? `; findings as audit run #${c.run_id} (started ${c.run_started_at}) found them` : ""}. Layer ${state.layer}; bucket ${agg.bucket}.`); return; }
  const parts = [];
  if (c.run_id !== null) parts.push(`entries 0–${c.audited.end - 1} as audit run #${c.run_id} (started ${c.run_started_at}) found them`);
  if (c.live.rows) parts.push(`entries ${c.live.start}–${c.live.end - 1} (${c.live.rows}) checked now by the server's ${c.live.checked}`);
  if (!parts.length) parts.push("no entries");
  chartsBody(view, agg, c, `Counts over the whole ledger (${c.head} entries): ${parts.join("; ")}${c.live.truncated ? `; the ${c.head - c.live.end} entries after ${c.live.end - 1} are not counted yet (run an audit)` : ""}. Layer ${state.layer}; bucket ${agg.bucket}.`);
}

function chartsBody(view, agg, c, coversText) {
  view.append(h("p", { id: "charts-covers", class: "muted", text: coversText }));
  const flagged = agg.buckets.reduce((a, b) => a + b.flagged, 0);
  view.append(h("p", { id: "charts-flagged", class: flagged ? "counts flagged" : "counts", text: flagged
    ? `\u26a0 ${flagged} entr${flagged === 1 ? "y" : "ies"} not verified (the audit failed them, or the read check flagged them): counted as "${FLAGGED}", never under their status, engine or verdict.`
    : "Every counted entry verified against what was hashed." }));
  const add = (id, title, data, note) => {
    const fig = h("figure", { id });
    if (!data.buckets.length) fig.append(h("p", { class: "muted", text: `${title}: no data.` }));
    else {
      fig.append(stackedBars(title, data.buckets, data.series), h("details", {}, h("summary", { text: "Data" }), dataTable(title, data.buckets, data.series)));
      if (note) fig.append(h("figcaption", { class: "muted", text: note }));
    }
    view.append(h("h3", { text: title }), fig);
  };
  const name = (vals) => (state.layer === "agent" ? `${vals[0]}` : `${vals[0]} · ${vals[1] ?? "?"}`);
  const seen = new Set();
  const main = agg.buckets.map((b) => {
    const values = {};
    for (const r of b.results) { const k = name(r); seen.add(k); values[k] = (values[k] || 0) + r[r.length - 1]; }
    if (b.flagged) { values[FLAGGED] = b.flagged; seen.add(FLAGGED); }
    return { label: bucketLabel(b.start, agg.bucket), values };
  });
  add("chart-status", state.layer === "agent" ? "Results by status over time" : "Results by status × engine over time",
    topSeries(main, [...seen]), state.layer === "agent" ? null : `At most ${TOP_SERIES} series; the smaller ones are summed as "other".`);
  // failures on their own scale, so a few are not flattened by the many
  const fails = agg.buckets.map((b) => ({ label: bucketLabel(b.start, agg.bucket), values: {
    BLOCKED: b.results.filter((r) => r[0] === "BLOCKED").reduce((a, r) => a + r[r.length - 1], 0), [FLAGGED]: b.flagged } }));
  add("chart-failures", `Failures over time (BLOCKED${flagged ? " and not verified" : ""}), on their own scale`, { buckets: fails, series: flagged ? ["BLOCKED", FLAGGED] : ["BLOCKED"] });
  if (state.layer === "auditor") {
    const seenA = new Set();
    const att = agg.buckets.map((b) => {
      const values = {};
      for (const [v, n] of b.attestations) { const k = v ?? "no attestation"; seenA.add(k); values[k] = n; }
      if (b.flagged) { values[FLAGGED] = b.flagged; seenA.add(FLAGGED); }
      return { label: bucketLabel(b.start, agg.bucket), values };
    });
    add("chart-attestations", "Attestation verdicts over time", topSeries(att, [...seenA]));
    const seenF = new Set();
    const fnd = agg.buckets.map((b) => {
      const values = {};
      for (const [cls, n] of b.findings) { seenF.add(cls); values[cls] = n; }
      return { label: bucketLabel(b.start, agg.bucket), values };
    }).filter((b) => Object.keys(b.values).length);
    add("chart-findings", `Findings of audit run #${c.run_id ?? "—"} by class, by the entry's time`, { buckets: fnd, series: [...seenF].sort() },
      c.tenant ? "The findings of one run on this tenant's entries, never added up across runs." : "The findings of one run (the one the counts come from), never added up across runs.");
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
    else if (name === "reverify") await reverifyView(view);
    else if (name === "charts") await chartsView(view, query);
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
