"""Threshold rules on the engine's path: a window's observation of the rule's metric
(streams.alerts.stats.observe) in a slot, the slots to streams.alerts.lifecycle.decide; threshold,
min interactions over the metric's own denominator, cool-down, scope; rules files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from schemas.alert import Alert, AlertRule, AlertRules
from schemas.errors import ConfigError
from schemas.window import WindowAggregate
from streams.alerts.lifecycle import Slot, decide
from streams.alerts.rules import RuleEvaluator, load_rules
from streams.alerts.stats import observe

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def window(
    start: datetime, count: int = 10, rate: float | None = 0.4, *, answered: int | None = None, **support: int
) -> WindowAggregate:
    """A 1-minute window of app a / model m: ``answered`` (default ``count``) answers, ``rate`` of them
    hallucinated; the other denominators default to ``count``."""
    answered = count if answered is None else answered
    hallucinations = round(answered * rate) if rate is not None else 0
    known = {"answer_refusal_known": count, "context_scored": count, **support}
    return WindowAggregate(
        window_start=start,
        window_end=start + MINUTE,
        app="a",
        model="m",
        count=count,
        mean_context_entailment=0.6,
        mean_ground_truth_entails_answer=None,
        mean_answer_entails_ground_truth=None,
        answered=answered,
        hallucinations=hallucinations,
        hallucination_rate=hallucinations / answered if answered and rate is not None else None,
        answer_refusal_rate=0.1,
        ground_truth_refusal_rate=None,
        input_tokens=0,
        output_tokens=0,
        cost_usd=0.0,
        judge_latency_p50_ms=None,
        judge_latency_p95_ms=None,
        incomplete=0,
        **known,
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
    windows: list[WindowAggregate], fired: datetime | None = None, rule: AlertRule = RULE
) -> Alert | None:
    """What the engine decides when the last of ``windows`` (consecutive, oldest first) closes."""
    slots = [Slot(w.window_start, w.window_end, observe(rule.metric, w)) for w in windows]
    return decide(rule, "a", "m", slots, None, fired, T0)


def three(**kw: Any) -> list[WindowAggregate]:
    """The three windows ending with the one starting at T0, alike."""
    return [window(T0 - k * MINUTE, **kw) for k in (2, 1, 0)]


def test_fires_over_threshold_and_not_under() -> None:
    alert = check(three(rate=0.4))
    assert alert is not None and alert.value == pytest.approx(0.4) and alert.interactions == 30
    assert alert.alert_id == "h|a|m|2026-01-01T12:00:00" and "hallucination_rate" in alert.message
    assert alert.window_start == T0 - 2 * MINUTE and alert.window_end == T0 + MINUTE  # the pooled span
    assert check(three(rate=0.3)) is None  # ">" is strict
    assert check(three(rate=0.2)) is None
    assert check(three(answered=0, rate=None)) is None  # no value: nothing was answered


def test_the_rate_is_pooled_over_the_windows_not_averaged() -> None:
    # 9 of 10, then 0 of 20 and 0 of 20: the mean of the window rates is 0.30, the pooled rate 0.18
    windows = [window(T0 - 2 * MINUTE, rate=0.9), window(T0 - MINUTE, 20, 0.0), window(T0, 20, 0.0)]
    assert check(windows, rule=RULE.model_copy(update={"threshold": 0.2})) is None
    alert = check(windows, rule=RULE.model_copy(update={"threshold": 0.15}))
    assert alert is not None and alert.value == pytest.approx(9 / 50) and alert.interactions == 50


def test_lower_bound_rules() -> None:
    rule = RULE.model_copy(update={"metric": "mean_context_entailment", "op": "<", "threshold": 0.7})
    assert check(three(), rule=rule) is not None
    assert check(three(), rule=rule.model_copy(update={"threshold": 0.6})) is None


def test_min_interactions() -> None:
    assert check([window(T0 - 2 * MINUTE, 7, 0.5), window(T0 - MINUTE, 6, 0.5), window(T0, 6, 0.5)]) is None
    alert = check([window(T0 - 2 * MINUTE, 7, 0.5), window(T0 - MINUTE, 7, 0.5), window(T0, 6, 0.5)])
    assert alert is not None and alert.interactions == 20


def test_min_interactions_counts_the_metrics_own_denominator() -> None:
    # 150 interactions, but the hallucination rate is over the 6 answered ones: too few to alert on
    assert check(three(count=50, answered=2, rate=0.5)) is None
    alert = check(three(count=50, answered=7, rate=0.5))
    assert alert is not None and alert.interactions == 21
    refusal = RULE.model_copy(update={"metric": "answer_refusal_rate", "threshold": 0.05})
    assert check(three(count=50, answer_refusal_known=3), rule=refusal) is None
    alert = check(three(count=50, answer_refusal_known=10), rule=refusal)
    assert alert is not None and alert.interactions == 30
    mean = RULE.model_copy(update={"metric": "mean_context_entailment", "op": "<", "threshold": 0.7})
    assert check(three(count=50, context_scored=5), rule=mean) is None
    gt = RULE.model_copy(update={"metric": "mean_ground_truth_entails_answer", "op": "<", "threshold": 0.7})
    assert check(three(count=50), rule=gt) is None  # no ground truth scored at all


def test_cooldown_in_event_time() -> None:
    end = T0 + MINUTE  # the last window's end
    assert check(three(), fired=end - timedelta(seconds=599)) is None
    assert check(three(), fired=end - timedelta(seconds=600)) is not None
    zero = RULE.model_copy(update={"cooldown_seconds": 0})
    assert check(three(), fired=end, rule=zero) is None  # same window: once
    assert check(three(), fired=end - MINUTE, rule=zero) is not None


def test_scope_by_app_and_model() -> None:
    rules = AlertRules(rules=[RULE, RULE.model_copy(update={"name": "only-b", "app": "b", "model": "m"})])
    ev = RuleEvaluator(rules)
    assert [r.name for r in ev.rules_for("a", "m")] == ["h"]
    assert [r.name for r in ev.rules_for("b", "m")] == ["h", "only-b"]
    assert [r.name for r in ev.rules_for("b", "n")] == ["h"]


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
