"""NLI cases of concurrent interactions in one prompt: LLMJudge.entail_cases and NliGrouper, over real
HTTP against the fake server (verdicts, call shares, window limits, fallback, settings per judge kind)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import SecretStr

from pipeline.judges.base import Premise
from pipeline.judges.lexical import LexicalJudge
from pipeline.judges.llm_judge import LLMJudge
from pipeline.nli_grouping import NliGrouper, nli_judge
from prompts import NliCase, Prompts
from schemas.settings import PipelineSettings, Settings
from tests.fakes.openai_server import FakeOpenAIServer

EIFFEL = Premise("The Eiffel Tower, completed in 1889, is 330 metres tall. It stands in Paris.")
CURIE = Premise("Marie Curie won the Nobel Prize in Physics in 1903.", document="Curie biography")


def settings_for(fake: FakeOpenAIServer, **pipeline: object) -> Settings:
    return Settings.model_validate(
        {
            "judge": {
                "kind": "openai",
                "base_url": fake.base_url,
                "model": "gpt-4o-mini",
                "api_key": SecretStr("sk-x"),
                "backoff_base_s": 0.001,
                "backoff_max_s": 0.01,
                "max_retries": 1,
            },
            "pipeline": pipeline,
        }
    )


def test_cases_prompt_fences_each_case() -> None:
    prompt = Prompts().nli_cases(
        [
            NliCase(premise="P one </case> </premise>", hypotheses=["h1", "h2"], document="doc"),
            NliCase(premise="P two", hypotheses=["h3"]),
        ]
    )
    user = prompt.messages[1]["content"]
    assert user.count('<case id="') == 2 and user.count("</case>") == 2  # the premise's tags are inert
    assert "‹/case>" in user and "‹/premise>" in user
    assert "<document>doc</document>" in user
    assert prompt.json_schema()["properties"]["cases"]["maxItems"] == 2


async def test_entail_cases_one_request_and_shares(fake_openai: FakeOpenAIServer) -> None:
    judge = LLMJudge(settings_for(fake_openai).judge)
    try:
        outs = await judge.entail_cases(
            [
                (EIFFEL, ["The Eiffel Tower was completed in 1889.", "The tower is in Berlin near the zoo."]),
                (CURIE, ["Marie Curie won the Nobel Prize in Physics."]),
            ]
        )
    finally:
        await judge.aclose()
    assert fake_openai.stats.requests == 1
    assert fake_openai.stats.by_prompt == {"nli_cases": 1}
    assert [[h.score for h in o.value.hypotheses] for o in outs] == [[1.0, 0.0], [1.0]]
    assert outs[1].value.hypotheses[0].hypothesis == "Marie Curie won the Nobel Prize in Physics."
    # the call's tokens are split 2:1 by hypotheses, adding up to the server's count; one request
    calls = [c for o in outs for c in o.calls]
    assert sum(c.input_tokens for c in calls) == fake_openai.stats.prompt_tokens
    assert sum(c.output_tokens for c in calls) == fake_openai.stats.completion_tokens
    assert [c.items for c in calls] == [2, 1]
    assert sum(c.attempts for c in calls) == 1
    assert calls[0].input_tokens > calls[1].input_tokens


async def test_entail_cases_uses_the_cache_per_hypothesis(fake_openai: FakeOpenAIServer) -> None:
    judge = LLMJudge(settings_for(fake_openai).judge)
    try:
        await judge.entail(EIFFEL, ["The Eiffel Tower was completed in 1889."])
        fake_openai.reset_stats()
        outs = await judge.entail_cases(
            [(EIFFEL, ["The Eiffel Tower was completed in 1889."]), (CURIE, ["Curie won a Nobel Prize."])]
        )
        # one case left to ask: the one-premise prompt, exactly as entail
        assert fake_openai.stats.by_prompt == {"nli": 1}
        assert outs[0].calls[0].cached and outs[0].value.hypotheses[0].score == 1.0
        fake_openai.reset_stats()
        again = await judge.entail_cases([(EIFFEL, ["The Eiffel Tower was completed in 1889."])])
    finally:
        await judge.aclose()
    assert fake_openai.stats.requests == 0
    assert again[0].calls[0].cached


async def test_grouper_groups_concurrent_cases(fake_openai: FakeOpenAIServer) -> None:
    settings = settings_for(fake_openai, nli_group_cases=3, nli_group_linger_ms=50)
    judge = LLMJudge(settings.judge)
    grouper = nli_judge(judge, settings)
    assert isinstance(grouper, NliGrouper)
    try:
        outs = await asyncio.gather(
            *(grouper.entail(EIFFEL, [f"The Eiffel Tower is {n} metres tall."]) for n in (330, 300, 310, 320))
        )
        await grouper.aclose()
    finally:
        await judge.aclose()
    # 3 cases fill a group; the fourth is sent alone after the linger, with the one-premise prompt
    assert fake_openai.stats.by_prompt == {"nli_cases": 1, "nli": 1}
    assert [o.value.hypotheses[0].hypothesis for o in outs] == [
        f"The Eiffel Tower is {n} metres tall." for n in (330, 300, 310, 320)
    ]
    assert sum(c.input_tokens for o in outs for c in o.calls) == fake_openai.stats.prompt_tokens


async def test_grouper_keeps_groups_inside_the_window(fake_openai: FakeOpenAIServer) -> None:
    settings = settings_for(fake_openai, nli_group_cases=8, nli_group_linger_ms=20)
    settings = settings.with_changes(judge={"context_windows": {"gpt-4o-mini": 2000}})
    judge = LLMJudge(settings.judge)
    grouper = NliGrouper(judge, settings, 8)
    long_premise = Premise("The Eiffel Tower is in Paris. " * 100)  # ~3000 characters, ~860 tokens
    tokens, _ = grouper.case_tokens(long_premise, ["It is in Paris."])
    assert tokens * 2 > grouper.max_group_tokens >= tokens
    try:
        await asyncio.gather(*(grouper.entail(long_premise, [f"It is in Paris {i}."]) for i in range(3)))
    finally:
        await judge.aclose()
    assert fake_openai.stats.by_prompt == {"nli": 3}  # no two of them fit one prompt


async def test_grouper_output_room_limits_a_group(fake_openai: FakeOpenAIServer) -> None:
    settings = settings_for(fake_openai, nli_group_cases=8, nli_output_tokens_per_hypothesis=150)
    settings = settings.with_changes(judge={"max_output_tokens": 300})
    judge = LLMJudge(settings.judge)
    grouper = NliGrouper(judge, settings, 8)
    try:
        await asyncio.gather(*(grouper.entail(CURIE, [f"Curie won in {y}."]) for y in (1901, 1902, 1903)))
    finally:
        await judge.aclose()
    assert fake_openai.stats.by_prompt == {"nli_cases": 1, "nli": 1}  # 2 x 150 fit 300, a third does not


async def test_failed_group_is_sent_again_case_by_case(fake_openai: FakeOpenAIServer) -> None:
    original = fake_openai._scripted

    def drop_a_case(user: str) -> tuple[str, dict, list[float]]:
        kind, answer, probabilities = original(user)
        if kind == "nli_cases":
            answer["cases"] = answer["cases"][:-1]
        return kind, answer, probabilities

    fake_openai._scripted = drop_a_case  # type: ignore[method-assign]
    settings = settings_for(fake_openai, nli_group_cases=2)
    judge = LLMJudge(settings.judge)
    grouper = NliGrouper(judge, settings, 2)
    try:
        outs = await asyncio.gather(
            grouper.entail(EIFFEL, ["The Eiffel Tower was completed in 1889."]),
            grouper.entail(CURIE, ["Marie Curie won the Nobel Prize in Physics."]),
        )
    finally:
        await judge.aclose()
    # the group is retried by the client (max_retries=1), then each case goes alone
    assert fake_openai.stats.by_prompt == {"nli_cases": 2, "nli": 2}
    assert [o.value.hypotheses[0].score for o in outs] == [1.0, 1.0]


async def test_refusal_question_is_never_grouped(fake_openai: FakeOpenAIServer) -> None:
    settings = settings_for(fake_openai, nli_group_cases=4)
    judge = LLMJudge(settings.judge)
    grouper = NliGrouper(judge, settings, 4)
    try:
        out = await grouper.entail(EIFFEL, ["I don't know."], ask_refusal=True)
    finally:
        await judge.aclose()
    assert fake_openai.stats.by_prompt == {"nli": 1}
    assert out.value.refusal is True


def test_group_size_per_judge_kind(fake_openai: FakeOpenAIServer) -> None:
    pipe = PipelineSettings()
    assert pipe.nli_group_cases_for("openai") == 4
    assert pipe.nli_group_cases_for("local") == 1
    assert PipelineSettings(nli_group_cases=2).nli_group_cases_for("local") == 2  # set: every kind
    settings = settings_for(fake_openai)
    judge = LLMJudge(settings.judge)
    assert isinstance(nli_judge(judge, settings), NliGrouper)
    per_hypothesis = settings.model_copy(update={"pipeline": PipelineSettings(nli_mode="per_hypothesis")})
    assert nli_judge(judge, per_hypothesis) is judge
    lexical = LexicalJudge()
    assert nli_judge(lexical, settings) is lexical  # no entail_cases: ungrouped
    with pytest.raises(TypeError, match="several NLI cases"):
        NliGrouper(lexical, settings, 4)
