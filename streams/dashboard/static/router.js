/* Views by name (the address bar's view=...): each page module's load function, registered by main.js.
   route() shows the chosen view, reloads the options and the view, and schedules the auto-refresh. */
import { $, status } from "./dom.js";
import { timeOfDay } from "./format.js";
import { api, params, setParams, state } from "./state.js";

const views = new Map();
let beforeView = () => {};

export function registerView(name, load) {
  views.set(name, load);
}

/* What runs once the options are loaded, before any view (the filters). */
export function onOptions(render) {
  beforeView = render;
}

export async function route() {
  const asked = params().get("view");
  const view = views.has(asked) ? asked : "overview";
  for (const v of views.keys()) $(`view-${v}`).hidden = v !== view;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === view);
  if (state.loading) return;
  state.loading = true;
  status("loading…");
  try {
    state.options = await api("options");
    beforeView();
    await views.get(view)();
    status(`updated ${timeOfDay(new Date())}`);
    document.body.dataset.loaded = view;
  } catch (err) {
    status(String(err.message || err), true);
    document.body.dataset.loaded = "error";
  } finally {
    state.loading = false;
  }
  scheduleRefresh();
}

export function scheduleRefresh() {
  clearTimeout(state.timer);
  if (params().get("auto") === "1" && state.options) {
    state.timer = setTimeout(route, state.options.refresh_seconds * 1000);
  }
}

/* Change the address (a new history entry) and show what it names. */
export function go(update) {
  setParams(update, true);
  route();
}
