"""A topic model: the topics found in a range of traffic (``pipeline.topic_discovery``), each with its id,
its name, its most distinctive words and the centre its questions are assigned by. Written by
``groundwatch topics --out`` and read back to assign (``groundwatch eval --topics``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.settings.topics import TopicMethod
from schemas.utc import utc

#: the topic of the questions no topic holds (outliers, and questions too far from every centre)
OTHER = "other"


class Topic(BaseModel):
    """One topic."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, description="stable across refits: t1, t2, ... (a refit matches topics)")
    label: str = Field(description="its most distinctive words, joined by ', ' (c-TF-IDF)")
    words: list[str] = Field(description="its most distinctive words, most distinctive first (up to 10)")
    size: int = Field(ge=0, description="questions of the fit in it")
    centre: list[float] = Field(description="the unit-length mean of its questions' embeddings")


class TopicModel(BaseModel):
    """The topics of one fit, and how questions are assigned to them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = Field(ge=1, description="1 for a first fit; a refit from a model is its version + 1")
    fitted_at: datetime = Field(description="when it was fitted (UTC)")
    method: TopicMethod = Field(description="the grouping it was fitted with (topics.method)")
    questions: int = Field(ge=0, description="questions it was fitted on")
    other: int = Field(ge=0, description="questions of the fit in no topic ('other')")
    min_similarity: float = Field(description="a question less similar to every centre is 'other'")
    next_id: int = Field(ge=1, description="the number the next new topic's id takes")
    topics: list[Topic] = Field(description="the topics, largest first")

    @field_validator("fitted_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return utc(value)

    def label_of(self, topic_id: str) -> str:
        """A topic's name ('other' for ``OTHER`` or an id the model does not hold)."""
        return next((t.label for t in self.topics if t.id == topic_id), OTHER)


class TopicRate(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float | None = Field(description="the rate over the topic's evaluations that have it (None: none)")
    low: float | None = Field(description="the 95 % Wilson interval's lower end")
    high: float | None = Field(description="its upper end")
    n: int = Field(description="evaluations the rate is over")


class TopicFigures(BaseModel):
    """One topic of a file: what it is, how much of the traffic it holds, how its answers fare."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: str = Field(description="the topic's id ('other': in no topic)")
    label: str = Field(description="its name")
    interactions: int = Field(description="evaluations assigned to it")
    share: float = Field(description="its share of the evaluations")
    rates: dict[str, TopicRate] = Field(description="hallucination, refusal and no-evidence rates")
