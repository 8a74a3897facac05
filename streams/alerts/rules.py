"""Alert rules from a YAML/JSON file, and which rules watch an app/model. What a rule decides on its
windows (fire, resolve, nothing) is streams.alerts.lifecycle.decide, for every rule kind."""

from __future__ import annotations

from pathlib import Path

from pipeline.rules_file import read_rules_file
from schemas.alert import AlertRules
from streams.alerts.lifecycle import Rule

__all__ = ["RuleEvaluator", "load_rules"]


def load_rules(path: Path) -> AlertRules:
    """``rules:`` (and ``receivers:``) in YAML (.yaml/.yml) or JSON; a bad file or rule raises a
    ConfigError naming the file, the rule's index, its kind, the field and the reason."""
    return read_rules_file(path, AlertRules, "alert rules file")


class RuleEvaluator:
    def __init__(self, rules: AlertRules) -> None:
        self.rules = rules.rules

    def rules_for(self, app: str, model: str) -> list[Rule]:
        return [
            r for r in self.rules if (r.app is None or r.app == app) and (r.model is None or r.model == model)
        ]
