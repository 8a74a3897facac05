"""Conversation rollups (``GROUNDWATCH_CONVERSATIONS__*``)."""

from __future__ import annotations

from typing import Literal

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
    judge: Literal["lexical", "llm"] = Field(
        "lexical",
        description="who decides re-asks and self-contradictions: 'lexical' (word overlap, changed values) "
        "or 'llm', the worker's LLM judge (judge.kind openai, local or cascade) on the pairs the lexical "
        "pre-filter finds plausible: a re-ask prompt (prompts/reask.md) on user turns, NLI (nli_cases) on "
        "answers (pipeline.conversation_judge)",
    )
    judge_candidate_similarity: float = Field(
        0.2,
        ge=0,
        le=1,
        description="with judge 'llm', a pair of user turns (or of answers) goes to the judge when the "
        "Jaccard similarity of their content words reaches this (or the lexical rule flags it)",
    )
    judge_max_pairs: int = Field(
        20,
        ge=0,
        le=1000,
        description="with judge 'llm', at most this many pairs of each kind of a conversation go to the "
        "judge (the most similar first); the others keep the lexical verdict. A conversation costs at "
        "most two judge calls (one per kind), fewer when its pairs are cached",
    )
    judge_timeout_s: float = Field(
        30.0,
        gt=0,
        description="with judge 'llm', how long a closing conversation waits for the judge's checks (the "
        "closer's round waits for its batch, and the windows' close waits for the round): checks not done "
        "by then leave the lexical verdicts, and judge_failure says so",
    )
