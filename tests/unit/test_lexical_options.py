"""Every rule switch of the lexical judge (``LexicalOptions``) is wired: turning it off changes a verdict."""

from __future__ import annotations

import pytest

from pipeline.judges.base import Premise
from pipeline.judges.lexical import REFUSAL_OFF, SWITCHES, LexicalJudge, LexicalOptions
from pipeline.refusal_phrases import REFUSAL_PATTERNS

#: every rule on: each switch is tested against the others on
ALL_ON = LexicalOptions(**{s: True for s in SWITCHES}, refusal_off=frozenset())

# switch -> (question or None, premise after the question, hypothesis): an example the rule decides
EXAMPLES: dict[str, tuple[str | None, str, str]] = {
    "clauses": (None, "Paris is the capital of France.", "Paris is the capital of France, which has 67 million people"),  # noqa: E501
    "kind_weights": (None, "The committee approved the budget.", "The committee approved Smith"),
    "prefix_credit": (None, "The committee approved the budget.", "The committee approved budgetary plans"),
    "number_words": (None, "He has 2 sons and a daughter.", "He has two sons"),
    "number_units": (None, "The battery has a 2-year warranty.", "The warranty lasts two years"),
    "number_rounding": (None, "Poseidon grossed $181,674,817.", "Poseidon grossed $181.7 million"),
    "years_exact": (None, "Certificates were first issued in 1908.", "Certificates were first issued in 1900"),  # noqa: E501
    "number_cap_rule": (None, "The film had a budget of $160 million.", "The film had a budget of $150 million"),  # noqa: E501
    "name_cap_rule": (None, "Jonathan Stark won two Grand Slam titles in 1994.", "Henri Stark won two Grand Slam titles in 1994"),  # noqa: E501
    "sharpen": (None, "The committee approved the new budget.", "The committee rejected the new budget"),
    "whole_hypothesis": (None, "Paris is the capital of France and has many museums.", "Paris is the capital of France, and it has many museums"),  # noqa: E501
    "premise_alternatives": ("what does hosanna mean", "savior | save | rescue", "It is a cry to save us"),
    "hypothesis_alternatives": (None, "He came to rescue them.", "savior | rescue"),
    "question_not_evidence": ("what is the main mineral in lithium batteries", "water", "Lithium"),
    "reference_lenient": ("who was in charge of the war", "George Washington led the army.", "General George Washington"),  # noqa: E501
    "competitor_check": ("who has the most rushing yards in a super bowl", "Emmitt Smith", "Timmy Smith"),
    "less_specific_numbers": ("where was the final played", "at Wembley", "Wembley in 1995"),
    "coarser_dates": ("when were cigarette ads banned from tv uk", "1965", "1 August 1965"),
    "centuries_decades": ("when was the city founded", "in the 16th century", "1524"),
    "initials": ("who wrote the constitution", "B. R. Ambedkar", "Bhimrao Ramji Ambedkar"),
    "asked_letter": ("what does g stand for in ncis los angeles", "G. Callen", "Grisha Callen"),
    "acronyms": ("who issues driving licences", "the Department of Motor Vehicles", "the DMV"),
    "framing_words": (None, "Paris is the capital of France.", "The passage describes Paris as the capital of France"),  # noqa: E501
    # a refusal rule: the hypothesis is the answer whose refusal flag the switch decides
    "negative_reply": (None, "", "No, water damage is not covered by the warranty."),
}  # fmt: skip


async def _score(options: LexicalOptions, question: str | None, premise: str, hypothesis: str) -> float:
    text = f"{question}\n{premise}" if question else premise
    out = await LexicalJudge(options).entail(Premise(text, question=question), [hypothesis])
    return out.value.hypotheses[0].score


def test_every_switch_has_an_example() -> None:
    assert set(SWITCHES) == set(EXAMPLES)
    assert all(getattr(LexicalOptions(), name) in (True, False) for name in SWITCHES)


@pytest.mark.parametrize("switch", sorted(EXAMPLES))
async def test_turning_a_switch_off_changes_its_example(switch: str) -> None:
    question, premise, hypothesis = EXAMPLES[switch]
    on = ALL_ON
    if switch == "number_units":  # it decides what a number word is only when number words are words
        on = ALL_ON.model_copy(update={"number_words": False})
    off = on.model_copy(update={switch: False})
    if switch == "negative_reply":
        assert not LexicalJudge(on).is_refusal(hypothesis) and LexicalJudge(off).is_refusal(hypothesis)
        return
    with_rule = await _score(on, question, premise, hypothesis)
    without = await _score(off, question, premise, hypothesis)
    if switch == "whole_hypothesis":  # the same score, decided without splitting into statements
        judge_on = await LexicalJudge(on).entail(Premise(premise), [hypothesis])
        judge_off = await LexicalJudge(off).entail(Premise(premise), [hypothesis])
        assert len(judge_on.value.hypotheses[0].statements) == 1
        assert len(judge_off.value.hypotheses[0].statements) == 2
    else:
        assert with_rule != pytest.approx(without), (switch, with_rule, without)


def test_options_are_frozen_and_strict() -> None:
    options = LexicalOptions()
    with pytest.raises(ValueError):
        options.clauses = False  # type: ignore[misc]
    with pytest.raises(ValueError):
        LexicalOptions(no_such_rule=True)  # type: ignore[call-arg]


def test_refusal_patterns_can_be_turned_off_one_by_one() -> None:
    text = "I don't know the answer to that."
    assert LexicalJudge().is_refusal(text)
    assert REFUSAL_OFF < set(REFUSAL_PATTERNS)  # some patterns stay on by default
    assert LexicalJudge(ALL_ON).is_refusal("That is beyond the scope of the manual.")
    assert not LexicalJudge().is_refusal("That is beyond the scope of the manual.")  # off by default
    assert not LexicalJudge(LexicalOptions(refusal_off=frozenset({"i_cannot"}))).is_refusal(text)
    assert LexicalJudge(LexicalOptions(refusal_off=frozenset({"apology"}))).is_refusal(text)
