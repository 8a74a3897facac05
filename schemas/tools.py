"""Tool calls and their results in an interaction: the typed steps, and reading them from chat messages.

Input ``messages`` may carry tool traffic in three shapes: OpenAI's chat format (an assistant turn's
``tool_calls``, ``tool`` turns with ``tool_call_id``), its legacy functions (an assistant's
``function_call``, ``function`` turns with ``name``), and content parts (``text``; the tool parts of
``schemas.tool_pairing``: GenAI's ``tool_call`` and ``tool_call_response``, the Responses API's
``function_call`` and ``function_call_output``; in ``parts`` or in a list ``content``; a result part may
come in a turn of any role, as Pydantic AI writes them under ``user``). ``read_messages`` turns them into
the text turns of the conversation and a list of ``ToolStep``, each result paired with its call by the
rule of ``schemas.tool_pairing`` (the one the OpenTelemetry reader uses).

What cannot be used as given is judged with what is there and named in the interaction's ``flags``
(``FLAG_*`` below, each ``"<code>: <where>"``); a shape that cannot be read at all is refused, naming the
field (one dead letter, as for any invalid interaction).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from schemas.json_depth import json_depth_exceeds, value_depth_exceeds
from schemas.json_input import json_value
from schemas.settings import Limits
from schemas.tool_pairing import (
    CALL_ID_KEYS,
    CALL_PARTS,
    RESULT_PARTS,
    TOOL_PARTS,
    CallFound,
    ResultFound,
    StepPairing,
    opt_str,
    part_call,
    part_call_id,
    part_result,
)
from schemas.utc import utc
from schemas.validation import problems

#: a tool-call's arguments were a string that is not JSON: kept as the string
FLAG_ARGUMENTS_NOT_JSON = "arguments_not_json"
#: a tool-call's arguments nested deeper than ``limits.max_json_depth``: kept as their JSON text
FLAG_ARGUMENTS_TOO_DEEP = "tool_arguments_too_deep"
#: a tool-call's arguments were over ``limits.max_tool_arguments_chars``: kept as their JSON text, cut
FLAG_ARGUMENTS_TRUNCATED = "tool_arguments_truncated"
#: a tool result was over ``limits.max_tool_result_chars``: cut (the step is marked ``truncated``)
FLAG_RESULT_TRUNCATED = "tool_result_truncated"
#: a tool result held parts that are not text (an image, a file): the text parts were kept
FLAG_RESULT_NOT_TEXT = "tool_result_not_text"
#: a turn's content held parts that are not text: the text parts were kept
FLAG_CONTENT_NOT_TEXT = "content_not_text"
#: more steps than ``limits.max_steps``: the earliest were dropped
FLAG_STEPS_DROPPED = "steps_dropped"

StepStatus = Literal["ok", "error", "no_result"]


def json_text(value: Any) -> str:
    """Compact JSON text of a value (UTF-8 kept as is); ``str(value)`` for what JSON cannot hold."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return str(value)


def drop_nulls(data: Any) -> Any:
    """A message as read, its keys whose value is null dropped (a field left null means not given)."""
    if isinstance(data, dict):
        return {k: v for k, v in data.items() if v is not None}
    return data


#: keys of a JSON object result that mark it as an error when their value is true-ish
_ERROR_KEYS = ("error", "errors", "exception")
_ERROR_FLAGS = ("is_error", "isError")
_ERROR_PREFIXES = ("error:", "error -", "exception:", "traceback (most recent call last)")


def is_error_result(result: str | None) -> bool:
    """Whether a tool's result reports an error: a JSON object with a non-empty ``error``, ``errors`` or
    ``exception`` key, or ``is_error`` / ``isError`` true (MCP), or a text starting ``Error:``,
    ``Exception:`` or a Python traceback (case-insensitive)."""
    if result is None:
        return False
    text = result.strip()
    if text.startswith("{"):
        ok, value = json_value(text)
        if ok and isinstance(value, dict):
            if any(value.get(k) is True for k in _ERROR_FLAGS):
                return True
            return any(value.get(k) not in (None, False, "", [], {}) for k in _ERROR_KEYS)
    return text[:40].lower().startswith(_ERROR_PREFIXES)


class ToolStep(BaseModel):
    """One tool call and its result, as the model saw them before answering (in the order they
    happened). Given directly in ``Interaction.steps`` or read from ``messages``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="the tool's (function's) name")
    call_id: str | None = Field(
        None,
        description="the call's id (OpenAI tool_call id, GenAI gen_ai.tool.call.id) that pairs the call "
        "with its result; None when the format has none (legacy functions)",
    )
    arguments: dict[str, Any] | str | None = Field(
        None,
        description="the call's arguments: a JSON object (a JSON string that parses to an object is kept "
        "as the object); a string that is not JSON is kept as the string and the interaction flagged "
        "arguments_not_json; arguments nested deeper than limits.max_json_depth are kept as their JSON "
        "text (flagged tool_arguments_too_deep); arguments over limits.max_tool_arguments_chars are kept "
        "as their JSON text cut to it (flagged tool_arguments_truncated); None: no arguments",
    )
    result: str | None = Field(
        None,
        description="what the tool returned, as text (a JSON result is kept as its JSON text); None when "
        "no result came",
    )
    status: StepStatus = Field(
        "ok",
        description="ok; error (the tool failed: an error status or exception on its span, or an error "
        "result, schemas.tools.is_error_result); no_result (no result arrived). When not given: "
        "no_result without a result, error for an error result, else ok",
    )
    started_at: datetime | None = Field(None, description="when the tool started (UTC), where known")
    duration_ms: float | None = Field(None, ge=0, description="how long the tool ran, where known")
    truncated: bool = Field(
        False,
        description="the result was cut to limits.max_tool_result_chars (flagged tool_result_truncated)",
    )
    earlier_turn: bool = Field(
        False,
        description="the call belongs to a user turn before the current question (its result counts as "
        "evidence only with pipeline.tool_evidence_earlier_turns)",
    )

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any, info: ValidationInfo) -> Any:
        """Nulls dropped; a result that is not text kept as its JSON text; arguments that are a JSON
        object kept as the object unless they nest deeper than ``max_json_depth`` (the limits in the
        validation context, else the default ones): then kept as their JSON text, which any later stage
        can write out (``step_flags`` flags them)."""
        if not isinstance(data, dict):
            return data
        ctx = info.context if isinstance(info.context, dict) else {}
        limits = ctx.get("limits")
        max_depth = (limits if isinstance(limits, Limits) else Limits()).max_json_depth
        data = {k: v for k, v in data.items() if v is not None or k == "result"}
        result = data.get("result")
        if result is not None and not isinstance(result, str):
            data["result"] = json_text(result)
        arguments = data.get("arguments")
        if isinstance(arguments, str):
            if not arguments.strip():
                data.pop("arguments")
            elif not json_depth_exceeds(arguments, max_depth):
                ok, value = json_value(arguments, max_depth)
                if ok and isinstance(value, dict):
                    data["arguments"] = value
        elif isinstance(arguments, dict) and value_depth_exceeds(arguments, max_depth):
            data["arguments"] = json_text(arguments)
        elif arguments is not None and not isinstance(arguments, dict):
            data["arguments"] = json_text(arguments)  # a list or a number: kept as its JSON text
        if "status" not in data:
            result = data.get("result")
            data["status"] = "no_result" if result is None else "error" if is_error_result(result) else "ok"
        return data

    @field_validator("started_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        return utc(value)

    @property
    def arguments_text(self) -> str:
        """The arguments as text: compact JSON of an object, the string as given, '' for none."""
        if self.arguments is None:
            return ""
        return self.arguments if isinstance(self.arguments, str) else json_text(self.arguments)


def arguments_are_json(step: ToolStep, max_depth: int) -> bool:
    """False for arguments kept as a string that is not JSON (flagged arguments_not_json) within
    ``max_depth`` (``limits.max_json_depth``)."""
    if not isinstance(step.arguments, str):
        return True
    return json_value(step.arguments, max_depth)[0]


def limit_steps(
    steps: Sequence[ToolStep], max_steps: int, max_result_chars: int, max_arguments_chars: int
) -> tuple[list[ToolStep], list[str]]:
    """The steps cut to the limits, and the flags saying what was cut: at most ``max_steps`` steps (the
    latest kept), each result at most ``max_result_chars`` (marked ``truncated``) and each argument
    object at most ``max_arguments_chars`` as JSON (kept as its JSON text, cut)."""
    flags: list[str] = []
    kept = list(steps)
    if len(kept) > max_steps:
        dropped = len(kept) - max_steps
        flags.append(
            f"{FLAG_STEPS_DROPPED}: the {dropped} earliest of {len(kept)} steps (max_steps {max_steps})"
        )
        kept = kept[dropped:]
    out: list[ToolStep] = []
    for i, step in enumerate(kept):
        update: dict[str, Any] = {}
        if step.result is not None and len(step.result) > max_result_chars:
            update["result"] = step.result[:max_result_chars]
            update["truncated"] = True
            flags.append(
                f"{FLAG_RESULT_TRUNCATED}: steps[{i}] ({step.name}) had {len(step.result)} characters "
                f"(max_tool_result_chars {max_result_chars})"
            )
        text = step.arguments_text
        if len(text) > max_arguments_chars:
            update["arguments"] = text[:max_arguments_chars]
            flags.append(
                f"{FLAG_ARGUMENTS_TRUNCATED}: steps[{i}] ({step.name}) had {len(text)} characters "
                f"(max_tool_arguments_chars {max_arguments_chars})"
            )
        out.append(step.model_copy(update=update) if update else step)
    return out, flags


def step_flags(steps: Sequence[ToolStep], flags: Sequence[str] = (), max_depth: int = 0) -> list[str]:
    """The flags the steps themselves call for: arguments kept as JSON text because they nest deeper
    than ``max_depth`` (``limits.max_json_depth``; 0: the default limit), and arguments kept as a
    string that is not JSON (except arguments that ``flags`` already says were cut to the limit: their
    JSON text is cut)."""
    max_depth = max_depth or Limits().max_json_depth
    cut = {f.split(" ", 2)[1] for f in flags if f.startswith(f"{FLAG_ARGUMENTS_TRUNCATED}: ")}
    out: list[str] = []
    for i, s in enumerate(steps):
        if isinstance(s.arguments, str) and json_depth_exceeds(s.arguments, max_depth):
            out.append(
                f"{FLAG_ARGUMENTS_TOO_DEEP}: steps[{i}] ({s.name}) nested deeper than {max_depth} levels "
                f"(max_json_depth)"
            )
        elif not arguments_are_json(s, max_depth) and f"steps[{i}]" not in cut:
            out.append(f"{FLAG_ARGUMENTS_NOT_JSON}: steps[{i}] ({s.name})")
    return out


# --------------------------------------------------------------------------------------------------
# Messages


class Part(BaseModel):
    """One part of a turn's content: OpenAI's ``{"type": "text", "text": ...}``, the GenAI semantic
    conventions' ``text`` (``content``), a tool call (``tool_call``, ``function_call``: ``id``, ``name``,
    ``arguments``) or a tool result (``tool_call_response``, ``function_call_output``, ``tool_result``:
    the call's ``id``, the value under ``response``, ``result``, ``output`` or ``content``); other types
    (images, files) are kept aside and flagged, not read."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: str = Field(
        min_length=1, description="text, a tool part (schemas.tool_pairing.TOOL_PARTS), or another type"
    )

    @model_validator(mode="after")
    def _complete(self) -> Part:
        extra = self.model_extra or {}
        if self.type == "text":
            text = extra.get("text", extra.get("content"))
            if not isinstance(text, str):
                raise ValueError("a text part needs text (or content) as a string")
        elif self.type in CALL_PARTS and part_call(extra) is None:
            raise ValueError(f"a {self.type} part needs a name (a non-empty string)")
        if self.type in TOOL_PARTS:
            for key in CALL_ID_KEYS:
                if extra.get(key) is not None and not isinstance(extra.get(key), str):
                    raise ValueError(f"a {self.type} part's {key} must be a string")
        return self

    def get(self, key: str) -> Any:
        return (self.model_extra or {}).get(key)

    @property
    def text(self) -> str:
        value = self.get("text")
        return value if isinstance(value, str) else str(self.get("content") or "")


class FunctionCall(BaseModel):
    """OpenAI's ``function`` of a tool call (and the legacy ``function_call``): a name and arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="the function's name")
    arguments: str | dict[str, Any] | list[Any] | None = Field(
        None, description="a JSON string (as OpenAI sends it) or an object"
    )


class ChatToolCall(BaseModel):
    """One entry of an assistant turn's ``tool_calls``: ``{"id", "type": "function", "function"}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = Field(None, description="the call's id; a tool turn's tool_call_id names it")
    type: Literal["function"] = Field("function", description="always function")
    function: FunctionCall

    @model_validator(mode="before")
    @classmethod
    def _drop_nulls(cls, data: Any) -> Any:
        return drop_nulls(data)


MessageRole = Literal["system", "user", "assistant", "tool", "function"]


class InputMessage(BaseModel):
    """One turn of an input conversation (``Interaction.messages``): OpenAI's chat format with tools, its
    legacy functions, or the GenAI semantic conventions' parts. Keys whose value is null are ignored; any
    other unknown key is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: MessageRole = Field(description="system, user, assistant, tool or function")
    content: str | list[Part] | None = Field(
        None, description="a string, or a list of parts (text, tool_call, tool_call_response, ...)"
    )
    parts: list[Part] | None = Field(None, description="the GenAI semantic conventions' parts")
    name: str | None = Field(None, description="the speaker's name; a function turn's function name")
    tool_calls: list[ChatToolCall] | None = Field(None, description="an assistant turn's tool calls")
    function_call: FunctionCall | None = Field(None, description="an assistant turn's legacy function call")
    tool_call_id: str | None = Field(None, description="a tool turn: the id of the call it answers")
    finish_reason: str | None = Field(None, description="the GenAI conventions' finish reason; not read")
    refusal: str | None = Field(
        None, description="OpenAI's refusal text of an assistant turn: its text when content is null"
    )
    annotations: list[Any] | None = Field(None, description="OpenAI's annotations (URL citations); not read")

    @model_validator(mode="before")
    @classmethod
    def _drop_nulls(cls, data: Any) -> Any:
        """Null keys dropped; a tool or function turn's content that is a JSON object, number or boolean
        (some frameworks log the tool's return value as it was) kept as its JSON text."""
        if not isinstance(data, dict):
            return data
        data = drop_nulls(data)
        content = data.get("content")
        if data.get("role") in ("tool", "function") and isinstance(content, dict | int | float | bool):
            data["content"] = json_text(content)
        return data

    @model_validator(mode="after")
    def _shape(self) -> InputMessage:
        if self.content is not None and self.parts is not None:
            raise ValueError("give content or parts, not both")
        if (self.tool_calls or self.function_call) and self.role != "assistant":
            raise ValueError(f"only an assistant turn calls tools (this turn's role is {self.role})")
        if self.tool_call_id is not None and self.role != "tool":
            raise ValueError(f"tool_call_id belongs to a tool turn (this turn's role is {self.role})")
        if self.role == "function" and not self.name:
            raise ValueError("a function turn needs the function's name")
        if self.role in ("system", "user") and self.content is None and self.parts is None:
            raise ValueError(f"a {self.role} turn needs content (or parts)")
        return self

    @field_validator("content", "parts", mode="before")
    @classmethod
    def _parts(cls, value: Any) -> Any:
        """A list of parts, each read as a ``Part``: an error names the part by its position."""
        if not isinstance(value, list):
            return value
        parts: list[Part] = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise ValueError(f'part {i} is not an object ({{"type": "text", "text": ...}})')
            try:
                parts.append(Part.model_validate(item))
            except ValidationError as exc:
                reason = "; ".join(p.why for p in problems(exc))
                raise ValueError(f"part {i}: {reason}") from None
        return parts

    @property
    def all_parts(self) -> list[Part]:
        if isinstance(self.content, list):
            return list(self.content)
        return list(self.parts or [])


class TextTurn(BaseModel):
    """A text turn read from the messages: its role, text and name, at its position."""

    model_config = ConfigDict(frozen=True)

    index: int
    role: Literal["system", "user", "assistant"]
    content: str
    name: str | None = None
    #: an assistant turn that also called tools (its text is the model's commentary, not an answer)
    calls_tools: bool = False


@dataclass
class ReadMessages:
    """What ``read_messages`` found: the text turns, the steps (each with the index of the message that
    called it, or of its result when no call came first) and the flags."""

    turns: list[TextTurn] = field(default_factory=list)
    steps: list[tuple[int, ToolStep]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


def _result_text(content: str | list[Part] | None, where: str, flags: list[str]) -> str | None:
    if content is None:
        return None
    if isinstance(content, str):
        return content
    texts: list[str] = []
    other: list[str] = []
    for part in content:
        if part.type == "text":
            texts.append(part.text)
        else:
            other.append(part.type)
    if other:
        flags.append(f"{FLAG_RESULT_NOT_TEXT}: {where} held {', '.join(sorted(set(other)))} parts")
    return "\n".join(texts) if texts else None


class _Reader:
    """The turns of a conversation read one by one: text turns kept, tool calls and results handed to
    the pairing (``schemas.tool_pairing``)."""

    def __init__(self, out: ReadMessages) -> None:
        self.out = out
        self.pairing = StepPairing()

    def call(self, at: int, found: CallFound | None) -> None:
        if found is not None:
            self.pairing.call(found, at=at)

    def answer(self, at: int, call_id: str | None, name: str | None, result: str | None, where: str) -> None:
        self.pairing.result(ResultFound(call_id, name, result, where=where), at=at)

    def result_part(self, at: int, part: Part, message: InputMessage, where: str) -> None:
        extra = part.model_extra or {}
        value = part_result(extra)
        text = None if value is None else value if isinstance(value, str) else json_text(value)
        call_id = part_call_id(extra) or message.tool_call_id
        self.answer(at, call_id, opt_str(extra.get("name")) or message.name, text, where)

    def results_turn(self, i: int, message: InputMessage, where: str) -> None:
        """A ``tool`` or legacy ``function`` turn: its results, each answering its call."""
        if message.role == "function":
            self.answer(i, None, message.name, _result_text(message.content, where, self.out.flags), where)
            return
        responses = [p for p in message.all_parts if p.type in RESULT_PARTS]
        for part in responses:
            self.result_part(i, part, message, where)
        if not responses:
            content = message.content if message.parts is None else message.parts
            result = _result_text(content, where, self.out.flags)
            self.answer(i, message.tool_call_id, message.name, result, where)

    def text_turn(self, i: int, message: InputMessage, where: str) -> TextTurn | None:
        """A system, user or assistant turn: its calls and results read; its text turn, None for a turn
        of tool results only or an assistant turn of calls only."""
        texts: list[str] = []
        other: list[str] = []
        called = False
        if isinstance(message.content, str):
            texts.append(message.content)
        elif message.content is None and message.refusal:
            texts.append(message.refusal)
        for part in message.all_parts:
            if part.type == "text":
                texts.append(part.text)
            elif part.type in CALL_PARTS:
                self.call(i, part_call(part.model_extra or {}))
                called = True
            elif part.type in RESULT_PARTS:
                self.result_part(i, part, message, where)
            else:
                other.append(part.type)
        for tool_call in message.tool_calls or []:
            self.call(i, CallFound(tool_call.id, tool_call.function.name, tool_call.function.arguments))
            called = True
        if message.function_call is not None:
            self.call(i, CallFound(None, message.function_call.name, message.function_call.arguments))
            called = True
        if other:
            self.out.flags.append(
                f"{FLAG_CONTENT_NOT_TEXT}: {where} held {', '.join(sorted(set(other)))} parts"
            )
        text = "\n".join(t for t in texts if t)
        only_results = not texts and any(p.type in RESULT_PARTS for p in message.all_parts)
        if only_results or (message.role == "assistant" and not text):
            return None
        role = message.role
        assert role in ("system", "user", "assistant")  # tool and function turns are results turns
        return TextTurn(index=i, role=role, content=text, name=message.name, calls_tools=called)


def read_messages(messages: Sequence[InputMessage]) -> ReadMessages:
    """The text turns and tool steps of a conversation, in order, each result paired with its call
    (``schemas.tool_pairing.StepPairing``); a result that pairs with no call becomes a step of its own
    (status from its result) and is flagged; a call whose result never came is a step with status
    ``no_result``. ``earlier_turn`` is left False here (the interaction sets it once it knows which user
    turn is the question)."""
    out = ReadMessages()
    reader = _Reader(out)
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if message.role in ("tool", "function"):
            reader.results_turn(i, message, where)
            continue
        turn = reader.text_turn(i, message, where)
        if turn is not None:
            out.turns.append(turn)
    pairing = reader.pairing
    out.steps = [(s.at, ToolStep.model_validate(s.as_dict())) for s in pairing.steps]
    out.flags.extend(pairing.flags())
    return out
