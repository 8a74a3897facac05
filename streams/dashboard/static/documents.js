/* Documents page: per context document, worst first (api/documents), with the citations of its
   passages and those for a statement it does not support; a click on a column's header orders by it. It reads the page's range, its
   app / model filters (one model ticked: that model; else every model) and its slice filter
   (slices.js), whose own app or model term wins; the Conversations page sends the same slice. */
import { $ } from "./dom.js";
import { fmt, iso, plural } from "./format.js";
import { filterText, sliceTerms, termKey } from "./slices.js";
import { api, currentRange, params } from "./state.js";
import { renderTable } from "./table.js";

/* The slice filter with the page's app and one ticked model as terms, unless the filter names its own. */
export function documentsSlice() {
  const p = params();
  const terms = sliceTerms();
  const given = terms.map(termKey);
  if (p.get("app") && !given.includes("app")) terms.push(`app:${p.get("app")}`);
  const models = p.getAll("model");
  if (models.length === 1 && !given.includes("model")) terms.push(`model:${models[0]}`);
  return terms;
}

export async function loadDocuments() {
  const r = currentRange();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end), limit: "500" });
  for (const t of documentsSlice()) q.append("slice", t);
  const body = await api("documents", q);
  const where = filterText(body.slice);
  $("documents-summary").textContent =
    `${plural(body.total, "document")} (${where})` +
    (body.total > body.documents.length ? `, the worst ${fmt(body.documents.length, "int")} shown` : "") +
    (body.statements_without_passage
      ? `; ${fmt(body.statements_without_passage, "int")} answer statements have no recorded passage (judged before passages were recorded, or the judge named none)`
      : "");
  renderTable($("documents-table"), {
    columns: [
      { label: "document", cell: (d) => d.document || "(no document name)", sort: (d) => d.document },
      { label: "retrieved", num: true, cell: (d) => fmt(d.retrieved, "int"), sort: (d) => d.retrieved },
      {
        label: "statements judged against it",
        num: true,
        cell: (d) => fmt(d.statements, "int"),
        sort: (d) => d.statements,
      },
      {
        label: "unsupported",
        num: true,
        cell: (d) => fmt(d.unsupported_share, "pct"),
        sort: (d) => d.unsupported_share,
      },
      {
        label: "95% interval",
        num: true,
        cell: (d) => (d.lower === null ? "–" : `${fmt(d.lower, "pct")} – ${fmt(d.upper, "pct")}`),
        sort: (d) => d.lower,
      },
      { label: "contradicted", num: true, cell: (d) => fmt(d.contradicted, "int"), sort: (d) => d.contradicted },
      { label: "supported", num: true, cell: (d) => fmt(d.supported, "int"), sort: (d) => d.supported },
      {
        label: "cited",
        title: "citations of its passages: answer statements citing one of them",
        num: true,
        cell: (d) => fmt(d.cited, "int"),
        sort: (d) => d.cited,
      },
      {
        label: "miscited",
        title: "citations of its passages for a statement the passage does not support",
        num: true,
        cell: (d) => fmt(d.miscited, "int"),
        cellClass: (d) => (d.miscited ? "miscited" : ""),
        sort: (d) => d.miscited,
      },
      { label: "", cell: (d) => (d.never_supporting ? "retrieved, never supporting anything" : "") },
    ],
    rows: body.documents,
    rowAttrs: (d) => ({
      class: d.never_supporting || (d.lower || 0) > 0.5 ? "bad" : "",
      "data-document": d.document,
    }),
    empty: "no documents retrieved in this range",
  });
}
