"""open_judge(settings): the judge that ``settings.judge.kind`` names, opened and closed in one place.

- ``openai``: LLMJudge on ``judge.base_url`` / ``judge.model`` / ``judge.api_key``;
- ``local``: starts the llama.cpp server with the registry-packaged GGUF, LLMJudge pointed at it,
  server stopped on exit;
- ``lexical``: LexicalJudge (no LLM);
- ``cascade``: CascadeJudge(lexical, the LLM judge named by ``judge.cascade_llm``, judge settings); the
  LLM is asked about refusals only with ``judge.cascade_llm_refusals``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Literal

from pipeline.clock import Clock
from pipeline.judges.base import Judge
from schemas.settings import JudgeSettings, Settings

if TYPE_CHECKING:
    from pipeline.judges.llm_judge import LLMJudge


@asynccontextmanager
async def open_judge(settings: Settings, clock: Clock | None = None) -> AsyncIterator[Judge]:
    """``async with open_judge(settings) as judge:`` -> a Judge; everything it started is stopped on exit.
    ``clock``: the caller's clock for an LLM judge's latencies and backoff (the worker passes its own)."""
    js = settings.judge
    async with AsyncExitStack() as stack:
        judge: Judge
        if js.kind in ("openai", "local"):
            judge = await _llm_judge(js, js.kind, stack, clock)
        elif js.kind == "lexical":
            from pipeline.judges.lexical import LexicalJudge

            judge = LexicalJudge()
            stack.push_async_callback(judge.aclose)
        elif js.kind == "cascade":
            from pipeline.judges.cascade import CascadeJudge
            from pipeline.judges.lexical import LexicalJudge

            llm = await _llm_judge(js, js.cascade_llm, stack, clock)
            judge = CascadeJudge(LexicalJudge(), llm, js, llm_refusals=js.cascade_llm_refusals)
            # CascadeJudge.aclose closes both; the LLM's own close (registered above) runs again, harmlessly
            stack.push_async_callback(judge.aclose)
        else:  # pragma: no cover - JudgeKind is a Literal
            raise ValueError(f"unknown judge kind {js.kind!r}")
        yield judge


async def _llm_judge(
    js: JudgeSettings, kind: Literal["openai", "local"], stack: AsyncExitStack, clock: Clock | None
) -> Judge:
    from pipeline.judges.llm_judge import LLMJudge

    if kind == "openai":
        judge = LLMJudge(js, name="openai", clock=clock)
    else:
        from pipeline.judges.local_model import LocalModelServer

        server = LocalModelServer(js)
        await stack.enter_async_context(server)
        judge = local_llm_judge(js, server.base_url, server.model_id, clock)
    stack.push_async_callback(judge.aclose)
    return judge


def local_llm_judge(js: JudgeSettings, base_url: str, model_id: str, clock: Clock | None = None) -> LLMJudge:
    """The LLMJudge of the `local` kind, for the llama.cpp server at ``base_url`` serving ``model_id``.

    Requests name the server's alias; verdicts are recorded and cached under ``model_id`` (the GGUF's
    file name and sha256 prefix), so another model never gets this one's cached verdicts.
    """
    from pipeline.judges.llm_judge import LLMJudge
    from pipeline.judges.local_model import MODEL_ALIAS

    # llama.cpp's server answers one request at a time, slowly on a CPU: queue here, wait long there;
    # it takes the JSON schema as {"type": "json_object", "schema": ...}; its log-probabilities are slow
    local = js.model_copy(
        update={
            "max_in_flight": js.local_max_in_flight,
            "timeout_s": js.local_timeout_s,
            "verdict_logprobs": js.local_verdict_logprobs,
        }
    )
    return LLMJudge(
        local,
        name="local",
        base_url=base_url,
        model=MODEL_ALIAS,
        model_id=model_id,
        format_mode="json_object_schema",
        clock=clock,
    )
