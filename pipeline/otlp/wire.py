"""The OTLP/JSON wire format: attribute values, the shape of an export request, and one request read
into a ``Batch`` of model-call spans, GenAI log records, tool spans, other spans and passages."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from pipeline.otlp.conventions import documents
from pipeline.otlp.kinds import span_kind
from pipeline.otlp.model import (
    DETAILS_EVENT,
    GENAI_EVENTS,
    Batch,
    CallError,
    Passage,
    Record,
    Span,
    SpanInfo,
    ToolSpan,
)
from pipeline.otlp.spans import span_info, tool_span


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
