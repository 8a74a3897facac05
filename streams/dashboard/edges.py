"""The web server's answer to requests it cannot parse: a status and at most one WARNING line a while.

aiohttp answers a request line or header over its limit (``LineTooLong``) with 400 and logs it at ERROR
with a full traceback, one per request: any client could fill the log. Served through ``EdgeRunner``
(the worker's web server and ``groundwatch dashboard``), such a request gets 414 (the request line) or 431
(a header, or more header lines than the parser takes), any other request that does not parse gets 400,
and the log gets one WARNING line at once, then at most one every ``LOG_EVERY_S`` of the runner's clock
saying how many were refused meanwhile; never a traceback.

Which line was too long is read from the parser's state where aiohttp's pure-Python parser exposes it
(no line of the head taken yet: the request line); its compiled parser exposes none, so there the limit
the error carries tells them apart (the request line's limit is one more than a header's).
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, ContentEncodingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

from pipeline.clock import Clock, SystemClock
from pipeline.paced_log import PacedLog
from schemas.safe_text import safe_text

log = logging.getLogger(__name__)

#: longest request line (method, target, version) taken; longer: 414
MAX_REQUEST_LINE = 8192
#: longest header line taken; longer: 431. One less than the request line's limit: with the compiled
#: parser, the limit a ``LineTooLong`` carries is how the answer tells the two apart
MAX_FIELD = 8191
#: seconds between two WARNING lines about refused requests
LOG_EVERY_S = 60.0


class RefusalLog:
    """One WARNING line for the first refused request, then at most one every ``every_s`` with the count
    refused since the last line (measured on ``clock``: ``pipeline.paced_log``)."""

    def __init__(self, every_s: float = LOG_EVERY_S, clock: Clock | None = None) -> None:
        self.every_s = every_s
        self.clock: Clock = clock or SystemClock()
        self._paced = PacedLog(every_s, self.clock)
        self.refused = 0  # refused in all

    @property
    def unlogged(self) -> int:
        """Refused since the last line."""
        return self._paced.held()

    def refused_request(self, status: int, remote: str | None, why: str) -> None:
        self.refused += 1
        held = self._paced.due()
        if held is None:
            return
        log.warning(
            "web: refused %d request(s) that do not parse since the last line (last: %d from %s: %s); "
            "at most one line every %g s",
            held + 1, status, remote or "?", safe_text(why, 200), self.every_s,
        )  # fmt: skip


#: set on a ``LineTooLong`` when the parser said which line it was reading: True for the request line
IN_REQUEST_LINE = "groundwatch_in_request_line"


#: what both of aiohttp's parsers say of a request with more header lines than they take
TOO_MANY_HEADERS = "Too many headers received"


def refusal_status(exc: BaseException) -> int:
    """414 for a request line over its limit, 431 for a header over its own or more headers than the
    parser takes (the header fields too large as a whole, RFC 6585), 415 for a Content-Encoding the
    server cannot unpack, 400 otherwise."""
    if isinstance(exc, BadHttpMessage) and exc.message == TOO_MANY_HEADERS:
        return 431
    if isinstance(exc, ContentEncodingError) and "Can not decode" in str(exc.message):
        return 415
    if isinstance(exc, LineTooLong):
        in_request_line = getattr(exc, IN_REQUEST_LINE, None)
        if in_request_line is None:  # the compiled parser: by the limit it carries
            limit = exc.args[1] if len(exc.args) > 1 else None
            in_request_line = str(limit) == str(MAX_REQUEST_LINE)
        return 414 if in_request_line else 431
    return 400


class EdgeRequestHandler(RequestHandler):
    """aiohttp's request handler, but a request that does not parse is refused with its status and a
    WARNING line (its server's ``refusals``), without a traceback."""

    @property
    def refusals(self) -> RefusalLog:
        return getattr(self._manager, "refusals", None) or _DEFAULT_REFUSALS

    def data_received(self, data: bytes) -> None:
        queued = len(self._messages)
        super().data_received(data)
        lines = getattr(self._parser, "_lines", None)  # the pure-Python parser: the head's lines so far
        if not isinstance(lines, list):
            return
        for message, _ in list(self._messages)[queued:]:
            exc = getattr(message, "exc", None)  # a request that did not parse (aiohttp's _ErrInfo)
            if isinstance(exc, LineTooLong):
                setattr(exc, IN_REQUEST_LINE, not lines)

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if not isinstance(exc, BadHttpMessage):  # a handler's failure: aiohttp's own answer and log
            return super().handle_error(request, status, exc, message)
        status = refusal_status(exc)
        self.refusals.refused_request(status, request.remote, f"{type(exc).__name__}: {exc.message}")
        if request.writer.output_size > 0:  # (as aiohttp: a response already started cannot be replaced)
            raise ConnectionError("response already sent, cannot send the refusal")
        reason = {414: "URI Too Long", 431: "Request Header Fields Too Large"}.get(status, "Bad Request")
        if status == 415:  # say which encodings are taken (the parser's message names the missing package)
            reason = f"Unsupported Media Type: {exc.message.split('.')[0]}; send gzip or none"
        response = web.Response(status=status, text=f"{status} {reason}\n", content_type="text/plain")
        response.force_close()
        return response


class EdgeServer(Server):
    """aiohttp's server, making ``EdgeRequestHandler``s (which log to its ``refusals``)."""

    refusals: RefusalLog

    def __call__(self) -> RequestHandler:
        return EdgeRequestHandler(self, loop=self._loop, **self._kwargs)


class EdgeRunner(web.AppRunner):
    """``web.AppRunner`` whose server refuses unparseable requests as ``EdgeRequestHandler`` does, with
    the request line and header limits above, and closes a connection whose request body its handler
    left unread instead of reading the rest; its WARNING lines are paced on ``clock`` (the worker's)."""

    def __init__(self, app: web.Application, clock: Clock | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("max_line_size", MAX_REQUEST_LINE)
        kwargs.setdefault("max_field_size", MAX_FIELD)
        # a body the handler left unread is never read after its answer (aiohttp reads and unpacks it
        # for up to 10 s by default, a gzip bomb's CPU on the event loop): the connection is closed
        kwargs.setdefault("lingering_time", 0)
        super().__init__(app, **kwargs)
        self.refusals = RefusalLog(clock=clock)

    async def _make_server(self) -> Server:
        server = await super()._make_server()
        # the application builds a plain Server (web.Application._make_handler); the subclass only
        # changes which handler it makes for each connection
        server.__class__ = EdgeServer
        assert isinstance(server, EdgeServer)
        server.refusals = self.refusals
        return server


_DEFAULT_REFUSALS = RefusalLog()  # a handler whose server was not made by an EdgeRunner
