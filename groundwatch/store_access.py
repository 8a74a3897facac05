"""Opening ClickHouse from a command (`labels`, `agreement`): ``--clickhouse`` or
GROUNDWATCH_CLICKHOUSE__URL, and every failure as one ``ConfigError`` line naming where (no password)."""

from __future__ import annotations

import logging

from pydantic import SecretStr

from schemas.errors import ConfigError, GroundwatchError
from schemas.safe_text import safe_text
from schemas.settings import Settings
from streams.clickhouse.client import parse_url
from streams.clickhouse.store import ClickHouseStore


def settings_with_clickhouse(url: str | None) -> Settings:
    settings = Settings()
    if url:
        settings = settings.with_changes(clickhouse={"url": SecretStr(url)})
    return settings


def open_store(settings: Settings, *, migrate: bool) -> ClickHouseStore:
    """The store of ``settings.clickhouse``; ``migrate`` applies the DDL (a writer), else read-only."""
    logging.getLogger("clickhouse_connect").setLevel(logging.CRITICAL)  # its errors: one line, below
    ch = settings.clickhouse
    where = parse_url(ch.url.get_secret_value(), ch.database).describe()
    try:
        return ClickHouseStore.open_sync(ch, migrate=migrate)
    except GroundwatchError as exc:  # a chDB path another process holds, a server that does not answer
        raise ConfigError(f"cannot open ClickHouse at {where}: {safe_text(exc)}") from None
    except Exception as exc:
        why = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"cannot open ClickHouse at {where}: {safe_text(why)}") from None


def read_failed(settings: Settings, exc: Exception) -> ConfigError:
    """A read of a database no worker has set up (no tables) as one line."""
    ch = settings.clickhouse
    where = parse_url(ch.url.get_secret_value(), ch.database).describe()
    why = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return ConfigError(
        f"cannot read the groundwatch tables at {where} (has a worker run on it?): {safe_text(why)}"
    )
