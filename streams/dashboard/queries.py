"""The dashboard's reads of ClickHouse. Series come from ``window_aggregates`` (one row per window, app
and model), pooled into buckets exactly as schemas/metrics.py declares, never from per-interaction rows;
the drill-down reads the interactions of one bucket. Request values travel only as query parameters.
"""

from __future__ import annotations

from typing import Any

from pipeline.metrics.wilson import wilson_interval
from schemas.alert import Alert
from schemas.dashboard import (
    AlertsQuery,
    BucketInteractions,
    BucketQuery,
    DeadLetterBucket,
    InteractionDetail,
    InteractionRow,
    Options,
    Overview,
    OverviewQuery,
    Series,
    SeriesInfo,
)
from schemas.evaluation import Evaluation
from schemas.latency import add_histograms, quantile
from schemas.metrics import MetricKind, catalogue
from schemas.utc import utc
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.rows import ALERT_COLUMNS
from streams.clickhouse.slices import slice_condition
from streams.clickhouse.sql import APP_FILTER, MODEL_FILTER, in_range, pooled_columns
from streams.clickhouse.sql import TS as _TS
from streams.clickhouse.store import WINDOW_ROWS, ClickHouseStore
from streams.dashboard.rollup import choose_rollup

_BUCKET = "toUnixTimestamp(toStartOfInterval({col}, toIntervalSecond({{step:UInt32}})))"


def _metric_columns() -> str:
    return pooled_columns(catalogue())


def overview_sql(db: str) -> str:
    """One row per (bucket, app, model) with each metric's summed numerator and denominator."""
    return (
        f"SELECT {_BUCKET.format(col='window_start')} AS t, app, model,\n  {_metric_columns()},\n"
        "  sumForEach(judge_latency_histogram) AS latency_histogram\n"
        f"FROM {db}.window_aggregates FINAL\n"
        f"WHERE {in_range('window_start')}\n"
        f"  AND {APP_FILTER}\n"
        "  AND (empty({models:Array(String)}) OR has({models:Array(String)}, model))\n"
        "GROUP BY t, app, model ORDER BY app, model, t"
    )


def _point(row: dict[str, Any], series: Series) -> None:
    """Append one bucket's figures to ``series``."""
    series.t.append(int(row["t"]))
    for m in catalogue():
        num = float(row[f"{m.name}__num"] or 0)
        if m.denominator is None:
            series.values[m.name].append(num)
            continue
        den = int(row[f"{m.name}__den"] or 0)
        series.support[m.name].append(den)
        series.values[m.name].append(num / den if den else None)
        if m.kind is MetricKind.RATE:
            interval = wilson_interval(min(den, round(num)), den) if den else None
            series.lower[m.name].append(interval[0] if interval else None)
            series.upper[m.name].append(interval[1] if interval else None)
    histogram = add_histograms([row["latency_histogram"] or []])
    series.latency_p50_ms.append(quantile(histogram, 0.5))
    series.latency_p95_ms.append(quantile(histogram, 0.95))


def _empty_series(app: str, model: str) -> Series:
    rates = [m.name for m in catalogue() if m.kind is MetricKind.RATE]
    return Series(
        app=app,
        model=model,
        t=[],
        values={m.name: [] for m in catalogue()},
        lower={name: [] for name in rates},
        upper={name: [] for name in rates},
        support={m.name: [] for m in catalogue() if m.denominator is not None},
        latency_p50_ms=[],
        latency_p95_ms=[],
    )


class DashboardQueries:
    def __init__(self, store: ClickHouseStore, refresh_seconds: int = 30) -> None:
        self.store = store
        self.db = store.db
        self.refresh_seconds = refresh_seconds

    async def window_seconds(self) -> int | None:
        rows = await self.store.query(
            "SELECT min(dateDiff('second', window_start, window_end)) AS s, count() AS n "
            f"FROM {self.db}.window_aggregates"
        )
        return int(rows[0]["s"]) if rows and rows[0]["n"] else None

    async def options(self) -> Options:
        rows = await self.store.query(
            "SELECT app, model, min(window_start) AS first, max(window_end) AS last, count() AS windows "
            f"FROM {self.db}.window_aggregates FINAL GROUP BY app, model ORDER BY app, model"
        )
        return Options(
            series=[
                SeriesInfo.model_validate({**r, "first": utc(r["first"]), "last": utc(r["last"])})
                for r in rows
            ],
            window_seconds=await self.window_seconds(),
            refresh_seconds=self.refresh_seconds,
            metrics=[
                {"name": m.name, "label": m.label, "kind": m.kind.value, "unit": m.unit, "over": m.over.value}
                for m in catalogue()
            ],
        )

    def _range(self, q: OverviewQuery | AlertsQuery | BucketQuery) -> dict[str, Any]:
        return {"start": q.start, "end": q.end}

    async def overview(self, q: OverviewQuery) -> Overview:
        rollup, step = choose_rollup(q.end - q.start, await self.window_seconds(), q.rollup)
        params = {**self._range(q), "step": step, "app": q.app or "", "models": q.models}
        rows = await self.store.query(overview_sql(self.db), params)
        by_key: dict[tuple[str, str], Series] = {}
        for row in rows:
            key = (row["app"], row["model"])
            if key not in by_key:
                by_key[key] = _empty_series(*key)
            _point(row, by_key[key])
        alerts = await self.alerts(
            AlertsQuery(
                start=q.start, end=q.end, app=q.app, model=q.models[0] if len(q.models) == 1 else None
            )
        )
        if q.models:
            alerts = [a for a in alerts if a.model in q.models]
        return Overview(
            start=q.start,
            end=q.end,
            rollup=rollup,
            step_seconds=step,
            series=list(by_key.values()),
            dead_letters=await self.dead_letters(q, step),
            alerts=alerts,
        )

    async def dead_letters(self, q: OverviewQuery, step: int) -> list[DeadLetterBucket]:
        rows = await self.store.query(
            f"SELECT {_BUCKET.format(col='failed_at')} AS t, stage, count() AS count "
            f"FROM {self.db}.dead_letters FINAL "
            f"WHERE {in_range('failed_at')} "
            "AND ({app:String} = '' OR app IN ({app:String}, '')) "
            "GROUP BY t, stage ORDER BY t, stage",
            {**self._range(q), "step": step, "app": q.app or ""},
        )
        return [DeadLetterBucket(t=int(r["t"]), stage=r["stage"], count=int(r["count"])) for r in rows]

    async def alerts(self, q: AlertsQuery) -> list[Alert]:
        rows = await self.store.query(
            "SELECT " + ", ".join(ALERT_COLUMNS) + f" FROM {self.db}.alerts FINAL "
            f"WHERE window_end > {{start:{_TS}}} AND window_start < {{end:{_TS}}} "
            f"AND {APP_FILTER} "
            f"AND {MODEL_FILTER} "
            "ORDER BY window_end DESC, rule LIMIT {limit:UInt32}",
            {**self._range(q), "app": q.app or "", "model": q.model or "", "limit": q.limit},
        )
        out = []
        for r in rows:
            for key in ("window_start", "window_end", "fired_at"):
                r[key] = utc(r[key])
            out.append(Alert.model_validate(r))
        return out

    async def bucket(self, q: BucketQuery) -> BucketInteractions:
        """The interactions of one series' bucket, worst first (hallucinated or answered without evidence,
        then the lowest context entailment); of one slice when ``q.slice`` names one (a point of a chart
        filtered to that slice)."""
        condition, values = slice_condition(q.slice, "f")
        where = f"FROM {self.db}.evaluations FINAL WHERE {WINDOW_ROWS} AND {condition}"
        params = {**self._range(q), "app": q.app, "model": q.model, "limit": q.limit, **values}
        rows = await self.store.query(
            "SELECT interaction_id, timestamp, hallucination, context_entailment, "
            "ground_truth_entails_answer, answer_entails_ground_truth, answer_refusal, ground_truth_refusal, "
            "grounded_precision, no_evidence, tool_calls, "
            "length(unsupported_claims) AS unsupported_claims, judge_calls, "
            "input_tokens + output_tokens AS tokens, cost_usd, judge_latency_ms, complete "
            f"{where} ORDER BY greatest(ifNull(hallucination, 0), ifNull(no_evidence, 0)) DESC, "
            "ifNull(context_entailment, 2) ASC, "
            "ifNull(answer_entails_ground_truth, 2) ASC, interaction_id LIMIT {limit:UInt32}",
            params,
        )
        total = await self.store.query(f"SELECT count() AS n {where}", params)
        return BucketInteractions(
            app=q.app,
            model=q.model,
            start=q.start,
            end=q.end,
            interactions=[
                InteractionRow.model_validate({**r, "timestamp": utc(r["timestamp"])}) for r in rows
            ],
            total=int(total[0]["n"]) if total else 0,
            slice=q.slice,
        )

    async def interaction(self, interaction_id: str) -> InteractionDetail | None:
        rows = await self.store.query(
            f"SELECT payload FROM {self.db}.evaluations FINAL WHERE interaction_id = {{iid:String}} LIMIT 1",
            {"iid": interaction_id},
        )
        if not rows:
            return None
        labels = await LabelStore(self.store).of_interaction(interaction_id)
        return InteractionDetail(evaluation=Evaluation.model_validate_json(rows[0]["payload"]), labels=labels)
