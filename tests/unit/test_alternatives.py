"""Ground truths as alternatives and exact match of short answers (pipeline.alternatives)."""

from __future__ import annotations

import pytest

from pipeline.alternatives import (
    exact_match,
    ground_truth_alternatives,
    same_answer,
    split_alternatives,
    squad_normalise,
)
from schemas.interaction import Interaction


def _interaction(ground_truth: str | None, **extra: object) -> Interaction:
    return Interaction.model_validate(
        {"id": "a1", "question": "q?", "answer": "a", "ground_truth": ground_truth, **extra}
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("savior | save, rescue, savior | save", ["savior", "save, rescue, savior", "save"]),
        ("Paris | Paris | City of Light", ["Paris", "City of Light"]),  # duplicates once
        ("Paris", []),  # one answer: not a list
        ("a|b", []),  # the separator is " | " with spaces
        ("| name | age |", []),  # a markdown table row
        ("first | line\nsecond | line", []),  # more than one line
        ("x |  | ", []),
        (None, []),
    ],
)
def test_split_alternatives(text: str | None, expected: list[str]) -> None:
    assert split_alternatives(text) == expected


def test_gold_answers_metadata_wins_over_the_text() -> None:
    item = _interaction("savior | save", gold_answers=["savior", " save ", ""])
    assert ground_truth_alternatives(item) == ["savior", "save"]
    assert ground_truth_alternatives(_interaction("Rome | Roma")) == ["Rome", "Roma"]
    assert ground_truth_alternatives(_interaction("Rome is the capital.")) == []
    assert ground_truth_alternatives(_interaction(None, gold_answers=["x"])) == []  # no ground truth


def test_exact_match_whole_normalised_words() -> None:
    assert squad_normalise("The  Eiffel-Tower!") == "eiffel tower"
    assert exact_match("It was built by the Eiffel company.", "eiffel")
    assert not exact_match("Eiffelsson built it.", "Eiffel")  # whole words only
    assert exact_match("The tax rate is 20 %.", "20%")  # punctuation removed
    assert exact_match("about 67,000,000 people", "67 million")  # canonical numbers
    assert exact_match("Cities grew", "city")  # stems
    assert not exact_match("67 people and a million more", "67 million")  # not adjacent
    assert not exact_match("water", "lithium")
    assert not exact_match("anything", "the")  # nothing left after normalisation


def test_same_answer_needs_equality() -> None:
    golds = ["Afonso IV of Portugal", "Prince Henry"]
    assert same_answer("prince henry.", golds) == "Prince Henry"
    assert same_answer("Afonso IV, of Portugal", golds) == "Afonso IV of Portugal"
    assert same_answer("Prince Henry the Navigator", golds) is None


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("It is not Paris, it is Lyon.", "Paris"),
        ("I don't know if it's Paris.", "Paris"),
        ("Paris was never the capital.", "Paris"),
        ("Yes, there is a lot of it.", "No."),
    ],
)
def test_exact_match_leaves_negations_refusals_and_empty_golds_to_the_judge(answer: str, gold: str) -> None:
    assert not exact_match(answer, gold)


def test_exact_match_still_decides_a_plain_containing_answer() -> None:
    assert exact_match("The capital of France is Paris.", "Paris")
