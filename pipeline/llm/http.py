"""The judge's chat-completions POST over one pooled aiohttp session (the worker's hot path).

The openai SDK on httpx costs several times the CPU a request of aiohttp with orjson (docs/performance.md,
"Throughput and CPU"); an instant judge makes a worker spend most of its time there. The request is the
one the SDK sends (``Authorization: Bearer``, the JSON body); the answer is the response's JSON as a
dict. Failures are the exceptions below, which ``pipeline.llm.client`` maps as it maps the SDK's.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from schemas.errors import GroundwatchError
from schemas.json_input import json_value


class HttpStatusError(GroundwatchError):
    """The server answered with an error status; ``message`` is its error text (from the JSON body)."""

    def __init__(self, status: int, message: str, retry_after: str | None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after


class HttpTimeout(GroundwatchError):
    """No complete answer within the timeout."""


class HttpConnectionError(GroundwatchError):
    """The connection failed or broke (refused, reset, disconnected, a truncated body)."""


def error_message(status: int, raw: bytes) -> str:
    """The server's error text: ``error.message`` of a JSON body, else the body's start."""
    ok, body = json_value(raw.decode("utf-8", "replace"))
    if not ok:
        return raw[:300].decode("utf-8", "replace") or f"status {status}"
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])[:300]
    return str(body)[:300]


def env_proxy(url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy the environment names for ``url`` (HTTP(S)_PROXY, NO_PROXY), as httpx would use it;
    looked up once, not per request (aiohttp's ``trust_env`` asks a thread, for it and for ~/.netrc,
    at every request)."""
    try:
        return get_env_proxy_for_url(URL(url))
    except LookupError:
        return None, None


class ChatHttp:
    """POST ``{base_url}/chat/completions`` with at most ``pool`` connections; one session per loop,
    opened on the first request (an aiohttp session belongs to the loop that made it)."""

    def __init__(self, base_url: str, api_key: str, timeout_s: float, pool: int) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._pool = pool
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._proxy, self._proxy_auth = env_proxy(self.url)

    def _open(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            self._loop = loop  # a session of another (finished) loop cannot be used here: left behind
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool),
                timeout=self._timeout,
            )
        return self._session

    async def post(self, body: dict[str, Any]) -> dict[str, Any]:
        """The response's JSON object, or HttpStatusError / HttpTimeout / HttpConnectionError /
        ValueError (a 2xx body that is not a JSON object)."""
        data = orjson.dumps(body)
        try:
            request = self._open().post(
                self.url, data=data, headers=self._headers, proxy=self._proxy, proxy_auth=self._proxy_auth
            )
            async with request as resp:
                raw = await resp.read()
                if resp.status >= 400:
                    message = error_message(resp.status, raw)
                    raise HttpStatusError(resp.status, message, resp.headers.get("retry-after"))
        except TimeoutError as exc:
            raise HttpTimeout(str(exc)) from exc
        except aiohttp.ClientError as exc:
            raise HttpConnectionError(f"{type(exc).__name__}: {exc}") from exc
        answer = loads(raw)
        if not isinstance(answer, dict):
            raise ValueError(f"the response is not a JSON object: {raw[:120]!r}")
        return answer

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and self._loop is asyncio.get_running_loop():
            await session.close()


def loads(raw: bytes) -> Any:
    """A response body's JSON: orjson (a judge's answer with token log-probabilities is a large
    document, and decoding it was the judge client's largest cost); the standard parser only for what
    orjson refuses and Python reads (``NaN``, ``Infinity``: a log-probability a server wrote so), so
    what parses does not depend on the parser. Raises ValueError."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)
