"""Slack-compatible webhook: POST {"text": ...}, retried with exponential backoff on errors, 429 and 5xx."""

from __future__ import annotations

import asyncio
import logging

import httpx

log = logging.getLogger(__name__)


async def post_webhook(
    client: httpx.AsyncClient, url: str, text: str, *, retries: int = 3, backoff_s: float = 0.5
) -> bool:
    """True when the hook accepted the message (2xx); False after the last retry (logged, never raised)."""
    for attempt in range(retries + 1):
        try:
            response = await client.post(url, json={"text": text})
            if response.status_code < 300:
                return True
            retryable = response.status_code == 429 or response.status_code >= 500
            log.warning("webhook answered %s (attempt %d)", response.status_code, attempt + 1)
            if not retryable:
                return False
        except httpx.HTTPError as exc:
            log.warning("webhook failed (attempt %d): %s", attempt + 1, exc)
        if attempt < retries:
            await asyncio.sleep(backoff_s * (2**attempt))
    return False
