/* groundwatch dashboard, Documents page: per context document, worst first (api/documents). It reads
   the page's range, its app / model filters (one model ticked: that model; else every model) and its
   slice filter (slices.js), whose own app or model term wins. */
"use strict";

function documentsSlice() {
  const p = params();
  const terms = sliceTerms();
  const given = terms.map(termKey);
  if (p.get("app") && !given.includes("app")) terms.push("app:" + p.get("app"));
  const models = p.getAll("model");
  if (models.length === 1 && !given.includes("model")) terms.push("model:" + models[0]);
  return terms;
}

async function loadDocuments() {
  const r = currentRange();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end), limit: "500" });
  documentsSlice().forEach((t) => q.append("slice", t));
  const body = await api("documents", q);
  const where = filterText(body.slice);
  $("documents-summary").textContent = `${body.total} document${body.total === 1 ? "" : "s"} (${where})` +
    (body.total > body.documents.length ? `, the worst ${body.documents.length} shown` : "") +
    (body.statements_without_passage ? `; ${body.statements_without_passage} answer statements have no recorded passage (judged before passages were recorded, or the judge named none)` : "");
  const cols = ["document", "retrieved", "statements judged against it", "unsupported", "95% interval", "contradicted", "supported", ""];
  $("documents-table").querySelector("thead").replaceChildren(el("tr", {}, ...cols.map((c) => el("th", {}, c))));
  const rows = body.documents.map((d) => el("tr", { class: d.never_supporting || (d.lower || 0) > 0.5 ? "bad" : "", "data-document": d.document },
    el("td", {}, d.document || "(no document name)"),
    el("td", { class: "num" }, String(d.retrieved)),
    el("td", { class: "num" }, String(d.statements)),
    el("td", { class: "num" }, fmt(d.unsupported_share, "pct")),
    el("td", { class: "num" }, d.lower === null ? "–" : `${fmt(d.lower, "pct")} – ${fmt(d.upper, "pct")}`),
    el("td", { class: "num" }, String(d.contradicted)),
    el("td", { class: "num" }, String(d.supported)),
    el("td", {}, d.never_supporting ? "retrieved, never supporting anything" : "")));
  $("documents-table").querySelector("tbody").replaceChildren(...rows);
  if (!rows.length) $("documents-table").querySelector("tbody").append(el("tr", {}, el("td", { colSpan: cols.length }, "no documents retrieved in this range")));
}

VIEWS.documents = loadDocuments;
