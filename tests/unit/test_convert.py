"""Conversion stage: splitting of all three texts, pronoun batches, count mismatch, calls."""

from __future__ import annotations

import pytest

from pipeline.convert import batches, convert
from schemas.errors import JudgeError
from schemas.interaction import Interaction
from tests.settings_factory import make_settings
from tests.unit.scripted_judge import ScriptedJudge


def sentences(n: int, prefix: str = "It") -> str:
    return " ".join(f"{prefix} was sentence number {i} of the text." for i in range(n))


def interaction(answer: str, ground_truth: str | None = None) -> Interaction:
    return Interaction(
        interaction_id="i1",
        question="Tell me about the router. What does the reset button do?",
        contexts=[{"text": "The reset button restores factory settings."}],
        answer=answer,
        ground_truth=ground_truth,
    )


def test_batches() -> None:
    assert batches(["a", "b", "c"], 2) == [["a", "b"], ["c"]]
    assert batches([], 3) == []


async def test_split_and_pronouns_in_batches_of_the_setting() -> None:
    judge = ScriptedJudge(pronouns={"It": "The router"})
    settings = make_settings()
    settings = settings.with_changes(pipeline={"pronoun_batch_size": 16})
    converted = await convert(interaction(sentences(20), sentences(3)), judge, settings)
    assert converted.question_sentences == ["Tell me about the router.", "What does the reset button do?"]
    assert len(converted.answer_sentences) == 20
    assert converted.answer_sentences[0] == "The router was sentence number 0 of the text."
    assert converted.ground_truth_sentences[2] == "The router was sentence number 2 of the text."
    # 20 answer sentences -> 16 + 4; 3 ground-truth sentences -> 3; never mixed in one prompt
    assert sorted(len(c) for c in judge.pronoun_calls) == [3, 4, 16]
    assert len(converted.calls) == 3
    assert {c.stage for c in converted.calls} == {"pronouns"}
    assert converted.seconds >= 0.0


@pytest.mark.parametrize("delta", [1, -1])
async def test_count_mismatch_keeps_the_originals(delta: int) -> None:
    judge = ScriptedJudge(pronouns={"It": "The router"}, pronoun_count_delta=delta)
    converted = await convert(interaction(sentences(3)), judge, make_settings())
    assert converted.answer_sentences == [f"It was sentence number {i} of the text." for i in range(3)]
    assert len(converted.calls) == 1  # the call still cost tokens


async def test_empty_replacement_keeps_that_sentence() -> None:
    judge = ScriptedJudge(pronouns={r"It was sentence number 1 of the text\.": ""})
    converted = await convert(interaction(sentences(3)), judge, make_settings())
    assert converted.answer_sentences[1] == "It was sentence number 1 of the text."


async def test_pronoun_replacement_off_makes_no_call() -> None:
    judge = ScriptedJudge(pronouns={"It": "The router"})
    settings = make_settings()
    settings = settings.with_changes(pipeline={"pronoun_replacement": False})
    converted = await convert(interaction(sentences(2), sentences(2)), judge, settings)
    assert judge.pronoun_calls == []
    assert converted.answer_sentences[0].startswith("It was")
    assert converted.calls == []


async def test_no_ground_truth() -> None:
    judge = ScriptedJudge()
    converted = await convert(interaction(sentences(2)), judge, make_settings())
    assert converted.ground_truth_sentences == []
    assert [len(c) for c in judge.pronoun_calls] == [2]


async def test_judge_error_propagates() -> None:
    judge = ScriptedJudge(fail={"replace_pronouns"})
    with pytest.raises(JudgeError):
        await convert(interaction(sentences(2)), judge, make_settings())


async def test_a_lone_sentence_is_not_sent_for_pronouns() -> None:
    """A one-sentence text, or a last batch of one (17 = 16 + 1), has no earlier sentence to resolve from."""
    judge = ScriptedJudge(pronouns={"It": "The router"})
    converted = await convert(interaction(sentences(1), sentences(17)), judge, make_settings())
    assert sorted(len(c) for c in judge.pronoun_calls) == [16]
    assert converted.answer_sentences == ["It was sentence number 0 of the text."]
    assert converted.ground_truth_sentences[0] == "The router was sentence number 0 of the text."
    assert converted.ground_truth_sentences[16] == "It was sentence number 16 of the text."
    assert len(converted.calls) == 1


async def test_a_batch_without_a_pronoun_to_resolve_is_not_sent() -> None:
    """Only a pronoun or demonstrative after a batch's first sentence can refer back to it."""
    judge = ScriptedJudge(pronouns={"It": "The router"})
    plain = (
        "The router has a reset button. The button restores factory settings. Hold the button ten seconds."
    )
    first_only = "It has a reset button. The button restores factory settings."
    converted = await convert(interaction(plain, first_only), judge, make_settings())
    assert judge.pronoun_calls == [] and converted.calls == []
    assert converted.ground_truth_sentences[0] == "It has a reset button."
    # one later sentence with "its" is enough, matched as a word ("Itself" too, "Italy" not)
    later = "The router has a reset button. Its green light blinks twice a second."
    converted = await convert(
        interaction(later, "The router is from Italy. Italy makes routers."), judge, make_settings()
    )
    assert [len(c) for c in judge.pronoun_calls] == [2]
    settings = make_settings()
    settings = settings.with_changes(
        pipeline={"pronoun_prefilter": False}
    )  # other languages: every batch of 2+ sentences is sent
    await convert(interaction(plain), judge, settings)
    assert [len(c) for c in judge.pronoun_calls] == [2, 3]
