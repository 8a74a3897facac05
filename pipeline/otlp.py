"""OpenTelemetry traces and logs (OTLP/JSON) -> interactions: a model call's question and answer, the
retrieved passages of the same trace as its context.

A model call is read from its span, from its log records (GenAI events), or from both, joined by trace
and span id (``pipeline.otlp_join`` holds the pieces; this module reads them):

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
  and tool calls counted under ``metadata.parts_not_judged``, not judged); a string holding a JSON array
  of parts (OpenLLMetry); a structured value;
- **retrieval**: OpenInference RETRIEVER spans (``retrieval.documents.N.document.content|id``) and GenAI
  ``retrieval`` spans (``gen_ai.retrieval.documents``, a JSON string or structured list of
  ``{id, score, content}``: the specification requires only id and score, which carry no text to judge
  against, so only documents with ``content`` become passages). The passages of a trace become the
  context of its model calls;
- the **conversation**: the input messages become the interaction's ``messages`` (roles user, human or
  none -> user; assistant, ai, model, bot -> assistant; system, developer -> system), so the last user
  message is the question and the turns before it the history. Turns of other roles (tool, function) and
  turns without text are left out; ``metadata.turns`` still counts every input message;
- the **app** is the resource's ``service.name``; the model ``gen_ai.response.model``,
  ``gen_ai.request.model`` or ``llm.model_name`` (of the span, else of the records); the conversation
  ``gen_ai.conversation.id`` or ``session.id``; the ground truth ``groundwatch.ground_truth``.

The interaction id is the trace id and the model call's span id, so a re-exported call is the same
interaction. A call that cannot be mapped is returned with the reason (the worker dead-letters it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from schemas.interaction import Interaction
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
class Message:
    role: str
    text: str
    not_judged: tuple[str, ...] = ()  # the kinds of the parts that are not text (image_url, tool_call...)


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    name: str
    start_ns: int
    resource: dict[str, Any]
    attrs: dict[str, Any]


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
    text: str
    document: str | None


@dataclass(frozen=True)
class Batch:
    """What one export request (traces or logs) holds: model calls' spans and records, and passages."""

    spans: list[Span]
    records: list[Record]
    passages: dict[str, list[Passage]]  # trace id -> passages of its retrieval spans
    read: int = 0  # spans and log records of any kind in the request
    #: model-call pieces that cannot be joined to their call (no trace and span ids), with the reason
    unjoinable: list[CallError] = field(default_factory=list)


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
    try:
        parsed = json.loads(stripped)
    except ValueError:
        return None
    if isinstance(parsed, list) and parsed and all(isinstance(p, dict) and "type" in p for p in parsed):
        return parsed
    return None


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
                else:
                    other.append(kind)
        return "\n".join(t for t in texts if t), tuple(other)
    if isinstance(value, dict):
        return content(value.get("parts", value.get("content", value.get("text", ""))))
    return "", ()


def _message(role: Any, value: Any) -> Message:
    text, other = content(value)
    return Message(str(role or ""), text, other)


def _structured(raw: Any) -> list[Any]:
    """A ``gen_ai.*.messages`` value: a JSON string or a structured (non-string) value."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return []
    if isinstance(raw, dict):
        return [raw]
    return raw if isinstance(raw, list) else []


def _json_messages(raw: Any) -> list[Message]:
    return [
        _message(m.get("role"), m.get("parts", m.get("content", "")))
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
        out.append(_message(attrs.get(f"{prefix}.{n}.{role}"), value if value is not None else ""))
        n += 1
    return out


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
            inputs.append(_message(role, body.get("content", "")))
        elif record.event == CHOICE_EVENT:
            found = body.get("message")
            message: dict[str, Any] = found if isinstance(found, dict) else {}
            outputs.append(_message(message.get("role") or "assistant", message.get("content", "")))
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
    if attrs.get("gen_ai.operation.name") == "retrieval":
        for item in _structured(attrs.get("gen_ai.retrieval.documents")):
            if isinstance(item, dict) and item.get("content"):
                text, _ = content(item["content"])
                doc = item.get("id")
                if text:
                    out.append(Passage(text, str(doc) if doc is not None else None))
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
    read = 0
    for resource, item in _items(request, "resourceSpans", "scopeSpans", "spans"):
        read += 1
        attrs = attributes(item.get("attributes", []))
        trace, span_id, name = _id(item.get("traceId")), _id(item.get("spanId")), str(item.get("name", ""))
        found = documents(attrs)
        if found and trace:
            passages.setdefault(trace, []).extend(found)
        if not _is_model_call(attrs):
            continue
        if not (trace and span_id):
            unjoinable.append(CallError(trace, span_id, name, "a model-call span without trace and span ids"))
            continue
        start = _time(item, "startTimeUnixNano", "endTimeUnixNano")
        spans.append(Span(trace, span_id, name, start, resource, attrs))
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
    return Batch(spans, records, passages, read, unjoinable)


def _is_model_call(attrs: dict[str, Any]) -> bool:
    if attrs.get("openinference.span.kind") == "LLM" or attrs.get("gen_ai.operation.name") in (
        "chat",
        "text_completion",
        "generate_content",
    ):
        return True
    return any(
        k.startswith(("gen_ai.prompt.", "gen_ai.input.messages", "llm.input_messages.")) for k in attrs
    )


# ---- calls -> interactions ----------------------------------------------------------------------------
def conversation(inputs: list[Message]) -> list[dict[str, str]]:
    """A call's input messages as the interaction's ``messages``: roles mapped by ``ROLES``; turns of
    other roles and turns without text left out."""
    out = []
    for m in inputs:
        mapped = ROLES.get(m.role.strip().lower())
        if mapped is not None and m.text.strip():
            out.append({"role": mapped, "content": m.text})
    return out


def _first(key: str, *sources: dict[str, Any]) -> Any:
    return next((s[key] for s in sources if s.get(key)), None)


def interaction(call: Call, passages: list[Passage]) -> Interaction:
    """The interaction of one model call (its span's content, else its records'); ValueError or
    ValidationError with the reason when it has none."""
    span_attrs = call.span.attrs if call.span else {}
    inputs, outputs = messages(span_attrs)
    if not inputs and not outputs:
        inputs, outputs = record_messages(call.records)
    if not any(m.text.strip() for m in [*inputs, *outputs]):
        raise ValueError(NO_CONTENT_IN_RECORDS if call.records else NO_CONTENT)
    users = [m.text for m in inputs if ROLES.get(m.role.strip().lower()) == "user"]
    if not users or not users[-1].strip():  # (an earlier user turn is not the question)
        raise ValueError("the model call has no user message")
    answer = next((m.text for m in outputs if m.text.strip()), "")
    if not answer:
        raise ValueError("the model call has no output message")
    record_attrs = [r.attrs for r in call.records]
    resource = call.span.resource if call.span else (call.records[0].resource if call.records else {})
    stamp_ns = (
        call.span.start_ns if call.span else min((r.time_ns for r in call.records if r.time_ns), default=0)
    )
    if not stamp_ns:
        raise ValueError(
            "the model call has no time (the span's startTimeUnixNano, the records' timeUnixNano)"
        )
    model = next((m for k in MODEL_KEYS if (m := _first(k, span_attrs, *record_attrs))), "unknown")
    not_judged: dict[str, int] = {}
    for m in [*inputs, *outputs]:
        for kind in m.not_judged:
            not_judged[kind] = not_judged.get(kind, 0) + 1
    metadata: dict[str, Any] = {
        "trace_id": call.trace_id,
        "span_name": call.name,
        "turns": len(inputs),
        "source": "span" if any(messages(span_attrs)) else "logs",
    }
    if not_judged:
        metadata["parts_not_judged"] = not_judged
    return Interaction.model_validate(
        {
            "interaction_id": f"{call.trace_id}:{call.span_id}",
            "timestamp": datetime.fromtimestamp(stamp_ns / 1e9, tz=UTC),
            "app": str(resource.get("service.name") or "default"),
            "model": str(model),
            "conversation_id": _first("gen_ai.conversation.id", span_attrs, *record_attrs)
            or _first("session.id", span_attrs, *record_attrs),
            "messages": conversation(inputs),
            "contexts": [{"text": p.text, "document": p.document} for p in passages],
            "answer": answer,
            "ground_truth": _first("groundwatch.ground_truth", span_attrs, *record_attrs),
            "metadata": metadata,
        }
    )


def reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return describe_validation_error(exc)
    return str(exc)


def convert_call(call: Call, passages: list[Passage]) -> Interaction | CallError:
    """The call's interaction, or the reason it has none."""
    try:
        return interaction(call, passages)
    except (ValueError, ValidationError) as exc:
        return CallError(call.trace_id, call.span_id, call.name, reason(exc))
