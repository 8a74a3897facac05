"""The store over ClickHouse's HTTP interface (the production path: clickhouse-connect's HTTP client),
served from one chDB engine by ``tests.chdb_http_server`` in a child process, so two stores (two
workers) share it: migrations, writes and reads, the delivery ledger's first-claim-wins, errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from schemas.window import WindowAggregate
from streams.clickhouse.client import error_code, is_unavailable
from streams.clickhouse.leases import Claim, DeliveryLedger
from streams.clickhouse.store import ClickHouseStore
from tests.chdb_http_server import ChdbHttpServer
from tests.settings_factory import make_settings

START = datetime(2026, 11, 1, 10, tzinfo=UTC)


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[str]:
    with ChdbHttpServer(tmp_path / "chdb") as url:
        yield url


def open_store(url: str) -> ClickHouseStore:
    return ClickHouseStore.open_sync(make_settings(clickhouse={"url": url + "/groundwatch"}).clickhouse)


def window(hallucinations: int) -> WindowAggregate:
    return WindowAggregate(
        window_start=START, window_end=START + timedelta(hours=1), app="wiki-qa", model="beta", count=50,
        mean_context_entailment=0.8, mean_ground_truth_entails_answer=None,
        mean_answer_entails_ground_truth=None, answered=50, hallucinations=hallucinations,
        hallucination_rate=hallucinations / 50, answer_refusal_rate=0.0, ground_truth_refusal_rate=None,
        input_tokens=0, output_tokens=0, cost_usd=0.0, judge_latency_p50_ms=None,
        judge_latency_p95_ms=None, incomplete=0, answer_refusal_known=50, context_scored=50,
    )  # fmt: skip


def test_two_stores_share_one_clickhouse_over_http(server: str) -> None:
    first, second = open_store(server), open_store(server)  # the second finds the migrations applied
    try:
        assert first.describe().startswith("http://127.0.0.1:")
        asyncio.run(first.insert_window(window(5), datetime.now(UTC)))
        asyncio.run(second.insert_window(window(7), datetime.now(UTC) + timedelta(seconds=1)))  # replaces
        [stored] = first.windows_sync()
        assert (stored.app, stored.hallucinations, stored.count) == ("wiki-qa", 7, 50)
        assert first.ping_sync() and second.counts_sync()["window_aggregates"] == 1
    finally:
        first.close()
        second.close()


def test_the_first_claim_wins_across_stores(server: str) -> None:
    stores = [open_store(server), open_store(server)]
    now = datetime.now(UTC)

    async def claim(store: ClickHouseStore, who: str) -> bool:
        return await DeliveryLedger(store).claim(Claim("a|am", "a", "am", now), who)

    try:
        assert asyncio.run(claim(stores[0], "worker-a")) is True
        assert asyncio.run(claim(stores[1], "worker-b")) is False  # one claim came first: the other's
        assert asyncio.run(claim(stores[1], "worker-c")) is False
        claimants = sorted(d["claimant"] for d in DeliveryLedger(stores[1]).deliveries_sync())
        assert claimants == ["worker-a", "worker-b", "worker-c"]
    finally:
        for store in stores:
            store.close()


def test_errors_carry_clickhouse_codes_over_http(server: str) -> None:
    store = open_store(server)
    try:
        with pytest.raises(DatabaseError) as missing:
            store.query_sync("SELECT * FROM groundwatch.no_such_table")
        assert error_code(missing.value) == 60 and is_unavailable(missing.value)  # every row would fail
        with pytest.raises(DatabaseError) as refused:
            store.query_sync("SELECT toUInt8('not a number')")
        assert error_code(refused.value) == 6 and not is_unavailable(refused.value)  # the value is wrong
    finally:
        store.close()


def test_a_large_insert_arrives_whole(server: str) -> None:
    """clickhouse-connect sends a large insert as several compressed blocks: every row lands."""
    store = open_store(server)
    try:
        table = "CREATE TABLE groundwatch.big (n UInt32, s String) ENGINE = MergeTree ORDER BY n"
        store.client.command(table)
        rows = [[i, f"{i:08d}" * 250] for i in range(4000)]  # 2 KB a row, 8 MB in all
        store.client.insert("groundwatch.big", rows, column_names=["n", "s"])
        [[count, total]] = store.client.query("SELECT count(), sum(n) FROM groundwatch.big").result_rows
        assert (count, total) == (4000, sum(range(4000)))
    finally:
        store.close()


def test_a_read_under_way_never_holds_up_the_writes_on_a_server(server: str) -> None:
    """Over HTTP the reads have a client and a lock of their own: with a read holding its lock (a slow
    dashboard query), the sink's insert goes through; chDB in one process has one of each."""
    import threading

    store = open_store(server)
    try:
        assert store.reader is not store.client and store._read_lock is not store._lock
        inserted = threading.Event()
        with store._read_lock:  # a read under way
            writer = threading.Thread(
                target=lambda: (
                    asyncio.run(store.insert_window(window(3), datetime.now(UTC))),
                    inserted.set(),
                )
            )
            writer.start()
            writer.join(timeout=60)
            assert inserted.is_set()  # (with one lock for both it would wait for the read to end)
        [stored] = store.windows_sync()
        assert stored.hallucinations == 3
    finally:
        store.close()
    from tests.fixtures.store import store_settings

    embedded = ClickHouseStore.open_sync(store_settings())
    try:
        assert embedded.reader is embedded.client and embedded._read_lock is embedded._lock
    finally:
        embedded.close()
