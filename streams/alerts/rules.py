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

        ``pooled`` spans the K windows ending with ``last_window``. No firing under ``min_interactions``,
        when the metric has no value, or within ``cooldown_seconds`` (event time: window ends) of the
        previous firing of the same rule for the same app/model.
        """
        if pooled.count < rule.min_interactions:
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
            interactions=pooled.count,
            window_start=pooled.window_start,
            window_end=pooled.window_end,
            message=(
                f"[groundwatch] {rule.name}: {rule.metric} of {app}/{model} is {value:.3f} "
                f"({rule.op} {rule.threshold}) over the last {rule.windows} window(s), "
                f"{pooled.count} interactions, {pooled.window_start:%Y-%m-%d %H:%M:%S}"
                f"-{pooled.window_end:%H:%M:%S} UTC"
            ),
        )
