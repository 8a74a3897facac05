/* Numbers and dates as the page shows them: Intl formats in one locale (the page's text is English),
   dates and times in UTC. iso() is the machine form the API and the address bar take. */

const LOCALE = "en-US";
const number = (options) => new Intl.NumberFormat(LOCALE, options);

const NUMBER = {
  pct: number({ style: "percent", minimumFractionDigits: 1, maximumFractionDigits: 1 }),
  usd: number({ style: "currency", currency: "USD", minimumFractionDigits: 4, maximumFractionDigits: 4 }),
  int: number({ maximumFractionDigits: 0 }),
  "": number({ minimumFractionDigits: 3, maximumFractionDigits: 3 }),
};
// a change in points: "+1.5 pt", "-0.2 pt"; counts and scores signed the same way
const SIGNED = {
  rate: number({ minimumFractionDigits: 1, maximumFractionDigits: 1, signDisplay: "exceptZero" }),
  sum: number({ maximumFractionDigits: 0, signDisplay: "exceptZero" }),
  "": number({ minimumFractionDigits: 3, maximumFractionDigits: 3, signDisplay: "exceptZero" }),
};
const USD_AXIS = number({ style: "currency", currency: "USD", maximumSignificantDigits: 2 });
const P_VALUE = number({ minimumFractionDigits: 3, maximumFractionDigits: 3 });

/* No value: null, undefined or NaN. */
export const missing = (v) => v === null || v === undefined || Number.isNaN(v);

/* A value in a unit: "pct" (a share: 12.3%), "usd" ($0.0012), "int" (1,234), "" (a score: 0.875). */
export function fmt(v, unit = "") {
  if (missing(v)) return "–";
  return (NUMBER[unit] || NUMBER[""]).format(v);
}

/* A change of a metric of this kind (rate, sum, mean): rates in percentage points. */
export function points(v, kind) {
  if (missing(v)) return "–";
  if (kind === "rate") return `${SIGNED.rate.format(100 * v)} pt`;
  return (SIGNED[kind] || SIGNED[""]).format(v);
}

export function usdAxis(v) {
  return USD_AXIS.format(v);
}

export function pValue(p) {
  if (missing(p)) return "–";
  return p < 0.001 ? "<0.001" : P_VALUE.format(p);
}

const DATE_TIME = new Intl.DateTimeFormat(LOCALE, {
  timeZone: "UTC",
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  hourCycle: "h23",
});
const DATE_TIME_SECONDS = new Intl.DateTimeFormat(LOCALE, {
  timeZone: "UTC",
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hourCycle: "h23",
});
const TIME = new Intl.DateTimeFormat(LOCALE, {
  timeZone: "UTC",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hourCycle: "h23",
});

const toDate = (t) => (typeof t === "number" ? new Date(t * 1000) : new Date(t));

/* A moment (Unix seconds or an ISO string) in UTC: "Nov 23, 2026, 12:00" (withSeconds: "12:00:05"). */
export function dateTime(t, withSeconds) {
  if (t === null || t === undefined || t === "") return "–";
  const d = toDate(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return (withSeconds ? DATE_TIME_SECONDS : DATE_TIME).format(d);
}

/* Two moments as a UTC range, the day once when both fall on it: "Nov 21, 2026, 08:00 – 14:00 UTC". */
export function dateRange(start, end) {
  const a = toDate(start);
  const b = toDate(end);
  if (Number.isNaN(a.getTime()) || Number.isNaN(b.getTime()) || b < a)
    return `${dateTime(start)} – ${dateTime(end)} UTC`;
  return `${DATE_TIME.formatRange(a, b)} UTC`;
}

export function timeOfDay(d) {
  return `${TIME.format(d)} UTC`;
}

/* Unix seconds as the API's ISO form, without milliseconds: 2026-11-23T12:00:00Z. */
export function iso(sec) {
  return new Date(sec * 1000).toISOString().replace(".000Z", "Z");
}

export function plural(n, word) {
  return `${fmt(n, "int")} ${word}${n === 1 ? "" : "s"}`;
}

/* The unit a metric of the catalogue (/api/options: kind, unit) is shown in: rates as shares, money in
   dollars, sums and token counts as counts, other means (entailment, tool calls per interaction) as scores. */
export function metricUnit(m) {
  if (m.kind === "rate") return "pct";
  if (m.unit === "USD") return "usd";
  if (m.kind === "sum" || m.unit === "tokens") return "int";
  return "";
}
