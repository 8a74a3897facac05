"""Who may read the dashboard: anyone on loopback; elsewhere a bearer token or basic-auth credentials.

A server bound to any address but loopback refuses to start without credentials
(``require_credentials``). With a token, a browser opens ``/dashboard/?token=...`` once: the token is
kept in an HttpOnly cookie and the address without it is loaded: always a path on the same server
(``same_origin``), whatever the request's path looks like.
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
from collections.abc import Awaitable, Callable
from urllib.parse import urlencode

from aiohttp import web
from aiohttp.typedefs import Middleware

from schemas.errors import DashboardConfigError
from schemas.settings import DashboardSettings

COOKIE = "groundwatch_dashboard_token"
#: answered without credentials: Kubernetes probes carry none, and they reveal nothing but up/ready
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def require_credentials(host: str, settings: DashboardSettings) -> None:
    """Raise unless ``host`` is loopback or credentials are set."""
    if not is_loopback(host) and not settings.has_credentials:
        raise DashboardConfigError(
            f"refusing to serve the dashboard on {host!r} without credentials: set "
            "GROUNDWATCH_DASHBOARD__TOKEN, or GROUNDWATCH_DASHBOARD__USERNAME and __PASSWORD "
            "(or bind 127.0.0.1)"
        )


def _same(given: str, expected: str) -> bool:
    """Constant-time comparison of any text: aiohttp hands over bytes that are not UTF-8 as lone
    surrogates (``surrogateescape``), which ``surrogatepass`` encodes instead of raising, so they are
    simply a credential that does not match."""
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def _credentials(header: str, scheme: str) -> str | None:
    """What follows ``scheme`` in an Authorization header; the scheme in any case (RFC 9110 11.1)."""
    given, _, rest = header.partition(" ")
    return rest.strip(" \t") if given.lower() == scheme else None


def authorised(request: web.Request, settings: DashboardSettings) -> bool:
    return accepts(settings, request.headers.get("Authorization", ""), request.cookies.get(COOKIE, ""))


def accepts(settings: DashboardSettings, header: str, cookie: str) -> bool:
    """Whether an Authorization header (``Bearer <token>`` or ``Basic <base64>``) or the cookie holds
    the credentials; any text, even bytes that are not UTF-8, is an answer, never an error."""
    token = settings.token.get_secret_value() if settings.token else ""
    if token:
        bearer = _credentials(header, "bearer")
        if bearer is not None and _same(bearer, token):
            return True
        if _same(cookie, token):
            return True
    basic = _credentials(header, "basic")
    if settings.username and settings.password and basic is not None:
        try:
            user, _, password = base64.b64decode(basic, validate=True).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):  # not base64 (or not ASCII), or not UTF-8 inside
            return False
        return _same(user, settings.username) and _same(password, settings.password.get_secret_value())
    return False


def same_origin(request: web.Request, drop: str = "token") -> str:
    """Where to send a browser back to: the request's path and query without ``drop``, as a path on this
    server. A path that begins with more than one slash or a backslash (``//example.org/x``,
    ``/\\example.org``) would be another site's address to a browser: its leading slashes are one."""
    raw = "".join(ch for ch in request.rel_url.raw_path if ch.isprintable() and not ch.isspace())
    path = "/" + raw.lstrip("/\\")
    query = urlencode([(k, v) for k, v in request.query.items() if k != drop])
    return f"{path}?{query}" if query else path


def auth_middleware(settings: DashboardSettings) -> Middleware:
    """Checks every request when credentials are set (none: loopback only, see require_credentials)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not settings.has_credentials or authorised(request, settings) or request.path in OPEN_PATHS:
            return await handler(request)
        token = settings.token.get_secret_value() if settings.token else ""
        given = request.query.get("token", "")
        if token and given and _same(given, token):
            response = web.HTTPFound(same_origin(request))
            response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", secure=request.secure)
            raise response
        headers = {"WWW-Authenticate": 'Basic realm="groundwatch"'} if settings.username else {}
        raise web.HTTPUnauthorized(
            text='{"error": "unauthorised"}', content_type="application/json", headers=headers
        )

    return middleware
