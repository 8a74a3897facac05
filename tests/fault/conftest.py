"""Fault-injection tests on the real Tansu broker and chDB (a whole LocalStack each): bad input of every
kind, a second worker on a held chDB path. Marked ``fault``: ``pytest -m fault``."""

from __future__ import annotations

import pytest

from tests.system_parts import mark_directory


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_directory(items, "fault", pytest.mark.fault)
