"""NLI stage: pair construction, batched vs per-hypothesis calls, premise splitting, aggregation."""

from __future__ import annotations

import pytest

from pipeline.judges.base import Premise, PremisePassage
from pipeline.nli import combine_parts, max_premise_chars, question_asked, run_nli, split_premise
from schemas.errors import JudgeError
from schemas.interaction import Interaction, Passage
from schemas.results import Converted, HypothesisResult, StatementVerdict
from schemas.settings import Settings
from tests.settings_factory import make_settings
from tests.unit.scripted_judge import ScriptedJudge


def converted(
    answer: list[str],
    ground_truth: list[str] | None = None,
    contexts: list[dict[str, str]] | None = None,
    answer_text: str | None = None,
) -> Converted:
    gt_text = " ".join(ground_truth) if ground_truth is not None else None
    item = Interaction(
        interaction_id="n1",
        question="I have a router. What does the reset button do?",
        contexts=contexts
        if contexts is not None
        else [{"text": "The reset button restores factory settings."}],
        answer=answer_text if answer_text is not None else " ".join(answer),
        ground_truth=gt_text,
    )
    return Converted(
        interaction=item,
        question_sentences=["I have a router.", "What does the reset button do?"],
        answer_sentences=answer,
        ground_truth_sentences=ground_truth or [],
    )


def settings(**pipeline: object) -> Settings:
    return make_settings(pipeline=pipeline)


async def test_three_pairs_exact_premises_and_hypotheses() -> None:
    judge = ScriptedJudge()
    conv = converted(
        ["The reset button restores factory settings.", "The button is red."],
        ["The reset button restores the factory settings."],
        contexts=[
            {"text": "The reset button restores factory settings.", "document": "manual.pdf"},
            {"text": "Hold it for ten seconds.", "document": "faq.md"},
        ],
    )
    result = await run_nli(conv, judge, settings(exact_match=False))
    premises = {tuple(h): p for p, h, _ in judge.entail_calls}
    answer = ("The reset button restores factory settings.", "The button is red.")
    gt = ("The reset button restores the factory settings.",)
    assert len(judge.entail_calls) == 3
    context_premise = Premise(
        text="The reset button restores factory settings.\n\nHold it for ten seconds.",
        document="manual.pdf, faq.md",
        pair="context_answer",
        passages=(
            PremisePassage(0, "The reset button restores factory settings."),
            PremisePassage(1, "Hold it for ten seconds."),
        ),
    )
    gt_premise = Premise(
        text="What does the reset button do?\nThe reset button restores the factory settings.",
        question="What does the reset button do?",
        pair="ground_truth_answer",
    )
    answer_premise = Premise(
        text="What does the reset button do?\nThe reset button restores factory settings. The button is red.",
        question="What does the reset button do?",
        pair="answer_ground_truth",
    )
    calls = {(p, tuple(h)) for p, h, _ in judge.entail_calls}
    assert calls == {(context_premise, answer), (gt_premise, answer), (answer_premise, gt)}
    assert premises[gt] == answer_premise
    by_name = {p.pair: p for p in result.pairs}
    assert [p.pair for p in result.pairs] == ["context_answer", "ground_truth_answer", "answer_ground_truth"]
    assert by_name["context_answer"].score == pytest.approx(0.5)  # 1 and 0
    assert by_name["answer_ground_truth"].score == pytest.approx(1.0)
    assert len(result.calls) == 3
    assert result.answer_refusal is None and result.ground_truth_refusal is None


async def test_no_ground_truth_and_no_context_give_none() -> None:
    judge = ScriptedJudge()
    result = await run_nli(
        converted(["The reset button restores factory settings."], contexts=[]), judge, settings()
    )
    assert [p.score for p in result.pairs] == [None, None, None]
    assert judge.entail_calls == []


async def test_empty_answer_gives_none_for_answer_pairs() -> None:
    judge = ScriptedJudge()
    conv = converted([], ["The reset button restores factory settings."], answer_text="")
    result = await run_nli(conv, judge, settings())
    scores = {p.pair: p.score for p in result.pairs}
    assert scores["context_answer"] is None and scores["ground_truth_answer"] is None
    assert scores["answer_ground_truth"] == 0.0  # premise is only the question's end
    assert judge.entail_calls[0][0].text == "What does the reset button do?"


async def test_statement_and_hypothesis_means() -> None:
    judge = ScriptedJudge(partial={"it has lights": 0.5})
    conv = converted(
        ["The reset button restores factory settings and it has lights and it is blue.", "The reset button."]
    )
    result = await run_nli(conv, judge, settings())
    pair = result.pairs[0]
    first = pair.hypotheses[0]
    assert [s.score for s in first.statements] == [1.0, 0.5, 0.0]
    assert first.score == pytest.approx(0.5)
    assert pair.hypotheses[1].score == 1.0
    assert pair.score == pytest.approx(0.75)


def sentence(i: int) -> str:
    return f"The reset button number {i} restores factory settings."


async def test_batched_mode_chunks_hypotheses() -> None:
    judge = ScriptedJudge()
    conv = converted([sentence(i) for i in range(20)])
    result = await run_nli(conv, judge, settings(nli_batch_size=16))
    assert sorted(len(h) for _, h, _ in judge.entail_calls) == [4, 16]
    assert len(result.pairs[0].hypotheses) == 20
    assert [h.hypothesis for h in result.pairs[0].hypotheses] == [sentence(i) for i in range(20)]


async def test_per_hypothesis_mode_one_call_each() -> None:
    judge = ScriptedJudge()
    conv = converted([sentence(i) for i in range(5)], ["The reset button restores factory settings."])
    result = await run_nli(conv, judge, settings(nli_mode="per_hypothesis"))
    assert len(judge.entail_calls) == 5 + 5 + 1
    assert all(len(h) == 1 for _, h, _ in judge.entail_calls)
    assert len(result.calls) == 11
    batched = ScriptedJudge()
    batched_result = await run_nli(conv, batched, settings())
    assert len(batched.entail_calls) == 3
    assert [p.score for p in batched_result.pairs] == [p.score for p in result.pairs]


def test_max_premise_chars_from_the_window() -> None:
    s = make_settings()
    s = s.with_changes(judge={"context_window_tokens": 4096})
    hyps = ["x" * 100] * 4
    expected = int((4096 - s.pipeline.nli_prompt_overhead_tokens - 4 * 150) * 3.5) - 400
    assert max_premise_chars(s, hyps) == expected
    s = s.with_changes(judge={"context_window_tokens": 1000})
    assert max_premise_chars(s, hyps) == s.pipeline.min_premise_chars


def test_split_premise_packs_passages_then_sentences() -> None:
    s = make_settings()
    passages = [
        Passage(text="a" * 400 + ".", document="A"),
        Passage(text="b" * 400 + ".", document="B"),
        Passage(
            text=" ".join(f"Sentence number {i} is in the long passage here." for i in range(30)),
            document="C",
        ),
    ]
    parts = split_premise(passages, 1000, s)
    both = (PremisePassage(0, "a" * 400 + "."), PremisePassage(1, "b" * 400 + "."))
    assert parts[0] == Premise(text="a" * 400 + ".\n\n" + "b" * 400 + ".", document="A, B", passages=both)
    assert all(p.passages == (PremisePassage(2, p.text),) for p in parts[1:])  # pieces of passage 2
    assert all(len(p.text) <= 1000 for p in parts)
    assert all(p.document == "C" for p in parts[1:])
    assert " ".join(p.text for p in parts[1:]) == passages[2].text
    assert split_premise(passages[:2], 10_000, s) == [
        Premise(text=parts[0].text, document="A, B", passages=both)
    ]


async def test_long_premise_is_split_and_each_statement_takes_its_best_support() -> None:
    judge = ScriptedJudge()
    s = settings(min_premise_chars=200)
    s = s.with_changes(
        judge={"context_window_tokens": 700}
    )  # budget: (700-600-2*150)*3.5 < 200 -> 200 characters
    filler = " ".join(["Filler words fill this passage."] * 6)
    contexts = [
        {"text": "Alpha owns the red house. " + filler},
        {"text": "Beta owns the blue car. " + filler},
    ]
    conv = converted(
        ["Alpha owns the red house and Beta owns the blue car.", "Gamma owns a boat."], contexts=contexts
    )
    result = await run_nli(conv, judge, s)
    pair = result.pairs[0]
    assert pair.premise_parts >= 2
    assert all(len(p.text) <= 200 for p, _, _ in judge.entail_calls)
    first = pair.hypotheses[0]
    assert [st.verdict for st in first.statements] == ["entailed", "entailed"]
    assert first.score == 1.0  # no single part supports both statements
    assert pair.hypotheses[1].score == 0.0
    assert pair.score == pytest.approx(0.5)


async def test_every_part_of_a_split_premise_names_its_pair() -> None:
    judge = ScriptedJudge()
    s = settings(min_premise_chars=200, exact_match=False).with_changes(judge={"context_window_tokens": 700})
    truth = ["The reset button restores factory settings."] + ["Filler words fill this passage."] * 12
    conv = converted(["The reset button restores factory settings."], truth, contexts=[])
    await run_nli(conv, judge, s)
    parts = [p for p, h, _ in judge.entail_calls if h == conv.answer_sentences]
    assert len(parts) >= 2 and {p.pair for p in parts} == {"ground_truth_answer"}
    assert {p.pair for p, h, _ in judge.entail_calls if h != conv.answer_sentences} == {"answer_ground_truth"}


def hyp(*scores: float) -> HypothesisResult:
    verdicts = [
        StatementVerdict(statement=f"s{i}", verdict="entailed" if x == 1 else "not_stated", score=x)
        for i, x in enumerate(scores)
    ]
    return HypothesisResult(hypothesis="h", statements=verdicts, score=sum(scores) / len(scores))


def test_combine_parts_statement_wise_max_or_best_part() -> None:
    combined = combine_parts([hyp(1, 0, 0), hyp(0, 0, 1), hyp(0, 0.5, 0)])
    assert [st.score for st in combined.statements] == [1, 0.5, 1]
    assert combined.score == pytest.approx(2.5 / 3)
    # different statement counts: the part with the best hypothesis score
    best = combine_parts([hyp(1, 0, 0), hyp(1, 1), hyp(0)])
    assert best.score == 1.0 and len(best.statements) == 2
    assert combine_parts([hyp(0.5)]).score == 0.5


def test_combine_prefers_contradiction_over_not_stated_on_ties() -> None:
    a = HypothesisResult(
        hypothesis="h", statements=[StatementVerdict(statement="s", verdict="not_stated", score=0)], score=0
    )
    b = HypothesisResult(
        hypothesis="h", statements=[StatementVerdict(statement="s", verdict="contradicted", score=0)], score=0
    )
    assert combine_parts([a, b]).statements[0].verdict == "contradicted"


async def test_same_refusal_mode_asks_in_the_answer_and_ground_truth_calls() -> None:
    judge = ScriptedJudge()
    conv = converted(
        ["I don't know what the reset button does.", sentence(1)],
        ["The reset button restores factory settings."],
    )
    result = await run_nli(conv, judge, settings(refusal_mode="same", nli_batch_size=1))
    asked = [(p.text[:20], h) for p, h, ask in judge.entail_calls if ask]
    assert len(asked) == 2
    assert (conv.interaction.contexts[0].text[:20], ["I don't know what the reset button does."]) in asked
    assert any(h == ["The reset button restores factory settings."] for _, h in asked)
    assert result.answer_refusal is True
    assert result.ground_truth_refusal is False


async def test_separate_refusal_mode_never_asks() -> None:
    judge = ScriptedJudge()
    conv = converted(
        ["I don't know what the reset button does."], ["The reset button restores factory settings."]
    )
    result = await run_nli(conv, judge, settings())
    assert not any(ask for _, _, ask in judge.entail_calls)
    assert result.answer_refusal is None


async def test_wrong_verdict_count_is_a_judge_error() -> None:
    judge = ScriptedJudge(wrong_counts={"entail"})
    with pytest.raises(JudgeError, match="returned 1 verdicts for 2 hypotheses"):
        await run_nli(converted([sentence(1), sentence(2)]), judge, settings())


async def test_judge_error_propagates() -> None:
    judge = ScriptedJudge(fail={"entail"})
    with pytest.raises(JudgeError):
        await run_nli(converted([sentence(1)]), judge, settings())


def qa(answer: str, ground_truth: str, **extra: object) -> Converted:
    item = Interaction.model_validate(
        {"id": "q1", "question": "What is hosanna?", "answer": answer, "ground_truth": ground_truth, **extra}
    )
    return Converted(
        interaction=item,
        question_sentences=["What is hosanna?"],
        answer_sentences=[answer],
        ground_truth_sentences=[ground_truth],
    )


async def test_alternatives_are_one_hypothesis_scored_by_the_best() -> None:
    judge = ScriptedJudge()
    conv = qa("It is a cry to rescue us", "savior | rescue | praise")
    result = await run_nli(conv, judge, settings(exact_match=False))
    (call,) = [c for c in judge.entail_calls if c[0].text.endswith("rescue us")]
    assert call[1] == ["savior", "rescue", "praise"]  # each alternative, in one call
    pair = result.pairs[2]
    assert len(pair.hypotheses) == 1 and pair.hypotheses[0].hypothesis == "savior | rescue | praise"
    assert pair.score == 1.0  # "rescue" is entailed, the others are not: any one will do
    assert "alternative 'rescue'" in pair.hypotheses[0].statements[0].reason
    # switched off: the ground truth's sentence is one hypothesis, judged whole
    judge = ScriptedJudge()
    off = await run_nli(conv, judge, settings(exact_match=False, ground_truth_alternatives=False))
    assert off.pairs[2].score == 0.0
    assert off.pairs[2].hypotheses[0].hypothesis == "savior | rescue | praise"


async def test_alternatives_from_gold_answers_metadata() -> None:
    judge = ScriptedJudge()
    conv = qa("Peking", "Peking", gold_answers=["Peking", "Beijing"])
    result = await run_nli(conv, judge, settings(exact_match=False))
    assert [c[1] for c in judge.entail_calls if c[0].text.endswith("Peking")][-1] == ["Peking", "Beijing"]
    assert result.pairs[2].score == 1.0


async def test_exact_match_decides_without_a_judge_call() -> None:
    judge = ScriptedJudge(verdicts={"save": "not_stated", "savior": "not_stated"})
    conv = qa("Save", "savior | save")
    result = await run_nli(conv, judge, settings())
    scores = {p.pair: p for p in result.pairs}
    # pair 3: the answer contains "save"; pair 2: the answer equals an alternative
    assert scores["answer_ground_truth"].score == 1.0
    assert scores["answer_ground_truth"].hypotheses[0].statements[0].tag == "exact_match"
    assert scores["ground_truth_answer"].score == 1.0
    assert judge.entail_calls == []  # no context, both ground-truth pairs decided
    # a longer answer that only contains the alternative: pair 3 decided, pair 2 asks the judge
    judge = ScriptedJudge(verdicts={"It means save us now": "not_stated"})
    result = await run_nli(qa("It means save us now", "savior | save"), judge, settings())
    assert result.pairs[2].score == 1.0 and result.pairs[1].score == 0.0
    assert [c[1] for c in judge.entail_calls] == [["It means save us now"]]


async def test_exact_match_off_asks_the_judge() -> None:
    judge = ScriptedJudge(verdicts={"save": "not_stated", "savior": "not_stated", "Save": "not_stated"})
    result = await run_nli(qa("Save", "savior | save"), judge, settings(exact_match=False))
    assert result.pairs[2].score == 0.0 and result.pairs[1].score == 0.0
    assert len(judge.entail_calls) == 2


def test_premise_budget_follows_the_judge_model_window() -> None:
    small, large = make_settings(), make_settings()
    small = small.with_changes(judge={"kind": "local"})
    small = small.with_changes(judge={"local_ctx": 4096})
    large = large.with_changes(judge={"kind": "openai"})
    large = large.with_changes(judge={"model": "gpt-4o-mini"})
    context = "The museum opens at ten. " * 800  # ~20k characters
    assert max_premise_chars(small, ["It opens at ten."]) < len(context)
    assert max_premise_chars(large, ["It opens at ten."]) > len(context)  # one premise, not split


def short(answer: str) -> Converted:
    conv = converted([answer], contexts=[{"text": "Reno is a city in Nevada, near Lake Tahoe."}])
    return conv.model_copy(update={"question_sentences": ["I am going west.", "Which state is Reno in?"]})


async def test_a_short_answer_is_judged_against_the_context_as_the_claim_it_makes() -> None:
    judge = ScriptedJudge()
    result = await run_nli(short("Nevada."), judge, make_settings(judge={"kind": "local"}))
    ((premise, hypotheses, _),) = judge.entail_calls
    assert premise.text == "Reno is a city in Nevada, near Lake Tahoe."
    assert hypotheses == ["Which state is Reno in? Nevada."]
    assert result.pairs[0].hypotheses[0].hypothesis == "Which state is Reno in? Nevada."


async def test_the_framing_sentence_is_the_one_that_asks() -> None:
    judge = ScriptedJudge()
    conv = short("Nevada.").model_copy(
        update={"question_sentences": ["Which state is Reno in?", "Answer in one word."]}
    )
    await run_nli(conv, judge, make_settings(judge={"kind": "local"}))
    assert [h for _, h, _ in judge.entail_calls] == [["Which state is Reno in? Nevada."]]
    assert question_asked(["who sang i ran all the way home"]) == "who sang i ran all the way home"
    assert question_asked([]) == ""


async def test_the_refusal_question_reads_the_answer_as_written() -> None:
    judge = ScriptedJudge()
    settings = make_settings(judge={"kind": "local"}, pipeline={"refusal_mode": "same"})
    await run_nli(short("Nevada."), judge, settings)  # no ground truth: the context pair is unframed
    assert [(h, asked) for _, h, asked in judge.entail_calls] == [(["Nevada."], True)]
    judge = ScriptedJudge()
    with_truth = short("Nevada.")
    with_truth = with_truth.model_copy(
        update={
            "interaction": with_truth.interaction.model_copy(update={"ground_truth": "Nevada"}),
            "ground_truth_sentences": ["Nevada"],
        }
    )
    await run_nli(with_truth, judge, make_settings(judge={"kind": "local"},
                  pipeline={"refusal_mode": "same", "exact_match": False}))  # fmt: skip
    calls = {(p.pair, tuple(h), a) for p, h, a in judge.entail_calls}
    assert ("context_answer", ("Which state is Reno in? Nevada.",), False) in calls  # for the verdict
    assert ("ground_truth_answer", ("Nevada.",), True) in calls  # the bare answer: the refusal question


@pytest.mark.parametrize(
    ("kind", "pipeline", "answer"),
    [
        ("lexical", {}, "Nevada."),  # the lexical judge's default: off
        ("cascade", {}, "Nevada."),  # its first stage is the lexical judge
        ("local", {"short_answer_words": 0}, "Nevada."),  # set: for every judge
        ("local", {"short_answer_words": 2}, "It is in Nevada."),  # longer than the limit
        ("local", {}, "Reno is in Nevada. It is west."),  # two sentences are claims of their own
    ],
)
async def test_answers_left_as_they_are(kind: str, pipeline: dict[str, object], answer: str) -> None:
    judge = ScriptedJudge()
    conv = short(answer)
    conv = conv.model_copy(update={"answer_sentences": answer.replace(". ", ".|").split("|")})
    await run_nli(conv, judge, make_settings(judge={"kind": kind}, pipeline=pipeline))
    assert [h for _, h, _ in judge.entail_calls] == [conv.answer_sentences]


def test_short_answer_words_per_judge_kind() -> None:
    pipe = make_settings().pipeline
    assert pipe.short_answer_words_for("lexical") == 0 and pipe.short_answer_words_for("openai") == 6
    assert make_settings(pipeline={"short_answer_words": 3}).pipeline.short_answer_words_for("lexical") == 3
