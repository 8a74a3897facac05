"""Alert rules from a YAML/JSON file, and the single-window threshold test (the lifecycle of both rule
kinds is streams.alerts.lifecycle)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from pipeline.rules_file import read_rules_file
from schemas.alert import Alert, AlertRule, AlertRules
from schemas.window import WindowAggregate
from streams.alerts.lifecycle import OPS, Rule, alert_id
from streams.alerts.stats import DENOMINATORS

__all__ = ["DENOMINATORS", "OPS", "RuleEvaluator", "alert_id", "load_rules", "metric_support", "metric_value"]


def load_rules(path: Path) -> AlertRules:
    """``rules:`` (and ``receivers:``) in YAML (.yaml/.yml) or JSON; a bad file or rule raises a
    ConfigError naming the file, the rule's index, its kind, the field and the reason."""
    return read_rules_file(path, AlertRules, "alert rules file")


def metric_support(rule: Rule, pooled: WindowAggregate) -> int:
    """How many interactions the rule's metric is computed over (not the window's count: a rate of
    refusals among 3 known flags is no firmer because 50 interactions arrived)."""
    return int(getattr(pooled, DENOMINATORS[rule.metric]))


def metric_value(rule: Rule, pooled: WindowAggregate) -> float | None:
    value = getattr(pooled, rule.metric)
    return None if value is None else float(value)


class RuleEvaluator:
    def __init__(self, rules: AlertRules) -> None:
        self.rules = rules.rules

    def rules_for(self, app: str, model: str) -> list[Rule]:
        return [
            r for r in self.rules if (r.app is None or r.app == app) and (r.model is None or r.model == model)
        ]

    @staticmethod
    def check(
        rule: AlertRule,  # a threshold rule (the engine runs streams.alerts.lifecycle.decide)
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
        aid = alert_id(rule, app, model, last_window.window_start)
        return Alert(
            alert_id=aid,
            incident_id=aid,
            starts_at=last_window.window_end,
            severity=rule.severity,
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
