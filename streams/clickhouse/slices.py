"""Slices read from ``evaluations`` (one current row per interaction, its ``dimensions`` map): each
catalogue metric summed per value of one dimension, and the series of one slice over time. Windows hold
no dimensions, so slices are computed from the interactions, in ClickHouse; pipeline/slices.py turns
the sums into values, intervals and contributions. A conversation metric is computed from the
conversations instead (``conversations_sql``: one row per conversation, in the slice of its last turn).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pipeline.dimensions import NONE
from schemas.latency import LATENCY_BUCKET_EDGES_MS
from schemas.metrics import JUDGED_CONVERSATIONS, Metric, MetricKind, Over, catalogue
from schemas.slice_filter import COLUMNS, SliceFilter
from schemas.slices import SliceQuery, SliceTotals
from streams.clickhouse.sql import APP_FILTER, in_range
from streams.clickhouse.store import ClickHouseStore

RANGE = (
    f"{in_range()} "
    f"AND {APP_FILTER} "
    "AND (empty({models:Array(String)}) OR has({models:Array(String)}, model))"
)


def dimension_sql(param: str) -> str:
    """A dimension's value, ``(none)`` when the row has none; the name is the query parameter ``param``."""
    return f"if(mapContains(dimensions, {{{param}:String}}), dimensions[{{{param}:String}}], '{NONE}')"


def slice_condition(f: SliceFilter, prefix: str) -> tuple[str, dict[str, Any]]:
    """``(sql, params)`` of the one slice filter over ``evaluations``: every set field equal to its value
    (a dimension through ``dimension_sql``, so ``(none)`` matches the rows without it); ``1`` for an empty
    filter. The parameters are named with ``prefix``, so two slices share one query (Compare). Over
    ``evaluations FINAL`` the condition applies to each interaction's current row."""
    parts: list[str] = []
    params: dict[str, Any] = {}
    for key in COLUMNS:
        value = getattr(f, key)
        if value is not None:
            parts.append(f"{key} = {{{prefix}_{key}:String}}")
            params[f"{prefix}_{key}"] = value
    for i, (name, value) in enumerate(f.dimensions.items()):
        dim, val = f"{prefix}_d{i}", f"{prefix}_v{i}"
        parts.append(f"{dimension_sql(dim)} = {{{val}:String}}")
        params[dim], params[val] = name, value
    return (" AND ".join(parts) or "1"), params


def where(condition: str) -> str:
    """The current rows of a period, app, models and slice (``condition``, from ``slice_condition``):
    over ``evaluations FINAL`` the conditions apply to each interaction's current row; the table's sorting
    key starts with app, model and time, so the range prunes (docs/capacity.md, "Table layout")."""
    return f"{RANGE} AND {condition}"


def carried(metric: Metric, within: str = "1") -> tuple[str, str]:
    """(value, condition) of a rate or mean over interactions: its per-row value as Float64 (its
    ``source``, or a custom evaluator's score) and the condition of the ``evaluations`` rows ``within``
    holds that carry it (judged, the value known). Compare's per-question figures read it too."""
    if metric.coverage:  # a custom evaluator's coverage: whether it scored each judged interaction
        key = f"'{metric.custom_key}'"  # a checked name (schemas.evaluators.NAME_PATTERN)
        return f"toFloat64(mapContains(custom_scores, {key}))", f"({within}) AND judged = 1"
    if metric.custom_key is not None:  # a custom evaluator: its score in the custom_scores map
        key = f"'{metric.custom_key}'"  # a checked name (schemas.evaluators.NAME_PATTERN)
        return f"custom_scores[{key}]", f"({within}) AND judged = 1 AND mapContains(custom_scores, {key})"
    value = f"toFloat64(assumeNotNull({metric.source}))"
    return value, f"({within}) AND judged = 1 AND {metric.source} IS NOT NULL"


def metric_sql(metric: Metric, within: str = "1") -> tuple[str, str]:
    """(numerator, denominator) aggregate expressions of one metric over the ``evaluations`` rows
    ``within`` holds: a rate or mean over the judged rows carrying its source (``carried``); a sum of what
    each row adds to its columns (``Metric.per_row``, as the window aggregator counts it; denominator 0).
    The one translation of the catalogue into per-interaction SQL (breakdown, Compare). A conversation
    metric has no per-interaction value: 0 over 0 (undefined)."""
    if metric.over is Over.CONVERSATION:
        return "toFloat64(0)", "toUInt64(0)"
    if metric.kind is MetricKind.SUM and metric.custom_key is not None:  # its missing scores
        key = f"'{metric.custom_key}'"
        return f"sumIf(toFloat64(mapContains(custom_missing, {key})), ({within}) AND judged = 1)", "0"
    if metric.kind is MetricKind.SUM:
        return " + ".join(row_sum.sql(within) for row_sum in metric.per_row), "0"
    value, condition = carried(metric, within)
    return f"sumIf({value}, {condition})", f"countIf({condition})"


#: a conversation's figures as ``conversations_sql`` gives them (fields of ConversationRollup)
_ROLLUP_FIGURES = ("turns", "judged_turns", "any_hallucinated", "ended_unresolved", "reasked", "contradicted")


def conversations_sql(db: str) -> str:
    """One row per conversation whose last turn is in the period: its figures (``_ROLLUP_FIGURES``),
    ``app``, ``model``, ``timestamp`` (its last turn's time: conversations are windowed by it) and the
    ``dimensions`` of its last turn, so ``where``, ``slice_condition`` and ``dimension_sql`` apply to it as
    to an interaction: a conversation is in the slice of its last turn. A closed conversation is its stored
    rollup (``conversations FINAL``); an interaction without a conversation_id is a conversation of one
    turn (``pipeline.conversations.single``), read from its evaluation as the windows count it (its own
    ``conversations`` row, keyed by its interaction_id, is left out: it would count it twice)."""
    stored = (
        "SELECT c.app AS app, c.model AS model, c.last_turn_at AS timestamp, l.dimensions AS dimensions, "
        + ", ".join(f"c.{f} AS {f}" for f in _ROLLUP_FIGURES)
        + f" FROM {db}.conversations AS c FINAL LEFT JOIN (SELECT app, model, "
        f"assumeNotNull(conversation_id) AS conversation_id, dimensions FROM {db}.evaluations FINAL "
        f"WHERE conversation_id IS NOT NULL AND {in_range()} "
        "ORDER BY timestamp DESC, interaction_id DESC LIMIT 1 BY app, model, conversation_id) AS l "
        "ON c.app = l.app AND c.model = l.model AND c.conversation_id = l.conversation_id "
        f"WHERE {in_range('c.last_turn_at')} AND c.interaction_id = ''"
    )
    hallucinated = "judged = 1 AND ifNull(hallucination, 0) = 1"
    single = (
        "SELECT app, model, timestamp, dimensions, toUInt32(1) AS turns, toUInt32(judged) AS judged_turns, "
        f"toUInt8({hallucinated}) AS any_hallucinated, "
        f"toUInt8(({hallucinated}) OR (judged = 1 AND ifNull(answer_refusal, 0) = 1)) AS ended_unresolved, "
        "toUInt8(0) AS reasked, toUInt8(0) AS contradicted "
        f"FROM {db}.evaluations FINAL WHERE conversation_id IS NULL AND {in_range()}"
    )
    return f"{stored} UNION ALL {single}"


def conversation_counted(metric: Metric, within: str = "1") -> str:
    """The rows of ``conversations_sql`` ``within`` holds that a conversation rate or mean is over, as a
    window counts them (``pipeline.conversations.counts_in``): a rate read from the judge's verdicts over
    the conversations with a judged turn, the others over every conversation."""
    return f"({within})" + (" AND judged_turns > 0" if metric.count_column == JUDGED_CONVERSATIONS else "")


def conversation_metric_sql(metric: Metric, within: str = "1") -> tuple[str, str]:
    """(numerator, denominator) aggregate expressions of a conversation metric over the rows of
    ``conversations_sql`` ``within`` holds (``conversation_counted``); a sum counts the conversations."""
    if metric.kind is MetricKind.SUM:
        return " + ".join(row_sum.sql(within) for row_sum in metric.per_row), "0"
    condition = conversation_counted(metric, within)
    return f"sumIf(toFloat64({metric.source}), {condition})", f"countIf({condition})"


def rows_of(db: str, metric: Metric) -> str:
    """What a metric is computed over: the current evaluations, or the conversations (a subquery)."""
    return f"({conversations_sql(db)})" if metric.over is Over.CONVERSATION else f"{db}.evaluations FINAL"


def breakdown_sql(db: str, metric: Metric, condition: str) -> str:
    """Per value of the dimension ``dim``: the metric's numerator and denominator and the rows (the
    interactions; for a conversation metric the conversations)."""
    over = metric.over is Over.CONVERSATION
    num, den = conversation_metric_sql(metric) if over else metric_sql(metric)
    return (
        f"SELECT {dimension_sql('dim')} AS value, {num} AS total, {den} AS n, count() AS interactions "
        f"FROM {rows_of(db, metric)} WHERE {where(condition)} GROUP BY value"
    )


#: a judge call's latency bucket (``schemas.latency.bucket_of``: how many edges lie below it), in SQL
_LATENCY_BUCKET = (
    "toUInt16(arraySum(arrayMap(e -> x > e, [" + ", ".join(repr(e) for e in LATENCY_BUCKET_EDGES_MS) + "])))"
)


def series_sql(db: str, condition: str) -> str:
    """One row per (bucket, app, model) with every metric's numerator and denominator and the judge
    calls' latency histogram (``latency_buckets``, ``latency_counts``: the windows' histogram, so a
    sliced chart's quantiles are defined as the unsliced one's, ``schemas.latency.quantile``)."""
    parts = []
    for m in catalogue():
        num, den = metric_sql(m)
        parts += [f"{num} AS `{m.name}__num`", f"{den} AS `{m.name}__den`"]
    return (
        "SELECT toUnixTimestamp(toStartOfInterval(timestamp, toIntervalSecond({step:UInt32}))) AS t, "
        f"app, model, {', '.join(parts)}, "
        f"sumMapIf(arrayMap(x -> {_LATENCY_BUCKET}, call_latencies_ms), "
        "arrayMap(x -> toUInt64(1), call_latencies_ms), judged = 1) AS latency "
        f"FROM {db}.evaluations FINAL WHERE {where(condition)} GROUP BY t, app, model ORDER BY app, model, t"
    )


def sliced(q: SliceQuery) -> tuple[str, dict[str, Any]]:
    """The query's slice condition and its parameters with the period's app and models."""
    condition, values = slice_condition(q.slice, "f")
    return condition, {"app": q.app or "", "models": q.models, **values}


class SliceReader:
    def __init__(self, store: ClickHouseStore) -> None:
        self.store = store
        self.db = store.db

    async def totals(
        self, metric: Metric, dimension: str, q: SliceQuery, start: datetime, end: datetime
    ) -> list[SliceTotals]:
        condition, values = sliced(q)
        rows = await self.store.query(
            breakdown_sql(self.db, metric, condition),
            {**values, "start": start, "end": end, "dim": dimension},
        )
        return [
            SliceTotals(
                value=str(r["value"]), total=float(r["total"] or 0), n=int(r["n"]),
                interactions=int(r["interactions"]),
            )
            for r in rows
        ]  # fmt: skip

    async def series_rows(self, q: SliceQuery, step: int) -> list[dict[str, Any]]:
        condition, values = sliced(q)
        return await self.store.query(
            series_sql(self.db, condition), {**values, "start": q.start, "end": q.end, "step": step}
        )

    async def dimensions(self, start: datetime, end: datetime) -> list[str]:
        """The dimension names stored in a period."""
        rows = await self.store.query(
            f"SELECT DISTINCT arrayJoin(mapKeys(dimensions)) AS name FROM {self.db}.evaluations "
            f"WHERE {in_range()} ORDER BY name",
            {"start": start, "end": end},
        )
        return [str(r["name"]) for r in rows]
