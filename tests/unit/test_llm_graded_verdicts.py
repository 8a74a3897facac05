"""Graded NLI verdicts over real HTTP: the fake server returns token log-probabilities and LLMJudge
scores each statement by P(entailed) (setting judge.verdict_logprobs)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from pipeline.judges.base import Premise
from pipeline.judges.llm_judge import LLMJudge
from schemas.settings import JudgeSettings
from tests.fakes.openai_server import FakeOpenAIServer, supported_share

PREMISE = Premise("The Eiffel Tower, completed in 1889, is 330 metres tall. It stands in Paris.")
HYPOTHESES = [
    "The Eiffel Tower was completed in 1889.",  # 4 of 4 content words in the premise
    "The Eiffel Tower stands in Berlin near the zoo.",  # 3 of 6
    "Completed by Gustave Eiffel.",  # 2 of 3
]


def judge_for(fake: FakeOpenAIServer, **kw: object) -> LLMJudge:
    settings = JudgeSettings.model_validate(
        {"base_url": fake.base_url, "model": "m", "api_key": SecretStr("sk-x"), "backoff_base_s": 0.001, **kw}
    )
    return LLMJudge(settings)


async def test_statements_are_scored_by_the_probability_of_entailed(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.config.script.entailed_probability = supported_share
    judge = judge_for(fake_openai)
    try:
        out = await judge.entail(PREMISE, HYPOTHESES)
    finally:
        await judge.aclose()
    body = fake_openai.stats.bodies[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    expected = [supported_share(PREMISE.text, h) for h in HYPOTHESES]
    assert expected == pytest.approx([1.0, 0.5, 2 / 3])
    scores = [h.score for h in out.value.hypotheses]
    assert scores == pytest.approx([min(0.999, p) for p in expected])
    # the verdict stays the one the model wrote: only its score is graded
    assert [h.statements[0].verdict for h in out.value.hypotheses] == ["entailed", "entailed", "entailed"]


async def test_grouped_cases_are_graded_per_case(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.config.script.entailed_probability = supported_share
    other = Premise("Marie Curie won the Nobel Prize in Physics in 1903.")
    judge = judge_for(fake_openai)
    try:
        first, second = await judge.entail_cases([(PREMISE, HYPOTHESES[1:]), (other, ["Curie won in 1911."])])
    finally:
        await judge.aclose()
    assert fake_openai.stats.requests == 1
    assert [h.score for h in first.value.hypotheses] == pytest.approx([0.5, 2 / 3])
    assert [h.score for h in second.value.hypotheses] == pytest.approx(
        [supported_share(other.text, "Curie won in 1911.")]
    )


async def test_off_sends_no_logprobs_and_scores_verdicts(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.config.script.entailed_probability = supported_share
    judge = judge_for(fake_openai, verdict_logprobs=0)
    try:
        out = await judge.entail(PREMISE, HYPOTHESES)
    finally:
        await judge.aclose()
    assert "logprobs" not in fake_openai.stats.bodies[0]
    assert [h.score for h in out.value.hypotheses] == [1.0, 1.0, 1.0]


async def test_a_server_rejecting_logprobs_is_not_asked_again(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.config.reject_logprobs = True
    judge = judge_for(fake_openai, max_retries=0)
    try:
        first = await judge.entail(PREMISE, HYPOTHESES[:1])
        second = await judge.entail(PREMISE, HYPOTHESES[1:2])
    finally:
        await judge.aclose()
    assert [b.get("logprobs") for b in fake_openai.stats.bodies] == [True, None, None]
    assert first.value.hypotheses[0].score == 1.0 and second.value.hypotheses[0].score == 1.0
    assert first.calls[0].attempts == 1  # the rejected request is not an attempt of the model's


async def test_fixed_scores_are_not_cached_as_graded_ones(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.config.reject_logprobs = True
    judge = judge_for(fake_openai, max_retries=0)
    try:
        await judge.entail(PREMISE, HYPOTHESES[:1])
        again = await judge.entail(PREMISE, HYPOTHESES[:1])  # asked again: no cache entry to hit
    finally:
        await judge.aclose()
    assert not any(c.cached for c in again.calls)
    assert len(fake_openai.stats.bodies) == 3  # rejected, answered, answered again
