"""OTLP/HTTP routes (streams/otlp_http.py) on an aiohttp server bound to 127.0.0.1, the broker a fake
topic: what is produced (OTLP/JSON, hex ids, keyed by trace id), the credentials rule of the dashboard
when credentials are set, and the answers to bodies that cannot be read or a broker that is down."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import logging
import re
import tracemalloc
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from pipeline.clock import ManualClock
from pipeline.otlp import read_batch
from streams.context import StreamContext, new_context
from streams.dashboard.auth import auth_middleware
from streams.dashboard.edges import EdgeRunner
from streams.otlp_http import add_otlp_routes
from streams.testing import Topic
from tests.settings_factory import make_settings

TOKEN = "s3cret-token-of-the-test"
TRACE, SPAN = bytes(range(16)), bytes(range(8))


class EdgeTestServer(TestServer):
    """aiohttp's test server on the worker's runner (``EdgeRunner``: its refusals and closing rules)."""

    async def _make_runner(self, **kwargs: object) -> web.BaseRunner:
        return EdgeRunner(self.app, clock=ManualClock(), **kwargs)  # type: ignore[arg-type]


def context(**kafka: object) -> StreamContext:
    kafka = {"otlp_http_max_bytes": 4096, "otlp_input": True, "otlp_logs_input": True, **kafka}
    settings = make_settings(kafka=kafka, dashboard={"token": TOKEN})
    ctx = new_context(settings, app=None)  # type: ignore[arg-type]
    for name in ctx.names.all():
        ctx.topics[name] = Topic()
    return ctx


@pytest.fixture()
async def served() -> AsyncIterator[tuple[TestClient, StreamContext]]:
    ctx = context()
    app = web.Application(middlewares=[auth_middleware(ctx.settings.dashboard)])
    add_otlp_routes(app, ctx)
    async with TestClient(EdgeTestServer(app, host="127.0.0.1")) as client:
        yield client, ctx


def sent(ctx: StreamContext, name: str) -> list[bytes]:
    topic = ctx.topics[name]
    assert isinstance(topic, Topic)
    return topic.sent


def trace_request() -> bytes:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name, span.kind = TRACE, SPAN, "chat", 3
    attribute = span.attributes.add()
    attribute.key, attribute.value.string_value = "gen_ai.operation.name", "chat"
    return request.SerializeToString()


AUTH = {"Authorization": f"Bearer {TOKEN}"}
PROTO = {**AUTH, "Content-Type": "application/x-protobuf"}


async def test_a_protobuf_trace_request_is_produced_as_otlp_json_keyed_by_its_trace(served) -> None:  # type: ignore[no-untyped-def]
    client, ctx = served
    answer = await client.post("/v1/traces", data=gzip.compress(trace_request()),
                               headers={**PROTO, "Content-Encoding": "gzip"})  # fmt: skip
    assert answer.status == 200 and answer.content_type == "application/x-protobuf"
    assert await answer.read() == b""  # an empty ExportTraceServiceResponse: all taken
    [value] = sent(ctx, ctx.names.otlp)
    request = json.loads(value)
    [span] = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert (span["traceId"], span["spanId"], span["kind"]) == (TRACE.hex(), SPAN.hex(), 3)
    assert read_batch(request).spans[0].trace_id == TRACE.hex()  # what the OTLP reader takes


async def test_logs_go_to_the_logs_topic_and_json_bodies_pass_as_they_are(served) -> None:  # type: ignore[no-untyped-def]
    client, ctx = served
    logs = ExportLogsServiceRequest()
    logs.resource_logs.add().scope_logs.add().log_records.add().event_name = "gen_ai.choice"
    answer = await client.post("/v1/logs", data=logs.SerializeToString(), headers=PROTO)
    assert answer.status == 200 and len(sent(ctx, ctx.names.otlp_logs)) == 1
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab" * 16, "spanId": "cd" * 8}]}]}]}
    answer = await client.post("/v1/traces", json=body, headers=AUTH)
    assert answer.status == 200 and await answer.json() == {}
    assert json.loads(sent(ctx, ctx.names.otlp)[-1]) == body
    empty = await client.post("/v1/traces", data=b"", headers=PROTO)  # a valid request of nothing
    assert empty.status == 200 and len(sent(ctx, ctx.names.otlp)) == 1  # not produced


@pytest.mark.parametrize(
    ("body", "headers", "status", "says"),
    [
        (b"\x0a\xff\xff\xff", PROTO, 400, "not an OTLP traces export request"),
        (b"{not json", {**AUTH, "Content-Type": "application/json"}, 400, "not JSON"),
        (b'{"resourceLogs": []}', {**AUTH, "Content-Type": "application/json"}, 400, "resourceSpans only"),
        (b'{"resourceSpans": {}}', {**AUTH, "Content-Type": "application/json"}, 400, "not a list"),
        (b"\xff\xfe", {**AUTH, "Content-Type": "application/json"}, 400, "not JSON"),
        (b"{}", {**AUTH, "Content-Type": "text/plain"}, 415, "not supported"),
        (b"{}", {**PROTO, "Content-Encoding": "snappy"}, 415, "gzip or none"),
        (b"x" * 5000, PROTO, 413, "over 4096 bytes"),
        (gzip.compress(b"\x00" * 50_000), {**PROTO, "Content-Encoding": "gzip"}, 413, "unpacked"),
        (
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03 not deflate data at all \xff\xff",
            {**PROTO, "Content-Encoding": "gzip"},
            400,
            "cannot be read",
        ),
    ],
)
async def test_a_body_that_cannot_be_read_is_refused_with_the_reason_and_nothing_produced(
    served,
    body: bytes,
    headers: dict[str, str],
    status: int,
    says: str,  # type: ignore[no-untyped-def]
) -> None:
    client, ctx = served
    answer = await client.post("/v1/traces", data=body, headers=headers)
    assert answer.status == status and says in (await answer.json())["error"]
    assert sent(ctx, ctx.names.otlp) == []


async def test_with_credentials_set_a_request_without_them_is_refused(served) -> None:  # type: ignore[no-untyped-def]
    client, ctx = served
    for headers in ({"Content-Type": "application/x-protobuf"},
                    {"Content-Type": "application/x-protobuf", "Authorization": "Bearer wrong"}):  # fmt: skip
        answer = await client.post("/v1/traces", data=trace_request(), headers=headers)
        assert answer.status == 401
    basic = base64.b64encode(b"u:p").decode()
    wrong = {"Content-Type": "application/x-protobuf", "Authorization": f"Basic {basic}"}
    answer = await client.post("/v1/traces", data=trace_request(), headers=wrong)
    assert answer.status == 401 and sent(ctx, ctx.names.otlp) == []


async def test_a_broker_that_does_not_take_the_request_is_a_503_the_exporter_retries(served) -> None:  # type: ignore[no-untyped-def]
    client, ctx = served
    topic = ctx.topics[ctx.names.otlp]
    assert isinstance(topic, Topic)
    topic.fail = True
    answer = await client.post("/v1/traces", data=trace_request(), headers=PROTO)
    assert answer.status == 503 and "the broker did not take it" in (await answer.json())["error"]


async def test_what_this_deployment_does_not_read_is_refused_not_produced() -> None:
    ctx = context(otlp_logs_input=False)
    app = web.Application()
    add_otlp_routes(app, ctx)
    async with TestClient(EdgeTestServer(app, host="127.0.0.1")) as client:
        answer = await client.post("/v1/logs", data=b"", headers=PROTO)
        assert answer.status == 404 and "OTLP_LOGS_INPUT=true" in (await answer.json())["error"]
        assert (await client.post("/v1/traces", data=trace_request(), headers=PROTO)).status == 200
    assert sent(ctx, ctx.names.otlp_logs) == [] and len(sent(ctx, ctx.names.otlp)) == 1


async def answer_head(reader: asyncio.StreamReader) -> bytes:
    """The status line and headers of the next answer on a connection (what came before it closed, if it
    closed first)."""
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as cut:
        return cut.partial


async def test_a_gzip_bomb_is_refused_413_without_unpacking_it_into_memory() -> None:
    """64 MiB of zeros gzipped to 64 kB, on a server that takes 4 kB: answered 413 once what was unpacked
    passes the limit, reading it holds no more than a small part of it (aiohttp from 3.14.1, pyproject's
    floor, unpacks a body in bounded chunks as it is read), and the connection is closed after the answer
    instead of the rest being read and unpacked (which cost the event loop seconds of CPU a bomb)."""
    ctx = context()
    app = web.Application()
    add_otlp_routes(app, ctx)
    bomb = gzip.compress(b"\x00" * 64 * 2**20)
    head = (
        "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
        f"Content-Encoding: gzip\r\nContent-Length: {len(bomb)}\r\n\r\n"
    ).encode()
    empty = b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n" \
        b"Content-Length: 0\r\n\r\n"  # fmt: skip
    async with EdgeTestServer(app, host="127.0.0.1") as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        tracemalloc.start()
        try:
            writer.write(head + bomb)
            first = await answer_head(reader)
            assert first.startswith(b"HTTP/1.1 413 "), first
            await reader.readexactly(int(re.search(rb"Content-Length: (\d+)", first)[1]))  # type: ignore[index]
            assert await reader.read() == b""  # closed: the rest is never read
            _, peak = tracemalloc.get_traced_memory()
            reader, writer2 = await asyncio.open_connection("127.0.0.1", server.port)
            writer2.write(empty)  # a new connection is served as usual
            second = await answer_head(reader)
            writer2.close()
        finally:
            tracemalloc.stop()
            writer.close()
    assert second.startswith(b"HTTP/1.1 200 "), second
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB held while refusing a 64 MiB gzip bomb"
    assert sent(ctx, ctx.names.otlp) == []


async def test_a_request_mixing_traces_is_produced_as_one_request_per_trace_keyed_by_it(served) -> None:  # type: ignore[no-untyped-def]
    """SDK exporters batch the spans of many traces: each trace's spans, with their resource and scope,
    are a request of their own under its trace id, so one partition's owner sees every span of a trace."""
    client, ctx = served
    request = ExportTraceServiceRequest()
    traces = [bytes([t]) * 16 for t in (1, 2, 3)]
    for r in range(2):  # two resources, each with spans of all three traces in two scopes
        resource = request.resource_spans.add()
        attribute = resource.resource.attributes.add()
        attribute.key, attribute.value.string_value = "service.name", f"svc{r}"
        for sc in range(2):
            scope = resource.scope_spans.add()
            scope.scope.name = f"scope{sc}"
            for t, trace in enumerate(traces):
                span = scope.spans.add()
                span.trace_id, span.span_id, span.name = trace, bytes([r, sc, t]) + bytes(5), f"s{r}{sc}{t}"
    answer = await client.post("/v1/traces", data=request.SerializeToString(), headers=PROTO)
    assert answer.status == 200
    topic = ctx.topics[ctx.names.otlp]
    assert isinstance(topic, Topic)
    assert topic.keys == [t.hex().encode() for t in traces]
    for value, trace in zip(topic.sent, traces, strict=True):
        part = json.loads(value)
        assert [r["resource"]["attributes"][0]["value"]["stringValue"] for r in part["resourceSpans"]] == [
            "svc0",
            "svc1",
        ]
        spans = [
            (scope["scope"]["name"], span["traceId"], span["name"])
            for r in part["resourceSpans"]
            for scope in r["scopeSpans"]
            for span in scope["spans"]
        ]
        t = traces.index(trace)
        assert spans == [(f"scope{sc}", trace.hex(), f"s{r}{sc}{t}") for r in range(2) for sc in range(2)]


async def test_a_broken_gzip_body_is_a_400_with_one_warning_and_no_traceback(
    served,  # type: ignore[no-untyped-def]
    caplog: pytest.LogCaptureFixture,
) -> None:
    client, ctx = served
    packed = gzip.compress(trace_request())
    broken = packed[:10] + b"\xff" * 12 + packed[22:]
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            answer = await client.post(
                "/v1/traces", data=broken, headers={**PROTO, "Content-Encoding": "gzip"}
            )
            assert answer.status == 400 and "gzip" in (await answer.json())["error"]
        await asyncio.sleep(0.2)  # (what the server does after answering: no drain of the body)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "/v1/traces" in warnings[0], warnings
    assert sent(ctx, ctx.names.otlp) == []


async def test_an_encoding_the_server_cannot_unpack_is_a_415_saying_which_it_takes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctx = context()
    runner = EdgeRunner(web.Application(), clock=ManualClock(), access_log=None)
    add_otlp_routes(runner.app, ctx)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    assert site._server is not None
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = b"\x1b\x00\x00"
        writer.write(
            b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Encoding: br\r\nContent-Length: 3\r\nConnection: close\r\n\r\n" + body
        )
        answer = await reader.read()
        writer.close()
    finally:
        await runner.cleanup()
    assert answer.split(b"\r\n")[0].endswith(b" 415 Unsupported Media Type"), answer
    assert b"send gzip or none" in answer
    assert not [r for r in caplog.records if r.exc_info]
