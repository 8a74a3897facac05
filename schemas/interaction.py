"""The input event: one chatbot interaction."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from schemas.settings import Limits


class Passage(BaseModel):
    """One retrieved context passage, with the name of its document when known."""

    model_config = ConfigDict(extra="forbid")

    text: str
    document: str | None = None


def _limits(info: ValidationInfo) -> Limits:
    ctx = info.context or {}
    limits = ctx.get("limits") if isinstance(ctx, dict) else None
    return limits if isinstance(limits, Limits) else Limits()


def _check_len(value: str, limit: int, field: str) -> str:
    if len(value) > limit:
        raise ValueError(f"{field} has {len(value)} characters, over the limit of {limit}")
    return value


class Interaction(BaseModel):
    """A question, its retrieved contexts, the chatbot's answer and, when known, the ground truth.

    Input lines may use ``id`` for ``interaction_id`` and plain strings for passages; any field this
    model does not know is kept under ``metadata`` (nothing is dropped silently). Size limits come from
    ``Limits`` passed as validation context: ``Interaction.model_validate(d, context={"limits": ...})``.
    """

    model_config = ConfigDict(extra="forbid")

    interaction_id: str = Field(min_length=1)
    timestamp: datetime = Field(default_factory=lambda: datetime.now(UTC))
    app: str = "default"
    model: str = "unknown"
    conversation_id: str | None = None
    question: str
    contexts: list[Passage] = Field(default_factory=list)
    ground_truth: str | None = None
    answer: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    labels: dict[str, int] | None = None  # human labels, for measuring accuracy (eval CLI)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "interaction_id" not in data and "id" in data:
            data["interaction_id"] = data.pop("id")
        if isinstance(data.get("interaction_id"), int):
            data["interaction_id"] = str(data["interaction_id"])
        contexts = data.get("contexts")
        if isinstance(contexts, str):
            data["contexts"] = [contexts]
        if isinstance(data.get("contexts"), list):
            data["contexts"] = [{"text": c} if isinstance(c, str) else c for c in data["contexts"]]
        known = set(cls.model_fields)
        extra = {k: v for k, v in data.items() if k not in known}
        if extra:
            metadata = dict(data.get("metadata") or {})
            metadata.update(extra)
            data = {k: v for k, v in data.items() if k in known}
            data["metadata"] = metadata
        return data

    @field_validator("timestamp")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    @field_validator("interaction_id")
    @classmethod
    def _id_len(cls, value: str, info: ValidationInfo) -> str:
        return _check_len(value, _limits(info).max_id_chars, "interaction_id")

    @field_validator("question")
    @classmethod
    def _question_len(cls, value: str, info: ValidationInfo) -> str:
        return _check_len(value, _limits(info).max_question_chars, "question")

    @field_validator("answer")
    @classmethod
    def _answer_len(cls, value: str, info: ValidationInfo) -> str:
        return _check_len(value, _limits(info).max_answer_chars, "answer")

    @field_validator("ground_truth")
    @classmethod
    def _gt_len(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or not value.strip():
            return None  # a blank ground truth is no ground truth
        return _check_len(value, _limits(info).max_ground_truth_chars, "ground_truth")

    @field_validator("contexts")
    @classmethod
    def _contexts_size(cls, value: list[Passage], info: ValidationInfo) -> list[Passage]:
        limits = _limits(info)
        if len(value) > limits.max_contexts:
            raise ValueError(f"contexts has {len(value)} passages, over the limit of {limits.max_contexts}")
        total = sum(len(p.text) for p in value)
        if total > limits.max_context_chars:
            raise ValueError(
                f"contexts have {total} characters in all, over the limit of {limits.max_context_chars}"
            )
        return value

    @property
    def context_text(self) -> str:
        return "\n\n".join(p.text for p in self.contexts)

    @property
    def document_names(self) -> list[str]:
        return [p.document for p in self.contexts if p.document]
