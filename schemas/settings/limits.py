"""Size limits on an incoming interaction (``GROUNDWATCH_LIMITS__*``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """Size limits on an incoming interaction; a violation names the field and the limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_question_chars: int = Field(20_000, ge=1, description="longest question (characters)")
    max_answer_chars: int = Field(50_000, ge=1, description="longest answer (characters)")
    max_ground_truth_chars: int = Field(50_000, ge=1, description="longest ground truth (characters)")
    max_contexts: int = Field(100, ge=1, description="most retrieved passages an interaction may carry")
    max_context_chars: int = Field(400_000, ge=1, description="most characters of all passages together")
    max_id_chars: int = Field(256, ge=1, description="longest interaction_id (characters)")
    max_document_chars: int = Field(
        1_000,
        ge=1,
        description="longest document name of a passage (characters); document names also count in "
        "max_context_chars, since they go into the judge's prompt",
    )
    max_app_chars: int = Field(200, ge=1, description="longest app name (characters)")
    max_model_chars: int = Field(200, ge=1, description="longest model name (characters)")
    max_conversation_id_chars: int = Field(256, ge=1, description="longest conversation_id (characters)")
    max_history_turns: int = Field(
        50,
        ge=0,
        description="most conversation turns kept before the question (history, from messages); past it "
        "the oldest turns are dropped and the interaction is flagged history_truncated, not refused",
    )
    max_history_chars: int = Field(
        20_000,
        ge=0,
        description="most characters of all history turns together; past it the oldest turns are dropped "
        "(flagged history_truncated, not refused)",
    )
    max_metadata_chars: int = Field(
        20_000, ge=2, description="largest metadata object, as compact JSON (characters)"
    )
    max_steps: int = Field(
        200,
        ge=0,
        description="most tool steps (calls and their results) kept per interaction; past it the earliest "
        "steps are dropped and the interaction is flagged steps_dropped, not refused",
    )
    max_tool_result_chars: int = Field(
        20_000,
        ge=1,
        description="longest tool result kept (characters); a longer one is cut to this and its step "
        "marked truncated, never refused",
    )
    max_tool_arguments_chars: int = Field(
        4_000,
        ge=2,
        description="longest tool-call arguments kept, as compact JSON (characters); longer ones are kept "
        "as their JSON text cut to this, flagged tool_arguments_truncated",
    )
    max_citations: int = Field(
        1_000,
        ge=0,
        description="most structured citations an interaction may carry (Interaction.citations); more are "
        "refused",
    )
    max_json_depth: int = Field(
        64,
        ge=2,
        description="deepest nesting of objects and arrays in an incoming message (checked before parsing)",
    )
    max_event_age_days: float = Field(
        400.0,
        gt=0,
        description="an interaction stamped more than this many days before the wall clock is rejected "
        "(dead-lettered, stage validate): its windows could never be written or read",
    )
    max_event_future_seconds: float = Field(
        3_600.0,
        ge=0,
        description="an interaction stamped more than this many seconds after the wall clock is rejected "
        "(dead-lettered, stage validate)",
    )
