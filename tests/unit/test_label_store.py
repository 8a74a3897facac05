"""Labels in embedded chDB: the latest label wins, labels meet the judge's verdicts, the review queue's
draw in SQL is the Python draw, and the judge's quality read end to end with its corrected rate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipeline.review import REVIEW_FRACTION_SQL, SALT, drawn
from pipeline.sampling import stable_fraction
from schemas.label import LabelKind, LabelSource
from schemas.settings import LabelsSettings, Settings
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.store import ClickHouseStore
from streams.judge_quality import read_quality
from tests.fixtures.labels import LATER, T0, ev, label
from tests.fixtures.store import store_with_window


async def test_the_latest_label_of_a_reviewer_wins_and_others_stay(store: ClickHouseStore) -> None:
    labels = LabelStore(store)
    await labels.insert([label("x", 1, at=LATER), label("x", 0, reviewer="bob")])
    await labels.insert([label("x", 0, at=LATER + timedelta(minutes=1))])  # ann changes her mind
    await labels.insert([label("x", 0, at=LATER + timedelta(minutes=1))])  # a redelivery of the same
    got = await labels.of_interaction("x")
    assert [(g.reviewer, g.value) for g in got] == [("ann", 0), ("bob", 0)]


async def test_labels_meet_verdicts_and_the_rate_is_corrected(store: ClickHouseStore) -> None:
    labels = LabelStore(store)
    # 100 judged interactions: 30 flagged. People: of the flagged 24 hallucinated, of the rest 7.
    evals = [ev(f"f{i}", True) for i in range(30)] + [ev(f"n{i}", False) for i in range(70)]
    await store_with_window(store, evals, T0, datetime.now(UTC))
    marks = [label(f"f{i}", 0 if i < 24 else 1) for i in range(30)]
    marks += [label(f"n{i}", 0 if i < 7 else 1) for i in range(70)]
    marks.append(label("f0", 0, reviewer="end-user", source=LabelSource.END_USER))  # kept apart
    marks.append(label("gone", 1))  # an interaction not stored: no row
    await labels.insert(marks)
    rows = await labels.labeled_rows(T0, T0 + timedelta(hours=1))
    assert len(rows) == 101 and {r.judge_model for r in rows} == {"lexical-v1"}
    settings = Settings().with_changes(labels={"min_per_class": 10, "bootstrap_resamples": 200})
    report = await read_quality(labels, settings, T0, T0 + timedelta(hours=1), app="a")
    [block] = [b for b in report.apps if b.kind is LabelKind.GROUNDED]
    assert block.by_source == {"reviewer": 100}
    a = block.agreement
    assert a is not None and a.cases == 100
    assert a.sensitivity.value == pytest.approx(24 / 31)  # flagged among the 31 hallucinated
    assert a.specificity.value == pytest.approx(63 / 69)  # not flagged among the 69 grounded
    c = block.corrected
    assert c is not None and c.flagged == 30 and c.total == 100
    expected = (0.3 + 63 / 69 - 1) / (24 / 31 + 63 / 69 - 1)
    assert c.corrected == pytest.approx(expected)
    assert c.low is not None and c.high is not None and c.low < expected < c.high
    [judge] = [b for b in report.judges if b.kind is LabelKind.GROUNDED]
    assert (judge.judge, judge.judge_model) == ("lexical", "lexical-v1")


async def test_the_queue_draws_in_sql_what_python_draws(store: ClickHouseStore) -> None:
    ids = [f"q-{i}" for i in range(400)]
    sql = await store.query(
        f"SELECT interaction_id, {REVIEW_FRACTION_SQL} AS f "
        "FROM (SELECT arrayJoin({ids:Array(String)}) AS interaction_id)",
        {"ids": ids},
    )
    for row in sql:
        assert row["f"] == pytest.approx(stable_fraction(row["interaction_id"], SALT), abs=1e-12)
    labels = LabelStore(store)
    await store.insert_evaluations([ev(i, i.endswith("7"), ctx=0.8) for i in ids])
    settings = LabelsSettings(
        review_rate=0.1, review_near_threshold_rate=0.5, review_near_threshold_band=0.05
    )
    queue = await labels.queue(T0, LATER, settings, threshold=0.81, limit=1000)
    # every context entailment (0.8) is near the threshold: drawn at 0.5
    assert {q.interaction_id for q in queue} == {i for i in ids if drawn(i, 0.5)}
    assert {q.inclusion_probability for q in queue} == {0.5}
    await labels.insert([label(queue[0].interaction_id, 1)])
    again = await labels.queue(T0, LATER, settings, threshold=0.81, limit=1000)
    assert len(again) == len(queue) - 1  # a labeled interaction leaves the queue
    far = await labels.queue(T0, LATER, settings, threshold=0.3, limit=1000)
    assert {q.interaction_id for q in far} == {i for i in ids if drawn(i, 0.1)} - {queue[0].interaction_id}
    [progress] = await labels.progress(T0, target=50)
    assert (progress.app, progress.labeled_this_week) == ("a", 1)


async def test_the_queue_draws_near_each_app_and_models_own_threshold(store: ClickHouseStore) -> None:
    ids = [f"t-{i}" for i in range(300)]
    evaluations = [ev(i, False, ctx=0.8) for i in ids]
    # a third of them in app b / model x, a third in b / y: b's threshold 0.5, b / x's own 0.78
    for n, e in enumerate(evaluations):
        if n % 3:
            evaluations[n] = e.model_copy(update={"app": "b", "model": "x" if n % 3 == 1 else "y"})
    await store.insert_evaluations(evaluations)
    settings = Settings.from_values(
        {
            "pipeline": {
                "app_thresholds": {"b": {"hallucination": 0.5, "models": {"x": {"hallucination": 0.78}}}}
            }
        }
    )
    overrides = settings.pipeline.app_threshold_overrides("hallucination")
    assert overrides == [("b", "x", 0.78), ("b", "", 0.5)]
    labels_settings = LabelsSettings(
        review_rate=0.1, review_near_threshold_rate=0.5, review_near_threshold_band=0.05
    )
    queue = await LabelStore(store).queue(
        T0, LATER, labels_settings, threshold=0.81, overrides=overrides, limit=1000
    )
    # a (0.81) and b / x (0.78) are near 0.8: drawn at 0.5; b / y (b's 0.5) is far: drawn at 0.1
    expected = {e.interaction_id: 0.1 if (e.app, e.model) == ("b", "y") else 0.5 for e in evaluations}
    assert {q.interaction_id: q.inclusion_probability for q in queue} == {
        i: p for i, p in expected.items() if drawn(i, p)
    }


async def test_the_queue_draws_near_the_threshold_of_the_judge_that_scored_each_row(
    store: ClickHouseStore,
) -> None:
    """Rows scored by another judge than the dashboard's are stratified around their own judge's
    threshold, the one their labels get their inclusion probability from (api.post_label)."""
    ids = [f"j-{i}" for i in range(300)]
    evaluations = [ev(i, False, ctx=0.53) for i in ids]
    for n, e in enumerate(evaluations):
        if n % 2:
            evaluations[n] = e.model_copy(update={"judge": "openai"})
    await store.insert_evaluations(evaluations)
    labels_settings = LabelsSettings(
        review_rate=0.1, review_near_threshold_rate=0.5, review_near_threshold_band=0.05
    )
    queue = await LabelStore(store).queue(
        T0, LATER, labels_settings, threshold=0.81, by_judge={"lexical": 0.81, "openai": 0.5}, limit=1000
    )
    # the openai rows (0.53) lie near their judge's 0.5: drawn at 0.5; the lexical ones far from 0.81
    expected = {e.interaction_id: 0.5 if e.judge == "openai" else 0.1 for e in evaluations}
    assert {q.interaction_id: q.inclusion_probability for q in queue} == {
        i: p for i, p in expected.items() if drawn(i, p)
    }
