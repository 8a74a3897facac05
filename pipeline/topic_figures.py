"""Topics assigned to a set of Evaluations, and each topic's figures: its volume, share and the rates
people watch (hallucination, refusal, no evidence) with their 95 % Wilson intervals, pooled as a window
pools its rows (the catalogue's per-row values). Used by ``groundwatch eval --topics``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pipeline.embeddings import TextEncoder
from pipeline.metrics.wilson import wilson_interval
from pipeline.topic_discovery import discover
from schemas.evaluation import Evaluation
from schemas.evaluation_row import EvalRow
from schemas.metrics import scored_values
from schemas.settings import TopicsSettings
from schemas.topic_model import OTHER, TopicFigures, TopicModel, TopicRate

#: the catalogue's rates each topic is given with its interval
TOPIC_RATES = ("hallucination_rate", "answer_refusal_rate", "no_evidence_rate")


def _rates(evaluations: Sequence[Evaluation]) -> dict[str, TopicRate]:
    """The topic's rates from each row's catalogue values (``schemas.metrics.scored_values``, as a window
    pools them): value and interval from the same rows."""
    values: dict[str, list[float]] = {name: [] for name in TOPIC_RATES}
    for e in evaluations:
        for metric, value in scored_values(EvalRow.from_evaluation(e)):
            if metric.name in values:
                values[metric.name].append(value)
    out = {}
    for name, seen in values.items():
        bounds = wilson_interval(sum(seen), len(seen))
        out[name] = TopicRate(
            value=sum(seen) / len(seen) if seen else None, low=bounds[0] if bounds else None,
            high=bounds[1] if bounds else None, n=len(seen),
        )  # fmt: skip
    return out


def figures(evaluations: Sequence[Evaluation]) -> list[TopicFigures]:
    """Each topic's figures over evaluations that carry their topic, largest first ('other' last)."""
    by_topic: dict[str, list[Evaluation]] = {}
    for e in evaluations:
        by_topic.setdefault(e.topic or OTHER, []).append(e)
    total = max(len(evaluations), 1)
    order = sorted(by_topic, key=lambda t: (t == OTHER, -len(by_topic[t]), t))
    return [
        TopicFigures(
            topic=t, label=by_topic[t][0].topic_label or OTHER, interactions=len(by_topic[t]),
            share=len(by_topic[t]) / total, rates=_rates(by_topic[t]),
        )
        for t in order
    ]  # fmt: skip


def with_topics(
    evaluations: Sequence[Evaluation], settings: TopicsSettings, encoder: TextEncoder, fitted_at: datetime
) -> tuple[list[Evaluation], TopicModel]:
    """The evaluations' questions (as stored: masked where privacy masks them) fitted into topics, and each
    evaluation with its topic. CPU work: call it in a thread from an event loop."""
    texts = [e.interaction.question if e.interaction is not None else "" for e in evaluations]
    model, assigned = discover(texts, encoder, settings, fitted_at)
    updated = [
        e.model_copy(update={"topic": a.topic, "topic_label": a.label, "topic_model": model.version})
        for e, a in zip(evaluations, assigned, strict=True)
    ]
    return updated, model
