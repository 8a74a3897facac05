"""Shared fixtures: the fake OpenAI-compatible server (real HTTP on 127.0.0.1), and the fixtures package
(``tests/fixtures``: the ClickHouse ``store``, an alert receiver ``hook``, message builders)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pipeline.custom_evaluators import install_spec
from tests.fakes.openai_server import FakeOpenAIServer

# the shared helpers' asserts explain a failure as they did in the test modules they were moved from
pytest.register_assert_rewrite("tests.fixtures", "tests.browser.pages", "tests.contract.rag_recording")
pytest_plugins = ["tests.fixtures.store", "tests.fixtures.receivers"]


@pytest.fixture(autouse=True)
def _no_custom_metrics_left_behind() -> Iterator[None]:
    """The custom part of the metric catalogue is process-wide: a test that loads an evaluators file
    (directly or by starting an app) leaves no ``custom.*`` metric or label kind to the next."""
    yield
    install_spec(None)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A fresh fake server per test; tweak ``fake_openai.config`` / ``.faults``; read ``.stats``."""
    with FakeOpenAIServer() as server:
        yield server
