/* The header's filters: app, models, time range (presets or a custom UTC range), auto-refresh. */
import { $, el, status } from "./dom.js";
import { iso } from "./format.js";
import { go, route, scheduleRefresh } from "./router.js";
import { currentRange, params, setParams, state } from "./state.js";

// a datetime-local input's value, read as UTC (the hint beside the inputs says so)
function toLocalInput(sec) {
  return new Date(sec * 1000).toISOString().slice(0, 16);
}

export function renderFilters() {
  const p = params();
  const series = state.options.series;
  const apps = [...new Set(series.map((s) => s.app))].sort();
  const app = p.get("app") || "";
  $("app").replaceChildren(
    el("option", { value: "" }, "all apps"),
    ...apps.map((a) => el("option", { value: a, selected: a === app }, a)),
  );
  const models = [...new Set(series.filter((s) => !app || s.app === app).map((s) => s.model))].sort();
  const chosen = p.getAll("model");
  const box = $("models");
  box.replaceChildren(el("legend", {}, "Models"));
  for (const m of models) {
    const input = el("input", { type: "checkbox", value: m, checked: !chosen.length || chosen.includes(m) });
    input.addEventListener("change", () => {
      const ticked = [...box.querySelectorAll("input:checked")].map((i) => i.value);
      go({ model: ticked.length === models.length ? [] : ticked });
    });
    box.append(el("label", {}, input, ` ${m}`));
  }
  const r = currentRange();
  for (const b of document.querySelectorAll("#ranges button"))
    b.classList.toggle("active", b.dataset.range === r.range);
  $("from").value = toLocalInput(r.start);
  $("to").value = toLocalInput(r.end);
  $("auto").checked = p.get("auto") === "1";
}

export function wireFilters() {
  $("app").addEventListener("change", () => go({ app: $("app").value, model: [] }));
  for (const b of document.querySelectorAll("#ranges button")) {
    b.addEventListener("click", () => go({ range: b.dataset.range, start: null, end: null }));
  }
  $("custom").addEventListener("submit", (e) => {
    e.preventDefault();
    const start = Date.parse(`${$("from").value}:00Z`) / 1000;
    const end = Date.parse(`${$("to").value}:00Z`) / 1000;
    if (!(end > start)) {
      status("custom range: 'to' must be after 'from'", true);
      return;
    }
    go({ range: "custom", start: iso(start), end: iso(end) });
  });
  $("auto").addEventListener("change", () => {
    setParams({ auto: $("auto").checked ? "1" : null });
    scheduleRefresh();
  });
  window.addEventListener("popstate", route);
}
