"""The dashboard's JSON API: what each endpoint takes (query parameters) and returns.

Every request value is validated here before it reaches SQL, where it travels only as a ``{name:Type}``
query parameter. A bad value is a 400 with the field and the reason.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from schemas.alert import Alert
from schemas.evaluation import Evaluation
from schemas.label import AnyLabelKind, Label
from schemas.slice_filter import SliceFilter, SliceTerms
from schemas.utc import utc

Rollup = Literal["auto", "window", "hour", "6h", "day"]

#: the longest range one request may ask for
MAX_RANGE = timedelta(days=400)
MAX_NAME_CHARS = 200  # longest app or model name accepted in a filter


class TimeRange(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start: datetime = Field(description="range start (ISO 8601, UTC when no offset), inclusive")
    end: datetime = Field(description="range end (ISO 8601), exclusive")

    @field_validator("start", "end")
    @classmethod
    def _as_utc(cls, value: datetime) -> datetime:
        value = utc(value)
        if not datetime(1971, 1, 1, tzinfo=UTC) <= value <= datetime(2299, 12, 31, tzinfo=UTC):
            raise ValueError("must be between 1971 and 2299")
        return value

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.end <= self.start:
            raise ValueError("end must be after start")
        if self.end - self.start > MAX_RANGE:
            raise ValueError(f"a range may span at most {MAX_RANGE.days} days")
        return self


class AppModelsQuery(TimeRange):
    """A time range of one app or every app, and some models or every model."""

    app: str | None = Field(None, max_length=MAX_NAME_CHARS, description="one app, or every app when absent")
    models: list[str] = Field(
        default_factory=list, max_length=20, description="these models (overlaid); every model when empty"
    )

    @field_validator("models")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        if any(not m or len(m) > MAX_NAME_CHARS for m in value):
            raise ValueError(f"each model must be 1-{MAX_NAME_CHARS} characters")
        return value


class OverviewQuery(AppModelsQuery):
    rollup: Rollup = Field("auto", description="bucket size: auto (by range), window, hour, 6h or day")


class BucketQuery(TimeRange):
    app: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="the app of the series")
    model: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="the model of the series")
    limit: int = Field(100, ge=1, le=1000, description="interactions returned, worst first")
    slice: SliceTerms = Field(
        default_factory=SliceFilter,
        description="only this slice's interactions: repeated key:value terms (schemas.slice_filter)",
    )


class ExportQuery(TimeRange):
    app: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="the app of the series")
    model: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="the model of the series")
    slice: SliceTerms = Field(
        default_factory=SliceFilter,
        description="only this slice's interactions: repeated key:value terms (schemas.slice_filter)",
    )


class AlertsQuery(TimeRange):
    app: str | None = Field(None, max_length=MAX_NAME_CHARS, description="one app, or every app when absent")
    model: str | None = Field(
        None, max_length=MAX_NAME_CHARS, description="one model, or every model when absent"
    )
    limit: int = Field(500, ge=1, le=5000, description="alerts returned, newest first")


class CorrectedLine(BaseModel):
    """A rate corrected for the judge's measured errors (Rogan-Gladen, pipeline.metrics.agreement), per
    bucket, with the sensitivity and specificity the app/model's labels over the whole range give the
    judge. ``value``, ``lower`` and ``upper`` hold figures only when ``status`` is ``ok``; otherwise
    ``note`` says why not (how many more labels are needed, or a judge no better than chance)."""

    kind: str = Field(description="the label kind measuring the judge on this rate (schemas.label)")
    status: Literal["ok", "too_few_labels", "no_better_than_chance"]
    note: str = Field(description="what a reader should know, in one sentence ('' when drawn)")
    labels_needed: int = Field(description="more labels needed in the scarcer class before a correction")
    cases: int = Field(description="labeled interactions the sensitivity and specificity come from")
    sensitivity: float | None
    specificity: float | None
    balanced_accuracy: float | None
    flagged_rate: float | None = Field(description="the judge's flag rate over the whole range")
    corrected: float | None = Field(description="the corrected rate over the whole range")
    low: float | None = Field(description="its 95 % interval")
    high: float | None
    value: list[float | None] = Field(description="corrected rate per bucket")
    lower: list[float | None] = Field(description="its 95 % lower bound per bucket")
    upper: list[float | None] = Field(description="its 95 % upper bound per bucket")


class Series(BaseModel):
    """One app/model over time: parallel arrays, one entry per bucket (``t``: bucket start, Unix s)."""

    app: str
    model: str
    t: list[int]
    values: dict[str, list[float | None]] = Field(description="metric name -> value per bucket")
    lower: dict[str, list[float | None]] = Field(description="rate metrics: Wilson 95 % lower bound")
    upper: dict[str, list[float | None]] = Field(description="rate metrics: Wilson 95 % upper bound")
    support: dict[str, list[int]] = Field(description="rate and mean metrics: the denominator per bucket")
    latency_p50_ms: list[float | None]
    latency_p95_ms: list[float | None]
    corrected: dict[str, CorrectedLine] = Field(
        default_factory=dict,
        description="rates corrected for the judge's errors (streams.judge_quality.CORRECTED_RATES)",
    )


class DeadLetterBucket(BaseModel):
    t: int = Field(description="bucket start, Unix seconds (by the time the message failed)")
    stage: str
    count: int


class Overview(BaseModel):
    start: datetime
    end: datetime
    rollup: Literal["window", "hour", "6h", "day"]
    step_seconds: int
    series: list[Series]
    dead_letters: list[DeadLetterBucket]
    alerts: list[Alert]


class SeriesInfo(BaseModel):
    app: str
    model: str
    first: datetime
    last: datetime
    windows: int


class Options(BaseModel):
    series: list[SeriesInfo]
    window_seconds: int | None = Field(description="the workers' window size (from the stored windows)")
    refresh_seconds: int = Field(description="how often the page reloads its data")
    metrics: list[dict[str, str]] = Field(
        description="name, label, kind, unit and what it is over (interaction, conversation) of each metric"
    )


class InteractionRow(BaseModel):
    interaction_id: str
    timestamp: datetime
    hallucination: bool | None
    context_entailment: float | None
    ground_truth_entails_answer: float | None
    answer_entails_ground_truth: float | None
    answer_refusal: bool | None
    ground_truth_refusal: bool | None
    grounded_precision: float | None
    no_evidence: bool | None = Field(None, description="answered with no evidence at all (Evaluation)")
    tool_calls: int | None = Field(None, description="tool calls of the question (Evaluation)")
    unsupported_claims: int
    judge_calls: int
    tokens: int
    cost_usd: float
    judge_latency_ms: float
    complete: bool


class BucketInteractions(BaseModel):
    app: str
    model: str
    start: datetime
    end: datetime
    interactions: list[InteractionRow]
    total: int = Field(description="interactions in the bucket (the list may be cut at the limit)")
    slice: SliceFilter = Field(description="the slice the bucket was filtered to (empty: none)")


class InteractionDetail(BaseModel):
    evaluation: Evaluation
    labels: list[Label] = Field(default_factory=list, description="people's labels of this interaction")


class QualityQuery(TimeRange):
    app: str | None = Field(None, max_length=MAX_NAME_CHARS, description="one app, or every app when absent")
    model: str | None = Field(
        None, max_length=MAX_NAME_CHARS, description="one model, or every model when absent"
    )


class ReviewQuery(TimeRange):
    app: str | None = Field(None, max_length=MAX_NAME_CHARS, description="one app, or every app when absent")
    model: str | None = Field(
        None, max_length=MAX_NAME_CHARS, description="one model, or every model when absent"
    )
    limit: int = Field(50, ge=1, le=500, description="interactions returned, newest first")


class LabelRequest(BaseModel):
    """A reviewer's label from the dashboard (POST api/labels, JSON). The reviewer is the dashboard's
    basic-auth user when it has one, else the name given here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    interaction_id: str = Field(
        min_length=1,
        max_length=1024,
        description="the interaction (a conversation kind: its conversation_id)",
    )
    kind: AnyLabelKind
    value: int = Field(ge=0, le=1)
    reviewer: str | None = Field(None, min_length=1, max_length=200)
    note: str | None = Field(None, max_length=4000)
