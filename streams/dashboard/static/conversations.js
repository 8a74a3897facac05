/* Conversations page (api/conversations): the closed conversations whose last turn is in the range, worst
   first, for the page's app / model filters and slice filter (the same slice the Documents page sends);
   and the conversation view (api/conversation): its turns in order, a page at a time (URL parameter turn:
   the page's first, from 0), with their verdicts, tool steps and
   its statements (the interaction page's renderers, from api/interactions/{id}), the turn that left it
   unresolved highlighted, and the reviewer's resolved label on the conversation (api/labels). */
import { documentsSlice } from "./documents.js";
import { $, el } from "./dom.js";
import { dateRange, dateTime, fmt, iso, plural } from "./format.js";
import { evidenceOf, pairPanel, passageNamer, stepsPanel } from "./interaction.js";
import { labelKinds, labelRow, sendLabel } from "./labels.js";
import { conversationLink } from "./links.js";
import { go } from "./router.js";
import { filterText } from "./slices.js";
import { api, currentRange, params } from "./state.js";
import { renderTable } from "./table.js";

const yesNo = (v) => (v ? "yes" : "no");

export async function loadConversations() {
  const r = currentRange();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end), limit: "500" });
  for (const t of documentsSlice()) q.append("slice", t);
  const body = await api("conversations", q);
  $("conversations-summary").textContent =
    `${plural(body.total, "closed conversation")} (${filterText(body.slice)})` +
    (body.total > body.conversations.length ? `, the worst ${fmt(body.conversations.length, "int")} shown` : "");
  renderTable($("conversations-table"), {
    columns: [
      { label: "conversation", cell: (c) => conversationLink(c.app, c.model, c.conversation_id) },
      { label: "app / model", cell: (c) => `${c.app} / ${c.model}` },
      { label: "last turn (UTC)", cell: (c) => dateTime(c.last_turn_at, true) },
      { label: "turns", num: true, cell: (c) => fmt(c.turns, "int") },
      { label: "unresolved", cell: (c) => yesNo(c.ended_unresolved) },
      { label: "hallucinated turns", num: true, cell: (c) => fmt(c.hallucinated_turns, "int") },
      { label: "refusals", num: true, cell: (c) => fmt(c.refusals, "int") },
      { label: "re-asked", num: true, cell: (c) => fmt(c.reasked_turns, "int") },
      { label: "contradictions", num: true, cell: (c) => fmt(c.contradictions, "int") },
      { label: "cost", num: true, cell: (c) => fmt(c.cost_usd, "usd") },
    ],
    rows: body.conversations,
    rowAttrs: (c) => ({
      class: c.ended_unresolved || c.hallucinated_turns ? "bad" : "",
      "data-conversation": c.conversation_id,
    }),
    empty: "no closed conversations in this range",
  });
}

function flag(text, bad) {
  return el("span", { class: `badge ${bad ? "bad" : "ok"}` }, text);
}

/* A turn's tool steps and its answer's statements with their support verdicts, as the interaction page
   shows them (null: the turn's evaluation could not be read). */
function turnDetail(detail) {
  if (!detail) return [el("p", { class: "hint" }, "statements and tool steps not available")];
  const e = detail.evaluation;
  const answer = e.pairs.filter((p) => p.pair === "context_answer" && p.hypotheses.length);
  const cites = e.uncited_statements !== null && e.uncited_statements !== undefined;
  const named = passageNamer(e);
  return [stepsPanel(e.interaction || {}), ...answer.map((p) => pairPanel(p, named, evidenceOf(e), cites))].filter(
    Boolean,
  );
}

function turnPanel(t, n, detail) {
  const open = el(
    "a",
    {
      href: "#",
      class: "interaction-link",
      onclick: (e) => {
        e.preventDefault();
        go({ view: "interaction", id: t.interaction_id });
      },
    },
    t.interaction_id,
  );
  const verdicts = el(
    "p",
    {},
    t.judged ? "" : el("span", { class: "badge" }, "not judged"),
    detail?.evaluation.outcome === "unsupported_no_evidence"
      ? el("span", { class: "badge bad", "data-outcome": "unsupported_no_evidence" }, "answered without evidence")
      : "",
    t.hallucination ? flag("hallucination", true) : "",
    t.answer_refusal ? flag("refusal", true) : "",
    t.reasked ? flag("asked again", true) : "",
    t.contradicts ? flag("contradicts an earlier answer", true) : "",
    el("span", { class: "meta" }, ` context ⇒ answer ${fmt(t.context_entailment)} · `),
    open,
  );
  return el(
    "div",
    {
      class: `panel turn-pair${t.unresolving ? " highlight unresolving" : ""}`,
      "data-turn": String(n + 1),
      "data-interaction": t.interaction_id,
    },
    el("h3", {}, `Turn ${n + 1} · ${dateTime(t.timestamp, true)} UTC${t.unresolving ? " · left it unresolved" : ""}`),
    el("div", { class: "turn turn-user" }, el("span", { class: "meta" }, "user: "), t.question),
    el("div", { class: "turn turn-assistant" }, el("span", { class: "meta" }, "assistant: "), t.answer),
    verdicts,
    ...turnDetail(detail),
  );
}

/* The reviewer's verdict on the conversation's outcome (label kind resolved, on the conversation_id). */
async function postResolved(id, value) {
  if (await sendLabel(id, "resolved", value)) await loadConversation();
}

async function resolvedKind() {
  return (await labelKinds("conversation")).find((k) => k.kind === "resolved");
}

function resolvedPanel(id, labels, kind) {
  return el(
    "div",
    { class: "panel", id: "conversation-label" },
    labelRow(kind, labels, (_, v) => postResolved(id, v)),
  );
}

/* "Turns 51-100 of 5,000" with links to the page before and after (none when one page holds them all). */
function pager(offset, limit, total, shown) {
  if (total <= limit) return "";
  const link = (text, to, enabled) =>
    enabled
      ? el(
          "a",
          {
            href: "#",
            class: "turn-page",
            "data-turn": String(to),
            onclick: (e) => {
              e.preventDefault();
              go({ turn: to ? String(to) : null });
            },
          },
          text,
        )
      : el("span", { class: "meta" }, text);
  return el(
    "p",
    { class: "pager" },
    link("← earlier turns", Math.max(0, offset - limit), offset > 0),
    ` · turns ${fmt(offset + 1, "int")}–${fmt(offset + shown, "int")} of ${fmt(total, "int")} · `,
    link("later turns →", offset + limit, offset + limit < total),
  );
}

export async function loadConversation() {
  const p = params();
  const q = new URLSearchParams({
    app: p.get("app_c") || "",
    model: p.get("model_c") || "",
    id: p.get("cid") || "",
    offset: p.get("turn") || "0",
  });
  const [page, kind] = await Promise.all([api("conversation", q), resolvedKind()]);
  const { rollup: c, stored, turns, labels, offset, limit, total } = page;
  // each turn's evaluation (its statements and tool steps), read alongside
  const details = await Promise.all(
    turns.map((t) => api(`interactions/${encodeURIComponent(t.interaction_id)}`).catch(() => null)),
  );
  $("conversation-title").textContent = `${c.app} / ${c.model} · conversation ${c.conversation_id}`;
  const summary = el(
    "p",
    {},
    flag(c.ended_unresolved ? "ended unresolved" : "resolved", c.ended_unresolved),
    flag(plural(c.hallucinated_turns, "hallucinated turn"), c.hallucinated_turns > 0),
    flag(`${fmt(c.reasked_turns, "int")} re-asked`, c.reasked_turns > 0),
    flag(plural(c.contradictions, "contradiction"), c.contradictions > 0),
    el(
      "span",
      { class: "hint" },
      ` ${plural(c.turns, "turn")}, ${dateRange(c.first_turn_at, c.last_turn_at)}${stored ? "" : "; still open (not rolled up yet)"}`,
    ),
  );
  $("conversation-body").replaceChildren(
    summary,
    resolvedPanel(c.conversation_id, labels || [], kind),
    pager(offset, limit, total, turns.length),
    ...turns.map((t, n) => turnPanel(t, offset + n, details[n])),
    pager(offset, limit, total, turns.length),
  );
}
