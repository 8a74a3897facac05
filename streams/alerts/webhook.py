"""HTTP delivery with retries: exponential backoff on connection errors, timeouts, 429 and 5xx; a 4xx is
final; the whole, retries and backoff included, bounded by a deadline. ``post_webhook`` is the
Slack-compatible post ({"text": ...}) of GROUNDWATCH_ALERTS__WEBHOOK_URL."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from pipeline.retry import NO_CAP, Backoff, Sleep, retry
from schemas.errors import GroundwatchError

log = logging.getLogger(__name__)

__all__ = ["JSON", "Outcome", "Sleep", "json_bytes", "post_webhook", "post_with_retries"]


@dataclass(frozen=True)
class Outcome:
    ok: bool
    attempts: int
    error: str = ""  # the last failure ("" when delivered)


class _Again(GroundwatchError):
    """An answer worth retrying: 429 or 5xx."""


async def post_with_retries(
    client: httpx.AsyncClient,
    url: str,
    *,
    content: bytes,
    headers: Mapping[str, str],
    retries: int,
    backoff_s: float,
    what: str = "webhook",
    sleep: Sleep,
    timeout_s: float | None = None,
    deadline_s: float | None = None,
) -> Outcome:
    """POST ``content`` until a 2xx, at most ``retries`` + 1 times (``pipeline.retry``: ``backoff_s``
    doubling, no cap, no jitter), each attempt within ``timeout_s`` and all of them (backoff included)
    within ``deadline_s``; any other 4xx is final. Never raises an HTTP error."""
    final = ""  # a 4xx other than 429: not retried
    attempts = 0
    last = ""

    async def post() -> None:
        nonlocal final, attempts, last
        attempts += 1
        response = await client.post(
            url, content=content, headers=dict(headers), timeout=timeout_s or client.timeout
        )
        if response.status_code < 300:
            return
        error = f"HTTP {response.status_code}: {response.text[:200]}"
        last = error
        if response.status_code != 429 and response.status_code < 500:
            log.warning("%s answered %s", what, response.status_code)
            final = error
            return
        raise _Again(error)

    try:
        async with asyncio.timeout(deadline_s):
            tried = await retry(
                post,
                what=what,
                attempts=retries + 1,
                backoff=Backoff(first_s=backoff_s, max_s=NO_CAP),
                retry_on=(_Again, httpx.HTTPError),
                sleep=sleep,
                level=logging.WARNING,
            )
    except TimeoutError:
        error = f"no delivery within its {deadline_s:g} s deadline" + (f" (last: {last})" if last else "")
        log.warning("%s: %s", what, error)
        return Outcome(False, attempts, error)
    exc = tried.error
    if exc is not None:
        error = str(exc) if isinstance(exc, _Again) else f"{type(exc).__name__}: {exc}"
        return Outcome(False, tried.attempts, error)
    return Outcome(not final, tried.attempts, final)


async def post_webhook(
    client: httpx.AsyncClient, url: str, text: str, *, sleep: Sleep, retries: int = 3, backoff_s: float = 0.5
) -> bool:
    """True when the hook accepted the message (2xx); False after the last retry (logged, never raised)."""
    outcome = await post_with_retries(
        client, url, content=json_bytes({"text": text}), headers=JSON, retries=retries, backoff_s=backoff_s,
        sleep=sleep,
    )  # fmt: skip
    return outcome.ok


JSON = {"Content-Type": "application/json"}


def json_bytes(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8")
