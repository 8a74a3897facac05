"""The ClickHouse store on embedded chDB: versioned DDL, idempotent writes, batching, stale windows."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from pipeline.clock import ManualClock
from schemas.alert import Alert
from schemas.evaluation import Evaluation
from schemas.results import HypothesisResult, PairResult, StatementVerdict
from schemas.settings import ClickHouseSettings, WindowSettings
from streams.clickhouse.migrations import apply_migrations, ddl_dir
from streams.clickhouse.sink import EvaluationSink
from streams.clickhouse.store import ClickHouseStore
from streams.windows.aggregator import WindowStats
from streams.windows.closer import WindowCloser
from tests.fixtures.evaluations import NOW, T0, evaluation
from tests.fixtures.store import store_settings


@pytest.fixture()
def settings() -> ClickHouseSettings:
    return store_settings(batch_rows=3, batch_seconds=0.2, ttl_days=7)


@pytest.fixture()
def store(settings: ClickHouseSettings) -> Iterator[ClickHouseStore]:
    s = ClickHouseStore.open_sync(settings)
    yield s
    s.close()


def test_migrations_apply_once_and_set_ttl(store: ClickHouseStore) -> None:
    assert apply_migrations(store.client, store.db, ttl_days=30) == []  # already applied at open
    versions = store.query_sync(f"SELECT version FROM {store.db}.schema_migrations")
    shipped = sorted(int(f.name[:3]) for f in ddl_dir().glob("[0-9][0-9][0-9]_*.sql"))
    assert sorted(r["version"] for r in versions) == shipped and shipped[:3] == [1, 2, 3]
    ddl = store.client.command(f"SHOW CREATE TABLE {store.db}.evaluations")
    assert "TTL" in ddl and "toIntervalDay(30)" in ddl


def test_retention_of_zero_days_removes_the_ttl_and_keeps_every_row(store: ClickHouseStore) -> None:
    assert "TTL" in store.client.command(f"SHOW CREATE TABLE {store.db}.evaluations")  # 7 days at open
    for _ in range(2):  # removed, then nothing to remove: no error either time
        apply_migrations(store.client, store.db, ttl_days=0, aggregate_ttl_days=0)
        for table in ("evaluations", "window_aggregates", "conversations"):
            assert "TTL" not in store.client.command(f"SHOW CREATE TABLE {store.db}.{table}"), table
    long_ago = evaluation("old", at=datetime(2001, 1, 1, tzinfo=UTC))
    store.insert_evaluations_sync([long_ago])
    store.client.command(f"OPTIMIZE TABLE {store.db}.evaluations FINAL")
    assert store.query_sync(f"SELECT interaction_id FROM {store.db}.evaluations") == [
        {"interaction_id": "old"}
    ]
    apply_migrations(store.client, store.db, ttl_days=7)  # and back
    assert "toIntervalDay(7)" in store.client.command(f"SHOW CREATE TABLE {store.db}.evaluations")


async def test_replayed_evaluations_count_once_and_complete_wins(store: ClickHouseStore) -> None:
    await store.insert_evaluations([evaluation("x"), evaluation("y")])
    await store.insert_evaluations([evaluation("x", at=NOW + timedelta(seconds=1))])  # a replay
    late_incomplete = evaluation("y", complete=False, at=NOW + timedelta(minutes=5))
    await store.insert_evaluations([late_incomplete, evaluation("z", complete=False)])
    await store.insert_evaluations([evaluation("z", at=NOW - timedelta(minutes=1))])
    counts = await store.counts()
    assert counts["evaluations"] == 3 and counts["evaluation_statements"] == 3
    assert await store.has_complete("y") and await store.has_complete("z")
    rows = await store.rows_between("a", "m", T0, T0 + timedelta(seconds=1))
    assert sorted(r.interaction_id for r in rows) == ["x", "y", "z"] and all(r.complete for r in rows)


async def test_window_rewrite_replaces_and_alerts_dedupe(store: ClickHouseStore) -> None:
    first = WindowStats().result(window_start=T0, window_end=T0 + timedelta(minutes=1), app="a", model="m")
    await store.insert_window(first, NOW)
    second = first.model_copy(update={"count": 7})
    await store.insert_window(second, NOW + timedelta(seconds=1))
    windows = store.windows_sync()
    assert [w.count for w in windows] == [7]
    alert = Alert(
        alert_id="r|a|m|t", rule="r", metric="hallucination_rate", app="a", model="m", value=0.9,
        threshold=0.5, op=">", windows=1, interactions=10, window_start=T0, window_end=T0, message="m",
        fired_at=NOW,
    )  # fmt: skip
    await store.insert_alert(alert)
    await store.insert_alert(alert)
    assert len(store.alerts_sync()) == 1 and await store.alert_exists("r|a|m|t")
    assert await store.last_alert_end("r", "a", "m") == T0
    assert await store.last_alert_end("r", "a", "other") is None


async def test_stale_windows_are_those_written_after_their_aggregate(store: ClickHouseStore) -> None:
    # the rows' inserted_at and the windows' computed_at are both on the ClickHouse server's clock
    since = await store.server_now() - timedelta(hours=1)
    await store.insert_evaluations([evaluation("x")])
    stale = await store.stale_windows(60, since)
    assert stale == [("a", "m", T0)]
    agg = WindowStats().result(window_start=T0, window_end=T0 + timedelta(minutes=1), app="a", model="m")
    await store.insert_window(agg, await store.server_now() + timedelta(seconds=1))
    assert await store.stale_windows(60, since) == []


async def test_stale_windows_hold_with_the_workers_clock_a_year_off(store: ClickHouseStore) -> None:
    """A closer whose clock is a year ahead of the server's (or behind it) stamps its aggregate on the
    server's clock: the window it closed is not stale, and a row stored after it makes it stale again."""
    settings = WindowSettings(size_seconds=60)
    await store.insert_evaluations([evaluation("x")])
    for offset in (timedelta(days=365), -timedelta(days=365)):
        closer = WindowCloser(settings, store, clock=ManualClock(NOW + offset))
        assert await closer.reconcile(timedelta(hours=1)) == 1
        assert [w.window_start for w in await closer.close_due(final=True)] == [T0]
        again = WindowCloser(settings, store, clock=ManualClock(NOW + offset))
        assert await again.reconcile(timedelta(hours=1)) == 0
        await store.insert_evaluations([evaluation(f"late{offset.days}")])


async def test_sink_batches_by_size_and_age_and_acks_after_write(store: ClickHouseStore) -> None:
    written: list[str] = []
    flushed: list[int] = []

    async def on_flushed(rows: list[Evaluation], before: object) -> None:
        flushed.append(len(rows))

    clock = ManualClock()
    settings = ClickHouseSettings(batch_rows=3, batch_seconds=0.2)
    sink = EvaluationSink(settings, store, before_ack=on_flushed, clock=clock)
    for i in range(4):
        await sink.add(evaluation(f"e{i}"), functools.partial(written.append, f"e{i}"))
    assert written == ["e0", "e1", "e2"] and flushed == [3] and len(sink) == 1  # size flush
    clock.advance(0.19)
    assert not sink.due()
    await sink.flush_if_due()
    assert len(sink) == 1  # not old enough yet (0.2 s)
    clock.advance(0.01)
    assert sink.due()
    await sink.flush_if_due()
    assert written == ["e0", "e1", "e2", "e3"] and flushed == [3, 1]
    assert (await store.counts())["evaluations"] == 4


def with_statements(iid: str, n: int, at: datetime) -> Evaluation:
    e = evaluation(iid, at=at)
    hyp = HypothesisResult(
        hypothesis="h",
        score=1.0,
        statements=[StatementVerdict(statement=f"s{i}", verdict="entailed", score=1.0) for i in range(n)],
    )
    return e.model_copy(update={"pairs": [PairResult(pair="context_answer", score=1.0, hypotheses=[hyp])]})


async def test_a_re_evaluation_with_fewer_statements_leaves_no_stale_ones(store: ClickHouseStore) -> None:
    await store.insert_evaluations([with_statements("x", 3, NOW), with_statements("y", 2, NOW)])
    await store.insert_evaluations([with_statements("x", 1, NOW + timedelta(seconds=5))])  # re-evaluated
    assert (await store.counts())["evaluation_statements"] == 1 + 2
    rows = store.query_sync(
        f"SELECT statement FROM {store.db}.evaluation_statements_current "
        "WHERE interaction_id = {iid:String}",
        {"iid": "x"},
    )
    assert [r["statement"] for r in rows] == ["s0"]


async def test_call_latencies_are_stored_and_read_back(store: ClickHouseStore) -> None:
    from schemas.results import JudgeCall

    calls = [
        JudgeCall(stage="nli", judge="openai", model="m", latency_ms=120.0),
        JudgeCall(stage="nli", judge="openai", model="m", cached=True, attempts=0),
        JudgeCall(stage="refusal", judge="openai", model="m", latency_ms=80.0),
    ]
    await store.insert_evaluations([evaluation("x").model_copy(update={"calls": calls})])
    rows = await store.rows_between("a", "m", T0, T0 + timedelta(seconds=1))
    assert rows[0].call_latencies_ms == [120.0, 80.0]
    quantile = store.query_sync(
        f"SELECT quantileExactInclusive(0.5)(arrayJoin(call_latencies_ms)) AS p50 FROM {store.db}.evaluations"
    )
    assert quantile[0]["p50"] == 100.0


async def test_sink_dead_letters_the_row_clickhouse_keeps_rejecting(store: ClickHouseStore) -> None:
    rejected: list[tuple[str, str]] = []
    acked: list[str] = []

    async def on_rejected(e: Evaluation, exc: Exception) -> None:
        rejected.append((e.interaction_id, type(exc).__name__))

    settings = ClickHouseSettings(batch_rows=100, sink_max_failures=2)
    sink = EvaluationSink(settings, store, on_rejected=on_rejected)
    bad = evaluation("bad").model_copy(update={"input_tokens": -1})  # UInt64 column: never insertable
    for e in [evaluation("a"), evaluation("b"), bad, evaluation("c")]:
        await sink.add(e, functools.partial(acked.append, e.interaction_id))
    with pytest.raises(DatabaseError):
        await sink.flush()  # first failure: the batch stays buffered, unacked
    assert acked == [] and len(sink) == 4 and rejected == []
    assert await sink.flush() == 3  # second: split, the bad row dead-lettered, the others written
    assert rejected == [("bad", "DataError")] and sorted(acked) == ["a", "b", "bad", "c"]
    assert (await store.counts())["evaluations"] == 3 and len(sink) == 0 and sink.failures == 0


async def test_rows_derived_from_a_batch_are_written_before_its_acks(store: ClickHouseStore) -> None:
    """The sink's before_ack (end users' feedback labels, the touches) runs before the acks; when it
    fails, the batch stays buffered and unacked, and the next flush writes it again (harmlessly) with its
    derived rows."""
    acked: list[str] = []
    derived: list[list[str]] = []
    down = True

    async def before_ack(rows: list[Evaluation], before: object) -> None:
        assert acked == []  # nothing of this batch acked yet
        if down:
            raise ConnectionError("labels table unreachable")
        derived.append([e.interaction_id for e in rows])

    sink = EvaluationSink(ClickHouseSettings(batch_rows=100), store, before_ack=before_ack)
    for iid in ("a", "b"):
        await sink.add(evaluation(iid), functools.partial(acked.append, iid))
    with pytest.raises(ConnectionError):
        await sink.flush()
    assert acked == [] and len(sink) == 2 and sink.failures == 0  # not counted as a rejected insert
    down = False
    assert await sink.flush() == 2
    assert acked == ["a", "b"] and derived == [["a", "b"]]
    assert (await store.counts())["evaluations"] == 2  # written twice, stored once


async def test_has_complete_asks_about_one_row_when_told_where(store: ClickHouseStore) -> None:
    """The same interaction id of another app, model or day is another row (migration 011): a complete
    row of app "a" yesterday says nothing about app "b" today."""
    stored = evaluation("same", at=NOW - timedelta(days=1))
    await store.insert_evaluations([stored])
    assert await store.has_complete("same")
    assert await store.has_complete("same", (stored.app, stored.model, stored.timestamp))
    assert not await store.has_complete("same", ("b", stored.model, stored.timestamp))
    assert not await store.has_complete("same", (stored.app, stored.model, NOW))


async def test_a_split_cut_short_by_an_outage_keeps_the_rows_it_already_dead_lettered_out(
    store: ClickHouseStore,
) -> None:
    """The batch is split after repeated failures; the bad row is dead-lettered and acked; then ClickHouse
    stops answering. The rows go back to the buffer without the one already dead-lettered, so it is
    neither rejected nor acked twice."""
    rejected: list[str] = []
    acked: list[str] = []
    down = False

    async def on_rejected(e: Evaluation, exc: Exception) -> None:
        nonlocal down
        rejected.append(e.interaction_id)
        down = True  # the outage begins right after

    real_insert, real_ping = store.insert_evaluations, store.ping

    async def insert(rows: Sequence[Evaluation]) -> None:
        if down:
            raise ConnectionError("clickhouse gone")
        await real_insert(rows)

    async def ping() -> bool:
        return not down and await real_ping()

    store.insert_evaluations = insert  # type: ignore[method-assign, assignment]
    store.ping = ping  # type: ignore[method-assign]
    sink = EvaluationSink(
        ClickHouseSettings(batch_rows=100, sink_max_failures=1), store, on_rejected=on_rejected
    )
    bad = evaluation("bad").model_copy(update={"input_tokens": -1})  # never insertable
    for e in [bad, evaluation("a"), evaluation("b")]:
        await sink.add(e, functools.partial(acked.append, e.interaction_id))
    with pytest.raises(ConnectionError):
        await sink.flush()
    assert rejected == ["bad"] and acked == ["bad"] and len(sink) == 2
    down = False
    assert await sink.flush() == 2
    assert rejected == ["bad"] and sorted(acked) == ["a", "b", "bad"]
