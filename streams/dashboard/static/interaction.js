/* The drill-down (one bucket's interactions, worst first: api/bucket) and one interaction (its
   statements, verdicts, evidence and costs: api/interactions/{id}, a link to its conversation) with the
   reviewer's label panel. */
import { $, el } from "./dom.js";
import { dateRange, dateTime, fmt, missing, plural } from "./format.js";
import { labelKinds, labelRow, sendLabel } from "./labels.js";
import { conversationLink } from "./links.js";
import { go } from "./router.js";
import { filterText, sliceTerms } from "./slices.js";
import { api, params } from "./state.js";
import { renderTable } from "./table.js";

/* ---- drill-down ------------------------------------------------------------------------------- */
function bucketQuery(p) {
  const q = new URLSearchParams({
    app: p.get("bapp") || "",
    model: p.get("bmodel") || "",
    start: p.get("bstart") || "",
    end: p.get("bend") || "",
  });
  for (const t of sliceTerms()) q.append("slice", t); // the page's slice filter holds here too
  return q;
}

export async function loadBucket() {
  const p = params();
  const q = bucketQuery(p);
  // the drill-down's interactions as the JSONL groundwatch eval reads (api/export, a download)
  $("bucket-export").href = `api/export?${q.toString()}`;
  q.set("limit", "200");
  const data = await api("bucket", q);
  const sliced = sliceTerms().length ? filterText(data.slice) : "";
  $("bucket-title").textContent =
    `${data.app} / ${data.model}${sliced ? ` [${sliced}]` : ""}: ${dateRange(data.start, data.end)}`;
  $("bucket-summary").textContent =
    `${plural(data.total, "interaction")}${sliced ? ` of the slice ${sliced}` : ""}, worst first (hallucinated or answered without evidence, then lowest context entailment)`;
  const flag = (v) => (missing(v) ? "–" : v ? "yes" : "no");
  const open = (id) => (e) => {
    e.preventDefault();
    go({ view: "interaction", id });
  };
  renderTable($("bucket-table"), {
    columns: [
      {
        label: "interaction",
        cell: (r) =>
          el("a", { href: "#", class: "interaction-link", onclick: open(r.interaction_id) }, r.interaction_id),
      },
      { label: "hallucination", cell: (r) => flag(r.hallucination) },
      { label: "no evidence", cell: (r) => flag(r.no_evidence) },
      { label: "context ⇒ answer", num: true, cell: (r) => fmt(r.context_entailment) },
      { label: "gt ⇒ answer", num: true, cell: (r) => fmt(r.ground_truth_entails_answer) },
      { label: "answer ⇒ gt", num: true, cell: (r) => fmt(r.answer_entails_ground_truth) },
      { label: "refusal", cell: (r) => flag(r.answer_refusal) },
      { label: "gt refusal", cell: (r) => flag(r.ground_truth_refusal) },
      { label: "grounded precision", num: true, cell: (r) => fmt(r.grounded_precision) },
      { label: "unsupported", num: true, cell: (r) => fmt(r.unsupported_claims, "int") },
      { label: "tokens", num: true, cell: (r) => fmt(r.tokens, "int") },
      { label: "cost", num: true, cell: (r) => fmt(r.cost_usd, "usd") },
      { label: "latency ms", num: true, cell: (r) => fmt(r.judge_latency_ms, "int") },
    ],
    rows: data.interactions,
    rowAttrs: (r) => ({ class: r.hallucination || r.no_evidence ? "bad" : "" }),
  });
}

/* ---- one interaction -------------------------------------------------------------------------- */
const PAIR_TITLES = {
  context_answer: "Answer statements against the evidence (retrieved context and tool results)",
  ground_truth_answer: "Answer statements against the question and ground truth (ground truth ⇒ answer)",
  answer_ground_truth: "Ground-truth statements against the question and answer (answer ⇒ ground truth)",
};
// A statement's citations (StatementCitations, docs/citations.md): one chip per cited passage, its number
// and document, marked by whether that passage supports the statement (a symbol and words as well as a
// colour); a reference naming no passage as dangling; a factual statement of a citing answer without any
// citation as uncited. Null when the statement has nothing to show.
const CITE_STATES = {
  precise: { mark: "✓", text: "supports it" },
  imprecise: { mark: "✗", text: "does not support it" },
  unknown: { mark: "?", text: "support unknown" },
};
function citationRow(s, evidence, answerCites) {
  const c = s.citations;
  if (!c) return null;
  const cited = c.cited || [];
  const dangling = c.dangling || [];
  if (!cited.length && !dangling.length) {
    if (!answerCites || !c.factual) return null;
    return el(
      "span",
      { class: "citations", "data-citations": "uncited" },
      el(
        "span",
        { class: "cite cite-uncited", "data-cite": "uncited" },
        "⚠ uncited: a factual statement without a citation",
      ),
    );
  }
  const row = el("span", { class: "citations", "data-citations": String(cited.length) }, "cites ");
  cited.forEach((n, k) => {
    const precise = (c.precise || [])[k];
    const state = missing(precise) ? "unknown" : precise ? "precise" : "imprecise";
    const doc = evidence[n]?.document;
    const label = `${CITE_STATES[state].mark} [${n + 1}]${doc ? ` ${doc}` : ""}: ${CITE_STATES[state].text}`;
    row.append(el("span", { class: `cite cite-${state}`, "data-cite": state, "data-passage": String(n) }, label));
  });
  for (const d of dangling) {
    row.append(el("span", { class: "cite cite-dangling", "data-cite": "dangling" }, `⚠ ${d}: names no passage`));
  }
  if (!missing(c.supported) && cited.length) {
    row.append(
      el(
        "span",
        { class: "cite-summary" },
        c.supported ? "its citations support it" : "not supported by what it cites",
      ),
    );
  }
  return row;
}
/* One NLI pair's statements with their support verdicts and citations (also each turn of the conversation
   view). */
export function pairPanel(pair, passageName, evidence = [], answerCites = false) {
  const panel = el(
    "div",
    { class: "panel pair", "data-pair": pair.pair },
    el("h3", {}, `${PAIR_TITLES[pair.pair] || pair.pair}: ${fmt(pair.score)}`),
  );
  for (const h of pair.hypotheses) {
    const block = el("div", { class: "hypothesis" });
    for (const s of h.statements) {
      const where = missing(s.passage) ? "" : ` · ${passageName(s.passage)}`;
      const meta = `${s.verdict.replace("_", " ")} · support ${fmt(s.score)}${where}${s.tag ? ` · ${s.tag}` : ""}${s.reason ? ` · ${s.reason}` : ""}`;
      const node = el(
        "span",
        {
          class: `statement verdict-${s.verdict}`,
          "data-verdict": s.verdict,
          "data-passage": where ? String(s.passage) : "",
        },
        s.statement,
        el("span", { class: "meta" }, meta),
      );
      const cites = pair.pair === "context_answer" ? citationRow(s, evidence, answerCites) : null;
      if (cites) node.append(cites);
      if (where) {
        const mark = (on) => {
          for (const p of document.querySelectorAll(`.passage[data-passage="${s.passage}"]`)) {
            p.classList.toggle("highlight", on);
          }
        };
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
  const title = `Conversation before the question (${plural(turns.length, "turn")}${i.history_truncated ? "; older turns dropped" : ""})`;
  const panel = el("div", { class: "panel conversation", "data-turns": String(turns.length) }, el("h3", {}, title));
  for (const t of turns) {
    panel.append(
      el(
        "div",
        { class: `turn turn-${t.role}`, "data-role": t.role },
        el("span", { class: "meta" }, `${t.role}: `),
        t.content,
      ),
    );
  }
  return panel;
}
// the evidence a statement's passage index points into: the contexts, then Evaluation.evidence
export function evidenceOf(e) {
  const i = e.interaction || {};
  return [...(i.contexts || []), ...(e.evidence || [])];
}
// what a passage index names: a context ("passage 2") or a tool result's passage
// ("search_kb result, call c2 · kb-12")
export function passageNamer(e) {
  const all = evidenceOf(e);
  return (n) => {
    const p = all[n];
    if (!p?.tool) return `passage ${n + 1}`;
    const doc = p.document && p.document !== `tool:${p.tool}` ? ` · ${p.document}` : "";
    return `${p.tool} result${p.call_id ? `, call ${p.call_id}` : ""}${doc}`;
  };
}
/* An interaction's tool steps in order (also each turn of the conversation view). */
export function stepsPanel(i) {
  const steps = i.steps || [];
  if (!steps.length) return null;
  const panel = el(
    "div",
    { class: "panel steps", "data-steps": String(steps.length) },
    el("h3", {}, `Tool steps, in order (${steps.length})`),
  );
  steps.forEach((st, n) => {
    const args = missing(st.arguments)
      ? ""
      : typeof st.arguments === "string"
        ? st.arguments
        : JSON.stringify(st.arguments);
    const timing = missing(st.duration_ms) ? "" : ` · ${fmt(st.duration_ms, "int")} ms`;
    const head = `${n + 1}. ${st.name}${st.call_id ? ` (call ${st.call_id})` : ""} · ${st.status.replace("_", " ")}${timing}${st.earlier_turn ? " · earlier turn" : ""}`;
    const result = missing(st.result) ? "no result" : st.result + (st.truncated ? " … (cut at the size limit)" : "");
    panel.append(
      el(
        "div",
        { class: `step step-${st.status}`, "data-step": String(n), "data-status": st.status },
        el("div", { class: "meta" }, head),
        el("div", { class: "step-args" }, el("span", { class: "meta" }, "arguments: "), args || "none"),
        el("div", { class: "step-result" }, el("span", { class: "meta" }, "result: "), result),
      ),
    );
  });
  return panel;
}
function textPanel(title, text) {
  return el("div", { class: "panel" }, el("h3", {}, title), el("div", { class: "text" }, text == null ? "–" : text));
}

/* ---- labels ----------------------------------------------------------------------------------- */
// the label kinds the page asks about (labels.js), kept for the label keys
let kinds = [];
async function postLabel(interactionId, kind, value) {
  if (await sendLabel(interactionId, kind, value, $("label-note")?.value || null)) await loadInteraction();
}
function labelPanel(e, labels) {
  const onLabel = (kind, value) => postLabel(e.interaction_id, kind, value);
  return el(
    "div",
    { class: "panel", id: "label-panel" },
    el("h3", {}, "Your label (keys in brackets)"),
    ...kinds.map((k) => labelRow(k, labels, onLabel, true)),
    el("p", {}, el("label", {}, "note ", el("input", { id: "label-note", type: "text", maxLength: 4000, size: 60 }))),
  );
}
/* The label keys on an interaction's page (not while typing a note, not with a modifier). */
export function labelKeys(event) {
  if (params().get("view") !== "interaction" || event.target.tagName === "INPUT") return;
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const id = params().get("id");
  for (const k of kinds) {
    if (k.yes && event.key === k.yes) {
      event.preventDefault();
      postLabel(id, k.kind, 1);
    }
    if (k.no && event.key === k.no) {
      event.preventDefault();
      postLabel(id, k.kind, 0);
    }
  }
}

function badge(label, v, badWhenTrue) {
  const cls = missing(v) ? "" : v === badWhenTrue ? "bad" : "ok";
  return el("span", { class: `badge ${cls}` }, `${label}: ${missing(v) ? "unknown" : v ? "yes" : "no"}`);
}

function factsPanel(e) {
  const i = e.interaction || {};
  const facts = el("dl", { class: "facts" });
  const add = (k, v) => facts.append(el("dt", {}, k), el("dd", {}, v));
  add("time", `${dateTime(e.timestamp, true)} UTC`);
  add("judge", e.judge);
  add("context ⇒ answer", fmt(e.context_entailment));
  add("ground truth ⇒ answer", fmt(e.ground_truth_entails_answer));
  add("answer ⇒ ground truth", fmt(e.answer_entails_ground_truth));
  add("grounded precision", fmt(e.grounded_precision));
  add("judge calls", fmt(e.judge_calls, "int"));
  add("tokens in / out", `${fmt(e.input_tokens, "int")} / ${fmt(e.output_tokens, "int")}`);
  add("cost", fmt(e.cost_usd, "usd"));
  add("judge latency", `${fmt(e.judge_latency_ms, "int")} ms`);
  add("complete", e.complete ? "yes" : `no (missing ${e.missing.join(", ")})`);
  if (!missing(e.citation_recall) || !missing(e.uncited_statements)) {
    add("citation recall / precision", `${fmt(e.citation_recall)} / ${fmt(e.citation_precision)}`);
    add("uncited statements", fmt(e.uncited_statements));
    add("dangling citations", fmt(e.dangling_citations, "int"));
  }
  if (e.tool_calls) add("tool calls", fmt(e.tool_calls, "int"));
  if ((e.ungrounded_argument_values || []).length)
    add("ungrounded tool arguments", e.ungrounded_argument_values.join(", "));
  if ((i.flags || []).length) add("flags", i.flags.join("; "));
  // your own evaluators (docs/evaluators.md): score or why it is missing, with the version
  for (const [name, c] of Object.entries(e.custom || {})) {
    add(
      `custom.${name} v${c.version}`,
      missing(c.score) ? `missing: ${c.reason}` : `${fmt(c.score)}${c.reason ? ` · ${c.reason}` : ""}`,
    );
  }
  return el("div", { class: "panel" }, facts);
}

function evidencePanel(e, named) {
  const i = e.interaction || {};
  const evidence = evidenceOf(e);
  const tools = (e.evidence || []).length;
  const contexts = i.contexts || [];
  const panel = el(
    "div",
    { class: "panel" },
    el(
      "h3",
      {},
      `Evidence (${plural(contexts.length, "context passage")}${tools ? `, ${tools} from tool results` : ""})`,
    ),
  );
  const supporting = new Set(
    e.pairs
      .filter((p) => p.pair === "context_answer")
      .flatMap((p) => p.hypotheses.flatMap((h) => h.statements))
      .filter((s) => s.verdict === "entailed" && !missing(s.passage))
      .map((s) => s.passage),
  );
  // the passages the answer's statements cite, and those cited for a statement they do not support
  const cited = new Set();
  const miscited = new Set();
  for (const s of e.pairs
    .filter((p) => p.pair === "context_answer")
    .flatMap((p) => p.hypotheses.flatMap((h) => h.statements))) {
    (s.citations?.cited || []).forEach((n, k) => {
      cited.add(n);
      if ((s.citations.precise || [])[k] === false) miscited.add(n);
    });
  }
  evidence.forEach((c, n) => {
    const cls = `passage${c.tool ? " tool-passage" : ""}${supporting.has(n) ? " supporting" : ""}${miscited.has(n) ? " miscited" : ""}`;
    const citedText = miscited.has(n)
      ? " · ✗ cited for a statement it does not support"
      : cited.has(n)
        ? " · cited"
        : "";
    const meta = `${n + 1}${c.tool ? ` · ${named(n)}` : ""}${supporting.has(n) ? " · supports the answer" : ""}${citedText} `;
    panel.append(
      el(
        "div",
        { class: cls, "data-passage": String(n) },
        el("span", { class: "meta" }, meta),
        (c.document && !c.tool ? `[${c.document}] ` : "") + c.text,
      ),
    );
  });
  if (!evidence.length)
    panel.append(el("p", { class: "hint" }, "no evidence: no context and no tool result that counts"));
  return panel;
}

export async function loadInteraction() {
  kinds = await labelKinds();
  const id = params().get("id") || "";
  const { evaluation: e, labels } = await api(`interactions/${encodeURIComponent(id)}`);
  $("interaction-title").textContent = `${e.app} / ${e.model} · ${e.interaction_id}`;
  const i = e.interaction || {};
  const named = passageNamer(e);
  const badges = [
    e.outcome === "unsupported_no_evidence"
      ? el("span", { class: "badge bad", "data-outcome": e.outcome }, "answered without evidence")
      : null,
    badge("hallucination", e.hallucination, true),
    badge("answer refusal", e.answer_refusal, true),
    badge("ground-truth refusal", e.ground_truth_refusal, true),
    missing(e.miscited) ? null : badge("miscited", e.miscited, true),
    e.dangling_citation ? badge("dangling citation", e.dangling_citation, true) : null,
    missing(e.tool_error) ? null : badge("tool error", e.tool_error, true),
    missing(e.ungrounded_arguments) ? null : badge("ungrounded tool arguments", e.ungrounded_arguments, true),
    missing(e.answerable)
      ? null
      : el(
          "span",
          { class: "badge", "data-answerable-source": e.answerable_source },
          `answerable: ${e.answerable ? "yes" : "no"} (${(e.answerable_source || "").replace("_", " ")})`,
        ),
    missing(e.over_refusal) ? null : badge("over-refusal", e.over_refusal, true),
    missing(e.answered_unanswerable) ? null : badge("answered unanswerable", e.answered_unanswerable, true),
  ];
  $("interaction-body").replaceChildren(
    el("p", {}, ...badges.filter(Boolean)),
    labelPanel(e, labels || []),
    factsPanel(e),
    e.conversation_id
      ? el("p", {}, "Conversation ", conversationLink(e.app, e.model, e.conversation_id), " (every turn, in order)")
      : "",
    ...[conversationPanel(i)].filter(Boolean),
    textPanel("Question", i.question),
    ...[stepsPanel(i)].filter(Boolean),
    evidencePanel(e, named),
    textPanel("Answer", i.answer),
    textPanel("Ground truth", i.ground_truth),
    ...e.pairs.map((pair) => pairPanel(pair, named, evidenceOf(e), !missing(e.uncited_statements))),
  );
}
