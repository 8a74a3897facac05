"""Tables keyed by time (migration 011): the layout, the copy of existing rows, replays, the default time."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from schemas.interaction import Interaction
from streams.clickhouse.client import parse_url
from streams.clickhouse.migrations import apply_migrations, ddl_dir, load_migrations
from streams.clickhouse.store import ClickHouseStore
from streams.codec import decode
from streams.processors.base import record_time
from tests.fixtures.evaluations import NOW, T0, evaluation
from tests.fixtures.store import store_settings
from tests.integration.chdb import fresh_chdb_url

MIGRATION = 11


def insert_as_then(store: ClickHouseStore, evaluations: list[Any]) -> None:
    """Evaluations written into a database at an older schema version, as a worker of that version wrote
    them: only the columns its tables have (later migrations add the rest)."""
    from streams.clickhouse.rows import (
        EVALUATION_COLUMNS,
        STATEMENT_COLUMNS,
        evaluation_row,
        statement_rows,
    )

    for table, columns, rows in (
        ("evaluations", EVALUATION_COLUMNS, [evaluation_row(e) for e in evaluations]),
        ("evaluation_statements", STATEMENT_COLUMNS, [r for e in evaluations for r in statement_rows(e)]),
    ):
        have = {
            r["name"]
            for r in store.query_sync(
                "SELECT name FROM system.columns WHERE database = {db:String} AND table = {t:String}",
                {"db": store.db, "t": table},
            )
        }
        keep = [i for i, c in enumerate(columns) if c in have]
        store.client.insert(
            f"{store.db}.{table}",
            [[row[i] for i in keep] for row in rows],
            column_names=[columns[i] for i in keep],
        )


def migrations_up_to(tmp_path: Path, last: int) -> Path:
    """deploy/clickhouse's migrations up to ``last`` in a directory of their own."""
    out = tmp_path / f"ddl_{last}"
    out.mkdir(parents=True)
    for path in sorted(ddl_dir().glob("*.sql")):
        if int(path.name[:3]) <= last:
            shutil.copy(path, out / path.name)
    return out


def migrations_but(tmp_path: Path, skipped: int) -> Path:
    """Every migration of deploy/clickhouse but ``skipped``: a store this checkout's writers can insert
    into (later migrations add the columns they write), as it stood before ``skipped`` ran."""
    out = tmp_path / f"ddl_but_{skipped}"
    out.mkdir(parents=True)
    for path in sorted(ddl_dir().glob("*.sql")):
        if int(path.name[:3]) != skipped:
            shutil.copy(path, out / path.name)
    return out


def layout(store: ClickHouseStore) -> dict[str, tuple[str, str]]:
    rows = store.query_sync(
        f"SELECT name, partition_key, sorting_key FROM system.tables WHERE database = '{store.db}'"
    )
    return {r["name"]: (r["partition_key"], r["sorting_key"]) for r in rows}


def at(iid: str, seconds: float, *, complete: bool = True, evaluated: datetime = NOW) -> object:
    e = evaluation(iid, complete=complete, at=evaluated)
    return e.model_copy(update={"timestamp": T0 + timedelta(seconds=seconds)})


def test_the_tables_read_by_time_are_partitioned_by_month_and_keyed_by_app_model_time_then_id() -> None:
    store = ClickHouseStore.open_sync(store_settings(ttl_days=90))
    try:
        _partitioned_and_keyed(store)
    finally:
        store.close()


def _partitioned_and_keyed(store: ClickHouseStore) -> None:
    tables = layout(store)
    assert tables["evaluations"] == (
        "toYYYYMM(timestamp)",
        "app, model, toDate(timestamp), interaction_id",
    )
    assert tables["evaluation_statements"] == (
        "toYYYYMM(timestamp)",
        "app, model, toDate(timestamp), interaction_id, pair, hypothesis_index, statement_index",
    )
    assert tables["window_aggregates"] == ("toYYYYMM(window_start)", "app, model, window_start")
    assert tables["dead_letters"] == ("", "dead_letter_id")  # no stable time of its own (see 011)
    assert not any(name.endswith("_v011") for name in tables)
    # the retention set at start is still there, and drops whole parts
    create = store.query_sync(f"SHOW CREATE TABLE {store.db}.evaluations")[0]["statement"]
    assert "TTL toDateTime(evaluated_at) + toIntervalDay(90)" in create
    assert "ttl_only_drop_parts = 1" in create


async def test_a_redelivery_replaces_its_row_and_a_complete_evaluation_wins(store: ClickHouseStore) -> None:
    incomplete = at("x", 5, complete=False, evaluated=NOW + timedelta(seconds=1))
    complete = at("x", 5, complete=True, evaluated=NOW)
    await store.insert_evaluations([incomplete, at("y", 6), complete, at("y", 6)])  # type: ignore[list-item]
    store.client.command(f"OPTIMIZE TABLE {store.db}.evaluations FINAL")
    rows = store.rows_between_sync("a", "m", T0, T0 + timedelta(minutes=1))
    assert sorted((r.interaction_id, r.complete) for r in rows) == [("x", True), ("y", True)]
    physical = store.query_sync(f"SELECT count() AS n FROM {store.db}.evaluations")
    assert physical[0]["n"] == 2  # merged away, not only hidden by FINAL
    assert store.counts_sync()["evaluation_statements"] == 2


async def test_one_id_sent_again_later_that_day_keeps_one_row_and_on_another_day_makes_another(
    store: ClickHouseStore,
) -> None:
    """The key holds the event day: an answer regenerated under the same id an hour later replaces the
    first (the later emitted wins among complete ones); the same id on another day is another event."""
    first = at("r", 0, evaluated=NOW)
    regenerated = at("r", 3600, evaluated=NOW + timedelta(seconds=1))
    next_day = at("r", 86_400 * 2, evaluated=NOW + timedelta(seconds=2))
    await store.insert_evaluations([first, regenerated, next_day])  # type: ignore[list-item]
    day = store.rows_between_sync("a", "m", T0, T0 + timedelta(days=1))
    stamp = (T0 + timedelta(seconds=3600)).replace(tzinfo=None)
    assert [(r.interaction_id, r.timestamp.replace(tzinfo=None)) for r in day] == [("r", stamp)]
    later = store.rows_between_sync("a", "m", T0 + timedelta(days=2), T0 + timedelta(days=3))
    assert [r.interaction_id for r in later] == ["r"]
    assert store.counts_sync()["evaluations"] == 2


async def test_a_time_range_reads_only_its_own_rows(store: ClickHouseStore) -> None:
    months = [T0 - timedelta(days=31), T0, T0 + timedelta(days=40)]
    rows = [
        evaluation(f"{m:%m}-{i}").model_copy(update={"timestamp": m + timedelta(minutes=i)})
        for m in months
        for i in range(3)
    ]
    await store.insert_evaluations(rows)
    got = store.rows_between_sync("a", "m", T0, T0 + timedelta(minutes=2))
    assert sorted(r.interaction_id for r in got) == [f"{T0:%m}-0", f"{T0:%m}-1"]
    assert store.rows_between_sync("other", "m", T0, T0 + timedelta(minutes=2)) == []
    partitions = store.query_sync(
        f"SELECT DISTINCT partition FROM system.parts WHERE database = '{store.db}' "
        "AND table = 'evaluations' AND active ORDER BY partition"
    )
    assert [p["partition"] for p in partitions] == sorted(f"{m:%Y%m}" for m in months)


async def test_migration_011_copies_every_row_and_every_column_earlier_migrations_added(
    tmp_path: Path,
) -> None:
    """Rows written before 011, in tables with a column another migration added, keep all their values."""
    url = fresh_chdb_url()
    before = ClickHouseStore.open_sync(
        store_settings(url, migrations_dir=migrations_but(tmp_path, MIGRATION))
    )
    assert layout(before)["evaluations"] == ("", "interaction_id")
    # a column no migration of this checkout knows (a later one, or a user's own), added before 011 runs
    before.client.command(
        f"ALTER TABLE {before.db}.evaluations ADD COLUMN IF NOT EXISTS region LowCardinality(String) "
        "DEFAULT ''"
    )
    insert_as_then(before, [at(f"i{i}", i) for i in range(50)])
    insert_as_then(before, [at("i0", 0, evaluated=NOW + timedelta(seconds=5))])
    before.client.command(
        f"ALTER TABLE {before.db}.evaluations UPDATE region = 'eu' WHERE 1 SETTINGS mutations_sync = 1"
    )
    old = before.query_sync(f"SELECT * FROM {before.db}.evaluations FINAL ORDER BY interaction_id")
    old_statements = before.counts_sync()["evaluation_statements"]
    windows_before = before.query_sync(f"SELECT count() AS n FROM {before.db}.window_aggregates")

    target = parse_url(url, "groundwatch")
    applied = apply_migrations(before.client, target.database, 90, migrations_up_to(tmp_path, MIGRATION))
    assert applied == [MIGRATION]
    after = before
    assert layout(after)["evaluations"] == (
        "toYYYYMM(timestamp)",
        "app, model, toDate(timestamp), interaction_id",
    )
    new = after.query_sync(f"SELECT * FROM {after.db}.evaluations FINAL ORDER BY interaction_id")
    assert len(new) == len(old) == 50
    assert new == old  # every column, inserted_at too; i0's later version
    assert {r["region"] for r in new} == {"eu"}
    assert [r["evaluated_at"] for r in new if r["interaction_id"] == "i0"] == [
        (NOW + timedelta(seconds=5)).replace(tzinfo=None, microsecond=(NOW.microsecond // 1000) * 1000)
    ]
    assert after.counts_sync()["evaluations"] == 50
    assert after.counts_sync()["evaluation_statements"] == old_statements == 50
    assert after.query_sync(f"SELECT count() AS n FROM {after.db}.window_aggregates") == windows_before


async def test_migration_011_run_again_after_a_stop_midway_loses_nothing(tmp_path: Path) -> None:
    """A worker stopped after the swap and before the drop: the rerun starts the copy again from the new
    table (the statements are in the order that allows it)."""
    url = fresh_chdb_url()
    store = ClickHouseStore.open_sync(store_settings(url, migrations_dir=migrations_but(tmp_path, MIGRATION)))
    insert_as_then(store, [at(f"i{i}", i) for i in range(20)])
    migrations = load_migrations(migrations_up_to(tmp_path, MIGRATION), store.db)
    (mig,) = [m for m in migrations if m.version == MIGRATION]
    swap = next(i for i, s in enumerate(mig.statements) if s.startswith("EXCHANGE TABLES"))
    for statement in mig.statements[: swap + 1]:  # stopped after the evaluations' swap
        store.client.command(statement)
    apply_migrations(store.client, store.db, 90, migrations_up_to(tmp_path / "again", MIGRATION))
    assert store.counts_sync()["evaluations"] == 20
    assert layout(store)["evaluations"][1] == "app, model, toDate(timestamp), interaction_id"
    assert not any(name.endswith("_v011") for name in layout(store))


# -- the time of a message that carries none -------------------------------------------------------------


def record(value: bytes, seconds: float | None) -> SimpleNamespace:
    return SimpleNamespace(value=value, key=b"k", message=SimpleNamespace(timestamp=seconds))


def test_a_message_without_a_timestamp_gets_its_records_time_at_every_redelivery() -> None:
    clock = datetime(2026, 11, 21, 12, tzinfo=UTC)
    sent = clock - timedelta(minutes=3)
    raw = b'{"id": "q1", "question": "q?", "answer": "a."}'
    first = decode(raw, Interaction, now=clock, received_at=record_time(record(raw, sent.timestamp())))
    again = decode(raw, Interaction, now=clock, received_at=record_time(record(raw, sent.timestamp())))
    assert first.timestamp == again.timestamp == sent
    # the producer's own time wins
    stamped = b'{"id": "q1", "question": "q?", "answer": "a.", "timestamp": "2026-11-20T10:00:00Z"}'
    own = decode(stamped, Interaction, now=datetime(2026, 11, 21, tzinfo=UTC), received_at=sent)
    assert own.timestamp == datetime(2026, 11, 20, 10, tzinfo=UTC)


def test_a_record_time_that_is_missing_or_absurd_is_none() -> None:
    assert record_time(record(b"", None)) is None
    assert record_time(record(b"", -1)) is None  # Kafka's "no timestamp"
    assert record_time(record(b"", 1e20)) is None
    assert record_time(SimpleNamespace(value=b"")) is None
    assert record_time(record(b"", 1_700_000_000.5)) == datetime.fromtimestamp(1_700_000_000.5, UTC)


def test_the_record_time_is_still_checked_against_the_workers_clock() -> None:
    """A record time is not trusted more than a producer's timestamp: the event-time limits apply."""
    from schemas.errors import InvalidMessage

    raw = b'{"id": "q1", "question": "q?", "answer": "a."}'
    with pytest.raises(InvalidMessage, match="timestamp"):
        decode(
            raw,
            Interaction,
            now=datetime(2026, 11, 21, tzinfo=UTC),
            received_at=datetime(2001, 1, 1, tzinfo=UTC),
        )
