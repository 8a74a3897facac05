"""The Topics page from the sums ClickHouse returns (``streams.clickhouse.topic_rows``): each topic's share
and rates now and in the period before, whether each moved beyond chance, its sparkline and its worst
interactions. Pure.

One rule says a proportion moved: its 95 % Wilson interval now lies wholly above (``rose``) or below
(``fell``) its interval in the period before. It marks a rate that rose and a topic that is growing (its
share of the interactions rose); a topic with no interactions before is ``new``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pipeline.dimensions import NONE
from pipeline.metrics.agreement import Agreement, corrected_rate
from pipeline.metrics.wilson import wilson_interval
from schemas.slices import SliceTotals
from schemas.topics_page import (
    CORRECTED_TOPIC_RATES,
    SPARK_METRICS,
    TOPIC_METRICS,
    CorrectedFigure,
    Proportion,
    TopicChange,
    TopicExample,
    TopicRow,
)

#: per metric, its sums per topic value in one period
Totals = Mapping[str, Sequence[SliceTotals]]


def proportion(events: float, n: int) -> Proportion:
    """``events`` of ``n`` with its Wilson interval (``events`` rounded and kept within [0, n])."""
    if n <= 0:
        return Proportion(value=None, low=None, high=None, n=0)
    k = min(max(round(events), 0), n)
    low, high = wilson_interval(k, n) or (None, None)
    return Proportion(value=k / n, low=low, high=high, n=n)


def change(now: Proportion, before: Proportion) -> TopicChange:
    """``now`` against ``before`` (module docstring: the one rule of a move)."""
    apart = None not in (now.low, now.high, before.low, before.high)
    rose = apart and now.low > before.high  # type: ignore[operator]
    fell = apart and now.high < before.low  # type: ignore[operator]
    return TopicChange(now=now, before=before, rose=bool(rose), fell=bool(fell))


def _by_value(totals: Sequence[SliceTotals]) -> dict[str, SliceTotals]:
    return {t.value: t for t in totals}


def _volume(totals: Totals) -> dict[str, int]:
    """Interactions per topic value (every interaction counts in the first metric's sums)."""
    return {t.value: t.interactions for t in totals.get(TOPIC_METRICS[0], [])}


def _rate(totals: Totals, metric: str, value: str) -> Proportion:
    found = _by_value(totals.get(metric, [])).get(value)
    return proportion(found.total, found.n) if found is not None else proportion(0, 0)


def _status(interactions: int, before: int, share: TopicChange) -> str:
    if interactions and not before:
        return "new"
    return "growing" if share.rose else "shrinking" if share.fell else ""


def corrected(now: Proportion, agreement: Agreement | None, min_per_class: int) -> CorrectedFigure:
    """A rate corrected with the judge's agreement with people's labels (``corrected_rate``)."""
    flagged = round((now.value or 0.0) * now.n)
    found = corrected_rate(flagged, now.n, agreement, min_per_class=min_per_class)
    return CorrectedFigure(value=found.corrected, low=found.low, high=found.high, note=found.note)


def sparklines(
    rows: Sequence[Mapping[str, Any]], t: Sequence[int]
) -> dict[str, dict[str, list[float | None]]]:
    """Per topic value, each of SPARK_METRICS per bucket ``t`` (rows: ``t``, ``value``, ``<m>__num``,
    ``<m>__den``)."""
    at = {start: i for i, start in enumerate(t)}
    out: dict[str, dict[str, list[float | None]]] = {}
    for row in rows:
        i = at.get(int(row["t"]))
        if i is None:
            continue
        lines = out.setdefault(str(row["value"]), {m: [None] * len(t) for m in SPARK_METRICS})
        for m in SPARK_METRICS:
            den = int(row[f"{m}__den"] or 0)
            lines[m][i] = float(row[f"{m}__num"] or 0) / den if den else None
    return out


def topic_rows(
    now: Totals,
    before: Totals,
    spark: Mapping[str, dict[str, list[float | None]]],
    models: Mapping[str, Collection[str]],
    examples: Mapping[str, list[TopicExample]],
    buckets: int,
    agreements: Mapping[str, Agreement] | None = None,
    min_per_class: int = 1,
) -> list[TopicRow]:
    """Every topic of the period (the interactions without one left out): new and growing first, then
    those with a rate that rose, then by volume. ``agreements``: per rate of CORRECTED_TOPIC_RATES, the
    judge's agreement with people's labels it is corrected with."""
    agreed = agreements or {}
    volume, volume_before = _volume(now), _volume(before)
    total, total_before = sum(volume.values()), sum(volume_before.values())
    rows = []
    for value, count in volume.items():
        if value == NONE:
            continue
        share = change(proportion(count, total), proportion(volume_before.get(value, 0), total_before))
        rows.append(
            TopicRow(
                topic=value, interactions=count, interactions_before=volume_before.get(value, 0), share=share,
                status=_status(count, volume_before.get(value, 0), share),
                rates={m: change(_rate(now, m, value), _rate(before, m, value)) for m in TOPIC_METRICS},
                corrected={
                    m: corrected(_rate(now, m, value), agreed.get(m), min_per_class)
                    for m in CORRECTED_TOPIC_RATES
                },
                spark=spark.get(value) or {m: [None] * buckets for m in SPARK_METRICS},
                models=sorted(models.get(value, [])), examples=examples.get(value, []),
            )
        )  # fmt: skip
    return sorted(
        rows,
        key=lambda r: (
            r.status not in ("new", "growing"), not any(c.rose for c in r.rates.values()), -r.interactions,
            r.topic,
        ),
    )  # fmt: skip
