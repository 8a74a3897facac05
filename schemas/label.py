"""A person's verdict on one interaction, the ground against which the judge is measured.

A ``Label`` says, for one interaction and one kind of question (is the answer grounded in its context,
correct against the ground truth, a refusal; is the ground truth a refusal), what a person decided:
1 or 0. Labels come from reviewers (the dashboard's interaction page, or the ``labels`` topic), from an
import of an evaluation file (``groundwatch labels import``) or from the chatbot's end users (thumbs,
mapped by a rule; kept apart from the judge's agreement unless asked for).

Every label kind names what the judge flags for it (``LABEL_TARGETS``, in ``schemas.label_kinds``): the
judge's *flag* is the event a dashboard rate counts (a hallucination, an incorrect answer, a refusal), and
the label's *condition* is that event as the person saw it. Agreement and the corrected rate
(``pipeline.metrics.agreement``) compare the two.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from schemas.label_kinds import CONVERSATION_KINDS as CONVERSATION_KINDS
from schemas.label_kinds import KIND_OF_RATE as KIND_OF_RATE
from schemas.label_kinds import LABEL_TARGETS as LABEL_TARGETS
from schemas.label_kinds import AnyLabelKind as AnyLabelKind
from schemas.label_kinds import LabelKind as LabelKind
from schemas.label_kinds import LabelTarget as LabelTarget
from schemas.label_kinds import label_target as label_target
from schemas.label_kinds import label_targets as label_targets
from schemas.results import CustomScore, PairName, Verdict
from schemas.utc import utc


class LabelSource(StrEnum):
    REVIEWER = "reviewer"  # a person reviewing interactions (dashboard, labels topic)
    IMPORT = "import"  # labels that came with a file (groundwatch labels import)
    END_USER = "end_user"  # the chatbot's own users (thumbs); never mixed into agreement unless asked


class StatementLabel(BaseModel):
    """A reviewer's verdict on one of the judge's statements (the drill-down's statement rows)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pair: PairName = Field(description="the NLI pair the statement belongs to")
    hypothesis_index: int = Field(ge=0, description="the hypothesis' index in its pair")
    statement_index: int = Field(ge=0, description="the statement's index in its hypothesis")
    verdict: Verdict = Field(description="the reviewer's verdict: entailed, contradicted or not_stated")


class Label(BaseModel):
    """One person's verdict on one interaction for one label kind. The latest label per interaction,
    kind and reviewer wins (ClickHouse ``labels`` is keyed so)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    interaction_id: str = Field(
        min_length=1,
        max_length=1024,
        description="the interaction labeled; for a conversation kind (resolved) the conversation_id",
    )
    kind: AnyLabelKind = Field(
        description="what is labeled: grounded, correct, answer_refusal, ground_truth_refusal (an "
        "interaction), resolved (a conversation), or custom.<name> for a pattern or pass/fail evaluator "
        "of the evaluators file (an evaluator not in it, or a score evaluator, is refused)"
    )
    value: int = Field(ge=0, le=1, description="1 or 0 (see LabelKind)")
    reviewer: str = Field(
        min_length=1, max_length=200, description="who labeled: a reviewer's name, 'import', or 'end_user'"
    )
    source: LabelSource = Field(LabelSource.REVIEWER, description="reviewer, import or end_user")
    #: ``streams.codec.decode`` passes the record's time (else the worker's clock) in the context as
    #: ``received_at``: the time a label sent without ``labeled_at`` gets
    stamped_on_receipt: ClassVar[bool] = True

    labeled_at: datetime = Field(
        description="when it was labeled (UTC); one on the labels topic without it gets its record's time"
    )
    note: str | None = Field(None, max_length=4000, description="the reviewer's free-text note")
    statements: list[StatementLabel] = Field(
        default_factory=list,
        max_length=2000,
        description="per-statement verdicts, when the reviewer gave them",
    )
    inclusion_probability: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="the chance this interaction had of being put before a reviewer (the review queue's "
        "draw); agreement weights the label by its inverse. None: the label stands for itself alone "
        "(weight 1), as a uniformly drawn one would",
    )

    @field_validator("value", mode="before")
    @classmethod
    def _strict_value(cls, value: object) -> object:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, float) and value in (0.0, 1.0):
            return int(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _stamp(cls, data: Any, info: ValidationInfo) -> Any:
        received = info.context.get("received_at") if isinstance(info.context, dict) else None
        if isinstance(data, dict) and data.get("labeled_at") is None and isinstance(received, datetime):
            return {**data, "labeled_at": received}
        return data

    @field_validator("labeled_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("labeled_at needs a time zone (e.g. 2026-11-24T10:00:00Z)")
        return utc(value)

    @property
    def weight(self) -> float:
        """The label's weight in agreement: the inverse of its inclusion probability (1 when unknown)."""
        return 1.0 / self.inclusion_probability if self.inclusion_probability else 1.0


class LabeledRow(BaseModel):
    """A label joined with the judge's verdicts on its interaction (what agreement is computed from)."""

    model_config = ConfigDict(frozen=True)

    interaction_id: str
    conversation_id: str | None = None
    timestamp: datetime
    app: str
    model: str
    judge: str
    judge_model: str = ""
    prompt_version: str = ""
    kind: AnyLabelKind
    reviewer: str
    source: LabelSource
    value: int
    inclusion_probability: float | None = None
    hallucination: bool | None = None
    answer_refusal: bool | None = None
    ground_truth_refusal: bool | None = None
    answer_entails_ground_truth: float | None = None
    context_entailment: float | None = None
    #: for a custom evaluator's kind: its score and the version it scored with (absent: it did not score)
    custom: dict[str, CustomScore] = Field(default_factory=dict)
    ended_unresolved: bool | None = Field(
        None, description="the conversation's rollup: it ended unresolved (a conversation kind's label)"
    )
