"""The judge's agreement as Prometheus gauges: read from labels in chDB when due on the injected clock,
served from the last read at scrape time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from pipeline.clock import ManualClock
from schemas.label import LabeledRow
from streams.agreement_gauges import AgreementGauges
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.store import ClickHouseStore
from tests.fixtures.labels import ev, label
from tests.fixtures.store import store_with_window
from tests.settings_factory import make_settings

T0 = datetime(2026, 11, 19, 12, 0, tzinfo=UTC)  # the store keeps its rows (no TTL); the clock is injected
LATER = T0 + timedelta(hours=1)

IDENTITY = {
    "app": "a", "model": "m", "judge": "lexical", "judge_model": "lexical-v1", "prompt_version": "",
    "kind": "grounded",
}  # fmt: skip


async def test_gauges_are_read_when_due_on_the_clock_and_served_from_the_last_read(
    store: ClickHouseStore,
) -> None:
    labels = LabelStore(store)
    # 100 judged interactions, 30 flagged; people: of the flagged 24 hallucinated, of the rest 7
    evals = [ev(f"f{i}", True) for i in range(30)] + [ev(f"n{i}", False) for i in range(70)]
    evals = [e.model_copy(update={"timestamp": T0}) for e in evals]
    await store_with_window(store, evals, T0, LATER)
    marks = [label(f"f{i}", 0 if i < 24 else 1, at=LATER) for i in range(30)]
    marks += [label(f"n{i}", 0 if i < 7 else 1, at=LATER) for i in range(70)]
    await labels.insert(marks)
    settings = make_settings(
        labels={
            "min_per_class": 10,
            "bootstrap_resamples": 200,
            "gauge_refresh_seconds": 60,
            "gauge_period_days": 2,
        }
    )
    clock = ManualClock(start=LATER)
    gauges = AgreementGauges(settings, clock)
    registry = CollectorRegistry()
    registry.register(gauges)
    assert registry.get_sample_value("groundwatch_judge_balanced_accuracy", IDENTITY) is None  # not read yet
    assert await gauges.refresh(labels) is True
    se, sp = 24 / 31, 63 / 69
    assert registry.get_sample_value("groundwatch_judge_sensitivity", IDENTITY) == pytest.approx(se)
    assert registry.get_sample_value("groundwatch_judge_specificity", IDENTITY) == pytest.approx(sp)
    assert registry.get_sample_value("groundwatch_judge_balanced_accuracy", IDENTITY) == pytest.approx(
        (se + sp) / 2
    )
    assert registry.get_sample_value("groundwatch_judge_kappa", IDENTITY) is not None
    assert registry.get_sample_value("groundwatch_judge_labeled_cases", IDENTITY) == 100
    rate = {"app": "a", "model": "m", "kind": "grounded"}
    expected = (0.3 + sp - 1) / (se + sp - 1)
    assert registry.get_sample_value("groundwatch_judge_corrected_rate", rate) == pytest.approx(expected)
    low = registry.get_sample_value("groundwatch_judge_corrected_rate_low", rate)
    high = registry.get_sample_value("groundwatch_judge_corrected_rate_high", rate)
    assert low is not None and high is not None and low < expected < high
    assert registry.get_sample_value("groundwatch_judge_agreement_refreshed_seconds") == LATER.timestamp()
    # a new label: not read before the refresh interval has passed on the clock
    await labels.insert([label("n69", 0, at=LATER + timedelta(seconds=1))])
    clock.advance(59)
    assert await gauges.refresh(labels) is False
    assert registry.get_sample_value("groundwatch_judge_labeled_cases", IDENTITY) == 100
    assert registry.get_sample_value("groundwatch_judge_specificity", IDENTITY) == pytest.approx(sp)
    clock.advance(1)
    assert await gauges.refresh(labels) is True
    assert registry.get_sample_value("groundwatch_judge_specificity", IDENTITY) == pytest.approx(62 / 68)
    assert b"groundwatch_judge_balanced_accuracy{" in generate_latest(registry)
    # the period is the last gauge_period_days: far later, these labels are out of it and no sample is left
    clock.advance(timedelta(days=3).total_seconds())
    assert await gauges.refresh(labels) is True
    assert registry.get_sample_value("groundwatch_judge_labeled_cases", IDENTITY) is None


async def test_a_failed_read_keeps_the_last_figures_and_tries_again_when_next_due(
    store: ClickHouseStore,
) -> None:
    settings = make_settings(labels={"gauge_refresh_seconds": 10})
    clock = ManualClock(start=LATER)
    gauges = AgreementGauges(settings, clock)
    labels = LabelStore(store)
    assert await gauges.refresh(labels) is True
    assert gauges.report is not None and gauges.report.judges == []
    first = gauges.report

    class Unreachable(LabelStore):
        async def labeled_rows(self, *args: object, **kwargs: object) -> list[LabeledRow]:
            raise ConnectionError("ClickHouse is gone")

    clock.advance(10)
    assert await gauges.refresh(Unreachable(store)) is False
    assert gauges.report is first  # the last figures stay
    assert await gauges.refresh(labels) is False  # not retried before it is due again
    clock.advance(10)
    assert await gauges.refresh(labels) is True
