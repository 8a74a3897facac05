"""The evaluators' health over a range (``GET /dashboard/api/evaluators``): the judge's own stages and your
evaluators, which ran, how much of the traffic they applied to they scored, why the rest is missing, and
when each last gave a score."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.dashboard import TimeRange
from schemas.evaluation import Evaluation

#: the judge's stages that fail apart, as an Evaluation's ``missing`` names them; relevance applies only where
#: it is on (a score, or named missing). A row whose conversion never came (a staged join's timeout) lacks all
JUDGE_STAGES: tuple[str, ...] = ("nli", "refusal", "relevance")
#: the kind a missing stage counts under (its dead letter has the reason)
STAGE_MISSING = "failed or timed out"


def stage_outcomes(evaluation: Evaluation) -> dict[str, bool]:
    """Each judge stage that applied to a judged Evaluation, and whether it gave its result (the rule the
    dashboard's health table applies in SQL, streams.dashboard.evaluator_health)."""
    if not evaluation.judged:
        return {}
    lost = set(evaluation.missing)
    out = {stage: stage not in lost and "converted" not in lost for stage in JUDGE_STAGES[:2]}
    if evaluation.relevance is not None or "relevance" in lost:
        out["relevance"] = "relevance" not in lost
    return out


class EvaluatorHealthQuery(TimeRange):
    """The range whose evaluations are read (their event time), of one app and model when given."""

    app: str | None = Field(None, description="only this app's evaluations")
    model: str | None = Field(None, description="only this model's evaluations")


class EvaluatorHealth(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    evaluator: str = Field(
        description="the evaluator's name: a stage of the judge (nli, refusal, relevance) or your "
        "evaluator's (metric custom.<name>)"
    )
    kind: Literal["built-in", "custom"] = Field(
        description="built-in: a stage of the judge, missing where it failed or its result never came "
        "(the Evaluation's missing); custom: yours"
    )
    versions: list[str] = Field(description="its versions that ran in the range")
    applied: int = Field(description="evaluations it ran on (scored or missing)")
    scored: int = Field(description="of those, the ones it gave a score")
    coverage: float | None = Field(description="scored / applied; None when it ran on nothing")
    missing_by_kind: dict[str, int] = Field(
        description="missing scores by the kind of their reason (timeout, raised, crashed, bad result...)"
    )
    last_scored: datetime | None = Field(description="the event time of its last score in the range")


class EvaluatorHealthReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    evaluators: list[EvaluatorHealth] = Field(
        description="the judge's stages that ran, then each evaluator of yours that ran; lowest coverage "
        "first within each"
    )
