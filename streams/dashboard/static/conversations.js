/* groundwatch dashboard, Conversations page (api/conversations): the closed conversations whose last turn
   is in the range, worst first, for the page's app / model filters and slice filter (documents.js's
   documentsSlice); and the conversation view (api/conversation): every turn in order with its verdicts,
   the turn that left it unresolved highlighted. Uses the helpers of dashboard.js ($, el, api, params,
   setParams, iso, fmt, currentRange, route). All text from the data is set with textContent. */
"use strict";

function openConversation(app, model, id) {
  setParams({ view: "conversation", app_c: app, model_c: model, cid: id }, true);
  route();
}

function conversationLink(app, model, id, text) {
  const link = el("a", { href: "#", class: "conversation-link" }, text || id);
  link.addEventListener("click", (e) => { e.preventDefault(); openConversation(app, model, id); });
  return link;
}

async function loadConversations() {
  const r = currentRange();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end), limit: "500" });
  documentsSlice().forEach((t) => q.append("slice", t));
  const body = await api("conversations", q);
  $("conversations-summary").textContent = `${body.total} closed conversation${body.total === 1 ? "" : "s"} (${filterText(body.slice)})` +
    (body.total > body.conversations.length ? `, the worst ${body.conversations.length} shown` : "");
  const cols = ["conversation", "app / model", "last turn (UTC)", "turns", "unresolved", "hallucinated turns", "refusals", "re-asked", "contradictions", "cost"];
  $("conversations-table").querySelector("thead").replaceChildren(el("tr", {}, ...cols.map((c) => el("th", {}, c))));
  const rows = body.conversations.map((c) => el("tr", { class: c.ended_unresolved || c.hallucinated_turns ? "bad" : "", "data-conversation": c.conversation_id },
    el("td", {}, conversationLink(c.app, c.model, c.conversation_id)),
    el("td", {}, `${c.app} / ${c.model}`),
    el("td", {}, String(c.last_turn_at).slice(0, 19).replace("T", " ")),
    el("td", { class: "num" }, String(c.turns)),
    el("td", {}, c.ended_unresolved ? "yes" : "no"),
    el("td", { class: "num" }, String(c.hallucinated_turns)),
    el("td", { class: "num" }, String(c.refusals)),
    el("td", { class: "num" }, String(c.reasked_turns)),
    el("td", { class: "num" }, String(c.contradictions)),
    el("td", { class: "num" }, fmt(c.cost_usd, "usd"))));
  $("conversations-table").querySelector("tbody").replaceChildren(...rows);
  if (!rows.length) $("conversations-table").querySelector("tbody").append(el("tr", {}, el("td", { colSpan: cols.length }, "no closed conversations in this range")));
}

async function loadConversation() {
  const p = params();
  const q = new URLSearchParams({ app: p.get("app_c") || "", model: p.get("model_c") || "", id: p.get("cid") || "" });
  const { rollup: c, stored, turns } = await api("conversation", q);
  $("conversation-title").textContent = `${c.app} / ${c.model} · conversation ${c.conversation_id}`;
  const flag = (text, bad) => el("span", { class: "badge " + (bad ? "bad" : "ok") }, text);
  const summary = el("p", {},
    flag(c.ended_unresolved ? "ended unresolved" : "resolved", c.ended_unresolved),
    flag(`${c.hallucinated_turns} hallucinated turn${c.hallucinated_turns === 1 ? "" : "s"}`, c.hallucinated_turns > 0),
    flag(`${c.reasked_turns} re-asked`, c.reasked_turns > 0),
    flag(`${c.contradictions} contradiction${c.contradictions === 1 ? "" : "s"}`, c.contradictions > 0),
    el("span", { class: "hint" }, ` ${c.turns} turns, ${String(c.first_turn_at).slice(0, 19).replace("T", " ")} – ${String(c.last_turn_at).slice(0, 19).replace("T", " ")} UTC${stored ? "" : "; still open (not rolled up yet)"}`));
  const items = turns.map((t, n) => {
    const open = el("a", { href: "#", class: "interaction-link" }, t.interaction_id);
    open.addEventListener("click", (e) => { e.preventDefault(); setParams({ view: "interaction", id: t.interaction_id }, true); route(); });
    const verdicts = el("p", {},
      t.judged ? el("span", {}) : el("span", { class: "badge" }, "not judged"),
      t.hallucination ? flag("hallucination", true) : null,
      t.answer_refusal ? flag("refusal", true) : null,
      t.reasked ? flag("asked again", true) : null,
      t.contradicts ? flag("contradicts an earlier answer", true) : null,
      el("span", { class: "meta" }, ` context ⇒ answer ${fmt(t.context_entailment)} · `), open);
    return el("div", { class: "panel turn-pair" + (t.unresolving ? " highlight unresolving" : ""), "data-turn": String(n + 1), "data-interaction": t.interaction_id },
      el("h3", {}, `Turn ${n + 1} · ${String(t.timestamp).slice(0, 19).replace("T", " ")} UTC${t.unresolving ? " · left it unresolved" : ""}`),
      el("div", { class: "turn turn-user" }, el("span", { class: "meta" }, "user: "), t.question),
      el("div", { class: "turn turn-assistant" }, el("span", { class: "meta" }, "assistant: "), t.answer),
      verdicts);
  });
  $("conversation-body").replaceChildren(summary, ...items);
}

VIEWS.conversations = loadConversations;
VIEWS.conversation = loadConversation;
