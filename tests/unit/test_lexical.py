"""Lexical judge: number/name normalisation, statement splitting and support, refusal phrases."""

from __future__ import annotations

from decimal import Decimal

import pytest

from pipeline.judges.base import Judge, Premise
from pipeline.judges.lexical import (
    SWITCHES,
    LexicalConfig,
    LexicalJudge,
    LexicalOptions,
    PremiseIndex,
    judge_hypothesis,
    judge_statement,
    split_statements,
)
from pipeline.refusal_phrases import is_refusal, refusal_match
from pipeline.text_normalise import normalise_text, stem, tokens_of


def parse_number(text: str) -> Decimal | None:
    """The one number tokens_of reads in ``text`` ("67,000,000", "67 million", "1.5k", "15%", "twelve");
    None when it reads none or several."""
    numbers = [t for t in tokens_of(text) if t.kind == "number"]
    return Decimal(numbers[0].norm) if len(numbers) == 1 else None


#: every rule on: tests of a rule that is off by default (docs/accuracy.md, ablation) turn it on
ALL_ON = LexicalOptions(**{s: True for s in SWITCHES}, refusal_off=frozenset())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("67 million", "67000000"),
        ("67,000,000", "67000000"),
        ("67000000", "67000000"),
        ("1.5k", "1500"),
        ("$3m", "3000000"),
        ("2.5 billion", "2500000000"),
        ("15%", "15"),
        ("15 percent", "15"),
        ("twelve", "12"),
        ("3.50", "3.5"),
        ("1994", "1994"),
    ],
)
def test_numbers_are_canonical(text: str, expected: str) -> None:
    value = parse_number(text)
    assert value is not None
    assert normalise_text(text) == expected


def test_67_million_equals_67_000_000() -> None:
    assert parse_number("67 million") == parse_number("67,000,000") == parse_number("67000000")
    assert parse_number("67 million") != parse_number("76 million")


def test_not_a_single_number() -> None:
    assert parse_number("no digits here") is None
    assert parse_number("1 and 2") is None


def test_token_kinds_names_words_stopwords() -> None:
    tokens = tokens_of("The Eiffel Tower was built in 1889 by the engineers.")
    kinds = {t.surface: t.kind for t in tokens}
    assert kinds == {
        "Eiffel": "name",
        "Tower": "name",
        "built": "word",
        "1889": "number",
        "engineers": "word",
    }
    assert "the" not in {t.norm for t in tokens}


def test_stemming_and_accents() -> None:
    assert stem("cities") == stem("city")
    assert stem("played") == stem("play")
    assert stem("titles") == stem("title")
    assert normalise_text("Müller") == normalise_text("Muller")


def test_split_statements_on_clauses() -> None:
    hypothesis = "Paris is the capital of France, which has a population of 67 million"
    assert split_statements(hypothesis) == [
        "Paris is the capital of France",
        "which has a population of 67 million",
    ]
    assert split_statements("The storm hit the coast; the match was cancelled") == [
        "The storm hit the coast",
        "the match was cancelled",
    ]
    # a clause with too little content stays with the one before it
    assert split_statements("He won the title, and more") == ["He won the title, and more"]
    assert split_statements("") == []


def test_seed_002_example_partial_support() -> None:
    """Grounded units (docs/method.md): the documents confirm the capital but lack the population: one
    of two claims holds."""
    premise = "Paris is the capital and most populous city of France."
    hypothesis = "Paris is the capital of France, which has a population of 67 million"
    out = judge_hypothesis(hypothesis, PremiseIndex(premise), LexicalConfig())
    capital, population = out.statements
    assert capital.verdict == "entailed" and capital.score == 1.0
    assert population.verdict == "not_stated" and population.tag == "number"
    assert population.score < 0.25
    assert "67 million" in population.reason
    assert out.score == pytest.approx((capital.score + population.score) / 2)


def test_number_written_differently_is_supported() -> None:
    index = PremiseIndex("France has a population of 67,000,000 people.")
    verdict = judge_statement("The population of France is 67 million", index, LexicalConfig())
    assert verdict.verdict == "entailed" and verdict.score == 1.0 and verdict.tag == "number"


def test_wrong_number_is_contradicted() -> None:
    text = "Poseidon grossed $181,674,817 on a budget of $160 million."
    index = PremiseIndex(text, ALL_ON)
    ok = judge_statement("Poseidon grossed $181.7 million", index, ALL_ON)  # with rounding: fine
    bad = judge_statement("Poseidon had a budget of $150 million", index, ALL_ON)
    assert ok.verdict == "entailed"
    assert bad.verdict == "contradicted" and bad.score < 0.25 and "150 million" in bad.reason
    # by default a rounded number is no match (the rule did not help out of fold)
    default = judge_statement("Poseidon grossed $181.7 million", PremiseIndex(text), LexicalOptions())
    assert default.verdict == "contradicted"


def test_missing_name_caps_the_score() -> None:
    index = PremiseIndex("Jonathan Stark won two Grand Slam doubles titles.")
    verdict = judge_statement("Henri Leconte won two Grand Slam doubles titles", index, LexicalConfig())
    assert verdict.verdict == "not_stated" and verdict.tag == "entity"  # "two" is a word by default
    assert verdict.score <= LexicalConfig().name_cap
    assert "Henri (name)" in verdict.reason


def test_partial_credit_is_monotone() -> None:
    index = PremiseIndex("The committee approved the new budget for schools.")
    full = judge_statement("The committee approved the budget", index, LexicalConfig())
    half = judge_statement("The committee rejected the proposal", index, LexicalConfig())
    none = judge_statement("Bananas grow quickly", index, LexicalConfig())
    assert full.score == 1.0 > half.score > none.score == 0.0


async def test_entail_short_answer_and_gold_alternatives() -> None:
    judge = LexicalJudge(ALL_ON)  # hypothesis alternatives are off by default
    assert isinstance(judge, Judge)
    context = Premise("Jonathan Stark (born 1971) won two Grand Slam doubles titles.")
    out = await judge.entail(context, ["Jonathan Stark", "Henri Leconte won more titles."])
    right, wrong = out.value.hypotheses
    assert right.score == 1.0 and right.statements[0].verdict == "entailed"
    assert wrong.score < 0.5
    gold = Premise(
        "what is the definition of the word hosanna\nsavior | save, rescue, savior | save | rescue"
    )
    out = await judge.entail(gold, ["It means to save or rescue.", "special honor"])
    contains, other = out.value.hypotheses
    assert contains.score == 1.0 and "gold answer" in contains.statements[0].reason
    assert other.score == 0.0
    # a hypothesis written as alternatives takes its best one
    out = await judge.entail(Premise("what is hosanna\nit is a cry to save us"), ["savior | save | rescue"])
    assert out.value.hypotheses[0].score == 1.0
    # by default a hypothesis is not split at "|" (the pipeline splits ground-truth alternatives first)
    hosanna = Premise("what is hosanna\nit is a cry to save us")
    default = await LexicalJudge().entail(hosanna, ["savior | save | rescue"])
    assert default.value.hypotheses[0].score < 0.5
    contains_default = await LexicalJudge().entail(gold, ["It means to save or rescue."])
    assert "gold answer" in contains_default.value.hypotheses[0].statements[0].reason  # on by default


async def test_calls_are_recorded_without_tokens() -> None:
    judge = LexicalJudge()
    out = await judge.entail(Premise("a b c"), ["x", "y"], ask_refusal=True)
    assert out.value.refusal is False
    (call,) = out.calls
    assert (call.judge, call.model, call.stage, call.items) == ("lexical", "lexical-v1", "nli", 2)
    assert call.input_tokens == call.output_tokens == 0 and call.cost_usd == 0.0 and call.latency_ms >= 0.0
    pron = await judge.replace_pronouns(["He went home.", "She stayed."])
    assert pron.value == ["He went home.", "She stayed."] and pron.calls[0].stage == "pronouns"


@pytest.mark.parametrize(
    "text",
    [
        "I don't know.",
        "I cannot answer that question based on the context.",
        "The price is not mentioned in the given context.",
        "The given context does not provide information about the warranty.",
        "I'm sorry, but the passage does not mention jacking.",
        "There is no information about gelling in the manual.",
        "I couldn't find any details on that.",
        "Could you please rephrase your question?",
        "Unfortunately, the provided text does not include the torque value.",
        "Without further context, it is unclear which light you mean.",
    ],
)
def test_refusal_phrases(text: str) -> None:
    assert is_refusal(text), text


@pytest.mark.parametrize(
    "text",
    [
        "Apply the parking brake fully to guard against vehicle movement.",
        "The tire pressure should be 35 psi when cold.",
        "Press the button twice; the light will turn off.",
        "No, the seats cannot be heated in this trim.",
        "Paris is the capital of France.",
    ],
)
def test_not_refusals(text: str) -> None:
    assert refusal_match(text) is None, refusal_match(text)


async def test_classify_refusals_one_flag_each() -> None:
    out = await LexicalJudge().classify_refusals(["I don't know.", "It is 5 km away.", ""])
    assert out.value == [True, False, False]
    assert out.calls[0].stage == "refusal" and out.calls[0].items == 3


def test_rounded_numbers_match_but_near_years_do_not() -> None:
    from decimal import Decimal

    from pipeline.judges.lexical import is_rounding_of

    assert is_rounding_of(Decimal("181700000"), Decimal("181674817"))
    assert is_rounding_of(Decimal("182000000"), Decimal("181674817"))
    assert not is_rounding_of(Decimal("1997"), Decimal("1995"))
    assert not is_rounding_of(Decimal("2018"), Decimal("2017"))
    assert not is_rounding_of(Decimal("200000000"), Decimal("181674817"))  # one significant digit: too loose
    index = PremiseIndex("The hall of fame opened in 1995.")
    verdict = judge_statement("The hall of fame opened in 1997", index, LexicalConfig())
    assert verdict.verdict == "contradicted"


def test_a_year_is_never_a_rounding() -> None:
    from decimal import Decimal

    from pipeline.judges.lexical import is_rounding_of, is_year

    assert is_year(Decimal("1900")) and is_year(Decimal("2020")) and not is_year(Decimal("1900.5"))
    assert not is_rounding_of(Decimal("1900"), Decimal("1908"))  # without the year rule: 19 x 10^2
    assert not is_rounding_of(Decimal("2020"), Decimal("2016"))
    assert is_rounding_of(Decimal("1900"), Decimal("1900"))
    assert is_rounding_of(Decimal("2200"), Decimal("2180"))  # not a year: a rounding
    index = PremiseIndex("Birth certificates were first issued on July 1, 1908.")
    assert judge_statement("first issued in 1900", index, LexicalConfig()).verdict == "contradicted"


async def test_question_words_are_not_evidence() -> None:
    judge = LexicalJudge()
    question = "what is the main mineral in lithium batteries"
    wrong = Premise(f"{question}\nwater", question=question)
    right = Premise(f"{question}\nIt is lithium.", question=question)
    plain = Premise(f"{question}\nwater")  # the same text without the question marked
    out = {
        name: (await judge.entail(p, ["Lithium"])).value.hypotheses[0].score
        for name, p in (("wrong", wrong), ("right", right), ("plain", plain))
    }
    assert out == {"wrong": 0.0, "right": 1.0, "plain": 1.0}
    # question words in a longer hypothesis are left out; the rest must be in the answer
    q2 = "who began the age of exploration in portugal"
    short = Premise(f"{q2}\nAfonso IV", question=q2)
    assert (await judge.entail(short, ["Afonso IV of Portugal"])).value.hypotheses[0].score == 1.0
    other = Premise(f"{q2}\nKing John II", question=q2)
    assert (await judge.entail(other, ["Afonso IV of Portugal"])).value.hypotheses[0].score == 0.0


async def test_reference_comparison_is_lenient_recall() -> None:
    judge = LexicalJudge()
    q = "who was in charge of the revolutionary war"
    framed = Premise(f"{q}\nGeorge Washington led the army.", question=q)
    context = Premise("George Washington led the army.")
    hypothesis = ["General George Washington"]
    lenient = (await judge.entail(framed, hypothesis)).value.hypotheses[0].score
    strict = (await judge.entail(context, hypothesis)).value.hypotheses[0].score
    assert lenient == pytest.approx(4 / 6)  # two of three names found, no cap, no sharpening
    assert strict < 0.5  # a context pair: a missing name caps the score


async def _ref_score(question: str, answer: str, hypothesis: str) -> float:
    premise = Premise(f"{question}\n{answer}", question=question)
    return (await LexicalJudge().entail(premise, [hypothesis])).value.hypotheses[0].score


async def test_another_entity_beside_a_shared_name_caps_the_score() -> None:
    q = "who has the most rushing yards in a super bowl"
    assert await _ref_score(q, "Emmitt Smith", "Timmy Smith") < 0.5  # Emmitt stands where Timmy would
    assert await _ref_score(q, "Smith", "Timmy Smith") == pytest.approx(0.5)  # less specific, no rival
    q2 = "when did the sims 4 toddlers come out"
    assert await _ref_score(q2, "May 30, 2017", "January 2017") < 0.5  # 30 beside the shared 2017
    index = PremiseIndex(f"{q}\nEmmitt Smith", question=q)
    other = index.competitor(tokens_of("Timmy Smith"))
    assert other is not None and other.surface == "Emmitt"
    assert index.competitor(tokens_of("Emmitt Smith")) is None


async def test_a_date_at_a_coarser_granularity_is_entailed() -> None:
    q = "when were cigarette ads banned from tv uk"
    assert await _ref_score(q, "1965", "1 August 1965") == 1.0
    assert await _ref_score(q, "in August 1965", "1 August 1965") == 1.0
    assert await _ref_score(q, "1966", "1 August 1965") < 0.5  # another year
    assert await _ref_score(q, "September 1965", "1 August 1965") < 0.5  # another month
    # only in reference comparisons: a context premise still needs the day and month
    context = Premise("Ads were banned in 1965.")
    out = await LexicalJudge().entail(context, ["Ads were banned on 1 August 1965"])
    assert out.value.hypotheses[0].score < 0.5


async def test_initials_and_acronyms_match_names() -> None:
    q = "who is known as the father of indian constitution"
    assert await _ref_score(q, "B. R. Ambedkar", "Bhimrao Ramji Ambedkar") == 1.0
    assert await _ref_score(q, "Ambedkar", "Bhimrao Ramji Ambedkar") < 1.0
    q2 = "where can i get a state issued id"
    assert await _ref_score(q2, "from the Department of Motor Vehicles", "DMV") == 1.0
    assert await _ref_score(q2, "from the post office", "DMV") == 0.0
    from pipeline.judges.lexical import acronyms_of

    text = "The Department of Motor Vehicles and The Federal Bureau of Investigation"
    assert {"DMV", "FBI"} <= acronyms_of(text)


async def test_an_initial_the_question_asks_about_is_not_evidence() -> None:
    q = "what does g stand for in ncis los angeles"
    premise = Premise(f"{q}\nG. Callen", question=q)
    with_rule = await LexicalJudge(ALL_ON).entail(premise, ["Grisha"])
    assert with_rule.value.hypotheses[0].score == 0.0
    assert await _ref_score(q, "G. Callen", "Grisha") == 1.0  # off by default: a one-set quirk
    assert await _ref_score("who wrote it", "G. Callen", "Grisha Callen") == 1.0


async def test_a_year_within_the_century_or_decade_given() -> None:
    q = "when was the letter j introduced to the alphabet"
    assert await _ref_score(q, "the 16th century", "1524") == 1.0
    assert await _ref_score(q, "in the 1520s", "1524") == 1.0
    assert await _ref_score(q, "the 17th century", "1524") == 0.0
    assert await _ref_score(q, "the 16th century BC", "1524") == 0.0
    context = await LexicalJudge().entail(Premise("It came in the 16th century."), ["It came in 1524."])
    assert context.value.hypotheses[0].score < 0.5  # a context premise must give the year itself


async def test_framing_words_are_not_claims() -> None:
    judge = LexicalJudge()
    context = Premise("Poseidon grossed $181,674,817 worldwide on a budget of $160 million.")
    framed = "The passage describes that Poseidon grossed $181,674,817 on a budget of $160 million."
    plain = "Poseidon grossed $181,674,817 on a budget of $160 million."
    out = await judge.entail(context, [framed, plain, "The passage describes a sequel."])
    framed_r, plain_r, other_r = out.value.hypotheses
    assert framed_r.score == plain_r.score == 1.0
    assert other_r.score < 0.5  # the framing words are dropped, the claim still has to be there
    # a premise that itself has the word checks it like any other
    about = Premise("The summary was written by the board.")
    out = await judge.entail(about, ["The summary was written by the board."])
    assert out.value.hypotheses[0].score == 1.0


def test_an_answer_of_only_punctuation_is_not_grounded() -> None:
    from pipeline.judges.lexical import LexicalOptions, PremiseIndex, judge_statement

    options = LexicalOptions()
    index = PremiseIndex("The battery lasts eight years.", options)
    verdict = judge_statement("?!... --", index, options)
    assert (verdict.verdict, verdict.score) == ("not_stated", 0.0)
