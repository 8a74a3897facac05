"""The dashboard's Topics page (``GET /api/topics``): each topic of a range (the built-in ``topic``
dimension, docs/topics.md) with its volume, share and rates against the period before, a sparkline, and
its worst interactions; the topics that are new or growing first (``pipeline.topic_trends``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from schemas.dashboard import TimeRange
from schemas.slice_filter import SliceFilter
from schemas.slices import SliceQuery
from schemas.utc import utc

#: the rates a topic is shown with, in the catalogue's names (schemas/metrics.py)
TOPIC_METRICS = (
    "hallucination_rate",
    "answer_refusal_rate",
    "no_evidence_rate",
    "conversation_unresolved_rate",
)
#: the rates corrected for the judge's errors where labels allow (a label kind corrects each)
CORRECTED_TOPIC_RATES = ("hallucination_rate", "answer_refusal_rate")
#: the rates a sparkline draws (computed per interaction, so per bucket from the evaluations)
SPARK_METRICS = ("hallucination_rate", "answer_refusal_rate")
#: the most buckets a sparkline has
SPARK_POINTS = 28


class TopicsQuery(SliceQuery):
    examples: int = Field(3, ge=0, le=20, description="worst interactions returned per topic")
    baseline_start: datetime | None = Field(
        None,
        description="the period compared against (ISO 8601), inclusive; default: as long as the range, "
        "ending at its start",
    )
    baseline_end: datetime | None = Field(None, description="its end (ISO 8601), exclusive")

    @field_validator("baseline_start", "baseline_end")
    @classmethod
    def _baseline_utc(cls, value: datetime | None) -> datetime | None:
        return utc(value) if value is not None else None

    @model_validator(mode="after")
    def _baseline(self) -> TopicsQuery:
        if (self.baseline_start is None) != (self.baseline_end is None):
            raise ValueError("baseline_start and baseline_end go together")
        if self.baseline_start is not None and self.baseline_end is not None:
            TimeRange(start=self.baseline_start, end=self.baseline_end)  # the same checks as the range's
        return self

    def baseline(self) -> tuple[datetime, datetime]:
        """The period compared against: the one given, or the range's length before its start."""
        if self.baseline_start is not None and self.baseline_end is not None:
            return self.baseline_start, self.baseline_end
        return self.start - (self.end - self.start), self.start


class Proportion(BaseModel):
    """A proportion in one period with its 95 % Wilson interval."""

    model_config = ConfigDict(frozen=True)

    value: float | None = Field(description="events / n (None: n is 0)")
    low: float | None = Field(description="the interval's lower end")
    high: float | None = Field(description="its upper end")
    n: int = Field(description="the denominator")


class TopicChange(BaseModel):
    """A proportion now and in the period before, and whether it moved beyond chance."""

    model_config = ConfigDict(frozen=True)

    now: Proportion
    before: Proportion
    rose: bool = Field(description="the interval now lies wholly above the interval before")
    fell: bool = Field(description="the interval now lies wholly below the interval before")


class CorrectedFigure(BaseModel):
    """A topic's rate corrected for the judge's errors (Rogan-Gladen), or why it is not."""

    model_config = ConfigDict(frozen=True)

    value: float | None = Field(description="the corrected rate (None: not corrected, see note)")
    low: float | None = Field(description="its 95 % interval's lower end (traffic's and labels' uncertainty)")
    high: float | None = Field(description="its upper end")
    note: str = Field(description="why there is no figure, or what to know about it ('' when none)")


class TopicExample(BaseModel):
    model_config = ConfigDict(frozen=True)

    interaction_id: str
    app: str
    model: str
    timestamp: datetime
    question: str = Field(description="its question as stored (masked where privacy masks it)")
    hallucination: int | None
    answer_refusal: int | None
    no_evidence: int | None


class TopicRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    topic: str = Field(description="the topic dimension's value: its id and name ('t3: tire, pressure')")
    interactions: int = Field(description="interactions in the range")
    interactions_before: int = Field(description="interactions in the period before")
    share: TopicChange = Field(description="its share of the interactions, now and before")
    status: str = Field(description="'new' (none before), 'growing' (share rose), 'shrinking', or ''")
    rates: dict[str, TopicChange] = Field(description="each of TOPIC_METRICS, now and before")
    corrected: dict[str, CorrectedFigure] = Field(
        description="each of CORRECTED_TOPIC_RATES over the range corrected with the judge's sensitivity "
        "and specificity on the labeled interactions of the range (of the page's app and model; the "
        "judge's errors taken as the same in every topic)"
    )
    spark: dict[str, list[float | None]] = Field(
        description="each of SPARK_METRICS per bucket of the range (None: no denominator in the bucket)"
    )
    models: list[str] = Field(description="the topic model versions that assigned its interactions (v1, v2)")
    examples: list[TopicExample] = Field(description="its worst interactions, worst first")


class TopicsPage(BaseModel):
    start: datetime
    end: datetime
    before_start: datetime = Field(
        description="the period compared against (by default as long as the range, ending at its start)"
    )
    before_end: datetime = Field(description="its end")
    slice: SliceFilter
    step_seconds: int = Field(description="a sparkline bucket")
    t: list[int] = Field(description="each sparkline bucket's start (Unix seconds)")
    interactions: int = Field(description="interactions in the range (with a topic or not)")
    without_topic: int = Field(description="of those, interactions no topic was assigned to")
    topics: list[TopicRow] = Field(
        description="new and growing topics first, then those with a rate that rose, then by volume"
    )
