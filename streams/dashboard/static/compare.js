/* groundwatch dashboard, Compare page: two slices side by side over the page's range (api/compare).
   Each side is a slice filter, key:value terms (schemas/slice_filter.py): its app / model is chosen from
   the stored series, its dimensions typed beside it (prompt_version:v1, comma-separated). The address
   keeps them as a=...&b=... (a=app:wiki-qa&a=prompt_version:v1) so a link shows the same comparison. */
"use strict";

function sliceChoices() {
  const series = state.options.series;
  const choices = [{ label: "all traffic", terms: [] }];
  for (const app of [...new Set(series.map((s) => s.app))].sort()) {
    choices.push({ label: `${app} (every model)`, terms: ["app:" + app] });
    series.filter((s) => s.app === app).forEach((s) => choices.push({ label: `${s.app} / ${s.model}`, terms: ["app:" + s.app, "model:" + s.model] }));
  }
  return choices;
}
function termsKey(terms) { return [...terms].sort().join("&"); }
function sliceLabel(terms) { return terms.length ? terms.join(", ") : "all traffic"; }
const isColumn = (t) => ["app", "model"].includes(termKey(t)); // termKey: slices.js

function renderCompareForm(a, b) {
  const choices = sliceChoices();
  for (const [id, terms] of [["compare-a", a], ["compare-b", b]]) {
    const chosen = terms.filter(isColumn);
    const known = choices.some((c) => termsKey(c.terms) === termsKey(chosen));
    const options = known ? choices : [{ label: sliceLabel(chosen), terms: chosen }, ...choices];
    $(id).replaceChildren(...options.map((c) => el("option", { value: JSON.stringify(c.terms), selected: termsKey(c.terms) === termsKey(chosen) }, c.label)));
    $(id + "-where").value = terms.filter((t) => !isColumn(t)).join(", ");
  }
}
function sideTerms(id) {
  const where = $(id + "-where").value.split(",").map((t) => t.trim()).filter(Boolean);
  return [...JSON.parse($(id).value), ...where];
}

function diffClass(m) {
  if (!m.significant || m.difference === null) return "num";
  const worse = m.lower_is_better ? m.difference > 0 : m.difference < 0;
  return "num sig " + (worse ? "worse" : "better");
}

async function loadCompare() {
  const p = params();
  let a = p.getAll("a"), b = p.getAll("b");
  if (!a.length && !b.length) {
    const series = state.options.series;
    if (series.length >= 2) { a = ["app:" + series[0].app, "model:" + series[0].model]; b = ["app:" + series[1].app, "model:" + series[1].model]; }
  }
  renderCompareForm(a, b);
  const r = currentRange();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end) });
  a.forEach((t) => q.append("a", t)); b.forEach((t) => q.append("b", t));
  const body = await api("compare", q);
  const unitOf = (m) => (m.kind === "rate" ? "pct" : m.unit === "USD" ? "usd" : m.kind === "sum" ? "int" : "");
  const cols = ["metric", `A: ${sliceLabel(a)}`, `B: ${sliceLabel(b)}`, "B − A", "95% interval", "p", "test"];
  $("compare-table").querySelector("thead").replaceChildren(el("tr", {}, ...cols.map((c) => el("th", {}, c))));
  $("compare-table").querySelector("tbody").replaceChildren(...body.metrics.map((m) => {
    const u = unitOf(m);
    const n = (v, k) => (m.kind === "sum" ? "" : ` (n ${k})`);
    return el("tr", { "data-metric": m.name },
      el("td", {}, m.label), el("td", { class: "num" }, fmt(m.a, u) + n(m.a, m.a_n)), el("td", { class: "num" }, fmt(m.b, u) + n(m.b, m.b_n)),
      el("td", { class: diffClass(m) }, fmt(m.difference, u)),
      el("td", { class: "num" }, m.lower === null ? "–" : `${fmt(m.lower, u)} … ${fmt(m.upper, u)}`),
      el("td", { class: "num" }, m.p_value === null ? "–" : m.p_value < 0.001 ? "<0.001" : m.p_value.toFixed(3)),
      el("td", {}, m.test || ""));
  }));
  const asked = `${body.repeated_questions} question${body.repeated_questions === 1 ? "" : "s"} asked in both slices (case and spacing folded)`;
  $("compare-questions-hint").textContent = !body.repeated_questions
    ? "No question was asked in both slices in this range."
    : !body.differing_questions
      ? `${asked}, each judged alike in both: the slices differ in which questions they are asked, not in how the same question is answered.`
      : `${asked}, ${body.differing_questions} of them judged differently (hallucination rate or context ⇒ answer); click an example to open it.`;
  $("compare-questions").hidden = !body.questions.length;
  const qcols = ["question", "asked A / B", "hallucination A", "hallucination B", "context ⇒ answer A", "context ⇒ answer B", "examples"];
  $("compare-questions").querySelector("thead").replaceChildren(el("tr", {}, ...qcols.map((c) => el("th", {}, c))));
  const open = (id) => (e) => { e.preventDefault(); setParams({ view: "interaction", id }, true); route(); };
  $("compare-questions").querySelector("tbody").replaceChildren(...body.questions.map((x) => el("tr", {},
    el("td", {}, x.question || "–"), el("td", { class: "num" }, `${x.a_n} / ${x.b_n}`),
    el("td", { class: "num" }, fmt(x.a_hallucination_rate, "pct")), el("td", { class: "num" }, fmt(x.b_hallucination_rate, "pct")),
    el("td", { class: "num" }, fmt(x.a_context_entailment)), el("td", { class: "num" }, fmt(x.b_context_entailment)),
    el("td", {}, el("a", { href: "#", class: "example-a", onclick: open(x.a_example) }, "A"), " ", el("a", { href: "#", class: "example-b", onclick: open(x.b_example) }, "B")))));
}

function wireCompare() {
  $("compare-form").addEventListener("submit", (e) => {
    e.preventDefault();
    setParams({ view: "compare", a: sideTerms("compare-a"), b: sideTerms("compare-b") }, true);
    route();
  });
}

VIEWS.compare = loadCompare;
wireCompare();
