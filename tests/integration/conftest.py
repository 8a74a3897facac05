"""One Tansu broker per test session (real Kafka protocol on a free 127.0.0.1 port) and chDB paths."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from groundwatch.local.tansu import TansuBroker
from tests.integration.chdb import shared_chdb_path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with TansuBroker(log_path=log) as b:
        yield b


@pytest.fixture()
def chdb_path(tmp_path: Path) -> Path:
    """A chDB path for a worker subprocess (only that process may open it while it runs)."""
    return tmp_path / "chdb"


@pytest.fixture(scope="session")
def shared_chdb() -> Path:
    """The one chDB path the test process itself opens (databases keep tests apart)."""
    return shared_chdb_path()
