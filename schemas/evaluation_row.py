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
    # tool calls (Evaluation's fields of the same names; NULL in rows written before they were stored)
    tool_calls: int | None = None
    tool_error: bool | None = None
    no_evidence: bool | None = None
    ungrounded_arguments: bool | None = None
    # citations (Evaluation's fields of the same names; NULL in rows written before they were stored)
    citation_recall: float | None = None
    citation_precision: float | None = None
    uncited_statements: float | None = None
    miscited: bool | None = None
    dangling_citation: bool | None = None
    # answerability and refusal groundedness (Evaluation's fields of the same names; NULL in rows written
    # before they were stored)
    answerable: bool | None = None
    over_refusal: bool | None = None
    answered_unanswerable: bool | None = None
    refused_unanswerable: bool | None = None
    answered_answerable: bool | None = None
    justified_refusal: bool | None = None
    justified_answer: bool | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    judge_latency_ms: float = 0.0
    call_latencies_ms: list[float] = Field(default_factory=list)  # see call_latencies()
    complete: bool = True
    judged: bool = True  # False: skipped by sampling rules or a judge budget (no score)
    skip_reason: str | None = None
    custom_scores: dict[str, float] = Field(default_factory=dict)  # custom evaluator -> its score
    custom_missing: dict[str, str] = Field(default_factory=dict)  # custom evaluator -> why it has none

    @classmethod
    def from_evaluation(cls, e: Evaluation) -> EvalRow:
        data = e.model_dump(include=set(cls.model_fields))
        data["call_latencies_ms"] = call_latencies(e)
        data["custom_scores"], data["custom_missing"] = custom_columns(e)
        return cls.model_validate(data)


def custom_columns(e: Evaluation) -> tuple[dict[str, float], dict[str, str]]:
    """The custom evaluators' scores, and the reasons of those without one."""
    scores = {name: c.score for name, c in e.custom.items() if c.score is not None}
    missing = {name: c.reason or "missing" for name, c in e.custom.items() if c.score is None}
    return scores, missing


def call_latencies(e: Evaluation) -> list[float]:
    """The latency of each judge call of an evaluation that reached a model: cache hits and lexical
    decisions take no judge time and would drag the quantiles down."""
    return [c.latency_ms for c in e.calls if not c.cached and c.attempts > 0 and c.judge != "lexical"]
