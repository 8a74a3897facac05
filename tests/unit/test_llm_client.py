"""JudgeClient over real HTTP against the fake OpenAI-compatible server: retries, give-up, faults,
structured-output fallback, concurrency bound, cost, and the API key kept out of reprs and logs."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from pydantic import SecretStr

from pipeline.clock import ManualClock
from pipeline.llm.client import JudgeClient, extract_json_object, price
from prompts import Prompts, RefusalAnswer
from schemas.errors import JudgeError
from schemas.results import JudgeCall
from schemas.settings import JudgeSettings, ModelPrice
from tests.fakes.openai_server import FakeOpenAIServer
from tests.settings_factory import make_settings

SECRET = "sk-test-0123456789-very-secret"


def settings_for(fake: FakeOpenAIServer, **kw: object) -> JudgeSettings:
    base: dict[str, object] = {
        "base_url": fake.base_url,
        "model": "gpt-4o-mini",
        "api_key": SecretStr(SECRET),
        "backoff_base_s": 0.001,
        "backoff_max_s": 0.01,
        "max_retries": 3,
        "timeout_s": 10.0,
    }
    base.update(kw)
    return JudgeSettings.model_validate(base)


@pytest.fixture(scope="module")
def prompts() -> Prompts:
    return Prompts()


async def refusal_call(client: JudgeClient, prompts: Prompts) -> tuple[RefusalAnswer, JudgeCall]:
    return await client.complete(prompts.refusal(["I don't know.", "Paris."]), stage="refusal", items=2)


async def test_success_records_usage_and_cost(fake_openai: FakeOpenAIServer, prompts: Prompts) -> None:
    client = JudgeClient(settings_for(fake_openai))
    try:
        answer, call = await client.complete(
            prompts.refusal(["I don't know.", "Paris."]), stage="refusal", items=2
        )
    finally:
        await client.aclose()
    assert [t.refusal for t in answer.texts] == [True, False]
    assert call.attempts == 1 and not call.cached and call.items == 2
    assert call.input_tokens == fake_openai.stats.prompt_tokens > 0
    assert call.output_tokens == fake_openai.stats.completion_tokens > 0
    expected = call.input_tokens / 1000 * 0.00015 + call.output_tokens / 1000 * 0.0006
    assert call.cost_usd == pytest.approx(expected)
    body = fake_openai.stats.bodies[0]
    assert body["temperature"] == 0
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True


def test_price_per_model() -> None:
    s = JudgeSettings(prices={"m": ModelPrice(input_per_1k=1.0, output_per_1k=2.0)})
    assert price(s, "m", 1500, 500) == pytest.approx(2.5)
    assert price(s, "unknown-model", 1500, 500) == 0.0


@pytest.mark.parametrize("fault", [429, 500, 503, "broken", "truncated", "shape"])
async def test_retries_then_success(
    fake_openai: FakeOpenAIServer, prompts: Prompts, fault: int | str
) -> None:
    fake_openai.faults = [fault, fault]
    client = JudgeClient(settings_for(fake_openai))
    try:
        answer, call = await refusal_call(client, prompts)
    finally:
        await client.aclose()
    assert [t.refusal for t in answer.texts] == [True, False]
    assert call.attempts == 3
    assert fake_openai.stats.requests == 3
    if isinstance(fault, str):  # malformed answers still cost tokens: counted
        assert call.input_tokens == fake_openai.stats.prompt_tokens


@pytest.mark.parametrize("fault", [429, 500, "truncated"])
async def test_gives_up_after_max_retries(
    fake_openai: FakeOpenAIServer, prompts: Prompts, fault: int | str
) -> None:
    fake_openai.faults = [fault] * 10
    client = JudgeClient(settings_for(fake_openai, max_retries=2))
    try:
        with pytest.raises(JudgeError) as err:
            await refusal_call(client, prompts)
    finally:
        await client.aclose()
    assert fake_openai.stats.requests == 3  # 1 + 2 retries
    msg = str(err.value)
    assert "gave up after 3 attempts" in msg and "refusal" in msg
    if fault == "truncated":
        assert "finish_reason=length" in msg
    else:
        assert f"HTTP {fault}" in msg


async def test_client_error_is_not_retried(fake_openai: FakeOpenAIServer, prompts: Prompts) -> None:
    fake_openai.faults = [401]
    client = JudgeClient(settings_for(fake_openai))
    try:
        with pytest.raises(JudgeError, match="HTTP 401"):
            await refusal_call(client, prompts)
    finally:
        await client.aclose()
    assert fake_openai.stats.requests == 1


async def test_connection_error_retried_then_gives_up(prompts: Prompts) -> None:
    with FakeOpenAIServer() as fake:
        settings = settings_for(fake, max_retries=1)
    # the server is stopped: nothing listens on its port any more
    client = JudgeClient(settings)
    try:
        with pytest.raises(JudgeError, match="connection error"):
            await refusal_call(client, prompts)
    finally:
        await client.aclose()


async def test_json_schema_rejected_falls_back_and_remembers(
    fake_openai: FakeOpenAIServer, prompts: Prompts
) -> None:
    fake_openai.config.reject_formats = ("json_schema", "json_object_schema", "json_object")
    client = JudgeClient(settings_for(fake_openai))
    try:
        answer, call = await refusal_call(client, prompts)
        assert [t.refusal for t in answer.texts] == [True, False]
        assert client.format_mode == "none"
        assert call.attempts == 1  # format rejections are not failures of the model
        kinds = [(b.get("response_format") or {}).get("type") for b in fake_openai.stats.bodies]
        assert kinds == ["json_schema", "json_object", "json_object", None]
        # the answer came wrapped in prose and a ``` fence, and was extracted
        assert "Answer with one JSON object only" in fake_openai.stats.bodies[-1]["messages"][-1]["content"]
        await refusal_call(client, prompts)  # remembered: straight to plain JSON
        assert fake_openai.stats.requests == 5
        assert "response_format" not in fake_openai.stats.bodies[-1]
    finally:
        await client.aclose()


async def test_llama_cpp_style_schema_fallback(fake_openai: FakeOpenAIServer, prompts: Prompts) -> None:
    fake_openai.config.reject_formats = ("json_schema",)
    fake_openai.config.reject_status = 500  # as llama-cpp-python's server does
    client = JudgeClient(settings_for(fake_openai))
    try:
        await refusal_call(client, prompts)
    finally:
        await client.aclose()
    assert client.format_mode == "json_object_schema"
    assert fake_openai.stats.requests == 2  # the rejection was not retried as a server error
    rf = fake_openai.stats.bodies[-1]["response_format"]
    assert rf["type"] == "json_object" and rf["schema"]["required"] == ["texts"]


async def test_in_flight_bound(fake_openai: FakeOpenAIServer, prompts: Prompts) -> None:
    fake_openai.config.latency_ms = 30
    client = JudgeClient(settings_for(fake_openai, max_in_flight=3))
    try:
        await asyncio.gather(*(refusal_call(client, prompts) for _ in range(12)))
    finally:
        await client.aclose()
    assert fake_openai.stats.requests == 12
    assert 1 <= fake_openai.stats.max_in_flight <= 3


async def test_random_faults_all_recovered(prompts: Prompts) -> None:
    from tests.fakes.openai_server import FakeConfig

    with FakeOpenAIServer(FakeConfig(error_rate=0.2, malformed_rate=0.2, seed=7)) as fake:
        client = JudgeClient(settings_for(fake, max_retries=8))
        try:
            results = await asyncio.gather(*(refusal_call(client, prompts) for _ in range(20)))
        finally:
            await client.aclose()
        assert all([t.refusal for t in a.texts] == [True, False] for a, _ in results)
        assert fake.stats.errors + fake.stats.malformed > 0
        assert fake.stats.requests == sum(c.attempts for _, c in results)


def test_extract_json_object() -> None:
    assert extract_json_object('Sure! ```json\n{"a": {"b": 1}}\n``` done') == {"a": {"b": 1}}
    assert extract_json_object('[1, 2] then {"x": "}"}') == {"x": "}"}
    with pytest.raises(Exception, match="no JSON object"):
        extract_json_object('{"cut": [1, 2')


async def test_api_key_never_shown(
    fake_openai: FakeOpenAIServer, prompts: Prompts, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(judge=settings_for(fake_openai))
    assert SECRET not in repr(settings) and SECRET not in str(settings)
    assert SECRET not in settings.model_dump_json()
    fake_openai.faults = [500, "broken"]
    with caplog.at_level(logging.DEBUG):
        client = JudgeClient(settings.judge)
        try:
            assert SECRET not in repr(client) and SECRET not in str(client)
            await refusal_call(client, prompts)
        finally:
            await client.aclose()
    assert caplog.records  # the retries were logged ...
    assert SECRET not in caplog.text  # ... without the key
    assert fake_openai.stats.auth[-1] == f"Bearer {SECRET}"  # but the key was sent to the server


async def test_api_key_echoed_by_the_server_is_scrubbed(
    fake_openai: FakeOpenAIServer, prompts: Prompts, caplog: pytest.LogCaptureFixture
) -> None:
    """A 401 whose message quotes the key (OpenAI's does): the JudgeError (which goes to the dead-letter
    topic and the logs) names the status without the key."""
    fake_openai.faults = [401]
    with caplog.at_level(logging.DEBUG):
        client = JudgeClient(settings_for(fake_openai))
        try:
            with pytest.raises(JudgeError) as err:
                await refusal_call(client, prompts)
        finally:
            await client.aclose()
        logging.getLogger("test").error("judge failed: %s", err.value)
    assert "HTTP 401" in str(err.value) and "Incorrect API key provided" in str(err.value)
    assert SECRET not in str(err.value) and "0123456789" not in str(err.value)
    assert SECRET not in caplog.text


async def test_local_server_gets_dummy_key(fake_openai: FakeOpenAIServer, prompts: Prompts) -> None:
    client = JudgeClient(JudgeSettings(base_url=fake_openai.base_url, model="local"))
    try:
        _, call = await refusal_call(client, prompts)
    finally:
        await client.aclose()
    assert fake_openai.stats.auth[-1].startswith("Bearer ")
    assert call.cost_usd == 0.0  # no price for this model


def test_hosted_openai_without_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(JudgeError, match="GROUNDWATCH_JUDGE__API_KEY"):
        JudgeClient(JudgeSettings())


async def test_concurrent_format_rejections_step_down_once(
    fake_openai: FakeOpenAIServer, prompts: Prompts
) -> None:
    """Eight calls sent at once in json_schema, all rejected: the shared mode steps down one level, not
    eight, and every call succeeds with json_object_schema (the rejection is not a failed attempt)."""
    fake_openai.config.reject_formats = ("json_schema",)
    fake_openai.config.latency_ms = 50  # keeps all eight in flight before the first rejection returns
    client = JudgeClient(settings_for(fake_openai, max_in_flight=8))
    try:
        results = await asyncio.gather(*(refusal_call(client, prompts) for _ in range(8)))
    finally:
        await client.aclose()
    assert all([t.refusal for t in a.texts] == [True, False] for a, _ in results)
    assert all(c.attempts == 1 for _, c in results)
    assert client.format_mode == "json_object_schema"
    kinds = [
        "json_object_schema" if "schema" in b["response_format"] else b["response_format"]["type"]
        for b in fake_openai.stats.bodies
    ]
    # the race happened: several requests were rejected in json_schema, none went plainer than needed
    assert kinds.count("json_schema") == fake_openai.stats.rejected_format >= 2
    assert set(kinds) == {"json_schema", "json_object_schema"}
    assert kinds.count("json_object_schema") == 8


async def test_latency_is_the_request_not_the_queue(fake_openai: FakeOpenAIServer, prompts: Prompts) -> None:
    """With one request slot, the second call waits for the first: its latency_ms must not include that
    wait. The requests are timed inside the slot, so their intervals are disjoint within the gather:
    the latencies add up to at most the elapsed time (including the wait would give about 1.5 times it)."""
    fake_openai.config.latency_ms = 100
    client = JudgeClient(settings_for(fake_openai, max_in_flight=1))
    try:
        t0 = time.perf_counter()
        results = await asyncio.gather(refusal_call(client, prompts), refusal_call(client, prompts))
        elapsed_ms = (time.perf_counter() - t0) * 1000.0
    finally:
        await client.aclose()
    calls = [c for _, c in results]
    assert all(c.latency_ms > 0 and c.wall_ms >= c.latency_ms for c in calls)
    assert sum(c.latency_ms for c in calls) <= elapsed_ms
    assert max(c.wall_ms for c in calls) <= elapsed_ms


async def test_latency_excludes_backoff(fake_openai: FakeOpenAIServer, prompts: Prompts) -> None:
    """Two failed attempts then a success, on a ManualClock (the requests take no clock time, the
    backoff waits advance it): latency_ms holds only the requests, wall_ms the backoff too; each wait is
    between half its step and the step (0.2 s, then 0.4 s: "equal jitter")."""
    fake_openai.faults = [500, 500]
    clock = ManualClock()
    client = JudgeClient(settings_for(fake_openai, backoff_base_s=0.2, backoff_max_s=1.0), clock=clock)
    try:
        _, call = await refusal_call(client, prompts)
    finally:
        await client.aclose()
    assert call.attempts == 3
    first, second = clock.slept
    assert 0.1 <= first <= 0.2 and 0.2 <= second <= 0.4
    assert call.latency_ms == 0.0
    assert call.wall_ms == pytest.approx((first + second) * 1000.0)
