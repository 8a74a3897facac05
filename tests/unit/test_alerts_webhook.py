"""The webhook over real HTTP on 127.0.0.1: Slack-style JSON, retried on 5xx, given up on 4xx."""

from __future__ import annotations

import httpx

from pipeline.clock import ManualClock
from streams.alerts.webhook import post_webhook
from tests.fixtures.receivers import Hook


async def test_retries_server_errors_then_succeeds(hook: tuple[str, Hook]) -> None:
    url, state = hook
    state.codes = [500, 503]
    async with httpx.AsyncClient() as client:
        assert await post_webhook(client, url, "alert!", retries=3, backoff_s=0.01, sleep=ManualClock().sleep)
    assert state.bodies() == [{"text": "alert!"}] * 3


async def test_gives_up_after_retries_and_on_client_errors(hook: tuple[str, Hook]) -> None:
    url, state = hook
    state.codes = [500, 500, 500]
    async with httpx.AsyncClient() as client:
        assert not await post_webhook(client, url, "x", retries=2, backoff_s=0.01, sleep=ManualClock().sleep)
        assert len(state.posts) == 3
        state.codes = [404]
        assert not await post_webhook(client, url, "x", retries=2, backoff_s=0.01, sleep=ManualClock().sleep)
        assert len(state.posts) == 4


async def test_unreachable_hook_is_not_raised() -> None:
    async with httpx.AsyncClient() as client:
        hook = "http://127.0.0.1:9/"
        assert not await post_webhook(client, hook, "x", retries=1, backoff_s=0.01, sleep=ManualClock().sleep)
