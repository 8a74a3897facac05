"""Versioned DDL from deploy/clickhouse (NNN_name.sql), applied once each, recorded in schema_migrations.

Retention is applied (or altered) at every start from the TTL settings (``clickhouse.ttl_days`` for the
tables with texts or one interaction's rows, ``clickhouse.aggregate_ttl_days`` for the rest, which hold
no text and are kept longer): ``ALTER TABLE ... MODIFY TTL``
takes no query parameters, so the day count (an int from validated settings) and the database name (a
checked identifier) are the only values formatted into SQL text.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.errors import ConfigError
from streams.clickhouse.client import check_identifier
from streams.clickhouse.cluster import distributed_tables, render

log = logging.getLogger(__name__)

_FILE = re.compile(r"^(\d{3})_([A-Za-z0-9_]+)\.sql$")

#: table -> the ingestion-time column its TTL counts from (ingestion time, not event time: a replay of
#: old traffic must not be deleted on arrival)
TTL_COLUMNS: dict[str, str] = {
    "evaluations": "evaluated_at",
    "evaluation_statements": "evaluated_at",
    "window_aggregates": "computed_at",
    "alerts": "fired_at",
    "dead_letters": "inserted_at",
    # claimed_at, not updated_at: a claim row carries a 1970 updated_at until it is delivered
    "alert_deliveries": "claimed_at",
    "labels": "inserted_at",
    "erasures": "erased_at",
    "conversations": "written_at",
}
#: the tables kept for ``aggregate_ttl_days``: no text, no row of one interaction
AGGREGATE_TABLES = frozenset({"window_aggregates", "alerts", "alert_deliveries", "erasures"})


def ddl_dir(configured: Path | None = None) -> Path:
    """The DDL directory: the configured one, else the repository's (a source checkout or an editable
    install), else <prefix>/share/groundwatch/clickhouse (a wheel install), else ./deploy/clickhouse."""
    candidates = [configured] if configured else []
    candidates += [
        Path(__file__).resolve().parents[2] / "deploy" / "clickhouse",
        Path(sys.prefix) / "share" / "groundwatch" / "clickhouse",  # a wheel install (pyproject data-files)
        Path.cwd() / "deploy" / "clickhouse",
    ]
    for path in candidates:
        if path.is_dir():
            return path
    raise FileNotFoundError(
        "no ClickHouse DDL directory (deploy/clickhouse); set GROUNDWATCH_CLICKHOUSE__MIGRATIONS_DIR"
    )


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: list[str]


def _strip_comments(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


def load_migrations(directory: Path, database: str) -> list[Migration]:
    check_identifier(database)
    out = []
    for path in sorted(directory.iterdir()):
        m = _FILE.match(path.name)
        if not m:
            continue
        sql = _strip_comments(path.read_text(encoding="utf-8")).replace("${database}", database)
        statements = [s.strip() for s in sql.split(";") if s.strip()]
        out.append(Migration(version=int(m.group(1)), name=m.group(2), statements=statements))
    versions = [m.version for m in out]
    if len(set(versions)) != len(versions):
        raise ValueError(f"duplicate migration versions in {directory}: {versions}")
    if not out:
        raise FileNotFoundError(f"no NNN_name.sql migrations in {directory}")
    return out


def _refuse_copy_across_shards(client: Any, cluster: str, mig: Migration) -> None:
    """A migration that copies rows (``INSERT ... SELECT``) copies the connected node's shard only, while
    its ``EXCHANGE`` and ``DROP`` run ``ON CLUSTER``: on a cluster of several shards that would lose every
    other shard's rows. Refused, naming what to do, rather than run."""
    rows = client.query(
        "SELECT uniqExact(shard_num) FROM system.clusters WHERE cluster = {c:String}",
        parameters={"c": cluster},
    ).result_rows
    shards = int(rows[0][0]) if rows else 0
    if shards > 1:
        raise ConfigError(
            f"ClickHouse migration {mig.version:03d}_{mig.name} copies rows and cluster {cluster!r} has "
            f"{shards} shards: run its statements on one node of each shard without ON CLUSTER "
            '(docs/capacity.md, "Cluster"), then record it in schema_migrations'
        )


def _pending(client: Any, db: str, migrations: list[Migration]) -> list[Migration]:
    done = {int(r[0]) for r in client.query(f"SELECT version FROM {db}.schema_migrations").result_rows}
    return [m for m in migrations if m.version not in done]


def _apply(
    client: Any, db: str, pending: list[Migration], cluster: str | None, run: Callable[[str], None]
) -> list[int]:
    applied = []
    for mig in pending:
        if cluster is not None and any(st.lstrip().upper().startswith("INSERT") for st in mig.statements):
            _refuse_copy_across_shards(client, cluster, mig)
        for statement in mig.statements:
            run(statement)
        client.insert(f"{db}.schema_migrations", [[mig.version, mig.name]], column_names=["version", "name"])
        applied.append(mig.version)
        log.info("applied ClickHouse migration %03d_%s", mig.version, mig.name)
    return applied


#: held while one worker applies migrations to a shared server (``_acquire_lock``)
LOCK_TABLE = "schema_migrations_lock"
#: how often a waiting worker looks again, and says so in its log
LOCK_POLL_S = 2.0
LOCK_LOG_EVERY_S = 30.0


def _acquire_lock(client: Any, db: str, sleep: Callable[[float], None] = time.sleep) -> None:
    """One worker at a time applies migrations to a shared server: creating the lock table succeeds for
    exactly one (CREATE TABLE is atomic); the others wait until it is dropped, then find the migrations
    applied. A worker killed while migrating leaves the table: the next start waits, saying in its log
    which table to drop once no worker is migrating. (chDB needs no lock: one process per path.)"""
    waited = 0.0
    while True:
        try:
            client.command(f"CREATE TABLE {db}.{LOCK_TABLE} (holder String) ENGINE = Memory")
            return
        except Exception as exc:  # TABLE_ALREADY_EXISTS: another worker is migrating
            if "Code: 57" not in str(exc) and "already exists" not in str(exc).lower():
                raise
        if waited % LOCK_LOG_EVERY_S < LOCK_POLL_S:
            log.warning(
                "waiting for another worker to apply the ClickHouse migrations (%.0f s so far); if none is "
                "running, DROP TABLE %s.%s",
                waited,
                db,
                LOCK_TABLE,
            )
        sleep(LOCK_POLL_S)
        waited += LOCK_POLL_S


def _ttl_statement(client: Any, db: str, table: str, column: str, days: int) -> str | None:
    """The statement that sets a table's retention to ``days`` from ``column``; 0: the one that removes
    its TTL, None when it has none."""
    if days > 0:
        return f"ALTER TABLE {db}.{table} MODIFY TTL toDateTime({column}) + toIntervalDay({days})"
    engine = client.command(
        "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = {table:String}",
        parameters={"db": db, "table": table},
    )
    return f"ALTER TABLE {db}.{table} REMOVE TTL" if " TTL " in str(engine) else None


def apply_migrations(
    client: Any,
    database: str,
    ttl_days: int,
    directory: Path | None = None,
    cluster: str | None = None,
    distributed: bool = False,
    aggregate_ttl_days: int | None = None,
    shared: bool = False,
) -> list[int]:
    """Create the database, apply new migrations in order, set the TTLs (``aggregate_ttl_days`` for
    ``AGGREGATE_TABLES``; None: ``ttl_days`` for every table; 0 days: no TTL, rows are kept until
    erased); return the versions applied.

    With a ``cluster`` every statement is rendered for it (``streams.clickhouse.cluster``), and with
    ``distributed`` the ``<table>_all`` Distributed tables are created again after the migrations. On a
    ``shared`` server (HTTP: several workers may start at once) one worker applies them at a time."""
    db = check_identifier(database)
    days = int(ttl_days)
    aggregate_days = int(aggregate_ttl_days if aggregate_ttl_days is not None else ttl_days)
    if min(days, aggregate_days) < 0:
        raise ValueError("ttl_days and aggregate_ttl_days must be >= 0 (0: no TTL)")

    def run(statement: str) -> None:
        client.command(render(statement, cluster))

    run(f"CREATE DATABASE IF NOT EXISTS {db}")
    run(
        f"CREATE TABLE IF NOT EXISTS {db}.schema_migrations "
        "(version UInt32, name String, applied_at DateTime64(3, 'UTC') DEFAULT now64(3)) "
        "ENGINE = MergeTree ORDER BY version"
    )
    migrations = load_migrations(directory or ddl_dir(), db)
    pending = _pending(client, db, migrations)
    if pending and shared:
        _acquire_lock(client, db)
        try:
            applied = _apply(client, db, _pending(client, db, migrations), cluster, run)
        finally:
            client.command(f"DROP TABLE IF EXISTS {db}.{LOCK_TABLE}")
    else:
        applied = _apply(client, db, pending, cluster, run)
    for table, column in TTL_COLUMNS.items():
        statement = _ttl_statement(
            client, db, table, column, aggregate_days if table in AGGREGATE_TABLES else days
        )
        if statement is not None:
            run(statement)
    if distributed:
        if cluster is None:
            raise ValueError("distributed tables need a cluster")
        for statement in distributed_tables(db, cluster):
            client.command(statement)
    return applied
