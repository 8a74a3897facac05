"""Which judge produced an evaluation: its model and the NLI prompt's version.

People's agreement with the judge is measured per judge identity (``pipeline.metrics.agreement``): when a
provider updates the model behind a name, or the NLI prompt changes, the new verdicts start a series of
their own instead of blurring into the old one.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from schemas.results import JudgeCall


def judge_model(calls: Sequence[JudgeCall], kind: str) -> str:
    """The models that gave this evaluation's verdicts, in the order first used, joined by '+' (the
    cascade: ``lexical+gpt-4o-mini`` when its LLM was asked); the judge kind when no call was made."""
    models: list[str] = []
    for call in calls:
        if call.model and call.model not in models:
            models.append(call.model)
    return "+".join(models) if models else kind


@functools.cache
def prompt_version(kind: str) -> str:
    """The NLI prompt's version and fingerprint for an LLM judge kind; '' for the lexical judge."""
    if kind == "lexical":
        return ""
    from prompts import Prompts

    return Prompts().versions()["nli"]
