"""Alert rules (from a config file) and the alerts they fire."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

AlertMetric = Literal[
    "hallucination_rate",
    "answer_refusal_rate",
    "ground_truth_refusal_rate",
    "mean_context_entailment",
    "mean_ground_truth_entails_answer",
    "mean_answer_entails_ground_truth",
]


class AlertRule(BaseModel):
    name: str
    metric: AlertMetric
    op: Literal[">", ">=", "<", "<="] = ">"
    threshold: float
    windows: int = Field(3, ge=1)  # the last K closed windows, pooled
    # interactions carrying the metric (its denominator: answered ones for the hallucination rate, known
    # flags for a refusal rate, scored ones for a mean), pooled, needed before the rule may fire
    min_interactions: int = Field(20, ge=1)
    cooldown_seconds: int = Field(900, ge=0)
    app: str | None = None  # None: every app
    model: str | None = None  # None: every model


class AlertRules(BaseModel):
    rules: list[AlertRule]


class Alert(BaseModel):
    alert_id: str  # rule + app + model + last window start: a re-evaluation never fires twice
    rule: str
    metric: AlertMetric
    app: str
    model: str
    value: float
    threshold: float
    op: str
    windows: int
    interactions: int  # the interactions the metric was computed over (its denominator)
    window_start: datetime
    window_end: datetime
    fired_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    message: str
