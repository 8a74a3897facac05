"""Two slices over one period: every catalogue metric per slice from the interactions themselves (so a
slice may be any filter, not only an app/model series), the difference B - A with its 95 % interval and a
two-sided test, and the repeated questions on which the slices differ most.

Rates: Newcombe's interval and Fisher's exact test, both the alert rules' own (``streams.alerts.stats``).
Means: Welch's interval and z-test from each slice's per-interaction variance. Sums: the difference only.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

from pipeline.metrics.wilson import Z95
from schemas.compare import CompareQuery, CompareReport, MetricDifference, QuestionDifference
from schemas.evaluation import Evaluation
from schemas.metrics import Metric, MetricKind, Over, catalogue, named
from streams.alerts.stats import Obs, fisher_greater, newcombe_lower, upper_change
from streams.clickhouse.slices import (
    carried,
    conversation_counted,
    conversation_metric_sql,
    conversations_sql,
    metric_sql,
    slice_condition,
)
from streams.clickhouse.sql import in_range
from streams.clickhouse.store import ClickHouseStore

SIGNIFICANCE = 0.05
#: the rate and the mean the repeated questions are compared on (the mean's lowest interaction is each
#: side's example); their columns and conditions come from the catalogue
QUESTION_RATE, QUESTION_MEAN = named("hallucination_rate"), named("mean_context_entailment")


def slices_sql(db: str, cond_a: str, cond_b: str, over: Over = Over.INTERACTION) -> str:
    """One row, both slices in one read: for each side (columns prefixed ``a__``, ``b__``) and each rate
    and mean its n, sum (and sum of squares), for each sum its total; of the metrics over interactions
    (from the evaluations) or over conversations (``conversations_sql``: a conversation is in the slice
    of its last turn)."""
    parts = []
    for side, cond in (("a", cond_a), ("b", cond_b)):
        for m in catalogue():
            if m.over is not over:
                continue
            # the catalogue per interaction or conversation: one translation each
            num, den = conversation_metric_sql(m, cond) if over is Over.CONVERSATION else metric_sql(m, cond)
            if m.kind is MetricKind.SUM:
                parts.append(f"{num} AS `{side}__{m.name}__total`")
                continue
            parts.append(f"{den} AS `{side}__{m.name}__n`")
            parts.append(f"{num} AS `{side}__{m.name}__sum`")
            if over is Over.CONVERSATION:
                value, known = f"toFloat64({m.source})", conversation_counted(m, cond)
            else:
                value, known = carried(m, cond)
            parts.append(f"sumIf(pow({value}, 2), {known}) AS `{side}__{m.name}__sq`")
    where = f"{in_range()} AND (({cond_a}) OR ({cond_b}))"
    rows = f"({conversations_sql(db)})" if over is Over.CONVERSATION else f"{db}.evaluations FINAL"
    return f"SELECT {', '.join(parts)} FROM {rows} WHERE {where}"


def side(row: dict[str, Any], prefix: str) -> dict[str, Any]:
    """One slice's columns of ``slices_sql``'s row, without the prefix."""
    return {k.removeprefix(f"{prefix}__"): v for k, v in row.items() if k.startswith(f"{prefix}__")}


def two_sided_fisher(a: Obs, b: Obs) -> float:
    """Two-sided p-value of Fisher's exact test: twice the smaller one-sided p (capped at 1)."""
    return min(1.0, 2 * min(fisher_greater(b, a), fisher_greater(a, b)))


def rate_difference(a: Obs, b: Obs) -> tuple[float, float, float, float]:
    """(b - a, lower, upper, p) of two rates: Newcombe's hybrid score interval, Fisher's exact test."""
    difference = b.total / b.n - a.total / a.n
    return difference, newcombe_lower(b, a, Z95), upper_change(b, a, Z95), two_sided_fisher(a, b)


def mean_difference(
    a: tuple[int, float, float], b: tuple[int, float, float]
) -> tuple[float, float | None, float | None, float | None]:
    """(b - a, lower, upper, p) of two means from (n, sum, sum of squares): Welch's normal interval and
    z-test; no interval with fewer than 2 values a side."""
    (na, sa, qa), (nb, sb, qb) = a, b
    difference = sb / nb - sa / na
    if na < 2 or nb < 2:
        return difference, None, None, None
    va = max(qa - sa * sa / na, 0.0) / (na - 1)
    vb = max(qb - sb * sb / nb, 0.0) / (nb - 1)
    se = math.sqrt(va / na + vb / nb)
    if se == 0:
        return difference, difference, difference, 1.0 if difference == 0 else 0.0
    p = 2 * (1 - NormalDist().cdf(abs(difference) / se))
    return difference, difference - Z95 * se, difference + Z95 * se, p


def metric_difference(m: Metric, a: dict[str, Any], b: dict[str, Any]) -> MetricDifference:
    base: dict[str, Any] = {"name": m.name, "label": m.label, "kind": m.kind.value, "unit": m.unit}
    base["lower_is_better"] = m.lower_is_better
    if m.kind is MetricKind.SUM:
        ta, tb = float(a[f"{m.name}__total"] or 0), float(b[f"{m.name}__total"] or 0)
        return MetricDifference(
            **base, a=ta, b=tb, a_n=0, b_n=0, difference=tb - ta, lower=None, upper=None,
            p_value=None, test=None, significant=False,
        )  # fmt: skip
    na, nb = int(a[f"{m.name}__n"]), int(b[f"{m.name}__n"])
    sa, sb = float(a[f"{m.name}__sum"] or 0), float(b[f"{m.name}__sum"] or 0)
    va, vb = (sa / na if na else None), (sb / nb if nb else None)
    if not na or not nb:
        return MetricDifference(
            **base, a=va, b=vb, a_n=na, b_n=nb, difference=None, lower=None, upper=None,
            p_value=None, test=None, significant=False,
        )  # fmt: skip
    low: float | None
    up: float | None
    p: float | None
    if m.kind is MetricKind.RATE:
        d, low, up, p = rate_difference(Obs(round(sa), na), Obs(round(sb), nb))
        test = "fisher"
    else:
        qa, qb = float(a[f"{m.name}__sq"] or 0), float(b[f"{m.name}__sq"] or 0)
        d, low, up, p = mean_difference((na, sa, qa), (nb, sb, qb))
        test = "welch"
    return MetricDifference(
        **base, a=va, b=vb, a_n=na, b_n=nb, difference=d, lower=low, upper=up, p_value=p,
        test=test if p is not None else None, significant=p is not None and p < SIGNIFICANCE,
    )  # fmt: skip


#: a difference below this is rounding (averages summed in another order), not a different answer
_DIGITS = 9


def per_question_sql(db: str, cond_a: str, cond_b: str) -> str:
    """One row per question asked in both slices (judged interactions in the range): each side's count,
    ``QUESTION_RATE`` and ``QUESTION_MEAN`` (NULL where none is known), the A and B interaction of lowest
    ``QUESTION_MEAN`` value, and how far the sides differ on the two (rounded; 0 where a side is
    unknown)."""
    in_a, in_b = f"({cond_a})", f"({cond_b})"
    where = f"{in_range()} AND ({in_a} OR {in_b})"
    figures = []
    for column, metric in (("h", QUESTION_RATE), ("ce", QUESTION_MEAN)):
        for side in ("a", "b"):
            value, known = carried(metric, f"in_{side}")
            figures.append(f"avgIfOrNull({value}, {known}) AS {side}_{column}")
    lowest, _ = carried(QUESTION_MEAN)
    low_known = f"{QUESTION_MEAN.source} IS NOT NULL"
    return (
        f"SELECT question_hash, countIf(in_a) AS a_n, countIf(in_b) AS b_n, {', '.join(figures)}, "
        f"argMinIf(interaction_id, if({low_known}, {lowest}, 2), in_a) AS a_example, "
        f"argMinIf(interaction_id, if({low_known}, {lowest}, 2), in_b) AS b_example, "
        f"ifNull(round(abs(b_h - a_h), {_DIGITS}), 0) AS h_gap, "
        f"ifNull(round(abs(b_ce - a_ce), {_DIGITS}), 0) AS ce_gap "
        f"FROM (SELECT *, {in_a} AS in_a, {in_b} AS in_b FROM {db}.evaluations FINAL "
        f"WHERE {where} AND judged = 1 AND question_hash != 0) "
        "GROUP BY question_hash HAVING a_n > 0 AND b_n > 0"
    )


def questions_sql(db: str, cond_a: str, cond_b: str) -> str:
    """The questions on which the slices differ, the most different first (hallucination rate, then mean
    context entailment; the hash breaks ties so the order is stable)."""
    return (
        f"SELECT * FROM ({per_question_sql(db, cond_a, cond_b)}) WHERE h_gap > 0 OR ce_gap > 0 "
        "ORDER BY h_gap DESC, ce_gap DESC, question_hash LIMIT {limit:UInt32}"
    )


def question_counts_sql(db: str, cond_a: str, cond_b: str) -> str:
    """How many questions both slices were asked, and on how many of them they differ."""
    return (
        "SELECT count() AS repeated, countIf(h_gap > 0 OR ce_gap > 0) AS differing "
        f"FROM ({per_question_sql(db, cond_a, cond_b)})"
    )


def _nan_none(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


async def _questions(store: ClickHouseStore, rows: list[dict[str, Any]]) -> dict[str, str]:
    ids = [r["a_example"] for r in rows]
    if not ids:
        return {}
    found = await store.query(
        f"SELECT interaction_id, payload FROM {store.db}.evaluations FINAL "
        "WHERE interaction_id IN {ids:Array(String)}",
        {"ids": ids},
    )
    out: dict[str, str] = {}
    for r in found:
        e = Evaluation.model_validate_json(r["payload"])
        if e.interaction is not None:
            out[r["interaction_id"]] = e.interaction.question
    return out


async def read_compare(store: ClickHouseStore, q: CompareQuery) -> CompareReport:
    a, b = q.a, q.b
    cond_a, params_a = slice_condition(a, "a")
    cond_b, params_b = slice_condition(b, "b")
    span = {"start": q.start, "end": q.end}
    row: dict[str, Any] = {}
    for over in Over:
        (part,) = await store.query(
            slices_sql(store.db, cond_a, cond_b, over), {**params_a, **params_b, **span}
        )
        row.update(part)
    row_a, row_b = side(row, "a"), side(row, "b")
    params = {**params_a, **params_b, **span}
    (counts,) = await store.query(question_counts_sql(store.db, cond_a, cond_b), params)
    rows = []
    if q.questions and counts["differing"]:
        rows = await store.query(questions_sql(store.db, cond_a, cond_b), {**params, "limit": q.questions})
    texts = await _questions(store, rows)
    return CompareReport(
        start=q.start,
        end=q.end,
        a=a,
        b=b,
        metrics=[metric_difference(m, row_a, row_b) for m in catalogue()],
        repeated_questions=int(counts["repeated"]),
        differing_questions=int(counts["differing"]),
        questions=[
            QuestionDifference(
                question=texts.get(r["a_example"]),
                a_n=int(r["a_n"]),
                b_n=int(r["b_n"]),
                a_hallucination_rate=_nan_none(r["a_h"]),
                b_hallucination_rate=_nan_none(r["b_h"]),
                a_context_entailment=_nan_none(r["a_ce"]),
                b_context_entailment=_nan_none(r["b_ce"]),
                a_example=r["a_example"],
                b_example=r["b_example"],
            )
            for r in rows
        ],
    )
