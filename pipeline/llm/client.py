"""JudgeClient: one prompt in, one validated answer out, over any OpenAI-compatible endpoint.

- at most ``max_in_flight`` requests at once (a slot held per attempt, not during backoff), a free slot
  going to the most urgent stage waiting (``pipeline.llm.slots``: NLI and refusal before pronouns);
- bounded retries with exponential backoff and jitter on 429, 5xx, timeouts, connection errors and on
  output that does not parse or validate (truncated output included); the SDK's own retries are off;
- structured output: ``response_format`` json_schema (strict); when the server rejects it, json_object,
  then no response_format at all with the first JSON object extracted from the text (remembered per client);
- token log-probabilities on request (``complete_graded``: ``logprobs`` with ``top_logprobs``), for
  graded NLI verdicts (``pipeline.llm.verdict_probs``); a server that rejects them is not asked again;
- every call becomes a JudgeCall with tokens from ``usage``, attempts, cost from ``settings.prices``
  (per model, per 1K tokens), ``latency_ms`` = the time its HTTP requests took (each attempt timed
  inside the semaphore: no queueing for a slot, no backoff sleep) and ``wall_ms`` = the caller's whole
  wait (queueing, retries and backoff included).

Concurrent format rejections: the mode a request used travels in its rejection, and the shared mode
steps down only when it still is that mode, so N requests rejected at once step it down once.

The API key is a SecretStr; it is handed to the SDK and never appears in this object's repr, in a log or
in an error (server error texts are scrubbed of it and of anything key-like before they go anywhere).
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, TypeVar

import openai
from pydantic import BaseModel, SecretStr, ValidationError

from pipeline.clock import Clock, SystemClock
from pipeline.llm.http import ChatHttp, HttpConnectionError, HttpStatusError, HttpTimeout
from pipeline.llm.slots import PrioritySlots, stage_priority
from pipeline.llm.verdict_probs import TokenLogprob, parse_logprobs
from pipeline.retry import Backoff, retry
from prompts import RenderedPrompt
from schemas.errors import GroundwatchError, JudgeError
from schemas.json_input import first_object, read_json
from schemas.results import JudgeCall, Stage
from schemas.settings import JudgeSettings
from schemas.validation import describe_validation_error

log = logging.getLogger(__name__)

OutT = TypeVar("OutT", bound=BaseModel)
#: json_schema: OpenAI's strict structured output; json_object_schema: {"type": "json_object", "schema": ...}
#: (llama-cpp-python's server turns that schema into a grammar); json_object; none: JSON asked in the prompt
FormatMode = Literal["json_schema", "json_object_schema", "json_object", "none"]
_DOWNGRADE: dict[FormatMode, FormatMode] = {
    "json_schema": "json_object_schema",
    "json_object_schema": "json_object",
    "json_object": "none",
}
LOCAL_DUMMY_KEY = "sk-local-no-key"
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_*\-]{6,}")  # OpenAI-style keys, masked ones included
JSON_ONLY_HINT = "Answer with one JSON object only, no other text."


class ParseFailure(GroundwatchError):
    """The model's output is not a valid answer (bad JSON, wrong shape, truncated, wrong ids)."""


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class _Timing:
    request_s: float = 0.0  # summed time of the HTTP requests of one call (inside the semaphore)


def extract_json_object(text: str) -> Any:
    """The first JSON object in ``text`` (tolerates prose and ``` fences around it; nested past
    ``DEFAULT_MAX_DEPTH``: none); ParseFailure when there is none."""
    found = first_object(text)
    if found is None:
        raise ParseFailure(f"no JSON object in the output ({len(text)} chars): {text[:120]!r}")
    return found


def price(settings: JudgeSettings, model: str, input_tokens: int, output_tokens: int) -> float:
    """Cost in USD from the per-model price per 1K tokens; 0 for a model without a price."""
    p = settings.prices.get(model)
    if p is None:
        return 0.0
    return input_tokens / 1000.0 * p.input_per_1k + output_tokens / 1000.0 * p.output_per_1k


class JudgeClient:
    """Sends rendered prompts; returns (validated answer, JudgeCall) or raises JudgeError."""

    def __init__(
        self,
        settings: JudgeSettings,
        *,
        judge_name: str = "openai",
        base_url: str | None = None,
        model: str | None = None,
        api_key: SecretStr | None = None,
        format_mode: FormatMode | None = None,
        model_id: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``clock``: what a call's latencies are measured on and how backoff waits between attempts
        (``pipeline.retry``); a test passes a ``ManualClock``."""
        self.settings = settings
        self.judge_name = judge_name
        self.base_url = base_url if base_url is not None else settings.base_url
        #: the name sent in requests (for the local server: its alias)
        self.model = model if model is not None else settings.model
        #: the name recorded in JudgeCalls (and cache keys): the model's identity, when the request
        #: name is only an alias (the local judge: GGUF file name and sha256 prefix)
        self.model_id = model_id if model_id is not None else self.model
        key = api_key if api_key is not None else settings.api_key
        if key is not None and not key.get_secret_value().strip():
            key = None  # an empty key is no key: say so now, not when the SDK asks for OPENAI_API_KEY
        if key is None:
            if self.base_url is None:
                raise JudgeError(
                    "the openai judge needs an API key: set GROUNDWATCH_JUDGE__API_KEY "
                    "(or GROUNDWATCH_JUDGE__BASE_URL for a local OpenAI-compatible server)"
                )
            key = SecretStr(LOCAL_DUMMY_KEY)
        self._key = key
        #: the SDK resolves the base URL as users expect of it and answers readiness pings (``ping``)
        sdk = self._sdk = openai.AsyncOpenAI(
            base_url=self.base_url, api_key=key.get_secret_value(), max_retries=0, timeout=settings.timeout_s
        )
        #: requests go over aiohttp (pipeline.llm.http)
        self._http = ChatHttp(
            str(sdk.base_url), key.get_secret_value(), settings.timeout_s, settings.max_in_flight
        )
        #: in-flight slots by stage priority (pipeline.llm.slots): NLI and refusal before pronouns
        self._slots = PrioritySlots(settings.max_in_flight)
        self._rng = random.Random()
        self._clock: Clock = clock or SystemClock()
        #: between attempts: exponential from backoff_base_s to backoff_max_s, "equal jitter", at least
        #: a server's Retry-After (capped at backoff_max_s)
        self._backoff = Backoff(first_s=settings.backoff_base_s, max_s=settings.backoff_max_s, jitter=True)
        self._formats: dict[tuple[Any, ...], dict[str, Any]] = {}
        #: False once the server rejected a request for token log-probabilities
        self.logprobs_supported = True
        self.format_mode: FormatMode = format_mode or (
            "json_schema" if settings.structured_output else "json_object"
        )

    def __repr__(self) -> str:
        return f"JudgeClient(judge={self.judge_name!r}, base_url={self.base_url!r}, model={self.model!r})"

    __str__ = __repr__

    async def aclose(self) -> None:
        await self._http.aclose()
        await self._sdk.close()

    async def ping(self, timeout_s: float = 3.0) -> bool:
        """The endpoint answers ``GET /models`` (for readiness probes); never raises."""
        try:
            await self._sdk.with_options(timeout=timeout_s, max_retries=0).models.list()
            return True
        except Exception:
            return False

    # ------------------------------------------------------------------ one call, with its retries
    async def complete(
        self,
        prompt: RenderedPrompt[OutT],
        *,
        stage: Stage,
        items: int = 1,
        check: Callable[[OutT], None] | None = None,
    ) -> tuple[OutT, JudgeCall]:
        """Send ``prompt`` until its answer validates against ``prompt.output_model`` (and ``check``).

        ``check`` raises ValueError when a parsed answer is still unusable (wrong ids, wrong count):
        that is retried like malformed output.
        """
        answer, call, _ = await self.complete_graded(
            prompt, stage=stage, items=items, check=check, logprobs=0
        )
        return answer, call

    async def complete_graded(
        self,
        prompt: RenderedPrompt[OutT],
        *,
        stage: Stage,
        items: int = 1,
        check: Callable[[OutT], None] | None = None,
        logprobs: int = 0,
    ) -> tuple[OutT, JudgeCall, Sequence[TokenLogprob]]:
        """``complete``, and with ``logprobs`` > 0 the generated tokens with that many top alternatives
        each (empty when the server gives none or rejected them before)."""
        usage = Usage()
        priority = stage_priority(stage)
        start = self._clock.monotonic()
        timing = _Timing()

        async def attempt() -> tuple[OutT, Sequence[TokenLogprob]]:
            while True:  # a rejected logprobs or response_format is not the model's fault: not an attempt
                try:
                    async with self._slots.slot(priority):
                        answer, tokens = await self._attempt(prompt, usage, timing, logprobs)
                except _LogprobsRejected as exc:
                    if self.logprobs_supported:
                        log.warning(
                            "%s: server rejected logprobs (%s); not asking again", self._where(prompt), exc
                        )
                    self.logprobs_supported = False
                    continue
                except _FormatRejected as exc:
                    self._step_down(prompt, exc)
                    continue
                if check is not None:
                    try:
                        check(answer)
                    except ValueError as exc:
                        raise ParseFailure(f"answer rejected: {exc}") from exc
                return answer, tokens

        tried = await retry(
            attempt,
            what=self._where(prompt),
            attempts=self.settings.max_retries + 1,
            backoff=self._backoff,
            retry_on=(ParseFailure, _Retryable),
            sleep=self._clock.sleep,
            rng=self._rng,
            level=logging.INFO,
        )
        if tried.error is not None or tried.value is None:
            raise JudgeError(
                f"{self._where(prompt)}: gave up after {tried.attempts} attempts; last error: {tried.error}"
            ) from tried.error
        answer, tokens = tried.value
        wall_ms = (self._clock.monotonic() - start) * 1000.0
        return answer, self._record(stage, items, tried.attempts, usage, timing, wall_ms), tokens

    def _record(
        self, stage: Stage, items: int, attempts: int, usage: Usage, timing: _Timing, wall_ms: float
    ) -> JudgeCall:
        """The JudgeCall of a call that returned an answer."""
        return JudgeCall(
            stage=stage,
            judge=self.judge_name,
            model=self.model_id,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            latency_ms=timing.request_s * 1000.0,
            cost_usd=price(self.settings, self.model, usage.input_tokens, usage.output_tokens),
            attempts=attempts,
            items=items,
            wall_ms=wall_ms,
        )

    def _step_down(self, prompt: RenderedPrompt[Any], exc: _FormatRejected) -> None:
        """The server rejected a response_format: use a plainer one from now on (or give up)."""
        if self.format_mode != exc.mode:
            # a concurrent request, rejected in the same mode, already stepped down (modes only ever
            # step down, so the current one is plainer than exc.mode): just retry with it
            return
        nxt = _DOWNGRADE.get(exc.mode)
        if nxt is None:
            raise JudgeError(f"{self._where(prompt)}: request rejected: {exc}") from exc
        log.warning(
            "%s: server rejected response_format %s (%s); using %s from now on",
            self._where(prompt), exc.mode, exc.status, nxt,
        )  # fmt: skip
        self.format_mode = nxt

    def _scrub(self, text: str) -> str:
        """A server's error text without our key (some echo it back, e.g. on 401), nor anything key-like."""
        secret = self._key.get_secret_value()
        if secret:
            text = text.replace(secret, "***")
        return _KEY_LIKE.sub("sk-***", text)

    def _where(self, prompt: RenderedPrompt[Any]) -> str:
        return f"judge {self.judge_name} ({self.model}) prompt {prompt.name}"

    # ------------------------------------------------------------------ one HTTP request
    def _body(self, prompt: RenderedPrompt[Any], mode: FormatMode, logprobs: int = 0) -> dict[str, Any]:
        """The chat-completions request body of ``prompt`` in output mode ``mode`` (with ``logprobs``
        top alternatives a token when > 0)."""
        messages: list[dict[str, str]] = [dict(m) for m in prompt.messages]
        kwargs: dict[str, Any] = {}
        if mode != "none":
            kwargs["response_format"] = self._response_format(prompt, mode)
        if mode in ("json_object", "none"):
            messages[-1]["content"] += "\n" + JSON_ONLY_HINT
        if logprobs > 0:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = logprobs
        return {
            "model": self.model,
            "messages": messages,
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_output_tokens,
            **kwargs,
        }

    def _response_format(self, prompt: RenderedPrompt[Any], mode: FormatMode) -> dict[str, Any]:
        """The request's response_format, built once per prompt shape (name, answer model, items) and
        mode: bodies are only serialised, never changed, so requests share it."""
        key = (prompt.name, prompt.output_model, prompt.items, mode)
        cached = self._formats.get(key)
        if cached is not None:
            return cached
        if mode == "json_schema":
            fmt: dict[str, Any] = {
                "type": "json_schema",
                "json_schema": {"name": prompt.name, "strict": True, "schema": prompt.json_schema()},
            }
        elif mode == "json_object_schema":
            fmt = {"type": "json_object", "schema": prompt.json_schema()}
        else:
            fmt = {"type": "json_object"}
        if len(self._formats) >= 256:  # prompt shapes are few; a bound all the same
            self._formats.clear()
        self._formats[key] = fmt
        return fmt

    async def _attempt(
        self, prompt: RenderedPrompt[OutT], usage: Usage, timing: _Timing, logprobs: int
    ) -> tuple[OutT, Sequence[TokenLogprob]]:
        mode = self.format_mode
        logprobs = logprobs if self.logprobs_supported else 0
        body = self._body(prompt, mode, logprobs)
        sent = self._clock.monotonic()
        try:
            data = await self._post(body)
        except HttpStatusError as exc:
            retry_after = _seconds(exc.retry_after)
            self._raise_status(prompt, mode, exc.status, self._scrub(exc.message), retry_after, exc, logprobs)
        except HttpTimeout as exc:
            raise _Retryable(f"timeout after {self.settings.timeout_s}s") from exc
        except HttpConnectionError as exc:
            raise _Retryable(f"connection error: {self._scrub(str(exc))}") from exc
        finally:
            timing.request_s += self._clock.monotonic() - sent
        answer = _answer(prompt, data, usage)
        choices = data.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else {}
        return answer, parse_logprobs(choice) if logprobs and isinstance(choice, dict) else []

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self._http.post(body)
        except ValueError as exc:  # a 2xx whose body is not a JSON object: retried as bad output
            raise ParseFailure(str(exc)) from exc

    def _raise_status(
        self,
        prompt: RenderedPrompt[Any],
        mode: FormatMode,
        status: int,
        message: str,
        retry_after: float | None,
        cause: Exception,
        logprobs: int = 0,
    ) -> NoReturn:
        # a server that does not know a response_format answers 400/422, or (llama-cpp-python) 500
        # with a validation error naming response_format
        if logprobs and status in (400, 422, 500) and "logprob" in message.lower():
            raise _LogprobsRejected(f"HTTP {status}: {message}") from cause
        if status in (400, 422, 500) and mode != "none" and _about_format(message, status):
            raise _FormatRejected(status, message, mode) from cause
        if status == 429 or status >= 500 or status == 408:
            raise _Retryable(f"HTTP {status}: {message}", retry_after) from cause
        raise JudgeError(f"{self._where(prompt)}: HTTP {status}: {message}") from cause


def _answer(prompt: RenderedPrompt[OutT], resp: dict[str, Any], usage: Usage) -> OutT:
    """The validated answer in a chat-completions response (its tokens added to ``usage``), or
    ParseFailure."""
    tokens = resp.get("usage")
    if isinstance(tokens, dict):
        usage.input_tokens += _count(tokens.get("prompt_tokens"))
        usage.output_tokens += _count(tokens.get("completion_tokens"))
    choices = resp.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ParseFailure("the response has no choices")
    choice = choices[0]
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str):
        text = ""
    if choice.get("finish_reason") == "length":
        raise ParseFailure(f"output truncated (finish_reason=length) after {len(text)} chars")
    try:
        data = read_json(text)
    except ValueError:
        data = extract_json_object(text)  # prose or ``` around the object; ParseFailure if none
    try:
        return prompt.output_model.model_validate(data)
    except ValidationError as exc:
        raise ParseFailure(
            f"output does not match {prompt.output_model.__name__}: {describe_validation_error(exc)}"
        ) from exc


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class _Retryable(GroundwatchError):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _LogprobsRejected(GroundwatchError):
    """The server does not give token log-probabilities (answered 4xx/500 naming them)."""


class _FormatRejected(GroundwatchError):
    def __init__(self, status: int, message: str, mode: FormatMode) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.mode = mode  # the response_format mode the rejected request used


def _about_format(message: str, status: int) -> bool:
    m = message.lower()
    if status >= 500:
        return "response_format" in m
    return any(
        w in m for w in ("response_format", "json_schema", "json_object", "schema", "grammar", "format")
    )


def _seconds(value: str | None) -> float | None:
    """A Retry-After header in seconds (None when absent or not a number)."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None
