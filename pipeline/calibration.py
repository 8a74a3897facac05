"""Choosing a decision threshold from people's labels, by grouped cross-validation.

For the ``grounded`` kind the score is the context entailment (the hallucination threshold), for
``correct`` the answer-entails-ground-truth score (the correct threshold); a case is predicted positive
(grounded, correct) when its score is at or over the threshold. The labeled cases are split into ``k``
folds that keep a conversation together (``pipeline.metrics.crossval``): the out-of-fold balanced
accuracy at today's threshold and with a threshold chosen on the other folds are what a user can expect
on new traffic; the proposed threshold is the one chosen on every labeled case. Labels count unweighted
here: a threshold is a property of the cases near it, not of the traffic's mix.

Where the judge is the cascade, ``cascade_band`` proposes the band of scores whose cases go to its LLM:
the narrowest interval around the threshold holding most of the cases the threshold gets wrong (where
a second opinion can help), with the share of cases inside it (what the LLM would be asked).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from pipeline.metrics.agreement import consensus
from pipeline.metrics.classification import balanced_accuracy
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
from schemas.label import LABEL_TARGETS, LabeledRow, LabelKind

#: the score a label kind's threshold applies to, and its key in ``PipelineSettings.app_thresholds``
SCORE_OF: dict[LabelKind, tuple[str, Literal["hallucination", "correct"]]] = {
    kind: target.threshold for kind, target in LABEL_TARGETS.items() if target.threshold is not None
}
#: the setting holding every app's and model's thresholds
APP_THRESHOLDS = "GROUNDWATCH_PIPELINE__APP_THRESHOLDS"
#: the cascade's band settings (low, high) per label kind it bands
CASCADE_BAND: dict[LabelKind, tuple[str, str]] = {
    kind: target.cascade_band for kind, target in LABEL_TARGETS.items() if target.cascade_band is not None
}
#: the share of the threshold's errors a proposed cascade band holds
BAND_ERRORS = 0.9


class CascadeBand(BaseModel):
    """A proposed cascade band: scores in [low, high] go to the cascade's LLM."""

    low: float
    high: float
    settings: tuple[str, str] = Field(description="the environment variables of low and high")
    errors: int = Field(description="labeled cases the threshold gets wrong")
    errors_inside: int = Field(description="of those, inside the band")
    share_inside: float = Field(description="labeled cases inside the band: the share the LLM would judge")


class Calibration(BaseModel):
    kind: LabelKind
    score: str
    key: Literal["hallucination", "correct"] = Field(description="the threshold's key in app_thresholds")
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
    cascade_band: CascadeBand | None = Field(None, description="proposed when the judge is the cascade")
    note: str = ""


def _cases(rows: Sequence[LabeledRow], kind: LabelKind) -> tuple[list[int], list[float], list[str]]:
    """Labels, scores and groups of ``kind``'s cases (the majority label; ties, cases without a score
    and refusals, which no threshold decides, left out)."""
    score_name, _ = SCORE_OF[kind]
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
    return labels, scores, groups


def cascade_band(
    labels: Sequence[int], scores: Sequence[float], threshold: float, *, share: float = BAND_ERRORS
) -> tuple[float, float, int, int, float] | None:
    """The narrowest [low, high] around ``threshold`` holding ``share`` of the cases it gets wrong
    (predicted positive at or over it): (low, high, errors, errors inside, share of cases inside);
    None when it gets none wrong."""
    wrong = sorted(s for s, y in zip(scores, labels, strict=True) if (s >= threshold) != bool(y))
    if not wrong:
        return None
    need = math.ceil(share * len(wrong))
    best: tuple[float, float] | None = None
    for i in range(len(wrong) - need + 1):
        low, high = min(wrong[i], threshold), max(wrong[i + need - 1], threshold)
        if best is None or high - low < best[1] - best[0]:
            best = (low, high)
    assert best is not None
    low, high = best
    inside_errors = sum(1 for s in wrong if low <= s <= high)
    inside = sum(1 for s in scores if low <= s <= high) / len(scores)
    return low, high, len(wrong), inside_errors, inside


def calibrate(
    rows: Sequence[LabeledRow],
    kind: LabelKind,
    current: float,
    *,
    cascade: bool = False,
    k: int = K,
    seed: int = 0,
) -> Calibration:
    """Calibrate ``kind``'s threshold on these labeled rows (one label per interaction: the majority
    when several people labeled it, ties left out); with ``cascade``, propose the cascade's band around
    the proposed threshold too."""
    score_name, key = SCORE_OF[kind]
    labels, scores, groups = _cases(rows, kind)
    positives = sum(labels)
    n_groups = len(set(groups))
    folds = min(k, n_groups)
    base = {
        "kind": kind, "score": score_name, "key": key, "cases": len(labels),
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
    proposed, note = _proposed_threshold(labels, scores)
    band = cascade_band(labels, scores, proposed) if cascade and proposed is not None else None
    return Calibration(
        **base,
        note=note,
        current_balanced_accuracy=cur_mean,
        current_sd=cur_sd,
        cross_validated_balanced_accuracy=cv_mean,
        cross_validated_sd=cv_sd,
        fold_thresholds=[f.threshold for f in chosen],
        proposed_threshold=proposed,
        cascade_band=_cascade_band(kind, band),
    )


def _proposed_threshold(labels: Sequence[int], scores: Sequence[float]) -> tuple[float | None, str]:
    """(the threshold fitted on every case, ""), or (None, why) when no threshold beats chance in-sample."""
    proposed = choose_threshold(labels, scores)
    fit = balanced_accuracy(labels, scores, proposed) if proposed is not None else None
    if fit is None or fit <= 0.5:  # every threshold is a coin toss here (or worse): the best is degenerate
        return None, (
            "the judge's score does not separate the two classes on these labels (no threshold does "
            "better than chance, in-sample): no threshold proposed"
        )
    return proposed, ""


def _cascade_band(kind: LabelKind, band: tuple[float, float, int, int, float] | None) -> CascadeBand | None:
    """``cascade_band``'s figures as the CascadeBand of ``kind``'s settings; None without a band."""
    if band is None:
        return None
    low, high, errors, errors_inside, share_inside = band
    return CascadeBand(
        low=low, high=high, settings=CASCADE_BAND[kind], errors=errors, errors_inside=errors_inside,
        share_inside=share_inside,
    )  # fmt: skip


def app_thresholds_with(
    current: Mapping[str, Any], app: str, model: str | None, proposals: Mapping[str, float]
) -> dict[str, Any]:
    """The value of ``app_thresholds`` (``current``: what is set, as JSON) with ``proposals``
    (hallucination / correct) for ``app``, or for ``model`` of ``app`` when given; the rest kept."""
    merged: dict[str, Any] = {name: dict(value) for name, value in current.items()}
    of_app = merged.setdefault(app, {})
    target = of_app
    if model is not None:
        models = of_app.setdefault("models", {})
        models = {name: dict(value) for name, value in models.items()}
        of_app["models"] = models
        target = models.setdefault(model, {})
    target.update({key: round(value, 3) for key, value in proposals.items()})
    return merged
