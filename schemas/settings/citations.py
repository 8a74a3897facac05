"""Citations in answers (``GROUNDWATCH_CITATIONS__*``, docs/citations.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class CitationSettings(BaseModel):
    """Whether and how the answers' citations are read and checked (docs/citations.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = Field(
        True,
        description="read the answer's citations (markers in its text, Interaction.citations), remove the "
        "markers before the answer is judged, and ask the judge which passages support each statement "
        "(in the NLI call it already makes); false: markers are judged as written, no citation metric",
    )
    max_markers: int = Field(
        500,
        ge=1,
        le=100_000,
        description="most citation markers read from one answer's text; the rest are left in the text and "
        "the answer's citations are marked truncated",
    )
