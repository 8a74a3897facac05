"""Choosing a decision threshold from people's labels, by grouped cross-validation.

For the ``grounded`` kind the score is the context entailment (the hallucination threshold), for
``correct`` the answer-entails-ground-truth score (the correct threshold); a case is predicted positive
(grounded, correct) when its score is at or over the threshold. The labeled cases are split into ``k``
folds that keep a conversation together (``pipeline.metrics.crossval``): the out-of-fold balanced
accuracy at today's threshold and with a threshold chosen on the other folds are what a user can expect
on new traffic; the proposed threshold is the one chosen on every labeled case. Labels count unweighted
here: a threshold is a property of the cases near it, not of the traffic's mix.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from pipeline.metrics.agreement import consensus
from pipeline.metrics.crossval import (
    K,
    Scored,
    choose_shared_threshold,
    choose_threshold,
    cross_validate,
    fixed_threshold,
    grouped_folds,
    mean_sd,
)
from schemas.label import LabeledRow, LabelKind

#: the score a label kind's threshold applies to, and the setting that holds it
SCORE_OF: dict[LabelKind, tuple[str, str]] = {
    LabelKind.GROUNDED: ("context_entailment", "GROUNDWATCH_PIPELINE__HALLUCINATION_THRESHOLD"),
    LabelKind.CORRECT: ("answer_entails_ground_truth", "GROUNDWATCH_PIPELINE__CORRECT_THRESHOLD"),
}


class Calibration(BaseModel):
    kind: LabelKind
    score: str
    setting: str = Field(description="the environment variable that sets this threshold")
    cases: int
    positives: int
    groups: int
    folds: int
    current_threshold: float
    current_balanced_accuracy: float | None = Field(description="out-of-fold mean at today's threshold")
    current_sd: float | None
    cross_validated_balanced_accuracy: float | None = Field(
        description="out-of-fold mean with the threshold chosen on the other folds"
    )
    cross_validated_sd: float | None
    fold_thresholds: list[float]
    proposed_threshold: float | None = Field(description="chosen on every labeled case")
    note: str = ""


def calibrate(
    rows: Sequence[LabeledRow], kind: LabelKind, current: float, *, k: int = K, seed: int = 0
) -> Calibration:
    """Calibrate ``kind``'s threshold on these labeled rows (one label per interaction: the majority
    when several people labeled it, ties left out)."""
    score_name, setting = SCORE_OF[kind]
    by_case: dict[str, list[LabeledRow]] = {}
    for row in rows:
        if row.kind is kind:
            by_case.setdefault(row.interaction_id, []).append(row)
    labels: list[int] = []
    scores: list[float] = []
    groups: list[str] = []
    for iid, case in by_case.items():
        value = consensus([r.value for r in case])
        first = case[0]
        score = getattr(first, score_name)
        if value is None or score is None or (kind is LabelKind.GROUNDED and first.hallucination is None):
            continue  # a tie, no score, or a refusal / unanswered: the threshold never applies to it
        labels.append(value)
        scores.append(float(score))
        groups.append(first.conversation_id or iid)
    positives = sum(labels)
    n_groups = len(set(groups))
    folds = min(k, n_groups)
    base = {
        "kind": kind, "score": score_name, "setting": setting, "cases": len(labels),
        "positives": positives, "groups": n_groups, "folds": folds, "current_threshold": current,
    }  # fmt: skip
    if folds < 2 or positives < 2 or len(labels) - positives < 2:
        return Calibration(
            **base,
            current_balanced_accuracy=None,
            current_sd=None,
            cross_validated_balanced_accuracy=None,
            cross_validated_sd=None,
            fold_thresholds=[],
            proposed_threshold=None,
            note="too few labels: at least 2 of each class in 2 conversations are needed",
        )
    scored = {"labels": Scored(labels, scores, grouped_folds(groups, folds, seed))}
    today = cross_validate(scored, fixed_threshold(current), k=folds)["labels"]
    chosen = cross_validate(scored, choose_shared_threshold, k=folds)["labels"]
    cur_mean, cur_sd = mean_sd([f.balanced_accuracy for f in today])
    cv_mean, cv_sd = mean_sd([f.balanced_accuracy for f in chosen])
    return Calibration(
        **base,
        current_balanced_accuracy=cur_mean,
        current_sd=cur_sd,
        cross_validated_balanced_accuracy=cv_mean,
        cross_validated_sd=cv_sd,
        fold_thresholds=[f.threshold for f in chosen],
        proposed_threshold=choose_threshold(labels, scores),
    )
