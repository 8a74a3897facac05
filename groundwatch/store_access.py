"""Opening ClickHouse from a command (`report`, `labels`, `agreement`, `calibrate`, `export`):
``--clickhouse`` or GROUNDWATCH_CLICKHOUSE__URL, and every failure as one ``ClickHouseUnavailable`` line
naming where (without the password)."""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from pydantic import SecretStr

from schemas.errors import ClickHouseUnavailable
from schemas.safe_text import safe_text
from schemas.settings import Settings

if TYPE_CHECKING:  # the ClickHouse client is imported when a command opens it, not to build the CLI
    from streams.clickhouse.store import ClickHouseStore


def add_clickhouse_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--clickhouse",
        help="override GROUNDWATCH_CLICKHOUSE__URL (chdb:///path); pass a URL with a password through the "
        "environment, not the command line (other users can read a process's arguments)",
    )


def settings_with_clickhouse(url: str | None) -> Settings:
    """The settings with ``--clickhouse`` applied; the evaluators file's custom.<name> metrics (when
    ``evaluators.file`` is set) installed in the catalogue the command reads."""
    from pipeline.custom_evaluators import install_from_settings

    settings = Settings()
    if url:
        settings = settings.with_changes(clickhouse={"url": SecretStr(url)})
    install_from_settings(settings.evaluators)
    return settings


def _where(settings: Settings) -> str:
    from streams.clickhouse.client import parse_url

    ch = settings.clickhouse
    return parse_url(ch.url.get_secret_value(), ch.database).describe()  # no password (ConfigError)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return safe_text(text.splitlines()[0][:300]) if text else type(exc).__name__


def open_store(settings: Settings, *, migrate: bool) -> ClickHouseStore:
    """The store of ``settings.clickhouse``; ``migrate`` applies the DDL (a writer), else read-only."""
    from streams.clickhouse.store import ClickHouseStore

    logging.getLogger("clickhouse_connect").setLevel(logging.CRITICAL)  # its errors: one line, below
    where = _where(settings)
    try:
        return ClickHouseStore.open_sync(settings.clickhouse, migrate=migrate)
    except Exception as exc:  # a chDB path another process holds, a server that does not answer
        raise ClickHouseUnavailable(f"cannot open ClickHouse at {where}: {_first_line(exc)}") from None


def read_failed(settings: Settings, exc: Exception) -> ClickHouseUnavailable:
    """A read of a database no worker has set up (no tables) as one line."""
    return ClickHouseUnavailable(
        f"cannot read the groundwatch tables at {_where(settings)} (has a worker run on it?): "
        f"{_first_line(exc)}"
    )
