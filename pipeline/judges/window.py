"""The context window (tokens) of the model behind a judge, for sizing the NLI premise.

- ``local``: the window the project's llama.cpp server is started with (``judge.local_ctx``);
- ``openai``: ``judge.context_windows`` for ``judge.model`` (an exact name, else the longest name the
  model starts with, so a dated snapshot such as ``gpt-4o-mini-2024-07-18`` gets its family's window),
  else ``judge.context_window_tokens``;
- ``cascade``: the window of its LLM (``judge.cascade_llm``);
- ``lexical``: ``judge.context_window_tokens`` (it has no window; premises are sized as before).
"""

from __future__ import annotations

from schemas.settings import JudgeSettings


def model_window(js: JudgeSettings, model: str) -> int:
    """The window of a hosted ``model`` from ``js.context_windows``; the fallback for unknown models."""
    windows = js.context_windows
    if model in windows:
        return windows[model]
    prefixes = [name for name in windows if model.startswith(name)]
    if prefixes:
        return windows[max(prefixes, key=len)]
    return js.context_window_tokens


def window_tokens(js: JudgeSettings) -> int:
    """The context window, in tokens, of the model that judges NLI for ``js.kind``."""
    kind = js.cascade_llm if js.kind == "cascade" else js.kind
    if kind == "local":
        return js.local_ctx
    if kind == "openai":
        return model_window(js, js.model)
    return js.context_window_tokens
