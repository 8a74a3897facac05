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


def test_a_conversation_stays_in_one_fold() -> None:
    scores = [i / 100 for i in range(20, 100, 2)]
    rows = [row(i, s, int(s >= 0.5), conversation=f"c{i // 4}") for i, s in enumerate(scores)]
    result = calibrate(rows, LabelKind.GROUNDED, current=0.5)
    assert result.groups == 10 and result.folds == 5
    assert result.current_balanced_accuracy == 1.0
