"""pipeline/judges/window.py: the premise window follows the judge's model, not one number for all."""

from __future__ import annotations

import pytest

from pipeline.judges.window import window_tokens
from schemas.settings import JudgeSettings, Settings


def test_hosted_models_get_their_window() -> None:
    assert window_tokens(JudgeSettings(kind="openai", model="gpt-4o-mini")) == 128_000
    assert window_tokens(JudgeSettings(kind="openai", model="gpt-4o")) == 128_000
    # a dated snapshot takes its family's window
    assert window_tokens(JudgeSettings(kind="openai", model="gpt-4o-mini-2024-07-18")) == 128_000


def test_unknown_model_falls_back() -> None:
    assert window_tokens(JudgeSettings(kind="openai", model="my-model")) == 4096
    js = JudgeSettings(kind="openai", model="my-model", context_window_tokens=8192)
    assert window_tokens(js) == 8192
    js = JudgeSettings(kind="openai", model="my-model", context_windows={"my-model": 32_768})
    assert window_tokens(js) == 32_768


def test_local_uses_the_server_context() -> None:
    js = JudgeSettings(kind="local", model="gpt-4o-mini", local_ctx=8192, context_window_tokens=2048)
    assert window_tokens(js) == 8192


def test_cascade_uses_its_llm_and_lexical_the_fallback() -> None:
    local = JudgeSettings(kind="cascade", cascade_llm="local", local_ctx=2048)
    assert window_tokens(local) == 2048
    hosted = JudgeSettings(kind="cascade", cascade_llm="openai", model="gpt-4o-mini", local_ctx=2048)
    assert window_tokens(hosted) == 128_000
    assert window_tokens(JudgeSettings(kind="lexical", context_window_tokens=3000)) == 3000


def test_windows_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDWATCH_JUDGE__KIND", "openai")
    monkeypatch.setenv("GROUNDWATCH_JUDGE__MODEL", "acme-large")
    monkeypatch.setenv("GROUNDWATCH_JUDGE__CONTEXT_WINDOWS", '{"acme-large": 200000}')
    assert window_tokens(Settings().judge) == 200_000  # read from the environment
