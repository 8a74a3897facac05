"""Decision thresholds per app and model, and which threshold decides each score (the scores
``pipeline.report.SCORES`` names); ``PipelineSettings.threshold_for`` applies them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.settings.common import Share


class Thresholds(BaseModel):
    """Decision thresholds of one model of an app (``PipelineSettings.app_thresholds``); unset: the
    app's, else the worker's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hallucination: Share | None = Field(
        None, description="context entailment under this = hallucination (as hallucination_threshold)"
    )
    correct: Share | None = Field(
        None, description="answer_entails_ground_truth at or over this = correct (as correct_threshold)"
    )


class AppThresholds(Thresholds):
    """Decision thresholds of one app, and of some of its models (``PipelineSettings.app_thresholds``)."""

    models: dict[str, Thresholds] = Field(
        default_factory=dict, description="model -> thresholds of that model of the app, over the app's"
    )


#: which threshold of ``Thresholds`` decides a score (pipeline.report.SCORES names)
THRESHOLD_KIND: dict[str, Literal["hallucination", "correct"]] = {
    "context_entailment": "hallucination",
    "grounded_precision": "hallucination",
    "answer_entails_ground_truth": "correct",
    "ground_truth_entails_answer": "correct",
    "agreement": "correct",
}
