"""Topics: what the traffic is about, discovered from the questions (``GROUNDWATCH_TOPICS__*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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
    seed: int = Field(0, ge=0, description="the random seed of the grouping (the same seed, the same topics)")
    model_file: Path | None = Field(
        None,
        description="a topic model written by groundwatch topics: the worker and groundwatch eval give each "
        "interaction its topic by it (its Evaluation's topic and topic_label, the slice dimension topic); "
        "None: no topics assigned",
    )
