"""A clickhouse-connect client from ONE URL: ``chdb:///abs/path`` (embedded) or ``http(s)://u:p@h:port/db``.

No error raised here shows a password: URLs in messages are redacted (``redact_url``) and a password
that a driver echoes is replaced. An embedded chDB directory this creates is private (0700). A chDB
path another process holds (one process per path) is a ConfigError naming the path and the cause.
``is_unavailable`` tells a ClickHouse (or Kafka broker) that cannot write now (an outage) from rows it
refuses.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse, urlsplit, urlunsplit

import clickhouse_connect
from aiokafka.errors import KafkaError, KafkaTimeoutError, KafkaUnavailableError
from clickhouse_connect.driver.exceptions import OperationalError

from schemas.errors import ClickHouseUnavailable, ConfigError

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_CODE = re.compile(r"\bCode:\s*(\d+)")

#: ClickHouse error codes that say the server cannot take this write now, whatever the rows hold: files
#: and disks (74-77, 243 NOT_ENOUGH_SPACE, 425 SYSTEM_ERROR, 1001 STD_EXCEPTION: a filesystem error such
#: as a read-only or immutable directory), read-only server or table (164, 242), Keeper (999), too many
#: parts or queries (252, 202), memory (241), timeouts and the network (159, 209, 210), cancellation (236,
#: 394), a missing database or table or no rights (60, 81, 497, 516: every row would fail alike)
UNAVAILABLE_CODES = frozenset({
    60, 74, 75, 76, 77, 81, 159, 164, 202, 209, 210, 236, 241, 242, 243, 252, 319, 394, 425, 497, 516,
    999, 1000, 1001,
})  # fmt: skip


def check_identifier(name: str) -> str:
    """Database/table names go into SQL text (they cannot be parameters): allow plain identifiers only."""
    if not _IDENT.match(name):
        raise ValueError(f"invalid ClickHouse identifier {name!r}: letters, digits and _ only")
    return name


@dataclass(frozen=True)
class Target:
    kind: str  # "chdb" | "http" | "https"
    database: str
    path: str | None = None  # chdb
    host: str | None = None
    port: int | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # never in repr() or logs

    def __str__(self) -> str:
        return self.describe()

    def describe(self) -> str:
        """The target without its password, for logs."""
        if self.kind == "chdb":
            return f"chdb://{self.path} (database {self.database})"
        user = f"{self.username}@" if self.username else ""
        return f"{self.kind}://{user}{self.host}:{self.port}/{self.database}"


def redact_url(url: str) -> str:
    """The URL with any password (user:password@) and secret-looking query values replaced by ***."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:***@{hostport}" if ":" in userinfo else f"{user}@{hostport}"
        query = re.sub(r"(?i)((?:password|passwd|pwd|secret|token|key)=)[^&]*", r"\1***", parts.query)
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "(an unparseable URL)"


def parse_url(url: str, default_database: str = "groundwatch") -> Target:
    """Errors are ValueError (a ConfigError) naming the URL without its password."""
    try:
        parsed = urlparse(url)
        parsed.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise ConfigError(f"invalid ClickHouse URL {redact_url(url)!r}: {exc}") from None
    query = parse_qs(parsed.query)
    if parsed.scheme == "chdb":
        if parsed.netloc:
            raise ConfigError(f"chdb URL needs an absolute path: chdb:///abs/path (got {redact_url(url)!r})")
        path = unquote(parsed.path)
        if not path.startswith("/"):
            raise ConfigError(f"chdb URL needs an absolute path: chdb:///abs/path (got {redact_url(url)!r})")
        database = query.get("database", [default_database])[0]
        return Target(kind="chdb", database=check_identifier(database), path=path)
    if parsed.scheme in ("http", "https"):
        if not parsed.hostname:
            raise ConfigError("ClickHouse URL has no host (http(s)://user:password@host:port/database)")
        database = unquote(parsed.path.strip("/")) or query.get("database", [default_database])[0]
        return Target(
            kind=parsed.scheme,
            database=check_identifier(database),
            host=parsed.hostname,
            port=parsed.port or (8443 if parsed.scheme == "https" else 8123),
            username=unquote(parsed.username) if parsed.username else None,
            password=unquote(parsed.password) if parsed.password else None,
        )
    raise ConfigError(f"unsupported ClickHouse URL scheme {parsed.scheme!r}: use chdb:///path or http(s)://")


def _without_password(text: str, target: Target) -> str:
    if target.password:
        text = text.replace(target.password, "***")
    return re.sub(r"(?i)(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)


def lock_holder(path: str) -> bool:
    """True when another process holds the chDB directory's lock (its ``status`` file, flock'ed by the
    engine). Only asked after opening failed: this process's own engine holds it too."""
    status = Path(path) / "status"
    if not status.exists():
        return False
    try:
        import fcntl

        with status.open("rb") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
    except (OSError, ImportError):
        return False
    return False


def _private_dir(path: str) -> None:
    """Create the chDB directory readable by its owner only (0700); an existing one is left alone."""
    directory = Path(path)
    if directory.exists():
        return
    directory.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    os.chmod(directory, 0o700)  # the umask may have narrowed it further, never widened: make it exact


def error_code(exc: BaseException) -> int | None:
    """The ClickHouse error code of a failed query (clickhouse-connect's ``code``, or ``Code: N`` in
    the message, which is how embedded chDB reports it), None when there is none."""
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        return code
    match = _CODE.search(str(exc))
    return int(match.group(1)) if match else None


def is_unavailable(exc: BaseException) -> bool:
    """True when a failed write says ClickHouse cannot take writes now (down, unreachable, read-only,
    out of disk or memory, a filesystem error, too many parts), or the Kafka broker an alert is
    published to cannot be reached now (aiokafka's retriable errors, its timeout and no broker
    available), so the same rows may succeed later; False when the rows themselves may be what it
    refuses (a type or parse error, a value out of range). The sink keeps an outage's rows unacked and
    retries; only a refused row is dead-lettered."""
    if isinstance(exc, OperationalError | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, KafkaError):
        return bool(exc.retriable) or isinstance(exc, KafkaTimeoutError | KafkaUnavailableError)
    code = error_code(exc)
    return code in UNAVAILABLE_CODES if code is not None else isinstance(exc, OSError)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:500]


def connect(target: Target) -> Any:
    """A synchronous clickhouse-connect client on the server's default database (ours may not exist yet).

    Raises ConfigError when an embedded chDB path cannot be opened (another process holding it is
    named as the cause) and ClickHouseUnavailable when a server does not answer; neither message shows
    the password."""
    if target.kind == "chdb":
        assert target.path is not None
        try:
            _private_dir(target.path)
            return clickhouse_connect.get_client(dsn=f"chdb://{target.path}")
        except Exception as exc:
            if lock_holder(target.path):
                why = (
                    "another process holds it (an embedded chDB path can be opened by one process at a "
                    "time: stop the other worker, or give this one its own GROUNDWATCH_CLICKHOUSE__URL)"
                )
            else:
                why = _first_line(exc)
            raise ConfigError(f"cannot open the embedded chDB at {target.path}: {why}") from None
    try:
        return clickhouse_connect.get_client(
            host=target.host,
            port=target.port,
            username=target.username or "default",
            password=target.password or "",
            secure=target.kind == "https",
        )
    except Exception as exc:
        why = _without_password(f"{type(exc).__name__}: {_first_line(exc)}", target)
        raise ClickHouseUnavailable(f"cannot connect to ClickHouse at {target.describe()}: {why}") from None
