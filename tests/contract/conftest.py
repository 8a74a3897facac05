"""Contract tests: the real OpenTelemetry instrumentations of the OpenAI client (the ``otel-contract``
extra, which ``make dev`` installs; OpenLLMetry 0.54 beside 0.62 in a directory of its own) and the agent
frameworks with theirs (two venvs ``make dev`` builds, openai 2.x and 3.x: ``agents_python``) against
``groundwatch otlp`` and a worker. Without the packages they skip, except under CI=true, where they fail."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.system_parts import mark_directory, missing_part


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_directory(items, "contract", pytest.mark.contract)


def need(what: str, ok: bool) -> None:
    if not ok:
        missing_part(f"{what} is not installed (make dev installs it)")


def openllmetry_054() -> Path:
    """Where ``make dev`` installs OpenLLMetry 0.54 (it cannot share site-packages with 0.62)."""
    import sys

    return Path(os.environ.get("OPENLLMETRY_054_PATH") or Path(sys.prefix) / "openllmetry-0.54")


def agents_python(environment: str) -> Path:
    """The interpreter of an agent framework environment ``make dev`` builds: ``openai2`` (openai 2.x:
    openai-v2, the OpenAI client's and LangChain's instrumentations, LangGraph) or ``openai3`` (openai 3.x:
    openai-agents, Pydantic AI and their instrumentations)."""
    import sys

    where = os.environ.get(f"AGENTS_{environment.upper()}_PATH")
    return Path(where or Path(sys.prefix) / f"agents-{environment}") / "bin" / "python"
