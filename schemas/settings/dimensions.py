"""Metadata dimensions evaluations are sliced by (``GROUNDWATCH_DIMENSIONS__*``)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.slice_filter import COLUMNS as SLICE_COLUMNS

#: dimensions every evaluation carries beside the configured metadata paths (pipeline/dimensions.py)
BUILTIN_DIMENSIONS: tuple[str, ...] = (
    "answer_length", "has_ground_truth", "turn", "tool", "topic", "topic_model",
)  # fmt: skip
_DIMENSION_PATH = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")


class DimensionSettings(BaseModel):
    """What evaluations are sliced by (docs/slices.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    paths: list[str] = Field(
        default_factory=lambda: ["prompt_version", "retriever", "locale", "customer.tier"],
        max_length=32,
        description="metadata paths stored as dimensions of each evaluation (a dot reaches into a nested "
        "object: customer.tier); an interaction without one has no value for it. The built-ins "
        "answer_length, has_ground_truth, turn and tool (the tools called) are always stored, and topic "
        "and topic_model (the version of the topic model) where topics are assigned (docs/topics.md)",
    )
    max_values_per_day: int = Field(
        100,
        ge=1,
        le=100_000,
        description="distinct values a dimension keeps per UTC day (by event time); values past it are "
        "stored as (other), so a high-cardinality key cannot blow up storage or queries",
    )
    max_value_chars: int = Field(
        100, ge=1, le=1000, description="a dimension value is cut to this many characters"
    )

    @field_validator("paths")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        for path in value:
            if not 0 < len(path) <= 64 or not _DIMENSION_PATH.match(path):
                raise ValueError(
                    f"{path!r} is not a metadata path: letters, digits, _ and -, parts joined by dots, "
                    "at most 64 characters"
                )
            if path in BUILTIN_DIMENSIONS:
                raise ValueError(f"{path!r} is a built-in dimension: it is always stored")
            if path in SLICE_COLUMNS:
                raise ValueError(f"{path!r} names the {path} column in a slice filter ({path}:...)")
        dup = sorted({p for p in value if value.count(p) > 1})
        if dup:
            raise ValueError(f"paths given twice: {', '.join(dup)}")
        return value

    @property
    def names(self) -> tuple[str, ...]:
        """Every dimension an evaluation may carry: the configured paths, then the built-ins."""
        return (*self.paths, *BUILTIN_DIMENSIONS)
