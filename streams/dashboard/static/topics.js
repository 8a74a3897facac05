/* Topics page (api/topics): what the traffic is about, each topic (the topic dimension, docs/topics.md)
   with its share and rates over the range against the period before (as long, ending where it starts;
   for "all data", its second half against its first), ▲ where a rate's 95 % interval now lies wholly above its interval before; a sparkline of its
   hallucination and refusal rates; its worst interactions. New and growing topics come first and are
   listed above the table. A click on a topic filters the whole page to it (the slice filter, slices.js).
   It reads the page's range, app, models and slice filter. */
import { $, el } from "./dom.js";
import { dateRange, fmt, iso, missing, plural } from "./format.js";
import { go } from "./router.js";
import { filterText, periodsOf, sliceTerms, termKey } from "./slices.js";
import { api, currentRange, params } from "./state.js";
import { renderTable } from "./table.js";

const RATES = [
  ["hallucination_rate", "hallucination"],
  ["answer_refusal_rate", "refusal"],
  ["no_evidence_rate", "no evidence"],
  ["conversation_unresolved_rate", "unresolved"],
];
const SPARK = [
  ["hallucination_rate", "var(--bad)"],
  ["answer_refusal_rate", "var(--accent)"],
];
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

/* Each rate a polyline over the buckets (0 at the bottom, 100 % at the top); a bucket without a
   denominator breaks the line. */
function sparkline(spark) {
  const width = 120;
  const height = 26;
  const chart = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "sparkline" });
  chart.append(svg("rect", { x: 0, y: 0, width, height, class: "spark-frame" }));
  for (const [metric, colour] of SPARK) {
    const values = spark[metric] || [];
    const step = values.length > 1 ? width / (values.length - 1) : width;
    let run = [];
    const flush = () => {
      if (run.length > 1) chart.append(svg("polyline", { points: run.join(" "), stroke: colour, class: "spark" }));
      if (run.length === 1)
        chart.append(svg("circle", { cx: run[0].split(",")[0], cy: run[0].split(",")[1], r: 1.2, fill: colour }));
      run = [];
    };
    values.forEach((v, i) => {
      if (missing(v)) flush();
      else run.push(`${(i * step).toFixed(1)},${(height - 1 - v * (height - 2)).toFixed(1)}`);
    });
    flush();
  }
  return chart;
}

/* A rate with its interval, ▲ (▼) where it rose (fell) beyond chance against the period before, and the
   rate corrected for the judge's errors below it where labels allow (else why not, on hover). */
function rateCell(change, fixed) {
  const now = change.now;
  if (missing(now.value)) return "–";
  const text = `${fmt(now.value, "pct")} [${fmt(now.low, "pct")}, ${fmt(now.high, "pct")}]`;
  const before = missing(change.before.value) ? "none before" : `${fmt(change.before.value, "pct")} before`;
  const note = fixed && missing(fixed.value) && fixed.note ? `; not corrected: ${fixed.note}` : "";
  return el(
    "span",
    { title: `n = ${fmt(now.n, "int")}; ${before} (n = ${fmt(change.before.n, "int")})${note}` },
    text,
    change.rose ? el("strong", { class: "rose" }, " ▲") : change.fell ? el("span", { class: "fell" }, " ▼") : "",
    fixed && !missing(fixed.value)
      ? el(
          "span",
          { class: "corrected", title: "corrected for the judge's errors on the labeled interactions (Rogan-Gladen)" },
          `corrected ${fmt(fixed.value, "pct")} [${fmt(fixed.low, "pct")}, ${fmt(fixed.high, "pct")}]`,
        )
      : "",
  );
}

function chooseTopic(topic) {
  go({ view: "overview", slice: [...sliceTerms().filter((t) => termKey(t) !== "topic"), `topic:${topic}`] });
}

function examples(row) {
  const open = (id) => (e) => {
    e.preventDefault();
    go({ view: "interaction", id });
  };
  return el(
    "ol",
    { class: "examples" },
    ...row.examples.map((x) => {
      const marks = [
        x.hallucination ? "hallucinated" : "",
        x.answer_refusal ? "refused" : "",
        x.no_evidence ? "no evidence" : "",
      ].filter(Boolean);
      return el(
        "li",
        {},
        el(
          "a",
          { href: "#", onclick: open(x.interaction_id), title: x.interaction_id },
          x.question || x.interaction_id,
        ),
        marks.length ? el("span", { class: "hint" }, ` (${marks.join(", ")})`) : "",
      );
    }),
  );
}

function movers(body) {
  const moving = body.topics.filter((t) => t.status === "new" || t.status === "growing");
  if (!moving.length) return el("p", { id: "topics-movers" }, "No topic is new or growing against the period before.");
  return el(
    "div",
    { id: "topics-movers", class: "panel" },
    el("h3", {}, "New or growing topics"),
    el(
      "ul",
      {},
      ...moving.map((t) =>
        el(
          "li",
          {},
          el("strong", {}, t.topic),
          `: ${t.status}, ${fmt(t.share.now.value, "pct")} of the interactions (${fmt(t.share.before.value, "pct")} before)`,
        ),
      ),
    ),
  );
}

export async function loadTopics() {
  const p = params();
  // all data has nothing before it: its second half against its first, as the Breakdown compares it
  const { base, cur } = periodsOf(currentRange(), currentRange().range === "data" ? "halves" : "previous");
  const q = new URLSearchParams({
    start: iso(cur.start),
    end: iso(cur.end),
    baseline_start: iso(base.start),
    baseline_end: iso(base.end),
  });
  if (p.get("app")) q.set("app", p.get("app"));
  for (const m of p.getAll("model")) q.append("model", m);
  for (const t of sliceTerms()) q.append("slice", t);
  const body = await api("topics", q);
  const assigned = body.interactions - body.without_topic;
  const models = p.getAll("model");
  const scope = [
    p.get("app") ? `app ${p.get("app")}` : "",
    models.length ? `${models.length > 1 ? "models" : "model"} ${models.join(", ")}` : "",
    sliceTerms().length ? filterText(body.slice) : "",
  ].filter(Boolean);
  $("topics-summary").textContent = [
    `${plural(body.topics.length, "topic")} (${scope.join("; ") || "all traffic"})`,
    `${fmt(assigned, "int")} of ${plural(body.interactions, "interaction")} with a topic`,
    `${dateRange(body.start, body.end)} against ${dateRange(body.before_start, body.before_end)}`,
  ].join(" · ");
  $("topics-movers-box").replaceChildren(body.topics.length ? movers(body) : "");
  renderTable($("topics-table"), {
    columns: [
      { label: "topic", cell: (t) => t.topic, sort: (t) => t.topic },
      { label: "", cell: (t) => (t.status ? el("span", { class: `badge ${t.status}` }, t.status) : "") },
      { label: "interactions", num: true, cell: (t) => fmt(t.interactions, "int"), sort: (t) => t.interactions },
      { label: "share", num: true, cell: (t) => fmt(t.share.now.value, "pct"), sort: (t) => t.share.now.value },
      ...RATES.map(([metric, label]) => ({
        label,
        title: "the rate over the range with its 95 % interval; ▲ above its interval in the period before",
        num: true,
        cell: (t) => rateCell(t.rates[metric], t.corrected[metric]),
        sort: (t) => t.rates[metric].now.value,
      })),
      {
        label: "trend",
        title: "hallucination (red) and refusal (blue) rates over the range",
        cell: (t) => sparkline(t.spark),
      },
      { label: "model", title: "the topic model versions that assigned it", cell: (t) => t.models.join(", ") },
      { label: "worst interactions", cell: examples },
    ],
    rows: body.topics,
    rowAttrs: (t) => ({
      class: `clickable${Object.values(t.rates).some((c) => c.rose) ? " bad" : ""}`,
      "data-topic": t.topic,
      title: "filter the whole page to this topic",
      onclick: (e) => {
        if (!e.target.closest("a")) chooseTopic(t.topic);
      },
    }),
    empty: "No topics in this range: the worker assigns them with a topic model (topics.model_file, docs/topics.md).",
  });
}
