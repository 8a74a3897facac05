"""Tool calls: their results as evidence, their arguments (``GROUNDWATCH_TOOLS__*``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ToolSettings(BaseModel):
    """Tool calls and their results (docs/input.md "Agents and tools")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    evidence: bool = Field(
        True,
        description="a tool's result the model received before answering is evidence for grounding beside "
        "the contexts (split into passages, named by tool and call id)",
    )
    evidence_allow: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="only these tools' results are evidence (names as called); empty: every tool",
    )
    evidence_deny: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="these tools' results are never evidence (applied after evidence_allow)",
    )
    evidence_earlier_turns: bool = Field(
        True,
        description="results of tool calls made for earlier user turns of the conversation count as "
        "evidence too (the model saw them); false: only the current question's calls",
    )
    max_evidence_passages: int = Field(
        50,
        ge=1,
        le=1000,
        description="most passages one tool result is split into (a JSON list of documents gives one "
        "each); the rest of the result is the last passage",
    )
    argument_min_chars: int = Field(
        3,
        ge=1,
        le=100,
        description="an argument value shorter than this (characters) is never checked for grounding "
        "(ungrounded tool arguments)",
    )
    argument_judge: Literal["lexical", "llm"] = Field(
        "lexical",
        description="who decides ungrounded tool arguments: lexical (a value must appear in the "
        "conversation or an earlier tool result, pipeline.tool_arguments); llm: the values the lexical check "
        "does not find are sent to the LLM judge (judge.kind openai, local or cascade) in one call per "
        "interaction, and those it finds supported (a date given in words, a normalised id) are dropped; "
        "without an LLM judge, or when the call fails, the lexical result stands "
        "(pipeline.argument_judge)",
    )

    @field_validator("evidence_allow", "evidence_deny")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        blank = [v for v in value if not v.strip()]
        if blank:
            raise ValueError("a tool name is blank")
        return value
