/* Overview page: a chart per metric of the catalogue (/api/options serves it: schemas/metrics.py), then
   the two that are not metrics (judge latency, dead letters), drawn with uPlot; the alerts as markers;
   the Breakdown panel below (slices.js). Clicking a point opens its bucket's interactions. */
import { $, el } from "./dom.js";
import { dateRange, fmt, iso, metricUnit, plural, usdAxis } from "./format.js";
import { go } from "./router.js";
import { renderBreakdown, sliceChip, sliceTerms } from "./slices.js";
import { api, currentRange, params, state } from "./state.js";

const { uPlot } = globalThis; // static/vendor/uplot, a classic script loaded before the modules

const PALETTE = ["#2f5bd3", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#0b7285", "#e67700", "#495057"];
let drawnRange = { start: 0, end: 0 }; // the range the charts were drawn for (Unix seconds)

function metricChart(m) {
  const rate = m.kind === "rate";
  return {
    id: m.name,
    metric: m.name,
    band: rate,
    share: m.kind === "rate" || (m.kind === "mean" && m.unit === ""), // a share or a 0-1 score: axis 0-1
    title: rate ? `${m.label} (95% Wilson band)` : m.unit === "USD" ? `${m.label} (USD)` : m.label,
    unit: metricUnit(m),
  };
}
function extraCharts() {
  return [
    { id: "latency", title: "Judge latency p50 / p95 (ms)", latency: true, unit: "int" },
    { id: "dead_letters", title: "Dead letters (all stages, by failure time)", deadLetters: true, unit: "int" },
  ];
}
function chartDefs(options) {
  return [...options.metrics.map(metricChart), ...extraCharts()];
}
export function seriesName(s) {
  return `${s.app} / ${s.model}`;
}
function colour(i) {
  return PALETTE[i % PALETTE.length];
}

function deadLetterData(overview, times) {
  const counts = new Map(times.map((t) => [t, 0]));
  const dlTimes = [...new Set([...times, ...overview.dead_letters.map((d) => d.t)])].sort((a, b) => a - b);
  for (const t of dlTimes) counts.set(t, counts.get(t) || 0);
  for (const d of overview.dead_letters) counts.set(d.t, counts.get(d.t) + d.count);
  return {
    times: dlTimes,
    columns: [dlTimes.map((t) => counts.get(t))],
    labels: [{ label: "dead letters", colour: "#c01048" }],
  };
}

function chartData(def, overview) {
  const times = [...new Set(overview.series.flatMap((s) => s.t))].sort((a, b) => a - b);
  if (def.deadLetters) return deadLetterData(overview, times);
  const columns = [];
  const labels = [];
  overview.series.forEach((s, i) => {
    const index = new Map(s.t.map((t, j) => [t, j]));
    const pick = (arr) => times.map((t) => (index.has(t) ? arr[index.get(t)] : null));
    const add = (column, label) => {
      columns.push(column);
      labels.push({ colour: colour(i), series: s, ...label });
    };
    if (def.latency) {
      add(pick(s.latency_p50_ms), { label: `${seriesName(s)} p50` });
      add(pick(s.latency_p95_ms), { label: `${seriesName(s)} p95`, dash: [4, 3] });
      return;
    }
    if (def.band) {
      add(pick(s.lower[def.metric]), { label: `${seriesName(s)} lower`, bandEdge: true });
      add(pick(s.upper[def.metric]), { label: `${seriesName(s)} upper`, bandEdge: true });
    }
    add(pick(s.values[def.metric]), { label: seriesName(s), main: true });
    const line = correctedLine(def.metric, s);
    if (line?.status === "ok") {
      const name = `${seriesName(s)} corrected`;
      const fill = `${colour(i)}1f`;
      add(pick(line.lower), { label: `${name} lower`, bandEdge: true, fill, corrected: true });
      add(pick(line.upper), { label: `${name} upper`, bandEdge: true, fill, corrected: true });
      add(pick(line.value), { label: name, dash: [6, 4], corrected: true });
    }
  });
  return { times, columns, labels };
}

/* ---- the corrected rate beside a flagged rate (api/overview: series[].corrected[metric]) ---------- */
function correctedLine(metric, s) {
  return s.corrected?.[metric] || null;
}
function correctedText(line) {
  if (line.status !== "ok") return line.note;
  const ba =
    line.balanced_accuracy === null
      ? ""
      : `, judge balanced accuracy ${fmt(line.balanced_accuracy, "pct")} on ${fmt(line.cases, "int")} labels`;
  return `corrected ${fmt(line.corrected, "pct")} [${fmt(line.low, "pct")}, ${fmt(line.high, "pct")}] over the range (flagged ${fmt(line.flagged_rate, "pct")})${ba}`;
}
function correctedNotes(metric, overview) {
  const lines = overview.series.map((s, i) => [s, i, correctedLine(metric, s)]).filter(([, , line]) => line);
  if (!lines.length) return null;
  const box = el("div", { class: "corrected-notes" });
  if (lines.some(([, , line]) => line.status === "ok")) {
    box.append(
      el(
        "p",
        { class: "hint" },
        "dashed: the rate corrected for the judge's errors measured on people's labels, with its 95% band",
      ),
    );
  }
  for (const [s, i, line] of lines) {
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = colour(i);
    box.append(
      el(
        "p",
        { class: "corrected-note", "data-series": seriesName(s), "data-status": line.status },
        swatch,
        `${seriesName(s)}: ${correctedText(line)}`,
      ),
    );
  }
  return box;
}

function placeMarkers(u, alerts) {
  for (const m of u.over.querySelectorAll(".alert-marker")) m.remove();
  let labelsEnd = Number.NEGATIVE_INFINITY; // the right edge of the last label drawn, in the chart's pixels
  const sorted = [...alerts].sort((a, b) => Date.parse(a.window_end) - Date.parse(b.window_end));
  for (const a of sorted) {
    const t = Date.parse(a.window_end) / 1000;
    const x = u.valToPos(t, "x");
    if (!(x >= 0 && x <= u.over.clientWidth)) continue;
    const alertState = a.state || "firing";
    const against =
      a.baseline !== null && a.baseline !== undefined ? `baseline ${fmt(a.baseline)}` : `${a.op} ${a.threshold}`;
    const where = `${a.app} / ${a.model}${a.slice ? ` [${a.slice}]` : ""}`;
    const title = `${alertState}: ${a.rule}: ${a.metric} ${fmt(a.value)} (${against}) (${where}), window ending ${a.window_end}`;
    const marker = el("div", {
      class: `alert-marker${alertState === "resolved" ? " resolved" : ""}`,
      title,
      "data-t": String(t),
      "data-rule": a.rule,
      "data-app": a.app,
      "data-model": a.model,
      "data-state": alertState,
    });
    marker.style.left = `${x}px`;
    u.over.append(marker);
    // a label near the right edge reads leftwards from its marker, inside the chart; a label that would
    // cover the one before it is left out (the marker's tooltip still names its rule)
    const icon = alertState === "resolved" ? "✓ " : "⚠ ";
    const label = el("span", { class: x > u.over.clientWidth / 2 ? "leftwards" : "" }, icon + a.rule);
    marker.append(label);
    const origin = u.over.getBoundingClientRect().left;
    const box = label.getBoundingClientRect();
    if (box.left - origin < labelsEnd + 4) label.remove();
    else labelsEnd = box.right - origin;
  }
}

/* One chart of the overview in `container`; a chart with nothing to draw goes to `fold` instead, saying
   why (the charts a selection has no data for stay out of the way, folded under the others). */
function drawChart(def, overview, container, fold) {
  const { times, columns, labels } = chartData(def, overview);
  const card = el(
    "div",
    { class: "chart", id: `chart-${def.id}`, "data-points": String(times.length) },
    el("h3", {}, def.title),
  );
  container.append(card);
  const anyValue = columns.some((c) => c.some((v) => v !== null && v !== undefined));
  const empty = (text) => {
    card.append(el("div", { class: "empty" }, text));
    card.dataset.points = "0";
    fold.append(card);
  };
  if (def.deadLetters && overview.slice) {
    empty("a dead letter carries no dimensions: clear the slice filter to see them");
    return;
  }
  if (!times.length || !anyValue) {
    empty(def.latency ? "no judge calls in this range (the lexical judge makes none)" : "no data in this range");
    return;
  }
  const unit = def.unit;
  const series = [{}].concat(
    labels.map((l) => ({
      label: l.label,
      stroke: l.colour,
      width: l.bandEdge ? 0 : 2,
      dash: l.dash,
      show: true,
      points: { show: times.length < 60, size: 5 },
      spanGaps: false,
      value: (_u, v) => fmt(v, unit),
    })),
  );
  const bands = [];
  labels.forEach((l, i) => {
    if (l.bandEdge && labels[i + 1]?.bandEdge) bands.push({ series: [i + 2, i + 1], fill: l.fill || `${l.colour}33` });
  });
  const opts = {
    width: Math.max(320, card.clientWidth - 18),
    height: 220,
    series,
    bands,
    legend: { show: false },
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"), // the time axis in UTC, as the rest of the page
    scales: { x: { time: true, range: [drawnRange.start, drawnRange.end] }, y: def.share ? { range: [0, 1] } : {} },
    axes: [{}, { values: (_u, vals) => vals.map((v) => (unit === "usd" ? usdAxis(v) : fmt(v, unit))), size: 64 }],
    cursor: { focus: { prox: 24 } },
    hooks: { draw: [(u) => placeMarkers(u, overview.alerts)] },
  };
  const u = new uPlot(opts, [times, ...columns], card);
  u.over.addEventListener("click", () => openPoint(u, labels, times, overview));
  state.charts[def.id] = { plot: u, labels, times };
  const notes = def.metric ? correctedNotes(def.metric, overview) : null;
  if (notes) card.append(notes);
}

function openPoint(u, labels, times, overview) {
  const idx = u.cursor.idx;
  if (idx === null || idx === undefined) return;
  const top = u.cursor.top;
  let best = null;
  labels.forEach((l, i) => {
    if (!l.series || l.bandEdge) return;
    const v = u.data[i + 1][idx];
    if (v === null || v === undefined) return;
    const d = Math.abs(u.valToPos(v, "y") - top);
    if (!best || d < best.d) best = { d, series: l.series };
  });
  if (!best) return;
  const start = times[idx];
  go({
    view: "bucket",
    bapp: best.series.app,
    bmodel: best.series.model,
    bstart: iso(start),
    bend: iso(start + overview.step_seconds),
  });
}

function renderLegend(overview) {
  $("legend").replaceChildren(
    ...overview.series.map((s, i) => {
      const swatch = el("span", { class: "swatch" });
      swatch.style.background = colour(i);
      return el("span", {}, swatch, seriesName(s));
    }),
  );
}

export async function loadOverview() {
  const r = currentRange();
  const p = params();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end) });
  if (p.get("app")) q.set("app", p.get("app"));
  for (const m of p.getAll("model")) q.append("model", m);
  if (p.get("rollup")) q.set("rollup", p.get("rollup"));
  const terms = sliceTerms();
  for (const t of terms) q.append("slice", t); // a slice: its series from the interactions
  const overview = await api(terms.length ? "slices/overview" : "overview", q);
  state.overview = overview;
  drawnRange = r;
  for (const c of Object.values(state.charts)) c.plot.destroy();
  state.charts = {};
  const container = $("charts");
  container.replaceChildren();
  const total = overview.series.reduce((n, s) => n + s.values.interactions.reduce((a, b) => a + (b || 0), 0), 0);
  $("overview-filter").replaceChildren(...[sliceChip()].filter(Boolean));
  $("overview-summary").textContent = [
    dateRange(r.start, r.end),
    `rollup: ${overview.rollup} (${fmt(overview.step_seconds, "int")} s buckets)`,
    plural(total, "interaction"),
    plural(overview.alerts.length, "alert"),
    "click a point to see its interactions",
  ].join(" · ");
  renderLegend(overview);
  const fold = el("div", { class: "charts-folded" });
  for (const def of chartDefs(state.options)) drawChart(def, overview, container, fold);
  if (fold.children.length) {
    const titles = [...fold.querySelectorAll("h3")].map((h) => h.textContent).join(", ");
    container.append(
      el(
        "details",
        { id: "charts-empty" },
        el("summary", {}, `${plural(fold.children.length, "chart")} with nothing to draw in this range: ${titles}`),
        fold,
      ),
    );
  }
  await renderBreakdown(r);
}
