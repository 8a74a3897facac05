"""People's labels, the review queue and agreement (``GROUNDWATCH_LABELS__*``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.label_kinds import LABEL_TARGETS, LabelKind


class FeedbackRule(BaseModel):
    """How end users' thumbs in an interaction's metadata become labels (source ``end_user``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field("feedback", min_length=1, description="the metadata key holding the end user's verdict")
    kind: LabelKind = Field(
        LabelKind.GROUNDED,
        description="the label kind a verdict stands for: one of the label kinds (schemas.label_kinds: "
        + ", ".join(LABEL_TARGETS)
        + ")",
    )
    values: dict[str, Literal[0, 1]] = Field(
        min_length=1,
        description='the label value of each verdict, e.g. {"up": 1, "down": 0, "1": 1, "-1": 0}; verdicts '
        'are matched as text, trimmed and in lower case (the number -1 as "-1", true as "true"); a '
        "verdict not listed gives no label",
    )

    @field_validator("kind", mode="before")
    @classmethod
    def _known_kind(cls, value: object) -> object:
        if not isinstance(value, str) or value not in LABEL_TARGETS:
            raise ValueError(f"unknown label kind {value!r}: use one of {', '.join(LABEL_TARGETS)}")
        return value

    @field_validator("values")
    @classmethod
    def _normalised(cls, value: dict[str, int]) -> dict[str, int]:
        out: dict[str, int] = {}
        for verdict, label in value.items():
            key = verdict.strip().lower()
            if not key:
                raise ValueError("a verdict must not be blank")
            if key in out and out[key] != label:
                raise ValueError(f"the verdict {key!r} is given twice with different values")
            out[key] = label
        return out


class LabelsSettings(BaseModel):
    """People's labels: the review queue, and when agreement may correct a rate (docs/trust.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    review_rate: float = Field(
        0.02,
        gt=0.0,
        le=1.0,
        description="share of each app/model's judged interactions the review queue draws uniformly (by a "
        "stable hash of the interaction id, so the draw is the same in every process)",
    )
    review_near_threshold_rate: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="share drawn among interactions whose context entailment is within "
        "review_near_threshold_band of the hallucination threshold (the judge's unsure cases); 0: none. "
        "Agreement weights every label by the inverse of its chance of being drawn",
    )
    review_near_threshold_band: float = Field(
        0.1, gt=0.0, le=1.0, description="half-width of the band around the threshold counted as near it"
    )
    weekly_target: int = Field(
        50, ge=1, description="labels a week the review queue aims at per app/model (its progress bar)"
    )
    min_per_class: int = Field(
        20,
        ge=1,
        description="labels of each class (condition seen / not seen) an app/model needs before its rate is "
        "corrected for the judge's errors",
    )
    include_end_user: bool = Field(
        False,
        description="count end users' labels (source end_user) in the judge's agreement; off: they are kept "
        "and shown apart",
    )
    bootstrap_resamples: int = Field(
        1000, ge=0, le=100_000, description="bootstrap resamples behind every agreement interval (0: none)"
    )
    end_user_feedback: FeedbackRule | None = Field(
        None,
        description="turn end users' thumbs (metadata.feedback) into end_user labels as the worker stores "
        'interactions, e.g. {"kind": "grounded", "values": {"up": 1, "down": 0}}; unset: none',
    )
    gauge_refresh_seconds: float = Field(
        300.0,
        gt=0,
        description="how often the worker reads the judge's agreement for its Prometheus gauges "
        "(groundwatch_judge_*)",
    )
    gauge_period_days: int = Field(
        30,
        ge=1,
        le=400,
        description="the labeled interactions the Prometheus agreement gauges cover: the last N days",
    )
