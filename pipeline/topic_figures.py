"""Topics assigned to a set of Evaluations, and each topic's figures: its volume, share and the rates
people watch (hallucination, refusal, no evidence) with their 95 % Wilson intervals, pooled as a window
pools its rows (``pipeline.report.catalogue_figures``). Used by ``groundwatch eval --topics``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pipeline.embeddings import TextEncoder
from pipeline.metrics.wilson import wilson_interval
from pipeline.report import catalogue_figures
from pipeline.topic_discovery import assign, fit_topics
from schemas.evaluation import Evaluation
from schemas.settings import TopicsSettings
from schemas.topic_model import OTHER, TopicFigures, TopicModel, TopicRate

#: the catalogue's rates each topic is given with its interval
TOPIC_RATES = ("hallucination_rate", "answer_refusal_rate", "no_evidence_rate")


def _rate(evaluations: Sequence[Evaluation], name: str) -> TopicRate:
    value = catalogue_figures(evaluations).get(name)
    flags = {
        "hallucination_rate": [e.hallucination for e in evaluations],
        "answer_refusal_rate": [e.answer_refusal for e in evaluations],
        "no_evidence_rate": [e.no_evidence for e in evaluations],
    }[name]
    n = sum(1 for f in flags if f is not None)
    bounds = wilson_interval(sum(1 for f in flags if f), n)
    return TopicRate(value=value, low=bounds[0] if bounds else None, high=bounds[1] if bounds else None, n=n)


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
            share=len(by_topic[t]) / total, rates={r: _rate(by_topic[t], r) for r in TOPIC_RATES},
        )
        for t in order
    ]  # fmt: skip


def with_topics(
    evaluations: Sequence[Evaluation], settings: TopicsSettings, encoder: TextEncoder, fitted_at: datetime
) -> tuple[list[Evaluation], TopicModel]:
    """The evaluations' questions (as stored: masked where privacy masks them) fitted into topics, and each
    evaluation with its topic. CPU work: call it in a thread from an event loop."""
    texts = [e.interaction.question if e.interaction is not None else "" for e in evaluations]
    vectors = encoder.encode(texts)
    model = fit_topics(texts, vectors, settings, fitted_at)
    assigned = assign(model, vectors)
    updated = [
        e.model_copy(update={"topic": a.topic, "topic_label": a.label})
        for e, a in zip(evaluations, assigned, strict=True)
    ]
    return updated, model
