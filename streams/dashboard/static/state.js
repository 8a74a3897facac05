/* The page's state: what the API last answered (state, read by the browser tests as window.groundwatch)
   and what the address bar holds (params, setParams), so a link shows the same view. */

export const state = { options: null, overview: null, charts: {}, timer: null, loading: false };

const RANGES = { "1h": 3600, "24h": 86400, "7d": 7 * 86400, "30d": 30 * 86400 };

export function params() {
  return new URLSearchParams(location.search);
}

export function setParams(update, push) {
  const p = params();
  for (const [k, v] of Object.entries(update)) {
    p.delete(k);
    if (Array.isArray(v)) {
      for (const x of v) p.append(k, x);
    } else if (v !== null && v !== undefined && v !== "") p.set(k, v);
  }
  const url = `?${p.toString()}`;
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}

/* An answer of the API that is not a success: its status and the server's reason. */
export class ApiError extends Error {
  constructor(path, status, reason) {
    super(`${path}: ${status} ${reason}`);
    this.status = status;
  }
}

/* GET api/<path>?<query>, or with `body` a POST of it as JSON; the answer's JSON, or an ApiError. */
export async function api(path, query, body) {
  const url = `api/${path}${query ? `?${query.toString()}` : ""}`;
  const init = { credentials: "same-origin" };
  if (body !== undefined) {
    Object.assign(init, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  }
  const response = await fetch(url, init);
  if (!response.ok) {
    let reason = response.statusText;
    try {
      const answer = await response.json();
      const details = answer.details?.length
        ? `: ${answer.details.map((d) => `${d.field} ${d.reason}`).join("; ")}`
        : "";
      reason = answer.error + details;
    } catch {
      /* not JSON */
    }
    throw new ApiError(path, response.status, reason);
  }
  return response.json();
}

/* The range the page shows, in Unix seconds: a preset ending now, a custom one, or (data) all stored data. */
export function currentRange() {
  const p = params();
  const range = p.get("range") || "data";
  if (range === "custom" && p.get("start") && p.get("end")) {
    return { start: Date.parse(p.get("start")) / 1000, end: Date.parse(p.get("end")) / 1000, range };
  }
  if (range in RANGES) {
    const end = Math.ceil(Date.now() / 60000) * 60;
    return { start: end - RANGES[range], end, range };
  }
  // "data": everything stored (the demo's simulated history lies in the past)
  const series = state.options?.series || [];
  if (!series.length) {
    const end = Math.ceil(Date.now() / 60000) * 60;
    return { start: end - 86400, end, range: "data" };
  }
  const first = Math.min(...series.map((s) => Date.parse(s.first) / 1000));
  const last = Math.max(...series.map((s) => Date.parse(s.last) / 1000));
  return { start: Math.floor(first / 3600) * 3600, end: Math.ceil(last / 3600) * 3600 + 3600, range: "data" };
}
