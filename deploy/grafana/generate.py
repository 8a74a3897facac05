"""Generate the Grafana dashboard (deploy/grafana/dashboards/groundwatch.json) from schemas/metrics.py.

The dashboard reads ``window_aggregates`` through Grafana's ClickHouse data source plugin
(grafana-clickhouse-datasource, v4). Every rate and mean is pooled exactly as schemas/metrics.py declares it:
the sum of its numerators over the sum of its denominators across the windows of a time bucket
(``$__timeInterval(window_start)``), per app and model, reading the tables with FINAL. The list of metrics
lives in schemas/metrics.py only; this script turns each one into a panel.

    python deploy/grafana/generate.py            # rewrite the JSON
    python deploy/grafana/generate.py --check    # exit 1 if the checked-in JSON is stale

Plugin macros used (expanded by the plugin's backend): ``$__timeFilter(col)``, ``$__timeInterval(col)``;
by its frontend: ``$__conditionalAll(condition, $var)`` (``1=1`` when the variable is "All");
Grafana's own variable formats: ``${var:singlequote}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from schemas.latency import LATENCY_BUCKET_EDGES_MS, LATENCY_BUCKET_GROWTH, LATENCY_BUCKETS  # noqa: E402
from schemas.metrics import METRICS, Metric, MetricKind  # noqa: E402

OUT = Path(__file__).resolve().parent / "dashboards" / "groundwatch.json"

#: the data source provisioned by provisioning/datasources/clickhouse.yaml
DATASOURCE: dict[str, str] = {"type": "grafana-clickhouse-datasource", "uid": "groundwatch-clickhouse"}
DATABASE = "groundwatch"
DASHBOARD_UID = "groundwatch-overview"
#: z of a two-sided 95 % interval (the built-in dashboard uses the same)
Z95 = 1.959963984540054
#: buckets are never finer than the default window (WindowSettings.size_seconds): a finer bucket would only
#: leave gaps between windows
MIN_INTERVAL = "1m"
#: a series is one app and model; the hidden variable ``series`` holds "app / model" for the repeated panels
SERIES_SEPARATOR = " / "
QUANTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p95", 0.95))

Json = dict[str, Any]

# ---- SQL ----------------------------------------------------------------------------------------------


def series_filter() -> str:
    """The app and model selection: each clause is dropped (1=1) when its variable is "All"."""
    return (
        "$__conditionalAll(app IN (${app:singlequote}), $app)\n"
        "  AND $__conditionalAll(model IN (${model:singlequote}), $model)"
    )


def metric_value_sql(metric: Metric) -> str:
    """One bucket's value of ``metric`` from its windows: sum of numerators / sum of denominators."""
    if metric.denominator is None:
        return f"toFloat64(sum({metric.numerator}))"
    return f"sum({metric.numerator}) / sum({metric.denominator})"


def metric_sql(metric: Metric, db: str) -> str:
    """A time series per app and model (labels ``app`` and ``model``); a bucket without a denominator is left
    out rather than drawn as 0."""
    having = f"\nHAVING sum({metric.denominator}) > 0" if metric.denominator is not None else ""
    return (
        "SELECT\n"
        "  $__timeInterval(window_start) AS time,\n"
        "  app,\n"
        "  model,\n"
        f"  {metric_value_sql(metric)} AS {metric.name}\n"
        f"FROM {db}.window_aggregates FINAL\n"
        "WHERE $__timeFilter(window_start)\n"
        f"  AND {series_filter()}\n"
        f"GROUP BY time, app, model{having}\n"
        "ORDER BY time, app, model"
    )


def wilson_sql(k: str, n: str) -> tuple[str, str]:
    """(lower, upper) of the Wilson score interval of k successes in n trials (n > 0), with ``z`` in scope.
    Clamped to [0, 1] and around k/n, which it always contains (rounding would put the lower end a hair
    above 0 at k = 0)."""
    p = f"({k} / {n})"
    denom = f"(1 + z * z / {n})"
    centre = f"(({p} + z * z / (2 * {n})) / {denom})"
    half = f"(z * sqrt({p} * (1 - {p}) / {n} + z * z / (4 * {n} * {n})) / {denom})"
    return f"greatest(0, least({p}, {centre} - {half}))", f"least(1, greatest({p}, {centre} + {half}))"


def wilson_band_sql(metric: Metric, db: str) -> str:
    """One app and model (``$series``): the pooled rate and its 95 % Wilson interval per bucket."""
    assert metric.kind is MetricKind.RATE and metric.denominator is not None
    lower, upper = wilson_sql("k", "n")
    return (
        f"WITH {Z95} AS z\n"
        "SELECT\n"
        "  time,\n"
        f"  k / n AS {metric.name},\n"
        f"  {lower} AS wilson_lower,\n"
        f"  {upper} AS wilson_upper\n"
        "FROM (\n"
        "  SELECT\n"
        "    $__timeInterval(window_start) AS time,\n"
        f"    toFloat64(sum({metric.denominator})) AS n,\n"
        f"    least(toFloat64(round(sum({metric.numerator}))), n) AS k\n"
        f"  FROM {db}.window_aggregates FINAL\n"
        "  WHERE $__timeFilter(window_start)\n"
        f"    AND concat(app, '{SERIES_SEPARATOR}', model) IN (${{series:singlequote}})\n"
        "  GROUP BY time\n"
        "  HAVING n > 0\n"
        ")\n"
        "ORDER BY time"
    )


def _array(values: list[float]) -> str:
    return "[" + ", ".join(repr(float(v)) for v in values) + "]"


def latency_sql(db: str) -> str:
    """p50 and p95 of the judge calls of each bucket, from the windows' summed latency histograms, exactly as
    schemas/latency.py ``quantile`` reads a histogram (geometric interpolation inside the bucket)."""
    edges = list(LATENCY_BUCKET_EDGES_MS)
    lo = [edges[i - 1] if i > 0 else 0.0 for i in range(LATENCY_BUCKETS)]
    hi = [edges[i] if i < len(edges) else lo[i] * LATENCY_BUCKET_GROWTH for i in range(LATENCY_BUCKETS)]
    picks = []
    values = []
    for name, q in QUANTILES:
        picks.append(
            f"    arrayFirstIndex((c, x) -> x > 0 AND c >= {q} * calls, cum, h) AS i_{name},\n"
            f"    lo_edges[i_{name}] AS lo_{name},\n"
            f"    hi_edges[i_{name}] AS hi_{name},\n"
            f"    ({q} * calls - (cum[i_{name}] - h[i_{name}])) / h[i_{name}] AS share_{name}"
        )
        values.append(
            f"  if(lo_{name} <= 0, hi_{name} * share_{name}, "
            f"lo_{name} * pow(hi_{name} / lo_{name}, share_{name})) AS judge_latency_{name}_ms"
        )
    return (
        "SELECT\n"
        "  time,\n"
        "  app,\n"
        "  model,\n" + ",\n".join(values) + "\n"
        "FROM (\n"
        "  WITH\n"
        f"    {_array(lo)} AS lo_edges,\n"
        f"    {_array(hi)} AS hi_edges\n"
        "  SELECT\n"
        "    time,\n"
        "    app,\n"
        "    model,\n"
        "    h,\n"
        "    arraySum(h) AS calls,\n"
        "    arrayCumSum(h) AS cum,\n" + ",\n".join(picks) + "\n"
        "  FROM (\n"
        "    SELECT\n"
        "      $__timeInterval(window_start) AS time,\n"
        "      app,\n"
        "      model,\n"
        "      sumForEach(judge_latency_histogram) AS h\n"
        f"    FROM {db}.window_aggregates FINAL\n"
        "    WHERE $__timeFilter(window_start)\n"
        "      AND $__conditionalAll(app IN (${app:singlequote}), $app)\n"
        "      AND $__conditionalAll(model IN (${model:singlequote}), $model)\n"
        "    GROUP BY time, app, model\n"
        "  )\n"
        "  WHERE calls > 0\n"
        ")\n"
        "ORDER BY time, app, model"
    )


def dead_letters_sql(db: str) -> str:
    """Dead letters per bucket and stage. A letter whose message named no app or model (it could not be
    read) is counted under every selection, as the built-in dashboard does."""
    return (
        "SELECT\n"
        "  $__timeInterval(failed_at) AS time,\n"
        "  stage,\n"
        "  toFloat64(count()) AS dead_letters\n"
        f"FROM {db}.dead_letters FINAL\n"
        "WHERE $__timeFilter(failed_at)\n"
        "  AND ($__conditionalAll(app IN (${app:singlequote}), $app) OR app = '')\n"
        "  AND ($__conditionalAll(model IN (${model:singlequote}), $model) OR model = '')\n"
        "GROUP BY time, stage\n"
        "ORDER BY time, stage"
    )


def alerts_annotation_sql(db: str) -> str:
    return (
        "SELECT\n"
        "  window_end AS time,\n"
        f"  concat(app, '{SERIES_SEPARATOR}', model, ': ', message) AS text,\n"
        "  rule AS tags\n"
        f"FROM {db}.alerts FINAL\n"
        "WHERE $__timeFilter(window_end)\n"
        f"  AND {series_filter()}\n"
        "ORDER BY time"
    )


def app_variable_sql(db: str) -> str:
    return f"SELECT DISTINCT app FROM {db}.window_aggregates ORDER BY app"


def model_variable_sql(db: str) -> str:
    return (
        f"SELECT DISTINCT model FROM {db}.window_aggregates\n"
        "WHERE $__conditionalAll(app IN (${app:singlequote}), $app)\n"
        "ORDER BY model"
    )


def series_variable_sql(db: str) -> str:
    return (
        f"SELECT DISTINCT concat(app, '{SERIES_SEPARATOR}', model) AS series FROM {db}.window_aggregates\n"
        f"WHERE {series_filter()}\n"
        "ORDER BY series"
    )


# ---- dashboard model ----------------------------------------------------------------------------------


def target(sql: str, fmt: int = 0) -> Json:
    """A raw-SQL query of the plugin; format 0 = time series (string columns become labels), 1 = table."""
    return {"datasource": DATASOURCE, "editorType": "sql", "format": fmt, "rawSql": sql, "refId": "A"}


_UNITS = {"": "percentunit", "count": "short", "tokens": "short", "USD": "currencyUSD"}
_PER_SERIES_NAME = "${__field.labels.app} / ${__field.labels.model}"


def timeseries(
    title: str,
    sql: str,
    *,
    description: str,
    unit: str,
    display_name: str | None = _PER_SERIES_NAME,
    share: bool = False,
    custom: Json | None = None,
    overrides: list[Json] | None = None,
) -> Json:
    defaults: Json = {"unit": unit, "custom": {"lineWidth": 2, "fillOpacity": 0, "showPoints": "auto"}}
    if custom:
        defaults["custom"].update(custom)
    if display_name:
        defaults["displayName"] = display_name
    if share:
        defaults.update({"min": 0, "max": 1, "decimals": 3})
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "interval": MIN_INTERVAL,
        "targets": [target(sql)],
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "none"},
        },
    }


def _describe(metric: Metric) -> str:
    if metric.kind is MetricKind.SUM:
        how = f"the sum of `{metric.numerator}`"
    else:
        how = f"sum(`{metric.numerator}`) / sum(`{metric.denominator}`)"
    return (
        f"{metric.label} per app and model: {how} over the windows of each bucket "
        "(window_aggregates FINAL), pooled as schemas/metrics.py declares. "
        + ("Lower is better." if metric.lower_is_better else "Higher is better.")
    )


def metric_panel(metric: Metric, db: str) -> Json:
    return timeseries(
        metric.label,
        metric_sql(metric, db),
        description=_describe(metric),
        unit=_UNITS.get(metric.unit, "short"),
        share=metric.kind is not MetricKind.SUM,
    )


def wilson_panel(metric: Metric, db: str) -> Json:
    panel = timeseries(
        f"{metric.label}, 95 % Wilson interval: $series",
        wilson_band_sql(metric, db),
        description=(
            f"{metric.label} of one app / model, pooled over the windows of each bucket, with the 95 % "
            f"Wilson score interval of sum({metric.numerator}) successes in sum({metric.denominator}) "
            "trials as a band. One panel per selected app / model."
        ),
        unit="percentunit",
        display_name=None,
        share=True,
        overrides=[
            {
                "matcher": {"id": "byName", "options": metric.name},
                "properties": [{"id": "displayName", "value": metric.label}],
            },
            {
                "matcher": {"id": "byName", "options": "wilson_lower"},
                "properties": [
                    {"id": "custom.lineWidth", "value": 0},
                    {"id": "custom.hideFrom", "value": {"legend": True, "tooltip": False, "viz": False}},
                ],
            },
            {
                "matcher": {"id": "byName", "options": "wilson_upper"},
                "properties": [
                    {"id": "custom.lineWidth", "value": 0},
                    {"id": "custom.fillBelowTo", "value": "wilson_lower"},
                    {"id": "custom.fillOpacity", "value": 20},
                    {"id": "custom.hideFrom", "value": {"legend": True, "tooltip": False, "viz": False}},
                ],
            },
        ],
    )
    panel["repeat"] = "series"
    panel["repeatDirection"] = "h"
    panel["maxPerRow"] = 3
    return panel


def latency_panel(db: str) -> Json:
    return timeseries(
        "Judge latency p50 / p95",
        latency_sql(db),
        description=(
            "Quantiles of the judge calls (uncached, not lexical) of each bucket, from the windows' "
            "judge_latency_histogram summed per bucket (counts per log-spaced bucket of schemas/latency.py, "
            "interpolated inside the bucket: within one bucket's width, 20 %), not from per-window p50/p95."
        ),
        unit="ms",
        display_name="${__field.labels.app} / ${__field.labels.model} ${__field.name}",
    )


def dead_letters_panel(db: str) -> Json:
    return timeseries(
        "Dead letters by stage",
        dead_letters_sql(db),
        description=(
            "Messages a stage could not process (dead_letters FINAL), per bucket and stage. Letters whose "
            "message named no app/model are counted under every selection."
        ),
        unit="short",
        display_name="${__field.labels.stage}",
        custom={"drawStyle": "bars", "fillOpacity": 80, "stacking": {"mode": "normal", "group": "A"}},
    )


def row(title: str) -> Json:
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


def query_variable(name: str, label: str, sql: str, *, hide: int = 0) -> Json:
    return {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DATASOURCE,
        "query": {"editorType": "sql", "rawSql": sql},
        "definition": sql,
        "multi": True,
        "includeAll": True,
        "allValue": None,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
        "refresh": 2,
        "regex": "",
        "sort": 1,
        "hide": hide,
    }


def layout(panels: list[Json]) -> list[Json]:
    """Grid positions: rows span the width, other panels two abreast (a repeated panel, three)."""
    y = 0
    x = 0
    out = []
    for i, panel in enumerate(panels, start=1):
        panel = {"id": i, **panel}
        if panel["type"] == "row":
            if x:
                y += 8
                x = 0
            panel["gridPos"] = {"h": 1, "w": 24, "x": 0, "y": y}
            y += 1
        elif "repeat" in panel:
            if x:
                y += 8
                x = 0
            panel["gridPos"] = {"h": 8, "w": 8, "x": 0, "y": y}
            y += 8
        else:
            panel["gridPos"] = {"h": 8, "w": 12, "x": x, "y": y}
            x += 12
            if x >= 24:
                x = 0
                y += 8
        out.append(panel)
    return out


def build_dashboard(db: str = DATABASE) -> Json:
    rates = [m for m in METRICS if m.kind is MetricKind.RATE]
    means = [m for m in METRICS if m.kind is MetricKind.MEAN]
    sums = [m for m in METRICS if m.kind is MetricKind.SUM]
    panels: list[Json] = [
        row("Rates"),
        *(metric_panel(m, db) for m in rates),
        row("Entailment and grounded-unit precision (means)"),
        *(metric_panel(m, db) for m in means),
        row("Volume, failures and judge cost"),
        *(metric_panel(m, db) for m in sums),
        dead_letters_panel(db),
        latency_panel(db),
        row("Rates with their 95 % Wilson interval, one panel per app / model"),
        *(wilson_panel(m, db) for m in rates),
    ]
    return {
        "uid": DASHBOARD_UID,
        "title": "groundwatch",
        "description": (
            "RAG evaluation trends per app and model from groundwatch's window_aggregates, dead_letters and "
            "alerts (generated by deploy/grafana/generate.py from schemas/metrics.py; do not edit by hand)."
        ),
        "tags": ["groundwatch"],
        "editable": False,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "timezone": "utc",
        "templating": {
            "list": [
                query_variable("app", "App", app_variable_sql(db)),
                query_variable("model", "Model", model_variable_sql(db)),
                query_variable("series", "App / model", series_variable_sql(db), hide=2),
            ]
        },
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                },
                {
                    "name": "groundwatch alerts",
                    "datasource": DATASOURCE,
                    "enable": True,
                    "hide": False,
                    "iconColor": "red",
                    "target": {**target(alerts_annotation_sql(db), fmt=1), "refId": "Anno"},
                },
            ]
        },
        "panels": layout(panels),
    }


def render(db: str = DATABASE) -> str:
    return json.dumps(build_dashboard(db), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the JSON on disk is not up to date")
    parser.add_argument("--database", default=DATABASE, help="ClickHouse database (default: groundwatch)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write (default: {OUT})")
    args = parser.parse_args(argv)
    text = render(args.database)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run python deploy/grafana/generate.py", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
