"""The metrics groundwatch reports per app, model and time bucket, declared once.

Each metric is a ratio of two sums over ``window_aggregates`` rows (or a plain sum), so any number of
windows (one window, an hour, a day, a whole range) pool exactly: a rate is the sum of its numerators over
the sum of its denominators, a mean is weighted by the interactions that carry it. The dashboard API, the
Grafana dashboard generator and their tests read this list; the SQL expressions use only columns of
``window_aggregates`` (deploy/clickhouse).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class MetricKind(StrEnum):
    RATE = "rate"  # numerator / denominator, both counts of interactions; gets a Wilson interval
    MEAN = "mean"  # sum of per-interaction scores / interactions scored
    SUM = "sum"  # a plain total (volume, tokens, cost)


class Metric(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str = Field(description="identifier used by the API, the charts and alert rules")
    label: str = Field(description="human-readable name for chart titles")
    kind: MetricKind = Field(description="how windows pool: rate, mean or sum")
    numerator: str = Field(description="SQL over one window_aggregates row, summed over the bucket")
    denominator: str | None = Field(None, description="SQL summed over the bucket; None for a sum")
    unit: str = Field("", description="unit shown beside values: '' (a share 0-1), 'count', 'tokens', 'USD'")
    lower_is_better: bool = Field(True, description="direction of a good change, for colouring")


METRICS: tuple[Metric, ...] = (
    Metric(
        name="hallucination_rate",
        label="Hallucination rate",
        kind=MetricKind.RATE,
        numerator="hallucinations",
        denominator="answered",
    ),
    Metric(
        name="answer_refusal_rate",
        label="Answer refusal rate",
        kind=MetricKind.RATE,
        numerator="round(ifNull(answer_refusal_rate, 0) * answer_refusal_known)",
        denominator="answer_refusal_known",
    ),
    Metric(
        name="ground_truth_refusal_rate",
        label="Ground-truth refusal rate",
        kind=MetricKind.RATE,
        numerator="round(ifNull(ground_truth_refusal_rate, 0) * ground_truth_refusal_known)",
        denominator="ground_truth_refusal_known",
    ),
    Metric(
        name="mean_context_entailment",
        label="Context ⇒ answer (mean entailment)",
        kind=MetricKind.MEAN,
        numerator="ifNull(mean_context_entailment, 0) * context_scored",
        denominator="context_scored",
        lower_is_better=False,
    ),
    Metric(
        name="mean_ground_truth_entails_answer",
        label="Ground truth ⇒ answer (mean entailment)",
        kind=MetricKind.MEAN,
        numerator="ifNull(mean_ground_truth_entails_answer, 0) * ground_truth_answer_scored",
        denominator="ground_truth_answer_scored",
        lower_is_better=False,
    ),
    Metric(
        name="mean_answer_entails_ground_truth",
        label="Answer ⇒ ground truth (mean entailment)",
        kind=MetricKind.MEAN,
        numerator="ifNull(mean_answer_entails_ground_truth, 0) * answer_ground_truth_scored",
        denominator="answer_ground_truth_scored",
        lower_is_better=False,
    ),
    Metric(
        name="mean_grounded_precision",
        label="Grounded-unit precision",
        kind=MetricKind.MEAN,
        numerator="ifNull(mean_grounded_precision, 0) * grounded_precision_scored",
        denominator="grounded_precision_scored",
        lower_is_better=False,
    ),
    Metric(name="interactions", label="Interactions", kind=MetricKind.SUM, numerator="count", unit="count"),
    Metric(
        name="incomplete",
        label="Incomplete evaluations",
        kind=MetricKind.SUM,
        numerator="incomplete",
        unit="count",
    ),
    Metric(
        name="judge_tokens",
        label="Judge tokens (in + out)",
        kind=MetricKind.SUM,
        numerator="input_tokens + output_tokens",
        unit="tokens",
    ),
    Metric(name="judge_cost_usd", label="Judge cost", kind=MetricKind.SUM, numerator="cost_usd", unit="USD"),
)

METRICS_BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
