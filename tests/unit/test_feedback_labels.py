"""End users' thumbs as labels: the rule's matching, its validation, and that such labels stay apart
from reviewers' (agreement, the review queue)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from pipeline.feedback import feedback_labels, verdict_text
from pipeline.judge_quality import judge_quality
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.label import CONVERSATION_KINDS, LABEL_TARGETS, LabeledRow, LabelKind, LabelSource
from schemas.settings import FeedbackRule, describe_settings_error, settings_from_env
from tests.fixtures.messages import EVALUATED_AT
from tests.fixtures.store import store_settings

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)


def evaluation(iid: str, metadata: dict[str, object] | None) -> Evaluation:
    interaction = (
        Interaction(
            interaction_id=iid,
            timestamp=NOW,
            app="a",
            model="m",
            question="q?",
            contexts=["c"],
            answer="x.",
            metadata=metadata,
        )
        if metadata is not None
        else None
    )
    return Evaluation(
        evaluated_at=EVALUATED_AT,
        interaction_id=iid,
        timestamp=NOW,
        app="a",
        model="m",
        judge="lexical",
        interaction=interaction,
    )


def test_verdicts_are_matched_as_trimmed_lower_case_text() -> None:
    assert [verdict_text(v) for v in ("  UP ", -1, 1.0, True, 0.5, ["up"], None)] == [
        "up", "-1", "1", "true", None, None, None,
    ]  # fmt: skip
    rule = FeedbackRule(kind="correct", values={"Up": 1, "DOWN": 0, "-1": 0, "true": 1})
    evaluations = [
        evaluation("e0", {"feedback": "down"}),
        evaluation("e1", {"feedback": -1}),
        evaluation("e2", {"feedback": True}),
        evaluation("e3", {"feedback": "meh"}),  # not in the rule: no label
        evaluation("e4", {"rating": "up"}),  # another key
        evaluation("e5", None),  # no interaction stored with the evaluation
        evaluation("e6", {"feedback": {"thumb": "up"}}),  # not a verdict
    ]
    labels = feedback_labels(evaluations, rule, NOW)
    assert [(x.interaction_id, x.kind, x.value) for x in labels] == [
        ("e0", LabelKind.CORRECT, 0), ("e1", LabelKind.CORRECT, 0), ("e2", LabelKind.CORRECT, 1),
    ]  # fmt: skip
    assert {(x.source, x.reviewer, x.labeled_at) for x in labels} == {(LabelSource.END_USER, "end_user", NOW)}
    other_key = FeedbackRule(key="rating", values={"up": 1})
    assert [x.interaction_id for x in feedback_labels(evaluations, other_key, NOW)] == ["e4"]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ('{"values": {"up": 2}}', "values.up"),
        ('{"values": {}}', "at least 1"),
        ('{"values": {"up": 1}, "kind": "grounde"}', "unknown label kind 'grounde': use one of grounded"),
        ('{"values": {"up": 1}, "kind": 1}', "unknown label kind 1"),
        ('{"values": {"up": 1}, "thumbs": true}', "thumbs"),
        ('{"values": {"Up": 1, "up ": 0}}', "given twice"),
        ('{"values": {" ": 1}}', "blank"),
    ],
)
def test_a_bad_rule_is_refused_in_one_line(value: str, reason: str) -> None:
    with pytest.raises(ValidationError) as caught:
        settings_from_env({"GROUNDWATCH_LABELS__END_USER_FEEDBACK": value})
    line = describe_settings_error(caught.value)
    assert "GROUNDWATCH_LABELS__END_USER_FEEDBACK" in line and reason in line


def test_a_rule_may_stand_for_every_label_kind_of_the_registry_and_only_those() -> None:
    for kind in LABEL_TARGETS:
        rule = settings_from_env(
            {"GROUNDWATCH_LABELS__END_USER_FEEDBACK": f'{{"kind": "{kind.value}", "values": {{"yes": 1}}}}'}
        ).labels.end_user_feedback
        assert rule is not None
        turn = evaluation("e0", {"feedback": "yes"})
        labels = feedback_labels([turn.model_copy(update={"conversation_id": "conv-1"})], rule, NOW)
        # a conversation kind labels the turn's conversation; a turn of no conversation gives none
        target = "conv-1" if kind in CONVERSATION_KINDS else "e0"
        assert [(x.interaction_id, x.kind, x.value) for x in labels] == [(target, kind, 1)]
        assert len(feedback_labels([turn], rule, NOW)) == (0 if kind in CONVERSATION_KINDS else 1)
    assert set(LABEL_TARGETS) == {"grounded", "correct", "answer_refusal", "ground_truth_refusal", "resolved"}


def test_end_user_labels_count_in_agreement_only_when_asked() -> None:
    def row(iid: str, value: int, source: LabelSource, hallucination: bool) -> LabeledRow:
        return LabeledRow(
            interaction_id=iid,
            timestamp=NOW,
            app="a",
            model="m",
            judge="lexical",
            kind=LabelKind.GROUNDED,
            reviewer=source.value if source is LabelSource.END_USER else "ann",
            source=source,
            value=value,
            hallucination=hallucination,
        )

    rows = [row("r1", 0, LabelSource.REVIEWER, True), row("r2", 1, LabelSource.REVIEWER, False)]
    rows += [row("u1", 1, LabelSource.END_USER, True), row("r1", 1, LabelSource.END_USER, True)]
    [apart] = judge_quality(rows, lambda _: 0.5, resamples=0)
    assert apart.by_source == {"reviewer": 2} and apart.agreement is not None
    assert apart.agreement.cases == 2 and apart.agreement.balanced_accuracy.value == 1.0
    [mixed] = judge_quality(rows, lambda _: 0.5, include_end_user=True, resamples=0)
    assert mixed.by_source == {"reviewer": 2, "end_user": 2}
    assert mixed.agreement is not None and mixed.agreement.cases == 2  # u1 counted, r1 disputed (a tie)
    assert mixed.disputed == 1


async def test_end_user_labels_leave_the_review_queue_and_progress_alone() -> None:
    from schemas.settings import LabelsSettings
    from streams.clickhouse.labels import LabelStore
    from streams.clickhouse.store import ClickHouseStore

    store = ClickHouseStore.open_sync(store_settings())
    try:
        labels = LabelStore(store)
        now = NOW
        ids = [f"q{i}" for i in range(40)]
        await store.insert_evaluations(
            [
                Evaluation(
                    evaluated_at=EVALUATED_AT,
                    interaction_id=i,
                    timestamp=now,
                    app="a",
                    model="m",
                    judge="lexical",
                    context_entailment=0.9,
                    hallucination=False,
                    answer_refusal=False,
                )
                for i in ids
            ]
        )
        rule = FeedbackRule(values={"down": 0})
        thumbs = feedback_labels([evaluation(i, {"feedback": "down"}) for i in ids], rule, now)
        await labels.insert(thumbs)
        settings = LabelsSettings(review_rate=1.0)
        queue = await labels.queue(
            now - timedelta(hours=1), now + timedelta(hours=1), settings, 0.5, limit=100
        )
        assert {q.interaction_id for q in queue} == set(ids)  # thumbs do not take them out
        assert await labels.progress(now - timedelta(days=7), target=50) == []
        assert len(await labels.labeled_rows(now - timedelta(hours=1), now + timedelta(hours=1))) == 40
    finally:
        store.close()
