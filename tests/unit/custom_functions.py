"""Python evaluators for the tests of pipeline.custom_evaluators: well-behaved ones and adversaries."""

from __future__ import annotations

import threading
from typing import Any

from schemas.interaction import Interaction

#: set by a test to let the hanging evaluator's threads go
RELEASE = threading.Event()


def short_answer(interaction: Interaction) -> bool:
    return len(interaction.answer) < 20


def answer_length(interaction: Interaction) -> dict[str, Any]:
    return {"score": min(1.0, len(interaction.answer) / 100), "reason": f"{len(interaction.answer)} chars"}


def raises(interaction: Interaction) -> float:
    raise RuntimeError(f"cannot score {interaction.interaction_id}")


def hangs(interaction: Interaction) -> float:
    RELEASE.wait(60)
    return 1.0


def garbage(interaction: Interaction) -> Any:
    return {"q1": "a string", "q2": 1.5, "q3": float("nan"), "q4": {"reason": "no score"}}.get(
        interaction.question, [1, 2]
    )


def two_arguments(interaction: Interaction, other: int) -> float:
    return 0.0
