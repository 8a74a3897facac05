"""Window aggregation, pure: evaluation rows in, one ``WindowAggregate`` out.

Every rate and mean comes from the metric catalogue (``schemas.metrics.SCORED``): the mean of a metric's
per-interaction ``source`` over the rows where it is known, with that count as its denominator column.
The sums' columns (interactions received, judged, skipped, incomplete ones, tokens, cost; conversations)
add what each row declares it adds (``schemas.metrics.INTERACTION_SUMS``, ``CONVERSATION_SUMS``: the
same declaration slices sum in SQL). The rest are the skips by reason and the judge calls' latencies. A
skipped row (``judged`` false: sampling rules or a judge budget, pipeline.sampling) counts as received
only. Custom evaluators' scores
(``custom_scores``) are windowed by name, whatever evaluators are configured now: each one's mean, how
many it scored and how many it failed to.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pipeline.conversations import counts_in, single
from schemas.conversation import ConversationRollup
from schemas.evaluation_row import EvalRow
from schemas.latency import histogram, quantile
from schemas.metrics import CONVERSATION_SCORED, CONVERSATION_SUMS, INTERACTION_SUMS, SCORED, scored_values
from schemas.window import WindowAggregate


class WindowStats:
    """Accumulates rows; ``result`` gives the WindowAggregate. Feed each interaction once (deduplicated)."""

    def __init__(self) -> None:
        #: each sum's window_aggregates column and its total so far
        self.sums: dict[str, float] = dict.fromkeys([*INTERACTION_SUMS, *CONVERSATION_SUMS], 0)
        self.skipped: dict[str, int] = {}  # skip reason -> interactions (pipeline.sampling)
        self._values: dict[str, list[float]] = {m.name: [] for m in SCORED}
        self._latency: list[float] = []  # one per judge call (not per interaction)
        self._custom: dict[str, list[float]] = {}  # custom evaluator -> its scores (schemas.evaluators)
        self._custom_missing: dict[str, int] = {}
        self._conversations: dict[str, list[float]] = {m.name: [] for m in CONVERSATION_SCORED}
        self.conversations_judged = 0  # with a judged turn: the verdict rates' denominator
        self._singles: list[EvalRow] = []  # rows without a conversation_id (conversations of one turn)

    def add_conversation(self, conversation: ConversationRollup) -> None:
        """A conversation whose last turn is in the window (in a rate read from verdicts only when one of
        its turns was judged: pipeline.conversations.counts_in)."""
        for column, row_sum in CONVERSATION_SUMS.items():
            self.sums[column] += row_sum.of(conversation)
        self.conversations_judged += conversation.judged_turns > 0
        for metric in CONVERSATION_SCORED:
            if counts_in(metric, conversation):
                self._conversations[metric.name].append(float(getattr(conversation, str(metric.source))))

    def count_conversations(self, conversations: Iterable[ConversationRollup]) -> WindowStats:
        """Count these conversations and the window's rows without a conversation_id (one turn each)."""
        for conversation in conversations:
            self.add_conversation(conversation)
        for row in self._singles:
            self.add_conversation(single(row))
        return self

    def add(self, row: EvalRow) -> None:
        for column, row_sum in INTERACTION_SUMS.items():
            self.sums[column] += row_sum.of(row)
        if row.conversation_id is None:
            self._singles.append(row)
        if not row.judged:  # counted as received, carries no score, tokens nor latency
            reason = row.skip_reason or "unknown"
            self.skipped[reason] = self.skipped.get(reason, 0) + 1
            return
        for metric, value in scored_values(row):
            self._values[metric.name].append(value)
        self._latency.extend(row.call_latencies_ms)
        for name, score in row.custom_scores.items():
            self._custom.setdefault(name, []).append(score)
        for name in row.custom_missing:
            self._custom_missing[name] = self._custom_missing.get(name, 0) + 1

    def extend(self, rows: Iterable[EvalRow]) -> WindowStats:
        for row in rows:
            self.add(row)
        return self

    def _scored(self) -> dict[str, Any]:
        """Each catalogue metric's window value, denominator and (for a rate with one) event count."""
        out: dict[str, Any] = {}
        for metric in SCORED:
            values = self._values[metric.name]
            out[metric.name] = sum(values) / len(values) if values else None
            out[str(metric.count_column)] = len(values)
            if metric.events_column:
                out[metric.events_column] = round(sum(values))
        for metric in CONVERSATION_SCORED:
            values = self._conversations[metric.name]
            out[metric.name] = sum(values) / len(values) if values else None
            if metric.events_column:
                out[metric.events_column] = round(sum(values))
        out["conversations_judged"] = self.conversations_judged
        return out

    def result(
        self, *, window_start: datetime, window_end: datetime, app: str, model: str
    ) -> WindowAggregate:
        latency = histogram(self._latency)
        return WindowAggregate(
            window_start=window_start,
            window_end=window_end,
            app=app,
            model=model,
            # one definition of the latency quantiles: the histogram's (schemas.latency), as the
            # dashboard pools windows and slices
            judge_latency_p50_ms=quantile(latency, 0.5),
            judge_latency_p95_ms=quantile(latency, 0.95),
            judge_latency_calls=len(self._latency),
            judge_latency_histogram=latency,
            skipped_by_reason=dict(sorted(self.skipped.items())),
            custom_values={k: sum(v) / len(v) for k, v in sorted(self._custom.items())},
            custom_scored={k: len(v) for k, v in sorted(self._custom.items())},
            custom_missing=dict(sorted(self._custom_missing.items())),
            **self.sums,
            **self._scored(),
        )


def aggregate(
    rows: Iterable[EvalRow],
    *,
    window_start: datetime,
    window_end: datetime,
    app: str,
    model: str,
    conversations: Iterable[ConversationRollup] | None = None,
) -> WindowAggregate:
    """The aggregate of one window's (deduplicated) rows and, unless None (conversations off), of the
    conversations whose last turn is in it."""
    stats = WindowStats().extend(rows)
    if conversations is not None:
        stats.count_conversations(conversations)
    return stats.result(window_start=window_start, window_end=window_end, app=app, model=model)
