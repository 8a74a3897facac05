"""The webhook over real HTTP on 127.0.0.1: Slack-style JSON, retried on 5xx, given up on 4xx."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from pipeline.clock import ManualClock
from streams.alerts.webhook import post_webhook


class Hook:
    def __init__(self) -> None:
        self.codes: list[int] = []
        self.bodies: list[dict[str, str]] = []


@pytest.fixture()
def hook() -> Iterator[tuple[str, Hook]]:
    state = Hook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.bodies.append(json.loads(body))
            code = state.codes.pop(0) if state.codes else 200
            self.send_response(code)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", state
    server.shutdown()
    server.server_close()


async def test_retries_server_errors_then_succeeds(hook: tuple[str, Hook]) -> None:
    url, state = hook
    state.codes = [500, 503]
    async with httpx.AsyncClient() as client:
        assert await post_webhook(client, url, "alert!", retries=3, backoff_s=0.01, sleep=ManualClock().sleep)
    assert state.bodies == [{"text": "alert!"}] * 3


async def test_gives_up_after_retries_and_on_client_errors(hook: tuple[str, Hook]) -> None:
    url, state = hook
    state.codes = [500, 500, 500]
    async with httpx.AsyncClient() as client:
        assert not await post_webhook(client, url, "x", retries=2, backoff_s=0.01, sleep=ManualClock().sleep)
        assert len(state.bodies) == 3
        state.codes = [404]
        assert not await post_webhook(client, url, "x", retries=2, backoff_s=0.01, sleep=ManualClock().sleep)
        assert len(state.bodies) == 4


async def test_unreachable_hook_is_not_raised() -> None:
    async with httpx.AsyncClient() as client:
        hook = "http://127.0.0.1:9/"
        assert not await post_webhook(client, hook, "x", retries=1, backoff_s=0.01, sleep=ManualClock().sleep)
