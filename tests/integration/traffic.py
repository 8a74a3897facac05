"""Synthetic traffic for a worker: ``CONTEXT`` one passage on the Eiffel Tower, ``GROUNDED`` questions
with answers it supports, ``HALLUCINATED`` the same questions with answers it contradicts;
``synthetic(app, pairs, n)`` ``n`` input records of ``app`` (model ``m1``) cycling through ``pairs``."""

from __future__ import annotations

from typing import Any

CONTEXT = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in 1889 and is "
    "330 metres tall. It was designed by the company of Gustave Eiffel."
)
GROUNDED = [
    ("When was the Eiffel Tower completed?", "The Eiffel Tower was completed in 1889."),
    ("How tall is the Eiffel Tower?", "The Eiffel Tower is 330 metres tall."),
    ("Who designed the Eiffel Tower?", "The tower was designed by the company of Gustave Eiffel."),
]
HALLUCINATED = [
    (
        "When was the Eiffel Tower completed?",
        "The Eiffel Tower was completed in 1750 in Rome by Napoleon Bonaparte.",
    ),
    ("How tall is the Eiffel Tower?", "The Eiffel Tower is 95 feet tall and made of glass and marble."),
    ("Who designed the Eiffel Tower?", "Leonardo da Vinci designed the tower for the Vatican museum."),
]


def synthetic(app: str, pairs: list[tuple[str, str]], n: int) -> list[dict[str, Any]]:
    return [
        {
            "interaction_id": f"{app}-{i}",
            "app": app,
            "model": "m1",
            "question": pairs[i % len(pairs)][0],
            "contexts": [CONTEXT],
            "answer": pairs[i % len(pairs)][1],
        }
        for i in range(n)
    ]
