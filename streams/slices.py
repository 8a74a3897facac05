"""Breakdown and "what changed" as the dashboard's API and ``groundwatch report --by`` read them: the sums
per slice from ClickHouse (streams/clickhouse/slices.py), their values and contributions from the pure
pipeline/slices.py; past ``limit`` slices the rest are summed into one ``(rest)`` row."""

from __future__ import annotations

from typing import Any

from pipeline.metrics.wilson import wilson_interval
from pipeline.slices import breakdown, decompose, overall
from schemas.dashboard import Series
from schemas.latency import LATENCY_BUCKETS, quantile
from schemas.metrics import MetricKind, catalogue, named
from schemas.slices import (
    Breakdown,
    BreakdownQuery,
    ChangesQuery,
    Contribution,
    Period,
    SliceValue,
    WhatChanged,
)
from streams.clickhouse.slices import SliceReader

REST = "(rest)"


def _fold_values(values: list[SliceValue], limit: int) -> list[SliceValue]:
    if len(values) <= limit:
        return values
    kept, rest = values[:limit], values[limit:]
    return [
        *kept,
        SliceValue(
            value=REST, metric=None, n=sum(v.n for v in rest), interactions=sum(v.interactions for v in rest),
            share=sum(v.share for v in rest),
        ),
    ]  # fmt: skip


def _fold_contributions(items: list[Contribution], limit: int) -> list[Contribution]:
    if len(items) <= limit:
        return items
    kept, rest = items[:limit], items[limit:]

    def total(name: str) -> float | None:
        values = [getattr(c, name) for c in rest]
        return None if any(v is None for v in values) else sum(values)

    return [
        *kept,
        Contribution(
            value=REST, baseline=None, current=None,
            baseline_share=sum(c.baseline_share for c in rest),
            current_share=sum(c.current_share for c in rest),
            baseline_n=sum(c.baseline_n for c in rest), current_n=sum(c.current_n for c in rest),
            mix=total("mix"), rate=total("rate"), contribution=sum(c.contribution for c in rest),
        ),
    ]  # fmt: skip


async def read_breakdown(reader: SliceReader, q: BreakdownQuery) -> Breakdown:
    metric = named(q.metric)
    totals = await reader.totals(metric, q.dimension, q, q.start, q.end)
    return Breakdown(
        metric=metric.name, kind=metric.kind.value, dimension=q.dimension,
        period=Period(
            start=q.start, end=q.end, value=overall(metric, totals),
            interactions=sum(t.interactions for t in totals),
        ),
        slices=_fold_values(breakdown(metric, totals), q.limit),
    )  # fmt: skip


async def read_changes(reader: SliceReader, q: ChangesQuery) -> WhatChanged:
    metric = named(q.metric)
    before = await reader.totals(metric, q.dimension, q, q.baseline_start, q.baseline_end)
    after = await reader.totals(metric, q.dimension, q, q.start, q.end)
    split = decompose(metric, before, after)
    return WhatChanged(
        metric=metric.name, kind=metric.kind.value, dimension=q.dimension,
        baseline=Period(
            start=q.baseline_start, end=q.baseline_end, value=split.baseline,
            interactions=sum(t.interactions for t in before),
        ),
        current=Period(
            start=q.start, end=q.end, value=split.current, interactions=sum(t.interactions for t in after)
        ),
        change=split.change,
        contributions=_fold_contributions(split.contributions, q.limit),
    )  # fmt: skip


def slice_series(rows: list[dict[str, Any]]) -> list[Series]:
    """The overview's series of one slice, from ``SliceReader.series_rows`` (the same figures the
    overview pools from windows, here from the interactions)."""
    rates = [m.name for m in catalogue() if m.kind is MetricKind.RATE]
    out: dict[tuple[str, str], Series] = {}
    for row in rows:
        key = (str(row["app"]), str(row["model"]))
        s = out.get(key)
        if s is None:
            s = out[key] = Series(
                app=key[0], model=key[1], t=[], values={m.name: [] for m in catalogue()},
                lower={n: [] for n in rates}, upper={n: [] for n in rates},
                support={m.name: [] for m in catalogue() if m.denominator is not None},
                latency_p50_ms=[], latency_p95_ms=[],
            )  # fmt: skip
        s.t.append(int(row["t"]))
        for m in catalogue():
            num, den = float(row[f"{m.name}__num"] or 0), int(row[f"{m.name}__den"] or 0)
            if m.kind is MetricKind.SUM:
                s.values[m.name].append(num)
                continue
            s.support[m.name].append(den)
            s.values[m.name].append(num / den if den else None)
            if m.kind is MetricKind.RATE:
                interval = wilson_interval(min(den, round(num)), den) if den else None
                s.lower[m.name].append(interval[0] if interval else None)
                s.upper[m.name].append(interval[1] if interval else None)
        buckets, counts = row["latency"]
        latency = [0] * LATENCY_BUCKETS
        for bucket, count in zip(buckets, counts, strict=True):
            latency[int(bucket)] += int(count)
        s.latency_p50_ms.append(quantile(latency, 0.5))  # None: no judge call
        s.latency_p95_ms.append(quantile(latency, 0.95))
    return list(out.values())
