"""A conversation's turns as stored, and its rollup (one ``conversations`` row)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from schemas.dashboard import TimeRange
from schemas.slice_filter import SliceFilter, SliceTerms

#: the interaction metadata key that marks a conversation's last turn (``"conversation_end": true``)
END_KEY = "conversation_end"


def marks_end(metadata: dict[str, Any] | None) -> bool:
    """The interaction's metadata says its conversation ends with it (``conversation_end`` true, or the
    string "true")."""
    value = (metadata or {}).get(END_KEY)
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


class ConversationTurn(BaseModel):
    """One stored interaction of a conversation: what the rollup reads (one deduplicated row)."""

    model_config = ConfigDict(frozen=True)

    interaction_id: str
    timestamp: datetime
    question: str = ""
    answer: str = ""
    judged: bool = True
    hallucination: bool | None = None
    answer_refusal: bool | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    ends: bool = Field(False, description="its metadata marks the conversation's end")
    stored_at: datetime | None = Field(
        None, description="when its evaluation was stored (the ClickHouse server's clock); None off storage"
    )
    version: int = Field(0, description="its stored evaluation's version (0 off storage)")


class ConversationRollup(BaseModel):
    """One conversation's outcome, computed from its stored turns (pipeline.conversations.rollup)."""

    app: str
    model: str
    conversation_id: str = Field(
        description="the conversation's id ('' for an interaction without one: a conversation of one turn)"
    )
    interaction_id: str = Field(
        "", description="an interaction without a conversation_id: its id, the row's key ('' otherwise)"
    )
    first_turn_at: datetime
    last_turn_at: datetime = Field(
        description="the latest turn's event time: the conversation's close time, the window it counts in"
    )
    turns: int
    judged_turns: int = 0
    hallucinated_turns: int = 0
    refusals: int = 0
    reasked_turns: int = Field(0, description="user turns asking again what an earlier user turn asked")
    contradictions: int = Field(
        0,
        description="answers contradicting an earlier answer (lexical: numbers or named values for a subject "
        "that differ from an earlier answer's; llm: the NLI judge)",
    )
    ended: bool = Field(False, description="a turn's metadata marked the conversation's end")
    ended_unresolved: bool = Field(False, description="the last judged answer was a refusal or hallucinated")
    any_hallucinated: bool = False
    reasked: bool = False
    contradicted: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    worst_turn_id: str = Field("", description="the turn that went worst ('' when none went wrong)")
    unresolving_turn_id: str = Field("", description="the turn that left it unresolved ('' when resolved)")
    pair_judge: str = Field(
        "lexical",
        description="who decided re-asks and contradictions (conversations.judge): 'lexical', 'llm', or "
        "per kind when the LLM judge decided only one ('llm contradictions, lexical re-asks')",
    )
    judge_calls: int = Field(0, description="LLM judge requests made for its re-asks and contradictions")
    judge_input_tokens: int = Field(0, description="their prompt tokens")
    judge_output_tokens: int = Field(0, description="their completion tokens")
    judge_cost_usd: float = Field(0.0, description="their cost (judge.price_per_1k_*)")
    judge_failure: str = Field(
        "", description="why the LLM judge's verdicts are missing and the lexical ones stand ('' when none)"
    )


class ConversationFigures(BaseModel):
    """The conversation metrics of a set of evaluations (``groundwatch eval``): each catalogue conversation
    metric over every conversation, and the conversations that went worst."""

    conversations: int = Field(description="conversations (an interaction without conversation_id is one)")
    multi_turn: int = Field(0, description="conversations with a conversation_id")
    metrics: dict[str, float | None] = Field(
        default_factory=dict, description="catalogue conversation metric -> its value over the conversations"
    )
    worst: list[ConversationRollup] = Field(
        default_factory=list,
        description="up to 20 conversations with a conversation_id that went wrong, worst first",
    )
    judge_calls: int = Field(0, description="LLM judge requests for re-asks and contradictions (judge llm)")
    judge_input_tokens: int = Field(0, description="their prompt tokens")
    judge_output_tokens: int = Field(0, description="their completion tokens")
    judge_cost_usd: float = Field(0.0, description="their cost")


class ConversationsQuery(TimeRange):
    """The Conversations page: the conversations whose last turn is in [start, end), worst first."""

    slice: SliceTerms = Field(
        default_factory=SliceFilter,
        description="only conversations with a turn in this slice: repeated key:value terms (app, model, "
        "dimensions); all when none",
    )
    limit: int = Field(100, ge=1, le=5000, description="conversations returned, worst first")


class ConversationList(BaseModel):
    start: datetime
    end: datetime
    slice: SliceFilter
    conversations: list[ConversationRollup] = Field(
        description="worst first: unresolved, then hallucinated turns, contradictions, re-asks, refusals"
    )
    total: int = Field(description="conversations in the range and slice (the list may be cut at the limit)")


class TurnView(BaseModel):
    """One turn of the conversation view, with its verdicts."""

    interaction_id: str
    timestamp: datetime
    question: str
    answer: str
    judged: bool
    hallucination: bool | None
    answer_refusal: bool | None
    context_entailment: float | None
    reasked: bool = Field(description="asks again what an earlier user turn asked")
    contradicts: bool = Field(description="gives another value than an earlier answer for the same subject")
    unresolving: bool = Field(description="the turn that left the conversation unresolved")


class ConversationView(BaseModel):
    rollup: ConversationRollup = Field(description="the conversation as computed from its stored turns now")
    stored: bool = Field(description="a rollup of it is in the conversations table (it has closed)")
    turns: list[TurnView] = Field(description="every stored turn, in event-time order")
