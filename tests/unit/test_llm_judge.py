"""LLMJudge over real HTTP against the fake server: pronouns, batched NLI, refusal, id checks."""

from __future__ import annotations

import pytest

from pipeline.clock import ManualClock
from pipeline.judges.base import Judge, Premise
from pipeline.judges.factory import open_judge
from pipeline.judges.llm_judge import LLMJudge, hypothesis_result
from prompts import StatementAnswer
from schemas.errors import JudgeError
from schemas.settings import JudgeSettings
from tests.fakes.openai_server import FakeOpenAIServer, Script, default_refusal, default_statements
from tests.fixtures.judges import judge_for
from tests.settings_factory import make_settings

PREMISE = Premise(
    "The Eiffel Tower, completed in 1889, is 330 metres tall. It stands in Paris.", document="Guide"
)


def st(verdict: str) -> StatementAnswer:
    return StatementAnswer(statement="s", reason="r", verdict=verdict, tag="claim")


def test_hypothesis_scores() -> None:
    r = hypothesis_result("h", [st("entailed"), st("contradicted"), st("not_stated"), st("entailed")])
    assert r.score == pytest.approx(0.5)
    assert [s.score for s in r.statements] == [1.0, 0.0, 0.0, 1.0]
    empty = hypothesis_result("The hypothesis.", [])
    assert empty.score == 0.0
    assert [(s.statement, s.verdict) for s in empty.statements] == [("The hypothesis.", "not_stated")]


async def test_entail_batched_one_request(fake_openai: FakeOpenAIServer) -> None:
    judge = judge_for(fake_openai)
    assert isinstance(judge, Judge)
    try:
        hyps = [
            "The Eiffel Tower was completed in 1889.",
            "The Eiffel Tower is in Berlin near the zoo.",
            "Tower metres Paris",
        ]
        out = await judge.entail(PREMISE, hyps)
    finally:
        await judge.aclose()
    assert fake_openai.stats.requests == 1
    assert [h.hypothesis for h in out.value.hypotheses] == hyps
    assert [h.score for h in out.value.hypotheses] == [1.0, 0.0, 1.0]
    assert out.value.refusal is None
    (call,) = out.calls
    assert call.stage == "nli" and call.items == 3 and call.judge == "openai" and call.model == "gpt-4o-mini"
    user = fake_openai.stats.bodies[0]["messages"][-1]["content"]
    assert "<document>Guide</document>" in user and user.count("<premise>") == 1


async def test_entail_same_mode_refusal(fake_openai: FakeOpenAIServer) -> None:
    judge = judge_for(fake_openai)
    try:
        out = await judge.entail(PREMISE, ["I don't know how tall the tower is."], ask_refusal=True)
        assert out.value.refusal is True
        again = await judge.entail(PREMISE, ["I don't know how tall the tower is."], ask_refusal=True)
        assert again.value.refusal is True and fake_openai.stats.requests == 1
        # the verdicts cached by the "same" prompt also serve the plain prompt
        plain = await judge.entail(PREMISE, ["I don't know how tall the tower is."])
        assert plain.value.refusal is None and fake_openai.stats.requests == 1
    finally:
        await judge.aclose()


async def test_statement_split_and_contradiction(fake_openai: FakeOpenAIServer) -> None:
    def statements(premise: str, hypothesis: str) -> list[dict[str, str]]:
        if "300" in hypothesis:
            return [
                {
                    "statement": "The tower is in Paris",
                    "reason": "said",
                    "verdict": "entailed",
                    "tag": "entity",
                },
                {
                    "statement": "The tower is 300 m",
                    "reason": "330",
                    "verdict": "contradicted",
                    "tag": "number",
                },
            ]
        if "nothing" in hypothesis:
            return []
        return default_statements(premise, hypothesis)

    fake_openai.config.script = Script(statements=statements)
    judge = judge_for(fake_openai)
    try:
        out = await judge.entail(PREMISE, ["The tower in Paris is 300 m tall.", "nothing here"])
    finally:
        await judge.aclose()
    first, second = out.value.hypotheses
    assert [s.verdict for s in first.statements] == ["entailed", "contradicted"]
    assert first.score == 0.5 and first.statements[1].tag == "number"
    assert second.score == 0.0 and second.statements[0].statement == "nothing here"


async def test_entail_wrong_ids_retried_then_error(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.config.script = Script(
        statements=lambda p, h: [] if "drop" in h else default_statements(p, h)
    )
    judge = judge_for(fake_openai)
    # an answer missing a hypothesis id cannot be matched to its hypothesis: retried, then JudgeError
    original = fake_openai._scripted

    def drop_last(user: str) -> tuple[str, dict, list[float]]:
        kind, answer, probabilities = original(user)
        if kind == "nli":
            answer["hypotheses"] = answer["hypotheses"][:-1]
        return kind, answer, probabilities

    fake_openai._scripted = drop_last  # type: ignore[method-assign]
    try:
        with pytest.raises(JudgeError, match=r"hypothesis ids 1\.\.2"):
            await judge.entail(PREMISE, ["a claim", "another claim"])
    finally:
        await judge.aclose()
    assert fake_openai.stats.requests == 3


async def test_pronouns_replaced(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.config.script = Script(pronouns=lambda ss: [s.replace("She ", "Marie Curie ") for s in ss])
    judge = judge_for(fake_openai)
    try:
        out = await judge.replace_pronouns(["Marie Curie was born in Warsaw.", "She won two Nobel prizes."])
    finally:
        await judge.aclose()
    assert out.value == ["Marie Curie was born in Warsaw.", "Marie Curie won two Nobel prizes."]
    assert out.calls[0].stage == "pronouns" and out.calls[0].items == 2


@pytest.mark.parametrize(
    "bad", [lambda ss: ss[:-1], lambda ss: [*ss, "extra sentence"], lambda ss: ["", *ss[1:]]]
)
async def test_pronoun_count_mismatch_keeps_originals(fake_openai: FakeOpenAIServer, bad: object) -> None:
    fake_openai.config.script = Script(pronouns=bad)  # type: ignore[arg-type]
    judge = judge_for(fake_openai)
    sentences = ["Marie Curie was born in Warsaw.", "She won two Nobel prizes.", "They were in physics."]
    try:
        out = await judge.replace_pronouns(sentences)
        assert out.value == sentences
        assert len(out.calls) == 1 and not out.calls[0].cached
        await judge.replace_pronouns(sentences)  # a mismatch is not cached
    finally:
        await judge.aclose()
    assert fake_openai.stats.requests == 2


async def test_empty_inputs_cost_nothing(fake_openai: FakeOpenAIServer) -> None:
    judge = judge_for(fake_openai)
    try:
        assert (await judge.replace_pronouns([])).value == []
        assert (await judge.entail(PREMISE, [])).value.hypotheses == []
        assert (await judge.classify_refusals([])).value == []
    finally:
        await judge.aclose()
    assert fake_openai.stats.requests == 0


async def test_classify_refusals_in_order(fake_openai: FakeOpenAIServer) -> None:
    judge = judge_for(fake_openai, refusal_phrases_first=False)
    texts = [
        "The tower is 330 m tall.",
        "I'm sorry, the context does not contain that.",
        "Paris.",
        "I cannot answer that question.",
    ]
    try:
        out = await judge.classify_refusals(texts)
    finally:
        await judge.aclose()
    assert out.value == [default_refusal(t) for t in texts] == [False, True, False, True]


async def test_refusal_phrases_decide_before_the_model(fake_openai: FakeOpenAIServer) -> None:
    # the model is scripted to see no refusal anywhere: only the phrases can flag one
    fake_openai.config.script = Script(refusal=lambda text: False)
    judge = judge_for(fake_openai)
    texts = [
        "The given context does not provide that. However, the manual suggests checking the fuse.",
        "Paris.",
        "I don't know.",
    ]
    try:
        out = await judge.classify_refusals(texts)
    finally:
        await judge.aclose()
    assert out.value == [True, False, True]
    assert fake_openai.stats.requests == 1
    sent = fake_openai.stats.bodies[0]["messages"][-1]["content"]
    assert "Paris." in sent and "does not provide" not in sent and "I don't know" not in sent
    assert [(c.stage, c.items, c.cached) for c in out.calls] == [("refusal", 1, False)]


async def test_refusal_phrases_decide_inside_the_nli_prompt_too(fake_openai: FakeOpenAIServer) -> None:
    # refusal_mode "same": the model (scripted to see no refusal) is asked in the NLI prompt
    fake_openai.config.script = Script(refusal=lambda text: False)
    hedged = "The given context does not provide that. However, check the fuse."
    for phrases_first, expected in ((True, True), (False, False)):
        judge = judge_for(fake_openai, refusal_phrases_first=phrases_first)
        try:
            out = await judge.entail(PREMISE, [hedged], ask_refusal=True)
        finally:
            await judge.aclose()
        assert out.value.refusal is expected


async def test_refusal_count_mismatch_retried(fake_openai: FakeOpenAIServer) -> None:
    original = fake_openai._scripted
    state = {"n": 0}

    def short_once(user: str) -> tuple[str, dict, list[float]]:
        kind, answer, probabilities = original(user)
        state["n"] += 1
        if kind == "refusal" and state["n"] == 1:
            answer["texts"] = answer["texts"][:1]
        return kind, answer, probabilities

    fake_openai._scripted = short_once  # type: ignore[method-assign]
    judge = judge_for(fake_openai, refusal_phrases_first=False)
    try:
        out = await judge.classify_refusals(["Paris.", "I don't know."])
    finally:
        await judge.aclose()
    assert out.value == [False, True]
    assert out.calls[0].attempts == 2 and fake_openai.stats.requests == 2


async def test_factory_openai(fake_openai: FakeOpenAIServer) -> None:
    settings = make_settings(judge={"kind": "openai", "base_url": fake_openai.base_url, "model": "m"})
    async with open_judge(settings) as judge:
        assert judge.name == "openai" and judge.model == "m"
        out = await judge.classify_refusals(["I don't know."])
        assert out.value == [True]


async def test_factory_gives_the_llm_judge_the_callers_clock(fake_openai: FakeOpenAIServer) -> None:
    """The worker's one clock reaches the judge client: its backoff waits are slept on it."""
    fake_openai.faults = [500]
    clock = ManualClock()
    settings = make_settings(
        judge={"kind": "openai", "base_url": fake_openai.base_url, "model": "m", "backoff_base_s": 0.2}
    )
    async with open_judge(settings, clock) as judge:
        out = await judge.entail(PREMISE, ["The Eiffel Tower is 330 metres tall."])
    assert out.calls[0].attempts == 2 and len(clock.slept) == 1 and 0.1 <= clock.slept[0] <= 0.2


async def test_factory_lexical_needs_no_server() -> None:
    async with open_judge(make_settings(judge={"kind": "lexical"})) as judge:
        assert judge.name == "lexical"
        out = await judge.entail(PREMISE, ["The Eiffel Tower is 330 metres tall."])
        assert len(out.value.hypotheses) == 1


async def test_factory_cascade_over_openai(fake_openai: FakeOpenAIServer) -> None:
    judge_settings = {
        "kind": "cascade",
        "cascade_llm": "openai",
        "base_url": fake_openai.base_url,
        "model": "m",
    }
    # by default refusals stay with the lexical phrases: the LLM is not asked
    async with open_judge(make_settings(judge=judge_settings)) as judge:
        out = await judge.classify_refusals(["The tower opens at nine in the morning."])
        assert out.value == [False]
    assert fake_openai.stats.by_prompt.get("refusal") is None
    settings = make_settings(judge={**judge_settings, "cascade_llm_refusals": True})
    async with open_judge(settings) as judge:
        assert judge.name == "cascade" and judge.model.endswith("+m")
        # the lexical judge finds no refusal phrase in a plain answer: the LLM (over HTTP) decides
        out = await judge.classify_refusals(["The tower opens at nine in the morning."])
        assert out.value == [False]
    assert fake_openai.stats.by_prompt.get("refusal") == 1


def test_a_one_passage_verdict_asked_for_its_supporting_passages_is_cached_apart() -> None:
    """A verdict judged without the support question (an answer that does not cite) has no
    supported_by: a citing answer's statement against the same one passage must not reuse it."""
    from pipeline.judges.base import Premise, PremisePassage

    judge = LLMJudge(JudgeSettings.model_validate({"base_url": "http://127.0.0.1:9", "model": "m"}))
    one = (PremisePassage(index=0, text="The tower is from 1889."),)
    plain = Premise(text="The tower is from 1889.", passages=one)
    asked = Premise(text="The tower is from 1889.", passages=one, ask_support=True)
    assert judge._nli_key(plain, "It is from 1889.") != judge._nli_key(asked, "It is from 1889.")
    assert judge._nli_key(plain, "It is from 1889.") == judge._nli_key(plain, "It is from 1889.")
