"""Python evaluators for the tests of pipeline.custom_evaluators: well-behaved ones and adversaries (each
runs in an evaluator subprocess: what it does there must cost only its own score)."""

from __future__ import annotations

from typing import Any

from schemas.interaction import Interaction


def short_answer(interaction: Interaction) -> bool:
    return len(interaction.answer) < 20


def answer_length(interaction: Interaction) -> dict[str, Any]:
    return {"score": min(1.0, len(interaction.answer) / 100), "reason": f"{len(interaction.answer)} chars"}


def raises(interaction: Interaction) -> float:
    raise RuntimeError(f"cannot score {interaction.interaction_id}")


def hangs(interaction: Interaction) -> float:
    import time

    time.sleep(3600)
    return 1.0


def garbage(interaction: Interaction) -> Any:
    return {"q1": "a string", "q2": 1.5, "q3": float("nan"), "q4": {"reason": "no score"}}.get(
        interaction.question, [1, 2]
    )


def two_arguments(interaction: Interaction, other: int) -> float:
    return 0.0


def spins(interaction: Interaction) -> float:
    """Pure Python that never returns and holds the GIL while it runs."""
    n = 0
    while True:
        n += 1


def backtracks(interaction: Interaction) -> bool:
    import re

    return re.search(r"(a|aa)+$", "a" * 64 + "b") is not None


def exits(interaction: Interaction) -> float:
    import sys

    sys.exit(1)


def interrupts(interaction: Interaction) -> float:
    raise KeyboardInterrupt


def dies(interaction: Interaction) -> float:
    import os

    os._exit(3)


def segfaults(interaction: Interaction) -> float:
    import ctypes

    return float(ctypes.string_at(0))


def hoards_memory(interaction: Interaction) -> float:
    hoard = bytearray(8 * 1024**3)
    return float(len(hoard) > 0)


def mutates(interaction: Interaction) -> float:
    interaction.answer = "changed by the evaluator"
    interaction.contexts.clear()
    return 1.0
