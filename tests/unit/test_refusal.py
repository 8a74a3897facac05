"""Refusal stage: texts, micro-batching across concurrent callers, call shares, error propagation."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from pipeline.call_shares import apportion, share_calls
from pipeline.judges.base import JudgeOutput
from pipeline.refusal import RefusalClassifier
from pipeline.refusal_phrases import may_refuse
from schemas.errors import JudgeError
from schemas.interaction import Interaction
from schemas.results import Converted, JudgeCall
from tests.settings_factory import make_settings
from tests.unit.scripted_judge import ScriptedJudge

#: these tests are about batching and accounting: every text goes to the judge (no refusal-cue prefilter)
EVERY_TEXT = {"refusal_prefilter": False}


def converted(
    i: int, answer: str, ground_truth: str | None = "The reset button restores factory settings."
) -> Converted:
    item = Interaction(
        interaction_id=f"r{i}", question="What does it do?", answer=answer, ground_truth=ground_truth
    )
    return Converted(
        interaction=item,
        question_sentences=["What does it do?"],
        answer_sentences=["replaced sentences are not used here"],
        ground_truth_sentences=[],
    )


def test_apportion_adds_up() -> None:
    assert apportion(100, [2, 2, 2, 2]) == [25, 25, 25, 25]
    assert apportion(10, [1, 1, 1]) == [4, 3, 3]
    assert sum(apportion(101, [3, 5])) == 101
    assert apportion(7, [0, 0]) == [0, 0]


def test_share_calls_keeps_totals_and_one_owner() -> None:
    call = JudgeCall(
        stage="refusal", judge="j", model="m", input_tokens=101, output_tokens=9, cost_usd=0.8, attempts=2
    )
    shares = share_calls([call], [2, 6])
    assert [s[0].items for s in shares] == [2, 6]
    assert sum(s[0].input_tokens for s in shares) == 101
    assert sum(s[0].output_tokens for s in shares) == 9
    assert sum(s[0].cost_usd for s in shares) == pytest.approx(0.8)
    assert [s[0].attempts for s in shares] == [2, 0]


async def test_texts_are_the_first_sentences_of_the_original_answer_and_ground_truth() -> None:
    judge = ScriptedJudge()
    settings = make_settings(pipeline=EVERY_TEXT)
    settings = settings.with_changes(pipeline={"refusal_sentences": 2})
    classifier = RefusalClassifier(judge, settings)
    conv = converted(
        0, "I don't know the answer to that. Please ask support instead. Third sentence is here."
    )
    assert classifier.texts(conv) == [
        "I don't know the answer to that. Please ask support instead.",
        "The reset button restores factory settings.",
    ]
    result = await classifier.classify(conv)
    assert result.answer_refusal is True
    assert result.ground_truth_refusal is False
    assert judge.refusal_calls == [classifier.texts(conv)]
    assert result.interaction_id == "r0"


async def test_no_ground_truth_gives_none() -> None:
    judge = ScriptedJudge()
    result = await RefusalClassifier(judge, make_settings(pipeline=EVERY_TEXT)).classify(
        converted(0, "The button resets it.", None)
    )
    assert result.answer_refusal is False
    assert result.ground_truth_refusal is None
    assert judge.refusal_calls == [["The button resets it."]]


async def test_blank_texts_are_not_judged() -> None:
    judge = ScriptedJudge()
    result = await RefusalClassifier(judge, make_settings(pipeline=EVERY_TEXT)).classify(
        converted(0, "   ", "It resets the device.")
    )
    assert result.answer_refusal is None
    assert result.ground_truth_refusal is False
    assert judge.refusal_calls == [["It resets the device."]]


async def test_blank_everything_costs_no_call() -> None:
    judge = ScriptedJudge()
    result = await RefusalClassifier(judge, make_settings(pipeline=EVERY_TEXT)).classify(
        converted(0, "", None)
    )
    assert result.answer_refusal is None and result.ground_truth_refusal is None
    assert judge.refusal_calls == [] and result.calls == []


def test_blank_ground_truth_is_no_ground_truth() -> None:
    item = Interaction(interaction_id="x", question="q?", answer="a", ground_truth="  \n ")
    assert item.ground_truth is None


async def test_five_concurrent_callers_share_two_prompts() -> None:
    judge = ScriptedJudge(tokens_per_call=(100, 10))
    settings = make_settings(pipeline=EVERY_TEXT)
    settings = settings.with_changes(pipeline={"refusal_batch_size": 8})
    classifier = RefusalClassifier(judge, settings)
    answers = [
        "I cannot help with that.",
        "The button resets it.",
        "No information is given.",
        "It is red.",
        "Yes.",
    ]
    results = await asyncio.gather(*(classifier.classify(converted(i, a)) for i, a in enumerate(answers)))
    assert sorted(len(c) for c in judge.refusal_calls) == [2, 8]
    assert [r.answer_refusal for r in results] == [True, False, True, False, False]
    assert all(r.ground_truth_refusal is False for r in results)
    assert all(len(r.calls) == 1 and r.calls[0].items == 2 for r in results)
    # tokens add up to the two calls' tokens; each call is counted once (attempts on one record)
    assert sum(c.input_tokens for r in results for c in r.calls) == 200
    assert sum(c.output_tokens for r in results for c in r.calls) == 20
    assert sum(1 for r in results for c in r.calls if c.attempts > 0) == 2
    assert results[4].calls[0].input_tokens == 100  # alone in the second prompt


async def test_a_caller_split_across_two_batches_gets_its_flags_in_order() -> None:
    judge = ScriptedJudge()
    settings = make_settings(pipeline=EVERY_TEXT)
    settings = settings.with_changes(pipeline={"refusal_batch_size": 3})
    classifier = RefusalClassifier(judge, settings)
    convs = [
        converted(0, "The button resets it.", "It is red."),
        converted(1, "It is blue.", "I don't know."),
        converted(2, "I can't say.", "It is green."),
    ]
    results = await asyncio.gather(*(classifier.classify(c) for c in convs))
    assert [len(c) for c in judge.refusal_calls] == [3, 3]
    assert [(r.answer_refusal, r.ground_truth_refusal) for r in results] == [
        (False, False),
        (False, True),
        (True, False),
    ]
    assert [c.items for c in results[1].calls] == [1, 1]


async def test_batch_error_reaches_every_caller() -> None:
    judge = ScriptedJudge(fail={"classify_refusals"})
    classifier = RefusalClassifier(judge, make_settings(pipeline=EVERY_TEXT))
    results = await asyncio.gather(
        *(classifier.classify(converted(i, "The button resets it.")) for i in range(3)),
        return_exceptions=True,
    )
    assert len(judge.refusal_calls) == 1
    assert all(isinstance(r, JudgeError) for r in results)


async def test_wrong_flag_count_is_a_judge_error() -> None:
    judge = ScriptedJudge(wrong_counts={"classify_refusals"})
    with pytest.raises(JudgeError, match="returned 1 refusal flags for 2 texts"):
        await RefusalClassifier(judge, make_settings(pipeline=EVERY_TEXT)).classify(
            converted(0, "The button resets it.")
        )


class BrokenJudge(ScriptedJudge):
    async def classify_refusals(self, texts: Sequence[str]) -> JudgeOutput[list[bool]]:
        raise RuntimeError("connection reset")


async def test_other_errors_are_wrapped_in_judge_error() -> None:
    with pytest.raises(JudgeError, match="connection reset") as info:
        await RefusalClassifier(BrokenJudge(), make_settings(pipeline=EVERY_TEXT)).classify(
            converted(0, "The button resets it.")
        )
    assert isinstance(info.value.__cause__, RuntimeError)


async def test_a_cancelled_caller_does_not_block_others() -> None:
    judge = ScriptedJudge()
    settings = make_settings(pipeline=EVERY_TEXT)
    settings = settings.with_changes(pipeline={"refusal_linger_ms": 50})
    classifier = RefusalClassifier(judge, settings)
    waiting = asyncio.ensure_future(classifier.classify(converted(0, "I cannot help.", None)))
    await asyncio.sleep(0)
    waiting.cancel()
    result = await classifier.classify(converted(1, "The button resets it.", None))
    assert result.answer_refusal is False
    assert judge.refusal_calls == [["The button resets it."]]
    await classifier.aclose()


async def test_aclose_with_cancel_does_not_wait_for_a_slow_judge() -> None:
    release = asyncio.Event()
    asked = asyncio.Event()

    class SlowJudge(ScriptedJudge):
        async def classify_refusals(self, texts: Sequence[str]) -> JudgeOutput[list[bool]]:
            asked.set()
            await release.wait()  # never set: a judge that does not answer
            return await super().classify_refusals(texts)

    classifier = RefusalClassifier(SlowJudge(), make_settings(pipeline=EVERY_TEXT))
    caller = asyncio.create_task(classifier.classify(converted(0, "The button resets it.")))
    await asyncio.wait_for(asked.wait(), timeout=5)  # the batch is sent and stuck in the judge
    await asyncio.wait_for(classifier.aclose(cancel=True), timeout=5)
    with pytest.raises(asyncio.CancelledError):
        await caller


async def test_texts_without_a_refusal_cue_cost_no_call() -> None:
    """A name, a number or a date is never a refusal: with the prefilter (the default) only texts with
    a word of negation, inability, lack or uncertainty reach the judge."""
    judge = ScriptedJudge()
    classifier = RefusalClassifier(judge, make_settings())
    plain = await classifier.classify(converted(0, "Nixon", "2.4 billion years ago"))
    assert (plain.answer_refusal, plain.ground_truth_refusal, plain.calls) == (False, False, [])
    assert judge.refusal_calls == []
    unknown = await classifier.classify(converted(1, "Unknown.", "Richard Nixon"))
    assert [t for call in judge.refusal_calls for t in call] == ["Unknown."]
    assert unknown.ground_truth_refusal is False and len(unknown.calls) == 1


def test_every_refusal_phrase_holds_a_cue() -> None:
    """The lexical judge's refusal phrases never fire on a text the prefilter would pass over."""
    for text in ("I don't know.", "The manual does not say.", "Sorry, I can’t help with that.",
                 "There is no information about that in the context.", "Unknown."):  # fmt: skip
        assert may_refuse(text), text
    for text in ("Nixon", "RMS Titanic.", "2.4 billion years ago", "42", "Paris is in France."):
        assert not may_refuse(text), text
