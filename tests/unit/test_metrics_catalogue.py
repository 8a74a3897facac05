"""The metric catalogue (schemas/metrics.py) covers what windows store and what alert rules may watch."""

from __future__ import annotations

import typing

from schemas.alert import AlertMetric
from schemas.metrics import METRICS, METRICS_BY_NAME, MetricKind
from schemas.window import WindowAggregate


def test_every_alert_metric_is_a_declared_rate_or_mean() -> None:
    for name in typing.get_args(AlertMetric):
        assert name in METRICS_BY_NAME, name
        assert METRICS_BY_NAME[name].kind in (MetricKind.RATE, MetricKind.MEAN)


def test_every_rate_and_mean_a_window_stores_is_declared() -> None:
    stored = {f for f in WindowAggregate.model_fields if f.endswith("_rate") or f.startswith("mean_")}
    assert stored <= set(METRICS_BY_NAME), stored - set(METRICS_BY_NAME)


def test_ratios_have_a_denominator_and_sums_none() -> None:
    for m in METRICS:
        assert (m.denominator is None) == (m.kind is MetricKind.SUM), m.name
    assert len(METRICS_BY_NAME) == len(METRICS)
