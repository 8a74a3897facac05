"""A clickhouse-connect client from ONE URL: ``chdb:///abs/path`` (embedded) or ``http(s)://u:p@h:port/db``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import clickhouse_connect

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


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


def parse_url(url: str, default_database: str = "groundwatch") -> Target:
    parsed = urlparse(url)
    query = parse_qs(parsed.query)
    if parsed.scheme == "chdb":
        if parsed.netloc:
            raise ValueError(f"chdb URL needs an absolute path: chdb:///abs/path (got {url!r})")
        path = unquote(parsed.path)
        if not path.startswith("/"):
            raise ValueError(f"chdb URL needs an absolute path: chdb:///abs/path (got {url!r})")
        database = query.get("database", [default_database])[0]
        return Target(kind="chdb", database=check_identifier(database), path=path)
    if parsed.scheme in ("http", "https"):
        if not parsed.hostname:
            raise ValueError("ClickHouse URL has no host (http(s)://user:password@host:port/database)")
        database = unquote(parsed.path.strip("/")) or query.get("database", [default_database])[0]
        return Target(
            kind=parsed.scheme,
            database=check_identifier(database),
            host=parsed.hostname,
            port=parsed.port or (8443 if parsed.scheme == "https" else 8123),
            username=unquote(parsed.username) if parsed.username else None,
            password=unquote(parsed.password) if parsed.password else None,
        )
    raise ValueError(f"unsupported ClickHouse URL scheme {parsed.scheme!r}: use chdb:///path or http(s)://")


def connect(target: Target) -> Any:
    """A synchronous clickhouse-connect client on the server's default database (ours may not exist yet)."""
    if target.kind == "chdb":
        assert target.path is not None
        return clickhouse_connect.get_client(dsn=f"chdb://{target.path}")
    return clickhouse_connect.get_client(
        host=target.host,
        port=target.port,
        username=target.username or "default",
        password=target.password or "",
        secure=target.kind == "https",
    )
