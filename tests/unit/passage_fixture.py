"""Interactions whose lexical verdicts are pinned in tests/fixtures/lexical_verdicts.json.

The fixture holds the scores and statement verdicts the lexical judge gave these interactions before
supporting passages were recorded; ``test_passages.py`` checks that recording them changed none of it.
Regenerate only on purpose (a deliberate change of the lexical judge):
``PYTHONPATH=$PWD python -m tests.unit.passage_fixture > tests/fixtures/lexical_verdicts.json``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pipeline.evaluator import Evaluator
from pipeline.judges.lexical import LexicalJudge
from schemas.interaction import Interaction
from schemas.settings import Settings
from tests.settings_factory import make_settings

FILLER = " ".join(["Filler words fill this passage about nothing in particular."] * 5)


def interactions() -> list[Interaction]:
    return [
        Interaction(
            interaction_id="p1",
            question="Who owns the red house and what colour is the car?",
            contexts=[
                {"text": "Alpha owns the red house on the hill.", "document": "houses.md"},
                {"text": "", "document": "empty.md"},
                {"text": "Beta owns the blue car, bought in 2019.", "document": "cars.md"},
            ],
            answer="Alpha owns the red house. Beta owns a green car bought in 2021. Gamma owns a boat.",
        ),
        Interaction(
            interaction_id="p2",
            question="What does the reset button do?",
            contexts=[
                {"text": "The reset button restores factory settings. " + FILLER, "document": "manual.pdf"},
                {"text": "Hold the reset button for ten seconds. " + FILLER, "document": "faq.md"},
                {"text": "The router has four ports. " + FILLER},
            ],
            answer="The reset button restores factory settings, and you hold it for ten seconds.",
            ground_truth="It restores the factory settings.",
        ),
        Interaction(
            interaction_id="p3",
            question="Which state is Reno in?",
            contexts=[{"text": "Reno is a city in Nevada. " + FILLER + " " + FILLER, "document": "reno.md"}],
            answer="Nevada.",
            ground_truth="Nevada",
        ),
    ]


def split_settings() -> Settings:
    """Settings whose premise budget (200 characters) splits the passages above into parts."""
    return make_settings(pipeline={"min_premise_chars": 200}).with_changes(
        judge={"context_window_tokens": 700}
    )


async def verdicts() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, settings in (("default", make_settings()), ("split", split_settings())):
        evaluator = Evaluator(LexicalJudge(), settings)
        for item in interactions():
            e = await evaluator.evaluate(item)
            out[f"{name}/{item.interaction_id}"] = {
                "context_entailment": e.context_entailment,
                "ground_truth_entails_answer": e.ground_truth_entails_answer,
                "answer_entails_ground_truth": e.answer_entails_ground_truth,
                "hallucination": e.hallucination,
                "pairs": [
                    {
                        "pair": p.pair,
                        "score": p.score,
                        "premise_parts": p.premise_parts,
                        "hypotheses": [
                            {
                                "hypothesis": h.hypothesis,
                                "score": h.score,
                                "statements": [
                                    s.model_dump(include={"statement", "verdict", "reason", "tag", "score"})
                                    for s in h.statements
                                ],
                            }
                            for h in p.hypotheses
                        ],
                    }
                    for p in e.pairs
                ],
            }
        await evaluator.aclose()
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(verdicts()), indent=1, sort_keys=True))
