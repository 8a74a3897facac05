/* Judge quality page (api/quality: the judge's agreement with people's labels and the corrected rates)
   and the Review page (api/review: the interactions to label next and the week's progress). */
import { $, el } from "./dom.js";
import { dateTime, fmt, iso } from "./format.js";
import { go } from "./router.js";
import { api, currentRange, params, state } from "./state.js";
import { renderTable } from "./table.js";

function estimate(x, pct) {
  if (!x || x.value === null || x.value === undefined) return "–";
  const f = (v) => fmt(v, pct ? "pct" : "");
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
const series = (b) => `${b.app} / ${b.model}`;
const agreement = (b) => b.agreement || {};

export async function loadQuality() {
  const report = await api("quality", qualityQuery());
  state.quality = report;
  renderTable($("quality-table"), {
    columns: [
      { label: "app / model", cell: series },
      { label: "kind", cell: (b) => `${b.kind} (${b.condition})` },
      { label: "labels", num: true, cell: (b) => fmt(b.labels, "int") },
      { label: "cases", num: true, cell: (b) => fmt(agreement(b).cases || 0, "int") },
      { label: "sensitivity", cell: (b) => estimate(agreement(b).sensitivity) },
      { label: "specificity", cell: (b) => estimate(agreement(b).specificity) },
      { label: "balanced accuracy", cellClass: () => "ba", cell: (b) => estimate(agreement(b).balanced_accuracy) },
      { label: "kappa", cell: (b) => estimate(agreement(b).kappa) },
      {
        label: "reviewers agree",
        cell: (b) => (b.reviewers.pairs ? `${fmt(b.reviewers.percent_agreement, "pct")} of ${b.reviewers.pairs}` : "–"),
      },
      { label: "flagged", num: true, cell: (b) => (b.corrected ? fmt(b.corrected.flagged_rate, "pct") : "–") },
      { label: "corrected", cellClass: () => "corrected", cell: blockCorrectedText },
    ],
    rows: report.apps,
    rowAttrs: (b) => ({ "data-kind": b.kind, "data-series": series(b) }),
    empty: "no labels in this range: label interactions on the Review page, or groundwatch labels import FILE",
  });
  renderTable($("quality-judges"), {
    columns: [
      { label: "app / model", cell: series },
      { label: "judge", cell: (b) => b.judge },
      { label: "model", cell: (b) => b.judge_model },
      { label: "prompt", cell: (b) => b.prompt_version || "–" },
      { label: "kind", cell: (b) => b.kind },
      { label: "cases", num: true, cell: (b) => fmt(agreement(b).cases || 0, "int") },
      { label: "balanced accuracy", cell: (b) => estimate(agreement(b).balanced_accuracy) },
      { label: "kappa", cell: (b) => estimate(agreement(b).kappa) },
    ],
    rows: report.judges,
  });
  const health = await api("evaluators", qualityQuery());
  renderTable($("quality-evaluators"), {
    columns: [
      {
        label: "evaluator",
        cell: (h) => (h.kind === "custom" ? `custom.${h.evaluator}` : `${h.evaluator} (the judge's stage)`),
      },
      { label: "versions", cell: (h) => h.versions.join(", ") || "–" },
      { label: "ran on", num: true, cell: (h) => fmt(h.applied, "int") },
      { label: "scored", num: true, cell: (h) => fmt(h.scored, "int") },
      { label: "coverage", num: true, cellClass: () => "coverage", cell: (h) => fmt(h.coverage, "pct") },
      {
        label: "missing, by reason",
        cell: (h) =>
          Object.entries(h.missing_by_kind)
            .map(([kind, n]) => `${kind} ${fmt(n, "int")}`)
            .join(", ") || "–",
      },
      {
        label: "last score (UTC)",
        cell: (h) => (h.last_scored ? dateTime(h.last_scored, true) : "never in this range"),
      },
    ],
    rows: health.evaluators,
    rowAttrs: (h) => ({ "data-evaluator": h.evaluator, "data-kind": h.kind }),
    empty: "nothing was judged in this range",
  });
}

export async function loadReview() {
  const body = await api("review", qualityQuery());
  $("review-hint").textContent =
    `Interactions drawn for review (${fmt(body.review_rate, "pct")} of judged traffic by a stable hash, more near the decision threshold when set), newest first; open one and label it. Target: ${fmt(body.weekly_target, "int")} labels a week per app/model.`;
  $("review-progress").replaceChildren(
    ...body.progress.map((p) =>
      el(
        "p",
        { class: "progress" },
        `${p.app} / ${p.model}: ${fmt(p.labeled_this_week, "int")} / ${fmt(p.target, "int")} this week `,
        el("progress", { max: p.target, value: Math.min(p.labeled_this_week, p.target) }),
      ),
    ),
  );
  renderTable($("review-table"), {
    columns: [
      { label: "time (UTC)", cell: (i) => dateTime(i.timestamp, true) },
      { label: "app / model", cell: series },
      { label: "interaction", cell: (i) => i.interaction_id },
      { label: "context ⇒ answer", num: true, cell: (i) => fmt(i.context_entailment) },
      { label: "judge says", cell: reviewVerdict },
    ],
    rows: body.items,
    rowAttrs: (i) => ({ class: "clickable", onclick: () => go({ view: "interaction", id: i.interaction_id }) }),
    empty: "nothing left to review in this range",
  });
}
