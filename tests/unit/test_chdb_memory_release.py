"""The embedded chDB hands the memory its allocator freed back to the OS, at most every
CHDB_PURGE_INTERVAL_S (streams.clickhouse.connection; docs/performance.md has the soak that measured it)."""

from __future__ import annotations

import time

from streams.clickhouse.connection import CHDB_PURGE_INTERVAL_S
from streams.clickhouse.store import ClickHouseStore
from tests.fixtures.store import store_settings


def test_the_embedded_engine_releases_freed_memory_at_most_every_interval() -> None:
    store = ClickHouseStore.open_sync(store_settings())
    try:
        opened = time.monotonic()
        assert not store.release_memory_if_due(now=opened)  # just opened: not due
        later = opened + CHDB_PURGE_INTERVAL_S + 1
        assert store.release_memory_if_due(now=later)  # the engine accepted SYSTEM JEMALLOC PURGE
        assert not store.release_memory_if_due(now=later + CHDB_PURGE_INTERVAL_S / 2)
        assert store.release_memory_if_due(now=later + CHDB_PURGE_INTERVAL_S)
        assert store.purges == 2
    finally:
        store.close()
