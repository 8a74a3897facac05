/* Alerts page: the alerts of the range (api/alerts), firing and resolved. */
import { $ } from "./dom.js";
import { dateRange, dateTime, fmt, iso } from "./format.js";
import { api, currentRange, params } from "./state.js";
import { renderTable } from "./table.js";

export async function loadAlerts() {
  const r = currentRange();
  const p = params();
  const q = new URLSearchParams({ start: iso(r.start), end: iso(r.end) });
  if (p.get("app")) q.set("app", p.get("app"));
  const models = p.getAll("model");
  if (models.length === 1) q.set("model", models[0]);
  let alerts = await api("alerts", q);
  if (models.length > 1) alerts = alerts.filter((a) => models.includes(a.model));
  const stateOf = (a) => a.state || "firing";
  renderTable($("alerts-table"), {
    columns: [
      { label: "state", cell: stateOf },
      { label: "rule", cell: (a) => a.rule },
      { label: "app / model", cell: (a) => `${a.app} / ${a.model}${a.slice ? ` [${a.slice}]` : ""}` },
      { label: "metric", cell: (a) => a.metric },
      { label: "started (UTC)", cell: (a) => dateTime(a.starts_at || a.window_end) },
      { label: "ended (UTC)", cell: (a) => dateTime(a.ends_at) },
      { label: "baseline", num: true, cell: (a) => fmt(a.baseline) },
      { label: "current", num: true, cell: (a) => fmt(a.value) },
      { label: "threshold", num: true, cell: (a) => `${a.op} ${a.threshold}` },
      { label: "window", cell: (a) => dateRange(a.window_start, a.window_end) },
      { label: "interactions", num: true, cell: (a) => fmt(a.interactions, "int") },
      { label: "message", cell: (a) => a.message },
    ],
    rows: alerts,
    rowAttrs: (a) => ({ class: stateOf(a) === "resolved" ? "resolved" : "bad", "data-state": stateOf(a) }),
    empty: "no alerts in this range",
  });
}
