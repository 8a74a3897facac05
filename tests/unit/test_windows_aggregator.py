"""Window figures from rows: rates over the right denominators, means skip None, percentiles interpolate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streams.windows.aggregator import EvalRow, WindowStats, percentile
from streams.windows.tumbling import TumblingWindows

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def row(i: int, **kw: object) -> EvalRow:
    return EvalRow.model_validate(
        {"interaction_id": f"r{i}", "timestamp": T0, "app": "a", "model": "m", **kw}
    )


def test_percentile_matches_linear_interpolation() -> None:
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([1, 2, 3, 4], 0.5) == 2.5
    # (n-1)*q = 3*0.95 = 2.85 -> 3 + 0.85*(4-3)
    assert percentile([4, 1, 3, 2], 0.95) == pytest.approx(3.85)


def test_rates_use_their_own_denominators() -> None:
    rows = [
        row(1, context_entailment=0.2, hallucination=True, answer_refusal=False, judge_latency_ms=10),
        row(2, context_entailment=0.9, hallucination=False, answer_refusal=False, judge_latency_ms=20),
        row(3, answer_refusal=True, hallucination=None, judge_latency_ms=30),  # a refusal: not "answered"
        row(
            4, ground_truth_refusal=True, ground_truth_entails_answer=0.5, complete=False, judge_latency_ms=40
        ),
    ]
    w = WindowStats().extend(rows).result(window_start=T0, window_end=T0, app="a", model="m")
    assert w.count == 4 and w.answered == 2 and w.hallucinations == 1
    assert w.hallucination_rate == 0.5
    assert w.answer_refusal_rate == pytest.approx(1 / 3)
    assert w.ground_truth_refusal_rate == 1.0
    assert w.mean_context_entailment == pytest.approx(0.55)
    assert w.mean_ground_truth_entails_answer == 0.5 and w.mean_answer_entails_ground_truth is None
    assert w.judge_latency_p50_ms == 25.0 and w.incomplete == 1


def test_empty_window_has_no_rates() -> None:
    w = WindowStats().result(window_start=T0, window_end=T0, app="a", model="m")
    assert w.count == 0 and w.hallucination_rate is None and w.judge_latency_p95_ms is None


def test_tumbling_alignment_and_last_k() -> None:
    tw = TumblingWindows(60)
    ts = T0 + timedelta(seconds=59, milliseconds=999)
    assert tw.start_of(ts) == T0 and tw.start_of(T0 + timedelta(seconds=60)) == T0 + timedelta(minutes=1)
    assert tw.start_of(ts.replace(tzinfo=None)) == T0  # naive = UTC
    assert tw.last_k(T0, 3) == (T0 - timedelta(minutes=2), T0 + timedelta(minutes=1))
