"""Message content across the conventions (GenAI, OpenInference, OpenLLMetry): content parts, input and
output messages from span attributes or log records, tool-call and result parts, retrieved documents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.otlp.kinds import span_kind
from pipeline.otlp.model import (
    CHOICE_EVENT,
    DETAILS_EVENT,
    MESSAGE_EVENTS,
    Message,
    Passage,
    Record,
    Span,
)
from schemas.document_names import document_name
from schemas.json_input import json_value
from schemas.tool_pairing import (
    CALL_PARTS,
    RESULT_PARTS,
    TOOL_PARTS,
    CallFound,
    ResultFound,
    opt_str,
    part_call,
    part_call_id,
    part_result,
)
from schemas.tools import json_text


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


def as_text(value: Any) -> str | None:
    """A tool result or argument as text: a string as it is, anything else as JSON (None stays None)."""
    if value is None or isinstance(value, str):
        return value
    return json_text(value)


def _part_tools(value: Any) -> tuple[list[CallFound], list[ResultFound]]:
    """The tool calls and tool results among content parts (``schemas.tool_pairing``'s part kinds)."""
    if isinstance(value, str):
        parts = _json_list(value)
        if parts is None:
            return [], []
        value = parts
    if isinstance(value, dict):
        value = value.get("parts", value.get("content"))
    calls: list[CallFound] = []
    results: list[ResultFound] = []
    for part in value if isinstance(value, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in CALL_PARTS:
            found = part_call(part)
            if found is not None:
                calls.append(found)
        elif kind in RESULT_PARTS:
            name = opt_str(part.get("name"))
            results.append(ResultFound(part_call_id(part), name, as_text(part_result(part))))
    return calls, results


def _message(role: Any, value: Any, fields: dict[str, Any] | None = None) -> Message:
    """A message from its role and content, with the tool calls and results it carries: parts of its
    content, OpenAI's ``tool_calls`` beside it, or (role ``tool``/``function``) the message itself, a
    result for ``tool_call_id``."""
    text, other = content(value)
    calls, results = _part_tools(value)
    fields = fields or {}
    for item in fields.get("tool_calls") or []:
        found = part_call(item) if isinstance(item, dict) else None
        if found is not None:
            calls.append(found)
    if isinstance(fields.get("function_call"), dict):
        found = part_call(fields["function_call"])
        if found is not None:
            calls.append(found)
    role_text = str(role or "")
    if role_text.strip().lower() in ("tool", "function", "ipython") and not results:
        result = text if text or not isinstance(value, (dict, list)) else as_text(value)
        call_id = opt_str(fields.get("tool_call_id") or fields.get("id"))
        results.append(ResultFound(call_id, opt_str(fields.get("name")), result))
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


def json_messages(raw: Any) -> list[Message]:
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
        inputs = _system_instructions(attrs) + json_messages(attrs.get("gen_ai.input.messages"))
        return inputs, json_messages(attrs.get("gen_ai.output.messages"))
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
