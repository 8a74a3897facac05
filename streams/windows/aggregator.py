"""Small aggregator: the figures of one window (or of several pooled) from evaluation rows."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime

from schemas.evaluation_row import EvalRow
from schemas.latency import histogram
from schemas.window import WindowAggregate


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 1]."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return float(ordered[lo])
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class WindowStats:
    """Accumulates rows; ``result`` gives the WindowAggregate. Feed each interaction once (deduplicated)."""

    def __init__(self) -> None:
        self.count = 0
        self._ctx: list[float] = []
        self._gt_ans: list[float] = []
        self._ans_gt: list[float] = []
        self._grounded: list[float] = []
        self.answered = 0
        self.hallucinations = 0
        self._refusal_known = 0
        self._refusals = 0
        self._gt_refusal_known = 0
        self._gt_refusals = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd = 0.0
        self._latency: list[float] = []  # one per judge call (not per interaction)
        self.incomplete = 0

    def add(self, row: EvalRow) -> None:
        self.count += 1
        if row.context_entailment is not None:
            self._ctx.append(row.context_entailment)
        if row.ground_truth_entails_answer is not None:
            self._gt_ans.append(row.ground_truth_entails_answer)
        if row.answer_entails_ground_truth is not None:
            self._ans_gt.append(row.answer_entails_ground_truth)
        if row.grounded_precision is not None:
            self._grounded.append(row.grounded_precision)
        if row.hallucination is not None:
            self.answered += 1
            self.hallucinations += int(row.hallucination)
        if row.answer_refusal is not None:
            self._refusal_known += 1
            self._refusals += int(row.answer_refusal)
        if row.ground_truth_refusal is not None:
            self._gt_refusal_known += 1
            self._gt_refusals += int(row.ground_truth_refusal)
        self.input_tokens += row.input_tokens
        self.output_tokens += row.output_tokens
        self.cost_usd += row.cost_usd
        self._latency.extend(row.call_latencies_ms)
        if not row.complete:
            self.incomplete += 1

    def extend(self, rows: Iterable[EvalRow]) -> WindowStats:
        for row in rows:
            self.add(row)
        return self

    def result(
        self, *, window_start: datetime, window_end: datetime, app: str, model: str
    ) -> WindowAggregate:
        return WindowAggregate(
            window_start=window_start,
            window_end=window_end,
            app=app,
            model=model,
            count=self.count,
            mean_context_entailment=_mean(self._ctx),
            mean_ground_truth_entails_answer=_mean(self._gt_ans),
            mean_answer_entails_ground_truth=_mean(self._ans_gt),
            answered=self.answered,
            hallucinations=self.hallucinations,
            hallucination_rate=self.hallucinations / self.answered if self.answered else None,
            answer_refusal_rate=self._refusals / self._refusal_known if self._refusal_known else None,
            ground_truth_refusal_rate=(
                self._gt_refusals / self._gt_refusal_known if self._gt_refusal_known else None
            ),
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost_usd=self.cost_usd,
            judge_latency_p50_ms=percentile(self._latency, 0.5),
            judge_latency_p95_ms=percentile(self._latency, 0.95),
            incomplete=self.incomplete,
            answer_refusal_known=self._refusal_known,
            ground_truth_refusal_known=self._gt_refusal_known,
            context_scored=len(self._ctx),
            ground_truth_answer_scored=len(self._gt_ans),
            answer_ground_truth_scored=len(self._ans_gt),
            judge_latency_calls=len(self._latency),
            mean_grounded_precision=_mean(self._grounded),
            grounded_precision_scored=len(self._grounded),
            judge_latency_histogram=histogram(self._latency),
        )
