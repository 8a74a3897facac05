/* groundwatch dashboard: reads the JSON API beside it (api/...), draws with uPlot, keeps its state in
   the address bar so a link shows the same view. All text from the data is set with textContent. */
"use strict";

const PALETTE = ["#2f5bd3", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#0b7285", "#e67700", "#495057"];
const RANGES = { "1h": 3600, "24h": 86400, "7d": 7 * 86400, "30d": 30 * 86400 };

const state = { options: null, overview: null, charts: {}, timer: null, loading: false };
let overview_range = { start: 0, end: 0 }; // the range the charts were drawn for (Unix seconds)
window.groundwatch = state; // read by the browser tests

function $(id) { return document.getElementById(id); }
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return node;
}
function params() { return new URLSearchParams(location.search); }
function setParams(update, push) {
  const p = params();
  for (const [k, v] of Object.entries(update)) {
    p.delete(k);
    if (Array.isArray(v)) v.forEach((x) => p.append(k, x));
    else if (v !== null && v !== undefined && v !== "") p.set(k, v);
  }
  const url = "?" + p.toString();
  if (push) history.pushState(null, "", url); else history.replaceState(null, "", url);
}
function iso(sec) { return new Date(sec * 1000).toISOString().replace(".000Z", "Z"); }
function fmt(v, unit) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (unit === "pct") return (100 * v).toFixed(1) + "%";
  if (unit === "usd") return "$" + v.toFixed(4);
  if (unit === "int") return String(Math.round(v));
  return v.toFixed(3);
}
function status(text, error) { const s = $("status"); s.textContent = text; s.classList.toggle("error", !!error); }

async function api(path, query) {
  const url = "api/" + path + (query ? "?" + query.toString() : "");
  const response = await fetch(url, { credentials: "same-origin" });
  if (!response.ok) {
    let reason = response.statusText;
    try { const body = await response.json(); reason = body.error + (body.details && body.details.length ? ": " + body.details.map((d) => d.field + " " + d.reason).join("; ") : ""); } catch (e) { /* not JSON */ }
    throw new Error(`${path}: ${response.status} ${reason}`);
  }
  return response.json();
}

/* ---- time range ------------------------------------------------------------------------------ */
function currentRange() {
  const p = params();
  const range = p.get("range") || "data";
  if (range === "custom" && p.get("start") && p.get("end")) {
    return { start: Date.parse(p.get("start")) / 1000, end: Date.parse(p.get("end")) / 1000, range };
  }
  if (range in RANGES) {
    const end = Math.ceil(Date.now() / 60000) * 60;
    return { start: end - RANGES[range], end, range };
  }
  // "data": everything stored (the demo's simulated history lies in the past)
  const series = (state.options && state.options.series) || [];
  if (!series.length) { const end = Math.ceil(Date.now() / 60000) * 60; return { start: end - 86400, end, range: "data" }; }
  const first = Math.min(...series.map((s) => Date.parse(s.first) / 1000));
  const last = Math.max(...series.map((s) => Date.parse(s.last) / 1000));
  return { start: Math.floor(first / 3600) * 3600, end: Math.ceil(last / 3600) * 3600 + 3600, range: "data" };
}
function toLocalInput(sec) { return new Date(sec * 1000).toISOString().slice(0, 16); }

/* ---- filters ---------------------------------------------------------------------------------- */
function renderFilters() {
  const p = params();
  const series = state.options.series;
  const apps = [...new Set(series.map((s) => s.app))].sort();
  const app = p.get("app") || "";
  const appSelect = $("app");
  appSelect.replaceChildren(el("option", { value: "" }, "all apps"), ...apps.map((a) => el("option", { value: a, selected: a === app }, a)));
  const models = [...new Set(series.filter((s) => !app || s.app === app).map((s) => s.model))].sort();
  const chosen = p.getAll("model");
  const box = $("models");
  box.replaceChildren(el("legend", {}, "Models"));
  for (const m of models) {
    const input = el("input", { type: "checkbox", value: m, checked: !chosen.length || chosen.includes(m) });
    input.addEventListener("change", () => {
      const ticked = [...box.querySelectorAll("input:checked")].map((i) => i.value);
      setParams({ model: ticked.length === models.length ? [] : ticked }, true);
      load();
    });
    box.append(el("label", {}, input, " " + m));
  }
  const r = currentRange();
  document.querySelectorAll("#ranges button").forEach((b) => b.classList.toggle("active", b.dataset.range === r.range));
  $("from").value = toLocalInput(r.start);
  $("to").value = toLocalInput(r.end);
  $("auto").checked = p.get("auto") === "1";
}

/* ---- overview charts -------------------------------------------------------------------------- */
/* One chart per metric of the catalogue (/api/options serves it: schemas/metrics.py), then the two that
   are not metrics: judge latency and dead letters. */
const UNIT_FORMAT = { "": "", count: "int", tokens: "int", USD: "usd" };
function metricChart(m) {
  const rate = m.kind === "rate";
  const share = m.kind !== "sum";
  return {
    id: m.name, metric: m.name, band: rate, share,
    title: rate ? `${m.label} (95% Wilson band)` : m.unit === "USD" ? `${m.label} (USD)` : m.label,
    unit: rate ? "pct" : UNIT_FORMAT[m.unit] || "",
  };
}
function extraCharts() {
  return [
    { id: "latency", title: "Judge latency p50 / p95 (ms)", latency: true, unit: "" },
    { id: "dead_letters", title: "Dead letters (all stages, by failure time)", deadLetters: true, unit: "int" },
  ];
}
function chartDefs(options) { return [...options.metrics.map(metricChart), ...extraCharts()]; }
function seriesName(s) { return `${s.app} / ${s.model}`; }
function colour(i) { return PALETTE[i % PALETTE.length]; }

function chartData(def, overview) {
  const times = [...new Set(overview.series.flatMap((s) => s.t))].sort((a, b) => a - b);
  if (def.deadLetters) {
    const counts = new Map(times.map((t) => [t, 0]));
    const dlTimes = [...new Set([...times, ...overview.dead_letters.map((d) => d.t)])].sort((a, b) => a - b);
    dlTimes.forEach((t) => counts.set(t, counts.get(t) || 0));
    overview.dead_letters.forEach((d) => counts.set(d.t, counts.get(d.t) + d.count));
    return { times: dlTimes, columns: [dlTimes.map((t) => counts.get(t))], labels: [{ label: "dead letters", colour: "#c01048" }] };
  }
  const columns = []; const labels = [];
  overview.series.forEach((s, i) => {
    const index = new Map(s.t.map((t, j) => [t, j]));
    const pick = (arr) => times.map((t) => (index.has(t) ? arr[index.get(t)] : null));
    if (def.latency) {
      columns.push(pick(s.latency_p50_ms)); labels.push({ label: seriesName(s) + " p50", colour: colour(i), series: s });
      columns.push(pick(s.latency_p95_ms)); labels.push({ label: seriesName(s) + " p95", colour: colour(i), dash: [4, 3], series: s });
      return;
    }
    if (def.band) {
      columns.push(pick(s.lower[def.metric])); labels.push({ label: seriesName(s) + " lower", colour: colour(i), bandEdge: true, series: s });
      columns.push(pick(s.upper[def.metric])); labels.push({ label: seriesName(s) + " upper", colour: colour(i), bandEdge: true, series: s });
    }
    columns.push(pick(s.values[def.metric])); labels.push({ label: seriesName(s), colour: colour(i), series: s, main: true });
    correctedColumns(def.metric, s, colour(i), pick, columns, labels);
  });
  return { times, columns, labels };
}

/* ---- the corrected rate beside a flagged rate (api/overview: series[].corrected[metric]) ---------- */
function correctedLine(metric, s) { return (s.corrected || {})[metric] || null; }
function correctedColumns(metric, s, c, pick, columns, labels) {
  const line = correctedLine(metric, s);
  if (!line || line.status !== "ok") return;
  const name = seriesName(s) + " corrected";
  columns.push(pick(line.lower)); labels.push({ label: name + " lower", colour: c, bandEdge: true, fill: c + "1f", series: s, corrected: true });
  columns.push(pick(line.upper)); labels.push({ label: name + " upper", colour: c, bandEdge: true, fill: c + "1f", series: s, corrected: true });
  columns.push(pick(line.value)); labels.push({ label: name, colour: c, dash: [6, 4], series: s, corrected: true });
}
function correctedText(line) {
  if (line.status !== "ok") return line.note;
  const ba = line.balanced_accuracy === null ? "" : `, judge balanced accuracy ${fmt(line.balanced_accuracy, "pct")} on ${line.cases} labels`;
  return `corrected ${fmt(line.corrected, "pct")} [${fmt(line.low, "pct")}, ${fmt(line.high, "pct")}] over the range (flagged ${fmt(line.flagged_rate, "pct")})${ba}`;
}
function correctedNotes(metric, overview) {
  const lines = overview.series.map((s, i) => [s, i, correctedLine(metric, s)]).filter(([, , line]) => line);
  if (!lines.length) return null;
  const drawn = lines.some(([, , line]) => line.status === "ok");
  const box = el("div", { class: "corrected-notes" });
  if (drawn) box.append(el("p", { class: "hint" }, "dashed: the rate corrected for the judge's errors measured on people's labels, with its 95% band"));
  for (const [s, i, line] of lines) {
    const item = el("p", { class: "corrected-note", "data-series": seriesName(s), "data-status": line.status }, el("span", { class: "swatch" }), `${seriesName(s)}: ${correctedText(line)}`);
    item.firstChild.style.background = colour(i);
    box.append(item);
  }
  return box;
}

function placeMarkers(u, alerts) {
  u.over.querySelectorAll(".alert-marker").forEach((m) => m.remove());
  let lastLabelled = -Infinity;
  const sorted = [...alerts].sort((a, b) => Date.parse(a.window_end) - Date.parse(b.window_end));
  for (const a of sorted) {
    const t = Date.parse(a.window_end) / 1000;
    const x = u.valToPos(t, "x");
    if (!(x >= 0 && x <= u.over.clientWidth)) continue;
    const state = a.state || "firing";
    const against = a.baseline !== null && a.baseline !== undefined ? `baseline ${fmt(a.baseline)}` : `${a.op} ${a.threshold}`;
    const title = `${state}: ${a.rule}: ${a.metric} ${fmt(a.value)} (${against}) (${a.app} / ${a.model}${a.slice ? ` [${a.slice}]` : ""}), window ending ${a.window_end}`;
    const marker = el("div", { class: "alert-marker" + (state === "resolved" ? " resolved" : ""), title, "data-t": String(t), "data-rule": a.rule, "data-app": a.app, "data-model": a.model, "data-state": state });
    if (x - lastLabelled > 90) {
      // a label near the right edge reads leftwards from its marker, inside the chart
      marker.append(el("span", { class: x > u.over.clientWidth / 2 ? "leftwards" : "" }, (state === "resolved" ? "✓ " : "⚠ ") + a.rule));
      lastLabelled = x;
    }
    marker.style.left = x + "px";
    u.over.append(marker);
  }
}

function drawChart(def, overview, container) {
  const { times, columns, labels } = chartData(def, overview);
  const card = el("div", { class: "chart", id: "chart-" + def.id, "data-points": String(times.length) }, el("h3", {}, def.title));
  container.append(card);
  const anyValue = columns.some((c) => c.some((v) => v !== null && v !== undefined));
  if (def.deadLetters && overview.slice) {
    card.append(el("div", { class: "empty" }, "a dead letter carries no dimensions: clear the slice filter to see them"));
    card.dataset.points = "0";
    return;
  }
  if (!times.length || !anyValue) {
    card.append(el("div", { class: "empty" }, def.latency ? "no judge calls in this range (the lexical judge makes none)" : "no data in this range"));
    card.dataset.points = "0";
    return;
  }
  const unit = def.unit;
  const series = [{}].concat(labels.map((l) => ({
    label: l.label, stroke: l.colour, width: l.bandEdge ? 0 : 2, dash: l.dash, show: true,
    points: { show: times.length < 60, size: 5 }, spanGaps: false,
    value: (u, v) => fmt(v, unit),
  })));
  const bands = [];
  labels.forEach((l, i) => { if (l.bandEdge && labels[i + 1] && labels[i + 1].bandEdge) bands.push({ series: [i + 2, i + 1], fill: l.fill || l.colour + "33" }); });
  const opts = {
    width: Math.max(320, card.clientWidth - 18), height: 220,
    series, bands, legend: { show: false },
    scales: { x: { time: true, range: [overview_range.start, overview_range.end] }, y: def.share ? { range: [0, 1] } : {} },
    axes: [{}, { values: (u, vals) => vals.map((v) => (unit === "usd" ? "$" + v.toPrecision(2) : fmt(v, unit))), size: 64 }],
    cursor: { focus: { prox: 24 } },
    hooks: { draw: [(u) => placeMarkers(u, overview.alerts)] },
  };
  const u = new uPlot(opts, [times, ...columns], card);
  u.over.addEventListener("click", () => openPoint(u, def, labels, times, overview));
  state.charts[def.id] = { plot: u, labels, times };
  const notes = def.metric ? correctedNotes(def.metric, overview) : null;
  if (notes) card.append(notes);
}
function openPoint(u, def, labels, times, overview) {
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
  setParams({ view: "bucket", bapp: best.series.app, bmodel: best.series.model, bstart: iso(start), bend: iso(start + overview.step_seconds) }, true);
  route();
}

function renderLegend(overview) {
  $("legend").replaceChildren(...overview.series.map((s, i) => el("span", {}, el("span", { class: "swatch", style: "" }), seriesName(s))));
  $("legend").querySelectorAll(".swatch").forEach((sw, i) => { sw.style.background = colour(i); });
}

async function loadOverview() {
  const r = currentRange();
  const p = params();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end) });
  if (p.get("app")) q.set("app", p.get("app"));
  p.getAll("model").forEach((m) => q.append("model", m));
  if (p.get("rollup")) q.set("rollup", p.get("rollup"));
  sliceTerms().forEach((t) => q.append("slice", t)); // a slice: its series from the interactions (slices.js)
  const overview = await api(sliceTerms().length ? "slices/overview" : "overview", q);
  state.overview = overview;
  overview_range = r;
  Object.values(state.charts).forEach((c) => c.plot.destroy());
  state.charts = {};
  const container = $("charts");
  container.replaceChildren();
  const total = overview.series.reduce((n, s) => n + s.values.interactions.reduce((a, b) => a + (b || 0), 0), 0);
  $("overview-filter").replaceChildren(...[sliceChip()].filter(Boolean)); // slices.js
  $("overview-summary").textContent = `${iso(r.start)} – ${iso(r.end)} · rollup: ${overview.rollup} (${overview.step_seconds} s buckets) · ${total} interactions · ${overview.alerts.length} alert${overview.alerts.length === 1 ? "" : "s"} · click a point to see its interactions`;
  renderLegend(overview);
  chartDefs(state.options).forEach((def) => drawChart(def, overview, container));
  await renderBreakdown(r);
}

/* ---- drill-down ------------------------------------------------------------------------------- */
function exportLink(p) {
  // the drill-down's interactions as the JSONL groundwatch eval reads (api/export, a download)
  const q = new URLSearchParams({ app: p.get("bapp") || "", model: p.get("bmodel") || "", start: p.get("bstart") || "", end: p.get("bend") || "" });
  sliceTerms().forEach((t) => q.append("slice", t)); // the page's slice filter, as the list shows
  return "api/export?" + q.toString();
}
async function loadBucket() {
  const p = params();
  const q = new URLSearchParams({ app: p.get("bapp") || "", model: p.get("bmodel") || "", start: p.get("bstart") || "", end: p.get("bend") || "", limit: "200" });
  sliceTerms().forEach((t) => q.append("slice", t)); // the page's slice filter (slices.js) holds here too
  const data = await api("bucket", q);
  $("bucket-export").href = exportLink(p);
  const sliced = sliceTerms().length ? filterText(data.slice) : "";
  $("bucket-title").textContent = `${data.app} / ${data.model}${sliced ? ` [${sliced}]` : ""}: ${data.start} – ${data.end}`;
  $("bucket-summary").textContent = `${data.total} interactions${sliced ? ` of the slice ${sliced}` : ""}, worst first (hallucinated or answered without evidence, then lowest context entailment)`;
  const cols = ["interaction", "hallucination", "no evidence", "context ⇒ answer", "gt ⇒ answer", "answer ⇒ gt", "refusal", "gt refusal", "grounded precision", "unsupported", "tokens", "cost", "latency ms"];
  $("bucket-table").querySelector("thead").replaceChildren(el("tr", {}, ...cols.map((c) => el("th", {}, c))));
  const flag = (v) => (v === null ? "–" : v ? "yes" : "no");
  $("bucket-table").querySelector("tbody").replaceChildren(...data.interactions.map((r) => {
    const link = el("a", { href: "#", class: "interaction-link" }, r.interaction_id);
    link.addEventListener("click", (e) => { e.preventDefault(); setParams({ view: "interaction", id: r.interaction_id }, true); route(); });
    return el("tr", { class: r.hallucination || r.no_evidence ? "bad" : "" }, el("td", {}, link), el("td", {}, flag(r.hallucination)), el("td", {}, flag(r.no_evidence ?? null)),
      el("td", { class: "num" }, fmt(r.context_entailment)), el("td", { class: "num" }, fmt(r.ground_truth_entails_answer)),
      el("td", { class: "num" }, fmt(r.answer_entails_ground_truth)), el("td", {}, flag(r.answer_refusal)), el("td", {}, flag(r.ground_truth_refusal)),
      el("td", { class: "num" }, fmt(r.grounded_precision)), el("td", { class: "num" }, r.unsupported_claims),
      el("td", { class: "num" }, r.tokens), el("td", { class: "num" }, fmt(r.cost_usd, "usd")), el("td", { class: "num" }, r.judge_latency_ms.toFixed(0)));
  }));
}

const PAIR_TITLES = {
  context_answer: "Answer statements against the evidence (retrieved context and tool results)",
  ground_truth_answer: "Answer statements against the question and ground truth (ground truth ⇒ answer)",
  answer_ground_truth: "Ground-truth statements against the question and answer (answer ⇒ ground truth)",
};
function pairPanel(pair, passageName) {
  const panel = el("div", { class: "panel pair", "data-pair": pair.pair }, el("h3", {}, `${PAIR_TITLES[pair.pair] || pair.pair}: ${fmt(pair.score)}`));
  for (const h of pair.hypotheses) {
    const block = el("div", { class: "hypothesis" });
    for (const s of h.statements) {
      const where = s.passage === null || s.passage === undefined ? "" : ` · ${passageName(s.passage)}`;
      const node = el("span", { class: "statement verdict-" + s.verdict, "data-verdict": s.verdict, "data-passage": where ? String(s.passage) : "" },
        s.statement, el("span", { class: "meta" }, `${s.verdict.replace("_", " ")} · support ${fmt(s.score)}${where}${s.tag ? " · " + s.tag : ""}${s.reason ? " · " + s.reason : ""}`));
      if (where) {
        const mark = (on) => document.querySelectorAll(`.passage[data-passage="${s.passage}"]`).forEach((p) => p.classList.toggle("highlight", on));
        node.addEventListener("mouseenter", () => mark(true));
        node.addEventListener("mouseleave", () => mark(false));
      }
      block.append(node);
    }
    panel.append(block);
  }
  if (!pair.hypotheses.length) panel.append(el("p", { class: "hint" }, "nothing to judge"));
  return panel;
}
function conversationPanel(i) {
  const turns = i.history || [];
  if (!turns.length) return null;
  const title = `Conversation before the question (${turns.length} turn${turns.length === 1 ? "" : "s"}${i.history_truncated ? "; older turns dropped" : ""})`;
  const panel = el("div", { class: "panel conversation", "data-turns": String(turns.length) }, el("h3", {}, title));
  turns.forEach((t) => panel.append(el("div", { class: "turn turn-" + t.role, "data-role": t.role }, el("span", { class: "meta" }, t.role + ": "), t.content)));
  return panel;
}
// what a statement's passage index names: a context ("passage 2") or a tool result's passage
// ("search_kb result, call c2 · kb-12"); the evidence is the contexts, then Evaluation.evidence
function evidenceOf(e) {
  const i = e.interaction || {};
  return [...(i.contexts || []), ...(e.evidence || [])];
}
function passageNamer(e) {
  const all = evidenceOf(e);
  return (n) => {
    const p = all[n];
    if (!p || !p.tool) return `passage ${n + 1}`;
    const doc = p.document && p.document !== `tool:${p.tool}` ? ` · ${p.document}` : "";
    return `${p.tool} result${p.call_id ? `, call ${p.call_id}` : ""}${doc}`;
  };
}
function stepsPanel(i) {
  const steps = i.steps || [];
  if (!steps.length) return null;
  const panel = el("div", { class: "panel steps", "data-steps": String(steps.length) }, el("h3", {}, `Tool steps, in order (${steps.length})`));
  steps.forEach((st, n) => {
    const args = st.arguments === null || st.arguments === undefined ? "" : typeof st.arguments === "string" ? st.arguments : JSON.stringify(st.arguments);
    const timing = st.duration_ms === null || st.duration_ms === undefined ? "" : ` · ${st.duration_ms.toFixed(0)} ms`;
    const head = `${n + 1}. ${st.name}${st.call_id ? ` (call ${st.call_id})` : ""} · ${st.status.replace("_", " ")}${timing}${st.earlier_turn ? " · earlier turn" : ""}`;
    const result = st.result === null || st.result === undefined ? "no result" : st.result + (st.truncated ? " … (cut at the size limit)" : "");
    panel.append(el("div", { class: "step step-" + st.status, "data-step": String(n), "data-status": st.status },
      el("div", { class: "meta" }, head),
      el("div", { class: "step-args" }, el("span", { class: "meta" }, "arguments: "), args || "none"),
      el("div", { class: "step-result" }, el("span", { class: "meta" }, "result: "), result)));
  });
  return panel;
}
function textPanel(title, text) { return el("div", { class: "panel" }, el("h3", {}, title), el("div", { class: "text" }, text == null ? "–" : text)); }

/* ---- labels ---------------------------------------------------------------------------------- */
// the label kinds asked about, as schemas/label.py declares them (api/label-kinds, read once)
let LABEL_KINDS = [];
async function loadLabelKinds() {
  if (LABEL_KINDS.length) return;
  const kinds = await api("label-kinds");
  LABEL_KINDS = kinds.map((k) => ({ kind: k.kind, title: k.question, yes: k.keys[0], no: k.keys[1], yesText: k.yes_text, noText: k.no_text }));
}
async function postLabel(interactionId, kind, value) {
  let reviewer = localStorage.getItem("groundwatch_reviewer") || "";
  const note = ($("label-note") || {}).value || null;
  const send = async () => fetch("api/labels", {
    method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ interaction_id: interactionId, kind, value, note, reviewer: reviewer || null }),
  });
  let response = await send();
  if (response.status === 400 && !reviewer) {
    reviewer = (window.prompt("Your name, recorded with your labels:") || "").trim();
    if (!reviewer) return;
    localStorage.setItem("groundwatch_reviewer", reviewer);
    response = await send();
  }
  if (!response.ok) { status(`label not saved: ${response.status} ${await response.text()}`, true); return; }
  status(`labeled ${kind} = ${value}`);
  await loadInteraction();
}
function labelPanel(e, labels) {
  const panel = el("div", { class: "panel", id: "label-panel" }, el("h3", {}, "Your label (keys in brackets)"));
  for (const k of LABEL_KINDS) {
    const mine = labels.filter((l) => l.kind === k.kind);
    const row = el("p", { class: "label-row" }, el("span", { class: "label-title" }, k.title + " "),
      el("button", { type: "button", class: "label-yes", "data-kind": k.kind, "data-value": "1", onclick: () => postLabel(e.interaction_id, k.kind, 1) }, `${k.yesText} [${k.yes}]`),
      el("button", { type: "button", class: "label-no", "data-kind": k.kind, "data-value": "0", onclick: () => postLabel(e.interaction_id, k.kind, 0) }, `${k.noText} [${k.no}]`),
      el("span", { class: "label-given" }, mine.length ? " " + mine.map((l) => `${l.reviewer}: ${l.value ? k.yesText : k.noText}`).join(", ") : " not labeled"));
    panel.append(row);
  }
  panel.append(el("p", {}, el("label", {}, "note ", el("input", { id: "label-note", type: "text", maxLength: 4000, size: 60 }))));
  return panel;
}
function labelKeys(event) {
  if (params().get("view") !== "interaction" || event.target.tagName === "INPUT" || event.ctrlKey || event.metaKey || event.altKey) return;
  const id = params().get("id");
  for (const k of LABEL_KINDS) {
    if (event.key === k.yes) { event.preventDefault(); postLabel(id, k.kind, 1); }
    if (event.key === k.no) { event.preventDefault(); postLabel(id, k.kind, 0); }
  }
}

async function loadInteraction() {
  await loadLabelKinds();
  const id = params().get("id") || "";
  const { evaluation: e, labels } = await api("interactions/" + encodeURIComponent(id));
  $("interaction-title").textContent = `${e.app} / ${e.model} · ${e.interaction_id}`;
  const body = $("interaction-body");
  const i = e.interaction || {};
  const badge = (label, v, badWhenTrue) => el("span", { class: "badge " + (v === null || v === undefined ? "" : (v === badWhenTrue ? "bad" : "ok")) }, `${label}: ${v === null || v === undefined ? "unknown" : v ? "yes" : "no"}`);
  const facts = el("dl", { class: "facts" });
  const add = (k, v) => facts.append(el("dt", {}, k), el("dd", {}, v));
  add("time", e.timestamp); add("judge", e.judge); add("context ⇒ answer", fmt(e.context_entailment));
  add("ground truth ⇒ answer", fmt(e.ground_truth_entails_answer)); add("answer ⇒ ground truth", fmt(e.answer_entails_ground_truth));
  add("grounded precision", fmt(e.grounded_precision)); add("judge calls", String(e.judge_calls));
  add("tokens in / out", `${e.input_tokens} / ${e.output_tokens}`); add("cost", fmt(e.cost_usd, "usd"));
  add("judge latency", `${e.judge_latency_ms.toFixed(0)} ms`); add("complete", e.complete ? "yes" : `no (missing ${e.missing.join(", ")})`);
  if (e.tool_calls) add("tool calls", String(e.tool_calls));
  if ((e.ungrounded_argument_values || []).length) add("ungrounded tool arguments", e.ungrounded_argument_values.join(", "));
  if ((i.flags || []).length) add("flags", i.flags.join("; "));
  // your own evaluators (docs/evaluators.md): score or why it is missing, with the version
  Object.entries(e.custom || {}).forEach(([name, c]) => add(`custom.${name} v${c.version}`,
    c.score === null || c.score === undefined ? `missing: ${c.reason}` : `${fmt(c.score)}${c.reason ? " · " + c.reason : ""}`));
  const evidence = evidenceOf(e);
  const tools = (e.evidence || []).length;
  const contexts = el("div", { class: "panel" }, el("h3", {}, `Evidence (${(i.contexts || []).length} context passage${(i.contexts || []).length === 1 ? "" : "s"}${tools ? `, ${tools} from tool results` : ""})`));
  const supporting = new Set(e.pairs.filter((p) => p.pair === "context_answer").flatMap((p) => p.hypotheses.flatMap((h) => h.statements))
    .filter((s) => s.verdict === "entailed" && s.passage !== null && s.passage !== undefined).map((s) => s.passage));
  const named = passageNamer(e);
  evidence.forEach((c, n) => contexts.append(el("div", { class: "passage" + (c.tool ? " tool-passage" : "") + (supporting.has(n) ? " supporting" : ""), "data-passage": String(n) },
    el("span", { class: "meta" }, `${n + 1}${c.tool ? " · " + named(n) : ""}${supporting.has(n) ? " · supports the answer" : ""} `), (c.document && !c.tool ? `[${c.document}] ` : "") + c.text)));
  if (!evidence.length) contexts.append(el("p", { class: "hint" }, "no evidence: no context and no tool result that counts"));
  const outcome = e.outcome === "unsupported_no_evidence" ? el("span", { class: "badge bad", "data-outcome": e.outcome }, "answered without evidence") : null;
  body.replaceChildren(
    el("p", {}, ...[outcome].filter(Boolean), badge("hallucination", e.hallucination, true), badge("answer refusal", e.answer_refusal, true), badge("ground-truth refusal", e.ground_truth_refusal, true),
      ...(e.tool_error === null || e.tool_error === undefined ? [] : [badge("tool error", e.tool_error, true)]),
      ...(e.ungrounded_arguments === null || e.ungrounded_arguments === undefined ? [] : [badge("ungrounded tool arguments", e.ungrounded_arguments, true)])),
    labelPanel(e, labels || []),
    el("div", { class: "panel" }, facts),
    ...(e.conversation_id ? [el("p", {}, "Conversation ", conversationLink(e.app, e.model, e.conversation_id), " (every turn, in order)")] : []),
    ...[conversationPanel(i)].filter(Boolean), textPanel("Question", i.question), ...[stepsPanel(i)].filter(Boolean), contexts, textPanel("Answer", i.answer), textPanel("Ground truth", i.ground_truth),
    ...e.pairs.map((pair) => pairPanel(pair, named)),
  );
}

/* ---- alerts ----------------------------------------------------------------------------------- */
async function loadAlerts() {
  const r = currentRange();
  const p = params();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end) });
  if (p.get("app")) q.set("app", p.get("app"));
  const models = p.getAll("model");
  if (models.length === 1) q.set("model", models[0]);
  let alerts = await api("alerts", q);
  if (models.length > 1) alerts = alerts.filter((a) => models.includes(a.model));
  const cols = ["state", "rule", "app / model", "metric", "started", "ended", "baseline", "current", "threshold", "window", "interactions", "message"];
  const num = (v) => (v === null || v === undefined ? "–" : fmt(v));
  $("alerts-table").querySelector("thead").replaceChildren(el("tr", {}, ...cols.map((c) => el("th", {}, c))));
  $("alerts-table").querySelector("tbody").replaceChildren(...alerts.map((a) => el("tr", { class: (a.state || "firing") === "resolved" ? "resolved" : "bad", "data-state": a.state || "firing" },
    el("td", {}, a.state || "firing"), el("td", {}, a.rule), el("td", {}, `${a.app} / ${a.model}` + (a.slice ? ` [${a.slice}]` : "")), el("td", {}, a.metric),
    el("td", {}, a.starts_at || a.window_end), el("td", {}, a.ends_at || "–"),
    el("td", { class: "num" }, num(a.baseline)), el("td", { class: "num" }, fmt(a.value)), el("td", { class: "num" }, `${a.op} ${a.threshold}`),
    el("td", {}, `${a.window_start} – ${a.window_end}`), el("td", { class: "num" }, a.interactions), el("td", {}, a.message))));
  if (!alerts.length) $("alerts-table").querySelector("tbody").append(el("tr", {}, el("td", { colSpan: cols.length }, "no alerts in this range")));
}

/* ---- judge quality and review --------------------------------------------------------------------- */
function estimate(x, pct) {
  if (!x || x.value === null || x.value === undefined) return "–";
  const f = (v) => fmt(v, pct ? "pct" : undefined);
  return x.low === null || x.low === undefined ? f(x.value) : `${f(x.value)} [${f(x.low)}, ${f(x.high)}]`;
}
function blockCorrectedText(b) {
  const c = b.corrected;
  if (!c) return b.rate_metric ? "no judged traffic" : "agreement only: no flag rate of this kind to correct";
  if (c.corrected === null || c.corrected === undefined) return c.note;
  return `${fmt(c.corrected, "pct")} [${fmt(c.low, "pct")}, ${fmt(c.high, "pct")}]`;
}
/* what the judge said of a queued interaction: a refusal, or grounded / hallucination against its
   context; without a context (or an answer) there is no grounding verdict to show */
function reviewVerdict(i) {
  if (i.answer_refusal) return "refusal";
  if (i.hallucination === true) return "hallucination";
  if (i.hallucination === false) return "grounded";
  return "answered (no context to judge against)";
}
function qualityQuery() {
  const r = currentRange();
  const p = params();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end) });
  if (p.get("app")) q.set("app", p.get("app"));
  const models = p.getAll("model");
  if (models.length === 1) q.set("model", models[0]);
  return q;
}
async function loadQuality() {
  const report = await api("quality", qualityQuery());
  state.quality = report;
  const cols = ["app / model", "kind", "labels", "cases", "sensitivity", "specificity", "balanced accuracy", "kappa", "reviewers agree", "flagged", "corrected"];
  $("quality-table").querySelector("thead").replaceChildren(el("tr", {}, ...cols.map((c) => el("th", {}, c))));
  $("quality-table").querySelector("tbody").replaceChildren(...report.apps.map((b) => {
    const a = b.agreement || {};
    const r = b.reviewers;
    return el("tr", { "data-kind": b.kind, "data-series": `${b.app} / ${b.model}` },
      el("td", {}, `${b.app} / ${b.model}`), el("td", {}, `${b.kind} (${b.condition})`), el("td", { class: "num" }, b.labels),
      el("td", { class: "num" }, a.cases || 0), el("td", {}, estimate(a.sensitivity)), el("td", {}, estimate(a.specificity)),
      el("td", { class: "ba" }, estimate(a.balanced_accuracy)), el("td", {}, estimate(a.kappa)),
      el("td", {}, r.pairs ? `${fmt(r.percent_agreement, "pct")} of ${r.pairs}` : "–"),
      el("td", { class: "num" }, b.corrected ? fmt(b.corrected.flagged_rate, "pct") : "–"), el("td", { class: "corrected" }, blockCorrectedText(b)));
  }));
  if (!report.apps.length) $("quality-table").querySelector("tbody").append(el("tr", {}, el("td", { colSpan: cols.length }, "no labels in this range: label interactions on the Review page, or groundwatch labels import FILE")));
  const jcols = ["app / model", "judge", "model", "prompt", "kind", "cases", "balanced accuracy", "kappa"];
  $("quality-judges").querySelector("thead").replaceChildren(el("tr", {}, ...jcols.map((c) => el("th", {}, c))));
  $("quality-judges").querySelector("tbody").replaceChildren(...report.judges.map((b) => {
    const a = b.agreement || {};
    return el("tr", {}, el("td", {}, `${b.app} / ${b.model}`), el("td", {}, b.judge), el("td", {}, b.judge_model), el("td", {}, b.prompt_version || "–"),
      el("td", {}, b.kind), el("td", { class: "num" }, a.cases || 0), el("td", {}, estimate(a.balanced_accuracy)), el("td", {}, estimate(a.kappa)));
  }));
}
async function loadReview() {
  const q = qualityQuery();
  const body = await api("review", q);
  $("review-hint").textContent = `Interactions drawn for review (${fmt(body.review_rate, "pct")} of judged traffic by a stable hash, more near the decision threshold when set), newest first; open one and label it. Target: ${body.weekly_target} labels a week per app/model.`;
  $("review-progress").replaceChildren(...body.progress.map((p) => el("p", { class: "progress" }, `${p.app} / ${p.model}: ${p.labeled_this_week} / ${p.target} this week `,
    el("progress", { max: p.target, value: Math.min(p.labeled_this_week, p.target) }))));
  const cols = ["time (UTC)", "app / model", "interaction", "context ⇒ answer", "judge says"];
  $("review-table").querySelector("thead").replaceChildren(el("tr", {}, ...cols.map((c) => el("th", {}, c))));
  $("review-table").querySelector("tbody").replaceChildren(...body.items.map((i) => el("tr", { class: "clickable", onclick: () => { setParams({ view: "interaction", id: i.interaction_id }, true); route(); } },
    el("td", {}, i.timestamp.replace("T", " ").slice(0, 19)), el("td", {}, `${i.app} / ${i.model}`), el("td", {}, i.interaction_id), el("td", { class: "num" }, fmt(i.context_entailment)),
    el("td", {}, reviewVerdict(i)))));
  if (!body.items.length) $("review-table").querySelector("tbody").append(el("tr", {}, el("td", { colSpan: cols.length }, "nothing left to review in this range")));
}

/* ---- routing ---------------------------------------------------------------------------------- */
const VIEWS = { overview: loadOverview, bucket: loadBucket, interaction: loadInteraction, alerts: loadAlerts, quality: loadQuality, review: loadReview };
async function route() {
  const view = params().get("view") in VIEWS ? params().get("view") : "overview";
  for (const v of Object.keys(VIEWS)) $("view-" + v).hidden = v !== view;
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.view === view));
  if (state.loading) return;
  state.loading = true;
  status("loading…");
  try {
    state.options = await api("options");
    renderFilters();
    await VIEWS[view]();
    status("updated " + new Date().toISOString().slice(11, 19) + " UTC");
    document.body.dataset.loaded = view;
  } catch (err) {
    status(String(err.message || err), true);
    document.body.dataset.loaded = "error";
  } finally {
    state.loading = false;
  }
  scheduleRefresh();
}
function load() { route(); }
function scheduleRefresh() {
  clearTimeout(state.timer);
  if (params().get("auto") === "1" && state.options) state.timer = setTimeout(route, state.options.refresh_seconds * 1000);
}

function wire() {
  document.querySelectorAll("[data-view]").forEach((a) => a.addEventListener("click", (e) => { e.preventDefault(); setParams({ view: a.dataset.view }, true); route(); }));
  $("interaction-back").addEventListener("click", (e) => { e.preventDefault(); history.back(); });
  $("conversation-back").addEventListener("click", (e) => { e.preventDefault(); history.back(); });
  $("app").addEventListener("change", () => { setParams({ app: $("app").value, model: [] }, true); route(); });
  document.querySelectorAll("#ranges button").forEach((b) => b.addEventListener("click", () => { setParams({ range: b.dataset.range, start: null, end: null }, true); route(); }));
  $("custom").addEventListener("submit", (e) => {
    e.preventDefault();
    const start = Date.parse($("from").value + ":00Z") / 1000; const end = Date.parse($("to").value + ":00Z") / 1000;
    if (!(end > start)) { status("custom range: 'to' must be after 'from'", true); return; }
    setParams({ range: "custom", start: iso(start), end: iso(end) }, true); route();
  });
  $("auto").addEventListener("change", () => { setParams({ auto: $("auto").checked ? "1" : null }); scheduleRefresh(); });
  window.addEventListener("popstate", route);
  document.addEventListener("keydown", labelKeys);
}

wire();
// after every script of the page has run: documents.js, conversations.js and compare.js add their views
document.addEventListener("DOMContentLoaded", route);
