"""CascadeJudge routing: which hypotheses and texts go to the LLM side (a scripted test double)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from pipeline.judges.base import Judge, JudgeOutput, NliOutput, Premise
from pipeline.judges.cascade import CascadeJudge
from pipeline.judges.lexical import LexicalJudge
from prompts.models import PronounTurn
from schemas.errors import JudgeError
from schemas.results import HypothesisResult, JudgeCall, Stage, StatementVerdict
from schemas.settings import JudgeSettings


class ScriptedLLM:
    """Test double for the LLM side: records what it is asked, answers with a fixed verdict."""

    name = "scripted"
    model = "scripted-1"

    def __init__(self, score: float = 1.0, refusal: bool = True, drop_one: bool = False) -> None:
        self.score = score
        self.refusal = refusal
        self.drop_one = drop_one
        self.entail_asked: list[list[str]] = []
        self.refusal_asked: list[list[str]] = []
        self.pronouns_asked: list[list[str]] = []
        self.histories_asked: list[list[PronounTurn]] = []
        self.closed = False

    def _call(self, stage: Stage, items: int) -> JudgeCall:
        return JudgeCall(stage=stage, judge=self.name, model=self.model, input_tokens=10, items=items)

    async def replace_pronouns(
        self, sentences: Sequence[str], history: Sequence[PronounTurn] = ()
    ) -> JudgeOutput[list[str]]:
        self.pronouns_asked.append(list(sentences))
        self.histories_asked.append(list(history))
        return JudgeOutput(
            [s.replace("He", "Bob") for s in sentences], [self._call("pronouns", len(sentences))]
        )

    async def entail(
        self, premise: Premise, hypotheses: Sequence[str], *, ask_refusal: bool = False
    ) -> JudgeOutput[NliOutput]:
        self.entail_asked.append(list(hypotheses))
        verdict = "entailed" if self.score >= 0.5 else "not_stated"
        results = [
            HypothesisResult(
                hypothesis=h,
                statements=[StatementVerdict(statement=h, verdict=verdict, score=self.score, reason="llm")],
                score=self.score,
            )
            for h in hypotheses
        ]
        if self.drop_one:
            results = results[:-1]
        refusal = self.refusal if ask_refusal else None
        return JudgeOutput(NliOutput(results, refusal), [self._call("nli", len(hypotheses))])

    async def classify_refusals(self, texts: Sequence[str]) -> JudgeOutput[list[bool]]:
        self.refusal_asked.append(list(texts))
        return JudgeOutput([self.refusal for _ in texts], [self._call("refusal", len(texts))])

    async def aclose(self) -> None:
        self.closed = True


PREMISE = Premise("Jonathan Stark won two Grand Slam doubles titles in 1994 and 1995 with his partner.")
SURE_YES = "Jonathan Stark won two Grand Slam doubles titles."  # every token in the premise: 1.0
SURE_NO = "Henri Leconte won 7 titles in 2003."  # absent names and numbers: near 0
UNSURE = "Jonathan Stark won several doubles titles."  # partial support: inside the band
ALL_PAIRS = ["context_answer", "ground_truth_answer", "answer_ground_truth"]  # default: the last only


def both_pairs(**kw: object) -> JudgeSettings:
    """The LLM judges every pair (context included)."""
    return JudgeSettings.model_validate({"cascade_llm_pairs": ALL_PAIRS, **kw})


async def test_lexical_scores_of_the_fixtures() -> None:
    out = await LexicalJudge().entail(PREMISE, [SURE_YES, SURE_NO, UNSURE])
    yes, no, unsure = (h.score for h in out.value.hypotheses)
    assert yes == 1.0 and no < 0.2 and 0.2 <= unsure <= 0.8


async def test_only_unsure_hypotheses_reach_the_llm() -> None:
    llm = ScriptedLLM(score=1.0)
    judge = CascadeJudge(LexicalJudge(), llm, both_pairs())
    assert isinstance(judge, Judge)
    out = await judge.entail(PREMISE, [SURE_YES, UNSURE, SURE_NO, UNSURE + " Really."])
    assert llm.entail_asked == [[UNSURE, UNSURE + " Really."]]  # one batched call, in order
    yes, unsure, no, unsure2 = out.value.hypotheses
    assert yes.statements[0].reason != "llm" and yes.score == 1.0
    assert unsure.score == 1.0 and unsure.statements[0].reason == "llm"
    assert unsure2.statements[0].reason == "llm"
    assert no.score < 0.2 and no.statements[0].reason != "llm"
    assert [c.judge for c in out.calls] == ["lexical", "scripted"]


async def test_nothing_unsure_means_no_llm_call() -> None:
    llm = ScriptedLLM()
    judge = CascadeJudge(LexicalJudge(), llm, both_pairs())
    out = await judge.entail(PREMISE, [SURE_YES, SURE_NO])
    assert llm.entail_asked == [] and [c.judge for c in out.calls] == ["lexical"]
    out = await judge.entail(replace(PREMISE, pair="answer_ground_truth"), [SURE_YES])  # over 0.5
    assert llm.entail_asked == [] and [c.judge for c in out.calls] == ["lexical"]


async def test_band_edges_are_inclusive_and_configurable() -> None:
    llm = ScriptedLLM()
    everything = CascadeJudge(
        LexicalJudge(), llm, both_pairs(cascade_unsure_low=0.0, cascade_unsure_high=1.0)
    )
    await everything.entail(PREMISE, [SURE_YES, SURE_NO])
    assert llm.entail_asked == [[SURE_YES, SURE_NO]]
    judge = CascadeJudge(
        LexicalJudge(), ScriptedLLM(), both_pairs(cascade_unsure_low=0.3, cascade_unsure_high=0.3)
    )
    assert judge.unsure(0.3) and not judge.unsure(0.2999) and not judge.unsure(0.3001)
    # a band upside down fails when the settings load, before any judge is built
    with pytest.raises(ValueError, match=r"CASCADE_UNSURE_LOW \(0.9\) is above"):
        JudgeSettings(cascade_unsure_low=0.9, cascade_unsure_high=0.1)


async def test_ground_truth_pairs_have_a_band_of_their_own() -> None:
    llm = ScriptedLLM()
    settings = both_pairs(
        cascade_unsure_low=0.0, cascade_unsure_high=0.0,  # context pairs: only a score of exactly 0
        cascade_ground_truth_unsure_low=0.2, cascade_ground_truth_unsure_high=0.8,
    )  # fmt: skip
    judge = CascadeJudge(LexicalJudge(), llm, settings)
    await judge.entail(PREMISE, [UNSURE])  # a context premise (the default pair)
    assert llm.entail_asked == []
    await judge.entail(replace(PREMISE, pair="ground_truth_answer"), [UNSURE])
    assert llm.entail_asked == [[UNSURE]]
    with pytest.raises(ValueError, match=r"CASCADE_GROUND_TRUTH_UNSURE_LOW \(0.9\) is above"):
        JudgeSettings(cascade_ground_truth_unsure_low=0.9, cascade_ground_truth_unsure_high=0.1)


async def test_by_default_only_answer_ground_truth_reaches_the_llm() -> None:
    llm = ScriptedLLM()
    judge = CascadeJudge(LexicalJudge(), llm, JudgeSettings())
    await judge.entail(PREMISE, [UNSURE, SURE_NO])  # context: the lexical judge alone
    await judge.entail(replace(PREMISE, pair="ground_truth_answer"), [UNSURE, SURE_NO])  # not measured
    assert llm.entail_asked == []
    await judge.entail(replace(PREMISE, pair="answer_ground_truth"), [UNSURE, SURE_NO, SURE_YES])
    assert llm.entail_asked == [[SURE_NO]]  # band [0, 0.5]: the partial match scores over 0.5


async def test_a_short_llm_answer_is_an_error() -> None:
    judge = CascadeJudge(LexicalJudge(), ScriptedLLM(drop_one=True), both_pairs())
    with pytest.raises(JudgeError, match="1 hypotheses"):
        await judge.entail(PREMISE, [UNSURE])


async def test_refusals_phrase_first_then_llm_for_the_rest() -> None:
    llm = ScriptedLLM(refusal=True)
    judge = CascadeJudge(LexicalJudge(), llm, JudgeSettings())
    out = await judge.classify_refusals(["I don't know.", "It is 5 km away.", "Hmm, who can say"])
    assert llm.refusal_asked == [["It is 5 km away.", "Hmm, who can say"]]
    assert out.value == [True, True, True]
    no_llm = ScriptedLLM(refusal=True)
    judge = CascadeJudge(LexicalJudge(), no_llm, JudgeSettings(), llm_refusals=False)
    out = await judge.classify_refusals(["I don't know.", "It is 5 km away."])
    assert out.value == [True, False] and no_llm.refusal_asked == []


async def test_same_mode_refusal_asked_only_without_a_phrase() -> None:
    llm = ScriptedLLM(refusal=False)
    judge = CascadeJudge(LexicalJudge(), llm, JudgeSettings())
    out = await judge.entail(PREMISE, ["I don't know who won."], ask_refusal=True)
    assert out.value.refusal is True and llm.refusal_asked == []
    out = await judge.entail(PREMISE, [SURE_YES], ask_refusal=True)
    assert out.value.refusal is False and llm.refusal_asked == [[SURE_YES]]


async def test_pronouns_go_to_the_llm_and_close_closes_both() -> None:
    llm = ScriptedLLM()
    judge = CascadeJudge(LexicalJudge(), llm, JudgeSettings())
    out = await judge.replace_pronouns(["He won."])
    assert out.value == ["Bob won."] and llm.pronouns_asked == [["He won."]]
    turns = [PronounTurn(role="user", text="Who is Bob?")]
    await judge.replace_pronouns(["He won."], turns)  # a conversation's turns reach the LLM
    assert llm.histories_asked == [[], turns]
    await judge.aclose()
    assert llm.closed
