"""Topics: what the traffic is about, discovered from the questions (``GROUNDWATCH_TOPICS__*``)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

TopicMethod = Literal["kmeans", "hdbscan"]


class TopicsSettings(BaseModel):
    """How topics are found and assigned (docs/topics.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: TopicMethod = Field(
        "kmeans",
        description="how questions are grouped: kmeans (scikit-learn's k-means on the questions' "
        "embeddings into max_topics groups) or hdbscan (density clusters, whose outliers go to the topic "
        "'other'); chosen by measurement (docs/topics.md)",
    )
    max_topics: int = Field(
        40,
        ge=2,
        le=200,
        description="at most this many topics (besides 'other'); k-means makes this many, fewer when there "
        "are not min_topic_size questions a topic (docs/topics.md measures 20 and 40)",
    )
    min_topic_size: int = Field(
        10, ge=2, description="a group smaller than this is no topic: its questions go to 'other'"
    )
    min_similarity: float = Field(
        0.2,
        ge=-1.0,
        le=1.0,
        description="a question whose embedding's cosine with the nearest topic's centre is under this is "
        "assigned to 'other'",
    )
    match_similarity: float = Field(
        0.7,
        ge=-1.0,
        le=1.0,
        description="a refit keeps a topic's id when its centre's cosine with a topic of the previous model "
        "is at least this (each previous topic matched once); the others get new ids",
    )
    label_words: int = Field(
        3, ge=1, le=10, description="a topic is named by its this many most distinctive words (c-TF-IDF)"
    )
    remembered_questions: int = Field(
        10_000,
        ge=0,
        description="the worker keeps the topics of this many distinct recent questions, so a repeated "
        "question is not embedded again (0: every question is embedded)",
    )
    seed: int = Field(0, ge=0, description="the random seed of the grouping (the same seed, the same topics)")
    refit_every: timedelta | None = Field(
        None,
        ge=timedelta(minutes=1),
        description="the worker refits the topics this often (seconds, or ISO 8601 such as P1D), on the "
        "questions stored over refit_over, from the current model (matching topics keep their ids); one "
        "worker refits (the owner of the key 'topics'), every process of every worker picks the new model "
        "up from the topic_models topic. With no model_file the first fit is made from the stored "
        "questions at the start. None: no refit",
    )
    refit_over: timedelta = Field(
        timedelta(days=7),
        gt=timedelta(0),
        description="a refit fits the questions stored over this span before it",
    )
    refit_max_questions: int = Field(
        50_000, ge=1, description="a refit fits at most this many of the latest stored questions"
    )
    refit_timeout_seconds: float = Field(
        1800.0,
        gt=0,
        description="a refit still running after this long is stopped (its process killed); the next "
        "one is tried after refit_every",
    )
    model_file: Path | None = Field(
        None,
        description="a topic model written by groundwatch topics: the worker and groundwatch eval give each "
        "interaction its topic by it (its Evaluation's topic and topic_label, the slice dimension topic); "
        "None: no topics assigned (unless refit_every makes a first fit)",
    )

    @field_validator("refit_every", "refit_over", mode="before")
    @classmethod
    def _seconds(cls, value: object) -> object:
        """A duration given as a number of seconds in text (an environment variable: ``86400``)."""
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                return value  # ISO 8601 (P1D), or pydantic's error
        return value
