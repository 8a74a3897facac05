"""groundwatch erase over ClickHouse's HTTP interface (the production path), served from one chDB engine
by ``tests.chdb_http_server``: the same scenario as on chDB (tests/unit/test_erase.py), and the command
itself against the server's URL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from groundwatch.cli import main
from streams.clickhouse.store import ClickHouseStore
from tests.chdb_http_server import ChdbHttpServer
from tests.fixtures.erase import erase_scenario, fill, rows_of
from tests.settings_factory import make_settings


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[str]:
    with ChdbHttpServer(tmp_path / "chdb") as url:
        yield url


def test_erase_over_http(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = ClickHouseStore.open_sync(make_settings(clickhouse={"url": server + "/groundwatch"}).clickhouse)
    try:
        erase_scenario(store)
        fill(store)  # again, then the command: its one line names what went
        assert main(["erase", "--interaction", "k-1", "--clickhouse", server + "/groundwatch"]) == 0
        assert "erased interaction k-1: 1 interactions" in capsys.readouterr().out
        assert set(rows_of(store, ["k-1"]).values()) == {0}
    finally:
        store.close()
