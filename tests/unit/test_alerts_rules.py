"""Pure alert-rule evaluation: threshold, min interactions, cool-down, scope; rules files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schemas.alert import AlertRule, AlertRules
from schemas.errors import ConfigError
from schemas.window import WindowAggregate
from streams.alerts.rules import RuleEvaluator, load_rules

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def window(
    start: datetime, count: int = 30, rate: float | None = 0.4, app: str = "a", **support: int
) -> WindowAggregate:
    known = {"answer_refusal_known": count, "context_scored": count, **support}
    return WindowAggregate(
        window_start=start,
        window_end=start + timedelta(minutes=1),
        app=app,
        model="m",
        count=count,
        mean_context_entailment=0.6,
        mean_ground_truth_entails_answer=None,
        mean_answer_entails_ground_truth=None,
        answered=support.get("answered", count),
        hallucinations=int(count * (rate or 0)),
        hallucination_rate=rate,
        answer_refusal_rate=0.1,
        ground_truth_refusal_rate=None,
        input_tokens=0,
        output_tokens=0,
        cost_usd=0.0,
        judge_latency_p50_ms=None,
        judge_latency_p95_ms=None,
        incomplete=0,
        **{k: v for k, v in known.items() if k != "answered"},
    )


RULE = AlertRule(
    name="h",
    metric="hallucination_rate",
    op=">",
    threshold=0.3,
    windows=3,
    min_interactions=20,
    cooldown_seconds=600,
)


def check(
    pooled: WindowAggregate, last: WindowAggregate, fired: datetime | None = None, rule: AlertRule = RULE
):
    return RuleEvaluator.check(rule, pooled, last_window=last, last_fired_end=fired)


def test_fires_over_threshold_and_not_under() -> None:
    last = window(T0)
    alert = check(window(T0 - timedelta(minutes=2), rate=0.4), last)
    assert alert is not None and alert.value == 0.4 and alert.interactions == 30
    assert alert.alert_id == "h|a|m|2026-01-01T12:00:00" and "hallucination_rate" in alert.message
    assert check(window(T0, rate=0.3), last) is None  # ">" is strict
    assert check(window(T0, rate=None), last) is None


def test_lower_bound_rules() -> None:
    rule = RULE.model_copy(update={"metric": "mean_context_entailment", "op": "<", "threshold": 0.7})
    assert check(window(T0), window(T0), rule=rule) is not None
    assert check(window(T0), window(T0), rule=rule.model_copy(update={"threshold": 0.6})) is None


def test_min_interactions() -> None:
    assert check(window(T0, count=19), window(T0)) is None
    assert check(window(T0, count=20), window(T0)) is not None


def test_min_interactions_counts_the_metrics_own_denominator() -> None:
    # 50 interactions, but the hallucination rate is over the 3 answered ones: too few to alert on
    assert check(window(T0, count=50, answered=3), window(T0)) is None
    assert check(window(T0, count=50, answered=20), window(T0)) is not None
    refusal = RULE.model_copy(update={"metric": "answer_refusal_rate", "threshold": 0.05})
    assert check(window(T0, count=50, answer_refusal_known=3), window(T0), rule=refusal) is None
    alert = check(window(T0, count=50, answer_refusal_known=25), window(T0), rule=refusal)
    assert alert is not None and alert.interactions == 25
    mean = RULE.model_copy(update={"metric": "mean_context_entailment", "op": "<", "threshold": 0.7})
    assert check(window(T0, count=50, context_scored=5), window(T0), rule=mean) is None
    gt = RULE.model_copy(update={"metric": "mean_ground_truth_entails_answer", "op": "<", "threshold": 0.7})
    assert check(window(T0, count=50), window(T0), rule=gt) is None  # no ground truth scored at all


def test_cooldown_in_event_time() -> None:
    last = window(T0)
    assert check(window(T0), last, fired=last.window_end - timedelta(seconds=599)) is None
    assert check(window(T0), last, fired=last.window_end - timedelta(seconds=600)) is not None
    zero = RULE.model_copy(update={"cooldown_seconds": 0})
    assert check(window(T0), last, fired=last.window_end, rule=zero) is None  # same window: once


def test_scope_by_app_and_model() -> None:
    rules = AlertRules(rules=[RULE, RULE.model_copy(update={"name": "only-b", "app": "b", "model": "m"})])
    ev = RuleEvaluator(rules)
    assert [r.name for r in ev.rules_for("a", "m")] == ["h"]
    assert [r.name for r in ev.rules_for("b", "m")] == ["h", "only-b"]


def test_load_rules_yaml_json_and_errors(tmp_path: Path) -> None:
    y = tmp_path / "r.yaml"
    y.write_text("rules:\n  - {name: r, metric: answer_refusal_rate, threshold: 0.2}\n")
    assert load_rules(y).rules[0].windows == 3
    j = tmp_path / "r.json"
    j.write_text('[{"name": "r", "metric": "hallucination_rate", "threshold": 0.5, "op": ">="}]')
    assert load_rules(j).rules[0].op == ">="
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - {name: r, metric: vibes, threshold: 1}\n")
    with pytest.raises(ConfigError, match="metric"):
        load_rules(bad)
