"""The label kinds and what each measures the judge on (``LABEL_TARGETS``): the one registry that
``schemas.label``, the settings (``labels.end_user_feedback.kind``), calibration, the offline report and
the dashboards read.

Every label kind names what the judge flags for it: the judge's *flag* is the event a dashboard rate
counts (a hallucination, an incorrect answer, a refusal), and the label's *condition* is that event as
the person saw it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class LabelKind(StrEnum):
    GROUNDED = "grounded"  # 1 = the answer is supported by its context
    CORRECT = "correct"  # 1 = the answer agrees with the ground truth
    ANSWER_REFUSAL = "answer_refusal"  # 1 = the answer is a refusal
    GROUND_TRUTH_REFUSAL = "ground_truth_refusal"  # 1 = the ground truth is a refusal
    RESOLVED = "resolved"  # 1 = the conversation ended resolved (a label on a conversation_id)


class LabelTarget(BaseModel):
    """What a label kind measures the judge on: the event the judge flags and the rate that counts it."""

    model_config = ConfigDict(frozen=True)

    kind: LabelKind
    condition: str = Field(description="the event, in words: what a flag claims ('hallucinated')")
    condition_value: int = Field(description="the label value (0 or 1) that means the condition holds")
    flag: str = Field(
        description="the evaluations column that holds the judge's flag, or 'answer_entails_ground_truth' "
        "(flagged when under the correct threshold)"
    )
    rate_metric: str | None = Field(
        description="the metric catalogue's rate counting the flag (schemas.metrics), None when there is none"
    )
    question: str = Field(description="what a reviewer is asked, on the dashboard's interaction page")
    yes_text: str = Field(description="the answer of value 1, in words")
    no_text: str = Field(description="the answer of value 0, in words")
    keys: tuple[str, str] | None = Field(
        None, description="the dashboard's keys for 1 and 0; None: not asked on the dashboard"
    )
    threshold: tuple[str, Literal["hallucination", "correct"]] | None = Field(
        None,
        description="the score the judge's flag thresholds and that threshold's key in "
        "pipeline.app_thresholds (what groundwatch calibrate chooses); None: the flag is the judge's own",
    )
    scores: tuple[str, ...] = Field(
        (),
        description="the scores the offline report measures against this label (pipeline.report.SCORES), "
        "the primary first; empty: none",
    )


LABEL_TARGETS: dict[LabelKind, LabelTarget] = {
    t.kind: t
    for t in (
        LabelTarget(
            kind=LabelKind.GROUNDED,
            condition="hallucinated",
            condition_value=0,
            flag="hallucination",
            rate_metric="hallucination_rate",
            question="Grounded in its context?",
            yes_text="grounded",
            no_text="hallucinated",
            keys=("g", "h"),
            threshold=("context_entailment", "hallucination"),
            scores=("context_entailment", "grounded_precision"),
        ),
        LabelTarget(
            kind=LabelKind.CORRECT,
            condition="incorrect",
            condition_value=0,
            flag="answer_entails_ground_truth",
            rate_metric=None,
            question="Agrees with the ground truth?",
            yes_text="correct",
            no_text="incorrect",
            keys=("c", "x"),
            threshold=("answer_entails_ground_truth", "correct"),
            scores=("answer_entails_ground_truth", "ground_truth_entails_answer", "agreement"),
        ),
        LabelTarget(
            kind=LabelKind.ANSWER_REFUSAL,
            condition="answer is a refusal",
            condition_value=1,
            flag="answer_refusal",
            rate_metric="answer_refusal_rate",
            question="Is the answer a refusal?",
            yes_text="refusal",
            no_text="answers",
            keys=("r", "a"),
            scores=("answer_refusal",),
        ),
        LabelTarget(
            kind=LabelKind.GROUND_TRUTH_REFUSAL,
            condition="ground truth is a refusal",
            condition_value=1,
            flag="ground_truth_refusal",
            rate_metric="ground_truth_refusal_rate",
            question="Is the ground truth a refusal?",
            yes_text="refusal",
            no_text="answers",
        ),
        LabelTarget(
            kind=LabelKind.RESOLVED,
            condition="ended unresolved",
            condition_value=0,
            flag="ended_unresolved",
            rate_metric="conversation_unresolved_rate",
            question="Did the conversation end resolved?",
            yes_text="resolved",
            no_text="unresolved",
        ),
    )
}

#: the label kinds given on a conversation (the label's interaction_id holds the conversation_id) and
#: measured against the conversation's rollup (``conversations``), not an interaction's verdicts
CONVERSATION_KINDS: frozenset[LabelKind] = frozenset({LabelKind.RESOLVED})

#: the label kind whose agreement corrects a catalogue rate
KIND_OF_RATE: dict[str, LabelKind] = {
    t.rate_metric: t.kind for t in LABEL_TARGETS.values() if t.rate_metric is not None
}
