"""Sentence conversion (``GROUNDWATCH_SPLIT__*``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.settings.common import variable_name


class SplitSettings(BaseModel):
    """Sentence conversion (docs/method.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_sentence_chars: int = Field(
        500,
        ge=1,
        description=(
            "a sentence over this is split on blank lines, then newlines, then into chunks of this size"
        ),
    )
    min_sentence_chars: int = Field(
        20, ge=0, description="a sentence under this joins the next one (the previous one when it is last)"
    )
    keep_lists: bool = Field(True, description="list items stay with the sentence that introduces them")
    keep_tables: bool = Field(True, description="markdown table rows carry their header")

    @model_validator(mode="after")
    def _min_under_max(self) -> SplitSettings:
        if self.min_sentence_chars > self.max_sentence_chars:
            low, high = (
                variable_name("split", "min_sentence_chars"),
                variable_name("split", "max_sentence_chars"),
            )
            raise ValueError(f"{low} ({self.min_sentence_chars}) is above {high} ({self.max_sentence_chars})")
        return self
