"""The metric catalogue (schemas/metrics.py) covers what windows store and what alert rules may watch."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from schemas.evaluation_row import EvalRow
from schemas.metrics import METRICS, METRICS_BY_NAME, Metric, MetricKind, pooled
from schemas.window import WindowAggregate
from streams.windows.aggregator import WindowStats

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_every_rate_and_mean_a_window_stores_is_declared() -> None:
    stored = {f for f in WindowAggregate.model_fields if f.endswith("_rate") or f.startswith("mean_")}
    assert stored <= set(METRICS_BY_NAME), stored - set(METRICS_BY_NAME)


def test_ratios_have_a_denominator_and_sums_none() -> None:
    for m in METRICS:
        assert (m.denominator is None) == (m.kind is MetricKind.SUM), m.name
    assert len(METRICS_BY_NAME) == len(METRICS)


def test_every_column_a_metric_names_exists() -> None:
    """A metric's source is an EvalRow field and its columns are window_aggregates columns, so window
    aggregation, alert rules and the SQL all read the same data."""
    for m in METRICS:
        columns = [m.count_column, m.events_column, *m.sum_columns]
        for column in filter(None, columns):
            assert column in WindowAggregate.model_fields, (m.name, column)
        if m.kind is not MetricKind.SUM:
            assert m.source in EvalRow.model_fields, (m.name, m.source)
            assert m.name in WindowAggregate.model_fields, m.name


def test_a_metric_missing_its_columns_is_refused() -> None:
    with pytest.raises(ValidationError, match="source and count_column"):
        Metric(name="x_rate", label="x", kind=MetricKind.RATE, source="hallucination")
    with pytest.raises(ValidationError, match="sum_columns only"):
        Metric(name="x", label="x", kind=MetricKind.SUM)
    with pytest.raises(ValidationError, match="only a rate counts events"):
        Metric(name="m", label="m", kind=MetricKind.MEAN, source="s", count_column="c", events_column="e")


def test_window_totals_agree_with_the_aggregation() -> None:
    """``Metric.totals`` (Python, used by alerts and reports) pools as the SQL numerator does."""
    rows = [
        EvalRow(
            interaction_id=str(i),
            timestamp=T0,
            app="a",
            model="m",
            hallucination=None if i % 5 == 0 else i % 3 == 0,
            answer_refusal=i % 4 == 0,
            context_entailment=i / 10,
            input_tokens=10,
        )
        for i in range(10)
    ]
    window = WindowStats().extend(rows).result(window_start=T0, window_end=T0, app="a", model="m")
    assert METRICS_BY_NAME["hallucination_rate"].totals(window) == (3.0, 8)  # 3, 6 and 9 of the 8 answered
    assert METRICS_BY_NAME["answer_refusal_rate"].totals(window) == (3.0, 10)
    total, n = METRICS_BY_NAME["mean_context_entailment"].totals(window)
    assert (round(total, 9), n) == (4.5, 10)
    assert METRICS_BY_NAME["judge_tokens"].totals(window) == (100.0, 0)
    assert METRICS_BY_NAME["mean_grounded_precision"].totals(window) == (0.0, 0)


def test_pooled_is_the_sum_of_numerators_over_the_sum_of_denominators() -> None:
    def window(hallucinations: int, answered: int) -> WindowAggregate:
        rows = [
            EvalRow(interaction_id=str(i), timestamp=T0, app="a", model="m", hallucination=i < hallucinations)
            for i in range(answered)
        ]
        return WindowStats().extend(rows).result(window_start=T0, window_end=T0, app="a", model="m")

    rate = METRICS_BY_NAME["hallucination_rate"]
    assert pooled(rate, [window(1, 10), window(9, 10)]) == 0.5
    assert pooled(rate, [window(1, 2), window(0, 98)]) == 0.01  # not the mean of 0.5 and 0
    assert pooled(rate, []) is None
    assert pooled(METRICS_BY_NAME["interactions"], [window(1, 10), window(0, 5)]) == 15
