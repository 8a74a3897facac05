"""ClickHouse's HTTP interface served from one embedded chDB engine, so that several processes (two
workers, a test) share one ClickHouse the way they share a ClickHouse server in production.

No ClickHouse server can be installed on the machines the tests run on, and an embedded chDB path can
be opened by one process only. This process opens the path and answers what clickhouse-connect's HTTP
client sends (the subset of https://clickhouse.com/docs/interfaces/http it uses): the query in the
``query`` URL parameter or the body, ``param_*`` bind parameters, ``database``, settings as URL
parameters (or a multipart form holding the query and binds), an ``INSERT ... FORMAT X`` whose rows are
the body or follow it in the body (lz4, zstd or gzip compressed or not), errors as HTTP 500 with
``X-ClickHouse-Exception-Code``. The SQL itself runs on the real engine (ClickHouse 26.9 in chDB), one
statement at a time. Not covered: sessions' temporary tables, external data, progress headers, users
and passwords (any are accepted), TLS.

Run: ``python -m tests.chdb_http_server --path DIR --port-file FILE`` (binds 127.0.0.1, writes the port
it got to FILE once it answers), or ``ChdbHttpServer(path)`` as a context manager that does that in a
child process and gives its URL.
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

#: URL parameters that belong to the HTTP transport, not to the query's settings
TRANSPORT = frozenset({
    "query", "database", "default_format", "session_id", "session_timeout", "session_check", "query_id",
    "quota_key", "compress", "decompress", "wait_end_of_query", "client_protocol_version", "role",
    "send_progress_in_http_headers", "http_headers_progress_interval_ms", "enable_http_compression",
    "buffer_size", "user", "password",
})  # fmt: skip
_SETTING = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TRAILING_FORMAT = re.compile(r"\s+FORMAT\s+(\w+)\s*;?\s*$", re.IGNORECASE)
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s", re.IGNORECASE)
_INSERT_TAIL = re.compile(r"(\s+SETTINGS\s+.*?)?\s+FORMAT\s+(\w+)\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_BODY_INSERT = re.compile(rb"^\s*INSERT\s+INTO\s.*?\sFORMAT\s+\w+[^\S\n]*\n", re.IGNORECASE | re.DOTALL)
_CODE = re.compile(r"Code:\s*(\d+)")


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _decompress(body: bytes, encoding: str | None) -> bytes:
    """The body, decompressed: clickhouse-connect compresses each insert block as a frame of its own,
    so a body may hold several frames back to back; all of them are read."""
    if not encoding or encoding == "identity":
        return body
    if encoding == "gzip":
        return gzip.decompress(body)  # reads every member
    if encoding == "lz4":
        import lz4.frame

        out, rest = [], body
        while rest:
            lz4_frames = lz4.frame.LZ4FrameDecompressor()
            out.append(lz4_frames.decompress(rest))
            rest = lz4_frames.unused_data
        return b"".join(out)
    if encoding == "zstd":
        from clickhouse_connect.driver.compression import _require_zstd

        return bytes(_require_zstd().decompress(body))  # PEP 784's zstd reads every frame
    raise ValueError(f"unsupported Content-Encoding {encoding!r}")


def _split_insert(body: bytes) -> tuple[str, bytes | None]:
    """A body that is ``INSERT ... FORMAT X`` then a newline and the rows: the statement and the rows;
    any other body is all statement."""
    match = _BODY_INSERT.match(body)
    if match is None:
        return body.decode("utf-8"), None
    return match.group(0).decode("utf-8").strip(), body[match.end() :]


def _form_fields(content_type: str, body: bytes) -> dict[str, str]:
    """The fields of a multipart/form-data body (clickhouse-connect sends long binds this way)."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
    )
    fields: dict[str, str] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = payload.decode("utf-8")
    return fields


class QueryFailed(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Engine:
    """One chDB connection; every request runs under one lock (the engine runs one statement at a time
    for us, as a small server would under load)."""

    def __init__(self, path: str) -> None:
        import chdb

        self._conn = chdb.connect(path)
        self._lock = threading.Lock()
        self._database = "default"

    def _run(self, sql: str, fmt: str, params: Mapping[str, str] | None = None) -> Any:
        try:
            return self._conn.query(sql, fmt, params=dict(params or {}))
        except Exception as exc:  # chDB raises RuntimeError carrying ClickHouse's own message
            text = str(exc)
            at = text.find("Code: ")
            message = text[at:] if at >= 0 else text
            match = _CODE.search(message)
            raise QueryFailed(int(match.group(1)) if match else 1002, message.strip()) from None

    def execute(
        self, sql: str, *, database: str | None, settings: Mapping[str, str], binds: Mapping[str, str],
        data: bytes | None, default_format: str,
    ) -> tuple[bytes, str, dict[str, str]]:  # fmt: skip
        """Run one statement; its result bytes, their format and the summary header's fields."""
        for name in settings:
            if not _SETTING.match(name):
                raise QueryFailed(115, f"Code: 115. DB::Exception: Unknown setting {name!r}")
        with self._lock:
            database = database or "default"  # as a server does: no database parameter, its default
            if database != self._database:
                if not _IDENT.match(database):
                    raise QueryFailed(81, f"Code: 81. DB::Exception: Database {database!r} does not exist")
                self._run(f"USE {database}", "TabSeparated")
                self._database = database
            applied: list[str] = []
            try:
                for name, value in settings.items():
                    self._run(f"SET {name} = {_quote(value)}", "TabSeparated")
                    applied.append(name)
                return self._statement(sql, binds, data, default_format)
            finally:
                for name in applied:  # no setting outlives its request
                    self._run(f"SET {name} = DEFAULT", "TabSeparated")

    def _statement(
        self, sql: str, binds: Mapping[str, str], data: bytes | None, default_format: str
    ) -> tuple[bytes, str, dict[str, str]]:
        if data is not None and _INSERT.match(sql):
            tail = _INSERT_TAIL.search(sql)
            if tail is None:
                raise QueryFailed(62, "Code: 62. DB::Exception: an INSERT with a body needs a FORMAT clause")
            with tempfile.NamedTemporaryFile(suffix=".data", delete=False) as tmp:
                tmp.write(data)
            try:
                head = sql[: tail.start()]
                settings_clause = tail.group(1) or ""
                rewritten = f"{head} FROM INFILE {_quote(tmp.name)}{settings_clause} FORMAT {tail.group(2)}"
                result = self._run(rewritten, "TabSeparated", binds)
            finally:
                os.unlink(tmp.name)
            return b"", "TabSeparated", {"written_rows": str(result.rows_read()), "read_rows": "0"}
        if data:
            sql = sql + "\n" + data.decode("utf-8")
        fmt = default_format
        match = _TRAILING_FORMAT.search(sql)
        if match:
            fmt = match.group(1)
            sql = sql[: match.start()]
        result = self._run(sql, fmt, binds)
        read_rows = str(result.rows_read()) if hasattr(result, "rows_read") else "0"
        return result.bytes(), fmt, {"read_rows": read_rows, "written_rows": "0"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    engine: Engine  # set on the subclass the server uses

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _reply(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        """The request body, sent with a length or in chunks (clickhouse-connect streams inserts)."""
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""
        parts: list[bytes] = []
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()  # the CRLF after each chunk

    def _handle(self) -> None:
        url = urlsplit(self.path)
        if url.path in ("/ping", "/ping/"):
            self._reply(200, b"Ok.\n", {"Content-Type": "text/plain"})
            return
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        body = self._body()
        query_id = params.get("query_id") or str(uuid.uuid4())
        base = {"X-ClickHouse-Query-Id": query_id, "X-ClickHouse-Timezone": "UTC"}
        try:
            body = _decompress(body, self.headers.get("Content-Encoding"))
            content_type = self.headers.get("Content-Type", "")
            if content_type.startswith("multipart/form-data"):
                params |= _form_fields(content_type, body)  # the query and binds too long for a URL
                body = b""
            sql = params.get("query", "")
            data: bytes | None = body if sql else None
            if not sql:
                sql, data = _split_insert(body)
            if not sql.strip():
                raise QueryFailed(62, "Code: 62. DB::Exception: Empty query")
            binds = {k[len("param_") :]: v for k, v in params.items() if k.startswith("param_")}
            settings = {k: v for k, v in params.items() if k not in TRANSPORT and not k.startswith("param_")}
            out, fmt, summary = self.engine.execute(
                sql, database=params.get("database"), settings=settings, binds=binds, data=data,
                default_format=params.get("default_format", "TabSeparated"),
            )  # fmt: skip
        except QueryFailed as exc:
            message = (str(exc) + "\n").encode("utf-8")
            self._reply(500, message, base | {"X-ClickHouse-Exception-Code": str(exc.code)})
            return
        except (ValueError, UnicodeDecodeError) as exc:
            self._reply(400, f"Code: 27. DB::Exception: {exc}\n".encode(), base)
            return
        except Exception as exc:  # answer every request: a dropped connection reads as an outage
            message = f"Code: 1001. DB::Exception: {type(exc).__name__}: {exc}\n".encode()
            self._reply(500, message, base | {"X-ClickHouse-Exception-Code": "1001"})
            return
        headers = base | {
            "X-ClickHouse-Format": fmt,
            "X-ClickHouse-Summary": json.dumps(summary),
            "Content-Type": "application/octet-stream",
        }
        self._reply(200, out, headers)


def serve(path: str, port: int, port_file: Path | None) -> None:
    engine = Engine(path)
    handler = type("BoundHandler", (Handler,), {"engine": engine})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    if port_file is not None:
        tmp = port_file.with_suffix(".tmp")
        tmp.write_text(str(server.server_address[1]), encoding="utf-8")
        tmp.replace(port_file)
    server.serve_forever()


class ChdbHttpServer:
    """``with ChdbHttpServer(path) as url:`` a child process serving chDB at ``path`` on 127.0.0.1;
    ``url`` is ``http://127.0.0.1:PORT`` (``port``: 0 takes a free one; a given one lets a test stop
    the server and start it again where its clients expect it)."""

    def __init__(self, path: Path, log: Path | None = None, timeout_s: float = 60.0, port: int = 0) -> None:
        self.path = path
        self.port = port
        self.log = log or path.with_name(path.name + ".http.log")
        self.timeout_s = timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> str:
        """Start the child process; its URL once it listens."""
        port_file = self.path.with_name(self.path.name + ".port")
        port_file.unlink(missing_ok=True)
        root = Path(__file__).resolve().parent.parent
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.chdb_http_server", "--path", str(self.path),
                 "--port", str(self.port), "--port-file", str(port_file)],
                cwd=root, stdout=out, stderr=subprocess.STDOUT,
                env=dict(os.environ) | {"PYTHONPATH": str(root)},
            )  # fmt: skip
        deadline = time.monotonic() + self.timeout_s
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the chDB HTTP server did not start:\n" + self.log.read_text()[-4000:])
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{port_file.read_text(encoding='utf-8')}"
        return self.url

    def stop(self) -> None:
        """Stop the child process (SIGTERM, then SIGKILL after 10 s); a no-op when it is not running."""
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--path", required=True, help="the chDB directory to open")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--port-file", type=Path, help="write the port here once listening")
    args = parser.parse_args(argv)
    serve(args.path, args.port, args.port_file)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
