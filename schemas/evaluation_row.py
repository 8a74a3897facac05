"""The columns of an evaluation that windows aggregate, as read back from ClickHouse (one deduplicated
row per interaction), and the judge-call latencies that count (shared by the sink and the windows)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from schemas.evaluation import Evaluation


class EvalRow(BaseModel):
    """The columns of an evaluation that windows aggregate (one deduplicated row per interaction)."""

    interaction_id: str
    timestamp: datetime
    app: str
    model: str
    conversation_id: str | None = None  # None: a conversation of one turn (pipeline.conversations)
    context_entailment: float | None = None
    ground_truth_entails_answer: float | None = None
    answer_entails_ground_truth: float | None = None
    answer_refusal: bool | None = None
    ground_truth_refusal: bool | None = None
    hallucination: bool | None = None
    grounded_precision: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    judge_latency_ms: float = 0.0
    call_latencies_ms: list[float] = Field(default_factory=list)  # see call_latencies()
    complete: bool = True
    judged: bool = True  # False: skipped by sampling rules or a judge budget (no score)
    skip_reason: str | None = None

    @classmethod
    def from_evaluation(cls, e: Evaluation) -> EvalRow:
        data = e.model_dump(include=set(cls.model_fields))
        data["call_latencies_ms"] = call_latencies(e)
        return cls.model_validate(data)


def call_latencies(e: Evaluation) -> list[float]:
    """The latency of each judge call of an evaluation that reached a model: cache hits and lexical
    decisions take no judge time and would drag the quantiles down."""
    return [c.latency_ms for c in e.calls if not c.cached and c.attempts > 0 and c.judge != "lexical"]
