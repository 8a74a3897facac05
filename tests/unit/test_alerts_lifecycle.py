"""Pure lifecycle: threshold `for` and hysteresis, baseline frozen while firing, rule-file validation,
receiver payloads and secrets."""

from __future__ import annotations

import hmac
from datetime import timedelta
from pathlib import Path

import pytest

from schemas.alert import AlertRule, BaselineRule, Receiver
from schemas.errors import ConfigError
from streams.alerts.receivers import Target, alertmanager_alert, resolve, sign
from streams.alerts.rules import load_rules
from tests.fixtures.alerts import HOUR, T0, run
from tests.settings_factory import make_settings


def verify(secret: str, timestamp: str, body: bytes, signature: str) -> bool:
    """What a receiver does with the two headers (constant-time comparison)."""
    return hmac.compare_digest(sign(secret, int(timestamp), body), signature)


def test_threshold_for_and_hysteresis() -> None:
    rule = AlertRule(name="t", metric="hallucination_rate", threshold=0.25, windows=1, min_interactions=10,
                     for_windows=2, resolve_for=2, hysteresis=0.05, cooldown_seconds=0)  # fmt: skip
    # one window over: nothing; two: fires; 0.22 is inside the hysteresis band: still firing
    made = run(rule, [(30, 100), (10, 100), (30, 100), (30, 100), (22, 100), (22, 100), (20, 100), (10, 100)])
    assert [(a.state, a.window_end - T0) for a in made] == [("firing", 4 * HOUR), ("resolved", 8 * HOUR)]
    assert made[1].starts_at == made[0].starts_at and made[1].ends_at == T0 + 8 * HOUR
    assert made[1].alert_id == made[0].alert_id + "|resolved"


def test_baseline_stays_frozen_while_firing() -> None:
    rule = BaselineRule(name="b", kind="baseline", metric="hallucination_rate", windows=1, baseline_windows=4,
                        min_interactions=50, min_baseline_interactions=100, confidence=0.99, resolve_for=1,
                        cooldown_seconds=0)  # fmt: skip
    made = run(rule, [(5, 100)] * 4 + [(20, 100)] * 10)
    assert [a.state for a in made] == ["firing"]  # the trailing baseline fills with 20 %; the alert holds
    assert (
        made[0].baseline == pytest.approx(0.05)
        and made[0].op == ">"
        and made[0].threshold == pytest.approx(0.10)
    )
    assert [a.state for a in run(rule, [(5, 100)] * 4 + [(20, 100)] + [(6, 100)])] == ["firing", "resolved"]


def test_baseline_on_a_falling_mean() -> None:
    rule = BaselineRule(name="g", kind="baseline", metric="mean_context_entailment", windows=1,
                        baseline_windows=6, min_interactions=50, min_baseline_interactions=100,
                        cooldown_seconds=0)  # fmt: skip
    steady = [(80 + d, 100) for d in (1, -1, 2, -2, 0, 1)]  # means 0.78-0.82
    assert run(rule, [*steady, (79, 100)]) == []
    fired = run(rule, [*steady, (60, 100)])
    assert [a.state for a in fired] == ["firing"] and fired[0].op == "<"


def test_rules_file_errors_name_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "r.yaml"
    bad.write_text("rules:\n  - {name: r, kind: baseline, metric: hallucination_rate, min_effect: 0.05, "
                   "resolve_effect: 0.1}\n")  # fmt: skip
    with pytest.raises(ConfigError, match="resolve_effect must be below min_effect"):
        load_rules(bad)
    bad.write_text("rules:\n  - {name: r, kind: baseline, metric: hallucination_rate, thresold: 1}\n")
    with pytest.raises(ConfigError, match="thresold"):
        load_rules(bad)
    bad.write_text("rules: []\nreceivers:\n  - {name: x, kind: slack}\n")
    with pytest.raises(ConfigError, match="exactly one of url and url_env"):
        load_rules(bad)
    ok = tmp_path / "ok.yaml"
    ok.write_text("rules:\n  - {name: r, kind: baseline, metric: hallucination_rate, for: 3}\n")
    assert load_rules(ok).rules[0].for_windows == 3


def test_receivers_resolve_secrets_from_the_environment() -> None:
    hook = Receiver(name="h", kind="webhook", url_env="HOOK_URL", secret_env="HOOK_SECRET")
    settings = make_settings(alerts={"webhook_url": "http://legacy/hook"}).alerts
    targets = resolve([hook], settings, env={"HOOK_URL": "http://h/x", "HOOK_SECRET": "k"})
    assert [(t.name, t.url, t.secret) for t in targets] == [
        ("h", "http://h/x", "k"),
        ("webhook", "http://legacy/hook", None),
    ]
    with pytest.raises(ConfigError, match="HOOK_SECRET"):
        resolve([hook], make_settings().alerts, env={"HOOK_URL": "http://h/x"})


def test_requests_of_each_receiver_kind() -> None:
    rule = AlertRule(name="t", metric="hallucination_rate", threshold=0.2, windows=1, min_interactions=1,
                     resolve_for=1, cooldown_seconds=0, severity="critical")  # fmt: skip
    fired, back = run(rule, [(50, 100), (10, 100)])
    now = T0 + 5 * HOUR
    _, body, headers = Target(
        Receiver(name="w", kind="webhook", url="http://w", secret="k"), "http://w", "k"
    ).request(fired, "d1", now)
    assert headers["X-Groundwatch-Delivery"] == "d1"
    assert verify("k", headers["X-Groundwatch-Timestamp"], body, headers["X-Groundwatch-Signature"])
    assert not verify("other", headers["X-Groundwatch-Timestamp"], body, headers["X-Groundwatch-Signature"])
    am = Target(Receiver(name="am", kind="alertmanager", url="http://am:9093/"), "http://am:9093/")
    assert am.request(fired, "d", now)[0] == "http://am:9093/api/v2/alerts"
    firing = alertmanager_alert(fired, now, timedelta(hours=1))
    assert {k: firing["labels"][k] for k in ("app", "model", "rule", "severity")} == {
        "app": "a", "model": "m", "rule": "t", "severity": "critical",
    }  # fmt: skip
    assert firing["startsAt"] == "2026-01-01T01:00:00.000Z" and firing["endsAt"] == "2026-01-01T06:00:00.000Z"
    assert alertmanager_alert(back, now, timedelta(hours=1))["endsAt"] == "2026-01-01T02:00:00.000Z"


def test_an_alert_over_windows_of_two_days_names_both_dates() -> None:
    rule = AlertRule(name="t", metric="hallucination_rate", threshold=0.25, windows=24, min_interactions=10,
                     cooldown_seconds=0)  # fmt: skip
    [alert] = run(rule, [(5, 100)] * 21 + [(90, 100)] * 6)  # fires over 03:00 on the 1st to 03:00 on the 2nd
    assert alert.message.endswith("2026-01-01 03:00:00-2026-01-02 03:00:00 UTC")
    [same_day] = run(rule.model_copy(update={"windows": 1}), [(90, 100)])
    assert same_day.message.endswith("2026-01-01 00:00:00-01:00:00 UTC")


def test_an_alert_on_a_conversation_metric_counts_conversations() -> None:
    rule = AlertRule(name="c", metric="conversation_unresolved_rate", threshold=0.5, windows=1,
                     min_interactions=10, cooldown_seconds=0)  # fmt: skip
    [alert] = run(rule, [(9, 12)])
    assert ", 12 conversations, 2026-01-01 00:00:00-01:00:00 UTC" in alert.message
    [per_interaction] = run(rule.model_copy(update={"metric": "hallucination_rate"}), [(9, 12)])
    assert ", 12 interactions, " in per_interaction.message
