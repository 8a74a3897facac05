"""Conversation rollups (``GROUNDWATCH_CONVERSATIONS__*``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ConversationSettings(BaseModel):
    """Conversation rollups (pipeline.conversations, streams.windows.conversations)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = Field(
        True,
        description="roll the turns of each conversation (app, model, conversation_id) up into a "
        "conversations row when it closes, and count conversation metrics in the windows",
    )
    idle_seconds: float = Field(
        1800.0,
        gt=0,
        description="a conversation closes once its app and model's event-time watermark is this far past "
        "its last turn (or, on a quiet stream, no turn of it has arrived for this long on the wall clock); "
        "a turn with metadata.conversation_end true closes it at once. A later turn reopens it and its row "
        "is written again",
    )
    quiet_seconds: float | None = Field(
        None,
        gt=0,
        description="on a stream gone quiet, a conversation whose last turn is idle_seconds old closes after "
        "this many seconds without a turn of it on the wall clock (none: idle_seconds); a replay of old "
        "traffic sets it low so its last conversations close soon after it ends",
    )
    reask_similarity: float = Field(
        0.35,
        gt=0,
        le=1,
        description="a user turn is a re-ask when the Jaccard similarity of its content words with an "
        "earlier user turn's of the conversation reaches this (chosen by grouped cross-validation on "
        "planted re-asks: benchmarks/conversation_detection.py)",
    )
    close_batch: int = Field(
        200, ge=1, le=10_000, description="due conversations closed together (one read per app and model)"
    )
