"""Lexical judge: an answer opening with "No," that states a fact is no refusal, and number-unit
compounds ("two-year", "24-hour", "30-day") match their spelled-out forms."""

from __future__ import annotations

import pytest

from pipeline.evaluator import Evaluator
from pipeline.judges.lexical import SWITCHES, LexicalJudge, LexicalOptions, PremiseIndex, judge_hypothesis
from pipeline.refusal_phrases import REFUSAL_OFF, refusal_match
from pipeline.text_normalise import normalise_text, tokens_of
from schemas.interaction import Interaction
from tests.settings_factory import make_settings

#: every rule and every refusal pattern on (the strictest matcher), and the shipped defaults
ALL_ON = LexicalOptions(**{s: True for s in SWITCHES}, refusal_off=frozenset())
JUDGES = {"all patterns": LexicalJudge(ALL_ON), "defaults": LexicalJudge()}

# -- (a) a negative reply that states a fact ---------------------------------------------------------


@pytest.mark.parametrize("judge", sorted(JUDGES))
@pytest.mark.parametrize(
    "text",
    [
        "No, X is not covered.",
        "No, water damage is not covered by the warranty.",
        "No, the warranty lasts two years.",
        "No, batteries are not included.",
        "No. The 24-hour service is not available on Sundays.",
        "No - roadside assistance is not included.",
        "Nope, the trailer hitch is not found on the base model.",
        "No, the seat is not adjustable; it is not listed as an option.",
        "No, there is no spare tyre in this model.",
        "No, unfortunately the car does not have that.",
        "No, I'm sorry, but the hotel is not pet friendly.",
        "NO,   the ASSIST button is not covered by the plan.",
        "**No**, order 4417 is not found in our system.",
        "No\u00a0- tyres are not included.",
        "No, it is not clear.",  # "the coolant is not clear": a fact about the thing asked
    ],
)
def test_a_negative_reply_that_states_a_fact_is_no_refusal(judge: str, text: str) -> None:
    assert not JUDGES[judge].is_refusal(text), refusal_match(text)


@pytest.mark.parametrize("judge", sorted(JUDGES))
@pytest.mark.parametrize(
    "text",
    [
        "No, I can't help with that",
        "No information is available about that",  # "No" opens a noun phrase, not a reply
        "No, I don't know.",
        "No. I cannot answer that from the manual.",
        "No, that is not mentioned in the manual.",
        "No, that is not covered in the given context.",
        "No, this is not specified in the documentation.",
        "No, the context does not say.",
        "No, the information is not provided.",
        "No, there is no information about that.",
        "No, sorry, I do not have that information.",
        "No, sorry, the manual does not cover that.",
        "No, the seat is heated. The price is not mentioned in the given context.",
        "Not really, I am unable to determine that.",
        "**No**, the order number is not mentioned in the context.",
    ],
)
def test_true_refusals_that_start_with_no_stay_refusals(judge: str, text: str) -> None:
    assert JUDGES[judge].is_refusal(text), text


def test_without_the_reply_rule_a_fact_after_no_is_read_as_a_refusal() -> None:
    off = LexicalJudge(ALL_ON.model_copy(update={"negative_reply": False}))
    assert off.is_refusal("No, water damage is not covered by the warranty.")
    assert off.is_refusal("No, I'm sorry, but the hotel is not pet friendly.")
    # outside an opening reply the fact-like patterns are unchanged
    for judge in (LexicalJudge(ALL_ON), LexicalJudge()):
        assert judge.is_refusal("The price is not mentioned.")
        assert judge.is_refusal("The answer is no: the price is not specified.")


@pytest.mark.parametrize(
    "text",
    [
        "No one is covered: the part is not included.",
        "Nobody is covered; the part is not included.",
        "None of the trims is covered, the part is not included.",
        "Nothing: the part is not included.",
        "Note, the part is not included.",
        "The answer is no, the part is not included.",
    ],
)
def test_only_an_opening_negative_reply_turns_the_rule_on(text: str) -> None:
    assert refusal_match(text) == refusal_match(text, negative_reply=False) == "is not included"


def test_the_llm_judges_phrase_check_uses_the_reply_rule_too() -> None:
    """``refusal_match`` is what LLM judges call first (``judge.refusal_phrases_first``)."""
    assert refusal_match("No, X is not covered.", REFUSAL_OFF) is None
    assert refusal_match("No, I can't help with that", REFUSAL_OFF) == "i can't help"
    assert refusal_match("No, X is not covered.", REFUSAL_OFF, negative_reply=False) == "is not covered"


async def test_a_negative_reply_is_judged_for_grounding_not_skipped_as_a_refusal() -> None:
    item = Interaction(
        interaction_id="r1",
        question="Is water damage covered?",
        contexts=[{"text": "Water damage is not covered by the warranty.", "document": "w"}],
        answer="No, water damage is not covered by the warranty.",
    )
    e = await Evaluator(LexicalJudge(), make_settings()).evaluate(item)
    assert e.answer_refusal is False
    assert e.context_entailment == 1.0


# -- (b) number-unit compounds --------------------------------------------------------------------


@pytest.mark.parametrize(
    "forms",
    [
        ("two-year", "two years", "2 years", "2-year", "2 yrs", "two year"),
        ("24-hour", "24 hours", "24h", "24 hrs", "twenty-four-hour", "twenty four hours"),
        ("30-day", "thirty days", "thirty-day", "30 days"),
        ("one-year", "one year", "1 year"),
        ("ten-minute", "10 mins", "ten minutes"),
        ("50 percent", "fifty percent", "50%"),
    ],
)
def test_number_unit_compounds_normalise_alike(forms: tuple[str, ...]) -> None:
    assert len({normalise_text(f) for f in forms}) == 1, {f: normalise_text(f) for f in forms}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("one of them", [("word", "one", False)]),  # a pronoun, not a number
        ("he is one", [("word", "one", False)]),
        ("first-aid kit", [("number", "1", False), ("word", "aid", False), ("word", "kit", False)]),
        ("two million", [("number", "2000000", False)]),
        ("twenty, four", [("number", "20", False), ("number", "4", False)]),  # a comma: two numbers
        ("the two doors", [("number", "2", False), ("word", "door", False)]),  # "doors" is no unit
        (
            "a six-time champion",
            [("number", "6", False), ("word", "time", False), ("word", "champion", False)],
        ),
        ("one-sided", [("word", "one", False), ("word", "sid", False)]),
        ("Section 3-2", [("name", "section", False), ("number", "3", False), ("number", "2", False)]),
        ("5 h", [("number", "5", False)]),  # a lone "h" is a unit only glued to its number
        ("the min and max", [("word", "min", False), ("word", "max", False)]),
    ],
)
def test_what_is_not_a_number_unit_compound(text: str, expected: list[tuple[str, str, bool]]) -> None:
    assert [(t.kind, t.norm, t.bound) for t in tokens_of(text)] == expected


@pytest.mark.parametrize(
    ("premise", "hypothesis"),
    [
        ("The battery has a 2-year warranty.", "The warranty lasts two years."),
        ("The warranty lasts two years.", "It comes with a 2-year warranty."),
        ("The warranty lasts two years.", "It comes with a two-year warranty."),
        ("Roadside help is available 24 hours a day.", "Roadside help is a 24-hour service."),
        ("Roadside help is a twenty-four-hour service.", "Roadside help is a 24-hour service."),
        ("You can return it within thirty days.", "There is a 30-day return window."),
        ("There is a 30-day return window.", "You can return it within thirty days."),
        ("The warranty covers one year.", "It has a 1-year warranty."),
    ],
)
def test_a_spelled_out_unit_supports_its_compound(premise: str, hypothesis: str) -> None:
    options = LexicalOptions()
    result = judge_hypothesis(hypothesis, PremiseIndex(premise, options), options)
    assert [s.verdict for s in result.statements] == ["entailed"], result
    off = options.model_copy(update={"number_units": False})
    before = judge_hypothesis(hypothesis, PremiseIndex(premise, off), off)
    assert before.score <= result.score


@pytest.mark.parametrize(
    ("premise", "hypothesis"),
    [
        ("The battery has a 2-year warranty.", "The warranty lasts three years."),
        ("The warranty lasts two years.", "It comes with a 3-year warranty."),
        ("There is a 30-day return window.", "You can return it within forty days."),
    ],
)
def test_another_number_of_the_same_unit_is_contradicted(premise: str, hypothesis: str) -> None:
    options = LexicalOptions()
    result = judge_hypothesis(hypothesis, PremiseIndex(premise, options), options)
    assert [s.verdict for s in result.statements] == ["contradicted"], result


def test_a_bare_number_word_stays_a_word_by_default() -> None:
    """Only a number bound to a unit is a number with ``number_words`` off: "two sons" is not."""
    options = LexicalOptions()
    result = judge_hypothesis("He has two sons.", PremiseIndex("He has 2 sons.", options), options)
    assert result.statements[0].verdict != "entailed"
    # a hypothesis's bare "two" still finds the premise's "two-year"
    index = PremiseIndex("The two-year warranty covers the battery.", options)
    assert judge_hypothesis("The warranty covers two batteries.", index, options).score > 0.5


async def test_correctness_matches_a_compound_against_a_spelled_out_reference() -> None:
    item = Interaction(
        interaction_id="c1",
        question="How long is the warranty?",
        contexts=[{"text": "Every battery has a two-year warranty.", "document": "w"}],
        ground_truth="two years",
        answer="It is a 2-year warranty.",
    )
    e = await Evaluator(LexicalJudge(), make_settings()).evaluate(item)
    assert e.answer_entails_ground_truth == 1.0
    assert e.context_entailment is not None and e.context_entailment >= 0.5
