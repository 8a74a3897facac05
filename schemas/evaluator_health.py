"""The evaluators' health over a range (``GET /dashboard/api/evaluators``): the judge's own stages and your
evaluators, which ran, how much of the traffic they applied to they scored, why the rest is missing, and
when each last gave a score."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.dashboard import TimeRange


class EvaluatorHealthQuery(TimeRange):
    """The range whose evaluations are read (their event time), of one app and model when given."""

    app: str | None = Field(None, description="only this app's evaluations")
    model: str | None = Field(None, description="only this model's evaluations")


class EvaluatorHealth(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    evaluator: str = Field(
        description="the evaluator's name: a stage of the judge (nli, refusal, relevance) or your evaluator's "
        "(metric custom.<name>)"
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
