"""The judge's aiohttp POST (pipeline.llm.http) through JudgeClient: timeouts, error texts, sessions."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import SecretStr

from pipeline.llm.client import JudgeClient
from pipeline.llm.http import env_proxy, error_message
from prompts import Prompts
from schemas.errors import JudgeError
from schemas.settings import JudgeSettings
from tests.fakes.openai_server import FakeConfig, FakeOpenAIServer


def settings_for(fake: FakeOpenAIServer, **kw: object) -> JudgeSettings:
    base: dict[str, object] = {
        "base_url": fake.base_url,
        "api_key": SecretStr("sk-test-http-0123456789"),
        "backoff_base_s": 0.001,
        "backoff_max_s": 0.01,
        "max_retries": 1,
    }
    base.update(kw)
    return JudgeSettings.model_validate(base)


async def test_a_slow_server_is_a_timeout_retried_then_given_up() -> None:
    with FakeOpenAIServer(FakeConfig(latency_ms=600)) as fake:
        client = JudgeClient(settings_for(fake, timeout_s=0.1))
        try:
            with pytest.raises(JudgeError, match=r"timeout after 0\.1s"):
                await client.complete(Prompts().refusal(["I don't know."]), stage="refusal")
        finally:
            await client.aclose()
        assert fake.stats.requests == 2  # the first attempt and one retry


async def test_the_server_error_text_comes_from_its_json_body() -> None:
    assert error_message(400, b'{"error": {"message": "bad response_format"}}') == "bad response_format"
    assert error_message(502, b"<html>bad gateway</html>") == "<html>bad gateway</html>"
    assert error_message(500, b"") == "status 500"


async def test_one_client_serves_two_event_loops_one_after_the_other() -> None:
    with FakeOpenAIServer() as fake:
        client = JudgeClient(settings_for(fake))

        async def ask() -> bool:
            answer, _ = await client.complete(Prompts().refusal(["I don't know."]), stage="refusal")
            return answer.texts[0].refusal

        def in_new_loop() -> bool:
            return asyncio.run(ask())

        assert await asyncio.to_thread(in_new_loop)  # a session made in that loop, left behind with it
        assert await ask()  # a new session for this loop
        await client.aclose()
        assert fake.stats.requests == 2


def test_the_environment_proxy_is_looked_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert str(env_proxy("https://api.openai.com/v1/chat/completions")[0]) == "http://127.0.0.1:3128"
    assert env_proxy("http://127.0.0.1:8000/v1/chat/completions") == (None, None)  # no HTTP_PROXY
