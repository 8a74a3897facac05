"""Tumbling-window aggregate per app and model."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, model_validator


class WindowAggregate(BaseModel):
    window_start: datetime
    window_end: datetime
    app: str
    model: str
    count: int
    mean_context_entailment: float | None
    mean_ground_truth_entails_answer: float | None
    mean_answer_entails_ground_truth: float | None
    answered: int  # non-refusal interactions with a context entailment
    hallucinations: int
    hallucination_rate: float | None
    answer_refusal_rate: float | None
    ground_truth_refusal_rate: float | None
    input_tokens: int
    output_tokens: int
    cost_usd: float
    judge_latency_p50_ms: float | None
    judge_latency_p95_ms: float | None
    incomplete: int
    # the denominators of the rates and means (alert rules compare min_interactions with these)
    answer_refusal_known: int = 0  # interactions with an answer refusal flag
    ground_truth_refusal_known: int = 0  # ... with a ground-truth refusal flag
    context_scored: int = 0  # ... with a context entailment
    ground_truth_answer_scored: int = 0  # ... with ground_truth_entails_answer
    answer_ground_truth_scored: int = 0  # ... with answer_entails_ground_truth
    judge_latency_calls: int = 0  # judge calls (uncached, not lexical) behind the latency quantiles
    # grounded-unit precision: its mean over the interactions that have one, and how many had one
    mean_grounded_precision: float | None = None
    grounded_precision_scored: int = 0
    # the judge calls' latencies as counts per bucket of schemas.latency (they add up across windows)
    judge_latency_histogram: list[int] = Field(default_factory=list)
    # sampling (pipeline.sampling): ``count`` is every interaction received; the rates and means above are
    # over judged ones only (a skipped one carries no score)
    # tool calls (docs/input.md "Agents and tools"): each a mean or rate with its denominator (and events)
    mean_tool_calls: float | None = Field(None, description="tool calls per judged interaction")
    tool_calls_scored: int = Field(0, description="judged interactions whose tool calls are known")
    tool_error_rate: float | None = Field(
        None, description="share of interactions with tool calls where one failed"
    )
    tool_error_known: int = Field(0, description="interactions with at least one tool call")
    tool_errors: int = Field(0, description="interactions with a failed tool call")
    no_evidence_rate: float | None = Field(
        None, description="share of answers (not refusals, with a factual statement) without any evidence"
    )
    no_evidence_known: int = Field(0, description="answers where it is known whether evidence was there")
    no_evidence_answers: int = Field(0, description="answers without evidence")
    ungrounded_arguments_rate: float | None = Field(
        None, description="share of interactions whose tool calls used an argument value found nowhere before"
    )
    ungrounded_arguments_known: int = Field(0, description="interactions with a tool argument value checked")
    ungrounded_arguments_events: int = Field(0, description="interactions with an ungrounded argument value")
    # citations (docs/citations.md): over the judged answers that cite
    mean_citation_recall: float | None = Field(
        None, description="mean share of an answer's citing statements that their citations support"
    )
    citation_recall_scored: int = Field(0, description="answers with a citation recall")
    mean_citation_precision: float | None = Field(
        None, description="mean share of an answer's citations whose passage supports its statement"
    )
    citation_precision_scored: int = Field(0, description="answers with a citation precision")
    mean_uncited_statements: float | None = Field(
        None, description="mean share of a citing answer's factual statements that carry no citation"
    )
    uncited_statements_scored: int = Field(0, description="citing answers with a factual statement")
    miscited_rate: float | None = Field(
        None, description="share of answers with a statement its citations do not support"
    )
    miscited_known: int = Field(0, description="answers with a statement citing a passage, checked")
    miscited_answers: int = Field(0, description="answers with a miscited statement")
    dangling_citation_rate: float | None = Field(
        None, description="share of citing answers with a reference that names no passage"
    )
    dangling_citation_known: int = Field(0, description="answers that cite")
    dangling_citation_answers: int = Field(0, description="answers with a dangling citation")
    # refusal groundedness (pipeline/answerability.py): Trust-Eval's reject/answerable recall and precision
    # and the over-refusal and answered-unanswerable rates, over the judged interactions whose answerability
    # and answer refusal flag are known; each figure None when its denominator is 0
    over_refusal_rate: float | None = Field(None, description="share of answerable questions refused")
    answered_unanswerable_rate: float | None = Field(
        None, description="share of unanswerable questions answered"
    )
    reject_recall: float | None = Field(None, description="share of unanswerable questions refused")
    reject_precision: float | None = Field(
        None, description="share of refusals (answerability known) whose question was unanswerable"
    )
    answerable_recall: float | None = Field(None, description="share of answerable questions answered")
    answerable_precision: float | None = Field(
        None, description="share of answers (answerability known) whose question was answerable"
    )
    answerable_questions: int = Field(0, description="answerable questions with a known answer refusal flag")
    unanswerable_questions: int = Field(
        0, description="unanswerable questions with a known answer refusal flag"
    )
    refusals_answerability_known: int = Field(
        0, description="refusals whose question's answerability is known"
    )
    answers_answerability_known: int = Field(0, description="answers whose question's answerability is known")
    over_refusals: int = Field(0, description="answerable questions refused")
    answerable_answered: int = Field(0, description="answerable questions answered")
    unanswerable_answered: int = Field(0, description="unanswerable questions answered")
    unanswerable_refused: int = Field(0, description="unanswerable questions refused")
    judged: int = Field(0, description="interactions judged (count - skipped when not given)")
    skipped: int = Field(0, description="interactions stored unjudged (sampling rules, judge budget)")
    skipped_by_reason: dict[str, int] = Field(default_factory=dict, description="skip reason -> count")
    # custom evaluators (schemas.evaluators), by name: the mean score over the judged interactions it scored
    # (a flag's rate), how many it scored, and how many it failed to score
    custom_values: dict[str, float] = Field(default_factory=dict, description="evaluator -> mean score")
    custom_scored: dict[str, int] = Field(
        default_factory=dict, description="evaluator -> interactions scored"
    )
    custom_missing: dict[str, int] = Field(
        default_factory=dict, description="evaluator -> interactions it failed to score"
    )

    # conversations whose last turn falls in the window (schemas/conversation.py): how many, how many had
    # each outcome, and the rates and mean turns over them (the metric catalogue's conversation metrics)
    conversations: int = Field(0, description="conversations closed with their last turn in the window")
    conversations_judged: int = Field(
        0, description="... with at least one judged turn (the denominator of the rates read from verdicts)"
    )
    conversations_hallucinated: int = Field(0, description="... with a hallucinated turn")
    conversations_unresolved: int = Field(0, description="... that ended unresolved")
    conversations_reasked: int = Field(0, description="... with a re-asked user turn")
    conversations_contradicted: int = Field(0, description="... with an answer contradicting an earlier one")
    conversation_hallucinated_rate: float | None = None
    conversation_unresolved_rate: float | None = None
    conversation_reask_rate: float | None = None
    conversation_contradiction_rate: float | None = None
    mean_turns_per_conversation: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _judged_default(cls, data: Any) -> Any:
        """A window built without a judged count (before sampling existed) judged all it did not skip."""
        if isinstance(data, dict) and data.get("judged") is None and "count" in data:
            data = {**data, "judged": int(data["count"]) - int(data.get("skipped") or 0)}
        return data
