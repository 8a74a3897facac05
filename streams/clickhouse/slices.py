"""Slices read from ``evaluations`` (one current row per interaction, its ``dimensions`` map): each
catalogue metric summed per value of one dimension, and the series of one slice over time. Windows hold
no dimensions, so slices are computed from the interactions, in ClickHouse; pipeline/slices.py turns
the sums into values, intervals and contributions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pipeline.dimensions import NONE
from schemas.metrics import METRICS, Metric, MetricKind
from schemas.slices import SliceFilter, SliceTotals, slice_pair
from streams.clickhouse.store import ClickHouseStore

_TS = "DateTime64(3, 'UTC')"

#: per-interaction SQL over ``evaluations`` adding up to each ``window_aggregates`` column a sum metric
#: names, as streams/windows/aggregator.py counts it (tokens, cost and incomplete over judged rows only)
ROW_SUMS: dict[str, str] = {
    "count": "1",
    "judged": "judged",
    "skipped": "1 - judged",
    "incomplete": "judged * (1 - complete)",
    "input_tokens": "judged * input_tokens",
    "output_tokens": "judged * output_tokens",
    "cost_usd": "judged * cost_usd",
}

RANGE = (
    f"timestamp >= {{start:{_TS}}} AND timestamp < {{end:{_TS}}} "
    "AND ({app:String} = '' OR app = {app:String}) "
    "AND (empty({models:Array(String)}) OR has({models:Array(String)}, model))"
)


def dimension_sql(param: str) -> str:
    """A dimension's value, ``(none)`` when the row has none; the name is the query parameter ``param``."""
    return f"if(mapContains(dimensions, {{{param}:String}}), dimensions[{{{param}:String}}], '{NONE}')"


#: the rows of one slice, parameters ``fdim`` and ``fvalue`` (schemas.slices.slice_pair: ``fdim`` = '' for
#: every row); over ``evaluations FINAL`` it applies to each interaction's current row
IN_SLICE = f"({{fdim:String}} = '' OR {dimension_sql('fdim')} = {{fvalue:String}})"


def slice_params(text: str | None) -> dict[str, str]:
    """The query parameters of ``IN_SLICE`` for a validated filter (None: every row)."""
    fdim, fvalue = slice_pair(text)
    return {"fdim": fdim, "fvalue": fvalue}


def where(db: str) -> str:
    """The current rows of a period, app, models and slice: over ``evaluations FINAL`` the conditions
    apply to each interaction's current row; the table's sorting key starts with app, model and time, so
    the range prunes (docs/capacity.md, "Table layout")."""
    return f"{RANGE} AND {IN_SLICE}"


def metric_sql(metric: Metric) -> tuple[str, str]:
    """(numerator, denominator) aggregate expressions of one metric over ``evaluations`` rows: a rate or
    mean over the judged rows carrying its source; a sum over its columns (denominator 0)."""
    if metric.kind is MetricKind.SUM:
        return " + ".join(f"sum(toFloat64({ROW_SUMS[c]}))" for c in metric.sum_columns), "0"
    carried = f"judged = 1 AND {metric.source} IS NOT NULL"
    return f"sumIf(toFloat64({metric.source}), {carried})", f"countIf({carried})"


def breakdown_sql(db: str, metric: Metric) -> str:
    num, den = metric_sql(metric)
    return (
        f"SELECT {dimension_sql('dim')} AS value, {num} AS total, {den} AS n, count() AS interactions "
        f"FROM {db}.evaluations FINAL WHERE {where(db)} GROUP BY value"
    )


def series_sql(db: str) -> str:
    """One row per (bucket, app, model) with every metric's numerator and denominator and the judge
    calls' latency quantiles."""
    parts = []
    for m in METRICS:
        num, den = metric_sql(m)
        parts += [f"{num} AS `{m.name}__num`", f"{den} AS `{m.name}__den`"]
    return (
        "SELECT toUnixTimestamp(toStartOfInterval(timestamp, toIntervalSecond({step:UInt32}))) AS t, "
        f"app, model, {', '.join(parts)}, "
        "quantilesArrayIf(0.5, 0.95)(call_latencies_ms, judged = 1) AS latency "
        f"FROM {db}.evaluations FINAL WHERE {where(db)} GROUP BY t, app, model ORDER BY app, model, t"
    )


def params(q: SliceFilter, start: datetime | None = None, end: datetime | None = None) -> dict[str, Any]:
    return {
        "start": start or q.start, "end": end or q.end, "app": q.app or "", "models": q.models,
        **slice_params(q.slice),
    }  # fmt: skip


class SliceReader:
    def __init__(self, store: ClickHouseStore) -> None:
        self.store = store
        self.db = store.db

    async def totals(
        self, metric: Metric, dimension: str, q: SliceFilter, start: datetime, end: datetime
    ) -> list[SliceTotals]:
        rows = await self.store.query(
            breakdown_sql(self.db, metric), {**params(q, start, end), "dim": dimension}
        )
        return [
            SliceTotals(
                value=str(r["value"]), total=float(r["total"] or 0), n=int(r["n"]),
                interactions=int(r["interactions"]),
            )
            for r in rows
        ]  # fmt: skip

    async def series_rows(self, q: SliceFilter, step: int) -> list[dict[str, Any]]:
        return await self.store.query(series_sql(self.db), {**params(q), "step": step})

    async def dimensions(self, start: datetime, end: datetime) -> list[str]:
        """The dimension names stored in a period."""
        rows = await self.store.query(
            f"SELECT DISTINCT arrayJoin(mapKeys(dimensions)) AS name FROM {self.db}.evaluations "
            f"WHERE timestamp >= {{start:{_TS}}} AND timestamp < {{end:{_TS}}} ORDER BY name",
            {"start": start, "end": end},
        )
        return [str(r["name"]) for r in rows]
