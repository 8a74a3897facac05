/* groundwatch dashboard: the Breakdown panel under the overview's charts (api/slices/...). A metric per
   slice of one dimension, and what changed against a baseline period, each slice's contribution split
   into mix shift and rate shift. Clicking a slice filters the whole page: the page's slice filter is
   repeated key:value terms (?slice=app:wiki-qa&slice=prompt_version:v2, schemas/slice_filter.py), read
   by the charts, the drill-down, the Breakdown and Documents. The filter shows above the charts (sliceChip). Uses the helpers of dashboard.js ($, el, api, params,
   setParams, iso, fmt, currentRange, route);
   state in the address bar: bd_metric, bd_dim, bd_cmp. All text from the data is set with textContent. */
"use strict";

const COMPARE = {
  previous: "the period before", "1d": "1 day earlier", "7d": "7 days earlier",
  halves: "the range's first half → its second half",
};

function sliceTerms() { return params().getAll("slice"); }
function termKey(term) { return term.split(":")[0]; }
/* A slice filter as the API returns it ({app, model, dimensions}) in words: its terms, or all traffic. */
function filterText(f) {
  const terms = [...["app", "model"].filter((k) => f && f[k]).map((k) => `${k}:${f[k]}`),
    ...Object.entries((f && f.dimensions) || {}).map(([k, v]) => `${k}:${v}`)];
  return terms.join(", ") || "all traffic";
}
/* An address from before the filter was key:value terms (slice=DIMENSION=VALUE) still opens its slice. */
function upgradeSliceAddress() {
  const terms = sliceTerms();
  const upgraded = terms.map((t) => (/^[A-Za-z0-9_.-]+=/.test(t) ? t.replace("=", ":") : t));
  if (upgraded.some((t, i) => t !== terms[i])) setParams({ slice: upgraded });
}
document.addEventListener("DOMContentLoaded", upgradeSliceAddress); // before dashboard.js routes

function sliceQuery(r) {
  const p = params();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end) });
  if (p.get("app")) q.set("app", p.get("app"));
  p.getAll("model").forEach((m) => q.append("model", m));
  sliceTerms().forEach((t) => q.append("slice", t));
  return q;
}

/* The two periods "what changed" compares: the range against an earlier one of its length, or (halves)
   the range's first half against its second, the default for "all data", before which nothing is stored. */
function periodsOf(r, cmp) {
  if (cmp === "halves") {
    const mid = Math.floor((r.start + (r.end - r.start) / 2) / 60) * 60;
    return { base: { start: r.start, end: mid }, cur: { start: mid, end: r.end } };
  }
  const shift = cmp === "1d" ? 86400 : cmp === "7d" ? 7 * 86400 : r.end - r.start;
  return { base: { start: r.start - shift, end: r.end - shift }, cur: { start: r.start, end: r.end } };
}
function span(p) { return `${iso(p.start).slice(0, 16).replace("T", " ")} – ${iso(p.end).slice(0, 16).replace("T", " ")} UTC`; }

function metricUnit(kind) { return kind === "rate" ? "pct" : kind === "sum" ? "int" : ""; }
function points(v, kind) {
  if (v === null || v === undefined) return "–";
  const s = kind === "rate" ? (100 * v).toFixed(1) + " pt" : kind === "sum" ? String(Math.round(v)) : v.toFixed(3);
  return (v > 0 ? "+" : "") + s;
}

/* Narrow the page to a slice (another value of the same dimension replaces its term); the Breakdown then
   goes on by another dimension (by its own it would show the one value left). */
function chooseSlice(dimension, value) {
  setParams({ slice: [...sliceTerms().filter((t) => termKey(t) !== dimension), dimension + ":" + value], bd_dim: null }, true);
  route();
}

/* The filter, above the charts: what the whole page shows, and the way back. */
function sliceChip() {
  const terms = sliceTerms();
  if (!terms.length) return null;
  return el("p", { class: "slice-chip", id: "slice-chip" }, "Whole page filtered to ", el("strong", {}, terms.join(", ")),
    " (charts, drill-down, Breakdown and Documents; dead letters carry no dimensions) ",
    el("button", { type: "button", id: "slice-clear", onclick: () => { setParams({ slice: null }, true); route(); } }, "clear ✕"));
}

function selectOf(id, options, chosen, onChange) {
  const select = el("select", { id }, ...options.map(([value, label]) => el("option", { value, selected: value === chosen }, label)));
  select.addEventListener("change", () => onChange(select.value));
  return select;
}

async function renderBreakdown(r) {
  const box = $("breakdown");
  const p = params();
  const metrics = (state.options.metrics || []);
  const metric = metrics.find((m) => m.name === p.get("bd_metric")) || metrics.find((m) => m.name === "hallucination_rate") || metrics[0];
  const { dimensions } = await api("slices/dimensions", new URLSearchParams({ start: iso(r.start), end: iso(r.end) }));
  const filtered = sliceTerms().map(termKey);
  const dim = dimensions.includes(p.get("bd_dim")) ? p.get("bd_dim") : dimensions.find((d) => !filtered.includes(d)) || dimensions[0];
  const cmp = p.get("bd_cmp") in COMPARE ? p.get("bd_cmp") : r.range === "data" ? "halves" : "previous";
  const update = (key) => (value) => { setParams({ [key]: value }, true); renderBreakdown(currentRange()); };
  const controls = el("p", { class: "breakdown-controls" },
    el("label", {}, "metric ", selectOf("bd-metric", metrics.map((m) => [m.name, m.label]), metric.name, update("bd_metric"))), " ",
    el("label", {}, "by ", selectOf("bd-dim", dimensions.map((d) => [d, d]), dim, update("bd_dim"))), " ",
    el("label", {}, "compared with ", selectOf("bd-cmp", Object.entries(COMPARE), cmp, update("bd_cmp"))));
  box.replaceChildren(el("h2", {}, "Breakdown"), controls,
    el("p", { class: "hint" }, sliceTerms().length ? `Click a slice to narrow the page's filter (${sliceTerms().join(", ")}) to it.` : "Click a slice to filter the whole page to it."));
  const q = sliceQuery(r);
  q.set("metric", metric.name); q.set("dimension", dim);
  const { base, cur } = periodsOf(r, cmp);
  const cq = new URLSearchParams(q);
  cq.set("start", iso(cur.start)); cq.set("end", iso(cur.end));
  cq.set("baseline_start", iso(base.start)); cq.set("baseline_end", iso(base.end));
  const [table, changes] = await Promise.all([api("slices/breakdown", q), api("slices/changes", cq)]);
  state.breakdown = table; state.changes = changes;
  const unit = metricUnit(table.kind);
  const rows = table.slices.map((s) => el("tr", { class: "clickable slice-row", "data-slice": s.value, onclick: () => chooseSlice(dim, s.value) },
    el("td", {}, s.value), el("td", { class: "num" }, fmt(s.metric, unit)),
    el("td", { class: "num" }, s.lower === null || s.lower === undefined ? "" : `[${fmt(s.lower, unit)}, ${fmt(s.upper, unit)}]`),
    el("td", { class: "num" }, table.kind === "sum" ? "" : s.n), el("td", { class: "num" }, s.interactions), el("td", { class: "num" }, fmt(s.share, "pct"))));
  const th = (label, title, num) => el("th", { class: num ? "num" : "", title: title || "" }, label);
  const breakdownTable = el("table", { id: "breakdown-table", class: "slices" },
    el("thead", {}, el("tr", {}, th("slice"), th(metric.label, "", true), th("95% interval", "Wilson score interval of a rate", true),
      th("n", "interactions the metric is computed over (a rate's denominator: e.g. answered ones for the hallucination rate)", true),
      th("interactions", "", true), th("share", "share of the range's interactions", true))),
    el("tbody", {}, ...(rows.length ? rows : [el("tr", {}, el("td", { colSpan: 6 }, "no interactions in this range"))])));
  const side = (period, figures) => `${fmt(figures.value, unit)} (${span(period)}, ${figures.interactions} interactions)`;
  const head = `What changed in ${metric.label.toLowerCase()} by ${dim}: ${side(base, changes.baseline)} → ${side(cur, changes.current)}: ${points(changes.change, table.kind)}`;
  const crow = changes.contributions.map((c) => el("tr", { class: "clickable change-row", "data-slice": c.value, onclick: () => chooseSlice(dim, c.value) },
    el("td", {}, c.value), el("td", { class: "num" }, fmt(c.baseline, unit)), el("td", { class: "num" }, fmt(c.current, unit)),
    el("td", { class: "num" }, `${fmt(c.baseline_share, "pct")} → ${fmt(c.current_share, "pct")}`),
    el("td", { class: "num" }, points(c.mix, table.kind)), el("td", { class: "num" }, points(c.rate, table.kind)),
    el("td", { class: "num contribution" }, points(c.contribution, table.kind))));
  const changesTable = el("table", { id: "changes-table", class: "slices" },
    el("thead", {}, el("tr", {}, th("slice"), th("before", "", true), th("after", "", true), th("share", "its share of the metric's n, before → after", true),
      th("mix shift", "the change from the slice's share of traffic moving", true), th("rate shift", "the change from the slice's own value moving", true),
      th("contribution", "mix + rate shift: the contributions add up to the overall change", true))),
    el("tbody", {}, ...(crow.length ? crow : [el("tr", {}, el("td", { colSpan: 7 },
      `nothing to compare: no interactions ${changes.baseline.interactions ? "in " + span(cur) : "in " + span(base)}; compare with another period`))])));
  box.append(breakdownTable, el("h3", { id: "changes-title" }, head),
    el("p", { class: "hint" }, "Each slice's contribution to the change, largest first: mix shift is its share of traffic moving, rate shift its own value moving."),
    changesTable);
}
