/* The Breakdown panel under the overview's charts (api/slices/...). A metric per slice of one dimension,
   and what changed against a baseline period, each slice's contribution split into mix shift and rate
   shift. Clicking a slice filters the whole page: the page's slice filter is repeated key:value terms
   (?slice=app:wiki-qa&slice=prompt_version:v2, schemas/slice_filter.py), read by the charts, the
   drill-down, the Breakdown and Documents. The filter shows above the charts (sliceChip).
   State in the address bar: bd_metric, bd_dim, bd_cmp. All text from the data is set with textContent. */
import { $, el } from "./dom.js";
import { dateRange, fmt, iso, metricUnit, points } from "./format.js";
import { go } from "./router.js";
import { api, currentRange, params, setParams, state } from "./state.js";
import { newTable } from "./table.js";

const COMPARE = {
  previous: "the period before",
  "1d": "1 day earlier",
  "7d": "7 days earlier",
  halves: "the range's first half → its second half",
};

export function sliceTerms() {
  return params().getAll("slice");
}
export function termKey(term) {
  return term.split(":")[0];
}
/* A slice filter as the API returns it ({app, model, dimensions}) in words: its terms, or all traffic. */
export function filterText(f) {
  const terms = [
    ...["app", "model"].filter((k) => f?.[k]).map((k) => `${k}:${f[k]}`),
    ...Object.entries(f?.dimensions || {}).map(([k, v]) => `${k}:${v}`),
  ];
  return terms.join(", ") || "all traffic";
}
/* An address from before the filter was key:value terms (slice=DIMENSION=VALUE) still opens its slice. */
export function upgradeSliceAddress() {
  const terms = sliceTerms();
  const upgraded = terms.map((t) => (/^[A-Za-z0-9_.-]+=/.test(t) ? t.replace("=", ":") : t));
  if (upgraded.some((t, i) => t !== terms[i])) setParams({ slice: upgraded });
}

function sliceQuery(r) {
  const p = params();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end) });
  if (p.get("app")) q.set("app", p.get("app"));
  for (const m of p.getAll("model")) q.append("model", m);
  for (const t of sliceTerms()) q.append("slice", t);
  return q;
}

/* The two periods "what changed" compares: the range against an earlier one of its length, or (halves)
   the range's first half against its second, the default for "all data", before which nothing is stored. */
export function periodsOf(r, cmp) {
  if (cmp === "halves") {
    const mid = Math.floor((r.start + (r.end - r.start) / 2) / 60) * 60;
    return { base: { start: r.start, end: mid }, cur: { start: mid, end: r.end } };
  }
  const shift = cmp === "1d" ? 86400 : cmp === "7d" ? 7 * 86400 : r.end - r.start;
  return { base: { start: r.start - shift, end: r.end - shift }, cur: { start: r.start, end: r.end } };
}
function span(p) {
  return dateRange(p.start, p.end);
}

/* Narrow the page to a slice (another value of the same dimension replaces its term); the Breakdown then
   goes on by another dimension (by its own it would show the one value left). */
function chooseSlice(dimension, value) {
  go({ slice: [...sliceTerms().filter((t) => termKey(t) !== dimension), `${dimension}:${value}`], bd_dim: null });
}

/* The filter, above the charts: what the whole page shows, and the way back. */
export function sliceChip() {
  const terms = sliceTerms();
  if (!terms.length) return null;
  return el(
    "p",
    { class: "slice-chip", id: "slice-chip" },
    "Whole page filtered to ",
    el("strong", {}, terms.join(", ")),
    " (charts, drill-down, Breakdown and Documents; dead letters carry no dimensions) ",
    el("button", { type: "button", id: "slice-clear", onclick: () => go({ slice: null }) }, "clear ✕"),
  );
}

function selectOf(id, options, chosen, onChange) {
  const select = el(
    "select",
    { id },
    ...options.map(([value, label]) => el("option", { value, selected: value === chosen }, label)),
  );
  select.addEventListener("change", () => onChange(select.value));
  return select;
}

/* What a metric's slices count: interactions, or conversations (a conversation metric). */
const countedIn = (metric) => (metric.over === "conversation" ? "conversations" : "interactions");

function breakdownTable(table, metric, unit, dim) {
  const noun = countedIn(metric);
  return newTable(
    { id: "breakdown-table", class: "slices" },
    {
      columns: [
        { label: "slice", cell: (s) => s.value },
        { label: metric.label, num: true, cell: (s) => fmt(s.metric, unit) },
        {
          label: "95% interval",
          title: "Wilson score interval of a rate",
          num: true,
          cell: (s) =>
            s.lower === null || s.lower === undefined ? "" : `[${fmt(s.lower, unit)}, ${fmt(s.upper, unit)}]`,
        },
        {
          label: "n",
          title: `${noun} the metric is computed over (a rate's denominator: e.g. answered ones for the hallucination rate)`,
          num: true,
          cell: (s) => (table.kind === "sum" ? "" : fmt(s.n, "int")),
        },
        { label: noun, num: true, cell: (s) => fmt(s.interactions, "int") },
        { label: "share", title: `share of the range's ${noun}`, num: true, cell: (s) => fmt(s.share, "pct") },
      ],
      rows: table.slices,
      rowAttrs: (s) => ({
        class: "clickable slice-row",
        "data-slice": s.value,
        onclick: () => chooseSlice(dim, s.value),
      }),
      empty: `no ${noun} in this range`,
    },
  );
}

function changesTable(changes, kind, unit, dim, periods) {
  const nothing = changes.baseline.interactions ? `in ${span(periods.cur)}` : `in ${span(periods.base)}`;
  return newTable(
    { id: "changes-table", class: "slices" },
    {
      columns: [
        { label: "slice", cell: (c) => c.value },
        { label: "before", num: true, cell: (c) => fmt(c.baseline, unit) },
        { label: "after", num: true, cell: (c) => fmt(c.current, unit) },
        {
          label: "share",
          title: "its share of the metric's n, before → after",
          num: true,
          cell: (c) => `${fmt(c.baseline_share, "pct")} → ${fmt(c.current_share, "pct")}`,
        },
        {
          label: "mix shift",
          title: "the change from the slice's share of traffic moving",
          num: true,
          cell: (c) => points(c.mix, kind),
        },
        {
          label: "rate shift",
          title: "the change from the slice's own value moving",
          num: true,
          cell: (c) => points(c.rate, kind),
        },
        {
          label: "contribution",
          title: "mix + rate shift: the contributions add up to the overall change",
          num: true,
          cellClass: () => "contribution",
          cell: (c) => points(c.contribution, kind),
        },
      ],
      rows: changes.contributions,
      rowAttrs: (c) => ({
        class: "clickable change-row",
        "data-slice": c.value,
        onclick: () => chooseSlice(dim, c.value),
      }),
      empty: `nothing to compare: no interactions ${nothing}; compare with another period`,
    },
  );
}

export async function renderBreakdown(r) {
  const box = $("breakdown");
  const p = params();
  const metrics = state.options.metrics || [];
  const metric =
    metrics.find((m) => m.name === p.get("bd_metric")) ||
    metrics.find((m) => m.name === "hallucination_rate") ||
    metrics[0];
  const { dimensions } = await api("slices/dimensions", new URLSearchParams({ start: iso(r.start), end: iso(r.end) }));
  const filtered = sliceTerms().map(termKey);
  const dim = dimensions.includes(p.get("bd_dim"))
    ? p.get("bd_dim")
    : dimensions.find((d) => !filtered.includes(d)) || dimensions[0];
  const cmp = p.get("bd_cmp") in COMPARE ? p.get("bd_cmp") : r.range === "data" ? "halves" : "previous";
  const update = (key) => (value) => {
    setParams({ [key]: value }, true);
    renderBreakdown(currentRange());
  };
  const controls = el(
    "p",
    { class: "breakdown-controls" },
    el(
      "label",
      {},
      "metric ",
      selectOf(
        "bd-metric",
        metrics.map((m) => [m.name, m.label]),
        metric.name,
        update("bd_metric"),
      ),
    ),
    " ",
    el(
      "label",
      {},
      "by ",
      selectOf(
        "bd-dim",
        dimensions.map((d) => [d, d]),
        dim,
        update("bd_dim"),
      ),
    ),
    " ",
    el("label", {}, "compared with ", selectOf("bd-cmp", Object.entries(COMPARE), cmp, update("bd_cmp"))),
  );
  const terms = sliceTerms();
  box.replaceChildren(
    el("h2", {}, "Breakdown"),
    controls,
    el(
      "p",
      { class: "hint" },
      terms.length
        ? `Click a slice to narrow the page's filter (${terms.join(", ")}) to it.`
        : "Click a slice to filter the whole page to it.",
    ),
  );
  const q = sliceQuery(r);
  q.set("metric", metric.name);
  q.set("dimension", dim);
  const periods = periodsOf(r, cmp);
  const { base, cur } = periods;
  const cq = new URLSearchParams(q);
  cq.set("start", iso(cur.start));
  cq.set("end", iso(cur.end));
  cq.set("baseline_start", iso(base.start));
  cq.set("baseline_end", iso(base.end));
  const [table, changes] = await Promise.all([api("slices/breakdown", q), api("slices/changes", cq)]);
  state.breakdown = table;
  state.changes = changes;
  const unit = metricUnit({ kind: table.kind, unit: metric.unit });
  const side = (period, figures) =>
    `${fmt(figures.value, unit)} (${span(period)}, ${fmt(figures.interactions, "int")} ${countedIn(metric)})`;
  const head = `What changed in ${metric.label.toLowerCase()} by ${dim}: ${side(base, changes.baseline)} → ${side(cur, changes.current)}: ${points(changes.change, table.kind)}`;
  box.append(
    breakdownTable(table, metric, unit, dim),
    el("h3", { id: "changes-title" }, head),
    el(
      "p",
      { class: "hint" },
      "Each slice's contribution to the change, largest first: mix shift is its share of traffic moving, rate shift its own value moving.",
    ),
    changesTable(changes, table.kind, unit, dim, periods),
  );
}
