"""Window figures from rows: rates over the right denominators, means skip None, latency quantiles from the
calls' histogram."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schemas.evaluation_row import EvalRow
from schemas.latency import bucket_of
from streams.windows.aggregator import WindowStats
from streams.windows.tumbling import TumblingWindows
from tests.fixtures.messages import EVALUATED_AT

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def row(i: int, **kw: object) -> EvalRow:
    return EvalRow.model_validate(
        {"interaction_id": f"r{i}", "timestamp": T0, "app": "a", "model": "m", **kw}
    )


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
    assert w.incomplete == 1
    assert (w.answer_refusal_known, w.ground_truth_refusal_known) == (3, 1)
    assert (w.context_scored, w.ground_truth_answer_scored, w.answer_ground_truth_scored) == (2, 1, 0)


def test_latency_quantiles_are_over_judge_calls_not_interaction_sums() -> None:
    # one interaction made 4 calls of 10 ms (sum 40), another one call of 100 ms
    rows = [
        row(1, judge_latency_ms=40, call_latencies_ms=[10, 10, 10, 10]),
        row(2, judge_latency_ms=100, call_latencies_ms=[100]),
        row(3, judge_latency_ms=0),  # lexical / cached only: no judge call
    ]
    w = WindowStats().extend(rows).result(window_start=T0, window_end=T0, app="a", model="m")
    assert w.judge_latency_calls == 5
    # the histogram's quantiles (schemas.latency): in the bucket of 10 ms, over the 5 calls (per-interaction
    # sums would put it in 40's), and in the bucket of 100 ms
    assert w.judge_latency_p50_ms is not None and w.judge_latency_p95_ms is not None
    assert bucket_of(w.judge_latency_p50_ms) == bucket_of(10) != bucket_of(40)
    assert bucket_of(w.judge_latency_p95_ms) == bucket_of(100)


def test_call_latencies_skip_cached_and_lexical_calls() -> None:
    from schemas.evaluation import Evaluation
    from schemas.evaluation_row import call_latencies
    from schemas.results import JudgeCall

    calls = [
        JudgeCall(stage="nli", judge="openai", model="m", latency_ms=120.0),
        JudgeCall(stage="nli", judge="openai", model="m", latency_ms=0.0, cached=True, attempts=0),
        JudgeCall(stage="nli", judge="lexical", model="lexical", latency_ms=0.5),
        JudgeCall(stage="refusal", judge="openai", model="m", latency_ms=80.0),
    ]
    e = Evaluation(
        evaluated_at=EVALUATED_AT,
        interaction_id="x",
        timestamp=T0,
        app="a",
        model="m",
        judge="openai",
        calls=calls,
    )
    assert call_latencies(e) == [120.0, 80.0]
    assert EvalRow.from_evaluation(e).call_latencies_ms == [120.0, 80.0]


def test_empty_window_has_no_rates() -> None:
    w = WindowStats().result(window_start=T0, window_end=T0, app="a", model="m")
    assert w.count == 0 and w.hallucination_rate is None and w.judge_latency_p95_ms is None


def test_tumbling_alignment_and_last_k() -> None:
    tw = TumblingWindows(60)
    ts = T0 + timedelta(seconds=59, milliseconds=999)
    assert tw.start_of(ts) == T0 and tw.start_of(T0 + timedelta(seconds=60)) == T0 + timedelta(minutes=1)
    assert tw.start_of(ts.replace(tzinfo=None)) == T0  # naive = UTC
    assert tw.last_k(T0, 3) == (T0 - timedelta(minutes=2), T0 + timedelta(minutes=1))
