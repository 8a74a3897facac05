"""HTTP delivery with retries: exponential backoff on connection errors, timeouts, 429 and 5xx; a 4xx is
final; the whole, retries and backoff included, bounded by a deadline. ``post_webhook`` is the
Slack-compatible post ({"text": ...}) of GROUNDWATCH_ALERTS__WEBHOOK_URL."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class Outcome:
    ok: bool
    attempts: int
    error: str = ""  # the last failure ("" when delivered)


async def post_with_retries(
    client: httpx.AsyncClient,
    url: str,
    *,
    content: bytes,
    headers: Mapping[str, str],
    retries: int,
    backoff_s: float,
    what: str = "webhook",
    sleep: Sleep = asyncio.sleep,
    timeout_s: float | None = None,
    deadline_s: float | None = None,
) -> Outcome:
    """POST ``content`` until a 2xx, at most ``retries`` + 1 times, each attempt within ``timeout_s``
    and all of them (backoff included) within ``deadline_s``; never raises an HTTP error."""
    error = ""
    attempts = 0
    try:
        async with asyncio.timeout(deadline_s):
            for attempt in range(retries + 1):
                attempts = attempt + 1
                try:
                    response = await client.post(
                        url, content=content, headers=dict(headers), timeout=timeout_s or client.timeout
                    )
                    if response.status_code < 300:
                        return Outcome(True, attempts)
                    error = f"HTTP {response.status_code}: {response.text[:200]}"
                    log.warning("%s answered %s (attempt %d)", what, response.status_code, attempts)
                    if response.status_code != 429 and response.status_code < 500:
                        return Outcome(False, attempts, error)
                except httpx.HTTPError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    log.warning("%s failed (attempt %d): %s", what, attempts, error)
                if attempt < retries:
                    await sleep(backoff_s * (2**attempt))
    except TimeoutError:
        error = f"no delivery within its {deadline_s:g} s deadline" + (f" (last: {error})" if error else "")
        log.warning("%s: %s", what, error)
    return Outcome(False, attempts, error)


async def post_webhook(
    client: httpx.AsyncClient, url: str, text: str, *, retries: int = 3, backoff_s: float = 0.5
) -> bool:
    """True when the hook accepted the message (2xx); False after the last retry (logged, never raised)."""
    outcome = await post_with_retries(
        client, url, content=json_bytes({"text": text}), headers=JSON, retries=retries, backoff_s=backoff_s
    )
    return outcome.ok


JSON = {"Content-Type": "application/json"}


def json_bytes(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8")
