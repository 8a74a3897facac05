"""Requests the web server cannot parse: an oversized request line gets 414, an oversized header 431,
other garbage 400; the log gets one WARNING line a while for them, never a traceback or an ERROR. With
aiohttp's compiled parser and with its pure-Python one (``AIOHTTP_NO_EXTENSIONS=1``), and the worker's
web server is one of these."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import http_parser, web, web_protocol

from pipeline.clock import ManualClock
from schemas.settings import KafkaSettings
from streams.app import create_app
from streams.dashboard.edges import MAX_FIELD, MAX_REQUEST_LINE, EdgeRunner, RefusalLog
from tests.settings_factory import make_settings

REPO = Path(__file__).resolve().parents[2]


async def serve(runner: EdgeRunner) -> AsyncIterator[int]:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    runner.app.router.add_get("/", hello)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    yield server.sockets[0].getsockname()[1]
    await runner.cleanup()


@pytest.fixture()
def runner() -> EdgeRunner:
    return EdgeRunner(web.Application(), clock=ManualClock(), access_log=None)


@pytest.fixture()
async def port(runner: EdgeRunner) -> AsyncIterator[int]:
    async for p in serve(runner):
        yield p


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
    runner: EdgeRunner, port: int, caplog: pytest.LogCaptureFixture
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
    assert runner.refusals.refused == 16 and runner.refusals.unlogged == 15


async def test_the_pure_python_parser_tells_the_lines_apart_by_what_it_was_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With equal limits the limit an error carries says nothing: 414 and 431 come from the parser's
    state (the pure-Python parser, which aiohttp uses without its compiled extensions)."""
    monkeypatch.setattr(web_protocol, "HttpRequestParser", http_parser.HttpRequestParserPy)
    runner = EdgeRunner(web.Application(), clock=ManualClock(), access_log=None, max_line_size=MAX_FIELD)
    async for port in serve(runner):
        assert await status_of(port, get(b"/" + b"a" * (MAX_FIELD + 10))) == 414
        assert await status_of(port, get(b"/", b"X-Big: " + b"b" * (MAX_FIELD + 10))) == 431
        assert await status_of(port, get(b"/", b"Referer: /" + b"b" * (MAX_FIELD + 10))) == 431
        assert await status_of(port, get(b"/")) == 200


async def test_too_many_headers_get_431(
    runner: EdgeRunner, port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Each header under its limit, but more of them than the server takes (aiohttp: 128): the header
    fields are too large as a whole, 431 (RFC 6585), with the same one WARNING line, no traceback."""
    caplog.set_level(logging.DEBUG)
    many = [b"X-%d: v" % i for i in range(1000)]
    assert await status_of(port, get(b"/", *many)) == 431
    assert await status_of(port, get(b"/", *many[:100])) == 200
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    assert [r.levelno for r in caplog.records if "refused" in r.getMessage()] == [logging.WARNING]


@pytest.mark.skipif(os.environ.get("AIOHTTP_NO_EXTENSIONS") == "1", reason="this is the run it starts")
def test_the_answers_hold_without_aiohttps_compiled_extensions() -> None:
    """The tests above in a process whose aiohttp imported no compiled parser at all."""
    env = {**os.environ, "AIOHTTP_NO_EXTENSIONS": "1", "PYTHONPATH": str(REPO)}
    parser = subprocess.run(
        [sys.executable, "-c", "from aiohttp import http_parser, web_protocol; "
         "print(web_protocol.HttpRequestParser is http_parser.HttpRequestParserPy)"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert parser.stdout.strip() == "True", parser.stdout + parser.stderr  # the child really parses in Python
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "not compiled"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_the_workers_web_server_is_the_edge_runner(tmp_path: Path) -> None:
    """faust's web driver keeps its runner in ``_runner``: were it renamed, the worker would serve
    through faust's plain runner and this fails."""
    settings = make_settings(kafka=KafkaSettings(datadir=tmp_path, web_enabled=True))
    stream_app = create_app(settings)
    web_driver = stream_app.app.web
    assert isinstance(web_driver._runner, EdgeRunner)  # type: ignore[attr-defined]
    assert web_driver._runner.refusals.clock is stream_app.resources.clock  # type: ignore[attr-defined]


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
