"""OpenTelemetry traces (OTLP/JSON) -> interactions: the model call's question and answer, the retrieved
passages of the same trace as its context.

What is read, per span (``resourceSpans[].scopeSpans[].spans[]``):

- a **model call**: the GenAI semantic conventions (``gen_ai.input.messages`` / ``gen_ai.output.messages``,
  JSON with ``parts``; or the older indexed ``gen_ai.prompt.N.role|content`` and
  ``gen_ai.completion.N.content`` of OpenLLMetry), or OpenInference (``llm.input_messages.N.message.role|
  content``, ``llm.output_messages.N.message.content``, else ``input.value`` / ``output.value``). The model
  is ``gen_ai.response.model``, ``gen_ai.request.model`` or ``llm.model_name``;
- a **retrieval**: OpenInference ``retrieval.documents.N.document.content|id``. Its passages become the
  context of the model calls of the same trace (in this export request: a Collector's batch normally
  carries a trace's spans together; passages in another request are not joined);
- the **conversation**: the input messages become the interaction's ``messages`` (roles user, human or
  none -> user; assistant, ai, model, bot -> assistant; system, developer -> system), so the last user
  message is the question and the turns before it the history (``schemas.interaction``). Turns of other
  roles (tool, function) and turns without text (a tool call) are left out of the history; the span's
  ``metadata.turns`` still counts every input message;
- the **app** is the resource's ``service.name``; the conversation ``gen_ai.conversation.id`` or
  ``session.id``; the ground truth, when an app records one, ``groundwatch.ground_truth``.

The interaction id is the trace id and the model call's span id, so a re-exported span is the same
interaction. A model-call span without a question or an answer is returned as a ``SpanError`` with the
reason (the worker dead-letters it); spans that are neither kind are ignored.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from schemas.interaction import Interaction

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


@dataclass(frozen=True)
class SpanError:
    trace_id: str
    span_id: str
    name: str
    reason: str


@dataclass(frozen=True)
class Converted:
    interactions: list[Interaction]
    errors: list[SpanError]


def attribute_value(value: dict[str, Any]) -> Any:
    """An OTLP AnyValue as Python."""
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [attribute_value(v) for v in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return attributes(value["kvlistValue"].get("values", []))
    return None


def attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {item["key"]: attribute_value(item.get("value", {})) for item in items if "key" in item}


def _text(content: Any) -> str:
    """Message content as text: a string, or GenAI ``parts`` (their text parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(p.get("content", "")) if isinstance(p, dict) else str(p) for p in content)
    return ""


def _json_messages(raw: Any) -> list[tuple[str, str]]:
    messages = json.loads(raw) if isinstance(raw, str) else raw
    out = []
    for m in messages or []:
        if isinstance(m, dict):
            out.append((str(m.get("role", "")), _text(m.get("parts", m.get("content", "")))))
    return out


def _indexed(attrs: dict[str, Any], prefix: str, role: str, content: str) -> list[tuple[str, str]]:
    """Messages stored as ``prefix.N.role`` / ``prefix.N.content`` (N = 0, 1, ...)."""
    out = []
    n = 0
    while f"{prefix}.{n}.{content}" in attrs or f"{prefix}.{n}.{role}" in attrs:
        out.append(
            (str(attrs.get(f"{prefix}.{n}.{role}", "")), str(attrs.get(f"{prefix}.{n}.{content}", "")))
        )
        n += 1
    return out


def messages(attrs: dict[str, Any]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(input messages, output messages) as (role, text), from whichever convention the span uses."""
    if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
        return _json_messages(attrs.get("gen_ai.input.messages")), _json_messages(
            attrs.get("gen_ai.output.messages")
        )
    inputs = _indexed(attrs, "gen_ai.prompt", "role", "content")
    if inputs:
        return inputs, _indexed(attrs, "gen_ai.completion", "role", "content")
    inputs = _indexed(attrs, "llm.input_messages", "message.role", "message.content")
    if inputs:
        return inputs, _indexed(attrs, "llm.output_messages", "message.role", "message.content")
    if "input.value" in attrs and "output.value" in attrs:
        return [("user", str(attrs["input.value"]))], [("assistant", str(attrs["output.value"]))]
    return [], []


def documents(attrs: dict[str, Any]) -> list[dict[str, str | None]]:
    """The retrieved passages of an OpenInference retrieval span."""
    out: list[dict[str, str | None]] = []
    n = 0
    while f"retrieval.documents.{n}.document.content" in attrs:
        doc = attrs.get(f"retrieval.documents.{n}.document.id")
        out.append(
            {
                "text": str(attrs[f"retrieval.documents.{n}.document.content"]),
                "document": str(doc) if doc is not None else None,
            }
        )
        n += 1
    return out


def _objects(value: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(value, list):
        raise ValueError(f"{where} is not a list")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ValueError(f"{where}[{i}] is not an object")
        yield f"{where}[{i}]", item


def check_shape(request: Any) -> None:
    """ValueError naming the first place where an export request is not shaped as OTLP/JSON (objects
    and lists down to each span's attributes), before anything is read from it."""
    if not isinstance(request, dict):
        raise ValueError("an export request is a JSON object")
    for where, resource_spans in _objects(request.get("resourceSpans", []), "resourceSpans"):
        resource = resource_spans.get("resource", {})
        if not isinstance(resource, dict):
            raise ValueError(f"{where}.resource is not an object")
        for _ in _objects(resource.get("attributes", []), f"{where}.resource.attributes"):
            pass
        for scope_at, scope in _objects(resource_spans.get("scopeSpans", []), f"{where}.scopeSpans"):
            for span_at, span in _objects(scope.get("spans", []), f"{scope_at}.spans"):
                for _ in _objects(span.get("attributes", []), f"{span_at}.attributes"):
                    pass


def _spans(request: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(resource attributes, span) of every span in an export request."""
    for resource_spans in request.get("resourceSpans", []):
        resource = attributes(resource_spans.get("resource", {}).get("attributes", []))
        for scope in resource_spans.get("scopeSpans", []):
            for span in scope.get("spans", []):
                yield resource, span


def conversation(inputs: list[tuple[str, str]]) -> list[dict[str, str]]:
    """A span's input messages as the interaction's ``messages``: roles mapped by ``ROLES``; turns of
    other roles and turns without text left out."""
    out = []
    for role, text in inputs:
        mapped = ROLES.get(role.strip().lower())
        if mapped is not None and text.strip():
            out.append({"role": mapped, "content": text})
    return out


def _interaction(
    resource: dict[str, Any], span: dict[str, Any], attrs: dict[str, Any], contexts: list[Any]
) -> Interaction:
    inputs, outputs = messages(attrs)
    turns = conversation(inputs)
    answer = next((text for role, text in outputs if text), "")
    users = [text for role, text in inputs if ROLES.get(role.strip().lower()) == "user"]
    if not users or not users[-1].strip():  # (an earlier user turn is not the question)
        raise ValueError("the model call has no user message")
    if not answer.strip():
        raise ValueError("the model call has no output message")
    stamp = datetime.fromtimestamp(int(span.get("startTimeUnixNano", 0)) / 1e9, tz=UTC)
    return Interaction.model_validate(
        {
            "interaction_id": f"{span.get('traceId', '')}:{span.get('spanId', '')}",
            "timestamp": stamp,
            "app": str(resource.get("service.name") or "default"),
            "model": str(next((attrs[k] for k in MODEL_KEYS if attrs.get(k)), "unknown")),
            "conversation_id": attrs.get("gen_ai.conversation.id") or attrs.get("session.id"),
            "messages": turns,
            "contexts": contexts,
            "answer": answer,
            "ground_truth": attrs.get("groundwatch.ground_truth"),
            "metadata": {
                "trace_id": span.get("traceId"),
                "span_name": span.get("name"),
                "turns": len(inputs),
            },
        }
    )


def convert_request(request: dict[str, Any]) -> Converted:
    """The interactions of one OTLP/JSON ``ExportTraceServiceRequest`` (see the module docstring); a
    request that is not shaped as one raises ValueError naming where (``check_shape``)."""
    check_shape(request)
    spans = [(resource, span, attributes(span.get("attributes", []))) for resource, span in _spans(request)]
    passages: dict[str, list[Any]] = defaultdict(list)
    for _, span, attrs in spans:
        passages[str(span.get("traceId", ""))].extend(documents(attrs))
    interactions: list[Interaction] = []
    errors: list[SpanError] = []
    for resource, span, attrs in spans:
        if not _is_model_call(attrs):
            continue
        try:
            interactions.append(_interaction(resource, span, attrs, passages[str(span.get("traceId", ""))]))
        except (ValueError, ValidationError) as exc:
            errors.append(
                SpanError(
                    str(span.get("traceId", "")),
                    str(span.get("spanId", "")),
                    str(span.get("name", "")),
                    _reason(exc),
                )
            )
    return Converted(interactions, errors)


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
    return str(exc)


def _is_model_call(attrs: dict[str, Any]) -> bool:
    if attrs.get("openinference.span.kind") == "LLM" or attrs.get("gen_ai.operation.name") in (
        "chat",
        "text_completion",
    ):
        return True
    return any(
        k.startswith(("gen_ai.prompt.", "gen_ai.input.messages", "llm.input_messages.")) for k in attrs
    )
