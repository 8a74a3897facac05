/* groundwatch dashboard: the Breakdown panel under the overview's charts (api/slices/...). A metric per
   slice of one dimension, and what changed against a baseline period, each slice's contribution split
   into mix shift and rate shift. Clicking a slice filters the whole page (?slice=DIMENSION=VALUE).
   Uses the helpers of dashboard.js ($, el, api, params, setParams, iso, fmt, currentRange, route);
   state in the address bar: bd_metric, bd_dim, bd_cmp. All text from the data is set with textContent. */
"use strict";

const COMPARE = { previous: "the period before", "1d": "1 day earlier", "7d": "7 days earlier" };

function sliceFilter() { return params().get("slice") || ""; }

function sliceQuery(r) {
  const p = params();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end) });
  if (p.get("app")) q.set("app", p.get("app"));
  p.getAll("model").forEach((m) => q.append("model", m));
  if (sliceFilter()) q.set("slice", sliceFilter());
  return q;
}

function baselineOf(r, cmp) {
  const shift = cmp === "1d" ? 86400 : cmp === "7d" ? 7 * 86400 : r.end - r.start;
  return { start: r.start - shift, end: r.end - shift };
}

function metricUnit(kind) { return kind === "rate" ? "pct" : kind === "sum" ? "int" : ""; }
function points(v, kind) {
  if (v === null || v === undefined) return "–";
  const s = kind === "rate" ? (100 * v).toFixed(1) + " pt" : kind === "sum" ? String(Math.round(v)) : v.toFixed(3);
  return (v > 0 ? "+" : "") + s;
}

function chooseSlice(dimension, value) {
  setParams({ slice: dimension + "=" + value }, true);
  route();
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
  const dim = dimensions.includes(p.get("bd_dim")) ? p.get("bd_dim") : dimensions[0];
  const cmp = p.get("bd_cmp") in COMPARE ? p.get("bd_cmp") : "previous";
  const update = (key) => (value) => { setParams({ [key]: value }, true); renderBreakdown(currentRange()); };
  const controls = el("p", { class: "breakdown-controls" },
    el("label", {}, "metric ", selectOf("bd-metric", metrics.map((m) => [m.name, m.label]), metric.name, update("bd_metric"))), " ",
    el("label", {}, "by ", selectOf("bd-dim", dimensions.map((d) => [d, d]), dim, update("bd_dim"))), " ",
    el("label", {}, "compared with ", selectOf("bd-cmp", Object.entries(COMPARE), cmp, update("bd_cmp"))));
  const filter = sliceFilter();
  const chip = filter ? el("p", { class: "slice-chip", id: "slice-chip" }, "Whole page filtered to ", el("strong", {}, filter), " ",
    el("button", { type: "button", id: "slice-clear", onclick: () => { setParams({ slice: null }, true); route(); } }, "clear ✕")) : null;
  box.replaceChildren(el("h2", {}, "Breakdown"), ...(chip ? [chip] : []), controls,
    el("p", { class: "hint" }, "Click a slice to filter the whole page to it."));
  const q = sliceQuery(r);
  q.set("metric", metric.name); q.set("dimension", dim);
  const base = baselineOf(r, cmp);
  const cq = new URLSearchParams(q); cq.set("baseline_start", iso(base.start)); cq.set("baseline_end", iso(base.end));
  const [table, changes] = await Promise.all([api("slices/breakdown", q), api("slices/changes", cq)]);
  state.breakdown = table; state.changes = changes;
  const unit = metricUnit(table.kind);
  const rows = table.slices.map((s) => el("tr", { class: "clickable slice-row", "data-slice": s.value, onclick: () => chooseSlice(dim, s.value) },
    el("td", {}, s.value), el("td", { class: "num" }, fmt(s.metric, unit)),
    el("td", { class: "num" }, s.lower === null || s.lower === undefined ? "" : `[${fmt(s.lower, unit)}, ${fmt(s.upper, unit)}]`),
    el("td", { class: "num" }, s.n), el("td", { class: "num" }, fmt(s.share, "pct"))));
  const breakdownTable = el("table", { id: "breakdown-table" },
    el("thead", {}, el("tr", {}, ...["slice", metric.label, "95% interval", "n", "share"].map((c) => el("th", {}, c)))),
    el("tbody", {}, ...(rows.length ? rows : [el("tr", {}, el("td", { colSpan: 5 }, "no interactions in this range"))])));
  const head = `What changed: ${fmt(changes.baseline.value, unit)} (${COMPARE[cmp]}, ${changes.baseline.interactions} interactions) → ${fmt(changes.current.value, unit)} (${changes.current.interactions}): ${points(changes.change, table.kind)}`;
  const crow = changes.contributions.map((c) => el("tr", { class: "clickable change-row", "data-slice": c.value, onclick: () => chooseSlice(dim, c.value) },
    el("td", {}, c.value), el("td", { class: "num" }, fmt(c.baseline, unit)), el("td", { class: "num" }, fmt(c.current, unit)),
    el("td", { class: "num" }, `${fmt(c.baseline_share, "pct")} → ${fmt(c.current_share, "pct")}`),
    el("td", { class: "num" }, points(c.mix, table.kind)), el("td", { class: "num" }, points(c.rate, table.kind)),
    el("td", { class: "num contribution" }, points(c.contribution, table.kind))));
  const changesTable = el("table", { id: "changes-table" },
    el("thead", {}, el("tr", {}, ...["slice", "before", "after", "share", "mix shift", "rate shift", "contribution"].map((c) => el("th", {}, c)))),
    el("tbody", {}, ...(crow.length ? crow : [el("tr", {}, el("td", { colSpan: 7 }, "nothing to compare: no data in one of the periods"))])));
  box.append(breakdownTable, el("h3", { id: "changes-title" }, head), changesTable);
}
