"""Your own evaluators (``GROUNDWATCH_EVALUATORS__*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class EvaluatorsSettings(BaseModel):
    """Your own evaluators (schemas.evaluators; docs/evaluators.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    file: Path | None = Field(
        None,
        description="YAML/JSON file of your evaluators (pattern, python, rubric; deploy/evaluators/); each "
        "becomes the metric custom.<name>. A file that does not validate stops the worker at start. "
        "none: no custom evaluators",
    )
    wait_after_core_s: float = Field(
        5.0,
        ge=0.0,
        le=600.0,
        description="once an interaction's core verdicts are in, how long its custom evaluators still "
        "running may take before they are given up (their scores missing, reason timeout): a slow "
        "evaluator never holds the core verdicts longer than this",
    )
    python_processes: int = Field(
        2,
        ge=1,
        le=64,
        description="subprocesses running each python evaluator (a pool of its own, so one that hangs "
        "holds only its own); a call past its timeout_s has its process killed and replaced",
    )
    python_memory_mb: int = Field(
        2048,
        ge=0,
        description="address-space limit of each python evaluator subprocess in MiB (an evaluator past it "
        "gets a MemoryError or its process dies: that call's score is missing); 0: no limit",
    )
