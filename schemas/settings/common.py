"""What the settings sections share: the environment variables' prefix and names, the NLI pairs and
the 0-to-1 share type."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

PREFIX = "GROUNDWATCH_"

# the NLI pairs (schemas.results.PairName, which imports this package)
NliPair = Literal["context_answer", "ground_truth_answer", "answer_ground_truth"]
NLI_PAIRS: tuple[NliPair, ...] = ("context_answer", "ground_truth_answer", "answer_ground_truth")
Share = Annotated[float, Field(ge=0, le=1)]  # a score threshold or a share, 0 to 1


def variable_name(section: str, field: str | None = None) -> str:
    """The environment variable of a section (a JSON object) or of one of its fields."""
    return f"{PREFIX}{section.upper()}" + (f"__{field.upper()}" if field is not None else "")
