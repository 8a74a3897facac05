"""Judge-drift alerts: rules on the judge's agreement with people's labels, over the last N labels, fire
when a new judge model disagrees with reviewers, name that judge, and resolve when agreement is back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from pipeline.clock import ManualClock
from pipeline.metrics.agreement import Estimate
from schemas.alert import Alert, AlertRule, AlertRules, BaselineRule
from schemas.evaluation import Evaluation
from schemas.label import Label, LabelKind
from schemas.window import WindowAggregate
from streams.alerts.engine import AlertEngine
from streams.alerts.judge_drift import JudgeDrift, Sample, baseline_check
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.store import ClickHouseStore
from streams.judge_quality import correct_threshold
from streams.windows.tumbling import TumblingWindows
from tests.fixtures import messages
from tests.fixtures.messages import EVALUATED_AT
from tests.settings_factory import make_settings

HOUR = timedelta(hours=1)
T0 = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)  # on a window boundary
OLD = ("openai", "gpt-judge-2025-01", "nli@v3")
NEW = ("openai", "gpt-judge-2025-06", "nli@v4")


def window(hour: int) -> WindowAggregate:
    return messages.window(T0 + hour * HOUR, count=40, answered=40, hallucinations=20, hallucination_rate=0.5)


async def label_hour(store: ClickHouseStore, hour: int, wrong: int, identity: tuple[str, str, str]) -> None:
    """40 judged interactions in the hour, 20 flagged: reviewers disagree with ``wrong`` of each half."""
    judge, judge_model, prompt = identity
    evaluations, labels = [], []
    for i in range(40):
        flagged = i < 20
        iid = f"h{hour}-{i}"
        evaluations.append(
            Evaluation(evaluated_at=EVALUATED_AT,
                interaction_id=iid, timestamp=T0 + hour * HOUR + i * timedelta(seconds=30), app="bot",
                model="m", judge=judge, judge_model=judge_model, prompt_version=prompt,
                context_entailment=0.1 if flagged else 0.9, hallucination=flagged, answer_refusal=False,
            )
        )  # fmt: skip
        agrees = (i % 20) >= wrong
        grounded = (not flagged) if agrees else flagged
        labels.append(
            Label(
                labeled_at=EVALUATED_AT,
                interaction_id=iid,
                kind="grounded",
                value=int(grounded),
                reviewer="ann",
            )
        )
    await store.insert_evaluations(evaluations)
    await LabelStore(store).insert(labels)


def engine(store: ClickHouseStore, rules: AlertRules, clock: ManualClock) -> AlertEngine:
    settings = make_settings()
    drift = JudgeDrift(LabelStore(store).latest_labeled, correct_threshold(settings), resamples=300)
    return AlertEngine(
        rules, settings.alerts, TumblingWindows(3600), store, targets=[], clock=clock, drift=drift
    )


async def replay(
    store: ClickHouseStore, rules: AlertRules, hours: list[tuple[int, tuple[str, str, str]]]
) -> list[Alert]:
    """Label each hour (``wrong`` of 20 per half), close its window, and collect the transitions."""
    clock = ManualClock(T0)
    eng = engine(store, rules, clock)
    made: list[Alert] = []
    for hour, (wrong, identity) in enumerate(hours):
        await label_hour(store, hour, wrong, identity)
        w = window(hour)
        clock.set(w.window_end + timedelta(minutes=1))
        made += await eng.on_window(w)
    return made


GOOD, BAD = 1, 8  # balanced accuracy 0.95 and 0.60


async def test_a_threshold_rule_fires_naming_the_new_judge_and_resolves(store: ClickHouseStore) -> None:
    rule = AlertRule(
        name="judge-ba", metric="judge_balanced_accuracy", op="<", threshold=0.8, labels=80,
        min_interactions=60, resolve_for=2, cooldown_seconds=0,
    )  # fmt: skip
    hours = [(GOOD, OLD)] * 4 + [(BAD, NEW)] * 3 + [(GOOD, NEW)] * 4
    made = await replay(store, AlertRules(rules=[rule]), hours)
    assert [a.state for a in made] == ["firing", "resolved"]
    fired, back = made
    # the last 80 labels: hour 4 (bad, 40) and hour 3 (good, 40) pool to 0.775 < 0.8
    assert fired.window_end == T0 + 5 * HOUR
    assert fired.value == pytest.approx(0.775) and fired.interactions == 80
    assert fired.metric == "judge_balanced_accuracy" and fired.threshold == 0.8
    assert "openai judge (model gpt-judge-2025-06, prompt nli@v4)" in fired.message
    assert "span 2 judge identities" in fired.message
    # back at or above 0.85 on two windows in a row: hours 8 and 9 (the last 80 all good at hour 8)
    assert back.ends_at == T0 + 10 * HOUR and back.value == pytest.approx(0.95)
    assert back.incident == fired.alert_id and "gpt-judge-2025-06" in back.message


async def test_a_baseline_rule_fires_on_a_significant_fall_only(store: ClickHouseStore) -> None:
    rule = BaselineRule(
        name="judge-drift", kind="baseline", metric="judge_balanced_accuracy", labels=80,
        baseline_labels=160, min_interactions=80, min_baseline_interactions=160, min_effect=0.1,
        confidence=0.99, cooldown_seconds=0,
    )  # fmt: skip
    hours = [(GOOD, OLD)] * 5 + [(BAD, NEW)] * 2
    made = await replay(store, AlertRules(rules=[rule]), hours)
    [fired] = made
    # hour 4: the baseline (hours 0-2) has only 120 labeled interactions; hour 5: the last 80 (hours 4
    # and 5) pool to 0.775 against 0.95 on the 160 before them, about 3.5 standard errors down
    assert fired.window_end == T0 + 6 * HOUR
    assert fired.baseline == pytest.approx(0.95) and fired.value == pytest.approx(0.775)
    assert fired.op == "<" and fired.threshold == pytest.approx(0.85) and fired.baseline_interactions == 160
    assert "gpt-judge-2025-06" in fired.message and "nli@v4" in fired.message


async def test_no_labels_no_alert_and_window_rules_are_untouched(store: ClickHouseStore) -> None:
    rules = AlertRules(
        rules=[
            AlertRule(name="ba", metric="judge_balanced_accuracy", op="<", threshold=0.99, min_interactions=1)
        ]
    )
    clock = ManualClock(T0)
    eng = engine(store, rules, clock)
    assert await eng.on_window(window(0)) == []  # no labeled interaction yet: nothing to say
    await label_hour(store, 0, GOOD, OLD)
    clock.set(T0 + 2 * HOUR)
    [fired] = await eng.on_window(window(1))
    assert fired.value == pytest.approx(0.95) and fired.interactions == 40


def sample(value: float, low: float, high: float, cases: int = 200) -> Sample:
    return Sample(Estimate(value=value, low=low, high=high), cases, "openai", "m", "p", 1)


@pytest.mark.parametrize(
    ("current", "baseline", "breach"),
    [
        (sample(0.70, 0.62, 0.78), sample(0.90, 0.87, 0.93), True),  # 0.2 down, z about 4.6
        (sample(0.85, 0.77, 0.93), sample(0.90, 0.87, 0.93), False),  # below min_effect
        (sample(0.70, 0.40, 1.00), sample(0.90, 0.87, 0.93), False),  # too uncertain: z about 1.3
        (sample(0.95, 0.90, 0.99), sample(0.80, 0.75, 0.85), False),  # a rise is not drift
        (sample(0.70, 0.62, 0.78), sample(0.90, 0.87, 0.93, cases=99), False),  # too few before
    ],
)
def test_baseline_significance_takes_both_intervals(current: Sample, baseline: Sample, breach: bool) -> None:
    rule = BaselineRule(
        name="d", kind="baseline", metric="judge_kappa", min_effect=0.1, confidence=0.99,
        min_interactions=100, min_baseline_interactions=100,
    )  # fmt: skip
    assert baseline_check(rule, T0, current, baseline, None).breach is breach


def test_judge_fields_belong_to_judge_metrics_only() -> None:
    with pytest.raises(ValidationError, match="only for a judge metric"):
        AlertRule(name="x", metric="hallucination_rate", threshold=0.1, labels=50)
    rule = AlertRule.model_validate({"name": "x", "metric": "judge_sensitivity", "threshold": 0.7, "op": "<"})
    assert rule.judge_metric and rule.labels == 200 and rule.label_kind == "grounded"
    assert BaselineRule(name="y", kind="baseline", metric="judge_specificity").bad_direction == "down"


async def test_newer_end_user_thumbs_do_not_crowd_out_peoples_labels(store: ClickHouseStore) -> None:
    """The last N labeled interactions are counted among the ones people labeled: 60 newer interactions
    with end users' thumbs only leave the rule its 40 reviewers' labels (unless end users are included)."""
    await label_hour(store, 0, GOOD, OLD)
    thumbs = [
        Evaluation(evaluated_at=EVALUATED_AT,
            interaction_id=f"u-{i}", timestamp=T0 + 2 * HOUR + i * timedelta(seconds=10), app="bot",
            model="m", judge="openai", judge_model=OLD[1], prompt_version=OLD[2], context_entailment=0.9,
            hallucination=False, answer_refusal=False,
        )
        for i in range(60)
    ]  # fmt: skip
    await store.insert_evaluations(thumbs)
    await LabelStore(store).insert(
        [Label(interaction_id=e.interaction_id, kind="grounded", value=1, reviewer="end_user",
               source="end_user", labeled_at=EVALUATED_AT) for e in thumbs]
    )  # fmt: skip
    labels = LabelStore(store)
    people = await labels.latest_labeled("bot", "m", LabelKind.GROUNDED, T0 + 3 * HOUR, 50)
    assert len(people) == 40 and {r.source for r in people} == {"reviewer"}
    everyone = await labels.latest_labeled("bot", "m", LabelKind.GROUNDED, T0 + 3 * HOUR, 50, True)
    assert len({r.interaction_id for r in everyone}) == 50


async def test_an_id_stored_on_two_days_meets_one_verdict(store: ClickHouseStore) -> None:
    """An interaction id evaluated again on another day is a second row of evaluations (its key holds
    the day); its label is joined to the newest of them only."""
    first = Evaluation(evaluated_at=EVALUATED_AT,
        interaction_id="r1", timestamp=T0, app="bot", model="m", judge="openai", judge_model=OLD[1],
        prompt_version=OLD[2], context_entailment=0.1, hallucination=True, answer_refusal=False,
    )  # fmt: skip
    again = first.model_copy(
        update={"timestamp": T0 + 30 * HOUR, "context_entailment": 0.9, "hallucination": False}
    )
    await store.insert_evaluations([first])
    await store.insert_evaluations([again])
    await LabelStore(store).insert(
        [Label(labeled_at=EVALUATED_AT, interaction_id="r1", kind="grounded", value=1, reviewer="ann")]
    )
    rows = await LabelStore(store).labeled_rows(T0 - HOUR, T0 + 48 * HOUR)
    assert [(r.interaction_id, r.hallucination) for r in rows] == [("r1", False)]
    latest = await LabelStore(store).latest_labeled("bot", "m", LabelKind.GROUNDED, T0 + 48 * HOUR, 10)
    assert [(r.interaction_id, r.hallucination) for r in latest] == [("r1", False)]
