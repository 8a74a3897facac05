"""OTLP/HTTP on the worker's web server: ``POST /v1/traces`` and ``POST /v1/logs``, so an app's own
OpenTelemetry exporter can send to groundwatch without a Collector.

A request body is protobuf (``application/x-protobuf``, what the SDKs' OTLP/HTTP exporters send) or JSON
(``application/json``), plain or gzip (``Content-Encoding: gzip``). It is produced as OTLP/JSON (the
Collector's ``otlp_json`` encoding: hex trace and span ids, enums as integers) to the otlp topic
(traces) or the otlp_logs topic (logs), split by trace: SDK exporters batch the spans of many traces into
one request, so each trace's spans (with their resource and scope) are produced as a request of their own
keyed by its trace id, and every span of a trace reaches the partition whose owner joins it. The worker's
OTLP reader (``kafka.otlp_input`` / ``kafka.otlp_logs_input``) reads them from there, on this worker or
another. Parsing, splitting and encoding run in a thread, off the event loop.

A body that cannot be read is answered 400 with the reason, one over ``kafka.otlp_http_max_bytes`` (as
sent or unpacked) 413, an unsupported type 415, each with one WARNING line (``streams.dashboard.edges``'
pace) and the connection closed, so the rest of a refused body is never read or unpacked; when the broker
does not take it, 503 (OTLP exporters retry that); traces (logs) when ``kafka.otlp_input``
(``otlp_logs_input``) is off, 404 saying so: nothing would read them. Who may send: the same rule as the
dashboard, since these routes are on its server (loopback, or the dashboard's token / basic-auth
credentials beyond it).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import zlib
from typing import Any

from aiohttp import web
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from schemas.errors import GroundwatchError
from schemas.json_input import DEFAULT_MAX_DEPTH, read_json
from streams.context import StreamContext
from streams.dashboard.edges import RefusalLog

log = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class BadBody(GroundwatchError, ValueError):
    """A request body that cannot be read, with the reason (answered 400, 413 or 415)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def hex_ids(node: Any) -> Any:
    """Proto3 JSON writes bytes as base64; OTLP/JSON writes trace and span ids as hex."""
    if isinstance(node, dict):
        return {
            k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else hex_ids(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [hex_ids(v) for v in node]
    return node


GZIP_MAGIC = b"\x1f\x8b"


def unpack(raw: bytes, encoding: str, limit: int) -> bytes:
    """The body without its Content-Encoding (gzip or none), never more than ``limit`` bytes unpacked.
    aiohttp's server unpacks gzip as it reads (``read_body`` counts what it unpacked); a body still
    packed (a server without that) is unpacked here: neither protobuf export request nor JSON starts with
    gzip's magic bytes."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding != "gzip":
        raise BadBody(415, f"Content-Encoding {encoding!r} is not supported: send gzip or none")
    if not raw.startswith(GZIP_MAGIC):
        return raw
    unzip = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        body = unzip.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise BadBody(400, f"the body is not gzip: {exc}") from None
    if len(body) > limit or unzip.unconsumed_tail:
        raise BadBody(413, f"the body unpacked is over {limit} bytes (kafka.otlp_http_max_bytes)")
    if not unzip.eof:
        raise BadBody(400, "the gzip body is cut short")
    return body


def otlp_json(
    body: bytes, content_type: str, kind: str, max_depth: int = DEFAULT_MAX_DEPTH
) -> list[tuple[bytes, str | None]]:
    """The export request of a protobuf or JSON body of ``kind`` (``traces`` or ``logs``) as one OTLP/JSON
    request per trace, each with its trace id (None for the items without one); [] for a request of
    nothing (an empty protobuf or ``{}``)."""
    top = "resourceSpans" if kind == "traces" else "resourceLogs"
    if content_type == PROTOBUF:
        message: Message = ExportTraceServiceRequest() if kind == "traces" else ExportLogsServiceRequest()
        try:
            message.ParseFromString(body)
        except (DecodeError, RecursionError) as exc:
            raise BadBody(400, f"the body is not an OTLP {kind} export request (protobuf): {exc}") from None
        request = hex_ids(MessageToDict(message, use_integers_for_enums=True))
    elif content_type == JSON:
        try:
            request = read_json(body, max_depth)
        except ValueError as exc:
            raise BadBody(400, f"the body is not JSON: {exc}") from None
        if not isinstance(request, dict):
            raise BadBody(400, f"the body is a JSON {type(request).__name__}, not an export request object")
        if set(request) - {top}:
            wrong = sorted(set(request) - {top})
            raise BadBody(400, f"an OTLP {kind} export request holds {top} only, not {', '.join(wrong)}")
        if not isinstance(request.get(top, []), list):
            raise BadBody(400, f"{top} is not a list")
    else:
        raise BadBody(415, f"Content-Type {content_type!r} is not supported: send {PROTOBUF} or {JSON}")
    if not request:
        return []
    return [
        (json.dumps(part, separators=(",", ":")).encode("utf-8"), trace)
        for trace, part in split_by_trace(request, top)
    ]


def split_by_trace(request: dict[str, Any], top: str) -> list[tuple[str | None, dict[str, Any]]]:
    """The export request as one request per trace id, in the order each trace first appears: each keeps
    the resources and scopes of its own spans (log records), with their other fields. Items without a
    trace id go together (None); a resource or scope that is not an object is left out (nothing in it
    could be read)."""
    items = "scopeSpans" if top == "resourceSpans" else "scopeLogs"
    leaf = "spans" if top == "resourceSpans" else "logRecords"
    parts: dict[str | None, list[dict[str, Any]]] = {}
    for resource in request.get(top) or []:
        if not isinstance(resource, dict):
            continue
        in_resource: dict[str | None, list[dict[str, Any]]] = {}
        for scope in resource.get(items) or []:
            if not isinstance(scope, dict):
                continue
            in_scope: dict[str | None, list[Any]] = {}
            for item in scope.get(leaf) or []:
                trace = item.get("traceId") if isinstance(item, dict) else None
                in_scope.setdefault(str(trace) if trace else None, []).append(item)
            for trace, found in in_scope.items():
                in_resource.setdefault(trace, []).append({**scope, leaf: found})
        for trace, scopes in in_resource.items():
            parts.setdefault(trace, []).append({**resource, items: scopes})
    return [(trace, {top: resources}) for trace, resources in parts.items()]


def read_request(
    raw: bytes, encoding: str, content_type: str, kind: str, limit: int, max_depth: int = DEFAULT_MAX_DEPTH
) -> list[tuple[bytes, str | None]]:
    """A body as sent to the OTLP/JSON requests to produce, one per trace (``otlp_json``): unpacked,
    parsed (JSON nested at most ``max_depth``: ``limits.max_json_depth``), split and encoded (CPU work,
    run in a thread); BadBody when it cannot be, or a request is over ``limit`` bytes."""
    parts = otlp_json(unpack(raw, encoding, limit), content_type, kind, max_depth)
    for value, _ in parts:
        if len(value) > limit:
            raise BadBody(
                413, f"a trace's request as OTLP/JSON is over {limit} bytes (kafka.otlp_http_max_bytes)"
            )
    return parts


async def read_body(request: web.Request, limit: int) -> bytes:
    """The body as sent, 413 past ``limit`` bytes (read no further than that). aiohttp (from 3.14.1, the
    floor in pyproject.toml) unpacks a gzip body in bounded chunks as it is read, and drains the rest of
    one refused unread the same way, so a gzip bomb costs a chunk, not what it unpacks to."""
    if request.content_length is not None and request.content_length > limit:
        raise BadBody(
            413, f"the body is {request.content_length} bytes, over {limit} bytes (kafka.otlp_http_max_bytes)"
        )
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > limit:
                what = "unpacked " if request.headers.get("Content-Encoding") else ""
                raise BadBody(413, f"the body {what}is over {limit} bytes (kafka.otlp_http_max_bytes)")
            chunks.append(chunk)
    except BadBody:
        raise
    except Exception as exc:  # a broken gzip stream (aiohttp unpacks as it reads), a cut connection
        raise BadBody(400, f"the body cannot be read: {type(exc).__name__}: {exc}") from None
    return b"".join(chunks)


def _success(request: web.Request) -> web.StreamResponse:
    """An empty Export*ServiceResponse: everything was taken."""
    if request.content_type == PROTOBUF:
        return web.Response(body=b"", content_type=PROTOBUF)
    return web.json_response({})


def add_otlp_routes(web_app: web.Application, ctx: StreamContext) -> None:
    """``POST /v1/traces`` and ``POST /v1/logs`` on the worker's web server."""
    limit = ctx.settings.kafka.otlp_http_max_bytes
    refusals = RefusalLog(clock=ctx.clock)

    async def receive(request: web.Request, kind: str, topic: str) -> web.StreamResponse:
        setting = "otlp_input" if kind == "traces" else "otlp_logs_input"
        if not getattr(ctx.settings.kafka, setting):  # nobody would read what is produced
            why = f"this deployment does not read OTLP {kind}: set GROUNDWATCH_KAFKA__{setting.upper()}=true"
            return web.json_response({"error": why}, status=404)
        try:
            raw = await read_body(request, limit)
            encoding = request.headers.get("Content-Encoding", "")
            parts = await asyncio.to_thread(
                read_request,
                raw,
                encoding,
                request.content_type,
                kind,
                limit,
                ctx.settings.limits.max_json_depth,
            )
        except BadBody as exc:
            refusals.refused_request(exc.status, request.remote, f"{request.path}: {exc}")
            refused = web.json_response({"error": str(exc)}, status=exc.status)
            refused.force_close()  # no keep-alive: the server closes instead of reading the rest
            return refused
        try:
            sent = [await ctx.topic(topic).send(key=t.encode() if t else None, value=v) for v, t in parts]
            for delivery in sent:
                await delivery
        except Exception as exc:  # the broker did not take it: the exporter retries a 503
            log.warning("OTLP/HTTP: producing to %s failed: %s", topic, exc)
            return web.json_response({"error": f"the broker did not take it: {exc}"}, status=503)
        ctx.metrics.events_in.labels("otlp_http").inc()
        return _success(request)

    async def traces(request: web.Request) -> web.StreamResponse:
        return await receive(request, "traces", ctx.names.otlp)

    async def logs(request: web.Request) -> web.StreamResponse:
        return await receive(request, "logs", ctx.names.otlp_logs)

    web_app.router.add_post("/v1/traces", traces)
    web_app.router.add_post("/v1/logs", logs)
