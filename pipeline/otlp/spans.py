"""What a span is (``span_kind``), and what a tool's span and a trace's other spans (agents, with their
conversation ids and output) tell."""

from __future__ import annotations

from typing import Any

from pipeline.otlp.conventions import as_text, content, json_messages
from pipeline.otlp.kinds import SpanKind
from pipeline.otlp.model import SpanInfo, ToolSpan
from schemas.json_input import json_value
from schemas.tool_pairing import opt_str

# ---- tool spans and the trace's other spans -----------------------------------------------------------
#: where the conversation id sits, in order of preference (the call's span, then its ancestors')
CONVERSATION_KEYS = ("gen_ai.conversation.id", "session.id", "traceloop.association.properties.session_id")
STATUS_ERROR = (2, "STATUS_CODE_ERROR", "2")


def loads(value: Any) -> Any:
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
    value = _langchain(loads(value))
    if isinstance(value, dict) and value.get("type") == "tool" and isinstance(value.get("data"), dict):
        value = {**value["data"], "type": "tool"}  # LangChain's message_to_dict form
    if not isinstance(value, dict):
        return None
    if value.get("_lc_kind") != "ToolMessage" and not (value.get("type") == "tool" and "content" in value):
        return None
    text, _ = content(value.get("content"))
    result = text if text or isinstance(value.get("content"), str) else as_text(value.get("content"))
    return result, opt_str(value.get("tool_call_id")), value.get("status") == "error"


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
        arguments = _langchain(loads(attrs.get("traceloop.entity.input")))
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
        unwrapped = _langchain(loads(result))
        result = as_text(unwrapped) if not isinstance(unwrapped, str) else unwrapped
    if isinstance(arguments, dict) and set(arguments) >= {"input_str"}:  # LangChain's tool input
        arguments = loads(arguments["input_str"])
    not_text = _binary_result(item) if result is None else None
    return ToolSpan(span_id, parent, str(tool_name), opt_str(call_id), loads(arguments),
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
        outputs = json_messages(attrs.get("gen_ai.output.messages"))
        raw = attrs.get("output.value", attrs.get("traceloop.entity.output", attrs.get("final_result")))
        output = next((m.text for m in outputs if m.text.strip()), "") or _output_text(raw)
    return SpanInfo(span_id, parent, name, start, ids, agent, output)


def _output_text(raw: Any) -> str:
    """An agent's output value as text: a string, or the text of the last message it holds."""
    value = _langchain(loads(raw))
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
