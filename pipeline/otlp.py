"""OpenTelemetry traces and logs (OTLP/JSON) -> interactions: one per final answer of a trace, its
question and answer, the tool calls and results of the trace as its ``steps``, the retrieved passages of
the trace as its context.

**One interaction per final answer** (``convert_trace``; ``pipeline.otlp_join`` holds a trace's pieces
until it is complete):

- a *model call* is an OpenInference LLM span, a GenAI ``chat`` / ``text_completion`` /
  ``generate_content`` span, or a span with input messages that no convention marks as something else:
  chain, agent, workflow and tool spans (``openinference.span.kind``, ``traceloop.span.kind``,
  ``gen_ai.operation.name`` ``invoke_agent``...) carry the messages they were given and are not calls;
- a call whose output is only tool calls is a step of the trace's answer, not an interaction;
- of the calls that answer in text, the interaction is the answer returned to the user: the call whose
  answer is the output of the trace's outermost agent span (``invoke_agent``, OpenInference AGENT,
  OpenLLMetry agent or workflow), else the last to answer; the others (sub-agents, handoffs) are steps
  named by their agent, their question as arguments and their answer as result;
- the steps are the tool calls and results of the answering call's input messages (OpenAI's
  ``tool_calls`` and ``tool`` turns, GenAI ``tool_call`` / ``tool_call_response`` parts, also under role
  ``user`` as Pydantic AI writes them), the outputs of the calls that only asked for tools, and the tool
  spans (GenAI ``execute_tool``, OpenInference TOOL, OpenLLMetry ``tool``; LangChain's serialised
  ToolMessage and ``{"lc": 1, ...}`` form unwrapped), one step per call (``_Steps`` pairs them); a span's
  error status or exception event makes its step an error; a call without a result has none
  (``no_result``); a call before the question's turn is ``earlier_turn``;
- a call with neither text nor tool calls is an error with the reason (the worker dead-letters it);
- the conversation id is ``gen_ai.conversation.id``, ``session.id`` or
  ``traceloop.association.properties.session_id`` of the call, else of the spans above it, else of any
  span of the trace.

A model call is read from its span, from its log records (GenAI events), or from both, joined by trace
and span id:

- **span attributes**: the GenAI semantic conventions (``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` and ``gen_ai.system_instructions``, JSON strings or structured values, with
  ``parts``), OpenLLMetry's indexed ``gen_ai.prompt.N.role|content`` / ``gen_ai.completion.N.content``,
  or OpenInference (``llm.input_messages.N.message.role|content`` or ``...message.contents.M.
  message_content.type|text``, ``llm.output_messages.N...``, else ``input.value`` / ``output.value``);
- **log records**: ``gen_ai.client.inference.operation.details`` (the same ``gen_ai.*.messages``
  attributes, structured), or the semantic conventions 1.30 events ``gen_ai.system.message``,
  ``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message`` and ``gen_ai.choice``
  (the content in the body), in the order they were recorded;
- **content** in any layout: a string; an array of parts (``text`` parts joined; images, audio, files
  counted under ``metadata.parts_not_judged``, not judged; tool parts read as steps); a string holding a
  JSON array of parts (OpenLLMetry); a structured value;
- **retrieval**: OpenInference RETRIEVER spans (``retrieval.documents.N.document.content|id``) and GenAI
  ``retrieval`` spans (``gen_ai.retrieval.documents``, a JSON string or structured list of
  ``{id, score, content}``: the specification requires only id and score, which carry no text to judge
  against, so only documents with ``content`` become passages). Each passage becomes the context of
  the final answer its retrieval span belongs to: the first that ends after the span starts (the rule
  that gives tool spans to their answer), so a trace that spans several turns judges each answer
  against what was retrieved for it, not what a later turn retrieved;
- the **conversation**: the input messages become the interaction's ``messages`` (roles user, human or
  none -> user; assistant, ai, model, bot -> assistant; system, developer -> system), so the last user
  message that asks something is the question and the turns before it the history. Tool turns (read as
  steps) and turns without text are left out; ``metadata.turns`` still counts every input message;
- the **app** is the resource's ``service.name``; the model ``gen_ai.response.model``,
  ``gen_ai.request.model`` or ``llm.model_name`` (of the span, else of the records); the ground truth
  ``groundwatch.ground_truth``.

The interaction id is the trace id and the answering call's span id, so a re-exported trace is the same
interaction. A call that cannot be mapped is returned with the reason (the worker dead-letters it).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ValidationError

from schemas.document_names import document_name
from schemas.interaction import Interaction
from schemas.json_input import json_value
from schemas.settings import Limits
from schemas.tools import FLAG_RESULT_NOT_TEXT, FLAG_RESULT_WITHOUT_CALL, json_text
from schemas.validation import describe_validation_error

MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
#: span message roles -> the interaction's turn roles; other roles (tool, function) are not conversation
ROLES = {
    "user": "user",
    "human": "user",
    "": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "system": "system",
    "developer": "system",
}
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
#: semantic conventions 1.30: one event per input message (its role from the name) and per choice
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
GENAI_EVENTS = (DETAILS_EVENT, CHOICE_EVENT, *MESSAGE_EVENTS)
NO_CONTENT = (
    "no message content on the span (content capture is off, or it was recorded as log events: "
    "export logs too)"
)
NO_CONTENT_IN_RECORDS = (
    "no message content on the span nor in its log records (content capture is off in the instrumentation)"
)


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for (an assistant message's ``tool_calls``, a ``tool_call`` part)."""

    call_id: str | None
    name: str
    arguments: Any


@dataclass(frozen=True)
class ToolResult:
    """A tool's result as the model received it (a ``tool`` message, a ``tool_call_response`` part)."""

    call_id: str | None
    name: str | None
    result: str | None
    error: bool = False


@dataclass(frozen=True)
class Message:
    role: str
    text: str
    not_judged: tuple[str, ...] = ()  # the kinds of the parts that are not text nor tools (image_url...)
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    name: str
    start_ns: int
    resource: dict[str, Any]
    attrs: dict[str, Any]
    parent_id: str = ""
    end_ns: int = 0


@dataclass(frozen=True)
class ToolSpan:
    """A tool execution recorded as a span of its own (GenAI ``execute_tool``, an OpenInference TOOL
    span, an OpenLLMetry ``tool`` span)."""

    span_id: str
    parent_id: str
    name: str
    call_id: str | None
    arguments: Any
    result: str | None
    error: bool
    start_ns: int
    end_ns: int
    not_text: str | None = None  # the kind of a result recorded as a value that is not text (``bytes``)


@dataclass(frozen=True)
class SpanInfo:
    """What is kept of a trace's other spans: its place in the tree, the conversation ids it carries,
    and, for an agent (``invoke_agent``, OpenInference AGENT, OpenLLMetry agent or workflow), its output."""

    span_id: str
    parent_id: str
    name: str
    start_ns: int
    ids: dict[str, str]
    agent: bool = False
    output: str = ""


@dataclass(frozen=True)
class Record:
    """A GenAI event (log record) of a model call."""

    trace_id: str
    span_id: str
    event: str
    time_ns: int
    resource: dict[str, Any]
    attrs: dict[str, Any]
    body: Any


@dataclass
class Call:
    """What is known of one model call: its span, its log records, or both."""

    trace_id: str
    span_id: str
    span: Span | None = None
    records: list[Record] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return self.trace_id, self.span_id

    @property
    def name(self) -> str:
        return self.span.name if self.span else (self.records[0].event if self.records else "")

    def span_has_content(self) -> bool:
        return self.span is not None and any(messages(self.span.attrs))

    def records_complete(self) -> bool:
        """Its records hold both sides of the call: a details event, or 1.30 events with a choice."""
        events = {r.event for r in self.records}
        return DETAILS_EVENT in events or (CHOICE_EVENT in events and bool(events & set(MESSAGE_EVENTS)))

    def complete(self) -> bool:
        return self.span_has_content() or self.records_complete()


@dataclass(frozen=True)
class Passage:
    """One retrieved passage, with its retrieval span's start and parent (0 and "" where unknown): the
    start places it in its turn (``convert_trace``)."""

    text: str
    document: str | None
    start_ns: int = 0
    parent_id: str = ""


@dataclass(frozen=True)
class Batch:
    """What one export request (traces or logs) holds: model calls' spans and records, tool spans, the
    other spans' place in their trace, and passages."""

    spans: list[Span]
    records: list[Record]
    passages: dict[str, list[Passage]]  # trace id -> passages of its retrieval spans
    read: int = 0  # spans and log records of any kind in the request
    #: model-call pieces that cannot be joined to their call (no trace and span ids), with the reason
    unjoinable: list[CallError] = field(default_factory=list)
    tools: dict[str, list[ToolSpan]] = field(default_factory=dict)  # trace id -> its tool spans
    others: dict[str, list[SpanInfo]] = field(default_factory=dict)  # trace id -> its other spans


@dataclass(frozen=True)
class CallError:
    trace_id: str
    span_id: str
    name: str
    reason: str


# ---- OTLP/JSON values ---------------------------------------------------------------------------------
def attribute_value(value: Any) -> Any:
    """An OTLP AnyValue as Python (None for an absent or empty one); ValueError for a value that is not
    shaped as one (``{"intValue": null}``, an ``arrayValue`` that is a list...)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"a value is {type(value).__name__}, not an AnyValue object")
    try:
        if "stringValue" in value:
            text = value["stringValue"]
            if text is not None and not isinstance(text, str):
                raise ValueError(f"stringValue is {type(text).__name__}")
            return text
        if "intValue" in value:
            return int(value["intValue"])
        if "doubleValue" in value:
            return float(value["doubleValue"])
        if "boolValue" in value:
            return bool(value["boolValue"])
        if "arrayValue" in value:
            return [attribute_value(v) for v in _values(value["arrayValue"], "arrayValue")]
        if "kvlistValue" in value:
            return attributes(_values(value["kvlistValue"], "kvlistValue"))
    except TypeError as exc:  # int(None), float([])...
        raise ValueError(f"{next(iter(value), 'value')}: {exc}") from None
    return None


def _values(holder: Any, kind: str) -> list[Any]:
    """The ``values`` list of an arrayValue or kvlistValue (absent or null: empty)."""
    if holder is None:
        return []
    if not isinstance(holder, dict):
        raise ValueError(f"{kind} is {type(holder).__name__}, not an object with values")
    values = holder.get("values") or []
    if not isinstance(values, list):
        raise ValueError(f"{kind}.values is {type(values).__name__}, not a list")
    return values


def attributes(items: Any) -> dict[str, Any]:
    """OTLP attributes (a list of ``{"key", "value"}``) as a dict; ValueError naming the first malformed
    one, so the request is dead-lettered with the reason instead of read half."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise ValueError(f"attributes are {type(items).__name__}, not a list")
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"an attribute is {type(item).__name__}, not an object")
        if "key" not in item:
            continue
        key = item["key"]
        if not isinstance(key, str):
            raise ValueError(f"an attribute key is {type(key).__name__}, not a string")
        try:
            out[key] = attribute_value(item.get("value"))
        except ValueError as exc:
            raise ValueError(f"attribute {key!r}: {exc}") from None
    return out


# ---- content ------------------------------------------------------------------------------------------
def _json_list(text: str) -> list[Any] | None:
    """A string that holds a JSON array of content parts (OpenLLMetry writes array content so)."""
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")):
        return None
    ok, parsed = json_value(stripped)
    if not ok or not isinstance(parsed, list) or not parsed:
        return None
    return parsed if all(isinstance(p, dict) and "type" in p for p in parsed) else None


def content(value: Any) -> tuple[str, tuple[str, ...]]:
    """Message content in any layout -> (its text, the kinds of its parts that are not text)."""
    if isinstance(value, str):
        parts = _json_list(value)
        return content(parts) if parts is not None else (value, ())
    if isinstance(value, list):
        texts: list[str] = []
        other: list[str] = []
        for part in value:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                kind = str(part.get("type", "text"))
                text = part.get("text", part.get("content"))
                if kind in ("text", "input_text", "output_text") and text is not None:
                    inner, nested = content(text)
                    texts.append(inner)
                    other.extend(nested)
                elif kind not in TOOL_PARTS:
                    other.append(kind)
        return "\n".join(t for t in texts if t), tuple(other)
    if isinstance(value, dict):
        return content(value.get("parts", value.get("content", value.get("text", ""))))
    return "", ()


#: content parts that are tool calls or tool results (read as steps, not counted as parts not judged)
CALL_PARTS = ("tool_call", "function_call")
RESULT_PARTS = ("tool_call_response", "function_call_output", "tool_result")
TOOL_PARTS = frozenset(CALL_PARTS + RESULT_PARTS)


def as_text(value: Any) -> str | None:
    """A tool result or argument as text: a string as it is, anything else as JSON (None stays None)."""
    if value is None or isinstance(value, str):
        return value
    return json_text(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _openai_tool_call(item: Any) -> ToolCall | None:
    """OpenAI's ``{"id", "type": "function", "function": {"name", "arguments"}}`` or a flat
    ``{"id", "name", "arguments"}``."""
    if not isinstance(item, dict):
        return None
    inner = item.get("function")
    function: dict[str, Any] = inner if isinstance(inner, dict) else item
    name = function.get("name")
    if not name:
        return None
    return ToolCall(_opt_str(item.get("id") or item.get("call_id")), str(name), function.get("arguments"))


def _part_tools(value: Any) -> tuple[list[ToolCall], list[ToolResult]]:
    """The tool calls and tool results among content parts (GenAI ``tool_call`` / ``tool_call_response``
    with ``response`` or ``result``; the Responses API's ``function_call`` / ``function_call_output``)."""
    if isinstance(value, str):
        parts = _json_list(value)
        if parts is None:
            return [], []
        value = parts
    if isinstance(value, dict):
        value = value.get("parts", value.get("content"))
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for part in value if isinstance(value, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in CALL_PARTS:
            found = _openai_tool_call(part)
            if found is not None:
                calls.append(found)
        elif kind in RESULT_PARTS:
            result = next((part[k] for k in ("response", "result", "output", "content") if k in part), None)
            call_id = _opt_str(part.get("id") or part.get("call_id") or part.get("tool_call_id"))
            results.append(ToolResult(call_id, _opt_str(part.get("name")), as_text(result)))
    return calls, results


def _message(role: Any, value: Any, fields: dict[str, Any] | None = None) -> Message:
    """A message from its role and content, with the tool calls and results it carries: parts of its
    content, OpenAI's ``tool_calls`` beside it, or (role ``tool``/``function``) the message itself, a
    result for ``tool_call_id``."""
    text, other = content(value)
    calls, results = _part_tools(value)
    fields = fields or {}
    for item in fields.get("tool_calls") or []:
        found = _openai_tool_call(item)
        if found is not None:
            calls.append(found)
    if isinstance(fields.get("function_call"), dict):
        found = _openai_tool_call(fields["function_call"])
        if found is not None:
            calls.append(found)
    role_text = str(role or "")
    if role_text.strip().lower() in ("tool", "function", "ipython") and not results:
        result = text if text or not isinstance(value, (dict, list)) else as_text(value)
        call_id = _opt_str(fields.get("tool_call_id") or fields.get("id"))
        results.append(ToolResult(call_id, _opt_str(fields.get("name")), result))
        text = ""
    return Message(role_text, text, other, tuple(calls), tuple(results))


def _structured(raw: Any) -> list[Any]:
    """A ``gen_ai.*.messages`` value: a JSON string or a structured (non-string) value."""
    if isinstance(raw, str):
        ok, raw = json_value(raw)
        if not ok:
            return []
    if isinstance(raw, dict):
        return [raw]
    return raw if isinstance(raw, list) else []


def _json_messages(raw: Any) -> list[Message]:
    return [
        _message(m.get("role"), m.get("parts", m.get("content", "")), m)
        for m in _structured(raw)
        if isinstance(m, dict)
    ]


def _indexed(attrs: dict[str, Any], prefix: str, role: str, text: str) -> list[Message]:
    """Messages stored as ``prefix.N.role`` / ``prefix.N.<text>`` (N = 0, 1, ...); OpenInference's
    ``prefix.N.message.contents.M.message_content.type|text`` parts too."""
    out = []
    n = 0
    while any(k.startswith(f"{prefix}.{n}.") for k in attrs):
        value: Any = attrs.get(f"{prefix}.{n}.{text}")
        if value is None:
            value = _openinference_parts(attrs, f"{prefix}.{n}.message.contents")
        fields = _indexed_tool_fields(attrs, f"{prefix}.{n}.{text.rpartition('.')[0]}".rstrip("."))
        out.append(_message(attrs.get(f"{prefix}.{n}.{role}"), value if value is not None else "", fields))
        n += 1
    return out


def _first_of(attrs: dict[str, Any], prefix: str, *keys: str) -> Any:
    return next((attrs[prefix + k] for k in keys if attrs.get(prefix + k) is not None), None)


def _indexed_tool_fields(attrs: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The tool fields of an indexed message as OpenAI's: OpenLLMetry's ``<prefix>.tool_calls.M.id|name|
    arguments`` and ``<prefix>.tool_call_id``; OpenInference's ``<prefix>.tool_calls.M.tool_call.id|
    function.name|function.arguments`` and ``<prefix>.tool_call_id``."""
    calls = []
    m = 0
    while any(k.startswith(f"{prefix}.tool_calls.{m}.") for k in attrs):
        at = f"{prefix}.tool_calls.{m}."
        calls.append({
            "id": _first_of(attrs, at, "id", "tool_call.id"),
            "name": _first_of(attrs, at, "name", "tool_call.function.name"),
            "arguments": _first_of(attrs, at, "arguments", "tool_call.function.arguments"),
        })  # fmt: skip
        m += 1
    return {
        "tool_calls": calls,
        "tool_call_id": attrs.get(f"{prefix}.tool_call_id"),
        "name": attrs.get(f"{prefix}.name"),
    }


def _openinference_parts(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]] | None:
    parts = []
    m = 0
    while f"{prefix}.{m}.message_content.type" in attrs:
        kind = str(attrs[f"{prefix}.{m}.message_content.type"])
        parts.append({"type": kind, "text": attrs.get(f"{prefix}.{m}.message_content.text")})
        m += 1
    return parts or None


def _system_instructions(attrs: dict[str, Any]) -> list[Message]:
    """``gen_ai.system_instructions``: text, or parts (a JSON string or structured)."""
    raw = attrs.get("gen_ai.system_instructions")
    return [] if raw is None else [_message("system", raw)]


def messages(attrs: dict[str, Any]) -> tuple[list[Message], list[Message]]:
    """(input messages, output messages) from span or log-record attributes, whichever convention."""
    if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
        inputs = _system_instructions(attrs) + _json_messages(attrs.get("gen_ai.input.messages"))
        return inputs, _json_messages(attrs.get("gen_ai.output.messages"))
    inputs = _indexed(attrs, "gen_ai.prompt", "role", "content")
    if inputs:
        return inputs, _indexed(attrs, "gen_ai.completion", "role", "content")
    inputs = _indexed(attrs, "llm.input_messages", "message.role", "message.content")
    if inputs:
        return inputs, _indexed(attrs, "llm.output_messages", "message.role", "message.content")
    if (
        "input.value" in attrs
        and "output.value" in attrs
        and attrs.get("input.mime_type") != "application/json"
    ):
        return [Message("user", str(attrs["input.value"]))], [
            Message("assistant", str(attrs["output.value"]))
        ]
    return [], []


def record_messages(records: list[Record]) -> tuple[list[Message], list[Message]]:
    """(input, output) messages of a call's log records: its details event, else its 1.30 events in the
    order they were recorded."""
    for record in records:
        if record.event == DETAILS_EVENT:
            return messages(record.attrs)
    inputs: list[Message] = []
    outputs: list[Message] = []
    for record in sorted(records, key=lambda r: r.time_ns):  # (stable: equal stamps keep their order)
        body = record.body if isinstance(record.body, dict) else {"content": record.body}
        if record.event in MESSAGE_EVENTS:
            role = body.get("role") or MESSAGE_EVENTS[record.event]
            fields = {**body, "tool_call_id": body.get("tool_call_id") or body.get("id")}
            inputs.append(_message(role, body.get("content", ""), fields))
        elif record.event == CHOICE_EVENT:
            found = body.get("message")
            message: dict[str, Any] = found if isinstance(found, dict) else {}
            role = message.get("role") or "assistant"
            outputs.append(_message(role, message.get("content", ""), message))
    return inputs, outputs


def documents(attrs: dict[str, Any]) -> list[Passage]:
    """The retrieved passages of a retrieval span (OpenInference or GenAI); documents without text are
    left out."""
    out: list[Passage] = []
    n = 0
    while any(k.startswith(f"retrieval.documents.{n}.") for k in attrs):
        text = attrs.get(f"retrieval.documents.{n}.document.content")
        doc = attrs.get(f"retrieval.documents.{n}.document.id")
        if text:
            out.append(Passage(str(text), str(doc) if doc is not None else None))
        n += 1
    if span_kind(attrs) == "retrieval":
        for item in _structured(attrs.get("gen_ai.retrieval.documents")):
            if isinstance(item, dict) and item.get("content"):
                text, _ = content(item["content"])
                if text:
                    out.append(Passage(text, document_name(item)))
    return out


# ---- export requests ----------------------------------------------------------------------------------
def _objects(value: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(value, list):
        raise ValueError(f"{where} is not a list")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ValueError(f"{where}[{i}] is not an object")
        yield f"{where}[{i}]", item


def check_shape(request: Any) -> None:
    """ValueError naming the first place where an export request (traces or logs) is not shaped as
    OTLP/JSON (objects and lists down to each span's and record's attributes), before anything is read."""
    if not isinstance(request, dict):
        raise ValueError("an export request is a JSON object")
    for kind, scopes, items in (
        ("resourceSpans", "scopeSpans", "spans"),
        ("resourceLogs", "scopeLogs", "logRecords"),
    ):
        for where, resource_items in _objects(request.get(kind, []), kind):
            resource = resource_items.get("resource", {})
            if not isinstance(resource, dict):
                raise ValueError(f"{where}.resource is not an object")
            for _ in _objects(resource.get("attributes", []), f"{where}.resource.attributes"):
                pass
            for scope_at, scope in _objects(resource_items.get(scopes, []), f"{where}.{scopes}"):
                for item_at, item in _objects(scope.get(items, []), f"{scope_at}.{items}"):
                    for _ in _objects(item.get("attributes", []), f"{item_at}.attributes"):
                        pass


def _items(
    request: dict[str, Any], kind: str, scopes: str, items: str
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for resource_items in request.get(kind, []):
        resource = attributes(resource_items.get("resource", {}).get("attributes", []))
        for scope in resource_items.get(scopes, []):
            for item in scope.get(items, []):
                yield resource, item


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _id(value: Any) -> str:
    """A trace or span id; '' when absent or all zeros (OTLP's invalid id)."""
    text = str(value or "")
    return text if text.strip("0") else ""


def _time(item: dict[str, Any], *keys: str) -> int:
    """The first of the item's times (nanoseconds since the epoch, often a string) that is set and not 0."""
    for key in keys:
        value = _int(item.get(key))
        if value:
            return value
    return 0


def _record_key(event: str, time_ns: int, attrs: dict[str, Any], body: Any) -> str:
    """A key of its own for a self-contained record with no ids (a details event outside any span): the
    same for every delivery of the record."""
    text = json.dumps([event, time_ns, attrs, body], sort_keys=True, default=str)
    return "record-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def read_batch(request: dict[str, Any]) -> Batch:
    """The model calls' spans and GenAI records and the retrieved passages of one export request (traces,
    logs, or both); ValueError naming where a request is not shaped as OTLP/JSON (``check_shape``).

    A piece without trace and span ids (absent or all zeros) cannot be joined with the rest of its call:
    a details event, which holds a whole call, becomes a call of its own (keyed by its content); a
    model-call span or a 1.30 per-message event is ``unjoinable``, with the reason."""
    check_shape(request)
    spans: list[Span] = []
    passages: dict[str, list[Passage]] = {}
    unjoinable: list[CallError] = []
    tools: dict[str, list[ToolSpan]] = {}
    others: dict[str, list[SpanInfo]] = {}
    read = 0
    for resource, item in _items(request, "resourceSpans", "scopeSpans", "spans"):
        read += 1
        attrs = attributes(item.get("attributes", []))
        trace, span_id, name = _id(item.get("traceId")), _id(item.get("spanId")), str(item.get("name", ""))
        start = _time(item, "startTimeUnixNano", "endTimeUnixNano")
        end = _time(item, "endTimeUnixNano", "startTimeUnixNano")
        parent = _id(item.get("parentSpanId"))
        found = documents(attrs)
        if found and trace:
            placed = (replace(p, start_ns=start, parent_id=parent) for p in found)
            passages.setdefault(trace, []).extend(placed)
        kind = span_kind(attrs)
        if kind != "model":
            if trace and span_id and kind == "tool":
                tools.setdefault(trace, []).append(tool_span(span_id, parent, name, attrs, item, start, end))
            elif trace and span_id:
                others.setdefault(trace, []).append(span_info(span_id, parent, name, start, attrs, kind))
            continue
        if not (trace and span_id):
            unjoinable.append(CallError(trace, span_id, name, "a model-call span without trace and span ids"))
            continue
        spans.append(Span(trace, span_id, name, start, resource, attrs, parent, end))
    records: list[Record] = []
    for resource, item in _items(request, "resourceLogs", "scopeLogs", "logRecords"):
        read += 1
        attrs = attributes(item.get("attributes", []))
        event = str(item.get("eventName") or attrs.get("event.name") or "")
        if event not in GENAI_EVENTS:
            continue
        trace, span_id = _id(item.get("traceId")), _id(item.get("spanId"))
        time_ns = _time(item, "timeUnixNano", "observedTimeUnixNano")
        body = attribute_value(item.get("body"))
        if not (trace and span_id):
            if event != DETAILS_EVENT:
                reason = (
                    f"a {event} log record without trace and span ids cannot be joined with the other "
                    "records of its call (emit it inside the model call's span)"
                )
                unjoinable.append(CallError(trace, span_id, event, reason))
                continue
            trace, span_id = "", _record_key(event, time_ns, attrs, body)
        records.append(Record(trace, span_id, event, time_ns, resource, attrs, body))
    return Batch(spans, records, passages, read, unjoinable, tools, others)


MODEL_OPERATIONS = ("chat", "text_completion", "generate_content")
AGENT_KINDS = {"invoke_agent", "AGENT", "agent", "workflow"}
INPUT_MESSAGE_KEYS = ("gen_ai.prompt.", "gen_ai.input.messages", "llm.input_messages.")
SpanKind = Literal["model", "tool", "agent", "retrieval", "other"]


def span_kind(attrs: dict[str, Any]) -> SpanKind:
    """What a span is, by the conventions' kind attributes (OpenInference ``openinference.span.kind``,
    GenAI ``gen_ai.operation.name``, OpenLLMetry ``traceloop.span.kind``), in this order: a model call
    (an OpenInference LLM span, a GenAI ``chat``-like operation), a tool's execution (GenAI
    ``execute_tool``, OpenInference TOOL, OpenLLMetry ``tool``), an agent (or a workflow), a retrieval
    (GenAI ``retrieval``, OpenInference RETRIEVER); a span that no convention marks is a model call when
    it carries input messages (chain, agent, workflow and tool spans of LangChain, LangGraph and the agent
    SDKs carry the messages they were given, and are marked)."""
    kind = attrs.get("openinference.span.kind")
    operation = attrs.get("gen_ai.operation.name")
    traceloop = attrs.get("traceloop.span.kind")
    if kind == "LLM" or operation in MODEL_OPERATIONS:
        return "model"
    if operation == "execute_tool" or kind == "TOOL" or traceloop == "tool":
        return "tool"
    if {operation, kind, traceloop} & AGENT_KINDS:
        return "agent"
    if operation == "retrieval" or kind == "RETRIEVER":
        return "retrieval"
    if not (kind or operation or traceloop) and any(k.startswith(INPUT_MESSAGE_KEYS) for k in attrs):
        return "model"
    return "other"


# ---- tool spans and the trace's other spans -----------------------------------------------------------
#: where the conversation id sits, in order of preference (the call's span, then its ancestors')
CONVERSATION_KEYS = ("gen_ai.conversation.id", "session.id", "traceloop.association.properties.session_id")
STATUS_ERROR = (2, "STATUS_CODE_ERROR", "2")


def _loads(value: Any) -> Any:
    """A JSON string's value (anything else, or a string that is not JSON, as it is)."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        ok, parsed = json_value(value)
        return parsed if ok else value
    return value


def _langchain(value: Any) -> Any:
    """LangChain's serialised form (``{"lc": 1, "type": "constructor", "id": [...], "kwargs": {...}}``)
    unwrapped to its kwargs, and LangGraph's ``{"inputs"|"outputs": ...}`` wrapping to what it wraps;
    other values as they are."""
    for _ in range(4):
        if isinstance(value, dict) and value.get("lc") == 1 and isinstance(value.get("kwargs"), dict):
            value = {**value["kwargs"], "_lc_kind": (value.get("id") or [""])[-1]}
        elif (
            isinstance(value, dict)
            and len(value.keys() - {"kwargs", "tags", "metadata"}) == 1
            and ("inputs" in value or "outputs" in value or "output" in value)
        ):
            value = value.get("inputs", value.get("outputs", value.get("output")))
        else:
            break
    return value


def _tool_message(value: Any) -> tuple[str | None, str | None, bool] | None:
    """(content, tool call id, error) of a serialised LangChain ToolMessage (its ``{"lc": 1, ...}`` form,
    ``message_to_dict``'s ``{"type": "tool", "data": {...}}``, or a plain dict), else None."""
    value = _langchain(_loads(value))
    if isinstance(value, dict) and value.get("type") == "tool" and isinstance(value.get("data"), dict):
        value = {**value["data"], "type": "tool"}  # LangChain's message_to_dict form
    if not isinstance(value, dict):
        return None
    if value.get("_lc_kind") != "ToolMessage" and not (value.get("type") == "tool" and "content" in value):
        return None
    text, _ = content(value.get("content"))
    result = text if text or isinstance(value.get("content"), str) else as_text(value.get("content"))
    return result, _opt_str(value.get("tool_call_id")), value.get("status") == "error"


def _any(attrs: dict[str, Any], *keys: str) -> Any:
    return next((attrs[k] for k in keys if attrs.get(k) is not None), None)


TOOL_RESULT_KEYS = ("gen_ai.tool.call.result", "tool_response", "output.value", "traceloop.entity.output")


def _binary_result(item: dict[str, Any]) -> str | None:
    """``bytes`` when the span recorded its tool result as an OTLP ``bytesValue`` (read as nothing), else
    None."""
    raw = item.get("attributes")
    for attribute in raw if isinstance(raw, list) else []:
        if isinstance(attribute, dict) and attribute.get("key") in TOOL_RESULT_KEYS:
            value = attribute.get("value")
            if isinstance(value, dict) and "bytesValue" in value:
                return "bytes"
    return None


def tool_span(
    span_id: str, parent: str, name: str, attrs: dict[str, Any], item: dict[str, Any], start: int, end: int
) -> ToolSpan:
    """What a tool execution's span (``span_kind`` tool) recorded. Its status is an error when the span's
    status is, or it recorded an exception."""
    # each convention's attribute, the first one recorded (OpenLLMetry marks its tool spans both ways)
    tool_name = _any(attrs, "gen_ai.tool.name", "tool.name", "traceloop.entity.name") or (
        name.removeprefix("execute_tool ").removesuffix(".tool").strip()
    )
    call_id = _any(attrs, "gen_ai.tool.call.id", "tool_call.id", "tool.id")
    arguments = _any(attrs, "gen_ai.tool.call.arguments", "tool_arguments", "input.value")
    if arguments is None:
        arguments = _langchain(_loads(attrs.get("traceloop.entity.input")))
    result: Any = _any(attrs, *TOOL_RESULT_KEYS)
    found_status, found_events = item.get("status"), item.get("events")
    status: dict[str, Any] = found_status if isinstance(found_status, dict) else {}
    error = status.get("code") in STATUS_ERROR or bool(attrs.get("error.type"))
    events: list[Any] = found_events if isinstance(found_events, list) else []
    error = error or any(isinstance(e, dict) and e.get("name") == "exception" for e in events)
    message = _tool_message(result)
    if message is not None:
        result, found_id, failed = message
        call_id, error = call_id or found_id, error or failed
    else:
        unwrapped = _langchain(_loads(result))
        result = as_text(unwrapped) if not isinstance(unwrapped, str) else unwrapped
    if isinstance(arguments, dict) and set(arguments) >= {"input_str"}:  # LangChain's tool input
        arguments = _loads(arguments["input_str"])
    not_text = _binary_result(item) if result is None else None
    return ToolSpan(span_id, parent, str(tool_name), _opt_str(call_id), _loads(arguments),
                    as_text(result), error, start, end, not_text)  # fmt: skip


def span_info(
    span_id: str, parent: str, name: str, start: int, attrs: dict[str, Any], kind: SpanKind
) -> SpanInfo:
    """What a trace's other span (neither a model call nor a tool's: ``kind``) tells: its conversation
    ids, and whether it is an agent (and its output, the answer it returned)."""
    ids = {k: str(attrs[k]) for k in CONVERSATION_KEYS if attrs.get(k)}
    name = str(attrs.get("gen_ai.agent.name") or name)
    agent = kind == "agent"
    output = ""
    if agent:
        outputs = _json_messages(attrs.get("gen_ai.output.messages"))
        raw = attrs.get("output.value", attrs.get("traceloop.entity.output", attrs.get("final_result")))
        output = next((m.text for m in outputs if m.text.strip()), "") or _output_text(raw)
    return SpanInfo(span_id, parent, name, start, ids, agent, output)


def _output_text(raw: Any) -> str:
    """An agent's output value as text: a string, or the text of the last message it holds."""
    value = _langchain(_loads(raw))
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("messages", "final_output", "output", "content", "text"):
            if key in value:
                inner = value[key]
                if isinstance(inner, list) and inner:
                    inner = _langchain(inner[-1])
                    return content(inner.get("content") if isinstance(inner, dict) else inner)[0]
                return _output_text(inner)
    return ""


# ---- traces -> interactions --------------------------------------------------------------------------
@dataclass
class Trace:
    """The pieces of one trace held together: its model calls, tool spans, other spans and passages."""

    trace_id: str
    calls: dict[str, Call] = field(default_factory=dict)  # span id -> call
    tools: dict[str, ToolSpan] = field(default_factory=dict)  # span id -> tool span
    others: dict[str, SpanInfo] = field(default_factory=dict)  # span id -> any other span
    passages: list[Passage] = field(default_factory=list)
    root: bool = False  # a span without a parent came (an SDK exports the root span last)


@dataclass(frozen=True)
class TraceOutcome:
    """What a trace gives: its interaction (none when no model call answered in text), the model calls
    that cannot be mapped, and how many model calls were read as steps of the answer."""

    interactions: list[Interaction]
    errors: list[CallError]
    steps: int = 0


@dataclass(frozen=True)
class _Read:
    """A model call's messages, read from its span or its records."""

    call: Call
    inputs: list[Message]
    outputs: list[Message]

    @property
    def answer(self) -> str:
        return next((m.text for m in self.outputs if m.text.strip()), "")

    @property
    def asked(self) -> list[ToolCall]:
        return [c for m in self.outputs for c in m.tool_calls]

    @property
    def start_ns(self) -> int:
        span = self.call.span
        return span.start_ns if span else min((r.time_ns for r in self.call.records), default=0)

    @property
    def end_ns(self) -> int:
        span = self.call.span
        return (
            (span.end_ns or span.start_ns) if span else max((r.time_ns for r in self.call.records), default=0)
        )


def conversation(inputs: list[Message]) -> list[dict[str, str]]:
    """A call's input messages as the interaction's ``messages``: roles mapped by ``ROLES``; turns of
    other roles and turns without text (tool calls and tool results, read as steps) left out."""
    out = []
    for m in inputs:
        mapped = ROLES.get(m.role.strip().lower())
        if mapped is not None and m.text.strip():
            out.append({"role": mapped, "content": m.text})
    return out


def _first(key: str, *sources: dict[str, Any]) -> Any:
    return next((s[key] for s in sources if s.get(key)), None)


def _read(call: Call) -> _Read:
    span_attrs = call.span.attrs if call.span else {}
    inputs, outputs = messages(span_attrs)
    if not inputs and not outputs:
        inputs, outputs = record_messages(call.records)
    return _Read(call, inputs, outputs)


def _is_question(m: Message) -> bool:
    """A user turn that asks something: not one that only carries tool results (Pydantic AI sends them
    as a ``user`` message of ``tool_call_response`` parts)."""
    return ROLES.get(m.role.strip().lower()) == "user" and not (m.tool_results and not m.text.strip())


@dataclass
class _Step:
    name: str
    call_id: str | None
    arguments: Any = None
    result: str | None = None
    error: bool = False
    start_ns: int = 0
    end_ns: int = 0
    earlier_turn: bool = False
    span: bool = False  # a tool span was matched to it
    stray: bool = False  # a result that matched no call
    not_text: str | None = None  # its tool span recorded the result as a value that is not text

    def as_dict(self) -> dict[str, Any]:
        """The step as ``schemas.tools.ToolStep`` takes it (which parses JSON arguments and cuts what is
        over the limits); the status is given only for an error the span recorded, else the result
        decides it (none: ``no_result``; an error result: ``error``)."""
        step: dict[str, Any] = {
            "name": self.name,
            "call_id": self.call_id,
            "arguments": self.arguments,
            "result": self.result,
            "started_at": datetime.fromtimestamp(self.start_ns / 1e9, tz=UTC) if self.start_ns else None,
            "duration_ms": (self.end_ns - self.start_ns) / 1e6 if self.start_ns and self.end_ns else None,
            "earlier_turn": self.earlier_turn,
        }
        if self.error:
            step["status"] = "error"
        return step


class _Steps:
    """The tool steps of an answer, merged from every place they are recorded: the tool calls the model
    asked for and the results it was given (in its input messages, and in the outputs of the calls that
    only asked for tools), and the tool spans. A call and its result are paired by call id; a result
    (or tool span) whose id matches no call takes the first call of its name still without one, else
    the first call without one (some SDKs record an item id on the call and the call id on the result),
    else it is a step of its own. Each lookup resumes where the last one of its kind stopped (a step
    once given a result or a span keeps it), so 10,000 steps are merged in linear time."""

    def __init__(self) -> None:
        self.steps: list[_Step] = []
        self.by_id: dict[str, _Step] = {}
        self.by_name: dict[str, list[_Step]] = {}
        self.claimed: set[int] = set()  # steps a call that only asked for tools was matched to
        self._cursor: dict[tuple[str, str | None], int] = {}

    def add(self, step: _Step) -> _Step:
        self.steps.append(step)
        self.by_name.setdefault(step.name, []).append(step)
        if step.call_id:
            self.by_id.setdefault(step.call_id, step)
        return step

    def _first(self, kind: str, name: str | None, free: Any) -> _Step | None:
        """The first step (of ``name``; None: of any name) for which ``free`` holds."""
        items = self.steps if name is None else self.by_name.get(name, [])
        at = self._cursor.get((kind, name), 0)
        while at < len(items) and not free(items[at]):
            at += 1
        self._cursor[(kind, name)] = at
        return items[at] if at < len(items) else None

    def call(self, found: ToolCall, earlier: bool, again: bool = False) -> None:
        """A tool call; ``again``: one already read from the answer's input messages, perhaps under another
        id (the same name and arguments, not yet claimed), when a call that only asked for tools says it."""
        if found.call_id and found.call_id in self.by_id:
            return
        if again:
            same = self._first(
                "claim", found.name, lambda s: id(s) not in self.claimed and not s.earlier_turn
            )
            if same is not None and _same(same.arguments, found.arguments):
                self.claimed.add(id(same))
                if found.call_id:
                    self.by_id[found.call_id] = same
                return
        self.add(_Step(found.name, found.call_id, found.arguments, earlier_turn=earlier))

    def _match(self, kind: str, call_id: str | None, name: str | None, free: Any) -> _Step | None:
        if call_id and call_id in self.by_id:
            return self.by_id[call_id]
        return (self._first(kind, name, free) if name else None) or self._first(kind, None, free)

    def result(self, found: ToolResult, earlier: bool) -> None:
        step = self._match("result", found.call_id, found.name, lambda s: s.result is None)
        if step is None:
            step = self.add(_Step(found.name or "unknown", found.call_id, earlier_turn=earlier, stray=True))
        if step.result is None:
            step.result, step.error = found.result, step.error or found.error
            if found.call_id and step.call_id != found.call_id:  # (the call was recorded by item id)
                self.by_id[found.call_id] = step
                step.call_id = found.call_id

    def span(self, tool: ToolSpan) -> None:
        step = self._match("span", tool.call_id, tool.name, lambda s: not s.span and not s.earlier_turn)
        if step is None or step.span:
            step = self.add(_Step(tool.name, tool.call_id, tool.arguments))
        step.span, step.start_ns, step.end_ns = True, tool.start_ns, tool.end_ns
        step.error = step.error or tool.error
        if step.result is None:
            step.result = tool.result
            step.not_text = tool.not_text if tool.result is None else None
        if step.arguments is None:
            step.arguments = tool.arguments


def _same(a: Any, b: Any) -> bool:
    """Two tool calls' arguments are the same (JSON text or parsed)."""
    return _loads(a) == _loads(b) if isinstance(a, str) or isinstance(b, str) else a == b


def _steps(
    final: _Read, asked: list[_Read], answers: list[_Read], tools: list[ToolSpan], trace: Trace
) -> list[dict[str, Any]]:
    last_user = max((i for i, m in enumerate(final.inputs) if _is_question(m)), default=-1)
    steps = _Steps()
    for i, m in enumerate(final.inputs):
        for found in m.tool_calls:
            steps.call(found, i < last_user)
        for result in m.tool_results:
            steps.result(result, i < last_user)
    for read in asked:
        for found in read.asked:
            steps.call(found, False, again=True)
    for tool in sorted(tools, key=lambda t: t.start_ns):
        steps.span(tool)
    answering = _agent_of(final.call, trace)
    for read in answers:  # another answer in the trace (a sub-agent's, a handoff's): a step, named by
        users = [m.text for m in read.inputs if _is_question(m)]  # its agent, else by its span
        agent = _agent_of(read.call, trace)
        name = agent.name if agent and agent != answering else read.call.name
        question = users[-1] if users else None
        steps.add(
            _Step(name, read.call.span_id, question, read.answer, start_ns=read.start_ns, end_ns=read.end_ns)
        )
    return [{**step.as_dict(), "stray": step.stray, "not_text": step.not_text} for step in steps.steps]


def _ancestors(span_id: str, trace: Trace) -> Iterator[SpanInfo]:
    """The other spans above a span, nearest first (model calls in between are passed through)."""
    seen: set[str] = set()
    call = trace.calls.get(span_id)
    info = trace.others.get(span_id)
    parent = call.span.parent_id if call and call.span else (info.parent_id if info else "")
    while parent and parent not in seen:
        seen.add(parent)
        if parent in trace.others:
            info = trace.others[parent]
            yield info
            parent = info.parent_id
        elif parent in trace.calls and trace.calls[parent].span is not None:
            parent = trace.calls[parent].span.parent_id  # type: ignore[union-attr]
        elif parent in trace.tools:
            parent = trace.tools[parent].parent_id
        else:
            return


def _agent_of(call: Call, trace: Trace) -> SpanInfo | None:
    return next((a for a in _ancestors(call.span_id, trace) if a.agent), None)


def _final(answers: list[_Read], trace: Trace) -> _Read:
    """The answer returned to the user: the call whose answer is the root agent's output (the outermost
    agent span of the trace; the last one, when several turns share the trace), else the last call that
    answered in text."""
    agents = [a for a in trace.others.values() if a.agent and a.output.strip()]
    outermost = [a for a in agents if not any(up.agent for up in _ancestors(a.span_id, trace))]
    if outermost:  # (several: a trace around several turns; the last turn's)
        root = max(outermost, key=lambda a: (a.start_ns, a.span_id))
        said = " ".join(root.output.split())
        for read in reversed(answers):
            text = " ".join(read.answer.split())
            if text == said:
                return read
        for read in reversed(answers):
            if said in " ".join(read.answer.split()):
                return read
    return answers[-1]


def _conversation_id(final: _Read, trace: Trace) -> str | None:
    span_attrs = final.call.span.attrs if final.call.span else {}
    record_attrs = [r.attrs for r in final.call.records]
    for key in CONVERSATION_KEYS:
        found = _first(key, span_attrs, *record_attrs)
        if found:
            return str(found)
    for info in [*_ancestors(final.call.span_id, trace), *trace.others.values()]:
        for key in CONVERSATION_KEYS:
            if info.ids.get(key):
                return info.ids[key]
    return None


def interaction(
    read: _Read,
    trace: Trace,
    steps: list[dict[str, Any]],
    incomplete: bool,
    limits: Limits | None = None,
    passages: Sequence[Passage] = (),
) -> Interaction:
    """The interaction of the call that answered (its span's content, else its records'), with
    ``passages`` as its contexts; ValueError or ValidationError with the reason when it has none."""
    call, inputs, outputs = read.call, read.inputs, read.outputs
    if not any(m.text.strip() or m.tool_calls or m.tool_results for m in [*inputs, *outputs]):
        raise ValueError(NO_CONTENT_IN_RECORDS if call.records else NO_CONTENT)
    users = [m.text for m in inputs if _is_question(m)]
    if not users or not users[-1].strip():  # (an earlier user turn is not the question)
        raise ValueError("the model call has no user message")
    answer = read.answer
    if not answer:
        raise ValueError("the model call has no output message")
    span_attrs = call.span.attrs if call.span else {}
    record_attrs = [r.attrs for r in call.records]
    resource = call.span.resource if call.span else (call.records[0].resource if call.records else {})
    stamp_ns = read.start_ns
    if not stamp_ns:
        raise ValueError(
            "the model call has no time (the span's startTimeUnixNano, the records' timeUnixNano)"
        )
    model = next((m for k in MODEL_KEYS if (m := _first(k, span_attrs, *record_attrs))), "unknown")
    not_judged = dict(Counter(kind for m in [*inputs, *outputs] for kind in m.not_judged))
    metadata: dict[str, Any] = {
        "trace_id": call.trace_id,
        "span_name": call.name,
        "turns": len(inputs),
        "source": "span" if any(messages(span_attrs)) else "logs",
    }
    if not_judged:
        metadata["parts_not_judged"] = not_judged
    if incomplete:
        metadata["trace_incomplete"] = True  # held its time and judged with what came
    fields: dict[str, Any] = {
        "interaction_id": f"{call.trace_id}:{call.span_id}",
        "timestamp": datetime.fromtimestamp(stamp_ns / 1e9, tz=UTC),
        "app": str(resource.get("service.name") or "default"),
        "model": str(model),
        "conversation_id": _conversation_id(read, trace),
        "messages": conversation(inputs),
        "contexts": [{"text": p.text, "document": p.document} for p in passages],
        "answer": answer,
        "ground_truth": _first("groundwatch.ground_truth", span_attrs, *record_attrs),
        "metadata": metadata,
    }
    if steps:
        fields["steps"] = [
            {k: v for k, v in step.items() if k not in ("stray", "not_text")} for step in steps
        ]
        if flags := _step_flags(steps):
            fields["flags"] = flags
    return Interaction.model_validate(fields, context={"limits": limits} if limits else None)


def _step_flags(steps: list[dict[str, Any]]) -> list[str]:
    """What the steps say could not be used as given: a result that matched no call, a tool span's result
    that is not text."""
    flags = [
        f"{FLAG_RESULT_WITHOUT_CALL}: steps[{i}] ({s['name']})" for i, s in enumerate(steps) if s["stray"]
    ]
    return flags + [
        f"{FLAG_RESULT_NOT_TEXT}: steps[{i}] ({s['name']}) held {s['not_text']}"
        for i, s in enumerate(steps)
        if s["not_text"] and s["result"] is None
    ]


def reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return describe_validation_error(exc)
    return str(exc)


def _error(call: Call, exc: Exception) -> CallError:
    return CallError(call.trace_id, call.span_id, call.name, reason(exc))


def _finals(answers: list[_Read], trace: Trace) -> list[_Read]:
    """The answers returned to the user, in time order: the trace's last (``_final``), and each earlier
    answer that a later call was given as an assistant turn of its history (a trace that spans several
    turns of a conversation: the app's session span around them)."""
    chosen = _final(answers, trace)
    said = {
        " ".join(m.text.split())
        for r in answers
        for m in r.inputs
        if ROLES.get(m.role.strip().lower()) == "assistant"
    }
    earlier = [
        r
        for r in answers
        if r is not chosen and r.end_ns <= chosen.start_ns and " ".join(r.answer.split()) in said
    ]
    return sorted([*earlier, chosen], key=lambda r: (r.end_ns, r.call.span_id))


def convert_trace(trace: Trace, incomplete: bool = False, limits: Limits | None = None) -> TraceOutcome:
    """One interaction per final answer. Of the trace's model calls that answered in text, those returned
    to the user (``_finals``) are interactions; the others (sub-agents, handoffs), the calls that only
    asked for tools, and the tool executions are steps of the first final answer that ends after they
    start, and the retrieved passages the contexts of that answer. A call with neither text nor tool
    calls is an error with the reason; a trace whose calls only asked for tools gives no interaction (a
    plain client's next call, a trace of its own, has the results in its input messages).
    ``incomplete``: the trace was held its time and is judged with what came. ``limits``: the steps and
    history cut to them (``max_steps``, ``max_tool_result_chars``...), as the worker sends it; without,
    as read."""
    reads = sorted((_read(call) for call in trace.calls.values()), key=lambda r: (r.start_ns, r.call.span_id))
    answers = [r for r in reads if r.answer.strip()]
    asked = [r for r in reads if not r.answer.strip() and r.asked]
    errors: list[CallError] = []
    for read in reads:
        if read in answers or read in asked:
            continue
        try:  # (raises: it has no answer)
            interaction(read, trace, [], incomplete)
        except (ValueError, ValidationError) as exc:
            errors.append(_error(read.call, exc))
    if not answers:
        return TraceOutcome([], errors, len(asked))
    finals = _finals(answers, trace)
    others = [r for r in answers if all(r is not f for f in finals)]

    def owner(start_ns: int) -> _Read:
        return next((f for f in finals if f.end_ns >= start_ns), finals[-1])

    found: list[Interaction] = []
    for final in finals:
        mine = [r for r in asked if owner(r.start_ns) is final]
        sub = [r for r in others if owner(r.start_ns) is final]
        tools = [t for t in trace.tools.values() if owner(t.start_ns) is final]
        passages = [p for p in trace.passages if owner(p.start_ns) is final]
        try:
            steps = _steps(final, mine, sub, tools, trace)
            found.append(interaction(final, trace, steps, incomplete, limits, passages))
        except (ValueError, ValidationError) as exc:
            errors.append(_error(final.call, exc))
    return TraceOutcome(found, errors, len(asked) + len(others))
