/* The one table helper every table of the dashboard is drawn with.

   renderTable(table, {
     columns: [{ label, title?, num?, cell: (row) => text or node, cellClass?: (row) => string,
                 sort?: (row) => number or string }],
     rows,                      // the data, one object per row
     rowAttrs?: (row) => attrs, // the <tr>'s attributes (class, data-*, onclick), as el() takes them
     empty?: text,              // the one row shown when there are no rows
   })
   The table keeps its id and class; its head and body are replaced. Numeric columns (num) are right-aligned.
   A column with a sort key has a header button: the first click orders the rows by it, largest first
   (numbers) or A-Z, the next click the other way (aria-sort says which); missing values go last. */
import { el } from "./dom.js";

function section(table, tag) {
  return table.querySelector(tag) || table.appendChild(el(tag));
}

function ordered(rows, column, direction) {
  const key = (r) => column.sort(r);
  const absent = (v) => v === null || v === undefined || Number.isNaN(v);
  return [...rows].sort((a, b) => {
    const x = key(a);
    const y = key(b);
    if (absent(x) || absent(y)) return absent(x) - absent(y);
    const c = typeof x === "string" ? x.localeCompare(y) : x - y;
    return direction === "ascending" ? c : -c;
  });
}

export function renderTable(table, spec) {
  const { columns, rowAttrs, empty } = spec;
  const by = columns.find((c) => c.sort && c.label === table.dataset.sortColumn);
  const direction = table.dataset.sortDirection || "descending";
  const rows = by ? ordered(spec.rows, by, direction) : spec.rows;
  const header = (c) => {
    if (!c.sort) return c.label;
    const next = by === c && direction === "descending" ? "ascending" : "descending";
    const resort = () => {
      table.dataset.sortColumn = c.label;
      table.dataset.sortDirection = next;
      renderTable(table, spec);
    };
    const arrow = by === c ? (direction === "descending" ? " ▼" : " ▲") : "";
    return el(
      "button",
      { type: "button", class: "sort", onclick: resort, title: `order by ${c.label}` },
      c.label + arrow,
    );
  };
  const head = el(
    "tr",
    {},
    ...columns.map((c) =>
      el(
        "th",
        {
          class: c.num ? "num" : "",
          title: c.title || "",
          ...(c.sort ? { "aria-sort": by === c ? direction : "none" } : {}),
        },
        header(c),
      ),
    ),
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
