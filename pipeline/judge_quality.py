"""The judge's quality on people's labels, per app, model and judge identity, and the corrected rates.

Pure: rows in (``schemas.label.LabeledRow``: a label joined with the judge's verdicts on its
interaction), blocks out. Where several people labeled one interaction the majority stands (a tie is
*disputed* and left out of agreement, counted); end users' labels count only when asked
(``labels.include_end_user``). Blocks are formed twice: per judge identity (judge kind, its model, the
NLI prompt's version), where agreement says how *this* judge does, and per app/model over every identity
in the period, which is what corrects that app/model's rate (a period that spans two identities says so).

A custom evaluator's kind (``custom.<name>``) is judged by the evaluator, not the core judge: its flag is
its score (1: flagged or passed), and its identity is judge ``custom.<kind of evaluator>``, the judge's
model for a rubric (blank for a pattern or a function) and, as prompt version, the evaluator's version
it scored with: a changed evaluator is a new identity, measured apart.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from pydantic import BaseModel, Field

from pipeline.metrics.agreement import (
    Agreement,
    CorrectedRate,
    CorrectionStatus,
    LabeledCase,
    ReviewerAgreement,
    agreement,
    consensus,
    corrected_rate,
    reviewer_agreement,
)
from schemas.label import LabeledRow, LabelKind, LabelSource, label_target
from schemas.results import CustomScore

ALL = "*"


class QualityBlock(BaseModel):
    """Agreement of one judge (or every judge of an app/model: ``judge_model`` '*') on one label kind."""

    app: str
    model: str
    judge: str
    judge_model: str
    prompt_version: str
    kind: LabelKind | str = Field(description="a LabelKind, or custom.<name> for an evaluator of yours")
    condition: str = Field(description="what a flag claims, e.g. 'hallucinated'")
    rate_metric: str | None = Field(description="the catalogue rate this kind corrects")
    labels: int = Field(description="label rows (one per interaction and person)")
    interactions: int = Field(description="labeled interactions")
    disputed: int = Field(0, description="interactions whose people tied (left out)")
    no_verdict: int = Field(0, description="labeled interactions the judge gave no flag for (left out)")
    by_source: dict[str, int] = Field(default_factory=dict, description="label rows by source")
    identities: int = Field(1, description="judge identities pooled in this block")
    agreement: Agreement | None = None
    reviewers: ReviewerAgreement
    corrected: CorrectedRate | None = None


class Verdicts(Protocol):
    """The judge's verdicts on one interaction (a ``LabeledRow`` or an ``Evaluation``)."""

    @property
    def app(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def judge(self) -> str: ...
    @property
    def hallucination(self) -> bool | None: ...
    @property
    def answer_refusal(self) -> bool | None: ...
    @property
    def ground_truth_refusal(self) -> bool | None: ...
    @property
    def answer_entails_ground_truth(self) -> float | None: ...
    @property
    def custom(self) -> Mapping[str, CustomScore]: ...


#: the judge's "correct" threshold for an interaction's judge, app and model (PipelineSettings.threshold_for)
CorrectThreshold = Callable[[Verdicts], float]


def judge_flag(verdicts: Verdicts, kind: str, correct_threshold: CorrectThreshold) -> bool | None:
    """Whether the judge flagged the label kind's condition (``label_target``) on this interaction;
    None: it gave no verdict."""
    target = label_target(kind)
    if target.evaluator is not None:  # a custom evaluator's: its score, 1 for a flag or a pass
        custom = verdicts.custom.get(str(kind).removeprefix("custom."))
        return None if custom is None or custom.score is None else custom.score >= 0.5
    if target.kind is not LabelKind.CORRECT:  # the flag is a column of its own
        flag: bool | None = getattr(verdicts, target.flag, None)
        return flag
    score: float | None = getattr(verdicts, target.flag)  # flagged under the correct threshold
    return None if score is None else score < correct_threshold(verdicts)


Key = tuple[str, str, str, str, str, str]


def identity(row: LabeledRow) -> tuple[str, str, str]:
    """(judge, judge_model, prompt_version) of the verdict a label is compared with: the core judge's,
    or for a custom evaluator's kind ``custom.<pattern|python|rubric>``, the judge's model for a rubric,
    and the evaluator's version it scored with ('' when it did not score)."""
    evaluator = label_target(row.kind).evaluator
    if evaluator is None:
        return row.judge, row.judge_model, row.prompt_version
    score = row.custom.get(str(row.kind).removeprefix("custom."))
    return (
        f"custom.{evaluator}",
        row.judge_model if evaluator == "rubric" else "",
        score.version if score is not None else "",
    )


def _block(
    key: Key,
    rows: Sequence[LabeledRow],
    correct_threshold: CorrectThreshold,
    resamples: int,
) -> QualityBlock:
    app, model, judge, judge_model, prompt_version, kind = key
    target = label_target(kind)
    by_case: dict[str, list[LabeledRow]] = defaultdict(list)
    by_source: dict[str, int] = defaultdict(int)
    for row in rows:
        by_case[row.interaction_id].append(row)
        by_source[row.source.value] += 1
    cases: list[LabeledCase] = []
    disputed = no_verdict = 0
    for interaction_id, labels in by_case.items():
        value = consensus([r.value for r in labels])
        if value is None:
            disputed += 1
            continue
        first = labels[0]
        flag = judge_flag(first, kind, correct_threshold)
        if flag is None:
            no_verdict += 1
            continue
        probability = next((r.inclusion_probability for r in labels if r.inclusion_probability), None)
        cases.append(
            LabeledCase(
                interaction_id=interaction_id,
                group=first.conversation_id or interaction_id,
                condition=value == target.condition_value,
                flagged=flag,
                weight=1.0 / probability if probability else 1.0,
            )
        )
    identities = {identity(r) for r in rows}
    return QualityBlock(
        app=app,
        model=model,
        judge=judge,
        judge_model=judge_model,
        prompt_version=prompt_version,
        kind=target.kind,
        condition=target.condition,
        rate_metric=target.rate_metric,
        labels=len(rows),
        interactions=len(by_case),
        disputed=disputed,
        no_verdict=no_verdict,
        by_source=dict(by_source),
        identities=len(identities),
        agreement=agreement(cases, resamples=resamples) if cases else None,
        reviewers=reviewer_agreement([(r.interaction_id, r.reviewer, r.value) for r in rows]),
    )


def judge_quality(
    rows: Iterable[LabeledRow],
    correct_threshold: CorrectThreshold,
    *,
    include_end_user: bool = False,
    per_identity: bool = True,
    resamples: int = 1000,
) -> list[QualityBlock]:
    """Quality blocks per (app, model, judge identity, kind), or per (app, model, kind) pooling every
    identity when ``per_identity`` is False (their judge fields then read '*')."""
    groups: dict[Key, list[LabeledRow]] = defaultdict(list)
    for row in rows:
        if row.source is LabelSource.END_USER and not include_end_user:
            continue
        judge = identity(row) if per_identity else (ALL, ALL, ALL)
        groups[(row.app, row.model, *judge, str(row.kind))].append(row)
    return [_block(key, groups[key], correct_threshold, resamples) for key in sorted(groups)]


def corrected_buckets(
    block: QualityBlock | None,
    kind: str,
    flagged: Sequence[int],
    totals: Sequence[int],
    *,
    min_per_class: int,
) -> tuple[CorrectedRate, list[CorrectedRate]]:
    """The rate corrected over a whole range (``flagged`` and ``totals`` summed) and per bucket, all with
    the judge's agreement over the range (``block``, None without labels). The buckets are corrected only
    when the range is (enough labels of each class, a judge better than chance); else the list is empty
    and the range's note says why."""
    if len(flagged) != len(totals):
        raise ValueError("flagged and totals are per bucket: give as many of each")
    quality = block.agreement if block is not None else None
    condition = label_target(kind).condition
    overall = corrected_rate(
        sum(flagged), sum(totals), quality, min_per_class=min_per_class, condition=condition
    )
    if overall.status is not CorrectionStatus.OK:
        return overall, []
    per_bucket = [
        corrected_rate(f, t, quality, min_per_class=min_per_class, condition=condition)
        for f, t in zip(flagged, totals, strict=True)
    ]
    return overall, per_bucket


def with_corrected(block: QualityBlock, flagged: int, total: int, *, min_per_class: int) -> QualityBlock:
    """The block with its rate corrected: ``flagged`` of ``total`` interactions of the period."""
    result = corrected_rate(
        flagged, total, block.agreement, min_per_class=min_per_class, condition=block.condition
    )
    return block.model_copy(update={"corrected": result})
