"""Sampling rules and judge budgets (``GROUNDWATCH_SAMPLING__*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class SamplingSettings(BaseModel):
    """Which interactions are judged (pipeline.sampling; docs/sampling.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default_rate: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="share of interactions judged when no sampling rule matches (by a stable hash of the "
        "interaction id: a replay or another worker decides the same); the others are stored unjudged",
    )
    rules_file: Path | None = Field(
        None,
        description="YAML/JSON sampling rules and judge budgets (deploy/sampling/rules.example.yaml); "
        "none: no rules, no budget",
    )
