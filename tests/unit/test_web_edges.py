"""Requests the web server cannot parse: an oversized request line gets 414, an oversized header 431,
other garbage 400; the log gets one WARNING line a while for them, never a traceback or an ERROR."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from pipeline.clock import ManualClock
from streams.dashboard.edges import MAX_FIELD, MAX_REQUEST_LINE, EdgeRequestHandler, EdgeRunner, RefusalLog


@pytest.fixture()
async def port(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[int]:
    monkeypatch.setattr(EdgeRequestHandler, "refusals", RefusalLog(clock=ManualClock()))

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = EdgeRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    yield server.sockets[0].getsockname()[1]
    await runner.cleanup()


async def status_of(port: int, raw: bytes) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        line = await reader.readline()
        return int(line.split()[1])
    finally:
        writer.close()


def get(target: bytes, *headers: bytes) -> bytes:
    return b"\r\n".join([b"GET " + target + b" HTTP/1.1", b"Host: x", *headers, b"Connection: close"]) + (
        b"\r\n\r\n"
    )


async def test_oversized_requests_get_414_or_431_and_one_warning_line(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    long_target = b"/" + b"a" * (MAX_REQUEST_LINE + 10)
    for _ in range(5):
        assert await status_of(port, get(long_target)) == 414
        assert await status_of(port, get(b"/", b"X-Big: " + b"b" * (MAX_FIELD + 10))) == 431
        assert await status_of(port, get(b"/", b"X-" + b"n" * (MAX_FIELD + 10) + b": v")) == 431
    assert await status_of(port, b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n") == 400
    assert await status_of(port, get(b"/")) == 200  # the server still answers
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]  # the first; the rest within the minute
    assert "414" in warnings[0].getMessage()
    assert EdgeRequestHandler.refusals.refused == 16 and EdgeRequestHandler.refusals.unlogged == 15


def test_the_refusal_log_says_how_many_were_refused_since_its_last_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    clock = ManualClock()
    refusals = RefusalLog(every_s=60, clock=clock)
    for _ in range(100):
        refusals.refused_request(414, "127.0.0.1", "LineTooLong: x")
        clock.advance(0.5)  # 50 s in all: still within the first minute
    assert len(caplog.records) == 1
    clock.advance(10)
    refusals.refused_request(431, "127.0.0.1", "LineTooLong: \x1b[31m\nforged line")
    assert len(caplog.records) == 2
    line = caplog.records[1].getMessage()
    assert "refused 100 request(s)" in line and "431" in line and "\n" not in line
