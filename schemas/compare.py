"""The Compare page: two slices side by side over one period, every catalogue metric's difference."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from schemas.dashboard import TimeRange
from schemas.slice_filter import SliceFilter, SliceTerms


class CompareQuery(TimeRange):
    a: SliceTerms = Field(default_factory=SliceFilter, description="slice A: repeated key:value terms")
    b: SliceTerms = Field(default_factory=SliceFilter, description="slice B: repeated key:value terms")
    questions: int = Field(20, ge=0, le=200, description="repeated questions returned, most different first")


class MetricDifference(BaseModel):
    name: str
    label: str
    kind: Literal["rate", "mean", "sum"]
    unit: str
    lower_is_better: bool
    a: float | None = Field(description="slice A's value (a rate or mean: pooled over its interactions)")
    b: float | None
    a_n: int = Field(description="A's denominator (interactions the rate or mean is over; a sum: 0)")
    b_n: int
    difference: float | None = Field(description="b - a")
    lower: float | None = Field(description="95 % interval of the difference (rates: Newcombe; means: Welch)")
    upper: float | None
    p_value: float | None = Field(
        description="two-sided: rates Fisher's exact test (twice the smaller one-sided p), means Welch's z; "
        "None for sums and where a side has no data"
    )
    test: Literal["fisher", "welch"] | None
    significant: bool = Field(description="p_value below 0.05")


class QuestionDifference(BaseModel):
    question: str | None = Field(description="the question as asked (from one of its evaluations)")
    a_n: int
    b_n: int
    a_hallucination_rate: float | None
    b_hallucination_rate: float | None
    a_context_entailment: float | None
    b_context_entailment: float | None
    a_example: str = Field(description="A's interaction with the lowest context entailment")
    b_example: str


class CompareReport(BaseModel):
    start: datetime
    end: datetime
    a: SliceFilter
    b: SliceFilter
    metrics: list[MetricDifference]
    repeated_questions: int = Field(description="questions (case and spacing folded) asked in both slices")
    differing_questions: int = Field(
        description="of those, the questions on which the slices' hallucination rates or mean context "
        "entailments differ (the same answers judged alike in both differ on neither)"
    )
    questions: list[QuestionDifference] = Field(
        description="the differing questions, by how far the hallucination rates differ, then the mean "
        "context entailments"
    )
