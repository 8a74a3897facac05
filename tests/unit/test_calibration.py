"""Calibration from labels: on cases whose best threshold is known, the proposal finds it and the
cross-validated balanced accuracy beats a misplaced threshold."""

from __future__ import annotations

from datetime import UTC, datetime

from pipeline.calibration import calibrate
from schemas.label import LabeledRow, LabelKind


def row(i: int, score: float, value: int, *, conversation: str | None = None) -> LabeledRow:
    return LabeledRow(
        interaction_id=f"i{i}", conversation_id=conversation, timestamp=datetime(2026, 1, 1, tzinfo=UTC),
        app="a", model="m", judge="lexical", kind=LabelKind.GROUNDED, reviewer="ann", source="reviewer",
        value=value, context_entailment=score, hallucination=score < 0.9,
    )  # fmt: skip


def test_the_known_best_threshold_is_found() -> None:
    # grounded exactly when the score is at least 0.6: the best threshold lies between 0.55 and 0.6
    scores = [i / 100 for i in range(20, 100, 5)] * 3
    rows = [row(i, s, int(s >= 0.6)) for i, s in enumerate(scores)]
    result = calibrate(rows, LabelKind.GROUNDED, current=0.9)
    assert result.proposed_threshold is not None and 0.55 < result.proposed_threshold < 0.6
    assert result.cross_validated_balanced_accuracy == 1.0
    assert result.current_balanced_accuracy is not None and result.current_balanced_accuracy < 0.9
    assert all(0.5 < t < 0.65 for t in result.fold_thresholds)


def test_refusals_and_ties_are_left_out_and_too_few_labels_say_so() -> None:
    rows = [row(1, 0.2, 0), row(2, 0.9, 1)]
    refusal = row(3, 0.1, 0).model_copy(update={"hallucination": None})
    tie = [row(4, 0.5, 1), row(4, 0.5, 0).model_copy(update={"reviewer": "bob"})]
    result = calibrate([*rows, refusal, *tie], LabelKind.GROUNDED, current=0.8)
    assert result.cases == 2 and result.proposed_threshold is None and "too few" in result.note


def test_a_score_that_does_not_separate_the_classes_gets_no_proposal() -> None:
    """Every case scored alike (a judge answering one fixed score) or scored against the labels: the best
    threshold would be one outside the scores (2.0, which the settings refuse); none is proposed."""
    alike = [row(i, 1.0, i % 2) for i in range(20)]
    result = calibrate(alike, LabelKind.GROUNDED, current=0.8, cascade=True)
    assert result.proposed_threshold is None and result.cascade_band is None
    assert "does not separate" in result.note
    assert result.current_balanced_accuracy == 0.5  # today's figure is still given
    backwards = [row(i, i / 20, int(i < 10)) for i in range(20)]
    assert calibrate(backwards, LabelKind.GROUNDED, current=0.8).proposed_threshold is None


def test_a_conversation_stays_in_one_fold() -> None:
    scores = [i / 100 for i in range(20, 100, 2)]
    rows = [row(i, s, int(s >= 0.5), conversation=f"c{i // 4}") for i, s in enumerate(scores)]
    result = calibrate(rows, LabelKind.GROUNDED, current=0.5)
    assert result.groups == 10 and result.folds == 5
    assert result.current_balanced_accuracy == 1.0


def test_the_cascade_band_holds_the_thresholds_errors_and_says_what_it_costs() -> None:
    from pipeline.calibration import cascade_band

    # at 0.6: errors at 0.55 and 0.58 (grounded, under it), 0.62 and 0.7 (hallucinated, over it), 0.95
    scores = [0.1, 0.2, 0.3, 0.55, 0.58, 0.62, 0.7, 0.8, 0.9, 0.95]
    labels = [0, 0, 0, 1, 1, 0, 0, 1, 1, 0]
    band = cascade_band(labels, scores, 0.6, share=0.8)
    assert band == (0.55, 0.7, 5, 4, 0.4)  # four of five errors in [0.55, 0.7], 4 of 10 cases inside
    assert cascade_band(labels, scores, 0.6, share=1.0) == (0.55, 0.95, 5, 5, 0.7)
    assert cascade_band([0, 1], [0.2, 0.9], 0.5) is None  # nothing wrong: no band
    # the band always holds the threshold
    low, high, *_ = cascade_band([1, 1], [0.1, 0.2], 0.9, share=0.5) or (0, 0)
    assert (low, high) == (0.2, 0.9)


def test_calibrate_proposes_a_band_only_for_the_cascade() -> None:
    scores = [i / 100 for i in range(20, 100, 5)] * 3
    rows = [row(i, s, int(s >= 0.6) if i % 7 else int(s < 0.6)) for i, s in enumerate(scores)]
    assert calibrate(rows, LabelKind.GROUNDED, current=0.9).cascade_band is None
    result = calibrate(rows, LabelKind.GROUNDED, current=0.9, cascade=True)
    band = result.cascade_band
    assert band is not None and result.proposed_threshold is not None
    assert band.low <= result.proposed_threshold <= band.high
    assert band.settings == (
        "GROUNDWATCH_JUDGE__CASCADE_UNSURE_LOW",
        "GROUNDWATCH_JUDGE__CASCADE_UNSURE_HIGH",
    )
    assert band.errors_inside >= 0.9 * band.errors


def test_the_setting_to_apply_keeps_other_apps_and_models() -> None:
    from pipeline.calibration import app_thresholds_with
    from tests.settings_factory import make_settings

    current = {
        "shop": {"correct": 0.4, "models": {"x": {"hallucination": 0.3}}},
        "wiki": {"hallucination": 0.2},
    }
    merged = app_thresholds_with(current, "shop", "y", {"hallucination": 0.71234})
    assert merged == {
        "shop": {"correct": 0.4, "models": {"x": {"hallucination": 0.3}, "y": {"hallucination": 0.712}}},
        "wiki": {"hallucination": 0.2},
    }
    assert current["shop"]["models"] == {"x": {"hallucination": 0.3}}  # not changed in place
    assert app_thresholds_with({}, "new", None, {"correct": 0.5}) == {"new": {"correct": 0.5}}
    # what it prints is a valid setting
    pipe = make_settings(pipeline={"app_thresholds": merged}).pipeline
    assert pipe.threshold_for("context_entailment", "lexical", "shop", "y") == 0.712
