"""Alert rules from a YAML/JSON file and their pure evaluation (no Kafka, no ClickHouse)."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from schemas.alert import Alert, AlertRule, AlertRules
from schemas.window import WindowAggregate

OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


def load_rules(path: Path) -> AlertRules:
    """``rules:`` list in YAML (.yaml/.yml) or JSON; a bad rule raises with the field and the reason."""
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    if isinstance(data, list):
        data = {"rules": data}
    return AlertRules.model_validate(data or {"rules": []})


#: the WindowAggregate field that counts the interactions a metric is computed over (its denominator)
DENOMINATORS: dict[str, str] = {
    "hallucination_rate": "answered",
    "answer_refusal_rate": "answer_refusal_known",
    "ground_truth_refusal_rate": "ground_truth_refusal_known",
    "mean_context_entailment": "context_scored",
    "mean_ground_truth_entails_answer": "ground_truth_answer_scored",
    "mean_answer_entails_ground_truth": "answer_ground_truth_scored",
}


def metric_support(rule: AlertRule, pooled: WindowAggregate) -> int:
    """How many interactions the rule's metric is computed over (not the window's count: a rate of
    refusals among 3 known flags is no firmer because 50 interactions arrived)."""
    return int(getattr(pooled, DENOMINATORS[rule.metric]))


def metric_value(rule: AlertRule, pooled: WindowAggregate) -> float | None:
    value = getattr(pooled, rule.metric)
    return None if value is None else float(value)


def alert_id(rule: AlertRule, app: str, model: str, window_start: datetime) -> str:
    """Deterministic: the same rule on the same window fires (at most) once, whoever evaluates it."""
    return f"{rule.name}|{app}|{model}|{window_start.strftime('%Y-%m-%dT%H:%M:%S')}"


class RuleEvaluator:
    def __init__(self, rules: AlertRules) -> None:
        self.rules = rules.rules

    def rules_for(self, app: str, model: str) -> list[AlertRule]:
        return [
            r for r in self.rules if (r.app is None or r.app == app) and (r.model is None or r.model == model)
        ]

    @staticmethod
    def check(
        rule: AlertRule,
        pooled: WindowAggregate,
        *,
        last_window: WindowAggregate,
        last_fired_end: datetime | None,
    ) -> Alert | None:
        """Fire when the metric over the pooled last-K windows crosses the threshold.

        ``pooled`` spans the K windows ending with ``last_window``. No firing when fewer than
        ``min_interactions`` interactions carry the metric (its own denominator: ``metric_support``),
        when the metric has no value, or within ``cooldown_seconds`` (event time: window ends) of the
        previous firing of the same rule for the same app/model.
        """
        support = metric_support(rule, pooled)
        if support < rule.min_interactions:
            return None
        value = metric_value(rule, pooled)
        if value is None or not OPS[rule.op](value, rule.threshold):
            return None
        if last_fired_end is not None:
            if last_window.window_end - last_fired_end < timedelta(seconds=rule.cooldown_seconds):
                return None
            if last_window.window_end <= last_fired_end:
                return None
        app, model = last_window.app, last_window.model
        return Alert(
            alert_id=alert_id(rule, app, model, last_window.window_start),
            rule=rule.name,
            metric=rule.metric,
            app=app,
            model=model,
            value=value,
            threshold=rule.threshold,
            op=rule.op,
            windows=rule.windows,
            interactions=support,
            window_start=pooled.window_start,
            window_end=pooled.window_end,
            message=(
                f"[groundwatch] {rule.name}: {rule.metric} of {app}/{model} is {value:.3f} "
                f"({rule.op} {rule.threshold}) over the last {rule.windows} window(s), "
                f"{support} interactions, {pooled.window_start:%Y-%m-%d %H:%M:%S}"
                f"-{pooled.window_end:%H:%M:%S} UTC"
            ),
        )
