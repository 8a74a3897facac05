"""The per-interaction output of groundwatch."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from schemas.interaction import Interaction, Passage
from schemas.results import CustomScore, JudgeCall, PairResult

#: what became of an answer: a refusal; stated with no evidence at all; judged against its evidence,
#: under the hallucination threshold (hallucination) or not (supported)
Outcome = Literal["supported", "hallucination", "refusal", "unsupported_no_evidence"]
#: what decided whether a question is answerable from its documents (pipeline/answerability.py)
AnswerableSource = Literal["label", "ground_truth", "contexts", "unknown"]


class Evaluation(BaseModel):
    interaction_id: str
    timestamp: datetime  # the interaction's own time (windows use it)
    evaluated_at: datetime = Field(
        description="when the worker evaluated it, on the worker's clock (the tables' TTL column)"
    )
    app: str
    model: str
    conversation_id: str | None = None
    judge: str
    judge_model: str = ""  # the judge's model ("lexical" for the lexical judge); '' when not recorded
    prompt_version: str = ""  # the NLI prompt's version+fingerprint an LLM judge used; '' for lexical

    # the NLI scores and refusal flags (docs/method.md)
    context_entailment: float | None = None  # answer entailed by the contexts
    ground_truth_entails_answer: float | None = None  # answer entailed by question end + ground truth
    answer_entails_ground_truth: float | None = None  # ground truth entailed by question end + answer
    answer_refusal: bool | None = None
    ground_truth_refusal: bool | None = None

    # grounded-unit precision, unsupported claims, hallucination flag, relevance (docs/method.md)
    grounded_precision: float | None = None  # weighted share of answer statements the contexts support
    unsupported_claims: list[str] = Field(default_factory=list)
    hallucination: bool | None = None  # answered, not a refusal, context entailment under the threshold
    relevance: float | None = None  # cosine(last user message, answer)

    pairs: list[PairResult] = Field(default_factory=list)  # statement-level detail

    # the answer's outcome and tool calls (docs/input.md "Agents and tools", pipeline/evidence.py)
    outcome: Outcome | None = Field(
        None,
        description="refusal (answer_refusal); unsupported_no_evidence (answered, not a refusal, a factual "
        "statement and no evidence at all: no context and no tool result that counts); hallucination or "
        "supported (hallucination true or false); None when not known (not judged, refusal unknown, or "
        "nothing factual said without evidence)",
    )
    no_evidence: bool | None = Field(
        None,
        description="an answer that is not a refusal with a factual statement had no evidence (outcome "
        "unsupported_no_evidence); false: it had evidence; None: a refusal, unknown, or nothing to support",
    )
    evidence: list[Passage] = Field(
        default_factory=list,
        description="the tool-result passages judged beside the contexts (pipeline.evidence), each naming "
        "its tool, call id and step: a statement's passage indexes the contexts, then these",
    )
    tool_calls: int | None = Field(
        None, description="tool calls of the current question (steps not of earlier turns); None before tools"
    )
    tool_error: bool | None = Field(
        None,
        description="one of the current question's tool calls failed (status error: an error status, an "
        "exception, an error result); None without tool calls",
    )
    ungrounded_arguments: bool | None = Field(
        None,
        description="a current tool call's argument value (an id, a number, a name) appears nowhere in the "
        "conversation nor in earlier tool results (pipeline.tool_arguments); None when none was checked",
    )
    ungrounded_argument_values: list[str] = Field(
        default_factory=list, description="those values, as '<tool>.<argument>=<value>'"
    )
    argument_judge_failure: str | None = Field(
        None,
        description="with tools.argument_judge llm: why the LLM judge's review of the unsupported argument "
        "values failed (the lexical result stands); None when it ran or was not asked",
    )

    # the answer's citations (docs/citations.md, pipeline.metrics.citations): None when the answer cites
    # nothing, is a refusal, or was not judged against its evidence
    citation_recall: float | None = Field(
        None, description="share of the factual statements citing a passage that their citations support"
    )
    citation_precision: float | None = Field(
        None,
        description="share of (statement, cited passage) pairs where the passage supports the statement "
        "alone or is needed with the others",
    )
    uncited_statements: float | None = Field(
        None, description="share of the factual statements of an answer that cites that carry no citation"
    )
    miscited: bool | None = Field(
        None,
        description="some statement citing a passage is not supported by the passages it cites; None when "
        "no statement cites a passage",
    )
    dangling_citations: int | None = Field(
        None, ge=0, description="references of the answer that name no passage (a position past the evidence)"
    )
    dangling_citation: bool | None = Field(None, description="dangling_citations > 0")
    # answerability and refusal groundedness (pipeline/answerability.py, docs/answerability.md): each flag
    # is None outside its Trust-Eval figure's denominator
    answerable: bool | None = Field(
        None,
        description="the question is answerable from its documents: an answerable label, else a ground truth "
        "that is not a refusal, else false when there is no evidence at all; None when none of these knows",
    )
    answerable_source: AnswerableSource = Field(
        "unknown", description="what decided answerable: label, ground_truth, contexts or unknown"
    )
    over_refusal: bool | None = Field(None, description="an answerable question: the answer refused it")
    answered_unanswerable: bool | None = Field(
        None, description="an unanswerable question: the answer answered it anyway"
    )
    refused_unanswerable: bool | None = Field(
        None, description="an unanswerable question: the answer refused it (reject recall's case)"
    )
    answered_answerable: bool | None = Field(
        None, description="an answerable question: the answer answered it (answerable recall's case)"
    )
    justified_refusal: bool | None = Field(
        None,
        description="a refusal of a question whose answerability is known: it was unanswerable (reject "
        "precision's case)",
    )
    justified_answer: bool | None = Field(
        None,
        description="an answer to a question whose answerability is known: it was answerable (answerable "
        "precision's case)",
    )

    # cost and time
    calls: list[JudgeCall] = Field(default_factory=list)
    judge_calls: int = 0  # calls that reached the judge's model (cache hits excluded)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    judge_latency_ms: float = 0.0  # summed latency of this interaction's judge calls
    stage_seconds: dict[str, float] = Field(default_factory=dict)

    complete: bool = True
    # sampling (pipeline.sampling): an interaction the rules or a budget skip is stored unjudged, with why
    judged: bool = True  # False: no judge call was made, every score is None
    skip_reason: str | None = None  # e.g. sampled_out:default, never:<rule>, budget:cost_per_day
    missing: list[str] = Field(default_factory=list)  # parts absent when the join timed out
    labels: dict[str, int] | None = None  # passed through from the input, for accuracy reports
    # the input as evaluated (question, contexts, answer, ground truth): what a drill-down shows beside
    # the verdicts. None in a stored evaluation that does not carry it
    interaction: Interaction | None = None
    # the custom evaluators (schemas.evaluators) that applied to it: name -> score or why it is missing
    custom: dict[str, CustomScore] = Field(default_factory=dict)
    topic: str | None = Field(
        None,
        description="the id of the topic its question was assigned to (docs/topics.md; 'other' for none); "
        "None where topics were not assigned",
    )
    topic_label: str | None = Field(None, description="that topic's name, its most distinctive words")
    topic_model: int | None = Field(
        None, description="the version of the topic model that assigned it (TopicModel.version)"
    )
