/* Compare page: two slices side by side over the page's range (api/compare). Each side is a slice
   filter, key:value terms (schemas/slice_filter.py): its app / model is chosen from the stored series,
   its dimensions typed beside it (prompt_version:v1, comma-separated). The address keeps them as
   a=...&b=... (a=app:wiki-qa&a=prompt_version:v1) so a link shows the same comparison. */
import { $, el } from "./dom.js";
import { fmt, iso, metricUnit, plural, pValue } from "./format.js";
import { go } from "./router.js";
import { termKey } from "./slices.js";
import { api, currentRange, params, state } from "./state.js";
import { renderTable } from "./table.js";

function sliceChoices() {
  const series = state.options.series;
  const choices = [{ label: "all traffic", terms: [] }];
  for (const app of [...new Set(series.map((s) => s.app))].sort()) {
    choices.push({ label: `${app} (every model)`, terms: [`app:${app}`] });
    for (const s of series.filter((x) => x.app === app)) {
      choices.push({ label: `${s.app} / ${s.model}`, terms: [`app:${s.app}`, `model:${s.model}`] });
    }
  }
  return choices;
}
function termsKey(terms) {
  return [...terms].sort().join("&");
}
function sliceLabel(terms) {
  return terms.length ? terms.join(", ") : "all traffic";
}
const isColumn = (t) => ["app", "model"].includes(termKey(t));

function renderCompareForm(a, b) {
  const choices = sliceChoices();
  for (const [id, terms] of [
    ["compare-a", a],
    ["compare-b", b],
  ]) {
    const chosen = terms.filter(isColumn);
    const known = choices.some((c) => termsKey(c.terms) === termsKey(chosen));
    const options = known ? choices : [{ label: sliceLabel(chosen), terms: chosen }, ...choices];
    $(id).replaceChildren(
      ...options.map((c) =>
        el("option", { value: JSON.stringify(c.terms), selected: termsKey(c.terms) === termsKey(chosen) }, c.label),
      ),
    );
    $(`${id}-where`).value = terms.filter((t) => !isColumn(t)).join(", ");
  }
}
function sideTerms(id) {
  const where = $(`${id}-where`)
    .value.split(",")
    .map((t) => t.trim())
    .filter(Boolean);
  return [...JSON.parse($(id).value), ...where];
}

function diffClass(m) {
  if (!m.significant || m.difference === null) return "";
  const worse = m.lower_is_better ? m.difference > 0 : m.difference < 0;
  return `sig ${worse ? "worse" : "better"}`;
}

function questionsHint(body) {
  const asked = `${plural(body.repeated_questions, "question")} asked in both slices (case and spacing folded)`;
  if (!body.repeated_questions) return "No question was asked in both slices in this range.";
  if (!body.differing_questions) {
    return `${asked}, each judged alike in both: the slices differ in which questions they are asked, not in how the same question is answered.`;
  }
  return `${asked}, ${fmt(body.differing_questions, "int")} of them judged differently (hallucination rate or context ⇒ answer); click an example to open it.`;
}

export async function loadCompare() {
  const p = params();
  let a = p.getAll("a");
  let b = p.getAll("b");
  if (!a.length && !b.length) {
    const series = state.options.series;
    if (series.length >= 2) {
      a = [`app:${series[0].app}`, `model:${series[0].model}`];
      b = [`app:${series[1].app}`, `model:${series[1].model}`];
    }
  }
  renderCompareForm(a, b);
  const r = currentRange();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end) });
  for (const t of a) q.append("a", t);
  for (const t of b) q.append("b", t);
  const body = await api("compare", q);
  const withN = (m, v, n) => fmt(v, metricUnit(m)) + (m.kind === "sum" ? "" : ` (n ${fmt(n, "int")})`);
  renderTable($("compare-table"), {
    columns: [
      { label: "metric", cell: (m) => m.label },
      { label: `A: ${sliceLabel(a)}`, num: true, cell: (m) => withN(m, m.a, m.a_n) },
      { label: `B: ${sliceLabel(b)}`, num: true, cell: (m) => withN(m, m.b, m.b_n) },
      { label: "B − A", num: true, cellClass: diffClass, cell: (m) => fmt(m.difference, metricUnit(m)) },
      {
        label: "95% interval",
        num: true,
        cell: (m) => (m.lower === null ? "–" : `${fmt(m.lower, metricUnit(m))} … ${fmt(m.upper, metricUnit(m))}`),
      },
      { label: "p", num: true, cell: (m) => pValue(m.p_value) },
      { label: "test", cell: (m) => m.test || "" },
    ],
    rows: body.metrics,
    rowAttrs: (m) => ({ "data-metric": m.name }),
  });
  $("compare-questions-hint").textContent = questionsHint(body);
  $("compare-questions").hidden = !body.questions.length;
  const open = (id) => (e) => {
    e.preventDefault();
    go({ view: "interaction", id });
  };
  renderTable($("compare-questions"), {
    columns: [
      { label: "question", cell: (x) => x.question || "–" },
      { label: "asked A / B", num: true, cell: (x) => `${fmt(x.a_n, "int")} / ${fmt(x.b_n, "int")}` },
      { label: "hallucination A", num: true, cell: (x) => fmt(x.a_hallucination_rate, "pct") },
      { label: "hallucination B", num: true, cell: (x) => fmt(x.b_hallucination_rate, "pct") },
      { label: "context ⇒ answer A", num: true, cell: (x) => fmt(x.a_context_entailment) },
      { label: "context ⇒ answer B", num: true, cell: (x) => fmt(x.b_context_entailment) },
      {
        label: "examples",
        cell: (x) =>
          el(
            "span",
            {},
            el("a", { href: "#", class: "example-a", onclick: open(x.a_example) }, "A"),
            " ",
            el("a", { href: "#", class: "example-b", onclick: open(x.b_example) }, "B"),
          ),
      },
    ],
    rows: body.questions,
  });
}

export function wireCompare() {
  $("compare-form").addEventListener("submit", (e) => {
    e.preventDefault();
    go({ view: "compare", a: sideTerms("compare-a"), b: sideTerms("compare-b") });
  });
}
