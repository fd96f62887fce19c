// Small dependency-free SVG charts.  Each series has a colour AND a fill pattern AND a
// text label in the legend; every bar segment has a <title>; every chart comes with a
// data table, so nothing depends on telling colours apart.

const NS = "http://www.w3.org/2000/svg";
const PATTERNS = ["solid", "hatch", "dots", "cross", "vert", "back"];
let chartNo = 0;
// The series of rows whose values did not check against what was hashed: always last,
// always its own pattern and colour, never merged into a status or verdict.
export const FLAGGED = "not verified (flagged)";

function el(name, attrs = {}, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function pattern(id, kind, cls) {
  const p = el("pattern", { id, width: 6, height: 6, patternUnits: "userSpaceOnUse" });
  p.append(el("rect", { width: 6, height: 6, class: cls }));
  const ink = { class: "ink" };
  if (kind === "hatch") p.append(el("path", { d: "M0,6 L6,0", ...ink }));
  if (kind === "back") p.append(el("path", { d: "M0,0 L6,6", ...ink }));
  if (kind === "dots") p.append(el("circle", { cx: 3, cy: 3, r: 1.2, class: "dot" }));
  if (kind === "cross") p.append(el("path", { d: "M0,3 H6 M3,0 V6", ...ink }));
  if (kind === "vert") p.append(el("path", { d: "M3,0 V6", ...ink }));
  return p;
}

// Fixed colours by meaning (docs/console.md): a failed or BLOCKED series is red, a verified
// one green, an unverified or UNVERIFIABLE one amber, whatever its place in the legend; a
// "STATUS · engine" series takes its status's colour.  Other series cycle through the
// neutral palette.  The pattern still changes with the place, so two series never look alike.
const MEANING = { failed: "sfail", BLOCKED: "sfail", verified: "sok", VERIFIED: "sok",
  unverified: "swarn", UNVERIFIABLE: "swarn" };
export function seriesClass(name, i) {
  return MEANING[String(name).split(" \u00b7 ")[0]] || `s${3 + (i % 3)}`;
}

// buckets: [{label, values: {series: n}}]; series: names in stacking order.
export function stackedBars(title, buckets, series) {
  const id = `c${++chartNo}`;
  const W = 640, H = 240, L = 44, B = 46, T = 16, R = 12;
  const max = Math.max(1, ...buckets.map((b) => series.reduce((a, s) => a + (b.values[s] || 0), 0)));
  const svg = el("svg", { viewBox: `0 0 ${W} ${H + 24 * Math.ceil(series.length / 3)}`, role: "img",
    "aria-labelledby": `${id}-t`, class: "chart" });
  svg.append(el("title", { id: `${id}-t` }, title));
  const defs = el("defs");
  series.forEach((s, i) => defs.append(s === FLAGGED ? pattern(`${id}-p${i}`, "cross", "sflag")
    : pattern(`${id}-p${i}`, PATTERNS[i % PATTERNS.length], seriesClass(s, i))));
  svg.append(defs);
  const plotW = W - L - R, plotH = H - T - B;
  svg.append(el("line", { x1: L, y1: T + plotH, x2: W - R, y2: T + plotH, class: "axis" }));
  svg.append(el("line", { x1: L, y1: T, x2: L, y2: T + plotH, class: "axis" }));
  for (const f of [0, 0.5, 1]) {
    const y = T + plotH - f * plotH;
    svg.append(el("text", { x: L - 4, y: y + 4, class: "tick", "text-anchor": "end" }, String(Math.round(f * max))));
  }
  const bw = plotW / Math.max(1, buckets.length);
  buckets.forEach((b, i) => {
    let y = T + plotH;
    const w = Math.min(bw * 0.7, 56), x = L + i * bw + (bw - w) / 2;
    let total = 0;
    series.forEach((s, j) => {
      const v = b.values[s] || 0;
      if (!v) return;
      total += v;
      const h = (v / max) * plotH;
      y -= h;
      const r = el("rect", { x, y, width: w, height: h, fill: `url(#${id}-p${j})`, class: "seg" });
      r.append(el("title", {}, `${b.label}: ${s} ${v}`));
      svg.append(r);
    });
    svg.append(el("text", { x: x + w / 2, y: y - 3, class: "tick", "text-anchor": "middle" }, String(total)));
    if (buckets.length <= 12 || i % Math.ceil(buckets.length / 12) === 0) {
      svg.append(el("text", { x: x + w / 2, y: T + plotH + 14, class: "tick", "text-anchor": "middle" }, b.label));
    }
  });
  series.forEach((s, i) => {
    const x = L + (i % 3) * 200, y = H + 24 * Math.floor(i / 3);
    svg.append(el("rect", { x, y: y - 10, width: 14, height: 14, fill: `url(#${id}-p${i})`, class: "seg" }));
    svg.append(el("text", { x: x + 20, y: y + 2, class: "legend" }, s));
  });
  return svg;
}

// The same data as an HTML table (caption, one row per bucket, one column per series).
export function dataTable(title, buckets, series) {
  const t = document.createElement("table");
  t.className = "data";
  const cap = document.createElement("caption");
  cap.textContent = title;
  t.append(cap);
  const head = t.createTHead().insertRow();
  for (const h of ["", ...series, "total"]) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = h;
    head.append(th);
  }
  const body = t.createTBody();
  for (const b of buckets) {
    const tr = body.insertRow();
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = b.label;
    tr.append(th);
    let total = 0;
    for (const s of series) {
      total += b.values[s] || 0;
      tr.insertCell().textContent = String(b.values[s] || 0);
    }
    tr.insertCell().textContent = String(total);
  }
  return t;
}
