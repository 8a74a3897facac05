"""Fault-injection tests on the real Tansu broker and chDB (a whole LocalStack each): bad input of every
kind, a second worker on a held chDB path. Marked ``fault``: ``pytest -m fault``."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/fault/" in str(item.fspath):
            item.add_marker(pytest.mark.fault)
