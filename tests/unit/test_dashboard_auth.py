"""Dashboard credentials: any bytes in the Authorization header, the cookie or ``?token=`` are a failed
login (401, nothing logged as an error), the scheme is matched in any case, and a credential too weak
to guard a dashboard beyond loopback is refused as a setting."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestServer
from pydantic import SecretStr, ValidationError

from schemas.settings import DASHBOARD_TOKEN_MIN_CHARS, DashboardSettings
from streams.dashboard.api import root_app
from streams.dashboard.auth import COOKIE, accepts

TOKEN = "s3cret-dashboard-token"
SETTINGS = DashboardSettings(token=SecretStr(TOKEN), username="ops", password=SecretStr("pw"))


def raw(data: bytes) -> str:
    """A header value as aiohttp hands it over: its bytes decoded as UTF-8 with surrogateescape."""
    return data.decode("utf-8", "surrogateescape")


def request(authorization: bytes = b"", cookie: bytes = b"") -> bool:
    return accepts(SETTINGS, raw(authorization), raw(cookie))


BAD_BYTES = [
    b"Bearer \xff\xfe",
    b"bearer \xff\xfe",
    b"Bearer \xed\xa0\x80",  # an encoded lone surrogate
    b"Bearer " + TOKEN.encode() + b"\xff",
    b"\xff\xfe " + TOKEN.encode(),  # the scheme itself
    b"Basic \xff\xfe",
    b"Basic " + base64.b64encode(b"ops:\xff\xfe"),  # base64 of bytes that are not UTF-8
    b"Basic " + base64.b64encode(b"\xffops:pw"),
    b"Basic b3BzOnB3\xff",  # valid base64 of ops:pw, then a stray byte
]


@pytest.mark.parametrize("header", BAD_BYTES)
def test_bytes_in_the_authorization_header_are_a_failed_login(header: bytes) -> None:
    assert request(authorization=header) is False


@pytest.mark.parametrize("cookie", [b"\xff\xfe", TOKEN.encode() + b"\xff", b"\xed\xa0\x80"])
def test_bytes_in_the_cookie_are_a_failed_login(cookie: bytes) -> None:
    assert request(cookie=cookie) is False


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_the_bearer_scheme_in_any_case(scheme: str) -> None:
    assert request(authorization=f"{scheme} {TOKEN}".encode()) is True
    assert request(authorization=f"{scheme}  {TOKEN}".encode()) is True  # more than one space
    assert request(authorization=f"{scheme} {TOKEN[:-1]}".encode()) is False


@pytest.mark.parametrize("scheme", ["Basic", "basic", "BASIC"])
def test_the_basic_scheme_in_any_case(scheme: str) -> None:
    assert request(authorization=f"{scheme} ".encode() + base64.b64encode(b"ops:pw")) is True
    assert request(authorization=f"{scheme} ".encode() + base64.b64encode(b"ops:pw2")) is False


def test_a_scheme_is_a_whole_word() -> None:
    assert request(authorization=f"Bearer{TOKEN}".encode()) is False
    assert request(authorization=f"Bearerx {TOKEN}".encode()) is False
    assert request(authorization=f"Basic {TOKEN}".encode()) is False  # a token is no basic credential
    assert request(cookie=TOKEN.encode()) is True


@pytest.mark.parametrize(
    "kwargs",
    [
        {"token": SecretStr("t")},
        {"token": SecretStr("x" * (DASHBOARD_TOKEN_MIN_CHARS - 1))},
        {"token": SecretStr("")},
        {"token": SecretStr(" " * 40)},
        {"token": SecretStr("\t\n" * 20)},
        {"username": " ", "password": SecretStr("pw")},
        {"username": "ops", "password": SecretStr("   ")},
    ],
)
def test_a_weak_or_blank_credential_is_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match=r"dashboard (token|username|password)"):
        DashboardSettings.model_validate(kwargs)


def test_the_shortest_token_accepted() -> None:
    settings = DashboardSettings(token=SecretStr("x" * DASHBOARD_TOKEN_MIN_CHARS))
    assert settings.has_credentials


@pytest.fixture()
async def server() -> AsyncIterator[TestServer]:
    # no ClickHouse: a request that gets past the credentials is answered 503
    srv = TestServer(root_app(lambda: None, SETTINGS), host="127.0.0.1")
    await srv.start_server()
    yield srv
    await srv.close()


async def status_of(port: int, request_line: bytes, *headers: bytes) -> int:
    """The status a raw HTTP/1.1 request gets: bytes sent as they are, no client encodes them."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"\r\n".join([request_line, b"Host: dashboard", b"Connection: close", *headers]))
        writer.write(b"\r\n\r\n")
        await writer.drain()
        status_line = await reader.readline()
        return int(status_line.split()[1])
    finally:
        writer.close()


async def test_bytes_through_the_real_server_are_401_without_a_traceback(
    server: TestServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    get = b"GET /dashboard/api/options HTTP/1.1"
    for header in BAD_BYTES:
        assert await status_of(server.port, get, b"Authorization: " + header) == 401, header
    assert await status_of(server.port, get, f"Cookie: {COOKIE}=".encode() + b"\xff\xfe") == 401
    # percent-encoded bytes that are not UTF-8 in ?token=
    assert await status_of(server.port, b"GET /dashboard/?token=%FF%FE HTTP/1.1") == 401
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    # the same server lets the right credential through, whatever the scheme's case
    assert await status_of(server.port, get, f"Authorization: bearer {TOKEN}".encode()) == 503
    basic = b"Authorization: BASIC " + base64.b64encode(b"ops:pw")
    assert await status_of(server.port, get, basic) == 503


HOSTILE_PATHS = [
    b"//example.org/x",
    b"///example.org",
    b"/\\example.org/x",
    b"/\\/example.org",
    b"//\\example.org",
    b"/%2F%2Fexample.org",
    b"/dashboard/",
]


@pytest.mark.parametrize("path", HOSTILE_PATHS)
async def test_the_token_login_redirects_only_to_a_path_on_the_same_server(path: bytes) -> None:
    """The worker's web server checks every path (the middleware on its root application): whatever the
    path, the ``?token=`` login sends the browser to a path here, never to another host."""
    from aiohttp import web
    from yarl import URL

    from streams.dashboard.auth import auth_middleware

    srv = TestServer(web.Application(middlewares=[auth_middleware(SETTINGS)]), host="127.0.0.1")
    await srv.start_server()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(b"GET " + path + b"?token=" + TOKEN.encode() + b"&a=1&a=2 HTTP/1.1\r\n")
        writer.write(b"Host: dashboard\r\nConnection: close\r\n\r\n")
        await writer.drain()
        head = (await reader.read()).split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
        writer.close()
    finally:
        await srv.close()
    assert head[0].split()[1] == "302"
    location = next(line.split(":", 1)[1].strip() for line in head if line.lower().startswith("location:"))
    assert location.startswith("/") and location[1:2] not in ("/", "\\"), location
    target = URL(location)
    assert target.host is None and not target.is_absolute()
    assert target.query.getall("a") == ["1", "2"] and "token" not in target.query
