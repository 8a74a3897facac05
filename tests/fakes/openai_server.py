"""A fake OpenAI-compatible server on 127.0.0.1 for protocol, retry, fault and cost tests.

A test double, never offered as a judge. It speaks real HTTP (aiohttp, in a thread of its own so
that sync fixtures, async tests and benchmarks can all use it), recognises groundwatch's
prompts from their fences, and answers with scripted verdicts:

- pronouns: the sentences unchanged (a conversation's earlier turns, fenced as ``<turn role=...>``, are
  parsed and given to ``Script.pronouns_in_conversation`` when a test sets it);
- nli: one statement per hypothesis, entailed when at least half of its content words appear in the
  premise, else not_stated; with the refusal question, the refusal flag of the joined hypotheses;
- nli_cases (several premises a prompt): the same, each case's hypotheses against its own premise;
- refusal: True when the text contains a refusal phrase ("I don't know", "cannot", "not in the context"...);
- rubric (a custom evaluator's, prompts/rubric.md): ``Script.rubric`` over the instructions and the fenced
  fields; by default a pass (score 5) unless the answer names a dose in mg;
- reask (pairs of a conversation's user messages, prompts/reask.md): ``Script.reask`` over each pair (earlier,
  later); by default a re-ask when the later message holds at least half of the earlier's content words;
- arguments (tool-argument values, prompts/arguments.md): ``Script.argument`` over each value and the text
  that came before its call (the turns and the tool results 1 to K); by default supported when the
  value's digits occur, in order and together, among the digits of that text with number words
  ("four four seven one") read as digits.

An app's own calls (no groundwatch prompt) are answered by ``Script.chat``; when the request offers
``tools`` and ``Script.tool_call`` names one, the reply is that tool call instead. Both on the chat
completions API and on the Responses API (``POST /v1/responses``, not streamed; its input items are
given to the script as chat messages: ``function_call_output`` items as ``tool`` turns).

With ``logprobs`` in the request, the answer carries token log-probabilities (one token per word,
punctuation mark or run of spaces), each certain, except that with ``Script.entailed_probability`` set
(e.g. ``supported_share``) the token of each NLI verdict has the alternatives "entailed" with that
probability and the generated verdict (or "not_stated") with the rest.

Any of the three can be overridden with a ``Script``. Faults: latency, a rate of 429/500 errors, a
rate of malformed output (broken JSON, truncated with finish_reason "length", wrong shape), a queue of
scripted faults for deterministic tests, and rejection of ``response_format`` json_schema.

CLI: ``python -m tests.fakes.openai_server --port 8000 --latency-ms 300 --error-rate 0.1
--malformed-rate 0.1 [--reject-json-schema] [--seed N]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

_STOP = frozenset(
    "a an the and or but of to in on at by for with from as is are was were be been being it its this that "
    "these those there their they he she his her we you i not no do does did has have had which who whom "
    "what when where why how than then so such into over under about after before".split()
)
REFUSAL_PHRASES = (
    "i don't know",
    "i do not know",
    "cannot",
    "can't",
    "not in the context",
    "no information",
    "unable to",
    "not provided",
    "does not contain",
    "doesn't contain",
    "not mentioned",
    "i'm sorry",
)
_WORD = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and (len(w) > 2 or w.isdigit())}


def default_statements(premise: str, hypothesis: str) -> list[dict[str, str]]:
    words = content_words(hypothesis)
    supported = words & content_words(premise)
    entailed = bool(words) and len(supported) * 2 >= len(words)
    return [
        {
            "statement": hypothesis,
            "reason": f"{len(supported)} of {len(words)} content words in the premise",
            "verdict": "entailed" if entailed else "not_stated",
            "tag": "claim",
        }
    ]


def failing_nli(poison: str) -> Iterator[FakeOpenAIServer]:
    """A fake judge whose NLI call fails (500, every retry) for a hypothesis holding ``poison``, and
    answers ``default_statements`` otherwise: a judge stage that gives up, on one interaction only."""

    def statements(premise: str, hypothesis: str) -> list[dict[str, str]]:
        if poison in hypothesis:
            raise RuntimeError("scripted NLI failure")  # the fake answers 500 for this hypothesis
        return default_statements(premise, hypothesis)

    with FakeOpenAIServer(FakeConfig(script=Script(statements=statements))) as server:
        yield server


def supported_share(premise: str, hypothesis: str) -> float:
    """The share of the hypothesis' content words in the premise (0 without content words)."""
    words = content_words(hypothesis)
    return len(words & content_words(premise)) / len(words) if words else 0.0


_PASSAGE = re.compile(r'<passage id="(\d+)">(.*?)</passage>', re.DOTALL)


def supported_by(premise: str, statement: dict[str, Any]) -> dict[str, Any]:
    """The statement with ``supported_by`` (when the script gave none): the numbered passages of the premise
    holding at least half of its content words, as ``default_statements`` decides entailment."""
    if "supported_by" in statement:
        return statement
    words = content_words(str(statement.get("statement", "")))
    ids = [
        int(m.group(1))
        for m in _PASSAGE.finditer(premise)
        if words and len(words & content_words(m.group(2))) * 2 >= len(words)
    ]
    return {**statement, "supported_by": ids}


def default_refusal(text: str) -> bool:
    low = text.lower().replace("’", "'")
    return any(p in low for p in REFUSAL_PHRASES)


def default_rubric(instructions: str, fields: dict[str, str]) -> bool | int:
    """Fails (and scores 1) an answer that names a dose in mg; else passes (and scores 5)."""
    return not re.search(r"\b\d+\s*mg\b", fields.get("answer", ""))


_NUMBER_WORDS = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine".split())}
_ARGUMENT_VALUE = re.compile(r'<text id="(\d+)" results="(\d+)">(.*?)</text>', re.DOTALL)
_ARGUMENT_RESULT = re.compile(r'<passage id="\d+">(.*?)</passage>', re.DOTALL)


def _digits(text: str) -> str:
    words = re.findall(r"[a-z]+|\d", text.lower())
    return "".join(_NUMBER_WORDS.get(w, w) for w in words if w.isdigit() or w in _NUMBER_WORDS)


def default_argument(value: str, seen: str) -> bool:
    """A tool-argument value (``tool.argument=value``) is supported when it has digits and they occur
    together among the digits of the text seen before its call, number words read as digits."""
    digits = "".join(re.findall(r"\d", value.partition("=")[2]))
    return bool(digits) and digits in _digits(seen)


def default_reask(earlier: str, later: str) -> bool:
    """The later message holds at least half of the earlier's content words."""
    words = content_words(earlier)
    return bool(words) and len(words & content_words(later)) * 2 >= len(words)


_REASK_PAIR = re.compile(
    r'<case id="(\d+)">\s*<question id="1">(.*?)</question>\s*<question id="2">(.*?)</question>', re.DOTALL
)
_RUBRIC_FIELD = re.compile(r"<(question|answer|ground_truth)>(.*?)</\1>", re.DOTALL)


@dataclass
class Script:
    """What the fake answers; each callable can be replaced by a test."""

    pronouns: Callable[[list[str]], list[str]] = field(default=lambda sentences: list(sentences))
    # (sentences, [(role, text) of the earlier turns]) -> sentences; when set, it answers pronoun prompts
    pronouns_in_conversation: Callable[[list[str], list[tuple[str, str]]], list[str]] | None = None
    statements: Callable[[str, str], list[dict[str, str]]] = default_statements
    refusal: Callable[[str], bool] = default_refusal
    # (premise, hypothesis) -> P(entailed) given in the logprobs of each of its statements' verdicts
    # None: each generated verdict is certain
    entailed_probability: Callable[[str, str], float] | None = None
    # a custom rubric (prompts/rubric.md): (instructions, fenced fields by tag) -> a pass (True) / fail
    # (False) for output pass_fail, or a score 1-5 for score_1_5 (what the rubric's system text asks)
    rubric: Callable[[str, dict[str, str]], bool | int] = field(default=lambda i, f: default_rubric(i, f))
    # a tool-argument value (prompts/arguments.md): ("tool.argument=value", the text seen before its call)
    # -> supported
    argument: Callable[[str, str], bool] = field(default=lambda v, s: default_argument(v, s))
    # a pair of a conversation's user messages (prompts/reask.md): (earlier, later) -> a re-ask
    reask: Callable[[str, str], bool] = field(default=lambda e, later: default_reask(e, later))
    # an app's own chat call (no groundwatch prompt in it): the messages -> the reply's text; None: the
    # "prompt not recognised" JSON
    chat: Callable[[list[dict[str, Any]]], str] | None = None
    # an app's own call offering tools: the messages -> (tool name, arguments) to call, or None to answer
    # with ``chat``
    tool_call: Callable[[list[dict[str, Any]]], tuple[str, dict[str, Any]] | None] | None = None


@dataclass
class FakeConfig:
    latency_ms: float = 0.0
    error_rate: float = 0.0  # share of requests answered 429 or 500
    malformed_rate: float = 0.0  # share answered with broken / truncated / wrong-shape output
    # response_format kinds answered 400: "json_schema", "json_object_schema" ({"type": "json_object",
    # "schema": ...}, llama.cpp style), "json_object"
    reject_formats: tuple[str, ...] = ()
    reject_status: int = 400  # llama-cpp-python's server answers 500, a validation error naming it
    prose_around_json: bool = True  # without any response_format, wrap the JSON in prose and a ``` fence
    reject_logprobs: bool = False  # answer a request asking for logprobs 400, as servers without them do
    seed: int = 0
    script: Script = field(default_factory=Script)


@dataclass
class Stats:
    requests: int = 0  # chat completion requests received (including failed ones)
    ok: int = 0
    errors: int = 0
    malformed: int = 0
    rejected_format: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    by_prompt: dict[str, int] = field(default_factory=dict)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)


def estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


_ITEM = {
    "sentence": re.compile(r'<sentence id="(\d+)">(.*?)</sentence>', re.DOTALL),
    "hypothesis": re.compile(r'<hypothesis id="(\d+)">(.*?)</hypothesis>', re.DOTALL),
    "text": re.compile(r'<text id="(\d+)">(.*?)</text>', re.DOTALL),
}
_TURN = re.compile(r'<turn role="(user|assistant)">(.*?)</turn>', re.DOTALL)
_PREMISE = re.compile(r"<premise>\n?(.*?)\n?</premise>", re.DOTALL)
_CASE = re.compile(r'<case id="(\d+)">(.*?)</case>', re.DOTALL)


def _items(kind: str, text: str) -> list[str]:
    return [m.group(2) for m in _ITEM[kind].finditer(text)]


class FakeOpenAIServer:
    """Start with ``start()`` (or ``with FakeOpenAIServer() as fake:``); ``base_url`` ends in /v1."""

    def __init__(self, config: FakeConfig | None = None, *, port: int = 0) -> None:
        self.config = config or FakeConfig()
        self.stats = Stats()
        self.faults: list[int | str] = []  # scripted faults, one per request: 429, 500, "malformed"...
        self._port = port
        self._lock = threading.Lock()
        self._rng = random.Random(self.config.seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.port = 0

    # ------------------------------------------------------------------ lifecycle
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread = threading.Thread(target=self._run, name="fake-openai", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake OpenAI server did not start in 10 s")
        if self._error is not None:
            raise RuntimeError(f"fake OpenAI server failed to start: {self._error}") from self._error
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset_stats(self) -> None:
        with self._lock:
            self.stats = Stats()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
            loop.close()

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    # ------------------------------------------------------------------ handlers
    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "test"}]}
        )

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            self.stats.requests += 1
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
            self.stats.bodies.append(body)
            self.stats.auth.append(request.headers.get("Authorization", ""))
            fault: int | str | None = self.faults.pop(0) if self.faults else None
            if fault is None and self._rng.random() < self.config.error_rate:
                fault = self._rng.choice([429, 500])
            if fault is None and self._rng.random() < self.config.malformed_rate:
                fault = self._rng.choice(["broken", "truncated", "shape"])
        try:
            if self.config.latency_ms:
                await asyncio.sleep(self.config.latency_ms / 1000.0)
            return self._answer(body, fault, request.headers.get("Authorization", ""))
        finally:
            with self._lock:
                self.stats.in_flight -= 1

    def _answer(self, body: dict[str, Any], fault: int | str | None, auth: str = "") -> web.Response:
        rf = body.get("response_format") or {}
        fmt = rf.get("type")
        if fmt == "json_object" and "schema" in rf:
            fmt = "json_object_schema"
        if fmt in self.config.reject_formats:
            with self._lock:
                self.stats.rejected_format += 1
            return _error(
                self.config.reject_status,
                f"response_format {fmt} is not supported by this server",
                "response_format",
            )
        if body.get("logprobs") and self.config.reject_logprobs:
            with self._lock:
                self.stats.errors += 1
            return _error(400, "logprobs are not supported by this server", "logprobs")
        if isinstance(fault, int):
            with self._lock:
                self.stats.errors += 1
            if fault == 401:  # as OpenAI does, the message quotes the key (unmasked here: the worst case)
                key = auth.removeprefix("Bearer ")
                return _error(401, f"Incorrect API key provided: {key}.", None)
            return _error(
                fault,
                "rate limited" if fault == 429 else "internal error",
                None,
                {"Retry-After": "0"} if fault == 429 else None,
            )
        messages = body.get("messages") or []
        user = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
        prompt_text = "".join(str(m.get("content", "")) for m in messages)
        system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
        special = self._rubric(user, system) or self._arguments(user) or self._reask(user)
        kind, answer, probabilities = special if special is not None else self._scripted(user)
        content = json.dumps(answer)
        finish = "stop"
        if fault is not None:
            with self._lock:
                self.stats.malformed += 1
            if fault == "truncated":
                content, finish = content[: max(1, len(content) // 2)], "length"
            elif fault == "shape":
                content = json.dumps({"result": "entailed"})
            else:  # "broken"/"malformed": cut JSON that says it stopped normally
                content = content[: max(1, len(content) // 2)]
        elif kind == "unknown" and (call := self._tool_call(body, messages)) is not None:
            return web.json_response(
                self._completion(body, None, "tool_calls", prompt_text, tool_calls=[call])
            )
        elif kind == "unknown" and self.config.script.chat is not None:
            content = self.config.script.chat(messages)
        elif fmt is None and self.config.prose_around_json:
            content = f"Here is my answer:\n```json\n{content}\n```"
        completion = self._completion(body, content, finish, prompt_text, kind)
        if body.get("logprobs"):
            completion["choices"][0]["logprobs"] = _logprobs(content, probabilities)
        return web.json_response(completion)

    def _count(self, prompt_text: str, content: str, kind: str) -> tuple[int, int]:
        usage_in, usage_out = estimate_tokens(prompt_text), estimate_tokens(content)
        with self._lock:
            self.stats.ok += 1
            self.stats.prompt_tokens += usage_in
            self.stats.completion_tokens += usage_out
            self.stats.by_prompt[kind] = self.stats.by_prompt.get(kind, 0) + 1
        return usage_in, usage_out

    def _completion(
        self, body: dict[str, Any], content: str | None, finish: str, prompt_text: str,
        kind: str = "tool_call", tool_calls: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        usage_in, usage_out = self._count(prompt_text, content or json.dumps(tool_calls), kind)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if tool_calls:
            message["tool_calls"] = tool_calls
        return {
            "id": f"chatcmpl-fake-{self.stats.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {
                "prompt_tokens": usage_in,
                "completion_tokens": usage_out,
                "total_tokens": usage_in + usage_out,
            },
        }

    def _tool_call(self, body: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The scripted tool call for a request that offers tools (OpenAI's chat format), else None."""
        script = self.config.script.tool_call
        if not body.get("tools") or script is None:
            return None
        found = script(messages)
        if found is None:
            return None
        with self._lock:
            serial = self.stats.requests
        name, arguments = found
        return {"id": f"call_{serial}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip

    async def _responses(self, request: web.Request) -> web.Response:
        """The Responses API, not streamed: a scripted tool call (a ``function_call`` item) or the scripted
        chat reply (a ``message`` item)."""
        body = await request.json()
        with self._lock:
            self.stats.requests += 1
            self.stats.bodies.append(body)
            serial = self.stats.requests
        messages = _response_messages(body)
        prompt_text = json.dumps(messages)
        call = self._tool_call(body, messages)
        created = int(time.time())
        if call is not None:
            function = call["function"]
            output: list[dict[str, Any]] = [{
                "type": "function_call", "id": f"fc_{serial}", "call_id": call["id"],
                "name": function["name"], "arguments": function["arguments"], "status": "completed",
            }]  # fmt: skip
            text = function["arguments"]
        else:
            text = self.config.script.chat(messages) if self.config.script.chat else ""
            output = [{
                "type": "message", "id": f"msg_{serial}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }]  # fmt: skip
        usage_in, usage_out = self._count(prompt_text, text, "responses")
        return web.json_response({
            "id": f"resp_{serial}", "object": "response", "created_at": created, "status": "completed",
            "model": body.get("model", "fake"), "output": output, "parallel_tool_calls": True,
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools", []),
            "instructions": body.get("instructions"), "temperature": 1.0, "top_p": 1.0,
            "error": None, "incomplete_details": None, "metadata": {},
            "usage": {"input_tokens": usage_in, "output_tokens": usage_out,
                      "total_tokens": usage_in + usage_out, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}},
        })  # fmt: skip

    def _rubric(self, user: Any, system: Any) -> tuple[str, dict[str, Any], list[float]] | None:
        """A custom rubric's answer (prompts/rubric.md), or None for any other prompt (one given as parts
        among them: an app's own chat request)."""
        if not isinstance(user, str) or not isinstance(system, str):
            return None
        if not user.startswith("Check this exchange against the instructions."):
            return None
        instructions = system.partition("The reviewer's instructions:\n")[2]
        fields = {m.group(1): m.group(2) for m in _RUBRIC_FIELD.finditer(user)}
        outcome = self.config.script.rubric(instructions, fields)
        if "a score from 1" in system:
            score = int(outcome) if not isinstance(outcome, bool) else (5 if outcome else 1)
            return "rubric", {"reason": "scripted", "score": score}, []
        return "rubric", {"reason": "scripted", "verdict": "pass" if outcome else "fail"}, []

    def _arguments(self, user: Any) -> tuple[str, dict[str, Any], list[float]] | None:
        """The verdicts on tool-argument values (prompts/arguments.md), or None for any other prompt."""
        if not isinstance(user, str) or not re.match(r"Check these \d+ argument values\.", user):
            return None
        turns = [m.group(2) for m in _TURN.finditer(user)]
        results = [m.group(1) for m in _ARGUMENT_RESULT.finditer(user)]
        verdicts = []
        for m in _ARGUMENT_VALUE.finditer(user):
            seen = "\n".join([*turns, *results[: int(m.group(2))]])
            supported = self.config.script.argument(m.group(3), seen)
            verdicts.append({"id": int(m.group(1)), "reason": "scripted", "supported": supported})
        return "arguments", {"values": verdicts}, []

    def _reask(self, user: Any) -> tuple[str, dict[str, Any], list[float]] | None:
        """The verdicts on pairs of user messages (prompts/reask.md), or None for any other prompt."""
        if not isinstance(user, str) or not re.match(r"Check these \d+ pairs of user messages\.", user):
            return None
        reask = self.config.script.reask
        pairs = [
            {"id": int(m.group(1)), "reason": "scripted", "reasked": reask(m.group(2), m.group(3))}
            for m in _REASK_PAIR.finditer(user)
        ]
        return "reask", {"pairs": pairs}, []

    def _scripted(self, user: str) -> tuple[str, dict[str, Any], list[float]]:
        """The prompt's kind, the answer and P(entailed) of each NLI statement in answer order."""
        script = self.config.script
        probabilities: list[float] = []

        support = "<support_question>" in user

        def judged(premise: str, hypotheses: list[str]) -> list[dict[str, Any]]:
            out = []
            for i, h in enumerate(hypotheses, 1):
                statements = script.statements(premise, h)
                if support:
                    statements = [supported_by(premise, s) for s in statements]
                if script.entailed_probability is not None:
                    probabilities.extend([script.entailed_probability(premise, h)] * len(statements))
                out.append({"id": i, "statements": statements})
            return out

        if '<case id="' in user:
            cases = []
            for m in _CASE.finditer(user):
                pm = _PREMISE.search(m.group(2))
                premise = pm.group(1) if pm else ""
                hyps = _items("hypothesis", m.group(2))
                cases.append({"id": int(m.group(1)), "hypotheses": judged(premise, hyps)})
            return "nli_cases", {"cases": cases}, probabilities
        if "<premise>" in user:
            found = _PREMISE.search(user)
            premise = found.group(1) if found else ""
            hyps = _items("hypothesis", user)
            out: dict[str, Any] = {"hypotheses": judged(premise, hyps)}
            if "<refusal_question>" in user:
                out["refusal"] = script.refusal(" ".join(hyps))
            return "nli", out, probabilities
        if '<sentence id="' in user:
            items = _items("sentence", user)
            if script.pronouns_in_conversation is not None:
                turns = [(m.group(1), m.group(2)) for m in _TURN.finditer(user)]
                sentences = script.pronouns_in_conversation(items, turns)
            else:
                sentences = script.pronouns(items)
            return "pronouns", {"sentences": [{"id": i, "text": s} for i, s in enumerate(sentences, 1)]}, []
        if '<text id="' in user:
            texts = _items("text", user)
            return (
                "refusal",
                {"texts": [{"id": i, "refusal": script.refusal(t)} for i, t in enumerate(texts, 1)]},
                [],
            )
        return "unknown", {"error": "prompt not recognised"}, []


def _response_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses API request's instructions and input items as chat messages."""
    out: list[dict[str, Any]] = []
    if body.get("instructions"):
        out.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or []:
        if item.get("type") == "function_call_output":
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")})
        elif item.get("type") == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}  # fmt: skip
            out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif "role" in item:
            text = item.get("content")
            if isinstance(text, list):
                text = "".join(str(p.get("text", "")) for p in text if isinstance(p, dict))
            out.append({"role": item["role"], "content": text})
    return out


_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
_VERDICT_VALUE = re.compile(r'"verdict"\s*:\s*"')


def _logprobs(content: str, probabilities: list[float]) -> dict[str, Any]:
    """Chat-completions ``logprobs`` of ``content``: the k-th verdict token gets P(entailed) =
    ``probabilities[k]`` (clipped to [0.001, 0.999]) when there is one; other tokens are certain."""
    verdict_at = [m.end() for m in _VERDICT_VALUE.finditer(content)]
    tokens: list[dict[str, Any]] = []
    for m in _TOKEN.finditer(content):
        token = m.group(0)
        top = [{"token": token, "logprob": 0.0}]
        k = verdict_at.index(m.start()) if m.start() in verdict_at else len(probabilities)
        if k < len(probabilities):
            p = min(0.999, max(0.001, probabilities[k]))
            other = token if token != "entailed" else "not_stated"
            top = [
                {"token": "entailed", "logprob": math.log(p)},
                {"token": other, "logprob": math.log(1 - p)},
            ]
        chosen = next(t["logprob"] for t in top if t["token"] == token)
        tokens.append({"token": token, "logprob": chosen, "top_logprobs": top})
    return {"content": tokens}


def _error(
    status: int, message: str, param: str | None, headers: dict[str, str] | None = None
) -> web.Response:
    kind = "invalid_request_error" if status < 500 and status != 429 else "server_error"
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": param, "code": None}},
        status=status,
        headers=headers,
    )


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m tests.fakes.openai_server", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--error-rate", type=float, default=0.0)
    ap.add_argument("--malformed-rate", type=float, default=0.0)
    ap.add_argument(
        "--reject-json-schema", action="store_true", help="answer 400 to json_schema response_format"
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    config = FakeConfig(
        latency_ms=args.latency_ms,
        error_rate=args.error_rate,
        malformed_rate=args.malformed_rate,
        reject_formats=("json_schema",) if args.reject_json_schema else (),
        seed=args.seed,
    )
    server = FakeOpenAIServer(config, port=args.port).start()
    signal.signal(signal.SIGTERM, _interrupt)
    print(f"fake OpenAI server on {server.base_url} (Ctrl-C to stop)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        s = server.stats
        print(
            f"requests={s.requests} ok={s.ok} errors={s.errors} malformed={s.malformed} "
            f"prompt_tokens={s.prompt_tokens} completion_tokens={s.completion_tokens}"
        )


if __name__ == "__main__":
    main()
