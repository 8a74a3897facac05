/* The one table helper every table of the dashboard is drawn with.

   renderTable(table, {
     columns: [{ label, title?, num?, cell: (row) => text or node, cellClass?: (row) => string }],
     rows,                      // the data, one object per row
     rowAttrs?: (row) => attrs, // the <tr>'s attributes (class, data-*, onclick), as el() takes them
     empty?: text,              // the one row shown when there are no rows
   })
   The table keeps its id and class; its head and body are replaced. Numeric columns (num) are right-aligned. */
import { el } from "./dom.js";

function section(table, tag) {
  return table.querySelector(tag) || table.appendChild(el(tag));
}

export function renderTable(table, { columns, rows, rowAttrs, empty }) {
  const head = el(
    "tr",
    {},
    ...columns.map((c) => el("th", { class: c.num ? "num" : "", title: c.title || "" }, c.label)),
  );
  section(table, "thead").replaceChildren(head);
  const body = rows.map((row) =>
    el(
      "tr",
      rowAttrs ? rowAttrs(row) : {},
      ...columns.map((c) => {
        const cls = [c.num ? "num" : "", c.cellClass ? c.cellClass(row) : ""].filter(Boolean).join(" ");
        return el("td", cls ? { class: cls } : {}, c.cell(row));
      }),
    ),
  );
  if (!body.length && empty) body.push(el("tr", {}, el("td", { colSpan: columns.length }, empty)));
  section(table, "tbody").replaceChildren(...body);
  return table;
}

/* A new table (the panels that build theirs: Breakdown) drawn by renderTable. */
export function newTable(attrs, spec) {
  return renderTable(el("table", attrs, el("thead"), el("tbody")), spec);
}
